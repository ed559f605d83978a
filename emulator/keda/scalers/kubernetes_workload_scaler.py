"""The ``kubernetes-workload`` scaler: pods matching a selector (``pkg/scalers/kubernetes_workload_scaler.go``).

Metadata: ``podSelector`` (a label selector, required), ``value`` (pods per replica,
required, > 0), ``activationValue`` (default 0). The value is the number of the
namespace's pods the selector matches that have not terminated (upstream counts pods
whose phase is not Succeeded/Failed); the metric ``s<i>-workload-<podSelector>``.
"""

from __future__ import annotations

from emulator.api import errors
from emulator.api.selectors import LabelSelector, parse_label_selector
from emulator.api.types import Obj
from emulator.keda.scalers.base import ScalerConfig, ScalerError, external_spec, get_float, get_str

NAME = "kubernetes-workload"


class KubernetesWorkloadScaler:
    def __init__(self, config: ScalerConfig) -> None:
        self.config = config
        text = get_str(config, NAME, "podSelector", required=True)
        try:
            self.selector: LabelSelector = parse_label_selector(text)
        except errors.StatusError as e:
            raise ScalerError(f"error parsing {NAME} metadata: invalid podSelector: {e.message}") from None
        self.selector_text = text
        self.value = get_float(config, NAME, "value")
        if self.value <= 0:
            raise ScalerError(f"error parsing {NAME} metadata: value must be a float greater than 0")
        self.activation = get_float(config, NAME, "activationValue", 0.0)

    def metric_specs(self) -> list[Obj]:
        return [external_spec(self.config, f"workload-{self.selector_text}", self.value)]

    def metrics_and_activity(self, metric_name: str) -> tuple[list[float], bool]:
        pods = self.config.env.list_pods(self.config.namespace, self.selector)
        count = float(sum(1 for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")))
        return [count], count > self.activation

    def close(self) -> None:
        return None
