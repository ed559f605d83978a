"""TaintToleration: toleration matching, filter reasons, PreferNoSchedule counts and the reversed normalisation."""

from __future__ import annotations

import pytest

from emulator.api.taints import tolerates
from emulator.scheduler.framework.interface import Code
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.plugins import taint_toleration
from tests.builders import req_pod, sched_node, taint, toleration
from tests.unit.scheduler.util import run_filter, run_score

TOLERATES = [
    (toleration("k", "v", "NoSchedule"), ("k", "v", "NoSchedule"), True),
    (toleration("k", "v", "NoSchedule"), ("k", "w", "NoSchedule"), False),
    (toleration("k", "v"), ("k", "v", "NoExecute"), True),  # no effect: every effect
    (toleration("k", "v", "NoExecute"), ("k", "v", "NoSchedule"), False),
    (toleration("k", operator="Exists"), ("k", "anything", "NoSchedule"), True),
    (toleration(operator="Exists"), ("any", "thing", "NoExecute"), True),  # empty key + Exists: everything
    (toleration(operator="Exists", effect="NoSchedule"), ("any", "x", "PreferNoSchedule"), False),
    (toleration("k"), ("k", "", "NoSchedule"), True),  # Equal with empty value matches an empty value
    (toleration("k", "v", operator="Gt"), ("k", "v", "NoSchedule"), False),  # unknown operator
    ({"key": "k", "value": "v"}, ("k", "v", "NoSchedule"), True),  # no operator means Equal
]


@pytest.mark.parametrize(("tol", "node_taint", "expected"), TOLERATES,
                         ids=["exact", "value-differs", "no-effect", "effect-differs", "exists", "wildcard",
                              "wildcard-other-effect", "empty-value", "unknown-operator", "default-operator"])
def test_tolerates(tol, node_taint, expected):
    assert tolerates(tol, node_taint) is expected


def _nodes():
    return [
        sched_node("clean"),
        sched_node("hard", taints=[taint("dedicated", "infra")]),
        sched_node("exec", taints=[taint("x", "1", "PreferNoSchedule"), taint("gone", "", "NoExecute")]),
        sched_node("soft", taints=[taint("a", "1", "PreferNoSchedule"), taint("b", "2", "PreferNoSchedule")]),
        sched_node("two-hard", taints=[taint("first", "1"), taint("second", "2")]),
    ]


@pytest.mark.parametrize(("tolerations", "expected"), [
    ([], [None, "{dedicated: infra}", "{gone: }", None, "{first: 1}"]),
    ([toleration("dedicated", "infra", "NoSchedule")], [None, None, "{gone: }", None, "{first: 1}"]),
    ([toleration("first", "1")], [None, "{dedicated: infra}", "{gone: }", None, "{second: 2}"]),
    ([toleration(operator="Exists")], [None, None, None, None, None]),
], ids=["none", "tolerates-dedicated", "first-of-two", "tolerates-all"])
def test_filter(tolerations, expected):
    snapshot = Snapshot.build(_nodes())
    statuses = run_filter(taint_toleration.new(), req_pod("p", tolerations=tolerations), snapshot)
    for status, want in zip(statuses, expected, strict=True):
        if want is None:
            assert status is None
        else:
            assert status is not None and status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            assert status.reasons == [f"node(s) had untolerated taint {want}"]


def reversed_normalise(counts: list[int]) -> list[int]:
    """helper.DefaultNormalizeScore(MaxNodeScore, reverse=true)."""
    top = max(counts)
    if top == 0:
        return [100] * len(counts)
    return [100 - 100 * c // top for c in counts]


@pytest.mark.parametrize(("tolerations", "counts"), [
    ([], [0, 0, 1, 2, 0]),
    ([toleration("a", "1", "PreferNoSchedule")], [0, 0, 1, 1, 0]),
    ([toleration("a", "1", "NoSchedule")], [0, 0, 1, 2, 0]),  # only PreferNoSchedule / no-effect tolerations count
    ([toleration("a", "1"), toleration("x", operator="Exists")], [0, 0, 0, 1, 0]),
    ([toleration(operator="Exists")], [0, 0, 0, 0, 0]),
], ids=["none", "prefer-toleration", "wrong-effect", "no-effect-tolerations", "all"])
def test_score(tolerations, counts):
    snapshot = Snapshot.build(_nodes())
    plugin = taint_toleration.new()
    p = req_pod("p", tolerations=tolerations)
    _, raw = run_score(plugin, p, snapshot, normalize=False)
    assert raw == counts
    _, normalised = run_score(plugin, p, snapshot)
    assert normalised == reversed_normalise(counts)


def test_normalised_scores_hand_computed():
    # counts 0, 1, 2 -> 100, 50, 0
    snapshot = Snapshot.build([_nodes()[0], _nodes()[2], _nodes()[3]])
    _, scores = run_score(taint_toleration.new(), req_pod("p", tolerations=[toleration("gone", operator="Exists")]),
                          snapshot)
    assert scores == [100, 50, 0]
