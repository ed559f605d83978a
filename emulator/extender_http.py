"""The HTTP transport for scheduler extenders (:mod:`emulator.scheduler.extender`): h11 over kept-alive sockets.

It lives outside ``emulator.scheduler`` on purpose: the scheduling framework
is pure (an import-linter contract keeps HTTP clients out of it), so whoever
assembles a scheduler -- the scheduler actor, a CLI, a test -- builds the
transport here and hands it to ``HTTPExtender``::

    from emulator.extender_http import HTTPTransport
    from emulator.scheduler.extender import ExtenderConfig, HTTPExtender

    extender = HTTPExtender(ExtenderConfig.from_dict(cfg), HTTPTransport())

An extender is called twice every scheduling cycle, so the client's own cost
per call matters. HTTP/1.1 framing and parsing are h11's (python-hyper's
sans-I/O protocol library: Content-Length, chunked, 1xx answers, HTTP/1.0,
``Connection: close``, a body read to the end of the stream); the socket I/O
is kemu's: one keep-alive socket per thread and host with ``TCP_NODELAY``,
each request (line, headers and body) out in one ``sendall``, the h11
connection state reused from one request to the next (``start_next_cycle``).
``http.client`` built header objects through the ``email`` package on every
answer, which cost more than the rest of an extender call. When h11 says the
connection cannot be reused (HTTP/1.0, ``Connection: close``, no length) the
socket is closed after the answer; a kept-alive connection the server has
closed meanwhile is reopened once, as pooled clients do. TLS: ``verify`` (a
CA bundle path, an ``ssl.SSLContext`` or False) and ``cert`` (a client
certificate file, or a (certificate, key) pair) -- the parts of upstream's
``tlsConfig`` kemu supports.
"""

from __future__ import annotations

import socket
import ssl
import threading
from typing import Any
from urllib.parse import urlsplit

import h11

__all__ = ["HTTPTransport"]

# A reused connection the server closed shows up as one of these on the next request (or as no answer at all).
_STALE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
_MAX_HEAD = 65536  # bytes of status line and headers we accept
_RECV = 262144  # bytes per recv: an answer for 500 nodes comes in one
_CONTENT_TYPE = (b"Content-Type", b"application/json")


class _Closed(Exception):
    """The server closed the connection before any byte of the answer."""


class _Connection:
    """One socket to one host and h11's state of the HTTP/1.1 connection over it."""

    def __init__(self, scheme: str, netloc: str, context: ssl.SSLContext | None) -> None:
        parts = urlsplit(f"//{netloc}")
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if scheme == "https" else 80)
        self.scheme, self.netloc = scheme, netloc
        self.host_header = (b"Host", netloc.encode("ascii"))
        self.context = context
        self.sock: socket.socket | None = None
        self.http: h11.Connection | None = None
        self.timeout = 0.0

    def open(self, timeout: float) -> tuple[socket.socket, h11.Connection]:
        sock = socket.create_connection((self.host, self.port), timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.context is not None:
            sock = self.context.wrap_socket(sock, server_hostname=self.host)
        self.sock, self.timeout = sock, timeout
        self.http = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD)
        return sock, self.http

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = self.http = None

    def exchange(self, sock: socket.socket, http: h11.Connection, target: bytes, body: bytes) -> tuple[int, bytes]:
        """Send one request, read one answer: (status, body)."""
        head = http.send(h11.Request(method=b"POST", target=target, headers=[
            self.host_header, _CONTENT_TYPE, (b"Content-Length", b"%d" % len(body))]))
        http.send(h11.Data(data=body))
        http.send(h11.EndOfMessage())  # b"": Content-Length framing has no trailer
        sock.sendall(head + body)
        # Nothing of the answer can have come yet: read before asking h11 for an event (it would say NEED_DATA).
        data = sock.recv(_RECV)
        if not data:
            raise _Closed()
        http.receive_data(data)
        status, parts, ended = 0, [], False
        while True:
            event = http.next_event()
            kind = type(event)
            if kind is h11.Data:
                parts.append(event.data)  # type: ignore[union-attr]
            elif event is h11.NEED_DATA:
                data = sock.recv(_RECV)
                ended = not data  # the end of the stream, which ends a body without a length
                http.receive_data(data)
            elif kind is h11.Response:
                status = event.status_code  # type: ignore[union-attr]
            elif kind is h11.EndOfMessage:
                break
            # h11.InformationalResponse (100 Continue) precedes the real answer: nothing to do
        if http.our_state is h11.DONE and http.their_state is h11.DONE and not ended:
            http.start_next_cycle()
        else:  # HTTP/1.0 or Connection: close (h11 says MUST_CLOSE), or a body read to the end of the stream
            self.close()
        return status, b"".join(parts)


class HTTPTransport:
    """``Transport.post`` over a socket per calling thread and host, kept alive between calls."""

    def __init__(self, *, verify: Any = True, cert: Any = None) -> None:
        self._verify = verify
        self._cert = cert
        self._ssl: ssl.SSLContext | None = None
        self._local = threading.local()
        self._lock = threading.Lock()
        self._opened: list[_Connection] = []

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

    def _connection(self, url: str) -> tuple[_Connection, bytes]:
        """This thread's connection to the URL's host, and the request target; kept per thread and URL (an
        extender has a URL per verb)."""
        connections: dict[str, tuple[_Connection, bytes]] | None = getattr(self._local, "conns", None)
        if connections is None:
            connections = self._local.conns = {}
        found = connections.get(url)
        if found is not None:
            return found
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"unsupported URL scheme {parts.scheme!r} in {url!r}")
        target = ((parts.path or "/") + (f"?{parts.query}" if parts.query else "")).encode("ascii")
        conn = next((c for c, _ in connections.values() if (c.scheme, c.netloc) == (parts.scheme, parts.netloc)),
                    None)
        if conn is None:
            conn = _Connection(parts.scheme, parts.netloc, self._context() if parts.scheme == "https" else None)
            with self._lock:
                self._opened.append(conn)
        connections[url] = (conn, target)
        return conn, target

    def post(self, url: str, body: bytes, timeout: float) -> tuple[int, bytes]:
        conn, target = self._connection(url)
        for attempt in range(2):
            sock, http = conn.sock, conn.http
            reused = sock is not None
            try:
                if sock is None or http is None:
                    sock, http = conn.open(timeout)
                elif conn.timeout != timeout:  # settimeout is a system call: only when it changes
                    sock.settimeout(timeout)
                    conn.timeout = timeout
                return conn.exchange(sock, http, target, body)
            except (_Closed, *_STALE) as exc:
                conn.close()
                if attempt or not reused:
                    if isinstance(exc, _Closed):
                        raise ConnectionResetError("the extender closed the connection without answering") from None
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
