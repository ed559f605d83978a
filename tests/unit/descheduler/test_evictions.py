"""The pod evictor's limits, in upstream's order (total, then node, then namespace), counted per loop."""

from __future__ import annotations

import pytest

from emulator.descheduler.evictions import (
    EvictionNamespaceLimitError,
    EvictionNodeLimitError,
    EvictionTotalLimitError,
    EvictOptions,
    PodEvictor,
)
from tests.unit.descheduler.helpers import pod

OPTS = EvictOptions(strategy="Test", profile="p")


@pytest.mark.parametrize(("limits", "pods", "outcomes"), [
    ({"max_per_node": 2}, [("a", "n1", "x"), ("b", "n1", "x"), ("c", "n1", "x"), ("d", "n2", "x")],
     ["ok", "ok", EvictionNodeLimitError, "ok"]),
    ({"max_per_namespace": 1}, [("a", "n1", "x"), ("b", "n2", "x"), ("c", "n2", "y")],
     ["ok", EvictionNamespaceLimitError, "ok"]),
    ({"max_total": 2, "max_per_node": 1}, [("a", "n1", "x"), ("b", "n1", "x"), ("c", "n2", "x"), ("d", "n3", "x")],
     ["ok", EvictionNodeLimitError, "ok", EvictionTotalLimitError]),
    ({}, [("a", "n1", "x"), ("b", "n1", "x")], ["ok", "ok"]),
], ids=["per-node", "per-namespace", "total-checked-first", "no-limits"])
def test_limits(limits: dict, pods: list[tuple[str, str, str]], outcomes: list) -> None:
    evictor = PodEvictor(None, dry_run=True, **limits)
    for (name, node, ns), outcome in zip(pods, outcomes, strict=True):
        subject = pod(name, node, namespace=ns)
        if outcome == "ok":
            evictor.evict_pod(subject, OPTS)
        else:
            with pytest.raises(outcome):
                evictor.evict_pod(subject, OPTS)
    assert evictor.total == outcomes.count("ok")
    assert [e.name for e in evictor.evicted] == [p[0] for p, o in zip(pods, outcomes, strict=True) if o == "ok"]


def test_counters_restart_every_loop() -> None:
    evictor = PodEvictor(None, dry_run=True, max_total=1)
    evictor.evict_pod(pod("a", "n1"), OPTS)
    with pytest.raises(EvictionTotalLimitError):
        evictor.evict_pod(pod("b", "n1"), OPTS)
    evictor.reset_counters()
    evictor.evict_pod(pod("b", "n1"), OPTS)
    assert [e.name for e in evictor.evicted] == ["b"]


def test_a_real_evictor_needs_the_server_core() -> None:
    with pytest.raises(ValueError, match="needs the server core"):
        PodEvictor(None)
