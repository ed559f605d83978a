"""Pod workers: what the kubelet does with each pod bound to its nodes, from admission to deletion.

Upstream counterpart: ``pkg/kubelet/pod_workers.go`` and the ``SyncPod`` / ``SyncTerminatingPod``
paths of ``pkg/kubelet/kubelet.go`` and ``kuberuntime/kuberuntime_manager.go``: a pod is handled in
creation order (``HandlePodAdditions``), admitted (:mod:`~emulator.kubelet.admission`), then

* **start**: sandbox (pod IP, startTime) -> for each init container: image pull, run for
  ``kemu.io/init-duration`` (default 1 s), exit 0 -> image pulls of the app containers (and
  sidecars) -> the model runs the containers (startup delay, usage, exits, OOM kills,
  CrashLoopBackOff, evictions: :class:`~emulator.kubelet.model.KubeletModel`);
* **restarts**: a restart goes through the same events as a first start (Pulled, Created);
* **termination**: when ``deletionTimestamp`` appears, running containers get ``Killing`` and stop
  after ``min(kemu.io/termination-delay, grace period)`` - exit 0 if the app stopped by itself in
  time, 137 when killed at the end of the grace period; the final status is written and the pod
  deleted with grace 0 (uid precondition), as the status manager does;
* **recovery**: a pod whose status shows an earlier incarnation of the shard admitted it
  (``status.hostIP`` set, phase not terminal) is restored, not admitted again (same pod IP and
  startTime; running containers keep ``startedAt`` and ``restartCount``).

Pod workers only change pod records and mark them dirty (``ShardState.dirty_pods``); the status
manager writes them.
"""

from __future__ import annotations

import contextlib
import heapq
import logging
import math
from typing import Any

from emulator.api.meta import resource_version
from emulator.api.pods import pod_requests
from emulator.api.quantity import QuantityError
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339, rfc3339
from emulator.informers import DeletedFinalStateUnknown
from emulator.kubelet import eviction as ev
from emulator.kubelet.admission import PodAdmission
from emulator.kubelet.events import node_ref
from emulator.kubelet.images import ImageManager
from emulator.kubelet.model import TickReport
from emulator.kubelet.pod_status import POD_CONDITIONS, terminated_status
from emulator.kubelet.profiles import ProfileError
from emulator.kubelet.state import (
    APP_PULL,
    BLOCKED,
    DONE,
    INIT_PULL,
    INIT_RUN,
    MODEL,
    TERMINAL,
    TERMINATING,
    NodeRecord,
    PodRecord,
    ShardState,
)
from emulator.kubelet.usage_publisher import UsagePublisher

log = logging.getLogger(__name__)


_EVICTION_SIGNAL = {"memory": ev.MEMORY_AVAILABLE, "ephemeral-storage": ev.NODEFS_AVAILABLE, "pids": ev.PID_AVAILABLE}


class PodWorkers:
    """Every pod of a shard's nodes: queued, admitted, started, restarted, terminated, forgotten."""

    def __init__(self, state: ShardState, admission: PodAdmission, images: ImageManager,
                 usage: UsagePublisher) -> None:
        self.state = state
        self.admission = admission
        self.images = images
        self.usage = usage
        self._incoming: dict[str, Obj] = {}  # uid -> pod seen but not admitted yet
        self._orphans: dict[str, dict[str, Obj]] = {}  # node name -> uid -> pods of nodes we do not host (yet)
        self._timed: list[tuple[float, int, str]] = []  # (next_at, seq, uid): pulls and init containers
        self._kills: list[tuple[float, int, str]] = []  # (kill at, seq, uid): terminating pods
        self._seq = 0

    def node_added(self, name: str) -> None:
        """A node is hosted now: the pods that arrived for it before it did are queued for admission."""
        for uid, pod in self._orphans.pop(name, {}).items():
            self._incoming[uid] = pod

    def node_removed(self, node: NodeRecord) -> None:
        """A node is no longer hosted: forget every pod on it."""
        pods = self.state.pods
        for uid in list(node.pods):
            rec = pods.get(uid)
            if rec is not None:
                self.forget_pod(rec)
        for rec in [r for r in pods.values() if r.node == node.name]:
            self.forget_pod(rec)

    def on_pod(self, typ: str, obj: Any, now: float) -> None:
        """A pod informer event (``add`` / ``update`` / ``delete``), on the tick thread."""
        if isinstance(obj, DeletedFinalStateUnknown):
            obj = obj.obj
        meta = obj.get("metadata") or {}
        uid = meta.get("uid") or ""
        rec = self.state.pods.get(uid)
        if typ == "delete":
            self._incoming.pop(uid, None)
            node_name = (obj.get("spec") or {}).get("nodeName") or ""
            self._orphans.get(node_name, {}).pop(uid, None)
            if rec is not None:
                self.forget_pod(rec)
            return
        if rec is not None:
            if int(resource_version(obj) or 0) >= int(resource_version(rec.obj) or 0):
                rec.obj = obj
            if meta.get("deletionTimestamp") and rec.stage not in (TERMINATING, DONE):
                self._begin_termination(rec, now)
            return
        status = obj.get("status") or {}
        if status.get("phase") in TERMINAL:
            self._incoming.pop(uid, None)
            return
        node_name = (obj.get("spec") or {}).get("nodeName") or ""
        if node_name not in self.state.nodes:
            self._orphans.setdefault(node_name, {})[uid] = obj
            return
        self._incoming[uid] = obj

    def admit_incoming(self, now: float) -> None:
        """``HandlePodAdditions``: admit (or restore) the queued pods, at most ``max_admissions_per_tick``."""
        if not self._incoming:
            return
        # HandlePodAdditions admits in creation order (creationTimestamp has 1 s resolution: then by rv).
        incoming = sorted(self._incoming.values(),
                          key=lambda p: ((p.get("metadata") or {}).get("creationTimestamp") or "",
                                         int(resource_version(p) or 0)))
        if self.state.chaos.broken:
            # chaos break-runtime: the sandbox never comes up, so the pod is never admitted and stays
            # Pending (it is kept in `_incoming` and starts once the runtime is restored).
            incoming = [p for p in incoming if (p.get("spec") or {}).get("nodeName") not in self.state.chaos.broken]
        limit = max(1, self.state.config.max_admissions_per_tick)
        for pod in incoming[:limit]:
            self._incoming.pop(pod["metadata"].get("uid") or "", None)
            self._admit(pod, now)

    def _new_record(self, pod: Obj, node: NodeRecord, now: float) -> PodRecord:
        meta = pod["metadata"]
        created = meta.get("creationTimestamp")
        rec = PodRecord(meta["uid"], meta.get("namespace") or "default", meta["name"], node.name, pod, now,
                        parse_rfc3339(created) if created else now)
        spec = pod.get("spec") or {}
        inits = list(spec.get("initContainers") or ())
        rec.init = [c for c in inits if c.get("restartPolicy") != "Always"]
        sidecars = [c for c in inits if c.get("restartPolicy") == "Always"]
        rec.sidecars = frozenset(str(c.get("name")) for c in sidecars)
        rec.apps = [*sidecars, *(spec.get("containers") or ())]
        rec.init_states = [{"waiting": {"reason": "PodInitializing"}} for _ in rec.init]
        return rec

    def _admit(self, pod: Obj, now: float) -> None:
        spec = pod.get("spec") or {}
        node = self.state.nodes.get(spec.get("nodeName") or "")
        if node is None:
            return
        rec = self._new_record(pod, node, now)
        self.state.pods[rec.uid] = rec
        meta = pod.get("metadata") or {}
        status = pod.get("status") or {}
        if meta.get("deletionTimestamp"):
            # Deleted before it ever ran here: nothing to stop; confirm the deletion.
            rec.stage = DONE
            rec.delete_after_write = True
            rec.final = None
            self.state.dirty_pods.add(rec.uid)
            return
        if status.get("hostIP") and status.get("phase") not in TERMINAL:
            self._restore(rec, node, now)
            return
        if not self.admission.admit(rec, node, now):
            return
        rec.start_time = rfc3339(now)
        self._start_pipeline(rec, node, now)

    def _start_apps(self, rec: PodRecord, node: NodeRecord, t: float) -> None:
        """Init containers done (or none): pull the first app container's image, or run at once without any."""
        rec.stage, rec.step = APP_PULL, 0
        if rec.apps:
            self.images.begin_pull(rec, node, rec.apps[0], t, init=False)
        else:
            self._run_in_model(rec, node, t)

    def _start_pipeline(self, rec: PodRecord, node: NodeRecord, t: float) -> None:
        if rec.init:
            rec.stage, rec.step = INIT_PULL, 0
            self.images.begin_pull(rec, node, rec.init[0], t, init=True)
        else:
            self._start_apps(rec, node, t)
        self.state.dirty_pods.add(rec.uid)
        self._schedule(rec)

    def _schedule(self, rec: PodRecord) -> None:
        if rec.stage in (INIT_PULL, INIT_RUN, APP_PULL) and math.isfinite(rec.next_at):
            self._seq += 1
            heapq.heappush(self._timed, (rec.next_at, self._seq, rec.uid))

    def advance_timed(self, now: float) -> None:
        heap = self._timed
        while heap and heap[0][0] <= now:
            t, _, uid = heapq.heappop(heap)
            rec = self.state.pods.get(uid)
            if rec is None or rec.next_at != t or rec.stage not in (INIT_PULL, INIT_RUN, APP_PULL):
                continue
            node = self.state.nodes.get(rec.node)
            if node is None:
                continue
            self._step(rec, node, t)
            self.state.dirty_pods.add(uid)
            self._schedule(rec)

    def _step(self, rec: PodRecord, node: NodeRecord, t: float) -> None:
        """Everything of the pod's start pipeline that is due at ``t`` (several steps may be)."""
        while rec.next_at <= t and rec.stage in (INIT_PULL, INIT_RUN, APP_PULL):
            at = rec.next_at
            if rec.stage == INIT_PULL:
                self.images.finish_pull(rec, node)
                c = rec.init[rec.step]
                name = str(c.get("name"))
                self.state.pod_event(rec, "Normal", "Created", f"Created container: {name}", at=at, container=name,
                                     init=True)
                self.state.pod_event(rec, "Normal", "Started", f"Started container {name}", at=at, container=name,
                                     init=True)
                rec.init_states[rec.step] = {"running": {"startedAt": rfc3339(at)}}
                rec.stage = INIT_RUN
                duration = self.admission.init_duration_of(rec, c)
                rec.init_seconds += duration
                rec.next_at = at + duration
            elif rec.stage == INIT_RUN:
                started = rec.init_states[rec.step].get("running", {}).get("startedAt") or rfc3339(at)
                rec.init_states[rec.step] = {"terminated": {"exitCode": 0, "reason": "Completed",
                                                            "startedAt": started, "finishedAt": rfc3339(at)}}
                rec.step += 1
                if rec.step < len(rec.init):
                    rec.stage = INIT_PULL
                    self.images.begin_pull(rec, node, rec.init[rec.step], at, init=True)
                else:
                    self._start_apps(rec, node, at)
            else:  # APP_PULL
                self.images.finish_pull(rec, node)
                name = str(rec.apps[rec.step].get("name"))
                self.state.pod_event(rec, "Normal", "Created", f"Created container: {name}", at=at, container=name)
                rec.created.add(name)
                rec.step += 1
                if rec.step < len(rec.apps):
                    self.images.begin_pull(rec, node, rec.apps[rec.step], at, init=False)
                else:
                    self._run_in_model(rec, node, at)

    def _run_in_model(self, rec: PodRecord, node: NodeRecord, t: float) -> None:
        """All images are there: hand the containers to the model (it applies the startup delay)."""
        try:
            self.state.model.add_pod(rec.obj, t, node=node.name)
        except (ProfileError, KeyError, ValueError) as e:  # checked at admission; a changed node profile can do it
            log.warning("kubelet shard %d: pod %s/%s cannot run: %s", self.state.index, rec.ns, rec.name, e)
            rec.stage, rec.next_at = BLOCKED, math.inf
            rec.blocked = {"name": str(rec.apps[0].get("name")) if rec.apps else "", "init": False,
                           "waiting": {"reason": "CreateContainerConfigError", "message": str(e)}}
            return
        rec.in_model = True
        rec.stage, rec.next_at = MODEL, math.inf
        rows = self.state.model.container_rows(rec.uid)
        rec.rows = list(rows.items())
        self.state.metrics.forget_rows(list(rows.values()))

    # -------------------------------------------------------------------------------------- recovery

    def _restore(self, rec: PodRecord, node: NodeRecord, now: float) -> None:
        """Take over a pod an earlier incarnation of this shard admitted (see the module docstring)."""
        pod = rec.obj
        status = pod.get("status") or {}
        rec.requests = {k: v for k, v in pod_requests(pod).items() if v}
        self.admission.account(rec, node)
        self.admission.allocate_ip(rec, node, wanted=status.get("podIP"))
        rec.start_time = status.get("startTime") or rfc3339(now)
        rec.restored_at = now
        rec.reported_ready = True  # its start was measured by the incarnation that started it
        for cond in status.get("conditions") or ():
            if cond.get("type") in POD_CONDITIONS:
                rec.conditions[cond["type"]] = (cond.get("status", "False"), cond.get("lastTransitionTime") or "")
        self.state.stats.restored += 1
        # It ran before with these annotations; the model reports problems when it adds it.
        with contextlib.suppress(ProfileError, ValueError, QuantityError):
            self.admission.parse_behaviour(rec, node)
        statuses = {s.get("name"): s for s in [*(status.get("initContainerStatuses") or ()),
                                               *(status.get("containerStatuses") or ())]}
        app_statuses = [statuses.get(str(c.get("name"))) or {} for c in rec.apps]
        ran = any(s.get("restartCount") or "running" in (s.get("state") or {}) or (s.get("lastState") or {})
                  for s in app_statuses)
        if not ran:
            self._start_pipeline(rec, node, now)  # it was still starting: start over (images are present)
        else:
            for i, c in enumerate(rec.init):
                done = statuses.get(str(c.get("name")), {}).get("state", {}).get("terminated")
                rec.init_states[i] = {"terminated": done} if done else {
                    "terminated": {"exitCode": 0, "reason": "Completed", "startedAt": rec.start_time,
                                   "finishedAt": rec.start_time}}
            rec.created = {str(c.get("name")) for c in rec.apps}
            self._run_in_model(rec, node, now)
            if rec.in_model:
                model = self.state.model
                for name, row in rec.rows:
                    st = statuses.get(name) or {}
                    restarts = int(st.get("restartCount") or 0)
                    running = (st.get("state") or {}).get("running")
                    if running and running.get("startedAt"):
                        model.restarts[row] = restarts
                        model.start_at[row] = min(parse_rfc3339(running["startedAt"]), now)
                    else:
                        model.restarts[row] = restarts + (1 if restarts or st.get("lastState") else 0)
                        model.start_at[row] = now
                    if st.get("lastState"):
                        rec.restored_last[name] = st["lastState"]
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            self._begin_termination(rec, now)
        self.state.dirty_pods.add(rec.uid)

    def apply_report(self, report: TickReport, now: float) -> None:
        for event in report.events:
            rec = self.state.pods.get(event.pod_uid) if event.pod_uid else None
            if event.pod_uid is None:
                self.state.events.record(node_ref(event.node), event.type, event.reason, event.message, when=event.time,
                                         host=event.node, annotations=event.annotations or None)
                continue
            if rec is None:
                continue
            if event.reason == "Started" and rec.restored_at is not None and event.time < rec.restored_at:
                continue  # a restored container "starting" at its old startedAt: not a new start
            if event.reason == "Started" and event.container and self._restarted(rec, event.container):
                # A restart goes through the same steps as a first start (image present, create, start).
                image = next((str(c.get("image")) for c in rec.apps if c.get("name") == event.container), "")
                self.state.pod_event(rec, "Normal", "Pulled", f'Container image "{image}" already present on machine',
                                     at=event.time, container=event.container)
                self.state.pod_event(rec, "Normal", "Created", f"Created container: {event.container}", at=event.time,
                                     container=event.container)
            if event.reason == ev.EVICTED_REASON:
                signal = _EVICTION_SIGNAL.get(event.annotations.get("starved_resource", ""), "unknown")
                self.state.metrics.evictions[signal] = self.state.metrics.evictions.get(signal, 0) + 1
            self.state.pod_event(rec, event.type, event.reason, event.message, at=event.time, container=event.container,
                                 annotations=event.annotations or None)
        self.state.dirty_pods.update(uid for uid in report.changed_pods if uid in self.state.pods)

    def _restarted(self, rec: PodRecord, container: str) -> bool:
        row = next((r for n, r in rec.rows if n == container), None)
        return row is not None and int(self.state.model.restarts[row]) > 0

    # ----------------------------------------------------------------------------------- termination

    def _begin_termination(self, rec: PodRecord, now: float) -> None:
        meta = rec.obj.get("metadata") or {}
        grace = float(meta.get("deletionGracePeriodSeconds") or 0)
        if rec.stage in (MODEL, TERMINATING) and rec.in_model:
            running = [name for name, row in rec.rows if int(self.state.model.state[row]) == 2]
            for name in running:
                self.state.pod_event(rec, "Normal", "Killing", f"Stopping container {name}", at=now, container=name)
            stop_after = rec.termination_delay if running else 0.0
            rec.kill_exit = 137 if stop_after > grace else 0
            kill_at = now + min(stop_after, grace)
            self.state.model.begin_termination(rec.uid)  # SIGTERM: a queue worker takes no new item
        else:
            rec.kill_exit = 0
            kill_at = now
        rec.stage = TERMINATING
        rec.next_at = kill_at
        self._seq += 1
        heapq.heappush(self._kills, (kill_at, self._seq, rec.uid))

    def advance_kills(self, now: float) -> None:
        heap = self._kills
        while heap and heap[0][0] <= now:
            t, _, uid = heapq.heappop(heap)
            rec = self.state.pods.get(uid)
            if rec is None or rec.stage != TERMINATING or rec.next_at != t:
                continue
            rec.final = terminated_status(rec, self.state.nodes.get(rec.node), self.state.model, t)
            self.finish(rec)
            rec.delete_after_write = True
            self.state.dirty_pods.add(uid)

    def finish(self, rec: PodRecord) -> None:
        """The pod's containers are gone: leave the model, free its room and IP; only its status write remains."""
        if rec.in_model:
            self.state.model.remove_pod(rec.uid)
            rec.in_model = False
            rec.rows = []
        self.admission.release(rec)
        rec.stage = DONE
        rec.next_at = math.inf
        self.usage.pod_gone((rec.ns, rec.name))

    def forget_pod(self, rec: PodRecord) -> None:
        """The pod was deleted from the store."""
        self.admission.forget(rec.uid)
        if rec.in_model:
            self.state.model.remove_pod(rec.uid)
            rec.in_model = False
        self.admission.release(rec)
        self.state.pods.pop(rec.uid, None)
        self.state.dirty_pods.discard(rec.uid)
        self.state.events.forget(rec.uid)
        self.usage.pod_gone((rec.ns, rec.name))
