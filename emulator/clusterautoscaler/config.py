"""The Cluster Autoscaler's settings, under upstream's flag names (``config/autoscaling_options.go``).

A config file's ``cluster_autoscaler`` mapping takes the flags as upstream's
binary spells them (``scan-interval: 10s``, ``expander: least-waste``,
``scale-down-unneeded-time: 10m``; underscores work too). Durations are Go
durations; defaults are upstream's (``main.go`` flag defaults). Every error
names the flag: ``cluster_autoscaler.expander: unknown expander 'cheapest';
known: least-waste, most-pods, price, priority, random``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from emulator.api.gotime import parse_go_duration
from emulator.api.quantity import QuantityError, parse_quantity

__all__ = ["EXPANDERS", "AutoscalingOptions", "OptionsError"]

EXPANDERS = ("least-waste", "most-pods", "price", "priority", "random")


class OptionsError(ValueError):
    """A cluster-autoscaler flag is invalid; the message names it."""


def _flag(name: str) -> str:
    return name.replace("_", "-")


_DURATIONS = {"scan_interval", "scale_down_unneeded_time", "scale_down_unready_time", "scale_down_delay_after_add",
              "scale_down_delay_after_delete", "scale_down_delay_after_failure", "max_node_provision_time",
              "initial_node_group_backoff_duration", "max_node_group_backoff_duration",
              "node_group_backoff_reset_timeout", "max_pod_eviction_time", "scale_down_simulation_timeout",
              "new_pod_scale_up_delay"}


@dataclass(frozen=True)
class AutoscalingOptions:
    """The flags kemu's Cluster Autoscaler reads (seconds for durations, bytes for memory)."""

    scan_interval: float = 10.0
    expander: tuple[str, ...] = ("random",)
    max_nodes_total: int = 0  # 0 = no limit
    cores_total: tuple[int, int] = (0, 320000)  # "min:max" cores
    memory_total: tuple[int, int] = (0, 6400000 * 1024**3)  # "min:max" GiB upstream; bytes here
    balance_similar_node_groups: bool = False
    expendable_pods_priority_cutoff: int = -10
    new_pod_scale_up_delay: float = 0.0
    max_node_provision_time: float = 900.0
    initial_node_group_backoff_duration: float = 300.0
    max_node_group_backoff_duration: float = 1800.0
    node_group_backoff_reset_timeout: float = 10800.0
    scale_down_enabled: bool = True
    scale_down_utilization_threshold: float = 0.5
    scale_down_unneeded_time: float = 600.0
    scale_down_unready_time: float = 1200.0
    scale_down_delay_after_add: float = 600.0
    scale_down_delay_after_delete: float = 0.0  # upstream: scan-interval when 0
    scale_down_delay_after_failure: float = 180.0
    scale_down_simulation_timeout: float = 30.0
    max_empty_bulk_delete: int = 10
    max_graceful_termination_sec: int = 600
    max_pod_eviction_time: float = 120.0
    skip_nodes_with_local_storage: bool = True
    skip_nodes_with_system_pods: bool = True
    ignore_daemonsets_utilization: bool = False
    status_config_map_name: str = "cluster-autoscaler-status"
    write_status_configmap: bool = True
    namespace: str = "kube-system"

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], where: str = "cluster_autoscaler") -> AutoscalingOptions:
        known = {f.name: f for f in fields(cls)}
        data: dict[str, Any] = {}
        for key, value in (values or {}).items():
            name = str(key).replace("-", "_")
            if name not in known:
                raise OptionsError(f"{where}: unknown flag {key!r}; known: {', '.join(sorted(map(_flag, known)))}")
            data[name] = _parse(name, value, getattr(cls, name, None), f"{where}.{_flag(name)}")
        opts = cls(**data)
        opts.validate(where)
        return opts

    def validate(self, where: str = "cluster_autoscaler") -> None:
        unknown = [e for e in self.expander if e not in EXPANDERS]
        if unknown or not self.expander:
            raise OptionsError(f"{where}.expander: unknown expander {','.join(unknown)!r}; "
                               f"known: {', '.join(EXPANDERS)}")
        if not 0.0 <= self.scale_down_utilization_threshold <= 1.0:
            raise OptionsError(f"{where}.scale-down-utilization-threshold ({self.scale_down_utilization_threshold}) "
                               "must be between 0 and 1")
        if self.scan_interval <= 0:
            raise OptionsError(f"{where}.scan-interval must be positive")
        for name, (low, high) in (("cores-total", self.cores_total), ("memory-total", self.memory_total)):
            if low > high:
                raise OptionsError(f"{where}.{name}: min ({low}) must not be greater than max ({high})")
        if self.max_nodes_total < 0 or self.max_empty_bulk_delete < 1:
            raise OptionsError(f"{where}: max-nodes-total must not be negative and max-empty-bulk-delete "
                               "must be at least 1")

    @property
    def delay_after_delete(self) -> float:
        return self.scale_down_delay_after_delete or self.scan_interval


def _parse(name: str, value: Any, default: Any, where: str) -> Any:
    try:
        if name in _DURATIONS:
            return parse_go_duration(value)
        if name == "expander":
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(str(i).strip() for i in items if str(i).strip())
        if name in ("cores_total", "memory_total"):
            low, _, high = str(value).partition(":")
            if not high:
                low, high = "0", low
            scale = 1024**3 if name == "memory_total" else 1
            if name == "memory_total" and not high.strip().isdigit():
                return (int(parse_quantity(low).value()), int(parse_quantity(high).value()))
            return (int(low) * scale, int(high) * scale)
        if isinstance(default, bool):
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("true", "false"):
                return str(value).lower() == "true"
            raise ValueError(f"{value!r} is not true or false")
        if isinstance(default, int):
            if isinstance(value, bool):
                raise ValueError(f"{value!r} is not an integer")
            return int(value)
        if isinstance(default, float):
            return float(value)
        return str(value)
    except (TypeError, ValueError, QuantityError) as e:
        raise OptionsError(f"{where}: {e}") from None
