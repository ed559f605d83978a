"""Waiting in tests: one ``wait_for`` that polls a condition against a deadline.

Tests never sleep a fixed time and then look: they name the condition they need and wait for it
with a deadline, failing with what they waited for. ``tick`` moves the test's world between
checks (advance a ManualClock, run a kubelet step); ``wake`` blocks until something may have
changed (:func:`store_writes`: the next write to some kinds) instead of pausing on a timer.
Import it (``from tests.waiting import wait_for``): helpers such as the kubelet stand-in use it
outside test functions too, so it is a function rather than a fixture. :func:`wait_for_aof_write`
is the condition a test waits on before it kills Redis.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

import redis

from emulator.api.kinds import HORIZONTALPODAUTOSCALER, POD, Kind
from emulator.api.types import Obj
from emulator.server.core import ServerCore


class Wake(Protocol):
    def __call__(self) -> object:
        """Return once something may have changed (or after a short time of its own choosing)."""
        ...


def wait_for(condition: Callable[[], Any], timeout: float, what: str, *, tick: Callable[[], Any] | None = None,
             wake: Wake | None = None, interval: float = 0.02) -> Any:
    """Return ``condition()`` once it is truthy; fail naming ``what`` after ``timeout`` wall seconds.

    Between checks it runs ``tick`` (if given) and then blocks on ``wake`` (if given) or pauses
    ``interval`` seconds. A ``wake`` with a ``close()`` method is closed on the way out.
    """
    deadline = time.monotonic() + timeout
    try:
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
            if tick is not None:
                tick()
            if wake is not None:
                wake()
            else:
                time.sleep(interval)  # the one polling pause of the test suite: always under a deadline
    finally:
        close = getattr(wake, "close", None)
        if close is not None:
            close()


class StoreWrites:
    """A :class:`Wake` that returns at the next write to the first of ``kinds`` or after ``block`` seconds.

    The watches start at the current resourceVersion; the other kinds' events are drained on each call.
    """

    def __init__(self, core: ServerCore, *kinds: Kind, block: float = 0.1) -> None:
        rv = core.store.current_rv()
        self._watches = [core.store.watch(kind, rv) for kind in kinds]
        self._block = block

    def __call__(self) -> object:
        first, *others = self._watches
        events = first.next_batch(timeout=self._block)
        for watch in others:
            events += watch.next_batch(timeout=0.0)
        return events

    def close(self) -> None:
        for watch in self._watches:
            watch.close()


def store_writes(core: ServerCore, *kinds: Kind, block: float = 0.1) -> StoreWrites:
    """Wake a :func:`wait_for` on writes to ``kinds`` (the first one is waited on, the others drained)."""
    return StoreWrites(core, *kinds, block=block)


def cache_matches(core: ServerCore, informer: Any, kind: Kind, namespace: str | None = "default") -> bool:
    """Whether an informer's cache holds ``namespace``'s objects of ``kind`` (None: cluster-scoped) at the store's
    versions.

    A controller on a ManualClock must have *seen* the state (its own last writes included) before a
    test moves time on or looks at the outcome: a reconcile counted on a stale cache (one that returned
    early, waiting for its own write to come back) is not a look at the new time.
    """
    def versions(objs: list[Obj]) -> dict[str, str]:
        return {o["metadata"]["name"]: o["metadata"]["resourceVersion"] for o in objs
                if o["metadata"].get("namespace") == namespace}
    return versions(informer.indexer.list()) == versions(core.list(kind, namespace).items)


def hpa_controller_settled(core: ServerCore, controller: Any, namespace: str = "default") -> bool:
    """Whether a HorizontalController on a ManualClock has done what is due at the current cluster time.

    * Its caches hold what the store holds: the HPAs (its next status write is not refused as a
      conflict, which would keep an old status) and the pods (as last written).
    * Every HPA has its next sync scheduled: reconciled, or (a new one) queued a sync period after
      its informer delivered it (upstream's ``AddRateLimited``).
    * None is due, queued or being reconciled.

    A test that moves the clock by a sync period waits for this before and after the move, so each
    move is one sync of every HPA at the new time.
    """
    now = controller.clock.now()
    if not (cache_matches(core, controller.hpa_informer, HORIZONTALPODAUTOSCALER, namespace)
            and cache_matches(core, controller.pod_informer, POD, namespace)):
        return False
    queue = controller.queue
    reconciled = dict(controller.last_reconciled)
    waiting = dict(queue._waiting_at)
    keys = [f"{namespace}/{h['metadata']['name']}" for h in core.list(HORIZONTALPODAUTOSCALER, namespace).items]
    scheduled = all(k in reconciled or k in waiting for k in keys)
    due = [k for k, t in reconciled.items() if t + controller.sync_period <= now]
    due += [k for k, t in waiting.items() if t <= now]  # due, not yet handed to the queue by its waiter
    return scheduled and not due and len(queue) == 0 and queue.longest_running_processor_seconds() == 0


def wait_for_aof_write(client: redis.Redis, timeout: float = 20.0) -> None:
    """Wait until Redis has written its AOF buffer, so every write it acknowledged so far survives a ``kill -9``.

    Redis appends each write to an in-memory AOF buffer and ``write(2)`` s the buffer before it
    replies; once written, the data is in the kernel's page cache and outlives the process. With
    ``appendfsync everysec`` there is one exception: while the previous second's background
    ``fsync`` still runs (a busy disk), Redis postpones that ``write(2)`` for up to 2 s yet sends the
    replies (``docs/architecture.md``, "Durability"), so a crash right after acknowledged writes can
    lose them. An empty buffer (``aof_buffer_length`` 0), read after the writes were acknowledged,
    means they are in the file; after a failed write (``aof_last_write_status`` err) Redis keeps the
    buffer and retries, so that is waited out too. ``aof_pending_bio_fsync`` is not waited for: an
    fsync only matters if the machine dies, not the process.
    """
    def written() -> bool:
        info = client.info("persistence")
        assert info["aof_enabled"], "Redis runs without an AOF: nothing survives a kill -9"
        return info["aof_last_write_status"] == "ok" and int(info["aof_buffer_length"]) == 0
    wait_for(written, timeout, "Redis to write its AOF buffer (acknowledged writes survive a kill -9)")
