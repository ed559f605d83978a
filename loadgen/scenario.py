"""Scenario files: a cluster and a workload, as data.

A scenario is YAML validated into frozen dataclasses; an unknown key or a
value of the wrong type is a :class:`ScenarioError` naming the key path
(``workload.pods: expected an integer >= 0, got 'many'``). The same scenario
and seed always produce the same workload.
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


@dataclass(frozen=True)
class WorkloadSpec:
    namespaces: int = 1
    pods: int = 1000
    batch: int = 250
    cpu: tuple[str, ...] = ("100m",)
    memory: tuple[str, ...] = ("128Mi",)


@dataclass(frozen=True)
class Scenario:
    name: str
    seed: int
    cluster: ClusterSpec
    workload: WorkloadSpec

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
        _no_unknown(data, {"name", "seed", "cluster", "workload"}, "")
        scenario = cls(
            name=str(data.get("name", "scenario")),
            seed=_int(data.get("seed", 0), "seed"),
            cluster=_section(ClusterSpec, data.get("cluster") or {}, "cluster"),
            workload=_section(WorkloadSpec, data.get("workload") or {}, "workload"),
        )
        for path, value in (("cluster.node_cpu", scenario.cluster.node_cpu),
                            ("cluster.node_memory", scenario.cluster.node_memory),
                            *((f"workload.cpu[{i}]", v) for i, v in enumerate(scenario.workload.cpu)),
                            *((f"workload.memory[{i}]", v) for i, v in enumerate(scenario.workload.memory))):
            try:
                parse_quantity(value)
            except QuantityError as e:
                raise ScenarioError(f"{path}: {e}") from None
        if scenario.workload.batch < 1:
            raise ScenarioError("workload.batch: must be at least 1")
        if scenario.workload.namespaces < 1:
            raise ScenarioError("workload.namespaces: must be at least 1")
        return scenario


def _no_unknown(data: dict[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        prefix = f"{where}." if where else ""
        raise ScenarioError(f"unknown key {prefix}{unknown[0]} (known: {', '.join(sorted(known))})")


def _int(value: Any, path: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ScenarioError(f"{path}: expected an integer >= 0, got {value!r}")
    return value


def _section(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ScenarioError(f"{where}: expected a mapping")
    known = {f.name: f for f in fields(cls)}
    _no_unknown(data, set(known), where)
    values: dict[str, Any] = {}
    for key, value in data.items():
        default = getattr(cls(), key)
        path = f"{where}.{key}"
        if isinstance(default, int):
            values[key] = _int(value, path)
        elif isinstance(default, tuple):
            items = value if isinstance(value, list) else [value]
            values[key] = tuple(str(v) for v in items)
            if not values[key]:
                raise ScenarioError(f"{path}: must not be empty")
        else:
            values[key] = str(value)
    return cls(**values)
