"""The scheduler end to end through the HTTP API: objects applied with the real ``kubectl``, results read back
with ``kubectl get -o wide`` / ``kubectl describe`` and from the store.

One API server process serves the module (the fixtures of :mod:`tests.integration.test_apiserver_kubectl`);
each test starts a scheduler host (:mod:`tests.integration.test_scheduler`'s ``hosts``) on the same Redis.
Nodes are applied with their status (kemu, like upstream, keeps a created Node's status); pods already placed
are applied with ``spec.nodeName``. There is no kubelet, so the test confirms graceful deletions of victims
itself (delete with grace 0), as a kubelet would once the containers stopped. Every wait is a condition with a
deadline, woken by the store's watch.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from emulator.api.kinds import PDB, POD
from emulator.api.types import Obj
from emulator.server.core import ServerCore
from tests.builders import req_pod, sched_node
from tests.integration.test_apiserver_kubectl import Kubectl, core, kubectl, lines_of, server  # noqa: F401
from tests.integration.test_scheduler import BIN_PACKING, bound_to, events_for, hosts  # noqa: F401
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def apply(kubectl: Kubectl, tmp_path: Path, *objects: Obj) -> None:  # noqa: F811
    """``kubectl apply -f`` one multi-document manifest holding ``objects``."""
    manifest = tmp_path / f"manifest-{len(list(tmp_path.glob('manifest-*')))}.yaml"
    manifest.write_text(yaml.safe_dump_all(objects))
    kubectl("apply", "-f", str(manifest))


def priority_class(name: str, value: int, policy: str = "PreemptLowerPriority") -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
            "value": value, "preemptionPolicy": policy}


def pod(name: str, cpu: str, *, node: str | None = None, priority: str | None = None,
        labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    body = req_pod(name, cpu, "1Gi", node=node, **spec)
    if priority:
        body["spec"]["priorityClassName"] = priority
    body["metadata"]["labels"] = dict(labels or {})
    return body


def pod_scheduled(core: ServerCore, name: str) -> Obj | None:  # noqa: F811
    conds = core.get(POD, "default", name)["status"].get("conditions") or []
    return next((c for c in conds if c["type"] == "PodScheduled"), None)


def confirm_deletions(core: ServerCore) -> None:  # noqa: F811
    """Act as the kubelets: finish every graceful pod deletion (containers 'stopped')."""
    for p in core.list(POD, "default").items:
        if p["metadata"].get("deletionTimestamp"):
            core.delete(POD, "default", p["metadata"]["name"], grace_period_seconds=0)


def names_of(core: ServerCore) -> set[str]:  # noqa: F811
    return {p["metadata"]["name"] for p in core.list(POD, "default").items}


def test_pod_lands_on_the_unique_best_node(kubectl, core, hosts, tmp_path):  # noqa: F811
    apply(kubectl, tmp_path, sched_node("small", cpu="2", memory="4Gi"), sched_node("busy", cpu="16", memory="64Gi"),
          sched_node("roomy", cpu="16", memory="64Gi"), pod("resident", "12", node="busy"))
    hosts()
    apply(kubectl, tmp_path, pod("web", "1"))
    wait_for(lambda: bound_to(core, "web") is not None, 20, "web to be bound")
    # LeastAllocated + BalancedAllocation: only "roomy" leaves the pod the most room (small: 50 % cpu used).
    row = lines_of(kubectl("get", "pod", "web", "-o", "wide").stdout)["web"]
    assert row[6] == "roomy" and row[2] == "Pending"  # no kubelet runs it, but it is bound
    wait_for(lambda: bool(events_for(core, "web", "Scheduled")), 20, "the Scheduled event")
    described = kubectl("describe", "pod", "web").stdout
    assert re.search(r"^Node:\s+roomy/", described, re.M)
    assert re.search(r"Normal\s+Scheduled\s+.*default-scheduler\s+Successfully assigned default/web to roomy",
                     described)


def test_infeasible_pod_stays_pending_with_the_upstream_message(kubectl, core, hosts, tmp_path):  # noqa: F811
    tainted = sched_node("tainted", cpu="64", taints=[{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}])
    apply(kubectl, tmp_path, sched_node("a", cpu="4"), sched_node("b", cpu="4"), tainted)
    hosts()
    apply(kubectl, tmp_path, pod("huge", "32"))
    wait_for(lambda: bool(events_for(core, "huge", "FailedScheduling")), 20, "FailedScheduling")
    # Both reasons are unresolvable by preemption: an untolerated NoSchedule taint, and (as upstream since
    # 1.31) a request larger than the node's whole allocatable.
    expected = ("0/3 nodes are available: 1 node(s) had untolerated taint {dedicated: gpu}, 2 Insufficient cpu. "
                "preemption: 0/3 nodes are available: 3 Preemption is not helpful for scheduling.")
    cond = pod_scheduled(core, "huge")
    assert cond is not None and (cond["status"], cond["reason"], cond["message"]) == (
        "False", "Unschedulable", expected)
    described = kubectl("describe", "pod", "huge").stdout
    assert re.search(r"^Status:\s+Pending$", described, re.M) and re.search(r"^Node:\s+<none>$", described, re.M)
    assert re.search(r"^\s+PodScheduled\s+False\s*$", described, re.M)
    assert re.search(r"Warning\s+FailedScheduling\s+.*default-scheduler\s+" + re.escape(expected), described)
    assert lines_of(kubectl("get", "pod", "huge", "-o", "wide").stdout)["huge"][6] == "<none>"


def test_preemption_picks_the_minimal_victims_on_the_tie_break_node(kubectl, core, hosts, tmp_path):  # noqa: F811
    apply(kubectl, tmp_path, priority_class("low", 100), priority_class("mid", 500), priority_class("high", 1000),
          sched_node("a", cpu="4"), sched_node("b", cpu="4"), sched_node("c", cpu="4"))
    # a: removing big-a (3 cpu) is enough -> victims {big-a}: highest victim priority 100, sum 100.
    # b: the only candidate victim has priority 500 -> loses on "lowest highest-priority victim".
    # c: the 2-cpu mid pod is reprieved, both 1-cpu low pods must go -> sum 200, loses to a.
    apply(kubectl, tmp_path,
          pod("small-a", "1", node="a", priority="low"), pod("big-a", "3", node="a", priority="low"),
          pod("mid-b", "4", node="b", priority="mid"),
          pod("low1-c", "1", node="c", priority="low"), pod("low2-c", "1", node="c", priority="low"),
          pod("mid-c", "2", node="c", priority="mid"))
    hosts()
    before = names_of(core)
    apply(kubectl, tmp_path, pod("urgent", "2", priority="high"))
    # The nomination is written first, then the victims are deleted: wait for both.
    wait_for(lambda: ((core.get(POD, "default", "urgent")["status"].get("nominatedNodeName") is not None
                       or bound_to(core, "urgent") is not None)
                      and core.get(POD, "default", "big-a")["metadata"].get("deletionTimestamp")), 20,
             "urgent to be nominated and its victim terminating")
    urgent = core.get(POD, "default", "urgent")
    assert urgent["spec"]["priority"] == 1000
    assert urgent["status"].get("nominatedNodeName") == "a" or bound_to(core, "urgent") == "a"
    # Exactly big-a was preempted (DisruptionTarget, graceful deletion); every other pod is untouched.
    victim = core.get(POD, "default", "big-a")
    assert victim["metadata"].get("deletionTimestamp")
    assert any(c["type"] == "DisruptionTarget" and c["reason"] == "PreemptionByScheduler"
               for c in victim["status"]["conditions"])
    terminating = {p["metadata"]["name"] for p in core.list(POD, "default").items
                   if p["metadata"].get("deletionTimestamp")}
    assert terminating == {"big-a"}
    wait_for(lambda: bool(events_for(core, "big-a", "Preempted")), 20, "the Preempted event")
    assert events_for(core, "big-a", "Preempted")[0]["message"] == (
        f"Preempted by pod {urgent['metadata']['uid']} on node a")
    # Once the victim is gone the preemptor binds to the nominated node, and nothing else was deleted.
    wait_for(lambda: (confirm_deletions(core), bound_to(core, "urgent") is not None)[1], 20, "urgent bound")
    assert bound_to(core, "urgent") == "a"
    assert names_of(core) == before - {"big-a"} | {"urgent"}


def test_preemption_avoids_a_pdb_violation_where_another_node_allows_it(kubectl, core, hosts, tmp_path):  # noqa: F811
    # Without the budget "node-x" would win (victim priority 100 < 200); the budget protects its only pod.
    # (Node names are not "x"/"y": kubectl's YAML 1.1 decoder reads a bare y as true.)
    budget = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guard"},
              "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "guarded"}}}}
    apply(kubectl, tmp_path, priority_class("low", 100), priority_class("mid", 200), priority_class("high", 1000),
          sched_node("node-x", cpu="4"), sched_node("node-y", cpu="4"),
          pod("guarded", "4", node="node-x", priority="low", labels={"app": "guarded"}),
          pod("free", "4", node="node-y", priority="mid"), budget)
    # What the disruption controller would write: 1 healthy of 1 desired, no disruption allowed.
    current = core.get(PDB, "default", "guard")
    current["status"] = {"currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1, "disruptionsAllowed": 0,
                         "observedGeneration": current["metadata"].get("generation", 1)}
    core.update_status(PDB, current)
    hosts()
    apply(kubectl, tmp_path, pod("urgent", "4", priority="high"))
    wait_for(lambda: (confirm_deletions(core), bound_to(core, "urgent") is not None)[1], 20, "urgent bound")
    assert bound_to(core, "urgent") == "node-y"
    assert "guarded" in names_of(core) and "free" not in names_of(core)
    assert events_for(core, "free", "Preempted") and not events_for(core, "guarded", "Preempted")


def test_preemption_policy_never_does_not_preempt(kubectl, core, hosts, tmp_path):  # noqa: F811
    apply(kubectl, tmp_path, priority_class("low", 100), priority_class("polite", 1000, policy="Never"),
          sched_node("n1", cpu="2"), pod("low", "2", node="n1", priority="low"))
    host = hosts()
    apply(kubectl, tmp_path, pod("polite", "2", priority="polite"))
    wait_for(lambda: pod_scheduled(core, "polite") is not None, 20, "the PodScheduled condition")
    assert host.schedulers[0].wait_for_idle(10)
    cond = pod_scheduled(core, "polite")
    assert cond is not None and cond["message"] == (
        "0/1 nodes are available: 1 Insufficient cpu. preemption: not eligible due to preemptionPolicy=Never.")
    polite = core.get(POD, "default", "polite")
    assert polite["spec"]["preemptionPolicy"] == "Never" and polite["spec"]["priority"] == 1000
    assert not polite["status"].get("nominatedNodeName") and bound_to(core, "polite") is None
    low = core.get(POD, "default", "low")
    assert not low["metadata"].get("deletionTimestamp") and not events_for(core, "low", "Preempted")
    row = lines_of(kubectl("get", "pod", "polite", "-o", "wide").stdout)["polite"]
    assert row[6] == "<none>" and row[7] == "<none>"  # NODE, NOMINATED NODE


def test_two_profiles_route_by_scheduler_name(kubectl, core, hosts, tmp_path):  # noqa: F811
    # Memory in step with CPU everywhere, so BalancedAllocation scores every node alike and the two
    # profiles' strategies alone decide (with 32Gi nodes the two totals nearly tie and the test flaked).
    resident = req_pod("resident", "4", "4Gi", node="half")
    resident["metadata"]["labels"] = {}
    apply(kubectl, tmp_path, sched_node("empty", cpu="8", memory="8Gi"), sched_node("half", cpu="8", memory="8Gi"),
          resident)
    hosts(config={"profiles": [{"schedulerName": "default-scheduler"},
                               {"schedulerName": "bin-packer", **BIN_PACKING}]})
    apply(kubectl, tmp_path, pod("spread", "1"), pod("packed", "1", schedulerName="bin-packer"),
          pod("stranger", "1", schedulerName="nobody"))
    wait_for(lambda: bound_to(core, "spread") is not None and bound_to(core, "packed") is not None, 20,
             "both pods to be bound")
    rows = lines_of(kubectl("get", "pods", "-o", "wide").stdout)
    assert (rows["spread"][6], rows["packed"][6], rows["stranger"][6]) == ("empty", "half", "<none>")
    wait_for(lambda: bool(events_for(core, "packed", "Scheduled")), 20, "the Scheduled event")
    assert re.search(r"Normal\s+Scheduled\s+.*bin-packer\s+Successfully assigned default/packed to half",
                     kubectl("describe", "pod", "packed").stdout)
    assert pod_scheduled(core, "stranger") is None and not events_for(core, "stranger", "FailedScheduling")
