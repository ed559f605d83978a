"""Status, CycleState and PreFilterResult semantics (upstream interface.go / cycle_state.go)."""

from __future__ import annotations

import numpy as np
import pytest

from emulator.scheduler.framework.interface import (
    Code,
    CycleState,
    FilterVerdict,
    PreFilterResult,
    Rejection,
    Status,
    as_status,
    is_success,
)


@pytest.mark.parametrize(("code", "name", "rejected"), [
    (Code.SUCCESS, "Success", False), (Code.ERROR, "Error", False), (Code.UNSCHEDULABLE, "Unschedulable", True),
    (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "UnschedulableAndUnresolvable", True), (Code.WAIT, "Wait", False),
    (Code.SKIP, "Skip", False), (Code.PENDING, "Pending", True),
], ids=str)
def test_codes(code, name, rejected):
    assert str(code) == name
    assert Status(code).is_rejected() is rejected


def test_status_message_and_error():
    status = Status(Code.UNSCHEDULABLE, "Insufficient cpu", "Insufficient memory")
    assert status.message == "Insufficient cpu, Insufficient memory"
    err = Status.error(RuntimeError("boom"), plugin="P")
    assert err.code == Code.ERROR and err.all_reasons() == ["boom"] and err.plugin == "P"
    err.reasons.append("more")
    assert err.message == "boom, more"  # the error text comes first
    assert is_success(None) and is_success(Status()) and not is_success(status)
    assert as_status(None).code == Code.SUCCESS
    assert Status(Code.SKIP).with_plugin("X") == Status(Code.SKIP, plugin="X")


def test_cycle_state_read_write_clone():
    class Counter:
        def __init__(self, n: int) -> None:
            self.n = n

        def clone(self) -> Counter:
            return Counter(self.n)

    state = CycleState()
    state.write("k", Counter(1))
    state.write("plain", [1])
    state.skip_filter_plugins = frozenset({"A"})
    copy = state.clone()
    copy.read("k").n = 2
    assert state.read("k").n == 1  # values with clone() are copied
    assert copy.read("plain") is state.read("plain")  # the rest is shared, as upstream's Clone
    assert copy.skip_filter_plugins == {"A"}
    with pytest.raises(KeyError):
        state.read("missing")
    assert state.get("missing", 7) == 7 and "k" in state
    state.delete("k")
    assert "k" not in state


@pytest.mark.parametrize(("a", "b", "expected"), [
    (None, None, None),
    ({"x", "y"}, None, {"x", "y"}),
    (None, {"x"}, {"x"}),
    ({"x", "y"}, {"y", "z"}, {"y"}),
    ({"x"}, {"z"}, set()),
], ids=["all-all", "some-all", "all-some", "intersect", "disjoint"])
def test_pre_filter_result_merge(a, b, expected):
    left = PreFilterResult(None if a is None else frozenset(a))
    right = PreFilterResult(None if b is None else frozenset(b))
    merged = left.merge(right)
    assert (None if merged is None else merged.node_names) == (None if expected is None else frozenset(expected))


def test_filter_verdict_status_for_a_node():
    mask = np.array([True, False, False])
    verdict = FilterVerdict(~np.array([False, True, True]), (
        Rejection("Insufficient cpu", np.array([False, True, True]), unresolvable=np.array([False, False, True])),
        Rejection("Insufficient memory", np.array([False, False, True])),
    ))
    assert verdict.mask.tolist() == mask.tolist()
    assert verdict.status_for(1, "Fit") == Status(Code.UNSCHEDULABLE, "Insufficient cpu", plugin="Fit")
    assert verdict.status_for(2, "Fit") == Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "Insufficient cpu",
                                                  "Insufficient memory", plugin="Fit")
