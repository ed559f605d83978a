"""VolumeZone: a pod whose bound PersistentVolumes carry zone/region labels must run in those zones.

Upstream ``pkg/scheduler/framework/plugins/volumezone/volume_zone.go``.

PreFilter collects, for every bound claim of the pod, its PV's topology
labels (``topology.kubernetes.io/zone`` / ``region`` and their deprecated
``failure-domain.beta.kubernetes.io`` forms); a value may list several zones
separated by ``__``. Unbound claims of a WaitForFirstConsumer StorageClass are
left to VolumeBinding; any other unbound claim, a claim without name, or a
missing claim / class / PV is UnschedulableAndUnresolvable with upstream's
message. No PV topology at all: Skip.

Filter: a node with none of the topology labels passes (a single-zone
cluster's nodes may have none); otherwise, for every PV topology label, the
node's value of that key (or, for a beta key, of its GA twin) must be one of
the PV's values, else UnschedulableAndUnresolvable ``node(s) had no available
volume zone``.

(The PV *node affinity* check -- ``node(s) had volume node affinity
conflict`` -- is VolumeBinding's, as upstream.)

Vectorised: one comparison per PV topology over a label column.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from emulator.scheduler.framework.interface import (
    Code,
    CycleState,
    FilterVerdict,
    Handle,
    PreFilterResult,
    Status,
    all_pass,
    reject_where,
)
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import NodeInfo, PodInfo
from emulator.scheduler.plugins.listers import PVCS, PVS, STORAGECLASSES, ObjectLister, lister_for
from emulator.scheduler.plugins.volume_binding import WAIT_FOR_FIRST_CONSUMER, claim_class

__all__ = ["ERR_REASON_CONFLICT", "NAME", "TOPOLOGY_LABELS", "VolumeZone", "new"]

NAME = "VolumeZone"
PRE_FILTER_KEY = "PreFilter" + NAME
ERR_REASON_CONFLICT = "node(s) had no available volume zone"

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
GA_ZONE = "topology.kubernetes.io/zone"
GA_REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, GA_ZONE, GA_REGION)
_GA_OF = {BETA_ZONE: GA_ZONE, BETA_REGION: GA_REGION}
MULTI_ZONE_DELIMITER = "__"


@dataclass(frozen=True)
class PVTopology:
    key: str
    values: frozenset[str]


def label_zones_to_set(value: str) -> frozenset[str] | None:
    """``LabelZonesToSet``: ``a__b`` -> {a, b}; None when an element is empty (upstream ignores such labels)."""
    zones = [z.strip() for z in value.split(MULTI_ZONE_DELIMITER)]
    if any(not z for z in zones):
        return None
    return frozenset(zones)


class VolumeZone:
    """PreFilter and Filter plugin on PV zone labels."""

    name = NAME

    def __init__(self, listers: ObjectLister | None = None) -> None:
        self.listers = lister_for(listers, None)

    def _topologies(self, pod: PodInfo) -> list[PVTopology] | Status:
        """``getPVbyPod``: the topology labels of the pod's bound PVs, or the status that stops the pod."""
        out: list[PVTopology] = []
        for volume in (pod.pod.get("spec") or {}).get("volumes") or ():
            source = volume.get("persistentVolumeClaim")
            if source is None:
                continue
            claim_name = (source or {}).get("claimName") or ""
            if not claim_name:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "PersistentVolumeClaim had no name")
            pvc = self.listers.get(PVCS, claim_name, pod.namespace)
            if pvc is None:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f'persistentvolumeclaim "{claim_name}" not found')
            pv_name = (pvc.get("spec") or {}).get("volumeName") or ""
            if not pv_name:
                class_name = claim_class(pvc)
                if not class_name:
                    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                  "PersistentVolumeClaim had no pv name and storageClass name")
                sc = self.listers.get(STORAGECLASSES, class_name)
                if sc is None:
                    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                  f'storageclass.storage.k8s.io "{class_name}" not found')
                mode = sc.get("volumeBindingMode")
                if mode is None:
                    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
                                  f'VolumeBindingMode not set for StorageClass "{class_name}"')
                if mode == WAIT_FOR_FIRST_CONSUMER:
                    continue  # not bound yet: VolumeBinding picks a PV that fits the node
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "PersistentVolume had no name")
            pv = self.listers.get(PVS, pv_name)
            if pv is None:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, f'persistentvolume "{pv_name}" not found')
            labels = (pv.get("metadata") or {}).get("labels") or {}
            for key in TOPOLOGY_LABELS:
                if key in labels:
                    values = label_zones_to_set(labels[key])
                    if values is not None:
                        out.append(PVTopology(key, values))
        return out

    def pre_filter(self, state: CycleState, pod: PodInfo,
                   snapshot: Snapshot) -> tuple[PreFilterResult | None, Status | None]:
        topologies = self._topologies(pod)
        if isinstance(topologies, Status):
            return None, topologies
        state.write(PRE_FILTER_KEY, tuple(topologies))
        if not topologies:
            return None, Status(Code.SKIP)
        return None, None

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        topologies = state.get(PRE_FILTER_KEY)
        if topologies is None:
            return Status.error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
        if not topologies or not any(key in node.labels for key in TOPOLOGY_LABELS):
            return None
        for t in topologies:
            value = node.labels.get(t.key)
            if value is None and t.key in _GA_OF:
                value = node.labels.get(_GA_OF[t.key])
            if value is None or value not in t.values:
                return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ERR_REASON_CONFLICT)
        return None

    def filter_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> FilterVerdict | Status:
        topologies = state.get(PRE_FILTER_KEY)
        if topologies is None:
            return Status.error(f'reading "{PRE_FILTER_KEY}" from cycleState: not found')
        n = snapshot.num_nodes
        if not topologies:
            return all_pass(n)
        constrained = np.zeros(n, dtype=bool)
        for key in TOPOLOGY_LABELS:
            constrained |= snapshot.label_column(key).codes >= 0
        failed = np.zeros(n, dtype=bool)
        for t in topologies:
            column = snapshot.label_column(t.key)
            ok = column.mask(t.values.__contains__, absent=False)
            if t.key in _GA_OF:  # a node without the beta label is judged by its GA label
                ga = snapshot.label_column(_GA_OF[t.key]).mask(t.values.__contains__, absent=False)
                ok = np.where(column.codes >= 0, ok, ga)
            failed |= ~ok
        failed &= constrained
        if not failed.any():
            return all_pass(n)
        return reject_where(failed, ERR_REASON_CONFLICT, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None, *,
        listers: ObjectLister | None = None) -> VolumeZone:
    return VolumeZone(lister_for(listers, handle))
