"""KEDA's Prometheus series (kedacore/keda ``pkg/metricscollector/prommetrics.go``), same names and labels.

Exported by the process running the operator (the controller manager's ``/metrics``).
``keda_internal_scale_loop_latency_seconds`` is upstream's: how late a ScaledObject's
poll started compared with when it was due (cluster seconds). Beside it
``keda_scaler_metrics_latency_seconds`` is the last read's duration per scaler.
"""

from __future__ import annotations

import contextlib

from prometheus_client import Counter, Gauge

_SCALER = ["namespace", "metric", "scaledObject", "scaler", "triggerIndex", "type"]

SCALER_METRICS_VALUE = Gauge("keda_scaler_metrics_value", "The current value for each scaler's metric that would be "
                             "used by the HPA in computing the target average.", _SCALER)
SCALER_METRICS_LATENCY = Gauge("keda_scaler_metrics_latency_seconds", "The latency of retrieving current metric from "
                               "each scaler, in seconds.", _SCALER)
SCALER_ACTIVE = Gauge("keda_scaler_active", "Indicates whether a scaler is active (1), or not (0).", _SCALER)
SCALER_ERRORS = Counter("keda_scaler_errors", "Number of scaler errors.", _SCALER)
SCALED_OBJECT_ERRORS = Counter("keda_scaled_object_errors", "Number of scaled object errors.",
                               ["namespace", "scaledObject"])
SCALED_OBJECT_PAUSED = Gauge("keda_scaled_object_paused", "Indicates whether a ScaledObject is paused.",
                             ["namespace", "scaledObject"])
SCALE_LOOP_LATENCY = Gauge("keda_internal_scale_loop_latency_seconds", "Total deviation (in seconds) between the "
                           "expected execution time and the actual execution time for the scaling loop.",
                           ["namespace", "type", "resource"])


def forget(namespace: str, name: str) -> None:
    """Drop a deleted ScaledObject's object-level series."""
    with contextlib.suppress(KeyError):
        SCALED_OBJECT_PAUSED.remove(namespace, name)
    with contextlib.suppress(KeyError):
        SCALE_LOOP_LATENCY.remove(namespace, "scaledobject", name)
