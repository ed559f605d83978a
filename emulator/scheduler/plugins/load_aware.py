"""LoadAware: filter and score nodes on their measured load (the dynamic scheduler, in process).

Out of tree upstream: gocrane/crane-scheduler's ``Dynamic`` plugin
(``pkg/plugins/dynamic/plugins.go``), the in-process form of Tencent TKE's
dynamic scheduler. The node annotator
(:mod:`emulator.controllers.nodeannotator`) writes utilization windows and a
hot value into Node annotations; this plugin reads them from the snapshot's
node objects and applies :class:`emulator.loadaware.policy.Policy`:

* **Filter**: nodes whose fresh ``cpu_usage_avg_5m``, ``cpu_usage_max_avg_1h``,
  ``mem_usage_avg_5m`` or ``mem_usage_max_avg_1h`` exceed the policy's
  limits are rejected (Unschedulable); DaemonSet pods are never filtered
  (crane: they must run everywhere).
* **Score**: the weighted free share of the six windows, minus the hot-value
  penalty. The hot value is the node's fresh ``node_hot_value`` annotation
  or, if higher, what this plugin counts from its own placements (recorded at
  Reserve, dropped at Unreserve) -- the annotation is written every pass,
  a burst of binds happens within one, so without the local count a new,
  empty node would take the whole burst.
* Stale annotations (older than the metric's sync period + 5 minutes, or
  ``maxAnnotationAge``) are ignored: neither filtered on nor scored.

Args (``pluginConfig``): a ``DynamicSchedulerPolicy`` spec inline
(``syncPolicy``, ``predicate``, ``priority``, ``hotValue``,
``maxAnnotationAge``, ``hotValuePenalty``), under ``policy``, or a file
named by ``policyConfigPath`` (crane's arg). Time is the scheduler's cluster
clock (``handle.clock``), wall time without one.

Annotations are parsed once per node set (``Snapshot.node_memo``: an
annotation change rebuilds the scheduler's snapshot). Neither verdict depends
on the pod (DaemonSet pods aside), so the filter mask and the scores of every
node are computed once per node set and cluster second (scores also when our
own placements change) and a cycle only indexes them: freshness is decided
to the second.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import yaml

from emulator.loadaware.hotvalue import BindingRecords
from emulator.loadaware.policy import NodeLoads, Policy, overload_reason
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

NAME = "LoadAware"
_RESERVED_AT = NAME + "/reservedAt"


def is_daemonset_pod(pod: PodInfo) -> bool:
    return any(ref.get("kind") == "DaemonSet" for ref in (pod.pod.get("metadata") or {}).get("ownerReferences") or ())


def node_loads(snapshot: Snapshot) -> NodeLoads:
    """The load annotations of every snapshot node, parsed once per node set."""
    return snapshot.node_memo((NAME, "loads"), lambda: NodeLoads.parse(
        [(snapshot.node(i).get("metadata") or {}).get("annotations") for i in range(snapshot.num_nodes)]))


class LoadAware:
    """Filter + Score + Reserve plugin; see the module docstring."""

    name = NAME

    def __init__(self, policy: Policy, now: Callable[[], float]) -> None:
        self.policy = policy
        self.now = now
        self.records = BindingRecords(policy.hot_value_horizon)
        self._hot_cache: tuple[tuple[int, int], dict[str, int]] | None = None
        # Neither verdict depends on the pod: computed over every node once per node set, cluster second
        # (and, for scores, change of our own placements), then indexed per pod.
        # The key holds the NodeLoads itself (compared with ``is``; an id could be reused after a rebuild).
        self._filter_cache: tuple[NodeLoads, int, FilterVerdict] | None = None
        self._score_cache: tuple[NodeLoads, tuple[int, int], np.ndarray] | None = None

    # ------------------------------------------------------------------ hot value of our own placements
    def local_hot(self, now: float) -> dict[str, int]:
        """Node -> hot value from this plugin's own recent placements (cached per change and per second)."""
        key = (self.records.version, int(now))
        cached = self._hot_cache
        if cached is not None and cached[0] == key:
            return cached[1]
        ranges = [r.time_range for r in self.policy.hot_value]
        hot = {node: value for node, counts in self.records.counts(now, ranges).items()
               if (value := self.policy.hot_value_of(counts))}
        self._hot_cache = (key, hot)
        return hot

    def _local_hot_array(self, snapshot: Snapshot, now: float) -> np.ndarray:
        out = np.zeros(snapshot.num_nodes)
        for node, value in self.local_hot(now).items():
            i = snapshot.index_of(node)
            if i is not None:
                out[i] = value
        return out

    # ------------------------------------------------------------------ filter
    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if is_daemonset_pod(pod):
            return None
        metric = self.policy.first_overload((node.node.get("metadata") or {}).get("annotations"), self.now())
        return None if metric is None else Status(Code.UNSCHEDULABLE, overload_reason(metric))

    def filter_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot) -> FilterVerdict:
        if is_daemonset_pod(pod) or not self.policy.predicates:
            return all_pass(snapshot.num_nodes)
        loads = node_loads(snapshot)
        now = self.now()
        cached = self._filter_cache
        if cached is not None and cached[0] is loads and cached[1] == int(now):
            return cached[2]
        verdict = self._verdict(loads, now, snapshot.num_nodes)
        self._filter_cache = (loads, int(now), verdict)
        return verdict

    def _verdict(self, loads: NodeLoads, now: float, n: int) -> FilterVerdict:
        over = self.policy.overloaded(loads, now)
        rejected = np.zeros(n, dtype=bool)
        reasons = []
        for metric, mask in over:
            # The per-node filter stops at the first metric over its limit: so does the reason list.
            first = mask & ~rejected
            if first.any():
                reasons.append(Rejection(overload_reason(metric), first))
                rejected |= first
        if not reasons:
            return all_pass(n)
        return FilterVerdict(~rejected, tuple(reasons))

    # ------------------------------------------------------------------ score
    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None]:
        now = self.now()
        local = float(self.local_hot(now).get(node.name, 0))
        return self.policy.score_of((node.node.get("metadata") or {}).get("annotations"), now, local), None

    def score_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> np.ndarray:
        now = self.now()
        loads = node_loads(snapshot)
        key = (int(now), self.records.version)
        cached = self._score_cache
        if cached is None or cached[0] is not loads or cached[1] != key:
            cached = self._score_cache = (loads, key, self.policy.scores(loads, now,
                                                                         self._local_hot_array(snapshot, now)))
        return cached[2][nodes]

    # ------------------------------------------------------------------ reserve: count our own placements
    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        now = self.now()
        self.records.add(node_name, now)
        state.write(_RESERVED_AT, now)
        return None

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        at = state.get(_RESERVED_AT)
        if at is not None:
            self.records.remove(node_name, at)
            state.delete(_RESERVED_AT)


def policy_from_args(args: Mapping[str, Any] | None) -> Policy:
    """The policy of ``LoadAwareArgs``: inline, under ``policy``, or in the file ``policyConfigPath``."""
    args = dict(args or {})
    path = args.pop("policyConfigPath", None)
    if path:
        if args:
            raise ValueError(f"policyConfigPath excludes an inline policy (got also {sorted(args)})")
        with open(path, encoding="utf-8") as f:
            return Policy.from_dict(yaml.safe_load(f) or {})
    if "policy" in args:
        return Policy.from_dict(args["policy"])
    return Policy.from_dict(args)


def new(args: Mapping[str, Any] | None = None, handle: Handle | None = None) -> LoadAware:
    clock = getattr(handle, "clock", None)
    return LoadAware(policy_from_args(args), clock.now if clock is not None else time.time)
