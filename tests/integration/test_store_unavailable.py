"""Riding out a Redis restart: the store client's lost replies, and the API server's 503 while Redis is down.

* A commit whose reply is lost (the connection breaks after Redis ran it, or before it was sent) is resolved by
  reading the key back: the caller gets the object it wrote, exactly once in the store and in the watch stream,
  never a 409 for its own create; a create whose name another object holds still gets 409 AlreadyExists.
* The API server, its Redis killed, answers 503 ServiceUnavailable with ``Retry-After`` and a ``Status`` (never
  500) to reads, writes, lists and watches - through the official client - and serves again, watches included,
  once Redis is back on the same port with its AOF.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException
from redis.backoff import NoBackoff
from redis.retry import Retry

from emulator.api import errors
from emulator.api.kinds import CONFIGMAP, POD
from emulator.apiserver import kubeconfig
from emulator.apiserver.process import ApiServerProcess
from emulator.apiserver.settings import ServerSettings
from emulator.server.core import ServerCore
from emulator.store import codec
from emulator.store.redis_server import EmbeddedRedis, RedisServerConfig
from emulator.store.store import Store, StoreConfig
from emulator.store.wire import Call, CommitClient
from tests import builders as b
from tests.waiting import wait_for_aof_write

pytestmark = pytest.mark.integration

TOKEN = "unavailable-test-token"


class LossyWriter(redis.Redis):
    """A real Redis client whose next commit replies are lost: after Redis ran the script (``lose_after``), or
    before the command left (``lose_before``) - what a connection broken by a Redis restart does."""

    lose_after = 0
    lose_before = 0
    between: Callable[[], Any] | None = None  # runs after a commit whose reply is then lost (another writer)

    def execute_command(self, *args: Any, **options: Any) -> Any:
        if args[0] == "EVALSHA" and self.lose_before:
            self.lose_before -= 1
            raise redis.ConnectionError("injected: connection lost before the command was sent")
        result = super().execute_command(*args, **options)
        if args[0] == "EVALSHA" and self.lose_after:
            self.lose_after -= 1
            if self.between is not None:
                self.between()
            raise redis.ConnectionError("injected: connection lost before the reply")
        return result

    def pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        pipe = super().pipeline(transaction, shard_hint)
        if self.lose_after:
            self.lose_after -= 1
            run = pipe.execute

            def execute(raise_on_error: bool = True) -> Any:
                run(raise_on_error)
                raise redis.ConnectionError("injected: connection lost before the replies")

            pipe.execute = execute  # type: ignore[method-assign]
        return pipe


def _core_writing_through(redis_url: str, writer: Any) -> Iterator[ServerCore]:
    """A bootstrapped core whose store commits through ``writer`` (reads through a client of its own)."""
    config_ = StoreConfig()
    store = Store(redis.Redis.from_url(redis_url, retry=config_.retry()), config_, writer=writer)
    core = ServerCore(store)
    core.bootstrap()
    yield core
    store.close()


@pytest.fixture
def lossy(redis_url: str) -> Iterator[tuple[ServerCore, LossyWriter]]:
    writer = LossyWriter.from_url(redis_url, retry=Retry(NoBackoff(), 0))
    for core in _core_writing_through(redis_url, writer):
        yield core, writer


def added_events(core: ServerCore, name: str) -> int:
    entries = core.store.redis.xrange(core.store.stream_key(POD))
    return sum(1 for _id, fields in entries if name.encode() in b"".join(fields.values())
               and b"ADDED" in b"".join(fields.values()))


def _create(core: ServerCore) -> dict[str, Any]:
    return core.create(POD, b.pod("p"))


def _update(core: ServerCore) -> dict[str, Any]:
    current = core.store.get(POD, "default", "p")
    return core.store.update(POD, {**current, "metadata": {**current["metadata"], "labels": {"v": "2"}}})


def _delete(core: ServerCore) -> dict[str, Any]:
    return core.store.delete(POD, "default", "p")


def _create_many(core: ServerCore) -> dict[str, Any]:
    [only] = core.store.create_many(POD, [{**b.pod("p"), "metadata": {**b.pod("p")["metadata"], "uid": "u-1"}}])
    assert not isinstance(only, errors.StatusError), only
    return only


def _update_many(core: ServerCore) -> dict[str, Any]:
    current = core.store.get(POD, "default", "p")
    [only] = core.store.update_many(POD, [{**current, "metadata": {**current["metadata"], "labels": {"v": "2"}}}])
    assert not isinstance(only, errors.StatusError), only
    return only


def _lose_one_reply(core: ServerCore, writer: LossyWriter | LossyCommitClient,
                    write: Callable[[ServerCore], dict[str, Any]], setup: bool, lost: str) -> None:
    """``write`` with the reply of its commit lost (``lost``: after Redis ran it, or before it was sent): it
    happens exactly once and answers the object as stored."""
    if setup:
        core.create(POD, b.pod("p"))
    rv_before = core.store.current_rv()
    setattr(writer, f"lose_{lost}", 1)
    result = write(core)
    assert writer.lose_after == writer.lose_before == 0  # the fault was injected
    assert core.store.current_rv() == rv_before + 1  # the write happened exactly once
    if write is _delete:
        with pytest.raises(errors.StatusError, match="not found"):
            core.store.get(POD, "default", "p")
        return
    stored = core.store.get(POD, "default", "p")
    assert result["metadata"]["resourceVersion"] == stored["metadata"]["resourceVersion"] == str(rv_before + 1)
    assert added_events(core, "p") == 1


@pytest.mark.parametrize(("write", "setup", "lost"), [
    (_create, False, "after"), (_create, False, "before"), (_update, True, "after"), (_update, True, "before"),
    (_delete, True, "after"), (_create_many, False, "after"), (_update_many, True, "after"),
], ids=["create-ran", "create-not-sent", "update-ran", "update-not-sent", "delete-ran", "create-many-ran",
        "update-many-ran"])
def test_a_commit_whose_reply_is_lost_is_resolved_by_reading_back(
        lossy: tuple[ServerCore, LossyWriter], write: Callable[[ServerCore], dict[str, Any]], setup: bool,
        lost: str) -> None:
    _lose_one_reply(*lossy, write, setup, lost)


def test_a_create_that_landed_and_changed_before_the_read_back_returns_the_object_as_it_is_now(
        lossy: tuple[ServerCore, LossyWriter], redis_url: str) -> None:
    core, writer = lossy
    other = Store.connect(redis_url)

    def relabel() -> None:
        current = other.get(POD, "default", "p")
        other.update(POD, {**current, "metadata": {**current["metadata"], "labels": {"by": "other"}}})

    writer.lose_after, writer.between = 1, relabel
    created = core.create(POD, b.pod("p"))
    # Never the create's own bytes at the newer resourceVersion: a CAS from it would undo the other write.
    assert created == core.store.get(POD, "default", "p")
    assert created["metadata"]["labels"] == {"by": "other"}
    other.close()


def test_a_create_whose_name_is_taken_still_answers_already_exists(lossy: tuple[ServerCore, LossyWriter]) -> None:
    core, writer = lossy
    core.create(POD, b.pod("p"))
    writer.lose_before = 1
    with pytest.raises(errors.StatusError) as e:
        core.create(POD, b.pod("p"))
    assert e.value.reason == "AlreadyExists"


class LossyCommitClient(CommitClient):
    """The store's own write channel (``Store.connect``'s writer) losing the replies of its next round trip:
    after Redis ran the scripts (``lose_after``), or before the commands left (``lose_before``)."""

    lose_after = 0
    lose_before = 0

    def _send(self, script: Any, calls: Any) -> list[Any]:
        if self.lose_before:
            self.lose_before -= 1
            raise redis.ConnectionError("injected: connection lost before the commands were sent")
        replies = super()._send(script, calls)
        if self.lose_after:
            self.lose_after -= 1
            raise redis.ConnectionError("injected: connection lost before the replies")
        return replies


@pytest.fixture
def lossy_channel(redis_url: str) -> Iterator[tuple[ServerCore, LossyCommitClient]]:
    writer = LossyCommitClient.from_url(redis_url, retry=Retry(NoBackoff(), 0))
    for core in _core_writing_through(redis_url, writer):
        yield core, writer


@pytest.mark.parametrize(("write", "setup", "lost"), [
    (_create, False, "after"), (_create, False, "before"), (_update, True, "after"), (_update, True, "before"),
    (_delete, True, "after"), (_create_many, False, "after"), (_create_many, False, "before"),
    (_update_many, True, "after"),
], ids=["create-ran", "create-not-sent", "update-ran", "update-not-sent", "delete-ran", "create-many-ran",
        "create-many-not-sent", "update-many-ran"])
def test_the_commit_channel_resolves_a_lost_reply_by_reading_back(
        lossy_channel: tuple[ServerCore, LossyCommitClient], write: Callable[[ServerCore], dict[str, Any]],
        setup: bool, lost: str) -> None:
    _lose_one_reply(*lossy_channel, write, setup, lost)


@pytest.mark.parametrize("lost", ["after", "before"], ids=["ran", "not-sent"])
def test_a_batch_of_creates_in_one_script_call_whose_reply_is_lost_lands_once(
        lossy_channel: tuple[ServerCore, LossyCommitClient], lost: str) -> None:
    """Creates of a kind without node room share one script call (lua/create_many.lua): a lost reply is
    resolved object by object, each stored and announced once."""
    core, writer = lossy_channel
    names = ["cm-one", "cm-two", "cm-three"]
    rv_before = core.store.current_rv()
    setattr(writer, f"lose_{lost}", 1)
    results = core.store.create_many(CONFIGMAP, [{"metadata": {"name": n, "namespace": "default", "uid": f"u-{n}"}}
                                                 for n in names])
    assert writer.lose_after == writer.lose_before == 0  # the fault was injected
    assert core.store.current_rv() == rv_before + 3
    assert [r["metadata"]["resourceVersion"] for r in results] == [str(rv_before + i) for i in (1, 2, 3)]
    entries = core.store.redis.xrange(core.store.stream_key(CONFIGMAP))
    assert [codec.decode(fields[b"o"])["metadata"]["name"] for _id, fields in entries] == names


def test_the_commit_channel_reloads_a_script_redis_forgot(redis_url: str) -> None:
    """A restarted Redis has no script cache: NOSCRIPT means the call did not run, so it is loaded and sent again."""
    store = Store.connect(redis_url)
    core = ServerCore(store)
    core.bootstrap()
    store.redis.script_flush()
    rv_before = store.current_rv()
    created = store.create_many(POD, [b.pod("first-pod"), b.pod("second-pod")])
    assert [c["metadata"]["resourceVersion"] for c in created] == [str(rv_before + 1), str(rv_before + 2)]
    store.redis.script_flush()
    updated = store.update(POD, {**created[0], "metadata": {**created[0]["metadata"], "labels": {"v": "2"}}})
    assert updated["metadata"]["resourceVersion"] == str(rv_before + 3)
    assert [added_events(core, n) for n in ("first-pod", "second-pod")] == [1, 1]
    store.close()


def test_a_failed_script_call_raises_after_every_reply_is_read(redis_url: str) -> None:
    """An error reply in a batch raises (as a redis-py pipeline does), and the connection stays usable."""
    store = Store.connect(redis_url)
    writer = store._writer
    assert isinstance(writer, CommitClient)
    bad: Call = ([], [])  # the commit script indexes ARGV: a Lua error reply
    with pytest.raises(redis.ResponseError):
        writer.evalsha_many(store._commit, [bad, bad])
    assert store.redis.ping() and writer.ping()
    store.close()


# --------------------------------------------------------------------------------------------- the API


@pytest.fixture
def own_redis(tmp_path: Path) -> Iterator[EmbeddedRedis]:
    server = EmbeddedRedis(RedisServerConfig(data_dir=tmp_path / "redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def v1(own_redis: EmbeddedRedis, tmp_path: Path) -> Iterator[client.CoreV1Api]:
    ServerCore(Store.connect(own_redis.url)).bootstrap()
    # Two retries (50-200 ms): the 503 comes at once instead of after the default 3-5 s of retries.
    server = ApiServerProcess(ServerSettings(redis_url=own_redis.url, port=0, token=TOKEN, store_retries=2))
    server.start()
    configuration = client.Configuration()
    config.load_kube_config(config_file=str(kubeconfig.write(tmp_path / "kubeconfig", server.url, TOKEN)),
                            client_configuration=configuration)
    # urllib3 (under the official client) honours Retry-After: it would retry each 503 GET 3 times, 1 s apart,
    # riding out the outage - here every 503 is to be seen.
    configuration.retries = 0
    api_client = client.ApiClient(configuration)
    yield client.CoreV1Api(api_client)
    api_client.close()
    server.stop()


def assert_unavailable(call: Callable[[], Any]) -> None:
    with pytest.raises(ApiException) as e:
        call()
    assert e.value.status == 503, e.value.body
    assert e.value.headers["Retry-After"] == "1"
    status = json.loads(e.value.body)
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "ServiceUnavailable", 503)
    assert status["details"]["retryAfterSeconds"] == 1


def test_the_api_answers_503_with_retry_after_while_redis_is_down_then_serves_again(
        own_redis: EmbeddedRedis, v1: client.CoreV1Api) -> None:
    created = v1.create_namespaced_pod("default", b.pod("before"))
    # "before" must outlive the crash: on a busy disk Redis may still hold it in its AOF buffer.
    probe = redis.Redis.from_url(own_redis.url)
    try:
        wait_for_aof_write(probe)
    finally:
        probe.close()
    own_redis.kill()
    assert_unavailable(lambda: v1.read_namespaced_pod("before", "default"))
    assert_unavailable(lambda: v1.create_namespaced_pod("default", b.pod("during")))
    assert_unavailable(lambda: v1.list_namespaced_pod("default"))
    assert_unavailable(lambda: v1.list_namespaced_pod("default", watch=True, resource_version="1",
                                                      _preload_content=False))

    own_redis.start()  # same port, data from the AOF
    assert v1.read_namespaced_pod("before", "default").metadata.uid == created.metadata.uid
    # The first watch after the restart streams (no 500): the pod created now arrives as ADDED.
    v1.create_namespaced_pod("default", b.pod("after"))
    seen = [(e["type"], e["object"].metadata.name) for e in watch.Watch().stream(
        v1.list_namespaced_pod, "default", timeout_seconds=1)]
    assert ("ADDED", "after") in seen and ("ADDED", "before") in seen
    assert "during" not in {p.metadata.name for p in v1.list_namespaced_pod("default").items}
