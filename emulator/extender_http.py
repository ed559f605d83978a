"""The HTTP transport for scheduler extenders (:mod:`emulator.scheduler.extender`), over the standard library.

It lives outside ``emulator.scheduler`` on purpose: the scheduling framework
is pure (an import-linter contract keeps HTTP clients out of it), so whoever
assembles a scheduler -- the scheduler actor, a CLI, a test -- builds the
transport here and hands it to ``HTTPExtender``::

    from emulator.extender_http import HTTPTransport
    from emulator.scheduler.extender import ExtenderConfig, HTTPExtender

    extender = HTTPExtender(ExtenderConfig.from_dict(cfg), HTTPTransport())

An extender is called twice every scheduling cycle, so the client's own cost
per call matters: ``http.client`` with one keep-alive connection per thread
and host sends headers and body in one write and parses the answer in C
where it can -- about a third of the CPU time of an ``httpx.Client`` call
(no request, URL and header objects per call). A kept-alive connection the
server has closed meanwhile is reopened once, as pooled clients do. TLS:
``verify`` (a CA bundle path, an ``ssl.SSLContext`` or False) and ``cert``
(a client certificate file, or a (certificate, key) pair) -- the parts of
upstream's ``tlsConfig`` kemu supports.
"""

from __future__ import annotations

import http.client
import ssl
import threading
from typing import Any
from urllib.parse import urlsplit

__all__ = ["HTTPTransport"]

# A reused connection the server closed shows up as one of these on the next request.
_STALE = (http.client.RemoteDisconnected, http.client.CannotSendRequest, BrokenPipeError, ConnectionResetError)


class HTTPTransport:
    """``Transport.post`` over ``http.client``: one keep-alive connection per calling thread and host."""

    def __init__(self, *, verify: Any = True, cert: Any = None) -> None:
        self._verify = verify
        self._cert = cert
        self._ssl: ssl.SSLContext | None = None
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened: list[http.client.HTTPConnection] = []

    def _context(self) -> ssl.SSLContext:
        if self._ssl is None:
            if isinstance(self._verify, ssl.SSLContext):
                ctx = self._verify
            else:
                ctx = ssl.create_default_context(cafile=self._verify if isinstance(self._verify, str) else None)
                if self._verify is False:
                    ctx.check_hostname = False
                    ctx.verify_mode = ssl.CERT_NONE
            if self._cert:
                certfile, keyfile = (self._cert, None) if isinstance(self._cert, str) else tuple(self._cert)[:2]
                ctx.load_cert_chain(certfile, keyfile)
            self._ssl = ctx
        return self._ssl

    def _connection(self, scheme: str, netloc: str, timeout: float) -> http.client.HTTPConnection:
        connections: dict[tuple[str, str], http.client.HTTPConnection] | None = getattr(self._local, "conns", None)
        if connections is None:
            connections = self._local.conns = {}
        conn = connections.get((scheme, netloc))
        if conn is None:
            if scheme == "https":
                conn = http.client.HTTPSConnection(netloc, timeout=timeout, context=self._context())
            else:
                conn = http.client.HTTPConnection(netloc, timeout=timeout)
            connections[(scheme, netloc)] = conn
            with self._lock:
                self._opened.append(conn)
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def post(self, url: str, body: bytes, timeout: float) -> tuple[int, bytes]:
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn = self._connection(parts.scheme, parts.netloc, timeout)
        for attempt in range(2):
            reused = conn.sock is not None
            try:
                conn.request("POST", target, body=body, headers={"Content-Type": "application/json"})
                response = conn.getresponse()
                return response.status, response.read()
            except _STALE:
                conn.close()
                if attempt or not reused:
                    raise
            except BaseException:
                conn.close()  # a half-read answer must not be read as the next call's
                raise
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            opened, self._opened = self._opened, []
        for conn in opened:
            conn.close()

    def __enter__(self) -> HTTPTransport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
