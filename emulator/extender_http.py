"""The HTTP transport for scheduler extenders (:mod:`emulator.scheduler.extender`), over the standard library.

It lives outside ``emulator.scheduler`` on purpose: the scheduling framework
is pure (an import-linter contract keeps HTTP clients out of it), so whoever
assembles a scheduler -- the scheduler actor, a CLI, a test -- builds the
transport here and hands it to ``HTTPExtender``::

    from emulator.extender_http import HTTPTransport
    from emulator.scheduler.extender import ExtenderConfig, HTTPExtender

    extender = HTTPExtender(ExtenderConfig.from_dict(cfg), HTTPTransport())

An extender is called twice every scheduling cycle, so the client's own cost
per call matters. This is a small HTTP/1.1 client over one keep-alive socket
per thread and host: the request line, headers and body go out in one
``sendall``; the answer is read with a few ``recv`` calls and only the
headers the protocol needs are looked at (``Content-Length``,
``Transfer-Encoding: chunked``, ``Connection``) -- ``http.client`` builds
header objects through the ``email`` package on every answer, which cost
more than the rest of an extender call. An HTTP/1.0 answer, or one saying
``Connection: close``, closes the socket afterwards; an answer with neither a
length nor chunks is read to the end of the stream. A kept-alive connection
the server has closed meanwhile is reopened once, as pooled clients do. TLS:
``verify`` (a CA bundle path, an ``ssl.SSLContext`` or False) and ``cert``
(a client certificate file, or a (certificate, key) pair) -- the parts of
upstream's ``tlsConfig`` kemu supports.
"""

from __future__ import annotations

import socket
import ssl
import threading
from typing import Any
from urllib.parse import urlsplit

__all__ = ["HTTPTransport"]

# A reused connection the server closed shows up as one of these on the next request (or as no answer at all).
_STALE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError)
_MAX_HEAD = 65536  # bytes of status line and headers we accept


class _Closed(Exception):
    """The server closed the connection before any byte of the answer."""


class _Connection:
    """One socket to one host, and the bytes already received beyond the last answer."""

    def __init__(self, scheme: str, netloc: str, context: ssl.SSLContext | None) -> None:
        parts = urlsplit(f"//{netloc}")
        self.host = parts.hostname or "localhost"
        self.port = parts.port or (443 if scheme == "https" else 80)
        self.netloc = netloc
        self.context = context
        self.sock: socket.socket | None = None
        self.buffer = b""

    def open(self, timeout: float) -> socket.socket:
        sock = socket.create_connection((self.host, self.port), timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.context is not None:
            sock = self.context.wrap_socket(sock, server_hostname=self.host)
        self.sock, self.buffer = sock, b""
        return sock

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            finally:
                self.sock, self.buffer = None, b""

    def _recv(self, sock: socket.socket) -> bytes:
        data = sock.recv(262144)
        if not data:
            raise ConnectionResetError("the extender closed the connection mid-answer")
        return data

    def exchange(self, sock: socket.socket, request: bytes) -> tuple[int, bytes]:
        """Send one request, read one answer: (status, body)."""
        sock.sendall(request)
        data = self.buffer
        self.buffer = b""
        while True:  # 1xx answers (100 Continue) precede the real one
            head_end = data.find(b"\r\n\r\n")
            while head_end < 0:
                chunk = sock.recv(262144)
                if not chunk:
                    if not data:
                        raise _Closed()
                    raise ConnectionResetError("the extender closed the connection mid-answer")
                data += chunk
                if len(data) > _MAX_HEAD and data.find(b"\r\n\r\n") < 0:
                    raise ValueError("the extender's answer headers are too long")
                head_end = data.find(b"\r\n\r\n")
            lines = data[:head_end].decode("latin-1").split("\r\n")
            data = data[head_end + 4:]
            version, _, rest = lines[0].partition(" ")
            try:
                status = int(rest[:3])
            except ValueError:
                raise ValueError(f"malformed status line from the extender: {lines[0]!r}") from None
            if 100 <= status < 200:
                continue
            break
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        connection = headers.get("connection", "").lower()
        close = connection == "close" or (version == "HTTP/1.0" and connection != "keep-alive")
        if "chunked" in headers.get("transfer-encoding", "").lower():
            body, data = self._chunked(sock, data)
        elif "content-length" in headers:
            length = int(headers["content-length"])
            while len(data) < length:
                data += self._recv(sock)
            body, data = data[:length], data[length:]
        else:  # no length: the body runs to the end of the stream
            parts = [data]
            while chunk := sock.recv(262144):
                parts.append(chunk)
            body, data, close = b"".join(parts), b"", True
        if close:
            self.close()
        else:
            self.buffer = data
        return status, body

    def _chunked(self, sock: socket.socket, data: bytes) -> tuple[bytes, bytes]:
        parts: list[bytes] = []
        while True:
            while (end := data.find(b"\r\n")) < 0:
                data += self._recv(sock)
            size = int(data[:end].split(b";", 1)[0].strip() or b"0", 16)
            data = data[end + 2:]
            if size == 0:  # the last chunk; then optional trailers up to an empty line
                while (end := data.find(b"\r\n")) != 0:
                    if end < 0:
                        data += self._recv(sock)
                    else:
                        data = data[end + 2:]
                return b"".join(parts), data[2:]
            while len(data) < size + 2:
                data += self._recv(sock)
            parts.append(data[:size])
            data = data[size + 2:]


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

    def _connection(self, scheme: str, netloc: str) -> _Connection:
        connections: dict[tuple[str, str], _Connection] | None = getattr(self._local, "conns", None)
        if connections is None:
            connections = self._local.conns = {}
        conn = connections.get((scheme, netloc))
        if conn is None:
            conn = _Connection(scheme, netloc, self._context() if scheme == "https" else None)
            connections[(scheme, netloc)] = conn
            with self._lock:
                self._opened.append(conn)
        return conn

    def post(self, url: str, body: bytes, timeout: float) -> tuple[int, bytes]:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ValueError(f"unsupported URL scheme {parts.scheme!r} in {url!r}")
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn = self._connection(parts.scheme, parts.netloc)
        request = (f"POST {target} HTTP/1.1\r\nHost: {parts.netloc}\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n").encode("latin-1") + body
        for attempt in range(2):
            sock = conn.sock
            reused = sock is not None
            try:
                if sock is None:
                    sock = conn.open(timeout)
                else:
                    sock.settimeout(timeout)
                return conn.exchange(sock, request)
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
