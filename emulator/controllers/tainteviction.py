"""The taint eviction controller (NoExecute taint manager): deletes pods that do not tolerate their node's taints.

A re-implementation of upstream ``pkg/controller/tainteviction/taint_eviction.go``
(``processPodOnNode``, ``getMinTolerationTime``) on kemu's controller runtime,
keyed by pod:

* a bound pod whose node has ``NoExecute`` taints it does not all tolerate is
  deleted at once;
* a pod tolerating all of them with ``tolerationSeconds`` is deleted when the
  smallest of those seconds has passed, counted from the taint's ``timeAdded``
  (the latest one among the matched taints; upstream counts from when its
  in-memory manager saw the taint, which the timeAdded the node lifecycle
  controller writes approximates and which survives a change of leader); the key
  is requeued for that moment on the cluster clock;
* tolerations without seconds tolerate for ever.

Before deleting, the pod gets the ``DisruptionTarget`` condition (reason
``DeletionByTaintManager``), and an Event ``TaintManagerEviction`` "Marking for
deletion Pod ns/name" is recorded, as upstream. A node's taint change re-checks
every pod on it (node-name index).
"""

from __future__ import annotations

import logging

from emulator.api import errors
from emulator.api.kinds import NODE, POD
from emulator.api.taints import taint_of, tolerates
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339, rfc3339
from emulator.controllers.runtime import Controller, ControllerContext, meta_key, split_key
from emulator.informers import NODE_NAME_INDEX, ResourceEventHandlerFuncs

log = logging.getLogger(__name__)

DEFAULT_WORKERS = 8  # upstream UpdateWorkerSize


def noexecute_taints(node: Obj) -> list[Obj]:
    return [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("effect") == "NoExecute"]


def min_toleration_seconds(tolerations: list[Obj], taints: list[Obj]) -> float | None:
    """``getMinTolerationTime`` over the tolerations matching ``taints``: None = for ever, 0 = at once.

    Raises ``LookupError`` when some taint is not tolerated at all (evict at once).
    """
    used: list[Obj] = []
    for taint in taints:
        matched = [t for t in tolerations if tolerates(t, taint_of(taint))]
        if not matched:
            raise LookupError(taint.get("key"))
        used += matched
    seconds = [max(0.0, float(t["tolerationSeconds"])) for t in used if t.get("tolerationSeconds") is not None]
    return min(seconds) if seconds else None


class TaintEvictionController(Controller):
    """Evicts pods from NoExecute-tainted nodes; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("taint-eviction-controller", ctx,
                         workers=workers or int(ctx.option("concurrent_taint_eviction_syncs", DEFAULT_WORKERS)))
        self.node_informer = self.watch(ctx.informers.informer_for(NODE))
        self.pod_informer = self.watch(ctx.informers.informer_for(POD))
        self.node_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda obj, _initial: self._node_changed(obj), update=self._update_node))
        self.pod_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda obj, _initial: self._pod_changed(obj), update=self._update_pod))
        self.evicted = 0

    def _update_pod(self, old: Obj, new: Obj) -> None:
        """Upstream ``PodUpdated``: an update that keeps the pod's node and tolerations changes nothing here.

        (A status write, a deletion mark: what the pod tolerates on which node is what it was, and a
        taint change of the node re-checks its pods through the node handler.)
        """
        old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
        if old_spec.get("nodeName") == new_spec.get("nodeName") and \
                (old_spec.get("tolerations") or []) == (new_spec.get("tolerations") or []):
            return
        self._pod_changed(new)

    def _pod_changed(self, pod: Obj) -> None:
        if (pod.get("spec") or {}).get("nodeName") and not pod["metadata"].get("deletionTimestamp"):
            self.enqueue(pod)

    def _update_node(self, old: Obj, new: Obj) -> None:
        if noexecute_taints(old) != noexecute_taints(new):
            self._node_changed(new)

    def _node_changed(self, node: Obj) -> None:
        if not noexecute_taints(node):
            return
        for pod in self.pod_informer.indexer.by_index(NODE_NAME_INDEX, node["metadata"]["name"]):
            self.enqueue(pod)

    def reconcile(self, key: str) -> float | None:
        pod = self.pod_informer.indexer.get_by_key(key)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return None
        node_name = (pod.get("spec") or {}).get("nodeName")
        node = self.node_informer.indexer.get_by_key(node_name) if node_name else None
        if node is None:
            return None
        taints = noexecute_taints(node)
        if not taints:
            return None
        tolerations = (pod.get("spec") or {}).get("tolerations") or []
        now = self.clock.now()
        try:
            seconds = min_toleration_seconds(tolerations, taints)
        except LookupError:
            seconds = 0.0
        if seconds is None:
            return None
        added = [parse_rfc3339(t["timeAdded"]) for t in taints if t.get("timeAdded")]
        start = max(added) if added else now
        if seconds > 0 and start + seconds > now:
            return start + seconds - now
        self._evict(pod, now)
        return None

    def _evict(self, pod: Obj, now: float) -> None:
        meta = pod["metadata"]
        status = dict(pod.get("status") or {})
        conditions = [c for c in status.get("conditions") or [] if c.get("type") != "DisruptionTarget"]
        conditions.append({"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager",
                           "message": "Taint manager: deleting due to NoExecute taint",
                           "lastTransitionTime": rfc3339(now)})
        try:
            self.core.update_status(POD, {**pod, "status": {**status, "conditions": conditions}})
        except errors.StatusError as e:
            if e.code == 404:
                return
            if e.code != 409:
                raise
        self.event(pod, "Normal", "TaintManagerEviction", f"Marking for deletion Pod {meta_key(pod)}")
        namespace, name = split_key(meta_key(pod))
        try:
            self.core.delete(POD, namespace, name, preconditions={"uid": meta["uid"]})
        except errors.StatusError as e:
            if e.code not in (404, 409):
                raise
            return
        self.evicted += 1


def new_controller(ctx: ControllerContext) -> TaintEvictionController:
    """The controller manager's constructor for this controller."""
    return TaintEvictionController(ctx)
