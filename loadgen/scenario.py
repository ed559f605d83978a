"""Scenario files: a cluster, its schedulers and a workload, as data.

A scenario is YAML validated into frozen dataclasses; an unknown key or a
value of the wrong type is a :class:`ScenarioError` naming the key path
(``workload.pods: expected an integer >= 0, got 'many'``). The same scenario
and seed always produce the same workload (see :mod:`loadgen.runner`).

Schema (every key optional; defaults in the dataclasses below)::

    name: quickstart
    seed: 42
    cluster:              # one node pool of kubelet-managed nodes (node-00000 ...)
      nodes: 300          # count
      node_cpu: "32"      # capacity per node (cpu, memory, pods)
      node_memory: 128Gi
      node_pods: 110
      zones: 3            # zone-a, zone-b, ... round robin
      kubelet_shards: 1   # kubelet shard actors; 0 = the default (one per 1,250 nodes)
    schedulers:
      count: 1            # competing scheduler replicas
    workload:
      namespaces: 4
      pods: 3000
      rate: 200           # pods/s created (0: as fast as the store takes them)
      arrival: constant   # or poisson (exponential inter-arrival times, seeded)
      batch: 100          # most pods per store round trip
      max_backlog: 2000   # back-pressure: stop creating while this many created pods are unscheduled
      cpu: [100m, 250m]   # requests, drawn uniformly per pod
      memory: [128Mi]
      profile: [web, batch]   # kemu.io/profile annotation, drawn per pod (none: the kubelet's default)
      priorities:         # priority mix: PriorityClasses created by the run, drawn by weight
        - {name: high, value: 1000, weight: 1}
      expect_pending: 0   # pods the scenario expects to stay Pending (exit code 0 still)
      settle_timeout: 60  # seconds to wait after the last create for pods to be scheduled and Running

The cluster section maps onto kemu's own configuration (``node_pools``,
``kubelet_shards``, ``schedulers`` in :class:`emulator.config.Config`), so a
scenario's cluster is exactly what ``kemu up --nodes N --schedulers S`` runs.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from emulator.api.quantity import QuantityError, parse_quantity


class ScenarioError(ValueError):
    pass


@dataclass(frozen=True)
class ClusterSpec:
    nodes: int = 100
    node_cpu: str = "32"
    node_memory: str = "128Gi"
    node_pods: int = 110
    zones: int = 3
    kubelet_shards: int = 0  # 0: kemu's default (one shard per 1,250 nodes)

    def node_pool(self) -> dict[str, Any]:
        """The nodes as one node pool (:class:`emulator.kubelet.nodes.NodePool` data)."""
        return {"name": "node", "count": self.nodes,
                "capacity": {"cpu": self.node_cpu, "memory": self.node_memory, "pods": str(self.node_pods)},
                "zones": [f"zone-{chr(97 + i)}" for i in range(self.zones)]}


@dataclass(frozen=True)
class SchedulersSpec:
    count: int = 1


@dataclass(frozen=True)
class PriorityClassSpec:
    name: str
    value: int
    weight: float = 1.0


@dataclass(frozen=True)
class WorkloadSpec:
    namespaces: int = 1
    pods: int = 1000
    rate: float = 0.0  # pods/s; 0 = unthrottled
    arrival: str = "constant"
    batch: int = 250
    max_backlog: int = 2000
    cpu: tuple[str, ...] = ("100m",)
    memory: tuple[str, ...] = ("128Mi",)
    profile: tuple[str, ...] = ()
    priorities: tuple[PriorityClassSpec, ...] = ()
    expect_pending: int = 0
    settle_timeout: float = 60.0


ARRIVALS = ("constant", "poisson")


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: int
    cluster: ClusterSpec
    workload: WorkloadSpec
    schedulers: SchedulersSpec = SchedulersSpec()

    @classmethod
    def load(cls, path: Path) -> Scenario:
        try:
            data = yaml.safe_load(path.read_text())
        except OSError as e:
            raise ScenarioError(f"cannot read scenario {path}: {e.strerror}") from None
        except yaml.YAMLError as e:
            raise ScenarioError(f"scenario {path} is not valid YAML: {e}") from None
        if not isinstance(data, dict):
            raise ScenarioError(f"scenario {path} must be a mapping")
        return cls.from_dict(data)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Scenario:
        _no_unknown(data, {"name", "seed", "cluster", "schedulers", "workload"}, "")
        workload = dict(_mapping(data.get("workload") or {}, "workload"))
        # Priorities are a list of mappings, not a flat value: validated on their own.
        priorities = _priorities(workload.pop("priorities", None) or [])
        scenario = cls(
            name=str(data.get("name", "scenario")),
            seed=_int(data.get("seed", 0), "seed"),
            cluster=_section(ClusterSpec, data.get("cluster") or {}, "cluster"),
            schedulers=_section(SchedulersSpec, data.get("schedulers") or {}, "schedulers"),
            workload=_section(WorkloadSpec, workload, "workload", extra={"priorities": priorities}),
        )
        _check(scenario)
        return scenario


def _check(scenario: Scenario) -> None:
    c, w = scenario.cluster, scenario.workload
    for path, value in (("cluster.node_cpu", c.node_cpu), ("cluster.node_memory", c.node_memory),
                        *((f"workload.cpu[{i}]", v) for i, v in enumerate(w.cpu)),
                        *((f"workload.memory[{i}]", v) for i, v in enumerate(w.memory))):
        try:
            parse_quantity(value)
        except QuantityError as e:
            raise ScenarioError(f"{path}: {e}") from None
    if w.batch < 1:
        raise ScenarioError("workload.batch: must be at least 1")
    if w.namespaces < 1:
        raise ScenarioError("workload.namespaces: must be at least 1")
    if w.max_backlog < 1:
        raise ScenarioError("workload.max_backlog: must be at least 1")
    if w.arrival not in ARRIVALS:
        raise ScenarioError(f"workload.arrival: must be one of {', '.join(ARRIVALS)}, got {w.arrival!r}")
    if w.arrival == "poisson" and w.rate <= 0:
        raise ScenarioError("workload.rate: poisson arrivals need a rate > 0 (pods/s)")
    if w.expect_pending > w.pods:
        raise ScenarioError(f"workload.expect_pending: {w.expect_pending} is more than workload.pods ({w.pods})")
    if c.zones < 1 or c.zones > 26:
        raise ScenarioError("cluster.zones: must be between 1 and 26")
    if c.nodes and not scenario.schedulers.count:
        raise ScenarioError("schedulers.count: must be at least 1 when the cluster has nodes")
    if w.profile:
        from emulator.kubelet.profiles import BUILTIN_PROFILE_DIR

        known = sorted(p.stem for p in BUILTIN_PROFILE_DIR.glob("*.yaml"))
        for i, name in enumerate(w.profile):
            if name not in known:
                raise ScenarioError(f"workload.profile[{i}]: unknown profile {name!r} (known: {', '.join(known)})")


def _priorities(items: Any) -> tuple[PriorityClassSpec, ...]:
    if not isinstance(items, list):
        raise ScenarioError("workload.priorities: expected a list of {name, value, weight}")
    out: list[PriorityClassSpec] = []
    for i, raw in enumerate(items):
        where = f"workload.priorities[{i}]"
        item = _mapping(raw, where)
        _no_unknown(item, {"name", "value", "weight"}, where)
        if not isinstance(item.get("name"), str) or not item["name"]:
            raise ScenarioError(f"{where}.name: expected a PriorityClass name")
        value = item.get("value", 0)
        if isinstance(value, bool) or not isinstance(value, int) or abs(value) > 1_000_000_000:
            raise ScenarioError(f"{where}.value: expected an integer priority up to 1000000000, got {value!r}")
        out.append(PriorityClassSpec(item["name"], value, _float(item.get("weight", 1.0), f"{where}.weight")))
    if out and not sum(p.weight for p in out):
        raise ScenarioError("workload.priorities: the weights must not all be 0")
    return tuple(out)


def _mapping(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: expected a mapping")
    return data


def _no_unknown(data: dict[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        prefix = f"{where}." if where else ""
        raise ScenarioError(f"unknown key {prefix}{unknown[0]} (known: {', '.join(sorted(known))})")


def _int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScenarioError(f"{path}: expected an integer >= 0, got {value!r}")
    return value


def _float(value: Any, path: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ScenarioError(f"{path}: expected a number >= 0, got {value!r}")
    return float(value)


def _section(cls: type, data: Any, where: str, extra: dict[str, Any] | None = None) -> Any:
    data = _mapping(data, where)
    extra = extra or {}
    known = {f.name: f for f in fields(cls)}
    _no_unknown(data, set(known) - set(extra), where)
    values: dict[str, Any] = dict(extra)
    for key, value in data.items():
        default = getattr(cls(), key)
        path = f"{where}.{key}"
        if isinstance(default, float):
            values[key] = _float(value, path)
        elif isinstance(default, int):
            values[key] = _int(value, path)
        elif isinstance(default, tuple):
            items = value if isinstance(value, list) else [value]
            values[key] = tuple(str(v) for v in items)
            if not values[key] and key != "profile":
                raise ScenarioError(f"{path}: must not be empty")
        else:
            values[key] = str(value)
    return cls(**values)
