"""The Scaler interface and trigger metadata parsing every scaler shares (kedacore/keda ``pkg/scalers/scaler.go``).

A scaler is built from one trigger of a ScaledObject/ScaledJob (its ``metadata``,
the parameters its TriggerAuthentication resolved, its index in the trigger list)
and answers three questions, as upstream's ``Scaler``:

* :meth:`Scaler.metric_specs` — the HPA ``MetricSpec`` s it wants (``GetMetricSpecForScaling``):
  an External metric named ``s<index>-<scaler's name>`` with an AverageValue (or Value)
  target, or a Resource metric (cpu / memory);
* :meth:`Scaler.metrics_and_activity` — the current value(s) and whether the trigger is
  active, i.e. above its activation threshold (``GetMetricsAndActivity``);
* :meth:`Scaler.close`.

Errors are :class:`ScalerError` with upstream's messages; the operator turns them
into conditions and events, never a crashed loop.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from emulator.api import keda as k
from emulator.api.quantity import format_millis
from emulator.api.types import Obj

__all__ = ["Scaler", "ScalerConfig", "ScalerError", "external_spec", "get_bool", "get_float", "get_int",
           "get_str", "metric_target"]


class ScalerError(Exception):
    """A scaler could not be built or could not read its source."""


@dataclass
class ScalerConfig:
    """``scalersconfig.ScalerConfig``: what a scaler is built from."""

    trigger_type: str
    trigger_index: int
    metadata: Mapping[str, str]
    auth: Mapping[str, str] = field(default_factory=dict)
    metric_type: str = ""  # the trigger's metricType ("": AverageValue, cpu/memory: required)
    namespace: str = "default"
    scalable_name: str = ""
    # kemu's environment: the store (pods, the embedded Redis), the cluster clock, a pod lister.
    env: Any = None

    def param(self, name: str) -> str | None:
        """A parameter from the trigger's metadata, else from its authentication (upstream's ``TypedConfig`` order)."""
        value = self.metadata.get(name)
        if value is None or value == "":
            value = self.auth.get(name)
        return value if value not in (None, "") else None


class Scaler(Protocol):
    config: ScalerConfig

    def metric_specs(self) -> list[Obj]: ...

    def metrics_and_activity(self, metric_name: str) -> tuple[list[float], bool]: ...

    def close(self) -> None: ...


def _missing(scaler: str, name: str) -> ScalerError:
    return ScalerError(f"error parsing {scaler} metadata: missing required parameter \"{name}\"")


def get_str(config: ScalerConfig, scaler: str, name: str, default: str | None = None, *,
            required: bool = False) -> str:
    value = config.param(name)
    if value is None:
        if required:
            raise _missing(scaler, name)
        return default or ""
    return value


def _get_number(config: ScalerConfig, scaler: str, name: str, default: Any, *, parse: Callable[[str], Any],
                what: str) -> Any:
    """A numeric parameter parsed by ``parse`` (``float``/``int``), ``default`` when absent (None: required)."""
    value = config.param(name)
    if value is None:
        if default is None:
            raise _missing(scaler, name)
        return default
    try:
        return parse(value)
    except ValueError:
        raise ScalerError(f'error parsing {scaler} metadata: unable to parse "{name}": {value!r} is not {what}') \
            from None


def get_float(config: ScalerConfig, scaler: str, name: str, default: float | None = None) -> float:
    number = float(_get_number(config, scaler, name, default, parse=float, what="a number"))
    if not math.isfinite(number):
        raise ScalerError(f'error parsing {scaler} metadata: "{name}" must be finite')
    return number


def get_int(config: ScalerConfig, scaler: str, name: str, default: int | None = None) -> int:
    return int(_get_number(config, scaler, name, default, parse=int, what="an integer"))


def get_bool(config: ScalerConfig, scaler: str, name: str, default: bool) -> bool:
    value = config.param(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in ("true", "1", "t", "yes"):
        return True
    if lowered in ("false", "0", "f", "no"):
        return False
    raise ScalerError(f'error parsing {scaler} metadata: "{name}" must be a boolean, not {value!r}')


def metric_target(metric_type: str, value: float) -> Obj:
    """``GetMetricTargetMili``: the target as a quantity of the trigger's metricType."""
    quantity = format_millis(round(value * 1000))
    if metric_type == "Value":
        return {"type": "Value", "value": quantity}
    return {"type": "AverageValue", "averageValue": quantity}


def external_spec(config: ScalerConfig, name: str, target: float) -> Obj:
    """An External MetricSpec ``s<index>-<name>`` selecting this object's series (``scaledobject.keda.sh/name``)."""
    return {"type": "External", "external": {
        "metric": {"name": k.metric_name(config.trigger_index, k.normalize(name)),
                   "selector": {"matchLabels": {k.OWNER_LABEL: config.scalable_name}}},
        "target": metric_target(config.metric_type, target)}}


Builder = Callable[[ScalerConfig], Scaler]
