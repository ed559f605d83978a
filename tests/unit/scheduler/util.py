"""Helpers for scheduler plugin tests: run a plugin's per-node and vectorised forms and insist they agree."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from emulator.scheduler.framework.interface import CycleState, FilterVerdict, Status, is_success
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo


def prepare(plugin: Any, pod: Mapping[str, Any] | PodInfo, snapshot: Snapshot) -> tuple[CycleState, PodInfo, Any]:
    """A CycleState after the plugin's PreFilter (if any); returns (state, pod info, prefilter status)."""
    state = CycleState()
    info = PodInfo.of(pod)
    status = None
    if hasattr(plugin, "pre_filter"):
        _, status = plugin.pre_filter(state, info, snapshot)
    return state, info, status


def run_filter(plugin: Any, pod: Mapping[str, Any] | PodInfo, snapshot: Snapshot) -> list[Status | None]:
    """Per-node Filter statuses (None = fits), after checking ``filter_all`` says exactly the same."""
    state, info, _ = prepare(plugin, pod, snapshot)
    per_node = [plugin.filter(state, info, snapshot.node_info(i)) for i in range(snapshot.num_nodes)]
    verdict: FilterVerdict = plugin.filter_all(state, info, snapshot)
    for i, status in enumerate(per_node):
        assert bool(verdict.mask[i]) == is_success(status), (i, status)
        if not is_success(status):
            assert status is not None
            vector_status = verdict.status_for(i, "")
            assert (vector_status.code, vector_status.reasons) == (status.code, status.reasons), (i, status)
    return per_node


def run_score(plugin: Any, pod: Mapping[str, Any] | PodInfo, snapshot: Snapshot,
              nodes: list[int] | None = None, normalize: bool = True) -> tuple[Status | None, list[int]]:
    """(PreScore status, scores) of ``nodes`` (default all), after checking ``score_all`` gives the same."""
    state = CycleState()
    info = PodInfo.of(pod)
    idx = np.arange(snapshot.num_nodes) if nodes is None else np.asarray(nodes)
    status = plugin.pre_score(state, info, snapshot, idx) if hasattr(plugin, "pre_score") else None
    per_node = []
    for i in idx.tolist():
        value, st = plugin.score(state, info, snapshot.node_info(i))
        assert is_success(st), st
        per_node.append(value)
    vector = np.asarray(plugin.score_all(state, info, snapshot, idx), dtype=np.int64)
    assert vector.tolist() == per_node
    scores = np.asarray(per_node, dtype=np.int64)
    if normalize and hasattr(plugin, "normalize_score"):
        plugin.normalize_score(state, info, scores)
    return status, scores.tolist()
