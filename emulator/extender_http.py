"""The HTTP transport for scheduler extenders (:mod:`emulator.scheduler.extender`), over httpx.

It lives outside ``emulator.scheduler`` on purpose: the scheduling framework
is pure (an import-linter contract keeps HTTP clients out of it), so whoever
assembles a scheduler -- the scheduler actor, a CLI, a test -- builds the
transport here and hands it to ``HTTPExtender``::

    from emulator.extender_http import HttpxTransport
    from emulator.scheduler.extender import ExtenderConfig, HTTPExtender

    extender = HTTPExtender(ExtenderConfig.from_dict(cfg), HttpxTransport())

One synchronous ``httpx.Client`` per transport keeps connections alive
across cycles (an extender is called every cycle). TLS: ``verify`` is passed
to httpx (a CA bundle path, an ``ssl.SSLContext`` or False); client
certificates through ``cert`` -- the parts of upstream's ``tlsConfig`` kemu
supports.
"""

from __future__ import annotations

from typing import Any

import httpx

__all__ = ["HttpxTransport"]


class HttpxTransport:
    """``Transport.post`` over a pooled ``httpx.Client``."""

    def __init__(self, *, verify: Any = True, cert: Any = None, client: httpx.Client | None = None) -> None:
        self._client = client if client is not None else httpx.Client(verify=verify, cert=cert)

    def post(self, url: str, body: bytes, timeout: float) -> tuple[int, bytes]:
        response = self._client.post(url, content=body, headers={"Content-Type": "application/json"},
                                     timeout=timeout)
        return response.status_code, response.content

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> HttpxTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
