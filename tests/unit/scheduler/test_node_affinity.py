"""NodeAffinity: nodeSelector, required terms with every operator, matchFields, preferred weights, PreFilter."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from emulator.scheduler.framework.interface import Code, CycleState
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo
from emulator.scheduler.plugins import node_affinity
from tests.builders import req_pod, sched_node
from tests.unit.scheduler.util import prepare, run_filter, run_score

NODES = [
    sched_node("a", labels={"zone": "z1", "disk": "ssd", "gen": "5"}),
    sched_node("b", labels={"zone": "z2", "disk": "hdd", "gen": "3"}),
    sched_node("c", labels={"zone": "z3", "gen": "x"}),
    sched_node("d", labels={}),
]
ERR = "node(s) didn't match Pod's node affinity/selector"


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    body: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        body["values"] = list(values)
    return body


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def preferred(*weighted: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "preference": term} for w, term in weighted]}}


FILTER_CASES = {
    "nodeSelector": ({"nodeSelector": {"zone": "z1"}}, "a"),
    "nodeSelector-two-labels": ({"nodeSelector": {"zone": "z2", "disk": "hdd"}}, "b"),
    "nodeSelector-no-match": ({"nodeSelector": {"zone": "z9"}}, ""),
    "In": ({"affinity": required({"matchExpressions": [expr("zone", "In", "z1", "z3")]})}, "ac"),
    "NotIn": ({"affinity": required({"matchExpressions": [expr("zone", "NotIn", "z1")]})}, "bcd"),
    "Exists": ({"affinity": required({"matchExpressions": [expr("disk", "Exists")]})}, "ab"),
    "DoesNotExist": ({"affinity": required({"matchExpressions": [expr("disk", "DoesNotExist")]})}, "cd"),
    "Gt": ({"affinity": required({"matchExpressions": [expr("gen", "Gt", "4")]})}, "a"),
    "Lt": ({"affinity": required({"matchExpressions": [expr("gen", "Lt", "4")]})}, "b"),  # "x" is no integer
    "expressions-ANDed": ({"affinity": required({"matchExpressions": [
        expr("zone", "In", "z1", "z2"), expr("disk", "NotIn", "ssd")]})}, "b"),
    "terms-ORed": ({"affinity": required({"matchExpressions": [expr("zone", "In", "z1")]},
                                         {"matchExpressions": [expr("disk", "DoesNotExist")]})}, "acd"),
    "matchFields": ({"affinity": required({"matchFields": [expr("metadata.name", "In", "c")]})}, "c"),
    "matchFields-NotIn": ({"affinity": required({"matchFields": [expr("metadata.name", "NotIn", "c")]})}, "abd"),
    "fields-and-labels": ({"affinity": required({"matchFields": [expr("metadata.name", "NotIn", "a")],
                                                 "matchExpressions": [expr("gen", "Exists")]})}, "bc"),
    "selector-AND-affinity": ({"nodeSelector": {"disk": "ssd"},
                               "affinity": required({"matchExpressions": [expr("zone", "In", "z2")]})}, ""),
    "empty-term-matches-nothing": ({"affinity": required({})}, ""),
    "invalid-term-ignored": ({"affinity": required({"matchExpressions": [expr("gen", "Gt", "many")]},
                                                   {"matchExpressions": [expr("zone", "In", "z2")]})}, "b"),
}


@pytest.mark.parametrize(("spec", "fits"), list(FILTER_CASES.values()), ids=list(FILTER_CASES))
def test_filter(spec, fits):
    snapshot = Snapshot.build(NODES)
    statuses = run_filter(node_affinity.new(), req_pod("p", **spec), snapshot)
    for node, status in zip("abcd", statuses, strict=True):
        if node in fits:
            assert status is None, node
        else:
            assert status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            assert status.reasons == [ERR]


def test_pre_filter_skips_pods_without_constraints():
    _, _, status = prepare(node_affinity.new(), req_pod("p"), Snapshot.build(NODES))
    assert status is not None and status.code == Code.SKIP


@pytest.mark.parametrize(("terms", "names", "code"), [
    ([{"matchFields": [expr("metadata.name", "In", "a", "b")]}], {"a", "b"}, None),
    ([{"matchFields": [expr("metadata.name", "In", "a", "b"), expr("metadata.name", "In", "b", "c")]}], {"b"}, None),
    ([{"matchFields": [expr("metadata.name", "In", "a")]}, {"matchFields": [expr("metadata.name", "In", "c")]}],
     {"a", "c"}, None),
    ([{"matchFields": [expr("metadata.name", "In", "a")]}, {"matchExpressions": [expr("zone", "Exists")]}],
     None, None),
    ([{"matchFields": [expr("metadata.name", "In", "a"), expr("metadata.name", "In", "b")]}], None,
     Code.UNSCHEDULABLE_AND_UNRESOLVABLE),
], ids=["one-term", "intersected", "union", "unpinned-term", "conflict"])
def test_pre_filter_result(terms, names, code):
    state = CycleState()
    result, status = node_affinity.new().pre_filter(state, PodInfo.of(req_pod("p", affinity=required(*terms))),
                                                    Snapshot.build(NODES))
    if code is not None:
        assert status is not None and status.code == code and status.reasons == ["pod affinity terms conflict"]
        return
    assert status is None
    assert (result.node_names if result is not None else None) == (frozenset(names) if names else None)


def normalise(raw: list[int]) -> list[int]:
    """helper.DefaultNormalizeScore(MaxNodeScore, reverse=false)."""
    top = max(raw)
    return raw if top == 0 else [100 * r // top for r in raw]


@pytest.mark.parametrize(("weighted", "raw"), [
    ([(10, {"matchExpressions": [expr("zone", "In", "z1")]})], [10, 0, 0, 0]),
    ([(10, {"matchExpressions": [expr("zone", "In", "z1")]}),
      (30, {"matchExpressions": [expr("gen", "Exists")]})], [40, 30, 30, 0]),
    ([(7, {"matchExpressions": [expr("gen", "Gt", "2")]}), (5, {"matchFields": [expr("metadata.name", "In", "d")]}),
      (0, {"matchExpressions": [expr("zone", "Exists")]})], [7, 7, 0, 5]),  # weight 0 is ignored
    ([(3, {"matchExpressions": [expr("disk", "DoesNotExist")]}), (100, {})], [0, 0, 3, 3]),  # empty term ignored
], ids=["one-term", "summed-weights", "fields-and-zero-weight", "empty-term"])
def test_score(weighted, raw):
    snapshot = Snapshot.build(NODES)
    p = req_pod("p", affinity=preferred(*weighted))
    status, scores = run_score(node_affinity.new(), p, snapshot, normalize=False)
    assert status is None
    assert scores == raw
    _, normalised = run_score(node_affinity.new(), p, snapshot)
    assert normalised == normalise(raw)


def test_score_skipped_without_preferred_terms_and_error_on_invalid_term():
    snapshot = Snapshot.build(NODES)
    status, _ = run_score(node_affinity.new(), req_pod("p", nodeSelector={"zone": "z1"}), snapshot)
    assert status is not None and status.code == Code.SKIP
    bad = req_pod("q", affinity=preferred((1, {"matchExpressions": [expr("gen", "Lt", "1", "2")]})))
    status = node_affinity.new().pre_score(CycleState(), PodInfo.of(bad), snapshot, np.arange(4))
    assert status is not None and status.code == Code.ERROR


def test_added_affinity_is_enforced_and_scored():
    args = {"addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [expr("zone", "In", "z1", "z2")]}]},
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 4, "preference": {"matchExpressions": [expr("disk", "In", "hdd")]}}]}}
    plugin = node_affinity.new(args)
    snapshot = Snapshot.build(NODES)
    statuses = run_filter(plugin, req_pod("p", nodeSelector={"disk": "ssd"}), snapshot)
    assert statuses[0] is None
    assert statuses[1] is not None and statuses[1].reasons == [ERR]
    assert statuses[2] is not None and statuses[2].reasons == ["node(s) didn't match scheduler-enforced node affinity"]
    _, raw = run_score(plugin, req_pod("q"), snapshot, normalize=False)
    assert raw == [0, 4, 0, 0]
    with pytest.raises(ValueError, match="addedAffinity"):
        node_affinity.new({"addedAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [expr("zone", "Bogus", "z1")]}]}}})
