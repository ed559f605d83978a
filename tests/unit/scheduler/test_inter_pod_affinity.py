"""InterPodAffinity: required affinity / anti-affinity, existing pods' anti-affinity, the first pod of a group,
namespaces and namespaceSelector, scores from upstream's weights, AddPod/RemovePod, vectorised == per-node."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest

from emulator.scheduler.framework.interface import Code, CycleState, is_success
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo
from emulator.scheduler.plugins import inter_pod_affinity as ipa
from emulator.scheduler.plugins.listers import StaticLister
from tests.builders import affinity_term, labelled_namespace, pod, pod_affinity, sched_node
from tests.unit.scheduler.util import prepare, run_filter, run_score

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
AFF = ipa.ERR_REASON_AFFINITY_RULES_NOT_MATCH
ANTI = ipa.ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH
EXISTING = ipa.ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH


def node(name: str, zone: str | None) -> dict[str, Any]:
    return sched_node(name, labels={HOST: name, **({ZONE: zone} if zone else {})})


def placed(name: str, on: str, labels: dict[str, str], namespace: str = "default", **spec: Any) -> dict[str, Any]:
    return pod(name, namespace, labels=labels, node=on, **spec)


# Zone a: n1 (a db pod), n2; zone b: n3 (a cache pod), n4; n5 has no zone label.
NODES = [node("n1", "a"), node("n2", "a"), node("n3", "b"), node("n4", "b"), node("n5", None)]
PODS = [placed("db", "n1", {"app": "db"}), placed("cache", "n3", {"app": "cache"})]


def reasons(statuses: list[Any]) -> list[str | None]:
    return [None if is_success(s) else s.reasons[0] for s in statuses]


FILTER_CASES = [
    ("affinity to db in the zone", PODS, pod("p", labels={"app": "web"},
                                             affinity=pod_affinity([affinity_term(ZONE, {"app": "db"})])),
     [None, None, AFF, AFF, AFF]),
    ("affinity to db on the host", PODS, pod("p", affinity=pod_affinity([affinity_term(HOST, {"app": "db"})])),
     [None, AFF, AFF, AFF, AFF]),
    ("affinity needs one pod matching all terms", PODS,
     pod("p", affinity=pod_affinity([affinity_term(ZONE, {"app": "db"}), affinity_term(ZONE, {"app": "cache"})])),
     [AFF] * 5),
    ("first pod of a self-affine group goes anywhere with the key", PODS,
     pod("p", labels={"app": "new"}, affinity=pod_affinity([affinity_term(ZONE, {"app": "new"})])),
     [None, None, None, None, AFF]),
    ("no match and not self-affine", PODS,
     pod("p", labels={"app": "web"}, affinity=pod_affinity([affinity_term(ZONE, {"app": "new"})])), [AFF] * 5),
    ("affinity in another namespace only", [*PODS, placed("db2", "n3", {"app": "db"}, "team")],
     pod("p", affinity=pod_affinity([affinity_term(ZONE, {"app": "db"}, namespaces=["team"])])),
     [AFF, AFF, None, None, AFF]),
    ("anti-affinity to db in the zone", PODS, pod("p", affinity=pod_affinity(
        anti_required=[affinity_term(ZONE, {"app": "db"})])), [ANTI, ANTI, None, None, None]),
    ("anti-affinity per host", PODS, pod("p", affinity=pod_affinity(
        anti_required=[affinity_term(HOST, {"app": "cache"})])), [None, None, ANTI, None, None]),
    ("existing pod's anti-affinity repels the incoming pod",
     [*PODS, placed("loner", "n4", {"app": "loner"},
                    affinity=pod_affinity(anti_required=[affinity_term(ZONE, {"app": "web"})]))],
     pod("p", labels={"app": "web"}), [None, None, EXISTING, EXISTING, None]),
    ("existing pod's anti-affinity for other labels does not", [
        *PODS, placed("loner", "n4", {"app": "loner"},
                      affinity=pod_affinity(anti_required=[affinity_term(ZONE, {"app": "web"})]))],
     pod("p", labels={"app": "api"}), [None] * 5),
    ("affinity failure is reported before anti-affinity", PODS, pod("p", affinity=pod_affinity(
        [affinity_term(ZONE, {"app": "db"})], anti_required=[affinity_term(HOST, {"app": "db"})])),
     [ANTI, None, AFF, AFF, AFF]),
]


@pytest.mark.parametrize(("pods", "new", "expected"), [c[1:] for c in FILTER_CASES], ids=[c[0] for c in FILTER_CASES])
def test_filter(pods, new, expected):
    statuses = run_filter(ipa.new(), new, Snapshot.build(NODES, pods))
    assert reasons(statuses) == expected
    codes = {AFF: Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ANTI: Code.UNSCHEDULABLE, EXISTING: Code.UNSCHEDULABLE}
    for status, reason in zip(statuses, expected, strict=True):
        if reason is not None:
            assert status.code == codes[reason]


def test_pod_without_any_affinity_skips():
    _, _, status = prepare(ipa.new(), pod("p"), Snapshot.build(NODES, PODS))
    assert status is not None and status.code == Code.SKIP


def test_namespace_selector_is_resolved_through_the_lister():
    listers = StaticLister.from_objects([labelled_namespace("default", {}), labelled_namespace("team", {"env": "p"}),
                                         labelled_namespace("other", {"env": "q"})])
    pods = [*PODS, placed("db2", "n3", {"app": "db"}, "team"), placed("db3", "n2", {"app": "db"}, "other")]
    new = pod("p", affinity=pod_affinity(anti_required=[affinity_term(
        HOST, {"app": "db"}, namespace_selector={"matchLabels": {"env": "p"}})]))
    statuses = run_filter(ipa.new(listers=listers), new, Snapshot.build(NODES, pods))
    assert reasons(statuses) == [None, None, ANTI, None, None]  # only the pod in "team" counts
    everywhere = pod("q", affinity=pod_affinity(anti_required=[affinity_term(HOST, {"app": "db"},
                                                                             namespace_selector={})]))
    assert reasons(run_filter(ipa.new(listers=listers), everywhere, Snapshot.build(NODES, pods))) == \
        [ANTI, ANTI, ANTI, None, None]


def test_existing_anti_affinity_with_namespace_selector_uses_incoming_namespace_labels():
    listers = StaticLister.from_objects([labelled_namespace("team", {"env": "prod"})])
    loner = placed("loner", "n1", {"app": "loner"}, affinity=pod_affinity(anti_required=[affinity_term(
        HOST, {"app": "web"}, namespace_selector={"matchLabels": {"env": "prod"}})]))
    snapshot = Snapshot.build(NODES, [loner])
    in_team = pod("p", "team", labels={"app": "web"})
    in_default = pod("q", labels={"app": "web"})
    assert reasons(run_filter(ipa.new(listers=listers), in_team, snapshot))[0] == EXISTING
    assert reasons(run_filter(ipa.new(listers=listers), in_default, snapshot))[0] is None


def test_add_and_remove_pod():
    plugin = ipa.new()
    snapshot = Snapshot.build(NODES, PODS)
    new = pod("p", labels={"app": "web"}, affinity=pod_affinity(anti_required=[affinity_term(ZONE, {"app": "db"})]))
    state, info, _ = prepare(plugin, new, snapshot)
    ext = plugin.pre_filter_extensions()
    copy = state.clone()
    assert ext.remove_pod(copy, info, PodInfo.of(PODS[0]), snapshot.node_info(0)) is None
    assert [plugin.filter(copy, info, snapshot.node_info(i)) is None for i in range(5)] == [True] * 5
    # Adding a pod whose anti-affinity repels the incoming pod blocks its zone.
    repeller = PodInfo.of(placed("r", "n3", {"app": "r"},
                                 affinity=pod_affinity(anti_required=[affinity_term(ZONE, {"app": "web"})])))
    ext.add_pod(copy, info, repeller, snapshot.node_info(2))
    assert [plugin.filter(copy, info, snapshot.node_info(i)) is None for i in range(5)] == [
        True, True, False, False, True]
    assert state.read(ipa.PRE_FILTER_KEY).anti_affinity_counts == {(ZONE, "a"): 1}  # the original is intact


# -- scoring ------------------------------------------------------------------------------------------------------


def normalized(raw: list[int]) -> list[int]:
    """Upstream NormalizeScore: int64(100 * (s - min) / (max - min)) in float64; all 0 when max == min."""
    lo, hi = min(raw), max(raw)
    return [int(100.0 * (float(s - lo) / float(hi - lo))) if hi > lo else 0 for s in raw]


def test_score_preferred_affinity_and_anti_affinity_weights():
    pods = [*PODS, placed("db2", "n2", {"app": "db"}), placed("cache2", "n4", {"app": "cache"})]
    new = pod("p", affinity=pod_affinity(preferred=[(10, affinity_term(ZONE, {"app": "db"}))],
                                         anti_preferred=[(3, affinity_term(HOST, {"app": "cache"}))]))
    status, scores = run_score(ipa.new(), new, Snapshot.build(NODES, pods), normalize=False)
    assert status is None
    # Zone a holds 2 db pods: +10 each for n1, n2. n3 and n4 each host a cache pod: -3 on that host.
    raw = [20, 20, -3, -3, 0]
    assert scores == raw
    assert run_score(ipa.new(), new, Snapshot.build(NODES, pods))[1] == normalized(raw) == [100, 100, 0, 0, 13]


def test_score_existing_pods_terms_and_hard_weight():
    pods = [placed("likes-web", "n1", {"app": "x"}, affinity=pod_affinity(
                [affinity_term(ZONE, {"app": "web"})], preferred=[(5, affinity_term(HOST, {"app": "web"}))])),
            placed("hates-web", "n3", {"app": "y"}, affinity=pod_affinity(
                anti_preferred=[(7, affinity_term(ZONE, {"app": "web"}))]))]
    new = pod("p", labels={"app": "web"})
    snapshot = Snapshot.build(NODES, pods)
    for hard, raw in ((1, [1 + 5, 1, -7, -7, 0]), (4, [4 + 5, 4, -7, -7, 0]), (0, [5, 0, -7, -7, 0])):
        status, scores = run_score(ipa.new({"hardPodAffinityWeight": hard}), new, snapshot, normalize=False)
        assert status is None and scores == raw
        assert run_score(ipa.new({"hardPodAffinityWeight": hard}), new, snapshot)[1] == normalized(raw)
    # ignorePreferredTermsOfExistingPods: a pod without preferred terms of its own is not scored.
    skipping = ipa.new({"ignorePreferredTermsOfExistingPods": True})
    assert skipping.pre_score(CycleState(), PodInfo.of(new), snapshot, np.arange(5)).code == Code.SKIP


def test_score_skips_when_nothing_matches():
    new = pod("p", affinity=pod_affinity(preferred=[(10, affinity_term(ZONE, {"app": "none"}))]))
    status = ipa.new().pre_score(CycleState(), PodInfo.of(new), Snapshot.build(NODES, PODS), np.arange(5))
    assert status is not None and status.code == Code.SKIP


def test_argument_validation():
    with pytest.raises(ValueError, match="hardPodAffinityWeight"):
        ipa.new({"hardPodAffinityWeight": 101})


# -- vectorised == per node ------------------------------------------------------------------------------------------

APPS = ("web", "db", "cache")


def random_term(rng: random.Random) -> dict[str, Any]:
    kwargs: dict[str, Any] = {}
    if rng.random() < 0.2:
        kwargs["namespaces"] = ["team"]
    elif rng.random() < 0.2:
        kwargs["namespace_selector"] = {} if rng.random() < 0.5 else {"matchLabels": {"env": "p"}}
    return affinity_term(rng.choice((ZONE, HOST, "rack")), {"app": rng.choice(APPS)}, **kwargs)


def random_affinity(rng: random.Random) -> dict[str, Any]:
    def some(n: int) -> list[dict[str, Any]]:
        return [random_term(rng) for _ in range(rng.randint(0, n))]

    return pod_affinity(some(1) if rng.random() < 0.4 else None,
                        [(rng.randint(1, 100), t) for t in some(2)],
                        anti_required=some(1) if rng.random() < 0.4 else None,
                        anti_preferred=[(rng.randint(1, 100), t) for t in some(2)])


@pytest.mark.parametrize("seed", range(8))
def test_vectorised_matches_per_node(seed):
    rng = random.Random(seed)
    listers = StaticLister.from_objects([labelled_namespace("default", {"env": "q"}),
                                         labelled_namespace("team", {"env": "p"})])
    nodes = [sched_node(f"n{i}", labels={HOST: f"n{i}", **({ZONE: rng.choice("ab")} if rng.random() < 0.9 else {}),
                                         **({"rack": rng.choice("xyz")} if rng.random() < 0.7 else {})})
             for i in range(25)]
    pods = []
    for j in range(50):
        spec = {"affinity": random_affinity(rng)} if rng.random() < 0.3 else {}
        pods.append(placed(f"e{j}", f"n{rng.randrange(25)}", {"app": rng.choice(APPS)},
                           rng.choice(("default", "team")), **spec))
    snapshot = Snapshot.build(nodes, pods)
    plugin = ipa.new({"hardPodAffinityWeight": rng.randint(0, 5)}, listers=listers)
    scored = 0
    for i in range(30):
        new = pod(f"p{i}", rng.choice(("default", "team")), labels={"app": rng.choice(APPS)},
                  affinity=random_affinity(rng))
        info = PodInfo.of(new)
        run_filter(plugin, info, snapshot)
        feasible = sorted(rng.sample(range(25), rng.randint(2, 25)))
        if plugin.pre_score(CycleState(), info, snapshot, np.asarray(feasible)) is None:
            run_score(plugin, info, snapshot, nodes=feasible)
            scored += 1
        # Index maintained incrementally == a fresh plugin's full scan.
        state_inc, _, _ = prepare(plugin, info, snapshot)
        state_new, _, _ = prepare(ipa.new(listers=listers), info, snapshot)
        for field in ("affinity_counts", "anti_affinity_counts", "existing_anti_affinity_counts"):
            assert getattr(state_inc.read(ipa.PRE_FILTER_KEY), field) == getattr(state_new.read(ipa.PRE_FILTER_KEY),
                                                                                 field)
        snapshot.assume(info, rng.randrange(25))
    assert scored >= 5
