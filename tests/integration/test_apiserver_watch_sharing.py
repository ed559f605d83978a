"""HTTP watches of one API server process share one stream reader (emulator.apiserver.watch).

The watch bodies are driven in-process (``stream_events``, what the HTTP endpoint streams) against
real Redis, so the shared reader's counters can be read: every stream entry is decoded once and
every event's JSON line serialized once, whatever the number of watches; each watch still gets
only the events its namespace, label and field selectors and its starting resourceVersion select,
and a watch the stream was trimmed past gets its 410 as an ERROR event.
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson
import pytest

from emulator.api.kinds import NAMESPACE, POD
from emulator.api.selectors import parse_field_selector, parse_label_selector
from emulator.apiserver import watch
from emulator.apiserver.watch import WatchRequest, WatchSource, stream_events
from emulator.server.core import ServerCore
from emulator.store.store import Store, StoreConfig
from tests import builders as b
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def request(*, namespace: str | None = None, labels: str = "", fields: str = "", timeout: float = 60.0,
            table: str = "") -> WatchRequest:
    return WatchRequest(POD, namespace, parse_label_selector(labels) if labels else None,
                        parse_field_selector(fields, POD.selectable_fields) if fields else None, since_rv=0,
                        send_initial=False, initial_end_bookmark=False, allow_bookmarks=False,
                        timeout_seconds=timeout, table_version=table)


async def collect(req: WatchRequest, source: WatchSource, start: int, core: ServerCore,
                  wanted: int) -> list[dict[str, Any]]:
    """The watch's events until it has sent ``wanted`` (or ended: its timeout is only a safety net)."""
    out: list[dict[str, Any]] = []
    body = stream_events(req, source, None, start, core.clock.now)
    try:
        async for chunk in body:
            out += [orjson.loads(line) for line in chunk.splitlines() if line]
            if len(out) >= wanted:
                break
    finally:
        await body.aclose()  # as the server does when the client goes away: the subscription ends
    return out


def named(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["object"]["metadata"]["name"]) for e in events]


# The writes every case watches: (type, namespace, name, labels), in order (what ``write`` does).
WRITES = [("ADDED", "default", "a", {"app": "x"}), ("ADDED", "default", "b", {"app": "y"}),
          ("ADDED", "other", "c", {"app": "x"}), ("MODIFIED", "default", "a", {"app": "x", "v": "2"}),
          ("DELETED", "default", "b", {"app": "y"})]


def write(core: ServerCore) -> None:
    core.create(POD, b.pod("a", labels={"app": "x"}))
    core.create(POD, b.pod("b", labels={"app": "y"}))
    core.create(POD, b.pod("c", namespace="other", labels={"app": "x"}))
    a = core.get(POD, "default", "a")
    core.update(POD, {**a, "metadata": {**a["metadata"], "labels": {"app": "x", "v": "2"}}})
    core.delete(POD, "default", "b")


# Each watch: its request, and which of the writes it must see (worked out from the selectors, not from output).
CASES: list[tuple[str, dict[str, Any], Any]] = [
    ("everything", {}, lambda ns, name, labels: True),
    ("namespace", {"namespace": "other"}, lambda ns, name, labels: ns == "other"),
    ("label-selector", {"labels": "app=x"}, lambda ns, name, labels: labels.get("app") == "x"),
    ("field-selector", {"fields": "metadata.name=b"}, lambda ns, name, labels: name == "b"),
    ("namespace-and-labels", {"namespace": "default", "labels": "app=x,v=2"},
     lambda ns, name, labels: ns == "default" and labels.get("v") == "2"),
]


def test_watches_of_one_process_share_one_read_and_one_encoding(core: ServerCore, redis_url: str) -> None:
    core.create(NAMESPACE, {"metadata": {"name": "other"}})
    source = WatchSource(core.store, redis_url)
    stream = core.store.stream_key(POD)
    start = core.store.current_rv()
    expected = {case: [(t, name) for t, ns, name, labels in WRITES if selects(ns, name, labels)]
                for case, _, selects in CASES}

    async def main() -> list[list[dict[str, Any]]]:
        tasks = [asyncio.create_task(collect(request(**kw), source, start, core, len(expected[case])))
                 for case, kw, _ in CASES]
        try:
            # Every watch is subscribed, and the reader has started a read since (its plan holds them all),
            # before the writes: each entry is then read and decoded exactly once.
            await asyncio.to_thread(wait_for, lambda: len(source.mux._subs.get(stream, ())) == len(CASES), 10,
                                    "every watch subscribed to the pod stream")
            reads = source.mux.reads
            await asyncio.to_thread(wait_for, lambda: source.mux.reads >= reads + 2, 10,
                                    "a read planned with every watch")
            await asyncio.to_thread(write, core)
            return list(await asyncio.gather(*tasks))
        finally:
            await source.close()

    mux = source.mux
    results = asyncio.run(main())
    for (case, _, _), events in zip(CASES, results, strict=True):
        assert named(events) == expected[case], case
    entries = [(e[0], e[1][b"t"]) for e in core.store.redis.xrange(stream, f"{start + 1}-0")]
    assert mux.entries_read == 5, entries  # five writes, one decode each for five watches
    # Every event went to the unfiltered watch: serialized once, the other watches' copies are shared.
    assert source.lines.encoded == 5
    assert source.lines.shared == sum(len(expected[c]) for c, _, _ in CASES) - 5


def test_a_watch_from_an_older_version_catches_up_beside_a_current_one(core: ServerCore, redis_url: str) -> None:
    source = WatchSource(core.store, redis_url)
    before = core.store.current_rv()
    core.create(POD, b.pod("old"))
    middle = core.store.current_rv()
    core.create(POD, b.pod("new"))

    async def main() -> list[list[dict[str, Any]]]:
        try:
            return list(await asyncio.gather(collect(request(), source, middle, core, 1),
                                             collect(request(), source, before, core, 2)))
        finally:
            await source.close()

    current, older = asyncio.run(main())
    assert named(current) == [("ADDED", "new")]
    assert named(older) == [("ADDED", "old"), ("ADDED", "new")]


def test_table_watches_render_their_own_rows(core: ServerCore, redis_url: str) -> None:
    source = WatchSource(core.store, redis_url)
    start = core.store.current_rv()
    core.create(POD, b.pod("t1"))
    core.create(POD, b.pod("t2"))

    async def main() -> list[list[dict[str, Any]]]:
        try:
            return list(await asyncio.gather(collect(request(table="v1"), source, start, core, 2),
                                             collect(request(), source, start, core, 2)))
        finally:
            await source.close()

    tables, plain = asyncio.run(main())
    assert [e["object"]["kind"] for e in tables] == ["Table", "Table"]
    # Column definitions once per watch, as upstream.
    assert [bool(e["object"].get("columnDefinitions")) for e in tables] == [True, False]
    assert [e["object"]["rows"][0]["cells"][0] for e in tables] == ["t1", "t2"]
    assert named(plain) == [("ADDED", "t1"), ("ADDED", "t2")]


def test_a_watch_too_far_behind_its_client_ends_after_what_it_was_handed(
        core: ServerCore, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Upstream's cacher closes a watcher whose buffer stays full; here the bound is MAX_PENDING_EVENTS.
    monkeypatch.setattr(watch, "MAX_PENDING_EVENTS", 2)
    source = WatchSource(core.store, redis_url)
    start = core.store.current_rv()
    for name in ("o1", "o2", "o3"):
        core.create(POD, b.pod(name))

    async def main() -> list[dict[str, Any]]:
        try:
            return await collect(request(), source, start, core, 3)
        finally:
            await source.close()

    # The three events come in one read: more than the bound, so none is queued and the stream ends
    # (long before its 60 s timeout); the client watches again from ``start``.
    assert asyncio.run(main()) == []


@pytest.mark.parametrize("limit", [1, 3000, 1 << 20], ids=["one-line-each", "a-few-lines", "all-in-one"])
def test_events_read_together_are_written_in_chunks_of_whole_lines(
        core: ServerCore, redis_url: str, monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    # Upstream writes each event on its own; a backlog written as one HTTP chunk costs the official Python
    # client O(n^2) in its line splitter. Here every chunk holds whole lines and at most FRAME_BYTES of them.
    monkeypatch.setattr(watch, "FRAME_BYTES", limit)
    source = WatchSource(core.store, redis_url)
    start = core.store.current_rv()
    names = [f"f{i}" for i in range(8)]
    for name in names:
        core.create(POD, b.pod(name))  # before the watch: the first read returns all eight

    async def main() -> list[bytes]:
        chunks: list[bytes] = []
        body = stream_events(request(), source, None, start, core.clock.now)
        try:
            async for chunk in body:
                chunks.append(chunk)
                if sum(c.count(b"\n") for c in chunks) >= len(names):
                    break
        finally:
            await body.aclose()
            await source.close()
        return chunks

    chunks = asyncio.run(main())
    lines = [line for c in chunks for line in c.splitlines()]
    assert [orjson.loads(line)["object"]["metadata"]["name"] for line in lines] == names
    assert all(c.endswith(b"\n") for c in chunks)
    # A chunk is within the limit, or is a single line longer than it.
    assert all(len(c) <= limit or c.count(b"\n") == 1 for c in chunks)
    line_bytes = [len(line) + 1 for line in lines]
    if limit < min(line_bytes):
        assert len(chunks) == len(names)
    if limit >= sum(line_bytes):
        assert len(chunks) == 1


def test_a_watch_the_stream_trimmed_past_gets_a_410_error_event(redis_url: str) -> None:
    # The API server checks the window before it answers; a watch the trim passes after that (here: from
    # the start) learns it from the shared reader, as an ERROR event carrying the 410 Status, and ends.
    small = ServerCore(Store.connect(redis_url, StoreConfig(stream_cap=10)))
    small.bootstrap()
    start = small.store.current_rv()
    for i in range(60):
        small.create(POD, b.pod(f"t{i}"))
    source = WatchSource(small.store, redis_url)

    async def main() -> list[dict[str, Any]]:
        try:
            return await collect(request(), source, start, small, 1)
        finally:
            await source.close()

    events = asyncio.run(main())
    assert [(e["type"], e["object"]["kind"], e["object"]["code"]) for e in events] == [("ERROR", "Status", 410)]
