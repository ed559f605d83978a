"""The embedded Redis against real redis-server processes: durability, errors, lifetime.

No mocks: every test starts real servers in ``tmp_path``. Waiting for another
process to die uses a pidfd (Linux), which becomes readable when the process
exits, so no test sleeps.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from emulator.store.redis_server import (
    AOF_FILE,
    EmbeddedRedis,
    RedisPortInUseError,
    RedisServerConfig,
    RedisServerError,
    wait_for_redis,
)
from tests.waiting import wait_for_aof_write

pytestmark = pytest.mark.integration


@pytest.fixture
def server(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[EmbeddedRedis]:
    """A started server; its ``appendfsync`` is the test's indirect parameter (default ``everysec``)."""
    appendfsync = getattr(request, "param", "everysec")
    embedded = EmbeddedRedis(RedisServerConfig(data_dir=tmp_path / "redis", appendfsync=appendfsync))
    embedded.start()
    try:
        yield embedded
    finally:
        embedded.stop()


def _client(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True)


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _wait_for_exit(pid: int, timeout: float) -> bool:
    """True once process ``pid`` (not necessarily our child) has exited, False on timeout."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        readable, _, _ = select.select([fd], [], [], timeout)
        return bool(readable)
    finally:
        os.close(fd)


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


@pytest.mark.parametrize(("server", "singles"), [
    # Each write is written and fsynced before its reply: the kill may follow the last reply at once.
    ("always", 300),
    # The default: written before the reply, except while a background fsync still runs (a busy disk),
    # when Redis postpones the write by up to 2 s yet replies - the kill waits for the AOF write.
    ("everysec", 1500),
], ids=["always-kill-at-once", "everysec-kill-once-the-aof-is-written"], indirect=["server"])
def test_acknowledged_writes_survive_sigkill(server: EmbeddedRedis, singles: int) -> None:
    url = server.url
    client = _client(url)
    appendfsync = server.config.appendfsync
    assert client.config_get("appendfsync") == {"appendfsync": appendfsync}
    expected: dict[str, str] = {}

    # Single round trips: each SET is acknowledged before the next is sent.
    for i in range(singles):
        key, value = f"single:{i}", f"value-{i}"
        assert client.set(key, value) is True
        expected[key] = value

    # 400 writes in one pipeline, and a MULTI/EXEC transaction.
    pipe = client.pipeline(transaction=False)
    for i in range(400):
        pipe.set(f"piped:{i}", f"piped-{i}")
        expected[f"piped:{i}"] = f"piped-{i}"
    assert all(result is True for result in pipe.execute())
    tx = client.pipeline(transaction=True)
    tx.set("tx:a", "1").set("tx:b", "2")
    assert tx.execute() == [True, True]
    expected |= {"tx:a": "1", "tx:b": "2"}

    # 100 stream entries; the IDs the server acknowledged must come back verbatim.
    stream_ids = [client.xadd("events", {"seq": str(i)}) for i in range(100)]

    if appendfsync != "always":
        wait_for_aof_write(client)
    old_pid = server.pid
    assert old_pid is not None
    server.kill()  # SIGKILL: no chance to flush
    assert server.pid is None
    assert not server.running
    assert not _exists(old_pid)

    assert server.restart() == url  # same port, same URL
    assert server.pid != old_pid
    log_text = server.log_path.read_text()
    assert "DB loaded from append only file" in log_text
    assert (server.config.data_dir / AOF_FILE).stat().st_size > 0

    client = _client(url)  # the old connection died with the old server
    assert client.dbsize() == len(expected) + 1  # + the stream
    keys = list(expected)
    recovered = {key: value for key, value in zip(keys, client.mget(keys), strict=True)}
    missing = sorted(key for key, value in expected.items() if recovered[key] != value)
    assert not missing, f"{len(missing)} acknowledged writes lost after SIGKILL, e.g. {missing[:5]}"
    entries = client.xrange("events")
    assert [entry_id for entry_id, _ in entries] == stream_ids
    assert [fields["seq"] for _, fields in entries] == [str(i) for i in range(100)]


def test_busy_port_raises_a_clear_error(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        embedded = EmbeddedRedis(RedisServerConfig(data_dir=tmp_path / "redis", port=port))
        with pytest.raises(RedisServerError, match=rf"port {port} .*in use") as excinfo:
            embedded.start()
    assert isinstance(excinfo.value, RedisPortInUseError)
    assert "Address already in use" in str(excinfo.value)  # the redis.log tail is included
    assert not embedded.running
    assert embedded.pid is None


def test_port_held_by_another_redis_is_not_mistaken_for_ours(server: EmbeddedRedis, tmp_path: Path) -> None:
    # The other server answers PING on that port; start() must still notice that its
    # own process failed instead of reporting success.
    intruder = EmbeddedRedis(RedisServerConfig(data_dir=tmp_path / "intruder", port=server.port))
    with pytest.raises(RedisPortInUseError, match=f"port {server.port} "):
        intruder.start()
    assert not intruder.running
    assert _client(server.url).ping() is True


def test_stop_ends_the_process_and_data_persists(server: EmbeddedRedis) -> None:
    url = server.url
    client = _client(url)
    client.set("kept", "yes")
    client.xadd("stream", {"n": "1"})
    pid = server.pid
    assert pid is not None

    server.stop()
    assert not _exists(pid)
    assert server.pid is None
    assert not server.running
    assert "ready to exit, bye bye" in server.log_path.read_text()  # SHUTDOWN, not a kill
    with pytest.raises(redis.ConnectionError):
        _client(url).ping()
    server.stop()  # idempotent

    assert server.start() == url
    client = _client(url)
    assert client.get("kept") == "yes"
    assert client.xlen("stream") == 1


def test_context_manager_starts_and_stops(tmp_path: Path) -> None:
    with EmbeddedRedis(RedisServerConfig(data_dir=tmp_path / "redis")) as embedded:
        pid = embedded.pid
        assert pid is not None
        assert _client(embedded.url).ping() is True
    assert not _exists(pid)


def test_wait_for_redis_on_a_closed_port_fails_fast() -> None:
    url = f"redis://127.0.0.1:{_closed_port()}/0"
    started = time.monotonic()
    with pytest.raises(RedisServerError, match=f"cannot reach Redis at {url}: ") as excinfo:
        wait_for_redis(url, timeout=0.5)
    assert time.monotonic() - started < 3.0
    assert isinstance(excinfo.value.__cause__, redis.ConnectionError)


def test_wait_for_redis_hides_the_password() -> None:
    url = f"redis://:s3cret@127.0.0.1:{_closed_port()}/0"
    with pytest.raises(RedisServerError) as excinfo:
        wait_for_redis(url, timeout=0.1)
    assert "s3cret" not in str(excinfo.value)
    assert ":***@127.0.0.1" in str(excinfo.value)


def test_wait_for_redis_returns_for_a_live_server(redis_url: str) -> None:
    wait_for_redis(redis_url, timeout=5.0)


_STARTER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from emulator.store.redis_server import EmbeddedRedis, RedisServerConfig

    embedded = EmbeddedRedis(RedisServerConfig(data_dir=Path(sys.argv[1]), detached=sys.argv[2] == "detached"))
    embedded.start()
    print(embedded.pid, embedded.url, flush=True)
    if sys.argv[2] == "attached":
        sys.stdin.read()  # stay alive until the test kills us
    """
)


def _run_starter(data_dir: Path, mode: str) -> tuple[subprocess.Popen[str], int, str]:
    starter = subprocess.Popen(
        [sys.executable, "-c", _STARTER, str(data_dir), mode],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert starter.stdout is not None
    pid_text, url = starter.stdout.readline().split()
    return starter, int(pid_text), url


def test_server_dies_when_its_starter_is_killed(tmp_path: Path) -> None:
    # PR_SET_PDEATHSIG: a kemu killed with SIGKILL (no atexit) leaves no stray server.
    starter, redis_pid, url = _run_starter(tmp_path / "redis", "attached")
    try:
        assert _client(url).ping() is True
        starter.kill()
        starter.wait()
        assert _wait_for_exit(redis_pid, timeout=10.0), f"redis-server {redis_pid} outlived its killed starter"
    finally:
        starter.kill()
        starter.wait()
        if not _wait_for_exit(redis_pid, timeout=0.0):
            os.kill(redis_pid, signal.SIGKILL)


def test_detached_server_outlives_its_starter(tmp_path: Path) -> None:
    starter, redis_pid, url = _run_starter(tmp_path / "redis", "detached")
    try:
        assert starter.wait(timeout=30) == 0  # a normal exit runs atexit handlers and finalizers
        assert not _wait_for_exit(redis_pid, timeout=0.0)
        client = _client(url)
        client.set("still", "here")
        assert client.get("still") == "here"
        # A second kemu must not start another server on the same data (one AOF, two writers).
        with pytest.raises(RedisServerError, match=f"in use by redis-server pid {redis_pid}"):
            EmbeddedRedis(RedisServerConfig(data_dir=tmp_path / "redis")).start()
        client.shutdown()
        assert _wait_for_exit(redis_pid, timeout=10.0)
    finally:
        if not _wait_for_exit(redis_pid, timeout=0.0):
            os.kill(redis_pid, signal.SIGKILL)
