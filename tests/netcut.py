"""A TCP relay in front of a real Redis whose connections a test cuts: a network partition on demand.

``NetCut(port)`` listens on a loopback port of its own and relays every connection to the
server's ``port``. ``cut_on(pattern)`` arms it: the first time a client sends bytes containing
``pattern`` (a key name inside a command, say), every relayed connection is closed *before*
those bytes reach the server, and new connections are closed as soon as they are accepted,
until ``restore()``. So a test decides exactly which write is the first to fail - the client
sees a real connection reset, nothing is mocked - and the clock-driven test stays deterministic.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class NetCut:
    def __init__(self, upstream_port: int, host: str = "127.0.0.1") -> None:
        self.upstream = (host, upstream_port)
        self._listener = socket.create_server((host, 0))
        self.port = self._listener.getsockname()[1]
        self.url = f"redis://{host}:{self.port}"
        self._lock = threading.Lock()
        self._pattern: bytes | None = None
        self._down = False
        self._closed = False
        self._sockets: set[socket.socket] = set()
        self.tripped = threading.Event()  # set when the armed pattern was seen and everything cut
        threading.Thread(target=self._accept, name="netcut-accept", daemon=True).start()

    @property
    def down(self) -> bool:
        return self._down

    def cut_on(self, pattern: bytes) -> None:
        """Cut every connection when a client next sends ``pattern``, and stay down until :meth:`restore`."""
        with self._lock:
            self._pattern = pattern

    def cut(self) -> None:
        """Cut every connection now, and stay down until :meth:`restore`."""
        with self._lock:
            self._down = True
            self._pattern = None
            sockets, self._sockets = self._sockets, set()
        for s in sockets:
            _close(s)
        self.tripped.set()

    def restore(self) -> None:
        with self._lock:
            self._down = False

    def close(self) -> None:
        self._closed = True
        _close(self._listener)
        self.cut()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if self._down:
                _close(client)
                continue
            try:
                server = socket.create_connection(self.upstream)
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._sockets |= {client, server}
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, from_client: bool) -> None:
        tail = b""
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                pattern = self._pattern
                if from_client and pattern is not None:
                    if pattern in tail + data:
                        self.cut()  # before the bytes reach the server: the command never runs
                        return
                    tail = data[-len(pattern):]
                if self._down:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _close(src)
            _close(dst)


def _close(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(OSError):
        s.close()
