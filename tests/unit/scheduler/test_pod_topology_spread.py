"""PodTopologySpread: skew tables (maxSkew, minDomains, inclusion policies, matchLabelKeys), scores from upstream's
formula, the system default constraints, AddPod/RemovePod, and vectorised == per-node on random clusters."""

from __future__ import annotations

import math
import random
from typing import Any

import numpy as np
import pytest

from emulator.api.gomath import go_round
from emulator.scheduler.framework.interface import Code, CycleState, is_success
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo
from emulator.scheduler.plugins import pod_topology_spread as pts
from emulator.scheduler.plugins.listers import StaticLister
from tests.builders import owned_by, pod, replica_set, sched_node, service, spread, taint, toleration
from tests.unit.scheduler.util import prepare, run_filter, run_score

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
WEB = {"app": "web"}
SKEW = pts.ERR_REASON_CONSTRAINTS_NOT_MATCH
MISSING = pts.ERR_REASON_NODE_LABEL_NOT_MATCH


def node(name: str, zone: str | None, **kwargs: Any) -> dict[str, Any]:
    labels = {HOST: name, **({ZONE: zone} if zone else {}), **kwargs.pop("labels", {})}
    return sched_node(name, labels=labels, **kwargs)


def placed(name: str, on: str, labels: dict[str, str] | None = None, namespace: str = "default") -> dict[str, Any]:
    return pod(name, namespace, labels=WEB if labels is None else labels, node=on)


def incoming(constraints: list[dict[str, Any]], labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return pod("new", labels=WEB if labels is None else labels, topologySpreadConstraints=constraints, **spec)


# Zone a: n1 (2 web pods), n2; zone b: n3 (1 web pod), n4.
NODES = [node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "b")]
PODS = [placed("w1", "n1"), placed("w2", "n1"), placed("w3", "n3"), placed("other", "n2", {"app": "db"})]


def skew_verdicts(counts: dict[str, int], domains: list[str | None], self_match: int, max_skew: int,
                  min_domains: int = 1) -> list[str | None]:
    """Upstream's rule per node: missing label -> MISSING; counts[domain] + self - min > maxSkew -> SKEW."""
    minimum = 0 if len(counts) < min_domains else min(counts.values())
    out: list[str | None] = []
    for d in domains:
        if d is None:
            out.append(MISSING)
        else:
            out.append(SKEW if counts.get(d, 0) + self_match - minimum > max_skew else None)
    return out


def reasons(statuses: list[Any]) -> list[str | None]:
    return [None if is_success(s) else s.reasons[0] for s in statuses]


FILTER_CASES = [
    # (id, nodes, pods, incoming pod, expected counts per domain, node domains, self match, maxSkew, minDomains)
    ("zone skew 1", NODES, PODS, incoming([spread(ZONE, 1, match=WEB)]),
     {"a": 2, "b": 1}, ["a", "a", "b", "b"], 1, 1, 1),
    ("pod does not match its own selector", NODES, PODS, incoming([spread(ZONE, 1, match=WEB)], {"app": "x"}),
     {"a": 2, "b": 1}, ["a", "a", "b", "b"], 0, 1, 1),
    ("maxSkew 2", NODES, PODS, incoming([spread(ZONE, 2, match=WEB)]),
     {"a": 2, "b": 1}, ["a", "a", "b", "b"], 1, 2, 1),
    ("minDomains above the domain count: global minimum 0", NODES, PODS,
     incoming([spread(ZONE, 1, match=WEB, minDomains=3)]), {"a": 2, "b": 1}, ["a", "a", "b", "b"], 1, 1, 3),
    ("minDomains met", NODES, PODS, incoming([spread(ZONE, 1, match=WEB, minDomains=2)]),
     {"a": 2, "b": 1}, ["a", "a", "b", "b"], 1, 1, 2),
    ("hostname spread", NODES, PODS, incoming([spread(HOST, 1, match=WEB)]),
     {"n1": 2, "n2": 0, "n3": 1, "n4": 0}, ["n1", "n2", "n3", "n4"], 1, 1, 1),
    ("node without the topology label", [*NODES, node("n5", None)], PODS, incoming([spread(ZONE, 1, match=WEB)]),
     {"a": 2, "b": 1}, ["a", "a", "b", "b", None], 1, 1, 1),
    ("other namespaces and terminating pods do not count", NODES,
     [*PODS, placed("elsewhere", "n3", namespace="team"),
      {**placed("leaving", "n4"), "metadata": {"name": "leaving", "namespace": "default", "labels": WEB,
                                               "deletionTimestamp": "2024-01-01T00:00:00Z"}}],
     incoming([spread(ZONE, 1, match=WEB)]), {"a": 2, "b": 1}, ["a", "a", "b", "b"], 1, 1, 1),
    # nodeAffinityPolicy Honor (default): zone a is not eligible for a pod pinned to zone b, so only b counts.
    ("nodeAffinityPolicy Honor", NODES, PODS, incoming([spread(ZONE, 1, match=WEB)], nodeSelector={ZONE: "b"}),
     {"b": 1}, ["a", "a", "b", "b"], 1, 1, 1),
    ("nodeAffinityPolicy Ignore", NODES, PODS,
     incoming([spread(ZONE, 1, match=WEB, nodeAffinityPolicy="Ignore")], nodeSelector={ZONE: "b"}),
     {"a": 2, "b": 1}, ["a", "a", "b", "b"], 1, 1, 1),
    # nodeTaintsPolicy Honor: zone b's nodes are tainted and not tolerated, so only zone a counts.
    ("nodeTaintsPolicy Honor", [node("n1", "a"), node("n2", "a"), node("n3", "b", taints=[taint("t")]),
                                node("n4", "b", taints=[taint("t")])], PODS,
     incoming([spread(ZONE, 1, match=WEB, nodeTaintsPolicy="Honor")]), {"a": 2}, ["a", "a", "b", "b"], 1, 1, 1),
    ("nodeTaintsPolicy Honor, tolerated", [node("n1", "a"), node("n2", "a"), node("n3", "b", taints=[taint("t")]),
                                           node("n4", "b", taints=[taint("t")])], PODS,
     incoming([spread(ZONE, 1, match=WEB, nodeTaintsPolicy="Honor")], tolerations=[toleration("t", operator="Exists")]),
     {"a": 2, "b": 1}, ["a", "a", "b", "b"], 1, 1, 1),
    ("nodeTaintsPolicy Ignore", [node("n1", "a"), node("n2", "a"), node("n3", "b", taints=[taint("t")]),
                                 node("n4", "b", taints=[taint("t")])], PODS,
     incoming([spread(ZONE, 1, match=WEB)]), {"a": 2, "b": 1}, ["a", "a", "b", "b"], 1, 1, 1),
    # matchLabelKeys: the pod's own version joins the selector, so only version=v2 pods count.
    ("matchLabelKeys", NODES,
     [placed("v1a", "n1", {"app": "web", "version": "v1"}), placed("v1b", "n1", {"app": "web", "version": "v1"}),
      placed("v2", "n3", {"app": "web", "version": "v2"})],
     incoming([spread(ZONE, 1, match=WEB, matchLabelKeys=["version"])], {"app": "web", "version": "v2"}),
     {"a": 0, "b": 1}, ["a", "a", "b", "b"], 1, 1, 1),
]


@pytest.mark.parametrize(("nodes", "pods", "new", "counts", "domains", "self_match", "max_skew", "min_domains"),
                         [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES])
def test_filter_skew(nodes, pods, new, counts, domains, self_match, max_skew, min_domains):
    snapshot = Snapshot.build(nodes, pods)
    plugin = pts.new()
    state, _, status = prepare(plugin, new, snapshot)
    assert status is None
    assert state.read(pts.PRE_FILTER_KEY).match == [counts]
    statuses = run_filter(plugin, new, snapshot)
    expected = skew_verdicts(counts, domains, self_match, max_skew, min_domains)
    assert reasons(statuses) == expected
    for s, want in zip(statuses, expected, strict=True):
        if want == MISSING:
            assert s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        elif want == SKEW:
            assert s.code == Code.UNSCHEDULABLE


def test_expected_verdicts_of_the_first_cases():
    # The formula above, spelled out for the base case: min 1; zone a: 2 + 1 - 1 = 2 > 1; zone b: 1 + 1 - 1 = 1.
    assert skew_verdicts({"a": 2, "b": 1}, ["a", "a", "b", "b"], 1, 1) == [SKEW, SKEW, None, None]
    # minDomains 3 with 2 domains: min 0, so zone b (1 + 1 - 0 = 2) fails too.
    assert skew_verdicts({"a": 2, "b": 1}, ["a", "b"], 1, 1, 3) == [SKEW, SKEW]


def test_two_constraints_first_failure_decides_the_reason():
    nodes = [node("n1", "a"), node("n2", None), node("n3", "b")]
    pods = [placed("w1", "n1"), placed("w2", "n1")]
    new = incoming([spread(HOST, 1, match=WEB), spread(ZONE, 1, match=WEB)])
    statuses = run_filter(pts.new(), new, Snapshot.build(nodes, pods))
    # n2 lacks the zone label: not eligible for either constraint, and the zone constraint rejects it.
    assert reasons(statuses) == [SKEW, MISSING, None]


def test_no_constraints_skips_and_passes():
    snapshot = Snapshot.build(NODES, PODS)
    _, _, status = prepare(pts.new(), pod("plain", labels=WEB), snapshot)
    assert status is not None and status.code == Code.SKIP
    assert run_filter(pts.new(), pod("plain", labels=WEB), snapshot) == [None] * 4


def test_add_and_remove_pod_keep_the_minimum_exact():
    snapshot = Snapshot.build(NODES, PODS)
    plugin = pts.new()
    new = incoming([spread(ZONE, 1, match=WEB)])
    state, info, _ = prepare(plugin, new, snapshot)
    assert [plugin.filter(state, info, snapshot.node_info(i)) is None for i in range(4)] == [False, False, True, True]
    ext = plugin.pre_filter_extensions()
    victim = PodInfo.of(PODS[0])
    copy = state.clone()
    assert ext.remove_pod(copy, info, victim, snapshot.node_info(0)) is None
    # a: 1, b: 1 -> every node passes (1 + 1 - 1 = 1).
    assert copy.read(pts.PRE_FILTER_KEY).match == [{"a": 1, "b": 1}]
    assert [plugin.filter(copy, info, snapshot.node_info(i)) is None for i in range(4)] == [True] * 4
    assert ext.add_pod(copy, info, PodInfo.of(placed("w9", "n3")), snapshot.node_info(2)) is None
    assert copy.read(pts.PRE_FILTER_KEY).min_match == [1]  # a: 1, b: 2
    assert ext.add_pod(copy, info, PodInfo.of(placed("w8", "n2")), snapshot.node_info(1)) is None
    assert copy.read(pts.PRE_FILTER_KEY).min_match == [2]  # the last domain at the minimum moved up
    # The original state is untouched by the clone's changes.
    assert state.read(pts.PRE_FILTER_KEY).match == [{"a": 2, "b": 1}]
    # Pods of other namespaces or not matching the selector change nothing.
    ext.add_pod(copy, info, PodInfo.of(placed("x", "n1", {"app": "db"})), snapshot.node_info(0))
    ext.add_pod(copy, info, PodInfo.of(placed("y", "n1", namespace="team")), snapshot.node_info(0))
    assert copy.read(pts.PRE_FILTER_KEY).match == [{"a": 2, "b": 2}]


# -- scoring --------------------------------------------------------------------------------------------------------


def raw_score(terms: list[tuple[int, float, int]]) -> int:
    """Upstream Score: round(sum of count * log(domains + 2) + maxSkew - 1), given (count, domains, maxSkew)."""
    total = 0.0
    for count, domains, max_skew in terms:
        total += float(count) * math.log(domains + 2) + float(max_skew - 1)
    return go_round(total)


def normalized(raw: list[int], ignored: list[bool] | None = None) -> list[int]:
    """Upstream NormalizeScore: 100 * (max + min - s) / max over the scored nodes; ignored nodes 0."""
    ignored = ignored or [False] * len(raw)
    valid = [r for r, ig in zip(raw, ignored, strict=True) if not ig]
    lo, hi = min(valid), max(*valid, 0)
    return [0 if ig else (100 if hi == 0 else 100 * (hi + lo - r) // hi) for r, ig in zip(raw, ignored, strict=True)]


def test_score_zone_constraint():
    new = incoming([spread(ZONE, 1, "ScheduleAnyway", match=WEB)])
    status, scores = run_score(pts.new(), new, Snapshot.build(NODES, PODS))
    assert status is None
    raw = [raw_score([(2, 2, 1)]), raw_score([(2, 2, 1)]), raw_score([(1, 2, 1)]), raw_score([(1, 2, 1)])]
    assert raw == [3, 3, 1, 1]  # round(2 ln 4) = 3, round(ln 4) = 1
    assert scores == normalized(raw) == [33, 33, 100, 100]


def test_score_hostname_constraint_counts_per_node():
    new = incoming([spread(HOST, 2, "ScheduleAnyway", match=WEB)])
    _, scores = run_score(pts.new(), new, Snapshot.build(NODES, PODS))
    raw = [raw_score([(c, 4, 2)]) for c in (2, 0, 1, 0)]  # 4 feasible nodes are 4 hostname domains
    assert raw == [5, 1, 3, 1]
    assert scores == normalized(raw) == [20, 100, 60, 100]


def test_score_only_feasible_nodes_define_domains_and_ignore_nodes_without_keys():
    nodes = [*NODES, node("n5", None), node("n6", "c")]
    new = incoming([spread(ZONE, 1, "ScheduleAnyway", match=WEB)])
    snapshot = Snapshot.build(nodes, [*PODS, placed("w6", "n6")])
    # Score n1, n3, n5 only: domains among them are a and b (n5 has no zone: ignored, score 0); zone c is
    # not a domain, so its pod does not count anywhere.
    _, scores = run_score(pts.new(), new, snapshot, nodes=[0, 2, 4])
    raw = [raw_score([(2, 2, 1)]), raw_score([(1, 2, 1)]), 0]
    assert scores == normalized(raw, [False, False, True]) == [33, 100, 0]


def test_score_all_zero_means_every_node_100():
    new = incoming([spread(ZONE, 1, "ScheduleAnyway", match={"app": "nothing"})])
    _, scores = run_score(pts.new(), new, Snapshot.build(NODES, PODS))
    assert scores == [100] * 4


# -- system default constraints ----------------------------------------------------------------------------------------


def test_system_defaults_apply_to_pods_of_a_replica_set():
    nodes = [*NODES, node("n5", None)]
    snapshot = Snapshot.build(nodes, PODS)
    listers = StaticLister.from_objects([replica_set("web-rs", WEB)])
    plugin = pts.new(None, None, listers=listers)
    new = owned_by(pod("new", labels=WEB), "ReplicaSet", "web-rs")
    # No DoNotSchedule defaults: the filter is skipped.
    assert prepare(plugin, new, snapshot)[2].code == Code.SKIP
    status, scores = run_score(plugin, new, snapshot)
    assert status is None
    constraints = plugin.constraints(PodInfo.of(new), pts.SCHEDULE_ANYWAY)
    assert [(c.topology_key, c.max_skew) for c in constraints] == [(HOST, 3), (ZONE, 5)]
    # Hostname: 5 feasible nodes; zone: domains a, b and "" (n5 lacks the label but is not ignored with system
    # defaults; it gets no zone term). Web pods: n1 2, n3 1; zone a 2, zone b 1.
    host = [2, 0, 1, 0, 0]
    zone = [2, 2, 1, 1, None]
    raw = [raw_score([(h, 5, 3)] + ([(z, 3, 5)] if z is not None else [])) for h, z in zip(host, zone, strict=True)]
    assert scores == normalized(raw)


def test_system_defaults_need_a_service_or_controller():
    snapshot = Snapshot.build(NODES, PODS)
    plugin = pts.new(None, None, listers=StaticLister.from_objects([service("web", WEB), service("empty", None)]))
    served = pod("served", labels={**WEB, "tier": "front"})
    assert [c.topology_key for c in plugin.constraints(PodInfo.of(served), pts.SCHEDULE_ANYWAY)] == [HOST, ZONE]
    assert str(plugin.constraints(PodInfo.of(served), pts.SCHEDULE_ANYWAY)[0].selector) == "app=web"
    lonely = pod("lonely", labels={"app": "db"})
    assert plugin.constraints(PodInfo.of(lonely), pts.SCHEDULE_ANYWAY) == ()
    assert plugin.pre_score(CycleState(), PodInfo.of(lonely), snapshot, np.arange(4)).code == Code.SKIP


def test_list_defaulting_and_argument_validation():
    plugin = pts.new({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]},
        listers=StaticLister.from_objects([service("web", WEB)]))
    snapshot = Snapshot.build(NODES, PODS)
    new = pod("new", labels=WEB)
    statuses = run_filter(plugin, new, snapshot)
    assert reasons(statuses) == skew_verdicts({"a": 2, "b": 1}, ["a", "a", "b", "b"], 1, 1)
    with pytest.raises(ValueError, match="System"):
        pts.new({"defaultConstraints": [{"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]})
    with pytest.raises(ValueError, match="selector"):
        pts.new({"defaultingType": "List", "defaultConstraints": [
            {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {}}]})
    with pytest.raises(ValueError, match="defaultingType"):
        pts.new({"defaultingType": "Sometimes"})


def test_default_selector_merges_services_and_the_replica_set():
    listers = StaticLister.from_objects([service("a", {"app": "web"}), service("b", {"tier": "front"}),
                                         service("other-ns", {"app": "web"}, namespace="team"),
                                         replica_set("rs", {"app": "web", "tier": "front"})])
    info = PodInfo.of(owned_by(pod("p", labels={"app": "web", "tier": "front"}), "ReplicaSet", "rs"))
    selector = pts.default_selector(info, listers)
    assert selector.matches({"app": "web", "tier": "front", "x": "y"})
    assert not selector.matches({"app": "web"})


# -- vectorised == per node ------------------------------------------------------------------------------------------


def random_cluster(rng: random.Random, n: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    nodes = []
    for i in range(n):
        labels = {"rack": rng.choice(("r1", "r2", "r3", "r4"))} if rng.random() < 0.8 else {}
        taints = [taint("dedicated", "x")] if rng.random() < 0.2 else None
        nodes.append(node(f"n{i}", rng.choice(("a", "b", "c")) if rng.random() < 0.9 else None, labels=labels,
                          taints=taints))
    pods = [placed(f"e{j}", f"n{rng.randrange(n)}", {"app": rng.choice(("web", "db")), "v": rng.choice("12")},
                   namespace=rng.choice(("default", "default", "team"))) for j in range(3 * n)]
    return nodes, pods


def random_constraint(rng: random.Random, when: str) -> dict[str, Any]:
    extra: dict[str, Any] = {}
    if rng.random() < 0.3 and when == "DoNotSchedule":
        extra["minDomains"] = rng.randint(1, 5)
    if rng.random() < 0.3:
        extra["nodeAffinityPolicy"] = rng.choice(("Honor", "Ignore"))
    if rng.random() < 0.3:
        extra["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
    if rng.random() < 0.2:
        extra["matchLabelKeys"] = ["v"]
    return spread(rng.choice((ZONE, HOST, "rack")), rng.randint(1, 3), when, match={"app": rng.choice(("web", "db"))},
                  **extra)


def naive_counts(nodes: list[dict[str, Any]], pods: list[dict[str, Any]], new: PodInfo,
                 plugin: pts.PodTopologySpread) -> list[dict[str, int]]:
    """calPreFilterState by the book: node by node, pod by pod."""
    snapshot = Snapshot.build(nodes, pods)
    constraints = plugin.constraints(new, pts.DO_NOT_SCHEDULE)
    out: list[dict[str, int]] = [{} for _ in constraints]
    for i in range(snapshot.num_nodes):
        info = snapshot.node_info(i)
        if not all(c.topology_key in info.labels for c in constraints):
            continue
        for k, c in enumerate(constraints):
            if not plugin._includes(c, new, info):
                continue
            value = info.labels[c.topology_key]
            out[k][value] = out[k].get(value, 0) + pts.count_pods_match_selector(info.pods, c.selector, new.namespace)
    return out


@pytest.mark.parametrize("seed", range(8))
def test_vectorised_matches_per_node(seed):
    rng = random.Random(seed)
    nodes, pods = random_cluster(rng, 30)
    snapshot = Snapshot.build(nodes, pods)
    plugin = pts.new()
    checked = 0
    for i in range(25):
        hard = [random_constraint(rng, "DoNotSchedule") for _ in range(rng.randint(0, 2))]
        soft = [random_constraint(rng, "ScheduleAnyway") for _ in range(rng.randint(0, 2))]
        spec: dict[str, Any] = {}
        if rng.random() < 0.3:
            spec["nodeSelector"] = {ZONE: rng.choice(("a", "b"))}
        if rng.random() < 0.3:
            spec["tolerations"] = [toleration("dedicated", operator="Exists")]
        new = pod(f"p{i}", labels={"app": rng.choice(("web", "db")), "v": rng.choice("12")},
                  topologySpreadConstraints=hard + soft, **spec)
        info = PodInfo.of(new)
        run_filter(plugin, info, snapshot)
        state, _, status = prepare(plugin, info, snapshot)
        if status is None:
            assert state.read(pts.PRE_FILTER_KEY).match == naive_counts(nodes, pods, info, plugin)
        feasible = sorted(rng.sample(range(snapshot.num_nodes), rng.randint(2, snapshot.num_nodes)))
        pre_score = plugin.pre_score(CycleState(), info, snapshot, np.asarray(feasible))
        if pre_score is None:
            run_score(plugin, info, snapshot, nodes=feasible)  # asserts score_all == score per node
            checked += 1
        # The pod lands somewhere: the incremental index must agree with a fresh plugin's full count.
        snapshot.assume(info, rng.randrange(snapshot.num_nodes))
        pods.append({**new, "spec": {**new["spec"], "nodeName": snapshot.node_names[snapshot.find_pod(info.key)[0]]}})
    assert checked >= 5
