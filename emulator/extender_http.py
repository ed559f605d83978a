"""The HTTP transport for scheduler extenders (:mod:`emulator.scheduler.extender`): httptools over kept-alive sockets.

It lives outside ``emulator.scheduler`` on purpose: the scheduling framework
is pure (an import-linter contract keeps HTTP clients out of it), so whoever
assembles a scheduler -- the scheduler actor, a CLI, a test -- builds the
transport here and hands it to ``HTTPExtender``::

    from emulator.extender_http import HTTPTransport
    from emulator.scheduler.extender import ExtenderConfig, HTTPExtender

    extender = HTTPExtender(ExtenderConfig.from_dict(cfg), HTTPTransport())

An extender is called twice every scheduling cycle, so the client's own cost
per call matters. Answers are parsed by httptools (the bindings of llhttp,
Node.js's C HTTP/1.1 parser, kept by the uvloop/uvicorn maintainers):
Content-Length, chunked, 1xx answers, HTTP/1.0, ``Connection: close``, and
whether the connection may be reused (``should_keep_alive``); kemu collects
the status and body from its callbacks and ends a body that has no length at
the end of the stream (llhttp waits for it). Writing the request is a few
header lines and stays kemu's, as does the socket I/O: one keep-alive socket
per thread and host with ``TCP_NODELAY``, each request (line, headers and
body) out in one ``sendall``, the parser reused from one answer to the next.
``http.client`` built header objects through the ``email`` package on every
answer, and h11's pure-Python state machine cost ~0.1 ms a call. When the
parser says the connection cannot be reused the socket is closed after the
answer; a kept-alive connection the server has closed meanwhile is reopened
once, as pooled clients do. TLS: ``verify`` (a CA bundle path, an
``ssl.SSLContext`` or False) and ``cert`` (a client certificate file, or a
(certificate, key) pair) -- the parts of upstream's ``tlsConfig`` kemu
supports.
"""

from __future__ import annotations

import socket
import ssl
import threading
from typing import Any
from urllib.parse import urlsplit

import httptools

__all__ = ["HTTPTransport"]

# A reused connection the server closed shows up as one of these on the next request (or as no answer at all).
_STALE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
_MAX_HEAD = 65536  # bytes of status line and headers we accept
_RECV = 262144  # bytes per recv: an answer for 500 nodes comes in one
_FRAMING = (b"content-length", b"transfer-encoding")


class _Closed(Exception):
    """The server closed the connection before any byte of the answer."""


class _Answer:
    """httptools' callbacks for one connection's answers: the status and body of the one being read."""

    __slots__ = ("done", "framed", "head", "keep_alive", "parser", "parts", "status")

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        self.reset()

    def reset(self) -> None:
        self.status = 0
        self.parts: list[bytes] = []
        self.head = True  # still in the status line and headers
        self.framed = False  # Content-Length or Transfer-Encoding said where the body ends
        self.done = self.keep_alive = False

    def on_header(self, name: bytes, _value: bytes) -> None:
        if name.lower() in _FRAMING:
            self.framed = True

    def on_headers_complete(self) -> None:
        self.head = False

    def on_body(self, body: bytes) -> None:
        self.parts.append(body)

    def on_message_complete(self) -> None:
        status = self.parser.get_status_code()
        if status < 200:  # 100 Continue (or another 1xx) precedes the real answer
            self.reset()
            return
        self.status, self.done, self.keep_alive = status, True, self.parser.should_keep_alive()


class _Connection:
    """One socket to one host and the parser of the answers that come over it."""

    def __init__(self, scheme: str, netloc: str, context: ssl.SSLContext | None) -> None:
        parts = urlsplit(f"//{netloc}")
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if scheme == "https" else 80)
        self.scheme, self.netloc = scheme, netloc
        self.head = b"Host: " + netloc.encode("ascii") + b"\r\nContent-Type: application/json\r\nContent-Length: "
        self.context = context
        self.sock: socket.socket | None = None
        self.answer: _Answer | None = None
        self.timeout = 0.0

    def open(self, timeout: float) -> tuple[socket.socket, _Answer]:
        sock = socket.create_connection((self.host, self.port), timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.context is not None:
            sock = self.context.wrap_socket(sock, server_hostname=self.host)
        self.sock, self.timeout = sock, timeout
        self.answer = _Answer()
        return sock, self.answer

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock = self.answer = None

    def exchange(self, sock: socket.socket, answer: _Answer, target: bytes, body: bytes) -> tuple[int, bytes]:
        """Send one request, read one answer: (status, body)."""
        sock.sendall(b"POST %s HTTP/1.1\r\n%s%d\r\n\r\n%s" % (target, self.head, len(body), body))
        answer.reset()
        data = sock.recv(_RECV)
        if not data:
            raise _Closed()
        read = 0
        while True:
            answer.parser.feed_data(data)
            if answer.done:
                break
            read += len(data)
            if answer.head and read > _MAX_HEAD:
                raise ValueError(f"the extender's answer has more than {_MAX_HEAD} bytes of status line and headers")
            data = sock.recv(_RECV)
            if not data:  # the end of the stream ends a body without a length (llhttp would wait for more)
                if answer.head or answer.framed:
                    raise ConnectionError("the extender closed the connection in the middle of its answer")
                answer.status, answer.keep_alive = answer.parser.get_status_code(), False
                break
        if not answer.keep_alive:  # HTTP/1.0, Connection: close, or a body read to the end of the stream
            self.close()
        return answer.status, b"".join(answer.parts)


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
            sock, answer = conn.sock, conn.answer
            reused = sock is not None
            try:
                if sock is None or answer is None:
                    sock, answer = conn.open(timeout)
                elif conn.timeout != timeout:  # settimeout is a system call: only when it changes
                    sock.settimeout(timeout)
                    conn.timeout = timeout
                return conn.exchange(sock, answer, target, body)
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
