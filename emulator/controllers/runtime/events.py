"""The event recorder: client-go ``tools/record`` (``event.go``, ``events_cache.go``) in kemu's shape.

:class:`EventRecorder` writes ``core/v1`` Events in upstream's shape, buffered
and written in batches (one ``create_many`` per flush); repeats of the same
(object, type, reason, message) are aggregated into ``count`` as upstream's
``EventCorrelator`` does.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

from emulator.api import errors
from emulator.api.kinds import EVENT
from emulator.api.types import Obj
from emulator.clock import Clock, rfc3339
from emulator.server.core import ServerCore

log = logging.getLogger(__name__)


EVENT_NORMAL = "Normal"
EVENT_WARNING = "Warning"


class EventRecorder:
    """Buffers Events and writes them in batches (``client-go/tools/record`` in kemu's shape).

    ``event(obj, type, reason, message)`` never blocks on the store. :meth:`flush` (called by
    the recorder's thread every ``flush_interval`` wall seconds, on ``stop``, or by hand)
    aggregates repeats — same involved object, type, reason and message — into one Event with
    a ``count``, creates new Events in one ``create_many``, and bumps the ``count`` and
    ``lastTimestamp`` of Events it wrote before (kept in a bounded LRU), as upstream's
    ``EventCorrelator`` does. Upstream's per-object spam filter is not modelled.
    """

    def __init__(self, core: ServerCore, component: str, *, clock: Clock | None = None, host: str = "",
                 flush_interval: float = 1.0, max_buffer: int = 100_000, cache_size: int = 4096) -> None:
        self.core = core
        self.component = component
        self.clock = clock or core.clock
        self.host = host
        self.flush_interval = flush_interval
        self.max_buffer = max_buffer
        self.cache_size = cache_size
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._buffer: OrderedDict[tuple[str, ...], Obj] = OrderedDict()
        self._written: OrderedDict[tuple[str, ...], Obj] = OrderedDict()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # A random start: recorders of different controllers writing events for objects of the same name at the
        # same cluster instant (a ManualClock) must not produce the same Event name.
        self._seq = itertools.count(int.from_bytes(os.urandom(4)))
        self.dropped = 0
        self.written = 0

    def event(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        meta = obj.get("metadata") or {}
        involved = {"kind": obj.get("kind", ""), "namespace": meta.get("namespace", ""), "name": meta.get("name", ""),
                    "uid": meta.get("uid", ""), "apiVersion": obj.get("apiVersion", ""),
                    "resourceVersion": meta.get("resourceVersion", "")}
        key = (involved["kind"], involved["namespace"], involved["name"], involved["uid"], event_type, reason, message)
        now = rfc3339(self.clock.now())
        with self._lock:
            pending = self._buffer.get(key)
            if pending is not None:
                pending["count"] += 1
                pending["lastTimestamp"] = now
                return
            if len(self._buffer) >= self.max_buffer:
                self.dropped += 1
                return
            self._buffer[key] = {"involvedObject": involved, "type": event_type, "reason": reason,
                                 "message": message, "firstTimestamp": now, "lastTimestamp": now, "count": 1}

    def _body(self, pending: Obj) -> Obj:
        involved = pending["involvedObject"]
        # Upstream names Events "<object>.<hex nanoseconds>"; a sequence number keeps ours unique in a batch.
        stamp = int(self.clock.now() * 1e9) + next(self._seq)
        return {"apiVersion": "v1", "kind": "Event",
                "metadata": {"name": f"{involved['name']}.{stamp:x}",
                             "namespace": involved["namespace"] or "default"},
                "involvedObject": {k: v for k, v in involved.items() if v},
                "reason": pending["reason"], "message": pending["message"],
                "source": {"component": self.component, **({"host": self.host} if self.host else {})},
                "firstTimestamp": pending["firstTimestamp"], "lastTimestamp": pending["lastTimestamp"],
                "count": pending["count"], "type": pending["type"], "eventTime": None,
                "reportingComponent": self.component, "reportingInstance": self.host}

    def flush(self) -> int:
        """Write what is buffered; returns how many Events were created or updated."""
        with self._flush_lock:
            with self._lock:
                batch, self._buffer = self._buffer, OrderedDict()
            if not batch:
                return 0
            creates: list[tuple[tuple[str, ...], Obj]] = []
            done = 0
            for key, pending in batch.items():
                previous = self._written.get(key)
                if previous is not None:
                    body = {**previous, "count": previous["count"] + pending["count"],
                            "lastTimestamp": pending["lastTimestamp"]}
                    body["metadata"] = {k: v for k, v in previous["metadata"].items() if k != "resourceVersion"}
                    try:
                        self._remember(key, self.core.update(EVENT, body))
                        done += 1
                        continue
                    except errors.StatusError as e:
                        if e.code != 404:
                            log.warning("event recorder: updating %s: %s", body["metadata"]["name"], e.message)
                            continue
                        # The Event is gone (deleted by hand or by TTL): write a fresh one.
                        creates.append((key, self._body({**pending, "count": body["count"]})))
                        continue
                creates.append((key, self._body(pending)))
            if creates:
                try:
                    results = self.core.create_many(EVENT, [b for _, b in creates])
                except Exception as e:  # the store is down: events are best-effort, as upstream's
                    log.warning("event recorder: writing %d events failed: %s", len(creates), e)
                    return done
                for (key, _), result in zip(creates, results, strict=True):
                    if isinstance(result, errors.StatusError):
                        log.debug("event recorder: %s", result.message)
                        continue
                    self._remember(key, result)
                    done += 1
            self.written += done
            return done

    def _remember(self, key: tuple[str, ...], event: Obj) -> None:
        self._written[key] = event
        self._written.move_to_end(key)
        while len(self._written) > self.cache_size:
            self._written.popitem(last=False)

    def start(self) -> EventRecorder:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name=f"events-{self.component}", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.flush_interval):
            try:
                self.flush()
            except Exception:
                log.exception("event recorder: flush failed")

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        try:
            self.flush()
        except Exception:
            log.exception("event recorder: final flush failed")
