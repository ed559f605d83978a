"""TaintToleration: keep pods off nodes whose taints they do not tolerate, and prefer fewer soft taints.

Upstream ``pkg/scheduler/framework/plugins/tainttoleration/taint_toleration.go``.

* Filter: the first NoSchedule/NoExecute taint the pod does not tolerate
  rejects the node, UnschedulableAndUnresolvable, with the reason
  ``node(s) had untolerated taint {key: value}``.
* Score: the number of PreferNoSchedule taints not tolerated by the pod's
  tolerations with effect PreferNoSchedule or no effect; NormalizeScore
  reverses it onto 0..100 (no intolerable taints = 100).

Vectorised, both work per *distinct taint list* (most nodes share a handful)
and spread the answer to nodes through :meth:`Snapshot.taint_groups`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from emulator.api.taints import Taint, find_untolerated_taint, taint_of, tolerations_tolerate
from emulator.scheduler.framework.interface import (
    Code,
    CycleState,
    FilterVerdict,
    Handle,
    Rejection,
    Status,
    all_pass,
)
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import NodeInfo, PodInfo
from emulator.scheduler.plugins.helper import default_normalize_score

NAME = "TaintToleration"
PRE_SCORE_KEY = "PreScore" + NAME
_DO_NOT_SCHEDULE = frozenset({"NoSchedule", "NoExecute"})
_PREFER_NO_SCHEDULE = "PreferNoSchedule"


def untolerated_reason(taint: Taint) -> str:
    return f"node(s) had untolerated taint {{{taint[0]}: {taint[1]}}}"


def count_intolerable_prefer_no_schedule(taints: Sequence[Taint], tolerations: Sequence[Mapping[str, Any]]) -> int:
    """Soft (PreferNoSchedule) taints the tolerations do not tolerate (``countIntolerableTaintsPreferNoSchedule``)."""
    return sum(1 for taint in taints
               if taint[2] == _PREFER_NO_SCHEDULE and not tolerations_tolerate(tolerations, taint))


def tolerations_key(pod: PodInfo) -> tuple[tuple[tuple[str, str], ...], ...]:
    """A hashable form of the pod's tolerations, to memoise node-only answers per toleration list."""
    return pod.memo(NAME + "/key", lambda p: tuple(
        tuple(sorted((k, str(v)) for k, v in t.items())) for t in p.tolerations))


def prefer_no_schedule_tolerations(pod: PodInfo) -> tuple[Mapping[str, Any], ...]:
    """Tolerations that can tolerate PreferNoSchedule taints: that effect, or no effect (= all effects)."""
    return tuple(t for t in pod.tolerations if (t.get("effect") or "") in ("", _PREFER_NO_SCHEDULE))


class TaintToleration:
    """Filter and Score plugin on node taints."""

    name = NAME

    # -- Filter ----------------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        taint = find_untolerated_taint((taint_of(t) for t in node.taints), pod.tolerations, _DO_NOT_SCHEDULE)
        if taint is None:
            return None
        return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, untolerated_reason(taint))

    def filter_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> FilterVerdict:
        # Depends on node taints and the pod's tolerations only: pods with the same tolerations share it.
        return snapshot.node_memo((NAME, "filter", tolerations_key(pod)), lambda: self._verdict(pod, snapshot))

    @staticmethod
    def _verdict(pod: PodInfo, snapshot: Snapshot) -> FilterVerdict:
        codes, groups = snapshot.taint_groups()
        reason_ids: dict[str, int] = {}
        group_reason = np.full(len(groups) + 1, -1, dtype=np.int64)  # last entry: unused padding
        for g, taints in enumerate(groups):
            taint = find_untolerated_taint(taints, pod.tolerations, _DO_NOT_SCHEDULE)
            if taint is not None:
                group_reason[g] = reason_ids.setdefault(untolerated_reason(taint), len(reason_ids))
        if not reason_ids:
            return all_pass(snapshot.num_nodes)
        node_reason = group_reason[codes]
        rejections = tuple(Rejection(reason, node_reason == rid, Code.UNSCHEDULABLE_AND_UNRESOLVABLE)
                           for reason, rid in reason_ids.items())
        return FilterVerdict(node_reason < 0, rejections)

    # -- PreScore / Score ------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> Status | None:
        state.write(PRE_SCORE_KEY, prefer_no_schedule_tolerations(pod))
        return None

    @staticmethod
    def _tolerations(state: CycleState, pod: PodInfo) -> tuple[Mapping[str, Any], ...]:
        tolerations = state.get(PRE_SCORE_KEY)
        return tolerations if tolerations is not None else prefer_no_schedule_tolerations(pod)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None]:
        taints = [taint_of(t) for t in node.taints]
        return count_intolerable_prefer_no_schedule(taints, self._tolerations(state, pod)), None

    def score_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> np.ndarray:
        codes, groups = snapshot.taint_groups()
        tolerations = self._tolerations(state, pod)
        per_group = snapshot.node_memo(
            (NAME, "score", tuple(tuple(sorted((k, str(v)) for k, v in t.items())) for t in tolerations)),
            lambda: np.fromiter((count_intolerable_prefer_no_schedule(t, tolerations) for t in groups),
                                dtype=np.int64, count=len(groups)))
        return per_group[codes[nodes]]

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> Status | None:
        default_normalize_score(scores, reverse=True)
        return None


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> TaintToleration:
    return TaintToleration()
