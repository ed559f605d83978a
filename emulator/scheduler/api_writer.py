"""The scheduler's API writer: pod conditions, nominations, preemption victims and events, off the hot threads.

kemu's own piece, carrying what upstream does inline in
``pkg/scheduler/schedule_one.go`` (``handleSchedulingFailure`` ->
``updatePod``: PodScheduled=False and ``status.nominatedNodeName``),
``framework/preemption/preemption.go`` (``PrepareCandidate``: victims get
DisruptionTarget and are deleted, lower nominations cleared) and client-go's
event recorder (Scheduled / FailedScheduling / Preempted). One thread
consumes a queue the scheduling and bind threads fill; events are batched
(``_EVENT_BATCH``, or after ``_EVENT_FLUSH_SECONDS``) so that a thousand
Scheduled events a second cost a few store round trips.
"""

from __future__ import annotations

import itertools
import logging
import queue as queue_mod
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from emulator.api.errors import StatusError
from emulator.api.kinds import EVENT, POD
from emulator.clock import Clock, rfc3339
from emulator.scheduler.framework.types import PodInfo
from emulator.scheduler.queue import ASSIGNED_POD_DELETE, SchedulingQueue

if TYPE_CHECKING:
    from emulator.scheduler.scheduler import SchedulerClient, SchedulerOptions

__all__ = ["ApiWriter", "pod_event"]

log = logging.getLogger(__name__)


def _ignore(obj: Any) -> None:
    """No reader to hand a write's result to (a writer without informers, tests)."""


_MAX_EVENT_MESSAGE = 1024  # upstream truncates event notes at 1 KiB
_EVENT_BATCH = 256
_EVENT_FLUSH_SECONDS = 0.05
_MAX_AWAITED = 4096  # events wait at most this long for company: one store round trip per batch
# Preemptions carried out at once (upstream runs each async preemption in a goroutine of its own): their writes are
# store round trips, which overlap; one at a time, a preemption's writes waited for the scheduling thread's GIL
# after every round trip and the writer fell behind the preemptions the loop decided.
PREEMPTION_WORKERS = 4


class ApiWriter:
    """The writes a scheduler makes besides binds, on one thread (:meth:`run`), in the order they were asked for.

    ``options.record_events`` (read on every write) turns the events off;
    ``queue`` is the scheduler's, whose nominator preemption updates.
    """

    def __init__(self, client: SchedulerClient, *, name: str, clock: Clock, options: SchedulerOptions,
                 queue: SchedulingQueue) -> None:
        self.client = client
        self.name = name
        self.clock = clock
        self.options = options
        self.queue = queue
        self._q: queue_mod.SimpleQueue[tuple[str, Any] | None] = queue_mod.SimpleQueue()
        # Nominations go first: a competing replica learns of one only when it is written, and until then may
        # preempt for the same room (the pod's own victims are still queued after its nomination).
        self._urgent: deque[tuple[PodInfo, str, str, str, str | None, bool]] = deque()
        self._seq = itertools.count()
        self._nominated_seq: dict[str, int] = {}  # pod -> when its latest urgent nomination was handed over
        self._preempting: set[str] = set()  # preemptors whose victims are not all handled yet
        self._held: set[str] = set()  # of those, the ones attempted (and held) while their preemption ran
        # Preemptor -> (node, victims asked to go whose going the scheduler's cache has not shown yet).
        self._awaiting: dict[str, tuple[str, frozenset[str]]] = {}
        self._preempting_lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None  # carries out preemptions (see PREEMPTION_WORKERS)
        # Writes the event batches: a batch takes tens of milliseconds on a busy machine, and a nomination queued
        # behind it is that much later for a competing replica (upstream's event broadcaster is its own goroutine).
        self._events_pool: ThreadPoolExecutor | None = None
        # What the thread spent: kind -> [writes, seconds]; "preempt_queued": seconds preemptions waited in line.
        self._timings: dict[str, list[float]] = {}
        # The scheduler's informers' reader (Multiplexer.remember, set by Scheduler.attach): each write's result
        # is handed to it, so this process's own nominations and victims' writes are not decoded again when their
        # watch events come back (a bind's are already; docs/performance.md, "PreemptionBasic, third pass").
        self.remember: Callable[[Any], None] = _ignore

    # ------------------------------------------------------------------ what the other threads hand over
    def event(self, event: dict[str, Any]) -> None:
        """Write this event (batched with others)."""
        self._q.put(("event", event))

    def failure(self, info: PodInfo, profile: str, reason: str, message: str, *, nominated: str | None,
                clear_nominated: bool) -> None:
        """Write PodScheduled=False, the nomination and a FailedScheduling event (see :meth:`_write_failure`);
        a new nomination is written before the writes queued earlier."""
        payload = (info, profile, reason, message, nominated, clear_nominated)
        seq = next(self._seq)
        if nominated:
            self._nominated_seq[info.key] = seq
            self._urgent.append(payload)
            self._q.put(("urgent", None))
        else:
            self._q.put(("failed", (seq, payload)))

    def preemption(self, preemptor: PodInfo, node: str, victims: Sequence[Any], profile: str) -> None:
        """Evict the victims PostFilter chose (see :meth:`_execute_preemption`)."""
        keys = frozenset(v.key if isinstance(v, PodInfo) else PodInfo(v).key for v in victims)
        with self._preempting_lock:
            self._preempting.add(preemptor.key)
            if len(self._awaiting) >= _MAX_AWAITED:  # preemptors deleted before retrying never drop theirs
                self._awaiting.clear()  # (forgetting only makes a preemptor wait less)
            self._awaiting[preemptor.key] = (node, keys)
        self._q.put(("preempt", (preemptor, node, victims, profile, time.perf_counter())))

    def is_preempting(self, key: str) -> bool:
        """Whether pod ``key``'s preemption is still being carried out (upstream async preemption's
        ``IsPodRunningPreemption``): it must not preempt again meanwhile."""
        with self._preempting_lock:
            if key in self._preempting:
                self._held.add(key)
                return True
            return False

    def awaited_victims(self, key: str) -> tuple[str, frozenset[str]] | None:
        """(node, victims) of pod ``key``'s latest preemption until :meth:`victims_seen` (a victim whose deletion
        failed is left out): the scheduling loop holds the pod from preempting again until its cache shows them
        terminating or gone -- the API writer is done before the pod informer delivers what it wrote."""
        with self._preempting_lock:
            return self._awaiting.get(key)

    def awaited_on(self, node: str) -> set[str]:
        """The victims on ``node`` of every preemption whose victims the cache has not shown going yet."""
        with self._preempting_lock:
            return {victim for where, victims in self._awaiting.values() if where == node for victim in victims}

    def victims_seen(self, key: str) -> None:
        """Pod ``key``'s victims are terminating or gone in the cache (or it was scheduled): stop tracking them."""
        with self._preempting_lock:
            self._awaiting.pop(key, None)

    def timings(self) -> dict[str, list[float]]:
        """kind -> [count, seconds] of what the thread did (``preempt_queued``: preemptions' time in line,
        ``preempt_execute``: carrying them out on the workers)."""
        with self._preempting_lock:
            return {k: list(v) for k, v in self._timings.items()}

    def _timed(self, kind: str, seconds: float) -> None:
        with self._preempting_lock:  # the writer thread and the preemption workers
            entry = self._timings.get(kind)
            if entry is None:
                entry = self._timings[kind] = [0, 0.0]
            entry[0] += 1
            entry[1] += seconds

    def close(self) -> None:
        """Make :meth:`run` flush what it holds and return."""
        self._q.put(None)

    def idle(self) -> bool:
        """Nothing waiting to be written and no preemption being carried out (a batch of events being written
        may still be in progress)."""
        with self._preempting_lock:
            preempting = bool(self._preempting)
        return self._q.empty() and not preempting

    # ------------------------------------------------------------------ the thread
    def run(self) -> None:
        """Write pod conditions, preemptions and events; events are batched (``_EVENT_BATCH``, or after
        ``_EVENT_FLUSH_SECONDS``) so that a thousand Scheduled events a second cost a few round trips."""
        events: list[dict[str, Any]] = []
        first = 0.0
        while True:
            wait = None if not events else first + _EVENT_FLUSH_SECONDS - time.monotonic()
            try:
                item = self._q.get(timeout=wait) if wait is None or wait > 0 else self._q.get_nowait()
            except queue_mod.Empty:
                item = ("flush", None)
            if item is None:
                if self._pool is not None:  # preemptions under way finish; their events come back on the queue
                    self._pool.shutdown(wait=True)
                    self._pool = None
                    while True:
                        try:
                            rest = self._q.get_nowait()
                        except queue_mod.Empty:
                            break
                        if rest is not None and rest[0] == "events":
                            events.extend(rest[1])
                if events:
                    self._flush_events(events)
                if self._events_pool is not None:
                    self._events_pool.shutdown(wait=True)
                    self._events_pool = None
                return
            kind, payload = item
            had = len(events)
            began = time.perf_counter()
            try:
                if self._urgent:
                    batch = []
                    while self._urgent:
                        batch.append(self._urgent.popleft())
                    events.extend(self._write_failures(batch))
                if kind == "event":
                    events.append(payload)
                elif kind == "events":
                    events.extend(payload)
                elif kind == "failed":
                    seq, (info, profile, reason, message, nominated, clear) = payload
                    if self._nominated_seq.get(info.key, -1) < seq:  # else a later nomination is written already
                        events.extend(self._write_failure(info, profile, reason, message, nominated=nominated,
                                                          clear_nominated=clear))
                elif kind == "preempt":
                    # After the nominations written above: its victims go only once its nomination is written.
                    self._timed("preempt_queued", began - payload[-1])
                    if self._pool is None:
                        self._pool = ThreadPoolExecutor(PREEMPTION_WORKERS, thread_name_prefix=f"{self.name}-preempt")
                    self._pool.submit(self._preempt, payload[:-1])
            except Exception:
                log.exception("%s: API write %s failed", self.name, kind)
            self._timed(kind, time.perf_counter() - began)
            if self._q.empty():
                self._nominated_seq.clear()  # nothing older is queued any more
            if events and not had:
                first = time.monotonic()
            if events and (kind == "flush" or len(events) >= _EVENT_BATCH
                           or time.monotonic() - first >= _EVENT_FLUSH_SECONDS):
                if self._events_pool is None:
                    self._events_pool = ThreadPoolExecutor(1, thread_name_prefix=f"{self.name}-events")
                self._events_pool.submit(self._flush_events, events)
                events = []

    def _preempt(self, payload: tuple[PodInfo, str, Sequence[Any], str]) -> None:
        """On a preemption worker: carry one preemption out, hand its events to the writer thread."""
        began = time.perf_counter()
        events: list[dict[str, Any]] = []
        try:
            events = self._execute_preemption(*payload)
        except Exception:
            log.exception("%s: preemption by %s failed", self.name, payload[0].key)
        finally:
            if events:
                self._q.put(("events", events))
            with self._preempting_lock:
                self._preempting.discard(payload[0].key)
                held = payload[0].key in self._held
                self._held.discard(payload[0].key)
            # Upstream deletes the last victim only after the preemptor left its preempting map, so that the
            # deletion event requeues a preemptor that was attempted (and held) meanwhile. Our victims go in one
            # batch before that, and their events can reach the queue first: the preemptor, held as still
            # preempting, would then sit in the unschedulable pool until an unrelated event or the 5-minute
            # flush. The same move the last deletion makes, now -- only when the preemptor was held: otherwise
            # it would move pods no deletion has moved yet (a graceful victim's goes when the pod is gone).
            if held:
                self.queue.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE)
            self._timed("preempt_execute", time.perf_counter() - began)

    def _flush_events(self, events: list[dict[str, Any]]) -> None:
        began = time.perf_counter()
        try:
            results = self.client.create_many(EVENT, events)
        except Exception:
            log.exception("%s: writing %d events failed", self.name, len(events))
            return
        finally:
            self._timed("events_flush", time.perf_counter() - began)
        for res in results:
            if isinstance(res, StatusError) and res.code != 409:
                log.debug("%s: event not written: %s", self.name, res)

    def _write_failure(self, info: PodInfo, profile: str, reason: str, message: str, *, nominated: str | None,
                       clear_nominated: bool) -> list[dict[str, Any]]:
        """Set PodScheduled=False (reason, message) and the nomination, unless the pod got bound meanwhile;
        the FailedScheduling event to write."""
        if self._update_pod_condition(info, reason, message, nominated, clear_nominated) is None:
            return []  # bound or gone meanwhile: the failure is history
        if not self.options.record_events:
            return []
        note = message if len(message) <= _MAX_EVENT_MESSAGE else message[:_MAX_EVENT_MESSAGE - 3] + "..."
        return [pod_event(info, "Warning", "FailedScheduling", "Scheduling", note, component=profile,
                          instance=self.name, now=self.clock.now())]

    def _write_failures(self, batch: list[tuple[PodInfo, str, str, str, str | None, bool]]) -> list[dict[str, Any]]:
        """:meth:`_write_failure` for each (info, profile, reason, message, nominated, clear_nominated), in order;
        the writes in one batch (one store round trip when the informer's copies are current, two else) when the
        client has ``patch_status_many``."""
        patch = getattr(self.client, "patch_status_many", None)
        if patch is None or len(batch) == 1:
            return [event for info, profile, reason, message, nominated, clear in batch
                    for event in self._write_failure(info, profile, reason, message, nominated=nominated,
                                                     clear_nominated=clear)]
        changes = [self._condition_change(reason, message, nominated, clear)
                   for _, _, reason, message, nominated, clear in batch]
        gone: set[int] = set()
        unchanged: set[int] = set()
        for i, (info, *_rest) in enumerate(batch):
            # As _patch_pod_status: the informer's copy says whether anything is to be written at all.
            meta = info.pod.get("metadata") or {}
            if not meta.get("resourceVersion"):
                continue
            if meta.get("uid") != info.uid or (info.pod.get("spec") or {}).get("nodeName"):
                gone.add(i)
            elif changes[i]({**(info.pod.get("status") or {})}) is None:
                unchanged.add(i)
        todo = [i for i in range(len(batch)) if i not in gone and i not in unchanged]

        def change(j: int, current: dict[str, Any]) -> dict[str, Any] | None:
            if (current.get("spec") or {}).get("nodeName"):
                gone.add(todo[j])  # bound meanwhile: the failure is history
                return None
            return changes[todo[j]]({**(current.get("status") or {})})

        try:
            # The informer's copies (checked above) spare the batch its read when they are current.
            outcomes: list[Any] = list(patch(POD, [(batch[i][0].namespace, batch[i][0].name, batch[i][0].uid)
                                                   for i in todo], change,
                                             known=[batch[i][0].pod for i in todo]))
        except StatusError as e:
            outcomes = [e] * len(todo)
        for i, outcome in zip(todo, outcomes, strict=True):
            if isinstance(outcome, StatusError):
                gone.add(i)
                if outcome.code not in (404, 409):
                    log.warning("%s: writing the failure of %s failed: %s", self.name, batch[i][0].key, outcome)
            elif i not in gone:
                self.remember(outcome)
        if not self.options.record_events:
            return []
        events = []
        for i, (info, profile, _, message, _, _) in enumerate(batch):
            if i not in gone:
                note = message if len(message) <= _MAX_EVENT_MESSAGE else message[:_MAX_EVENT_MESSAGE - 3] + "..."
                events.append(pod_event(info, "Warning", "FailedScheduling", "Scheduling", note, component=profile,
                                        instance=self.name, now=self.clock.now()))
        return events

    def _patch_pod_status(self, info: PodInfo, change: Callable[[dict[str, Any]], dict[str, Any] | None], *,
                          unbound_only: bool) -> bool | None:
        """Read-modify-write of a pod's status, guarded by its resourceVersion (upstream ``PatchPodStatus``).

        ``change`` gets a copy of the current status and returns the new one, or None for no change.
        Returns True when written, False when nothing changed, None when the pod is gone, was re-created,
        or (``unbound_only``) got bound meanwhile. The first try starts from the object the informer last gave
        (``info.pod``, as upstream patches the cached pod) and reads the pod only when that one was stale (409).
        """
        cached = info.pod if (info.pod.get("metadata") or {}).get("resourceVersion") else None
        for _ in range(5):
            if cached is not None:
                current, cached = cached, None
            else:
                try:
                    current = self.client.get(POD, info.namespace, info.name)
                except StatusError as e:
                    if e.code == 404:
                        return None
                    raise
            meta = current.get("metadata") or {}
            if meta.get("uid") != info.uid or (unbound_only and (current.get("spec") or {}).get("nodeName")):
                return None
            status = change({**(current.get("status") or {})})
            if status is None:
                return False
            body = {"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": info.name, "namespace": info.namespace,
                                 "resourceVersion": meta.get("resourceVersion")},
                    "status": status}
            try:
                self.remember(self.client.update_status(POD, body))
                return True
            except StatusError as e:
                if e.code == 404:
                    return None
                if e.code != 409:
                    raise
        return False

    def _update_pod_condition(self, info: PodInfo, reason: str, message: str, nominated: str | None,
                              clear_nominated: bool) -> bool | None:
        """upstream ``updatePod``: PodScheduled=False with reason and message, and the nomination; written only
        when something changes (a pod failing the same way again costs no write); None if bound or gone."""
        return self._patch_pod_status(info, self._condition_change(reason, message, nominated, clear_nominated),
                                      unbound_only=True)

    def _condition_change(self, reason: str, message: str, nominated: str | None,
                          clear_nominated: bool) -> Callable[[dict[str, Any]], dict[str, Any] | None]:
        """The status change of :meth:`_update_pod_condition` (None: nothing to change)."""
        now = rfc3339(self.clock.now())

        def change(status: dict[str, Any]) -> dict[str, Any] | None:
            conditions = [dict(c) for c in status.get("conditions") or ()]
            old = next((c for c in conditions if c.get("type") == "PodScheduled"), None)
            transition = old.get("lastTransitionTime") if old and old.get("status") == "False" else now
            new = {"type": "PodScheduled", "status": "False", "reason": reason, "message": message,
                   "lastProbeTime": None, "lastTransitionTime": transition}
            want = nominated if nominated else ("" if clear_nominated else status.get("nominatedNodeName"))
            if (old is not None and all(old.get(k) == new[k] for k in ("status", "reason", "message"))
                    and (status.get("nominatedNodeName") or "") == (want or "")):
                return None
            status["conditions"] = [c for c in conditions if c.get("type") != "PodScheduled"] + [new]
            if want:
                status["nominatedNodeName"] = want
            else:
                status.pop("nominatedNodeName", None)
            return status

        return change

    def _execute_preemption(self, preemptor: PodInfo, node: str, victims: Sequence[Any],
                            profile: str) -> list[dict[str, Any]]:
        """Carry out what PostFilter chose (upstream ``PrepareCandidate``); the Preempted events to write.

        Each victim gets ``DisruptionTarget=True`` (reason ``PreemptionByScheduler``) and is deleted, with its
        normal grace period; lower-priority pods nominated to the same node lose that nomination.
        """
        events = []
        message = f"{profile}: preempting to accommodate a higher priority pod"

        def disruption(status: dict[str, Any]) -> dict[str, Any] | None:
            conditions = [dict(c) for c in status.get("conditions") or ()]
            old = next((c for c in conditions if c.get("type") == "DisruptionTarget"), None)
            if old is not None and old.get("status") == "True" and old.get("reason") == "PreemptionByScheduler":
                return None
            status["conditions"] = [c for c in conditions if c.get("type") != "DisruptionTarget"] + [
                {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
                 "message": message, "lastProbeTime": None, "lastTransitionTime": rfc3339(self.clock.now())}]
            return status

        infos = [victim if isinstance(victim, PodInfo) else PodInfo(victim) for victim in victims]
        # prepareCandidate: a victim whose graceful deletion has started already gets no API call (nor event).
        infos = [v for v in infos if not (v.pod.get("metadata") or {}).get("deletionTimestamp")]
        batch = getattr(self.client, "update_status_and_delete_many", None)
        if batch is not None:  # upstream deletes the victims in parallel: here, one batch of store round trips
            try:
                # The informer's copies spare the batch its read when they are current (it reads what is not).
                outcomes: list[Any] = list(batch(POD, [(v.namespace, v.name, v.uid) for v in infos], disruption,
                                                 known=[v.pod for v in infos]))
            except StatusError as e:
                outcomes = [e] * len(infos)
        else:
            outcomes = [self._preempt_one(v, disruption) for v in infos]
        for vinfo, outcome in zip(infos, outcomes, strict=True):
            if not isinstance(outcome, StatusError) and isinstance(outcome, Mapping):
                self.remember(outcome)  # the object as the delete left it (deleted, or marked for deletion)
            if isinstance(outcome, StatusError):
                if outcome.code not in (404, 409):  # a 404 or 409 (another uid): the victim is gone already
                    log.warning("%s: preempting %s failed: %s", self.name, vinfo.key, outcome)
                    self._not_awaited(preemptor.key, vinfo.key)
                continue
            if self.options.record_events:
                events.append(pod_event(vinfo, "Normal", "Preempted", "Preempting",
                                        f"Preempted by pod {preemptor.uid} on node {node}", component=profile,
                                        instance=self.name, now=self.clock.now()))

        def clear(status: dict[str, Any]) -> dict[str, Any] | None:
            if status.get("nominatedNodeName") != node:
                return None
            status.pop("nominatedNodeName", None)
            return status

        for other in self.queue.nominated_pods_for_node(node):
            if other.priority < preemptor.priority and other.key != preemptor.key:
                self.queue.add_nominated_pod(other, "")
                self._patch_pod_status(other, clear, unbound_only=True)
        return events

    def _preempt_one(self, vinfo: PodInfo, disruption: Callable[[dict[str, Any]], dict[str, Any] | None]
                     ) -> dict[str, Any] | StatusError:
        """DisruptionTarget, then the delete, for one victim (a client without the batch); its error if any."""
        try:
            self._patch_pod_status(vinfo, disruption, unbound_only=False)
            return self.client.delete(POD, vinfo.namespace, vinfo.name,
                                      preconditions={"uid": vinfo.uid} if vinfo.uid else None)
        except StatusError as e:
            return e

    def _not_awaited(self, key: str, victim: str) -> None:
        with self._preempting_lock:
            entry = self._awaiting.get(key)
            if entry is not None:
                self._awaiting[key] = (entry[0], entry[1] - {victim})


def pod_event(info: PodInfo, type_: str, reason: str, action: str, note: str, *, component: str, instance: str,
              now: float) -> dict[str, Any]:
    """A core/v1 Event about a pod, as client-go's recorder writes it (name ``<pod>.<hex nanoseconds>``)."""
    stamp = rfc3339(now)
    micro = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now)) + f".{int((now % 1) * 1e6):06d}Z"
    nanos = time.time_ns()
    return {
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": f"{info.name}.{nanos:x}", "namespace": info.namespace},
        "involvedObject": {"apiVersion": "v1", "kind": "Pod", "namespace": info.namespace, "name": info.name,
                           "uid": info.uid},
        "reason": reason, "message": note, "type": type_, "action": action,
        "source": {"component": component}, "reportingComponent": component, "reportingInstance": instance,
        "firstTimestamp": stamp, "lastTimestamp": stamp, "eventTime": micro, "count": 1,
    }
