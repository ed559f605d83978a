"""Pod admission: the kubelet's admit handlers, run when a pod bound to one of our nodes first appears.

Upstream counterpart: ``pkg/kubelet/lifecycle/predicate.go`` (``predicateAdmitHandler``:
``generalFilter`` - the node's pod count and the requests of the pods already admitted against
allocatable, then node affinity / node selector, then NoExecute taints) and the kubelet's
``rejectPod``. Reasons and messages are upstream's: ``OutOfpods``, ``OutOfcpu``, ``OutOfmemory``,
``OutOfephemeral-storage``, ``OutOf<extended>`` (``Node didn't have enough resource: cpu,
requested: 600, used: 600, capacity: 1000``), ``NodeAffinity``, ``TaintToleration``; a pod whose
behaviour annotations do not parse is rejected with ``UnexpectedAdmissionError``. A rejected pod
goes ``Failed`` with ``Pod was rejected: <message>`` - this is what catches pods created with
``spec.nodeName`` preset, which skip the store's room check.

Admission also holds what an admitted pod takes from its node until it finishes: its requests,
its pod count, its pod IP (from the node's podCIDR) and its GPU devices (the device manager's
``Allocate``, :mod:`~emulator.kubelet.devicemanager`: a pod no single device can hold is rejected
``UnexpectedAdmissionError`` whatever the node total says).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from emulator.api.nodeaffinity import RequiredNodeAffinity
from emulator.api.pods import pod_requests
from emulator.api.quantity import QuantityError
from emulator.api.taints import find_untolerated_taint, taint_of
from emulator.kubelet import kubelet_metrics as km
from emulator.kubelet.devicemanager import DeviceManager
from emulator.kubelet.images import ImageManager
from emulator.kubelet.profiles import PROFILE_ANNOTATION, PodBehaviour, ProfileError, ProfileLibrary, parse_duration
from emulator.kubelet.state import DONE, NodeRecord, PodRecord, ShardState

INIT_DURATION_ANNOTATION = "kemu.io/init-duration"
TERMINATION_DELAY_ANNOTATION = "kemu.io/termination-delay"
_NATIVE_ORDER = ("cpu", "memory", "ephemeral-storage")
_REASON_OF = {"cpu": "OutOfcpu", "memory": "OutOfmemory", "ephemeral-storage": "OutOfephemeral-storage",
              "pods": "OutOfpods"}
_NODE_AFFINITY_DESC = "node(s) didn't match Pod's node affinity/selector"
_TAINT_DESC = "node(s) had untolerated taint(s)"


class ResolveCache:
    """The model's profile library, reusing the resolution admission already did for a pod.

    Resolving a pod's behaviour (annotations, profile, seeded draws) costs ~0.1 ms; admission
    does it to reject bad annotations, and the model does it again when the containers are
    created. The model only calls ``resolve`` and ``get``, so this stands in for the library.
    """

    def __init__(self, library: ProfileLibrary) -> None:
        self.library = library
        self._kept: dict[str, PodBehaviour] = {}

    def keep(self, behaviour: PodBehaviour) -> None:
        self._kept[behaviour.uid] = behaviour

    def drop(self, uid: str) -> None:
        self._kept.pop(uid, None)

    def resolve(self, pod: Mapping[str, Any], *, seed: int, default: str | None = None) -> PodBehaviour:
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        kept = self._kept.pop(uid, None)
        return kept if kept is not None else self.library.resolve(pod, seed=seed, default=default)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.library, name)


class PodAdmission:
    """Admit handlers and the resources admitted pods hold on their nodes."""

    def __init__(self, state: ShardState, resolved: ResolveCache, images: ImageManager) -> None:
        self.state = state
        self.resolved = resolved
        self.images = images
        self.devices = DeviceManager(state)
        self._init_duration = parse_duration(state.config.init_duration)
        self._termination_delay = parse_duration(state.config.termination_delay)

    def admit(self, rec: PodRecord, node: NodeRecord, now: float) -> bool:
        """``canAdmitPod`` and the allocation after it: True when the pod may start, else it is rejected."""
        rejection = self.check(rec, node)
        if rejection is None:
            try:
                self.parse_behaviour(rec, node)
            except (ProfileError, ValueError, QuantityError) as e:
                rejection = ("UnexpectedAdmissionError", f"Allocate failed due to {e}, which is unexpected")
        if rejection is None:
            rejection = self.devices.allocate(rec, node)
        if rejection is not None:
            self.reject(rec, *rejection, now=now)
            return False
        if not self.allocate_ip(rec, node):
            self.devices.release(rec)
            self.reject(rec, "UnexpectedAdmissionError", "Allocate failed due to no free pod IP on the node, "
                        "which is unexpected", now=now)
            return False
        self.account(rec, node)
        self.state.stats.admitted += 1
        return True

    def check(self, rec: PodRecord, node: NodeRecord) -> tuple[str, str] | None:
        """The kubelet's ``generalFilter``: resources (pods first), node affinity, NoExecute taints."""
        pod = rec.obj
        alloc, used = node.alloc, node.used
        allowed_pods = alloc.get("pods", 110)
        if len(node.pods) + 1 > allowed_pods:
            return "OutOfpods", (f"Node didn't have enough resource: pods, requested: 1, used: {len(node.pods)}, "
                                 f"capacity: {allowed_pods}")
        rec.requests = {k: v for k, v in pod_requests(pod).items() if v}
        names = [r for r in _NATIVE_ORDER if r in rec.requests]
        names += sorted(r for r in rec.requests if r not in _NATIVE_ORDER)
        for name in names:
            want = rec.requests[name]
            if name not in _NATIVE_ORDER and name not in alloc:
                continue  # removeMissingExtendedResources: cluster-level resources are not the node's business
            have, taken = alloc.get(name, 0), used.get(name, 0)
            if want > have - taken:
                reason = _REASON_OF.get(name, f"OutOf{name}")
                return reason, (f"Node didn't have enough resource: {name}, requested: {want}, used: {taken}, "
                                f"capacity: {have}")
        spec = pod.get("spec") or {}
        labels = (node.obj.get("metadata") or {}).get("labels") or {}
        affinity = RequiredNodeAffinity.of(spec.get("nodeSelector") or {}, spec.get("affinity"))
        if not affinity.matches(labels, node.name):
            return "NodeAffinity", f"Predicate NodeAffinity failed: {_NODE_AFFINITY_DESC}"
        taints = [taint_of(t) for t in (node.obj.get("spec") or {}).get("taints") or ()]
        if taints and find_untolerated_taint(taints, spec.get("tolerations") or [], frozenset({"NoExecute"})):
            return "TaintToleration", f"Predicate TaintToleration failed: {_TAINT_DESC}"
        return None

    def parse_behaviour(self, rec: PodRecord, node: NodeRecord) -> None:
        """Check the pod's behaviour annotations now (admission), not when its containers are created."""
        annotations = (rec.obj.get("metadata") or {}).get("annotations") or {}
        node_default = ((node.obj.get("metadata") or {}).get("annotations") or {}).get(PROFILE_ANNOTATION)
        behaviour = self.resolved.library.resolve(rec.obj, seed=self.state.model.config.seed, default=node_default)
        self.resolved.keep(behaviour)  # the model resolves it again when the containers are created
        text = annotations.get(TERMINATION_DELAY_ANNOTATION)
        rec.termination_delay = parse_duration(text) if text else self._termination_delay
        for c in rec.init:
            self.init_duration_of(rec, c)
        for c in [*rec.init, *rec.apps]:
            self.images.size_of(rec, c)

    def init_duration_of(self, rec: PodRecord, container: Mapping[str, Any]) -> float:
        annotations = (rec.obj.get("metadata") or {}).get("annotations") or {}
        text = annotations.get(f"{INIT_DURATION_ANNOTATION}.{container.get('name')}") or annotations.get(
            INIT_DURATION_ANNOTATION)
        return parse_duration(text) if text else self._init_duration

    def reject(self, rec: PodRecord, reason: str, message: str, *, now: float) -> None:
        """``rejectPod``: Warning event and a Failed status with the reason."""
        state = self.state
        state.stats.rejected += 1
        km.ADMISSION_REJECTIONS.labels(state.label, reason).inc()
        state.pod_event(rec, "Warning", reason, message, at=now)
        status = dict(rec.obj.get("status") or {})
        status.update({"phase": "Failed", "reason": reason, "message": f"Pod was rejected: {message}"})
        rec.final = status
        rec.stage = DONE
        state.dirty_pods.add(rec.uid)

    def forget(self, uid: str) -> None:
        """The pod is gone: drop the behaviour admission resolved for it."""
        self.resolved.drop(uid)

    def account(self, rec: PodRecord, node: NodeRecord) -> None:
        # A pod admitted by an earlier incarnation of the shard gets its devices back from its annotation.
        self.devices.allocate(rec, node, restoring=True)
        node.pods.add(rec.uid)
        for name, amount in rec.requests.items():
            node.used[name] = node.used.get(name, 0) + amount

    def release(self, rec: PodRecord) -> None:
        node = self.state.nodes.get(rec.node)
        if node is None or rec.uid not in node.pods:
            return
        node.pods.discard(rec.uid)
        self.devices.release(rec)
        for name, amount in rec.requests.items():
            node.used[name] = node.used.get(name, 0) - amount
        if rec.ip_index >= 0:
            node.ips_used.discard(rec.ip_index)

    @staticmethod
    def allocate_ip(rec: PodRecord, node: NodeRecord, wanted: str | None = None) -> bool:
        net = node.net
        if net is None:
            return True  # no podCIDR: no pod IP (host-network-like), as a kubelet without CNI ranges
        last = net.num_addresses - 2
        if wanted:
            try:
                index = int(ipaddress.ip_address(wanted)) - int(net.network_address)
            except ValueError:
                index = -1
            if 0 < index <= last and index not in node.ips_used:
                node.ips_used.add(index)
                rec.ip_index, rec.ip = index, wanted
                return True
        for _ in range(max(last - 1, 0)):
            index = node.ip_next
            node.ip_next = index + 1 if index < last else 2
            if index not in node.ips_used:
                node.ips_used.add(index)
                rec.ip_index = index
                rec.ip = str(net.network_address + index)
                return True
        return False
