"""The kubelet's Events: core/v1 Event objects, written in batches, deduplicated and rate-limited.

Upstream a kubelet records events through client-go's ``EventRecorder``
(``tools/record``), whose ``EventCorrelator`` does three things before a
write, and this recorder does the same per shard:

* **spam filter** (``EventSourceObjectSpamFilter``): a token bucket per
  involved object and source, burst 25, one token back every 5 minutes; an
  event without a token is dropped (and counted);
* **deduplication** (``eventLogger``): an event identical to a recent one
  (same object, type, reason, message) is not created again - the existing
  Event's ``count`` goes up and its ``lastTimestamp`` moves (an update);
* naming: ``<object name>.<hex nanoseconds>`` in the object's namespace
  (node events go to ``default``, with the node name as the object's uid, as
  the kubelet's node reference has it).

The similar-event aggregation (``(combined from similar events)`` after ten
events differing only in message) is not done. Events are queued with their
own (cluster) timestamps and written by :meth:`EventRecorder.flush` - one
``create_many`` and one ``update_many`` per shard tick - instead of one HTTP
request each. ``mode`` ``"warnings"`` records only Warning events and
``"none"`` none (for very large runs: events are the most numerous objects a
kubelet writes, and kemu, like a cluster without ``--event-ttl`` cleanup,
keeps them).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from emulator.api import errors
from emulator.api.kinds import EVENT
from emulator.api.types import Obj
from emulator.clock import rfc3339
from emulator.server.core import ServerCore

EVENT_MODES = ("all", "warnings", "none")
_DEDUP_CACHE = 4096  # client-go maxLruCacheEntries


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """The ``involvedObject`` of an event."""

    kind: str
    namespace: str
    name: str
    uid: str
    api_version: str = "v1"

    def to_dict(self, field_path: str | None) -> Obj:
        ref: Obj = {"kind": self.kind, "name": self.name, "uid": self.uid, "apiVersion": self.api_version}
        if self.namespace:
            ref["namespace"] = self.namespace
        if field_path:
            ref["fieldPath"] = field_path
        return ref


def node_ref(name: str) -> ObjectRef:
    # The kubelet's node reference uses the node name as uid (pkg/kubelet/kubelet.go nodeRef).
    return ObjectRef("Node", "", name, name)


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at: float


class EventRecorder:
    """Queues events; :meth:`flush` writes them. Not thread-safe: one shard's tick thread uses it."""

    def __init__(self, core: ServerCore, *, component: str = "kubelet", mode: str = "all", burst: int = 25,
                 refill_seconds: float = 300.0) -> None:
        if mode not in EVENT_MODES:
            raise ValueError(f"events mode must be one of {', '.join(EVENT_MODES)}, not {mode!r}")
        self.core = core
        self.component = component
        self.mode = mode
        self.burst = burst
        self.refill_seconds = refill_seconds
        self._buckets: dict[str, _Bucket] = {}
        self._recent: OrderedDict[tuple[str, str, str, str], Obj] = OrderedDict()
        self._creates: list[tuple[tuple[str, str, str, str], Obj]] = []  # (dedup key, event) to create
        self._updates: dict[tuple[str, str, str, str], Obj] = {}
        self._last_nanos = 0
        self.dropped = 0
        self.written = 0

    def record(self, ref: ObjectRef, type_: str, reason: str, message: str, *, when: float, host: str,
               field_path: str | None = None, annotations: Mapping[str, str] | None = None) -> None:
        if self.mode == "none" or (self.mode == "warnings" and type_ != "Warning"):
            return
        if not self._take_token(ref.uid or ref.name, when):
            self.dropped += 1
            return
        key = (ref.uid, type_, reason, message)
        stamp = rfc3339(when)
        existing = self._updates.get(key) or self._recent.get(key)
        if existing is not None:
            updated = {**existing, "count": int(existing.get("count") or 1) + 1, "lastTimestamp": stamp}
            if existing.get("metadata", {}).get("resourceVersion"):
                self._updates[key] = updated
            else:  # still queued for creation in this flush: bump the pending create instead
                for i, (pending_key, pending) in enumerate(self._creates):
                    if pending is existing:
                        self._creates[i] = (pending_key, updated)
                        break
            self._remember(key, updated)
            return
        nanos = max(int(when * 1e9), self._last_nanos + 1)  # unique names even for events in the same instant
        self._last_nanos = nanos
        namespace = ref.namespace or "default"
        event: Obj = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{ref.name}.{nanos:x}", "namespace": namespace},
            "involvedObject": ref.to_dict(field_path), "reason": reason, "message": message,
            "source": {"component": self.component, "host": host},
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1, "type": type_,
            "eventTime": None, "reportingComponent": self.component, "reportingInstance": host,
        }
        if annotations:
            event["metadata"]["annotations"] = dict(annotations)
        self._creates.append((key, event))
        self._remember(key, event)

    def forget(self, uid: str) -> None:
        """The object is gone: drop its rate-limit state."""
        self._buckets.pop(uid, None)

    def pending(self) -> int:
        return len(self._creates) + len(self._updates)

    def _take_token(self, who: str, when: float) -> bool:
        bucket = self._buckets.get(who)
        if bucket is None:
            bucket = self._buckets[who] = _Bucket(float(self.burst), when)
        elif when > bucket.at:
            bucket.tokens = min(float(self.burst), bucket.tokens + (when - bucket.at) / self.refill_seconds)
            bucket.at = when
        if bucket.tokens < 1.0:
            return False
        bucket.tokens -= 1.0
        return True

    def _remember(self, key: tuple[str, str, str, str], event: Obj) -> None:
        self._recent[key] = event
        self._recent.move_to_end(key)
        while len(self._recent) > _DEDUP_CACHE:
            self._recent.popitem(last=False)

    def flush(self) -> int:
        """Write what is queued (one create round trip, one update round trip); returns events written."""
        creates, self._creates = self._creates, []
        updates, self._updates = self._updates, {}
        written = 0
        if creates:
            # Owned: the events were built here for this write (defaulting them in place spares a copy).
            results = self.core.create_many(EVENT, [event for _, event in creates], owned=True)
            for (dedup_key, event), result in zip(creates, results, strict=True):
                # The dedup cache still holds this very event (not evicted, not superseded): keep it current.
                # (A lookup per event: a map of the whole cache per flush was ~2 % of a shard's CPU.)
                key = dedup_key if self._recent.get(dedup_key) is event else None
                if isinstance(result, errors.StatusError):
                    if key is not None:
                        self._recent.pop(key, None)
                    continue
                written += 1
                if key is not None and key in self._recent:
                    self._recent[key] = result  # later duplicates update the stored event
        if updates:
            items = list(updates.items())
            results = self.core.update_many(EVENT, [e for _, e in items])
            for (key, _event), result in zip(items, results, strict=True):
                if isinstance(result, errors.StatusError):
                    self._recent.pop(key, None)
                    continue
                written += 1
                if key in self._recent:
                    self._recent[key] = result
        self.written += written
        return written
