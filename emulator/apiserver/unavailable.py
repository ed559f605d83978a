"""503 Service Unavailable while the store cannot be reached (Redis restarting).

Upstream's ``apimachinery/pkg/api/errors.NewServiceUnavailable`` is a ``Status``
with code 503 and reason ``ServiceUnavailable``; a ``Retry-After`` header tells
clients when to come back (client-go's ``rest`` client honours it for 503 as
for 429 and retries the request). kemu answers that, never a 500, once the
store client's own retries (:meth:`emulator.store.store.StoreConfig.retry`) are
spent: the request is well-formed and will succeed when Redis is back, which
``kemu up``'s supervisor makes a matter of about a second.

:class:`StoreUnavailableMiddleware` wraps the whole application (the token
lookup of authentication reads Redis too) and turns a store error that escapes
a handler into that answer if no byte of the response has been sent yet.
:func:`part_checks` are ``/readyz``'s checks of the ``kemu up`` processes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from emulator.api import errors
from emulator.store.store import UNAVAILABLE

# Seconds a client should wait: the supervisor restarts Redis within about one.
RETRY_AFTER_SECONDS = 1


def store_unavailable(cause: BaseException | None = None) -> errors.StatusError:
    why = f": {cause}" if cause is not None and str(cause) else ""
    return errors.StatusError(503, "ServiceUnavailable", f"the storage backend is unavailable{why}; retry later",
                              retry_after_seconds=RETRY_AFTER_SECONDS)


class StoreUnavailableMiddleware:
    """ASGI middleware: a store error before the response started becomes 503 + Retry-After."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: dict[str, Any]) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except UNAVAILABLE as e:
            if started:
                raise  # a stream was already under way: the connection ends, the client re-requests
            err = store_unavailable(e)
            await send({"type": "http.response.start", "status": err.code,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"retry-after", str(RETRY_AFTER_SECONDS).encode())]})
            await send({"type": "http.response.body", "body": orjson.dumps(err.to_status())})


def part_checks() -> list[tuple[str, str | None]]:
    """``/readyz`` checks for the processes of the ``kemu up`` this server belongs to (its records, named by
    ``$KEMU_APISERVER_RECORDS``): ("process/NAME", None when it runs, else why not), restarts included."""
    from emulator.apiserver.process import RECORDS_ENV
    from emulator.processes import ProcessTable

    home = os.environ.get(RECORDS_ENV)
    if not home:
        return []
    out: list[tuple[str, str | None]] = []
    for rec in ProcessTable(Path(home)).records():
        state = rec.state()
        restarts = f", {rec.restarts} restart(s)" if rec.restarts else ""
        if state == "running":
            out.append((f"process/{rec.name} (pid {rec.pid}{restarts})", None))
        else:
            out.append((f"process/{rec.name}", f"{state} (pid {rec.pid}{restarts}); restarting"))
    return out
