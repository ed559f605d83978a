"""DefaultEvictor: which pods may be evicted, each rule with upstream's reason."""

from __future__ import annotations

import pytest

from emulator.clock import ManualClock
from emulator.descheduler.evictions import PodEvictor
from emulator.descheduler.framework import ClusterSnapshot, Handle, ProfileEvictor
from emulator.descheduler.plugins.defaultevictor.args import parse_args
from emulator.descheduler.plugins.defaultevictor.defaultevictor import DefaultEvictor
from tests import builders as b
from tests.unit.descheduler.helpers import T0, node, pod


def evictor(args: dict, pods: list[dict] | None = None, nodes: list[dict] | None = None, *,
            priority_classes: dict | None = None, now: float = T0, pdbs: list[dict] | None = None) -> DefaultEvictor:
    nodes = nodes or [node("n1"), node("n2")]
    snapshot = ClusterSnapshot.build(nodes, pods or [], priority_classes=priority_classes or {}, pdbs=pdbs or [])
    handle = Handle(snapshot, ManualClock(now), ProfileEvictor("p", PodEvictor(None, dry_run=True), [], []), nodes)
    return DefaultEvictor(parse_args(args, "args"), handle)


def with_volume(p: dict, volume: dict) -> dict:
    p["spec"]["volumes"] = [{"name": "v", **volume}]
    return p


CASES = [
    ("owned-pod", {}, pod("a", "n1"), []),
    ("bare-pod", {}, pod("a", "n1", owner=None), ["pod does not have any ownerRefs"]),
    ("bare-running-with-evictFailedBarePods", {"evictFailedBarePods": True}, pod("a", "n1", owner=None),
     ["pod does not have any ownerRefs and is not in failed phase"]),
    ("bare-failed-with-evictFailedBarePods", {"evictFailedBarePods": True},
     pod("a", "n1", owner=None, phase="Failed"), []),
    ("system-critical", {}, pod("a", "n1", priority=2_000_000_000), ["pod has system critical priority"]),
    ("system-critical-allowed", {"evictSystemCriticalPods": True}, pod("a", "n1", priority=2_000_001_000), []),
    ("at-priority-threshold", {"priorityThreshold": {"value": 100}}, pod("a", "n1", priority=100),
     ["pod has higher priority than specified priority class threshold"]),
    ("under-priority-threshold", {"priorityThreshold": {"value": 100}}, pod("a", "n1", priority=99), []),
    ("threshold-by-class-name", {"priorityThreshold": {"name": "high"}}, pod("a", "n1", priority=500),
     ["pod has higher priority than specified priority class threshold"]),
    ("empty-dir", {}, with_volume(pod("a", "n1"), {"emptyDir": {}}),
     ["pod has local storage and descheduler is not configured with evictLocalStoragePods"]),
    ("empty-dir-allowed", {"evictLocalStoragePods": True}, with_volume(pod("a", "n1"), {"emptyDir": {}}), []),
    ("daemonset", {}, pod("a", "n1", owner_kind="DaemonSet"),
     ["pod is related to daemonset and descheduler is not configured with evictDaemonSetPods"]),
    ("pvc-ignored", {"ignorePvcPods": True}, with_volume(pod("a", "n1"), {"persistentVolumeClaim": {"claimName": "c"}}),
     ["pod has a PVC and descheduler is configured to ignore PVC pods"]),
    ("pvc-default", {}, with_volume(pod("a", "n1"), {"persistentVolumeClaim": {"claimName": "c"}}), []),
    ("label-selector-miss", {"labelSelector": {"matchLabels": {"tier": "web"}}}, pod("a", "n1", labels={"tier": "db"}),
     ["pod labels do not match the labelSelector filter in the policy parameter"]),
    ("label-selector-hit", {"labelSelector": {"matchLabels": {"tier": "web"}}}, pod("a", "n1", labels={"tier": "web"}),
     []),
    ("too-young", {"minPodAge": "10m"}, pod("a", "n1", started=T0 - 599),
     ["pod age is not older than MinPodAge: 600 seconds"]),
    ("old-enough", {"minPodAge": "10m"}, pod("a", "n1", started=T0 - 600), []),
    ("mirror", {}, pod("a", "n1", annotations={"kubernetes.io/config.mirror": "x"}), ["pod is a mirror pod"]),
    ("static", {}, pod("a", "n1", annotations={"kubernetes.io/config.source": "file"}), ["pod is a static pod"]),
    ("evict-annotation-wins", {}, pod("a", "n1", owner=None, annotations={
        "descheduler.alpha.kubernetes.io/evict": ""}), []),
    ("no-pdb", {"ignorePodsWithoutPDB": True}, pod("a", "n1"), ["no PodDisruptionBudget found for pod"]),
]


@pytest.mark.parametrize(("args", "subject", "reasons"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_filter_reasons(args: dict, subject: dict, reasons: list[str]) -> None:
    ev = evictor(args, [subject], priority_classes={"high": 500})
    assert ev.reasons(subject) == reasons
    assert ev.filter(subject) is (not reasons)


def test_terminating_pod_is_not_evictable() -> None:
    p = pod("a", "n1")
    p["metadata"]["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    assert evictor({}, [p]).reasons(p) == ["pod is terminating"]


def test_pdb_covered_pod_passes_ignore_pods_without_pdb() -> None:
    p = pod("a", "n1", labels={"app": "web"})
    assert evictor({"ignorePodsWithoutPDB": True}, [p], pdbs=[b.pdb("web", {"app": "web"}, 1)]).filter(p)


@pytest.mark.parametrize(("replicas", "min_replicas", "ok"), [(2, 3, False), (3, 3, True), (1, 1, True)],
                         ids=["fewer-than-min", "exactly-min", "min-one-is-off"])
def test_min_replicas_counts_the_owners_pods(replicas: int, min_replicas: int, ok: bool) -> None:
    pods = [pod(f"p{i}", "n1") for i in range(replicas)]
    for p in pods:
        p["metadata"]["ownerReferences"][0]["uid"] = "owner-uid"
    assert evictor({"minReplicas": min_replicas}, pods).filter(pods[0]) is ok


@pytest.mark.parametrize(("other", "fits"), [
    (node("n2"), True),
    (node("n2", taints=[b.taint("dedicated", "x")]), False),
    (node("n2", unschedulable=True), False),
    (node("n2", cpu="50m"), False),
], ids=["room-elsewhere", "only-other-node-tainted", "only-other-node-cordoned", "only-other-node-too-small"])
def test_node_fit_pre_eviction_filter(other: dict, fits: bool) -> None:
    subject = pod("a", "n1", cpu="100m")
    ev = evictor({"nodeFit": True}, [subject], [node("n1"), other])
    assert ev.filter(subject)
    assert ev.pre_eviction_filter(subject) is fits
