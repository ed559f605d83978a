"""The ``prometheus`` scaler: one PromQL query's value (kedacore/keda ``pkg/scalers/prometheus_scaler.go``).

Metadata: ``serverAddress``, ``query``, ``threshold`` (required), ``activationThreshold``
(default 0), ``ignoreNullValues`` (default true: an empty result is 0, otherwise an
error), ``queryParameters`` (``k=v,k2=v2`` added to the request). The query runs
against ``<serverAddress>/api/v1/query`` with httpx (a real Prometheus, or anything
speaking its HTTP API). The metric is ``s<i>-prometheus`` with an AverageValue target
of ``threshold``. A result with more than one element is an error, as upstream.
"""

from __future__ import annotations

import math

import httpx

from emulator.api.types import Obj
from emulator.keda.scalers.base import ScalerConfig, ScalerError, external_spec, get_bool, get_float, get_str

NAME = "prometheus"
TIMEOUT = 3.0  # KEDA_HTTP_DEFAULT_TIMEOUT


class PrometheusScaler:
    def __init__(self, config: ScalerConfig) -> None:
        self.config = config
        self.server = get_str(config, NAME, "serverAddress", required=True).rstrip("/")
        self.query = get_str(config, NAME, "query", required=True)
        self.threshold = get_float(config, NAME, "threshold")
        self.activation = get_float(config, NAME, "activationThreshold", 0.0)
        self.ignore_null = get_bool(config, NAME, "ignoreNullValues", True)
        self.params: dict[str, str] = {}
        for pair in filter(None, get_str(config, NAME, "queryParameters").split(",")):
            key, sep, value = pair.partition("=")
            if not sep:
                raise ScalerError(f"error parsing {NAME} metadata: queryParameters {pair!r} is not key=value")
            self.params[key.strip()] = value.strip()
        self.http = httpx.Client(timeout=TIMEOUT)

    def metric_specs(self) -> list[Obj]:
        return [external_spec(self.config, NAME, self.threshold)]

    def execute(self) -> float:
        """``ExecutePromQuery``."""
        try:
            response = self.http.get(f"{self.server}/api/v1/query", params={**self.params, "query": self.query})
        except httpx.HTTPError as e:
            raise ScalerError(f"{NAME}: {e}") from None
        if response.status_code != 200:
            raise ScalerError(f"prometheus query api returned error. status: {response.status_code} "
                              f"response: {response.text[:200]}")
        try:
            result = response.json()["data"]["result"]
        except (ValueError, KeyError, TypeError):
            raise ScalerError(f"{NAME}: the answer is not a Prometheus query result") from None
        if not result:
            if self.ignore_null:
                return 0.0
            raise ScalerError(f"prometheus metrics '{NAME}' target may be lost, the result is empty")
        if len(result) > 1:
            raise ScalerError(f"prometheus query {self.query} returned multiple elements")
        sample = result[0].get("value") if isinstance(result[0], dict) else None
        if not sample or len(sample) < 2:
            if self.ignore_null:
                return 0.0
            raise ScalerError(f"prometheus metrics '{NAME}' target may be lost, the value list is empty")
        value = float(sample[1])
        if math.isnan(value) or math.isinf(value):
            if self.ignore_null:
                return 0.0
            raise ScalerError(f"promtheus query returns {sample[1]}")
        return value

    def metrics_and_activity(self, metric_name: str) -> tuple[list[float], bool]:
        value = self.execute()
        return [value], value > self.activation

    def close(self) -> None:
        self.http.close()
