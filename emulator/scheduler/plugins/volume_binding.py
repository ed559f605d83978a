"""VolumeBinding: a pod's PersistentVolumeClaims must be bindable on the node.

Upstream ``pkg/scheduler/framework/plugins/volumebinding/`` (``volume_binding.go``,
``binder.go``) and ``component-helpers/storage/volume/pv_helpers.go``
(``FindMatchingVolume``, ``CheckNodeAffinity``).

PreFilter classifies the pod's claims (``persistentVolumeClaim`` volumes, and
generic ``ephemeral`` volumes, whose claim is ``<pod>-<volume>``):

* a missing claim is UnschedulableAndUnresolvable (``persistentvolumeclaim
  "x" not found``; for an ephemeral volume, ``waiting for ephemeral volume
  controller to create the persistentvolumeclaim "x"``), as is a claim being
  deleted or Lost;
* **bound** claims (``spec.volumeName`` set): their PV's node affinity must
  match the node. When those PVs pin ``kubernetes.io/hostname In (...)`` the
  PreFilterResult narrows the nodes to those names;
* unbound claims of a ``WaitForFirstConsumer`` StorageClass are bound at
  scheduling time: on each node the smallest Available PV of the same class
  with enough capacity, the claim's access modes and volume mode, the claim's
  selector and node affinity matching the node is chosen (a PV pre-bound to
  the claim wins); claims without one must be dynamically provisionable there
  -- the class has a provisioner other than ``kubernetes.io/no-provisioner``
  and its ``allowedTopologies`` match the node;
* any other unbound claim (Immediate binding) makes the pod
  UnschedulableAndUnresolvable: ``pod has unbound immediate
  PersistentVolumeClaims``.

Filter reasons (UnschedulableAndUnresolvable, in upstream's order):
``node(s) had volume node affinity conflict``, ``node(s) didn't find
available persistent volumes to bind``, ``node(s) unavailable due to one or
more pvc(s) bound to non-existent pv(s)``.

Binding. kemu has no PV controller: Reserve records the node's decision -- a
:class:`PodVolumes` with the static bindings (PV, claim) and the claims to
provision -- under the plugin's CycleState entry, where :func:`decision` reads
it, and PreBind succeeds without writing (upstream writes the bindings and the
``selected-node`` annotation). This and the missing storage-capacity checks are
listed under Simplifications in ``docs/architecture.md``.

Per node only (no ``filter_all``): the plugin matters only for pods with
claims -- PreFilter answers Skip for every other pod -- and its work is per
PV, not per node column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from emulator.api.nodeaffinity import is_empty_term, parse_node_selector_term
from emulator.api.quantity import parse_quantity
from emulator.api.selectors import LabelSelector
from emulator.scheduler.framework.interface import Code, CycleState, Handle, PreFilterResult, Status
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import NodeInfo, PodInfo
from emulator.scheduler.plugins.listers import PVCS, PVS, STORAGECLASSES, ObjectLister, lister_for

__all__ = [
    "ERR_REASON_BIND_CONFLICT",
    "ERR_REASON_NODE_CONFLICT",
    "ERR_REASON_PV_NOT_EXIST",
    "NAME",
    "PodVolumes",
    "VolumeBinding",
    "claim_class",
    "decision",
    "new",
    "pod_claim_names",
    "pv_node_affinity_matches",
]

NAME = "VolumeBinding"
STATE_KEY = NAME
ERR_REASON_BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
ERR_REASON_NODE_CONFLICT = "node(s) had volume node affinity conflict"
ERR_REASON_NOT_ENOUGH_SPACE = "node(s) did not have enough free storage"
ERR_REASON_PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"
ERR_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

WAIT_FOR_FIRST_CONSUMER = "WaitForFirstConsumer"
NOT_SUPPORTED_PROVISIONER = "kubernetes.io/no-provisioner"
BETA_STORAGE_CLASS_ANNOTATION = "volume.beta.kubernetes.io/storage-class"
SELECTED_NODE_ANNOTATION = "volume.kubernetes.io/selected-node"
LABEL_HOSTNAME = "kubernetes.io/hostname"


# -- shared volume helpers (VolumeZone uses them too) ----------------------------------------------------------


def pod_claim_names(pod: PodInfo) -> list[tuple[str, bool]]:
    """(claim name, is generic ephemeral) for every claim-backed volume of the pod, in volume order."""
    out = []
    for volume in (pod.pod.get("spec") or {}).get("volumes") or ():
        if volume.get("persistentVolumeClaim") is not None:
            out.append(((volume["persistentVolumeClaim"] or {}).get("claimName") or "", False))
        elif volume.get("ephemeral") is not None:
            out.append((f"{pod.name}-{volume.get('name') or ''}", True))  # ephemeral.VolumeClaimName
    return out


def claim_class(pvc: Mapping[str, Any]) -> str:
    """``GetPersistentVolumeClaimClass``: the beta annotation wins over ``spec.storageClassName``."""
    annotations = (pvc.get("metadata") or {}).get("annotations") or {}
    if BETA_STORAGE_CLASS_ANNOTATION in annotations:
        return str(annotations[BETA_STORAGE_CLASS_ANNOTATION])
    return (pvc.get("spec") or {}).get("storageClassName") or ""


def volume_class(pv: Mapping[str, Any]) -> str:
    """``GetPersistentVolumeClass``: the beta annotation wins over ``spec.storageClassName``."""
    return claim_class(pv)


def _name(obj: Mapping[str, Any]) -> str:
    return (obj.get("metadata") or {}).get("name") or ""


def pv_node_affinity_matches(pv: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """``CheckNodeAffinity``: the PV's required node selector terms (ORed) match a node with ``labels``.

    Like upstream, only labels are known to the check (a ``matchFields`` on
    ``metadata.name`` compares against an empty name).
    """
    required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required")
    if required is None:
        return True
    for i, term in enumerate(required.get("nodeSelectorTerms") or ()):
        if is_empty_term(term):
            continue
        parsed, _ = parse_node_selector_term(term, f"nodeSelectorTerms[{i}]")
        if parsed is not None and parsed.matches(labels, ""):
            return True
    return False


def _storage(obj: Mapping[str, Any], *path: str) -> int:
    value: Any = obj
    for key in path:
        value = (value or {}).get(key)
    return parse_quantity(value).value() if value is not None else 0


def _bound_to_claim(pv: Mapping[str, Any], pvc: Mapping[str, Any]) -> bool:
    """``IsVolumeBoundToClaim``: the PV's claimRef names the claim (and its uid, when set)."""
    ref = (pv.get("spec") or {}).get("claimRef")
    if not ref:
        return False
    meta = pvc.get("metadata") or {}
    if ref.get("name") != meta.get("name") or (ref.get("namespace") or "") != (meta.get("namespace") or ""):
        return False
    return not ref.get("uid") or ref.get("uid") == meta.get("uid")


def find_matching_volume(pvc: Mapping[str, Any], volumes: Sequence[Mapping[str, Any]], labels: Mapping[str, str],
                         excluded: Iterable[str]) -> Mapping[str, Any] | None:
    """``FindMatchingVolume`` on the scheduler path: the PV pre-bound to the claim, else the smallest fitting one."""
    spec = pvc.get("spec") or {}
    requested = _storage(spec, "resources", "requests", "storage")
    requested_class = claim_class(pvc)
    requested_mode = spec.get("volumeMode") or "Filesystem"
    wanted_modes = set(spec.get("accessModes") or ())
    selector = LabelSelector.from_dict(spec["selector"]) if spec.get("selector") is not None else None
    skip = set(excluded)
    best: Mapping[str, Any] | None = None
    best_size = 0
    for pv in volumes:
        pv_spec = pv.get("spec") or {}
        if _name(pv) in skip:
            continue
        if pv_spec.get("claimRef") and not _bound_to_claim(pv, pvc):
            continue
        size = _storage(pv_spec, "capacity", "storage")
        if size < requested:
            continue
        if (pv_spec.get("volumeMode") or "Filesystem") != requested_mode:
            continue
        if (pv.get("metadata") or {}).get("deletionTimestamp"):
            continue
        affinity_ok = pv_node_affinity_matches(pv, labels)
        if _bound_to_claim(pv, pvc):
            return pv if affinity_ok else None  # a pre-bound PV is the only candidate
        if ((pv.get("status") or {}).get("phase") or "") != "Available":
            continue
        if selector is not None and not selector.matches((pv.get("metadata") or {}).get("labels") or {}):
            continue
        if volume_class(pv) != requested_class or not affinity_ok:
            continue
        if not wanted_modes <= set(pv_spec.get("accessModes") or ()):
            continue
        if best is None or size < best_size:
            best, best_size = pv, size
    return best


def _match_topology_terms(terms: Sequence[Mapping[str, Any]], labels: Mapping[str, str]) -> bool:
    """``MatchTopologySelectorTerms``: no terms match everything; a term needs every expression's value listed."""
    if not terms:
        return True
    for term in terms:
        if all(labels.get(e.get("key") or "") in set(e.get("values") or ())
               for e in term.get("matchLabelExpressions") or ()):
            return True
    return False


def _claim_key(pvc: Mapping[str, Any]) -> str:
    meta = pvc.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


# -- plugin -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PodVolumes:
    """What binding the pod's claims on one node takes (upstream ``PodVolumes``)."""

    static_bindings: tuple[tuple[str, str], ...] = ()  # (PV name, claim namespace/name)
    dynamic_provisions: tuple[str, ...] = ()  # claim namespace/name, to provision on the node


@dataclass
class _State:
    bound: list[tuple[Mapping[str, Any], Mapping[str, Any] | None]] = field(default_factory=list)  # (claim, its PV)
    to_bind: list[Mapping[str, Any]] = field(default_factory=list)  # unbound WaitForFirstConsumer claims
    pvs_by_class: dict[str, list[Mapping[str, Any]]] = field(default_factory=dict)
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    decided: tuple[str, PodVolumes] | None = None

    def clone(self) -> _State:
        return _State(self.bound, self.to_bind, self.pvs_by_class, dict(self.by_node), self.decided)


def decision(state: CycleState) -> tuple[str, PodVolumes] | None:
    """(node, volumes to bind/provision) that VolumeBinding's Reserve recorded for the pod, if any."""
    s = state.get(STATE_KEY)
    return s.decided if isinstance(s, _State) else None


class VolumeBinding:
    """PreFilter, Filter, Reserve and PreBind plugin on persistent volume claims."""

    name = NAME

    def __init__(self, listers: ObjectLister | None = None) -> None:
        self.listers = lister_for(listers, None)

    def _class(self, name: str) -> Mapping[str, Any] | None:
        return self.listers.get(STORAGECLASSES, name) if name else None

    # -- PreFilter ----------------------------------------------------------------------------------------------
    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        claims = pod_claim_names(pod)
        if not claims:
            state.write(STATE_KEY, _State())
            return None, Status(Code.SKIP)
        s = _State()
        immediate = False
        for claim_name, ephemeral in claims:
            pvc = self.listers.get(PVCS, claim_name, pod.namespace)
            if pvc is None:
                msg = (f'waiting for ephemeral volume controller to create the persistentvolumeclaim "{claim_name}"'
                       if ephemeral else f'persistentvolumeclaim "{claim_name}" not found')
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg)
            spec = pvc.get("spec") or {}
            if ((pvc.get("status") or {}).get("phase") or "") == "Lost":
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                    f'persistentvolumeclaim "{claim_name}" bound to non-existent persistentvolume '
                                    f'"{spec.get("volumeName") or ""}"')
            if (pvc.get("metadata") or {}).get("deletionTimestamp"):
                return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                    f'persistentvolumeclaim "{claim_name}" is being deleted')
            volume_name = spec.get("volumeName") or ""
            if volume_name:
                s.bound.append((pvc, self.listers.get(PVS, volume_name)))
                continue
            sc = self._class(claim_class(pvc))
            if sc is not None and sc.get("volumeBindingMode") == WAIT_FOR_FIRST_CONSUMER:
                s.to_bind.append(pvc)
            else:
                immediate = True
        if immediate:
            return None, Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_UNBOUND_IMMEDIATE)
        for pvc in s.to_bind:
            cls = claim_class(pvc)
            if cls not in s.pvs_by_class:
                s.pvs_by_class[cls] = [pv for pv in self.listers.list(PVS) if volume_class(pv) == cls]
        state.write(STATE_KEY, s)
        eligible = self._eligible_nodes(s)
        return (PreFilterResult(frozenset(eligible)) if eligible is not None else None), None

    @staticmethod
    def _eligible_nodes(s: _State) -> set[str] | None:
        """``GetEligibleNodes``: node names that bound local PVs pin with ``kubernetes.io/hostname In``."""
        eligible: set[str] | None = None
        for _, pv in s.bound:
            if pv is None:
                return None
            required = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
            names: set[str] = set()
            for term in required.get("nodeSelectorTerms") or ():
                term_names: set[str] | None = None
                for expr in term.get("matchExpressions") or ():
                    if expr.get("key") == LABEL_HOSTNAME and expr.get("operator") == "In":
                        values = set(expr.get("values") or ())
                        term_names = values if term_names is None else term_names & values
                names |= term_names or set()
            if names:
                eligible = names if eligible is None else eligible & names
        return eligible

    def pre_filter_extensions(self) -> None:
        return None

    # -- Filter -------------------------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        s = state.get(STATE_KEY)
        if s is None:
            return Status.error(f'reading "{STATE_KEY}" from cycleState: not found')
        try:
            volumes, reasons = self.find_pod_volumes(s, node)
        except Exception as exc:  # a claim without class, a missing class, a malformed claim selector
            return Status.error(exc)
        if reasons:
            return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons)
        s.by_node[node.name] = volumes
        return None

    def find_pod_volumes(self, s: _State, node: NodeInfo) -> tuple[PodVolumes, list[str]]:
        """``FindPodVolumes``: the bindings/provisions for ``node``, or the reasons it cannot host the claims."""
        bound_ok = pvs_found = unbound_ok = True
        for _, pv in s.bound:
            if pv is None:
                pvs_found = False
                break
            if not pv_node_affinity_matches(pv, node.labels):
                bound_ok = False
                break
        static: list[tuple[str, str]] = []
        provision: list[str] = []
        if s.to_bind:
            unbound_ok = self._bind_unbound(s, node, static, provision)
        reasons = []
        if not bound_ok:
            reasons.append(ERR_REASON_NODE_CONFLICT)
        if not unbound_ok:
            reasons.append(ERR_REASON_BIND_CONFLICT)
        if not pvs_found:
            reasons.append(ERR_REASON_PV_NOT_EXIST)
        return PodVolumes(tuple(static), tuple(provision)), reasons

    def _bind_unbound(self, s: _State, node: NodeInfo, static: list[tuple[str, str]], provision: list[str]) -> bool:
        """Match or provision every WaitForFirstConsumer claim on ``node``; False when one cannot be."""
        to_provision: list[Mapping[str, Any]] = []
        to_match: list[Mapping[str, Any]] = []
        for pvc in s.to_bind:
            selected = ((pvc.get("metadata") or {}).get("annotations") or {}).get(SELECTED_NODE_ANNOTATION)
            if selected is not None:
                if selected != node.name:
                    return False  # provisioning is already under way for another node
                to_provision.append(pvc)
            else:
                to_match.append(pvc)
        chosen: set[str] = set()
        # findMatchingVolumes: smaller claims first, so they do not take the PVs larger ones need.
        for pvc in sorted(to_match, key=lambda c: _storage(c, "spec", "resources", "requests", "storage")):
            pv = find_matching_volume(pvc, s.pvs_by_class.get(claim_class(pvc), ()), node.labels, chosen)
            if pv is None:
                to_provision.append(pvc)
                continue
            chosen.add(_name(pv))
            static.append((_name(pv), _claim_key(pvc)))
        for pvc in to_provision:
            cls_name = claim_class(pvc)
            if not cls_name:
                raise ValueError(f'no class for claim "{_claim_key(pvc)}"')
            sc = self._class(cls_name)
            if sc is None:
                raise ValueError(f'failed to find storage class "{cls_name}"')
            provisioner = sc.get("provisioner") or ""
            if not provisioner or provisioner == NOT_SUPPORTED_PROVISIONER:
                return False
            if not _match_topology_terms(sc.get("allowedTopologies") or (), node.labels):
                return False
            provision.append(_claim_key(pvc))
        return True

    # -- Reserve / PreBind --------------------------------------------------------------------------------------
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        s = state.get(STATE_KEY)
        if isinstance(s, _State) and node_name in s.by_node:
            s.decided = (node_name, s.by_node[node_name])
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        s = state.get(STATE_KEY)
        if isinstance(s, _State):
            s.decided = None

    def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        # kemu simplification: the decision stays in CycleState (see decision()); nothing is written here.
        return None


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None, *,
        listers: ObjectLister | None = None) -> VolumeBinding:
    """Build the plugin; ``VolumeBindingArgs`` (bindTimeoutSeconds, shape) do not change kemu's behaviour."""
    return VolumeBinding(lister_for(listers, handle))
