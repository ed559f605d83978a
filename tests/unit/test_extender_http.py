"""The extender HTTP transport and the load-aware extender's server: the HTTP/1.1 each side speaks.

The client (:class:`emulator.extender_http.HTTPTransport`) against a raw socket
server answering in each framing an extender may use (Content-Length with
keep-alive, chunked, HTTP/1.0, no length at all); the server
(:class:`emulator.loadaware.extender_server.ExtenderServer`) against raw
requests (keep-alive, chunked bodies, unknown verbs, other methods, pipelining,
HTTP/1.0, malformed requests, Expect: 100-continue).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import orjson
import pytest

from emulator.extender_http import HTTPTransport
from emulator.loadaware.extender_server import ExtenderServer, LoadAwareExtender


class CannedServer:
    """Accepts connections; answers every request (read up to its blank line and Content-Length body) with the
    next canned bytes; records how many connections it accepted."""

    def __init__(self, answers: list[bytes]) -> None:
        self.answers = list(answers)
        self.connections = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/x/filter"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while self.answers:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            with conn, conn.makefile("rb") as reader:  # both closed: the socket closes only with its file
                while self.answers:
                    head = b""
                    while not head.endswith(b"\r\n\r\n"):
                        line = reader.readline()
                        if not line:
                            break
                        head += line
                    if not head:
                        break
                    length = next((int(h.split(b":")[1]) for h in head.split(b"\r\n")
                                   if h.lower().startswith(b"content-length:")), 0)
                    reader.read(length)
                    answer = self.answers.pop(0)
                    conn.sendall(answer)
                    if b"Connection: close" in answer or answer.startswith(b"HTTP/1.0") or \
                            (b"Content-Length" not in answer and b"chunked" not in answer):
                        break

    def close(self) -> None:
        self.sock.close()


OK = b'{"Error":""}'
FRAMINGS = [
    (b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n" + OK, 1),
    (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"Err\r\n7;x=1\r\nor\":\"\"}\r\n0\r\n\r\n", 1),
    (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n" + OK, 1),
    (b"HTTP/1.0 200 OK\r\nContent-Length: 12\r\n\r\n" + OK, 3),
    (b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 12\r\n\r\n" + OK, 3),
    (b"HTTP/1.1 200 OK\r\n\r\n" + OK, 3),
]


@pytest.mark.parametrize(("answer", "connections"), FRAMINGS,
                         ids=["content-length keep-alive", "chunked with an extension", "100 continue first",
                              "http/1.0 closes", "connection close", "no length: to the end"])
def test_the_client_reads_every_framing_and_keeps_the_connection_only_when_allowed(answer: bytes,
                                                                                  connections: int) -> None:
    server = CannedServer([answer] * 3)
    try:
        with HTTPTransport() as transport:
            for _ in range(3):
                assert transport.post(server.url, b'{"Pod":{}}', 5.0) == (200, OK)
        assert server.connections == connections
    finally:
        server.close()


def test_the_client_reopens_a_kept_alive_connection_the_server_closed() -> None:
    # The first connection answers once and is closed by the server without saying so; the retry opens another.
    first = b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n" + OK
    server = CannedServer([first, b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n"])
    try:
        with HTTPTransport() as transport:
            assert transport.post(server.url, b"{}", 5.0) == (200, OK)
            server.answers.insert(0, b"")  # read the next request, answer nothing, close
            assert transport.post(server.url, b"{}", 5.0) == (204, b"")
        assert server.connections == 2
    finally:
        server.close()


@pytest.fixture
def extender_url() -> Iterator[str]:
    extender = LoadAwareExtender(now=lambda: 1_800_000_000.0)
    extender.set_node("n1", {})
    server = ExtenderServer(extender).start()
    yield server.url
    server.close()


def _exchange(url: str, requests: list[bytes]) -> list[bytes]:
    """Send the raw requests on one connection; the raw answers, split at each status line."""
    host, port = url.split("//")[1].split("/", maxsplit=1)[0].split(":")
    with socket.create_connection((host, int(port)), 5) as sock:
        sock.sendall(b"".join(requests))
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    return [b"HTTP/1.1" + part for part in data.split(b"HTTP/1.1")[1:]]


def test_the_server_keeps_the_connection_reads_chunked_bodies_and_answers_unknown_verbs(extender_url: str) -> None:
    path = extender_url.split("//")[1].split("/", 1)[1]
    body = orjson.dumps({"Pod": {}, "NodeNames": ["n1"]})
    plain = f"POST /{path}/prioritize HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    chunked = (f"POST /{path}/filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
               f"{len(body) - 3:x}\r\n").encode() + body[:-3] + b"\r\n3\r\n" + body[-3:] + b"\r\n0\r\n\r\n"
    unknown = f"POST /{path}/bind HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{{}}".encode()
    get = f"GET /{path}/filter HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode()
    answers = _exchange(extender_url, [plain, chunked, unknown, get])
    assert [a.split(b" ", 2)[1] for a in answers] == [b"200", b"200", b"404", b"405"]
    assert orjson.loads(answers[0].split(b"\r\n\r\n", 1)[1]) == [{"Host": "n1", "Score": 0}]
    assert orjson.loads(answers[1].split(b"\r\n\r\n", 1)[1])["NodeNames"] == ["n1"]
    assert b"Connection: close" in answers[3]


def _request(path: str, verb: str, *, version: bytes = b"HTTP/1.1", headers: bytes = b"") -> bytes:
    body = orjson.dumps({"Pod": {}, "NodeNames": ["n1"]})
    return (b"POST /%s/%s %s\r\nHost: x\r\n%sContent-Length: %d\r\n\r\n" % (
        path.encode(), verb.encode(), version, headers, len(body))) + body


# Per raw request sequence: per answer (status, whether it says Connection: close). RFC 9112 9.3: an HTTP/1.1
# request keeps the connection unless it says close, an HTTP/1.0 one closes unless it says keep-alive; after a
# close the server reads nothing more; a request it cannot parse gets a 400 and the connection is closed.
SERVER_FRAMINGS = [
    (lambda p: [_request(p, "filter"), _request(p, "prioritize", headers=b"Connection: close\r\n"),
                _request(p, "filter")], [(b"200", False), (b"200", True)]),
    (lambda p: [_request(p, "filter", version=b"HTTP/1.0"), _request(p, "filter")], [(b"200", True)]),
    (lambda p: [_request(p, "filter", version=b"HTTP/1.0", headers=b"Connection: keep-alive\r\n"),
                _request(p, "prioritize", version=b"HTTP/1.0")], [(b"200", False), (b"200", True)]),
    (lambda p: [_request(p, "filter"), b"NOT HTTP AT ALL\r\n\r\n", _request(p, "filter")],
     [(b"200", False), (b"400", True)]),
]


@pytest.mark.parametrize(("requests", "expected"), SERVER_FRAMINGS,
                         ids=["pipelined, close ends it", "http/1.0 closes", "http/1.0 keep-alive",
                              "malformed after a good one"])
def test_the_server_answers_pipelined_requests_in_order_and_closes_when_told(
        extender_url: str, requests: Callable[[str], list[bytes]], expected: list[tuple[bytes, bool]]) -> None:
    path = extender_url.split("//")[1].split("/", 1)[1]
    answers = _exchange(extender_url, requests(path))
    assert [(a.split(b" ", 2)[1], b"Connection: close\r\n" in a) for a in answers] == expected


def test_the_server_says_100_continue_before_the_client_sends_the_body(extender_url: str) -> None:
    path = extender_url.split("//")[1].split("/", 1)[1]
    head, body = _request(path, "prioritize", headers=b"Expect: 100-continue\r\n").split(b"\r\n\r\n", 1)
    host, port = extender_url.split("//")[1].split("/", maxsplit=1)[0].split(":")
    with socket.create_connection((host, int(port)), 5) as sock:
        sock.sendall(head + b"\r\n\r\n")
        assert sock.recv(65536) == b"HTTP/1.1 100 Continue\r\n\r\n"
        sock.sendall(body)
        sock.shutdown(socket.SHUT_WR)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    assert data.split(b" ", 2)[1] == b"200"
    assert orjson.loads(data.split(b"\r\n\r\n", 1)[1]) == [{"Host": "n1", "Score": 0}]
