"""The DaemonSet controller: one pod of the template on every eligible node, updated by rolling replacement.

A re-implementation of upstream ``pkg/controller/daemon/daemon_controller.go``
(``syncDaemonSet``, ``manage``, ``podsShouldBeOnNode``, ``NodeShouldRunDaemonPod``),
``update.go`` (``rollingUpdate``) and ``pkg/controller/daemon/util`` on kemu's
controller runtime. One reconcile of a DaemonSet key:

1. **Node eligibility** (``NodeShouldRunDaemonPod``): the template's
   ``nodeSelector`` and required node affinity must match the node, and every
   ``NoSchedule``/``NoExecute`` taint must be tolerated by the template's
   tolerations plus the automatic DaemonSet ones (:data:`DAEMON_TOLERATIONS`:
   ``not-ready`` and ``unreachable`` NoExecute without seconds; ``disk-pressure``,
   ``memory-pressure``, ``pid-pressure``, ``unschedulable`` NoSchedule;
   ``network-unavailable`` NoSchedule for hostNetwork pods). A pod already on a
   node only has to keep tolerating its NoExecute taints
   (``shouldContinueRunning``).
2. **Per node** (``podsShouldBeOnNode``): an eligible node without a live pod
   gets one; failed pods are deleted (a replacement follows); duplicates beyond
   the oldest are deleted; pods on nodes that should not run them any more are
   deleted. Pods of deleted nodes are deleted too.
3. **Placement through the default scheduler**, as upstream since 1.12: the pod
   is created *unbound* with its required node affinity pinned to the node
   (:func:`replace_node_name_affinity`, upstream
   ``ReplaceDaemonSetPodNodeNameNodeAffinity``: every required term gets
   ``matchFields: metadata.name In [node]`` in place of its matchFields, keeping
   its matchExpressions; no terms → one term with only that field).
4. **Rolling update** (``rollingUpdate`` with ``maxUnavailable``; ``OnDelete``
   never replaces): pods whose ``controller-revision-hash`` differs from the
   template's are old. Old pods that are not available go at once; old
   available pods are deleted while the number of unavailable nodes stays
   within ``maxUnavailable`` (int or percent of desired, rounded up); the
   per-node step then creates the new pod.
5. **Status**: ``desiredNumberScheduled``, ``currentNumberScheduled``,
   ``numberMisscheduled``, ``numberReady``, ``numberAvailable``
   (``minReadySeconds`` on the cluster clock), ``numberUnavailable``,
   ``updatedNumberScheduled``, ``observedGeneration``.

The revision is a **hash label only**: ``controller-revision-hash`` is FNV-32a
over the template's canonical JSON (no ControllerRevision objects). This, the
ignored ``maxSurge`` and the missing failed-pod back-off are listed under
Simplifications in ``docs/architecture.md``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from emulator.api import errors
from emulator.api.kinds import DAEMONSET, NODE, POD
from emulator.api.nodeaffinity import RequiredNodeAffinity
from emulator.api.pdb import is_pod_ready
from emulator.api.selectors import LabelSelector
from emulator.api.taints import taint_of, tolerations_tolerate
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339
from emulator.controllers.runtime import (
    CONTROLLER_INDEX,
    EVENT_NORMAL,
    EVENT_WARNING,
    ControllerContext,
    PodOwnerController,
    meta_key,
    new_controller_ref,
)
from emulator.informers import ResourceEventHandlerFuncs

log = logging.getLogger(__name__)

REVISION_LABEL = "controller-revision-hash"
DEFAULT_WORKERS = 2  # kube-controller-manager --concurrent-daemonset-syncs

# pkg/controller/daemon/util AddOrUpdateDaemonPodTolerations.
DAEMON_TOLERATIONS: tuple[Obj, ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
NETWORK_UNAVAILABLE_TOLERATION: Obj = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists",
                                       "effect": "NoSchedule"}


def template_hash(template: Mapping[str, Any]) -> str:
    """FNV-32a of the template's canonical JSON, as a decimal string (upstream hashes Go's struct dump)."""
    h = 0x811C9DC5
    for byte in orjson.dumps(template, option=orjson.OPT_SORT_KEYS):
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return str(h)


def daemon_tolerations(pod_spec: Mapping[str, Any]) -> list[Obj]:
    """The template's tolerations plus the automatic DaemonSet ones it lacks."""
    out = [dict(t) for t in pod_spec.get("tolerations") or []]
    wanted = list(DAEMON_TOLERATIONS)
    if pod_spec.get("hostNetwork"):
        wanted.append(NETWORK_UNAVAILABLE_TOLERATION)
    for t in wanted:
        if t not in out:
            out.append(dict(t))
    return out


def replace_node_name_affinity(affinity: Mapping[str, Any] | None, node_name: str) -> Obj:
    """``ReplaceDaemonSetPodNodeNameNodeAffinity``: pin the required node affinity to ``node_name``."""
    field_req = {"key": "metadata.name", "operator": "In", "values": [node_name]}
    out: Obj = orjson.loads(orjson.dumps(dict(affinity or {})))
    node_affinity = out.setdefault("nodeAffinity", {})
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = (required or {}).get("nodeSelectorTerms") or []
    if not terms:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchFields": [field_req]}]}
        return out
    # Upstream assumes no term conflicts with the node; it replaces each term's matchFields.
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
        "nodeSelectorTerms": [{**term, "matchFields": [field_req]} for term in terms]}
    return out


def node_should_run(node: Obj, pod_spec: Mapping[str, Any], tolerations: list[Obj]) -> tuple[bool, bool]:
    """``NodeShouldRunDaemonPod``: (should run a new pod, should keep a running one)."""
    affinity = RequiredNodeAffinity.of(pod_spec.get("nodeSelector") or {}, pod_spec.get("affinity"))
    labels = (node.get("metadata") or {}).get("labels") or {}
    if not affinity.matches(labels, node["metadata"]["name"]):
        return False, False
    taints = [taint_of(t) for t in (node.get("spec") or {}).get("taints") or []]
    schedule = all(tolerations_tolerate(tolerations, t) for t in taints if t[2] in ("NoSchedule", "NoExecute"))
    keep = all(tolerations_tolerate(tolerations, t) for t in taints if t[2] == "NoExecute")
    return schedule, keep


def _int_or_percent(value: Any, total: int) -> int:
    """``intstr.GetScaledValueFromIntOrPercent`` rounding up, as the DaemonSet's maxUnavailable does."""
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value or 0)


def _pod_node(pod: Obj) -> str:
    """The node a daemon pod is for: its nodeName, or the node its pinned affinity names."""
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return str(node)
    required = (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for req in term.get("matchFields") or []:
            if req.get("key") == "metadata.name" and req.get("operator") == "In" and len(req.get("values") or []) == 1:
                return str(req["values"][0])
    return ""


def _ready_since(pod: Obj) -> float | None:
    """The lastTransitionTime of the pod's Ready condition (None when it has none)."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("lastTransitionTime"):
            return parse_rfc3339(cond["lastTransitionTime"])
    return None


def _available(pod: Obj, min_ready: int, now: float) -> bool:
    if not is_pod_ready(pod):
        return False
    if min_ready <= 0:
        return True
    since = _ready_since(pod)
    return since is not None and since + min_ready <= now


class DaemonSetController(PodOwnerController):
    """Reconciles DaemonSets; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("daemonset", ctx, workers=workers or int(
            ctx.option("concurrent_daemonset_syncs", DEFAULT_WORKERS)))
        self.ds_informer, self.pod_informer = self.watch_owners_and_pods(DAEMONSET)
        self.node_informer = self.watch(ctx.informers.informer_for(NODE))
        # Any node change may change eligibility: every DaemonSet looks again (upstream filters by relevance).
        self.node_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda _obj, _initial: self._enqueue_all(), update=self._update_node,
            delete=lambda _obj: self._enqueue_all()))

    # ------------------------------------------------------------ handlers
    def _enqueue_all(self) -> None:
        for ds in self.ds_informer.indexer.list():
            self.enqueue(ds)

    def _update_node(self, old: Obj, new: Obj) -> None:
        if (old["metadata"].get("labels"), (old.get("spec") or {}).get("taints")) != \
                (new["metadata"].get("labels"), (new.get("spec") or {}).get("taints")):
            self._enqueue_all()

    def _update_pod(self, old: Obj, new: Obj) -> str | None:
        key = super()._update_pod(old, new)
        if key is not None:
            min_ready = int((self.ds_informer.indexer.get_by_key(key) or {}).get("spec", {}).get("minReadySeconds")
                            or 0)
            if min_ready and not is_pod_ready(old) and is_pod_ready(new):
                # Due minReadySeconds after the pod's Ready transition, not after this handler ran: a
                # clock that moved meanwhile (a test's, from another thread) must not make it late.
                ready = _ready_since(new)
                self.queue.add_after(key, min_ready, since=ready if ready is not None else self.clock.now())
        return key

    # ------------------------------------------------------------ reconcile
    def reconcile(self, key: str) -> float | None:
        ds = self.ds_informer.indexer.get_by_key(key)
        if ds is None:
            self.expectations.delete_expectations(key)
            return None
        spec = ds.get("spec") or {}
        selector = LabelSelector.from_dict(spec.get("selector"), "spec.selector")
        template = spec.get("template") or {}
        pod_spec = template.get("spec") or {}
        tolerations = daemon_tolerations(pod_spec)
        revision = template_hash(template)
        now = self.clock.now()
        min_ready = int(spec.get("minReadySeconds") or 0)
        by_node: dict[str, list[Obj]] = {}
        for pod in self.pod_informer.indexer.by_index(CONTROLLER_INDEX, ds["metadata"]["uid"]):
            if selector.matches(pod["metadata"].get("labels")):
                by_node.setdefault(_pod_node(pod), []).append(pod)
        nodes = {n["metadata"]["name"]: n for n in self.node_informer.indexer.list()}
        eligible: dict[str, tuple[bool, bool]] = {name: node_should_run(node, pod_spec, tolerations)
                                                  for name, node in nodes.items()}

        if self.expectations.satisfied_expectations(key) and not ds["metadata"].get("deletionTimestamp"):
            to_create, to_delete = self._plan(eligible, by_node)
            if not to_create and not to_delete and (spec.get("updateStrategy") or {}).get("type") != "OnDelete":
                to_delete = self._rolling_update(ds, eligible, by_node, revision=revision, min_ready=min_ready,
                                                 now=now)
            self._sync_nodes(ds, template, tolerations, revision=revision, to_create=to_create,
                             to_delete=to_delete)

        self._update_status(ds, eligible, by_node, revision=revision, min_ready=min_ready, now=now)
        return None

    @staticmethod
    def _plan(eligible: Mapping[str, tuple[bool, bool]], by_node: Mapping[str, list[Obj]]
              ) -> tuple[list[str], list[Obj]]:
        """``podsShouldBeOnNode`` over every node: which nodes need a pod, which pods must go."""
        to_create: list[str] = []
        to_delete: list[Obj] = []
        for node, pods in by_node.items():
            if node not in eligible:
                to_delete += [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        for name, (should_run, should_keep) in eligible.items():
            pods = [p for p in by_node.get(name, []) if not p["metadata"].get("deletionTimestamp")]
            failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
            live = [p for p in pods if p not in failed]
            to_delete += failed
            if should_run and not live and not failed:
                to_create.append(name)
            elif not should_keep:
                to_delete += live
            elif len(live) > 1:
                # Keep the oldest (upstream sorts by creation time, then name).
                live.sort(key=lambda p: (p["metadata"].get("creationTimestamp") or "", p["metadata"]["name"]))
                to_delete += live[1:]
        return to_create, to_delete

    def _rolling_update(self, ds: Obj, eligible: Mapping[str, tuple[bool, bool]], by_node: Mapping[str, list[Obj]],
                        *, revision: str, min_ready: int, now: float) -> list[Obj]:
        """``rollingUpdate`` (maxUnavailable path): the old pods that may be deleted now."""
        desired = [n for n, (run, _) in eligible.items() if run]
        rolling = ((ds.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {}
        # maxUnavailable 0 only goes with maxSurge, which is not modelled: replace one node at a time then.
        max_unavailable = _int_or_percent(rolling.get("maxUnavailable", 1), len(desired)) or 1
        unavailable = 0
        old_available: list[Obj] = []
        old_unavailable: list[Obj] = []
        for node in desired:
            pods = [p for p in by_node.get(node, []) if not p["metadata"].get("deletionTimestamp")]
            if not pods:
                unavailable += 1
                continue
            pod = pods[0]
            ok = _available(pod, min_ready, now)
            if not ok:
                unavailable += 1
            if (pod["metadata"].get("labels") or {}).get(REVISION_LABEL) != revision:
                (old_available if ok else old_unavailable).append(pod)
        budget = max(0, max_unavailable - unavailable)
        return old_unavailable + old_available[:budget]

    def _sync_nodes(self, ds: Obj, template: Obj, tolerations: list[Obj], *, revision: str, to_create: Iterable[str],
                    to_delete: list[Obj]) -> None:
        """``syncNodes``: one ``create_many`` for the new pods, then the deletions, with expectations."""
        key = meta_key(ds)
        to_create = list(to_create)
        self.expectations.set_expectations(key, len(to_create), len(to_delete))
        first_error: Exception | None = None
        if to_create:
            ref = new_controller_ref(ds, DAEMONSET)
            tmeta = template.get("metadata") or {}
            bodies = []
            for node in to_create:
                spec = {**(template.get("spec") or {}), "tolerations": tolerations}
                spec["affinity"] = replace_node_name_affinity(spec.get("affinity"), node)
                meta: Obj = {"generateName": f"{ds['metadata']['name']}-"[:58],
                             "namespace": ds["metadata"]["namespace"],
                             "labels": {**(tmeta.get("labels") or {}), REVISION_LABEL: revision},
                             "ownerReferences": [ref]}
                if tmeta.get("annotations"):
                    meta["annotations"] = dict(tmeta["annotations"])
                bodies.append({"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec})
            for result in self.core.create_many(POD, bodies):
                if isinstance(result, errors.StatusError):
                    self.expectations.creation_observed(key)
                    self.event(ds, EVENT_WARNING, "FailedCreate", f"Error creating: {result.message}")
                    first_error = first_error or result
                else:
                    self.event(ds, EVENT_NORMAL, "SuccessfulCreate", f"Created pod: {result['metadata']['name']}")
        for pod in to_delete:
            first_error = first_error or self.delete_owned_pod(ds, key, pod)
        if first_error is not None:
            raise first_error

    def _update_status(self, ds: Obj, eligible: Mapping[str, tuple[bool, bool]], by_node: Mapping[str, list[Obj]],
                       *, revision: str, min_ready: int, now: float) -> None:
        """``updateDaemonSetStatus``: per node, counted as upstream; written only when it changed."""
        desired = current = misscheduled = ready = available = updated = 0
        for node in set(eligible) | set(by_node):
            pods = [p for p in by_node.get(node, []) if not p["metadata"].get("deletionTimestamp")]
            should_run = eligible.get(node, (False, False))[0]
            scheduled = [p for p in pods if (p.get("spec") or {}).get("nodeName")]
            if should_run:
                desired += 1
                if scheduled:
                    current += 1
                    pod = scheduled[0]
                    if is_pod_ready(pod):
                        ready += 1
                        if _available(pod, min_ready, now):
                            available += 1
                    if (pod["metadata"].get("labels") or {}).get(REVISION_LABEL) == revision:
                        updated += 1
            elif scheduled:
                misscheduled += 1
        status = {**(ds.get("status") or {}), "desiredNumberScheduled": desired,
                  "currentNumberScheduled": current, "numberMisscheduled": misscheduled, "numberReady": ready,
                  "numberAvailable": available, "numberUnavailable": desired - available,
                  "updatedNumberScheduled": updated,
                  "observedGeneration": int(ds["metadata"].get("generation") or 0)}
        if status != (ds.get("status") or {}):
            self.core.update_status(DAEMONSET, {**ds, "status": status})


def new_controller(ctx: ControllerContext) -> DaemonSetController:
    """The controller manager's constructor for this controller."""
    return DaemonSetController(ctx)
