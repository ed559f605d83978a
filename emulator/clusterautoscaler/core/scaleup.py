"""Scale-up: which node group grows, by how much, for the pods the scheduler could not place.

Upstream ``core/scaleup/orchestrator/orchestrator.go`` ``ScaleUp`` (our own
Python), per scan:

1. the pending pods are grouped into equivalence groups (same controller, same
   spec: what the plugins say about one holds for all);
2. for every node group: skip it - with a reason each pod will hear - when it
   is backed off (``in backoff after failed scale-up``), at its max size
   (``max node group size reached``) or the cluster is at ``--max-nodes-total``
   / ``--cores-total`` / ``--memory-total``; otherwise ask the scheduler's
   Filter plugins whether one pod of each equivalence group fits the group's
   template node (the rejecting plugin's reason is kept);
3. the binpacking estimator says how many new nodes the fitting pods need
   (capped by max size and the cluster limits): one expansion option per group;
4. the expander chain picks one option; with ``--balance-similar-node-groups``
   the new nodes are spread over groups with the same shape
   (``processors/nodegroupset``: same allocatable, labels but zone and
   hostname, taints), the smallest first;
5. ``IncreaseSize``; a cloud error backs the group off. Pods the chosen
   option schedules get ``TriggeredScaleUp`` (and the status ConfigMap
   ``ScaledUpGroup``); in a scan that scaled nothing up, pods no group could
   take get ``NotTriggerScaleUp`` naming the reasons, counted over node groups
   (``pod didn't trigger scale-up: 2 node(s) didn't match Pod's node
   affinity/selector, 1 max node group size reached``).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from emulator.api.quantity import cpu_millis, to_int
from emulator.api.taints import node_taints
from emulator.api.types import Obj
from emulator.cloud.provider import CloudError
from emulator.clusterautoscaler import metrics as m
from emulator.clusterautoscaler.cloudprovider import CloudProvider, NodeGroup
from emulator.clusterautoscaler.clusterstate import ClusterState
from emulator.clusterautoscaler.config import AutoscalingOptions
from emulator.clusterautoscaler.estimator.binpacking import BinpackingEstimator
from emulator.clusterautoscaler.expander import Chain, Option
from emulator.clusterautoscaler.simulator.scheduling import PodSimulator, equivalence_key, is_simple, template_snapshot
from emulator.kubelet.nodes import LABEL_HOSTNAME, LABEL_POOL, LABEL_ZONE
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import PodInfo

log = logging.getLogger(__name__)

__all__ = ["ScaleUpResult", "ScaleUpper"]

BACKOFF_REASON = "in backoff after failed scale-up"
MAX_SIZE_REASON = "max node group size reached"
MAX_TOTAL_REASON = "max total nodes in cluster reached"
MAX_CPU_REASON = "max cluster cpu limit reached"
MAX_MEMORY_REASON = "max cluster memory limit reached"
# Labels that differ between otherwise identical groups (upstream nodegroupset's ignored labels + kemu's own).
_IGNORED_LABELS = {LABEL_HOSTNAME, LABEL_ZONE, "topology.kubernetes.io/region", LABEL_POOL, "kemu.io/node-group",
                   "failure-domain.beta.kubernetes.io/zone"}


@dataclass
class ScaleUpResult:
    """What one scale-up attempt did: groups grown (group -> (before, after)), pods helped and not."""

    increases: dict[str, tuple[int, int]] = field(default_factory=dict)
    triggered: list[PodInfo] = field(default_factory=list)
    remaining: dict[str, str] = field(default_factory=dict)  # pod key -> NotTriggerScaleUp message
    options: list[Option] = field(default_factory=list)
    error: str = ""


def _capacity(node: Mapping[str, Any]) -> tuple[int, int]:
    cap = (node.get("status") or {}).get("capacity") or {}
    return cpu_millis(cap.get("cpu", 0)), to_int(cap.get("memory", 0))


def similar(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Upstream ``IsCloudProviderNodeInfoSimilar`` (simplified): same allocatable, labels but the ignored ones,
    and taints."""
    sa, sb = a.get("status") or {}, b.get("status") or {}
    if sa.get("allocatable") != sb.get("allocatable"):
        return False
    la = {k: v for k, v in ((a.get("metadata") or {}).get("labels") or {}).items() if k not in _IGNORED_LABELS}
    lb = {k: v for k, v in ((b.get("metadata") or {}).get("labels") or {}).items() if k not in _IGNORED_LABELS}
    return la == lb and node_taints(a) == node_taints(b)


class ScaleUpper:
    """See the module docstring. ``event(obj, type, reason, message)`` records events."""

    def __init__(self, options: AutoscalingOptions, provider: CloudProvider, state: ClusterState, *,
                 expander: Chain, simulator: PodSimulator, event: Callable[[Obj, str, str, str], None],
                 log_event: Callable[[str, str], None] = lambda reason, message: None) -> None:
        self.options = options
        self.provider = provider
        self.state = state
        self.expander = expander
        self.simulator = simulator
        self.estimator = BinpackingEstimator(simulator)
        self.event = event
        self.log_event = log_event  # upstream's LogRecorder: events on the status ConfigMap

    # ------------------------------------------------------------------ limits
    def _limits(self, nodes: Sequence[Obj]) -> tuple[int, int, int]:
        """How many more nodes, cores (millis) and memory (bytes) the cluster may add."""
        o = self.options
        upcoming_nodes: list[Obj] = []
        for group in self.provider.node_groups():
            c = self.state.counts.get(group.id())
            if c is not None and c.upcoming:
                upcoming_nodes.extend([group.template_node_info()] * c.upcoming)
        total = len(nodes) + len(upcoming_nodes)
        cpu = mem = 0
        for node in (*nodes, *upcoming_nodes):
            c, mm = _capacity(node)
            cpu += c
            mem += mm
        node_room = (o.max_nodes_total - total) if o.max_nodes_total else 1 << 30
        return node_room, o.cores_total[1] * 1000 - cpu, o.memory_total[1] - mem

    # ------------------------------------------------------------------ the scale-up
    def scale_up(self, pods: Sequence[PodInfo], snapshot: Snapshot, nodes: Sequence[Obj], now: float) -> ScaleUpResult:
        result = ScaleUpResult()
        if not pods:
            return result
        groups: dict[tuple[str, str], list[PodInfo]] = {}
        for pod in pods:
            groups.setdefault(equivalence_key(pod.pod), []).append(pod)
        node_room, cpu_room, mem_room = self._limits(nodes)
        # Per equivalence group: reason text -> number of node groups that gave it.
        reasons: dict[tuple[str, str], Counter[str]] = {k: Counter() for k in groups}
        options: list[Option] = []
        for group in self.provider.node_groups():
            option = self._option(group, groups, reasons, snapshot, now, node_room=node_room, cpu_room=cpu_room,
                                  mem_room=mem_room)
            if option is not None:
                options.append(option)
        result.options = options
        helped: set[str] = set()
        if options:
            best = self.expander.best_option(options)
            assert best is not None
            plan = self._balance(best, options) if self.options.balance_similar_node_groups else \
                [(best.node_group, best.node_count)]
            infos: list[str] = []
            for group, count in plan:
                before = group.target_size()
                try:
                    group.increase_size(count)
                except CloudError as e:
                    self._failed(group, e, now)
                    result.error = e.message
                    continue
                m.SCALED_UP.inc(count)
                self.log_event("ScaledUpGroup", f"Scale-up: setting group {group.id()} size to {before + count} "
                                                f"instead of {before} (max: {group.max_size()})")
                self.state.register_scale_up(group, count, now)
                result.increases[group.id()] = (before, before + count)
                infos.append(f"{{{group.id()} {before}->{before + count} (max: {group.max_size()})}}")
            if infos:
                message = f"pod triggered scale-up: [{' '.join(infos)}]"
                for pod in best.pods:
                    self.event(pod.pod, "Normal", "TriggeredScaleUp", message)
                    helped.add(pod.key)
                result.triggered = list(best.pods)
        if result.increases or result.error:
            return result  # upstream speaks to the remaining pods only in a scan without a scale-up attempt
        fitting = {p.key for o in options for p in o.pods}
        for key, members in groups.items():
            for pod in members:
                if pod.key in helped or pod.key in fitting:
                    continue
                counted = reasons[key]
                if node_room <= 0:  # upstream ReasonsMessage for ScaleUpLimitedByMaxNodesTotal
                    text = MAX_TOTAL_REASON
                else:
                    text = ", ".join(f"{n} {r}" for r, n in sorted(counted.items())) or "no node group can host it"
                message = f"pod didn't trigger scale-up: {text}"
                result.remaining[pod.key] = message
                self.event(pod.pod, "Normal", "NotTriggerScaleUp", message)
        return result

    def _option(self, group: NodeGroup, groups: Mapping[tuple[str, str], list[PodInfo]],
                reasons: dict[tuple[str, str], Counter[str]], snapshot: Snapshot, now: float, *,
                node_room: int, cpu_room: int, mem_room: int) -> Option | None:
        gid = group.id()
        target = group.target_size()
        skip = ""
        if self.state.backoff.active(gid, now) is not None:
            skip = BACKOFF_REASON
        elif target >= group.max_size():
            skip = MAX_SIZE_REASON
        elif node_room <= 0:
            skip = MAX_TOTAL_REASON
        template = group.template_node_info()
        node_cpu, node_mem = _capacity(template)
        if not skip and node_cpu > cpu_room:
            skip = MAX_CPU_REASON
        elif not skip and node_mem > mem_room:
            skip = MAX_MEMORY_REASON
        if skip:
            for counter in reasons.values():
                counter[skip] += 1
            return None
        single = template_snapshot([template])
        with_template: Snapshot | None = None
        fitting: list[PodInfo] = []
        for key, members in groups.items():
            first = members[0]
            if is_simple(first):
                why = self.simulator.reasons_on(first, single, 0)
            else:
                if with_template is None:
                    with_template = snapshot.add_node(template)
                why = self.simulator.reasons_on(first, with_template, with_template.num_nodes - 1)
            if why:
                for r in dict.fromkeys(why):  # the plugins' messages already read "node(s) ..."
                    reasons[key][r] += 1
                continue
            fitting.extend(members)
        if not fitting:
            return None
        limit = group.max_size() - target
        limit = min(limit, node_room, cpu_room // max(1, node_cpu), mem_room // max(1, node_mem))
        estimate = self.estimator.estimate(fitting, template, limit, snapshot)
        if estimate.node_count <= 0:
            return None
        return Option(group, estimate.node_count, estimate.pods, template,
                      f"{gid}: {estimate.node_count} node(s) for {len(estimate.pods)} pod(s)")

    def _balance(self, best: Option, options: Sequence[Option]) -> list[tuple[NodeGroup, int]]:
        """Spread ``best.node_count`` over the similar groups that could help, smallest target first."""
        peers = [o for o in options if o is best or similar(o.template, best.template)]
        sizes = {o.id: o.node_group.target_size() for o in peers}
        adds = dict.fromkeys(sizes, 0)
        by_id = {o.id: o.node_group for o in peers}
        for _ in range(best.node_count):
            room = [g for g in sizes if sizes[g] + adds[g] < by_id[g].max_size()]
            if not room:
                break
            g = min(room, key=lambda x: (sizes[x] + adds[x], x))
            adds[g] += 1
        return [(by_id[g], n) for g, n in sorted(adds.items()) if n > 0]

    def _failed(self, group: NodeGroup, error: CloudError, now: float) -> None:
        log.warning("cluster-autoscaler: scale-up of %s failed: %s", group.id(), error.message)
        m.FAILED_SCALE_UPS.labels("cloudProviderError").inc()
        self.state.register_failed_scale_up(group.id(), now, error.code, error.message)

