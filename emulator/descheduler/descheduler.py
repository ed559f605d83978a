"""The descheduling loop (upstream ``pkg/descheduler/descheduler.go``).

:meth:`Descheduler.run_once` is upstream's ``runDeschedulerLoop``:

1. take a :class:`~emulator.descheduler.framework.ClusterSnapshot` (from the
   controller manager's shared informer caches, or listed from the store for a
   one-shot run);
2. the nodes are the Ready ones matching the policy's ``nodeSelector``; with
   one node or none nothing happens ("the cluster size is 0 or 1 meaning
   eviction causes service disruption or degradation");
3. the evictor's counters restart (limits are per loop); every profile runs
   its *deschedule* plugins, then every profile its *balance* plugins;
4. the loop is timed (``descheduler_descheduler_loop_duration_seconds``).

:class:`DeschedulerController` is the controller manager's ``descheduler``
controller (off unless a policy is configured: option ``descheduler_policy``,
a file path or a policy mapping; ``descheduler_dry_run``;
``descheduling_interval`` in cluster seconds, default 300 as the upstream Helm
chart's ``deschedulingInterval: 5m``; 0 runs once). It holds one key that
requeues itself every interval on the cluster clock; running inside the
leader-elected manager makes it leader-elected, as upstream's
``--leader-elect``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from emulator.api.kinds import NAMESPACE, NODE, PDB, POD, PRIORITYCLASS
from emulator.api.quantity import cpu_millis, to_int
from emulator.clock import Clock
from emulator.descheduler import utils
from emulator.descheduler.api import DeschedulerPolicy, load_policy, load_policy_file
from emulator.descheduler.evictions import Eviction, PodEvictor
from emulator.descheduler.framework import ClusterSnapshot, RunningProfile, Usage
from emulator.descheduler.metrics import LOOP_DURATION
from emulator.descheduler.podindex import PodIndex

log = logging.getLogger(__name__)

DEFAULT_INTERVAL = 300.0
CONTROLLER_NAME = "descheduler"
LOOP_KEY = "descheduler/loop"


@dataclass
class PassResult:
    """What one loop did: evictions (or would-be evictions in dry-run mode), refusals, plugin errors."""

    evicted: list[Eviction] = field(default_factory=list)
    failed: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    nodes: int = 0
    skipped: str = ""
    seconds: float = 0.0


def _usage_of(usage: Mapping[str, str]) -> Usage:
    return {"cpu": cpu_millis(usage.get("cpu", "0")), "memory": to_int(usage.get("memory", "0"))}


def metrics_sources(core: Any, clock: Clock) -> tuple[Callable[[], dict[str, Usage]],
                                                       Callable[[], dict[tuple[str, str], Usage]]]:
    """Node and pod usage as ``metrics.k8s.io`` serves it (the kubelets' published snapshot)."""
    from emulator.kubelet.usage import node_metrics, pod_metrics

    store = core.store

    def nodes() -> dict[str, Usage]:
        return {m["metadata"]["name"]: _usage_of(m["usage"])
                for m in node_metrics(store.redis, store.config.prefix, now=clock.now())}

    def pods() -> dict[tuple[str, str], Usage]:
        out: dict[tuple[str, str], Usage] = {}
        for m in pod_metrics(store.redis, store.config.prefix, now=clock.now()):
            total = {"cpu": 0, "memory": 0}
            for c in m["containers"]:
                u = _usage_of(c["usage"])
                total["cpu"] += u["cpu"]
                total["memory"] += u["memory"]
            out[(m["metadata"]["namespace"], m["metadata"]["name"])] = total
        return out

    return nodes, pods


def snapshot_from_store(core: Any, clock: Clock) -> ClusterSnapshot:
    """The cluster listed from the store (a one-shot run has no informers)."""
    node_src, pod_src = metrics_sources(core, clock)
    return ClusterSnapshot.build(
        core.list(NODE).items, core.list(POD).items,
        priority_classes={pc["metadata"]["name"]: int(pc.get("value") or 0) for pc in core.list(PRIORITYCLASS).items},
        namespaces={ns["metadata"]["name"]: ns for ns in core.list(NAMESPACE).items},
        pdbs=core.list(PDB).items, node_usage_source=node_src, pod_usage_source=pod_src)


class Descheduler:
    """One policy, one evictor; :meth:`run_once` is one descheduling loop."""

    def __init__(self, policy: DeschedulerPolicy, clock: Clock, *, core: Any = None, dry_run: bool = False,
                 recorder: Any = None) -> None:
        self.policy = policy
        self.clock = clock
        self.evictor = PodEvictor(core, dry_run=dry_run, max_per_node=policy.max_pods_per_node,
                                  max_per_namespace=policy.max_pods_per_namespace, max_total=policy.max_pods_total,
                                  grace_period_seconds=policy.grace_period_seconds, recorder=recorder,
                                  failure_events=policy.eviction_failure_event_notification)
        self.loops = 0
        self.pod_index = PodIndex()  # kept across passes: only the nodes whose pods changed are indexed again

    def run_once(self, snapshot: ClusterSnapshot) -> PassResult:
        started = time.perf_counter()
        result = PassResult()
        nodes = utils.ready_nodes(snapshot.nodes, self.policy.node_selector)
        result.nodes = len(nodes)
        self.evictor.reset_counters()
        if snapshot.index is None:
            snapshot.index = self.pod_index
        if len(nodes) <= 1:
            result.skipped = ("The cluster size is 0 or 1 meaning eviction causes service disruption or "
                              "degradation. So aborting..")
            log.info("descheduler: %s", result.skipped)
        else:
            profiles = [RunningProfile(p, snapshot, self.clock, self.evictor, nodes) for p in self.policy.profiles]
            for profile in profiles:
                result.errors += profile.run_deschedule(nodes)
            for profile in profiles:
                result.errors += profile.run_balance(nodes)
        for error in result.errors:
            log.warning("descheduler: %s", error)
        result.evicted = list(self.evictor.evicted)
        result.failed = list(self.evictor.failed)
        result.seconds = time.perf_counter() - started
        LOOP_DURATION.labels("running").observe(result.seconds)
        self.loops += 1
        log.info("descheduler: loop %d evicted %d pods in %.3f s", self.loops, len(result.evicted), result.seconds)
        return result


def policy_from_option(value: Any) -> DeschedulerPolicy:
    if isinstance(value, DeschedulerPolicy):
        return value
    if isinstance(value, Mapping):
        return load_policy(value)
    if isinstance(value, str) and value.strip():
        return load_policy_file(value)
    raise ValueError("the descheduler controller needs a policy: set controller_manager.options.descheduler_policy "
                     "(or kemu up --descheduler-policy FILE)")

