"""The ``cpu`` and ``memory`` scalers (kedacore/keda ``pkg/scalers/cpu_memory_scaler.go``).

Metadata: ``value`` (required), ``activationValue`` (default 0), ``containerName``; the
trigger's ``metricType`` is ``Utilization`` (percent of the request, the default) or
``AverageValue``. These are Resource metrics: the HPA reads them from
``metrics.k8s.io`` itself, so :meth:`metric_specs` is a Resource MetricSpec. Activity
reads the same API (:mod:`emulator.metricsapi.resource`) for the scale target's pods:
active while their average usage — as a percentage of their requests for Utilization —
exceeds ``activationValue``. (KEDA cannot scale to zero on cpu/memory alone; the
webhook rejects that, and so does :mod:`emulator.server.keda_webhook` via min replicas.)
"""

from __future__ import annotations

from emulator.api.quantity import QuantityError, format_millis, parse_quantity
from emulator.api.types import Obj
from emulator.keda.scalers.base import ScalerConfig, ScalerError, get_str


class CPUMemoryScaler:
    def __init__(self, config: ScalerConfig) -> None:
        self.config = config
        self.resource = config.trigger_type
        self.metric_type = config.metric_type or config.metadata.get("type") or ""
        if not self.metric_type:
            raise ScalerError("no type given in neither trigger.metadata.type or trigger.metricType")
        if self.metric_type not in ("Utilization", "AverageValue"):
            raise ScalerError(f"unknown metric type: {self.metric_type}")
        self.value_text = get_str(config, self.resource, "value", required=True)
        try:
            self.value = parse_quantity(self.value_text).milli_value() / 1000.0 if self.metric_type == "AverageValue" \
                else float(self.value_text)
            activation = get_str(config, self.resource, "activationValue", "0")
            self.activation = parse_quantity(activation).milli_value() / 1000.0
        except (QuantityError, ValueError):
            raise ScalerError(f"error parsing {self.resource} metadata: value {self.value_text!r} is not valid") \
                from None
        self.container = get_str(config, self.resource, "containerName")

    def metric_specs(self) -> list[Obj]:
        if self.metric_type == "Utilization":
            target: Obj = {"type": "Utilization", "averageUtilization": int(self.value)}
        else:
            target = {"type": "AverageValue", "averageValue": format_millis(round(self.value * 1000))}
        if self.container:
            return [{"type": "ContainerResource", "containerResource": {
                "name": self.resource, "container": self.container, "target": target}}]
        return [{"type": "Resource", "resource": {"name": self.resource, "target": target}}]

    def metrics_and_activity(self, metric_name: str) -> tuple[list[float], bool]:
        usage, requests = self.config.env.pod_resource_usage(self.config.namespace, self.config.scalable_name,
                                                             self.resource, self.container)
        if not usage:
            raise ScalerError(f"no metrics returned from resource metrics API for {self.resource}")
        if self.metric_type == "Utilization":
            total_request = sum(requests)
            if total_request <= 0:
                raise ScalerError(f"missing request for {self.resource}")
            value = 100.0 * sum(usage) / total_request
        else:
            value = sum(usage) / len(usage)
        return [value], value > self.activation

    def close(self) -> None:
        return None
