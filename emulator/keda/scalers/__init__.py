"""KEDA's scalers, one module per trigger type, built through one table (``pkg/scaling/scalers_builder.go``).

:func:`build_scaler` picks the module by ``trigger.type``; an unknown type is
upstream's ``no scaler found for type: <type>``.
"""

from __future__ import annotations

import importlib

from emulator.keda.scalers.base import Scaler, ScalerConfig, ScalerError

__all__ = ["SCALERS", "Scaler", "ScalerConfig", "ScalerError", "build_scaler"]

# trigger type -> (module, class): modules are imported on first use.
SCALERS: dict[str, tuple[str, str]] = {
    "redis": ("emulator.keda.scalers.redis_scaler", "RedisScaler"),
    "redis-streams": ("emulator.keda.scalers.redis_streams_scaler", "RedisStreamsScaler"),
    "prometheus": ("emulator.keda.scalers.prometheus_scaler", "PrometheusScaler"),
    "cpu": ("emulator.keda.scalers.cpu_memory_scaler", "CPUMemoryScaler"),
    "memory": ("emulator.keda.scalers.cpu_memory_scaler", "CPUMemoryScaler"),
    "cron": ("emulator.keda.scalers.cron_scaler", "CronScaler"),
    "kubernetes-workload": ("emulator.keda.scalers.kubernetes_workload_scaler", "KubernetesWorkloadScaler"),
}


def build_scaler(config: ScalerConfig) -> Scaler:
    entry = SCALERS.get(config.trigger_type)
    if entry is None:
        raise ScalerError(f"no scaler found for type: {config.trigger_type}")
    module, cls = entry
    scaler: Scaler = getattr(importlib.import_module(module), cls)(config)
    return scaler
