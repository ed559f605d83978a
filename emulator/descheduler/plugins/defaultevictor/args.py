"""``DefaultEvictorArgs``: types, defaults and validation (upstream ``defaultevictor/types.go``, ``defaults.go``,
``validation.go``).

Every boolean defaults to false, as upstream's ``SetDefaults_DefaultEvictorArgs``;
``priorityThreshold`` may name a PriorityClass or give a value, not both;
``minPodAge`` is a Go duration string (``5m``, ``1h30m``) or seconds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from emulator.api.labels import LabelSelector
from emulator.descheduler.api import ArgsReader, PolicyError

KNOWN = ("nodeSelector", "evictLocalStoragePods", "evictDaemonSetPods", "evictSystemCriticalPods", "ignorePvcPods",
         "evictFailedBarePods", "labelSelector", "priorityThreshold", "nodeFit", "minReplicas", "minPodAge",
         "ignorePodsWithoutPDB")
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(h|ms|m|s|us|ns)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}


@dataclass(frozen=True)
class PriorityThreshold:
    name: str = ""
    value: int | None = None


@dataclass(frozen=True)
class DefaultEvictorArgs:
    node_selector: str = ""
    evict_local_storage_pods: bool = False
    evict_daemonset_pods: bool = False
    evict_system_critical_pods: bool = False
    ignore_pvc_pods: bool = False
    evict_failed_bare_pods: bool = False
    label_selector: LabelSelector | None = None
    priority_threshold: PriorityThreshold | None = None
    node_fit: bool = False
    min_replicas: int = 0
    min_pod_age: float | None = None  # seconds
    ignore_pods_without_pdb: bool = False


def parse_duration(value: Any, path: str) -> float:
    """A ``metav1.Duration`` (Go ``time.ParseDuration``: ``1h30m``, ``90s``) or a number of seconds."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        pos, total = 0, 0.0
        for m in _DURATION.finditer(text):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _UNIT_SECONDS[m.group(2)]
            pos = m.end()
        if text and pos == len(text):
            return total
    raise PolicyError(path, "must be a duration such as 5m or 1h30m", value)


def parse_args(raw: Any, path: str) -> DefaultEvictorArgs:
    r = ArgsReader(raw, path, KNOWN)
    threshold = None
    if r.raw.get("priorityThreshold") is not None:
        t = ArgsReader(r.raw["priorityThreshold"], r.field("priorityThreshold"), ("name", "value"))
        threshold = PriorityThreshold(t.str("name"), t.int("value"))
        if threshold.name and threshold.value is not None:
            raise PolicyError(r.field("priorityThreshold"),
                              "priority threshold misconfigured, only one of priorityThreshold fields can be set",
                              kind="Forbidden")
    min_age = None
    if r.raw.get("minPodAge") is not None:
        min_age = parse_duration(r.raw["minPodAge"], r.field("minPodAge"))
    return DefaultEvictorArgs(
        node_selector=r.str("nodeSelector"),
        evict_local_storage_pods=r.bool("evictLocalStoragePods"),
        evict_daemonset_pods=r.bool("evictDaemonSetPods"),
        evict_system_critical_pods=r.bool("evictSystemCriticalPods"),
        ignore_pvc_pods=r.bool("ignorePvcPods"),
        evict_failed_bare_pods=r.bool("evictFailedBarePods"),
        label_selector=r.selector("labelSelector"),
        priority_threshold=threshold,
        node_fit=r.bool("nodeFit"),
        min_replicas=r.int("minReplicas", 0, minimum=0) or 0,
        min_pod_age=min_age,
        ignore_pods_without_pdb=r.bool("ignorePodsWithoutPDB"),
    )
