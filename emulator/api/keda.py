"""KEDA's ``keda.sh/v1alpha1`` objects as data: annotations, defaults and names.

kedacore/keda ``apis/keda/v1alpha1`` (``scaledobject_types.go``,
``scaledjob_types.go``, ``scaletriggers_types.go``) and ``pkg/scalers``'
metric naming (``GenerateMetricNameWithIndex``, ``kedautil.NormalizeString``).
Pure functions over the JSON objects: the API server's validation, the
operator and the metrics adapter all read a ScaledObject through them.
"""

from __future__ import annotations

import re
from typing import Any

from emulator.api.types import Obj

GROUP, VERSION = "keda.sh", "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

# scaledobject_types.go
OWNER_LABEL = "scaledobject.keda.sh/name"
TRANSFER_HPA_OWNERSHIP = "scaledobject.keda.sh/transfer-hpa-ownership"
VALIDATIONS_HPA_OWNERSHIP = "validations.keda.sh/hpa-ownership"
PAUSED_REPLICAS = "autoscaling.keda.sh/paused-replicas"
PAUSED = "autoscaling.keda.sh/paused"
SCALEDJOB_LABEL = "scaledjob.keda.sh/name"

DEFAULT_POLLING_INTERVAL = 30  # seconds (pkg/scaling/scale_handler.go defaultPollingInterval)
DEFAULT_COOLDOWN_PERIOD = 300  # seconds (controllers/keda/hpa.go defaultCooldownPeriod)
DEFAULT_HPA_MIN_REPLICAS = 1
DEFAULT_HPA_MAX_REPLICAS = 100
DEFAULT_SCALEDJOB_MAX_REPLICAS = 100
DEFAULT_HISTORY_LIMIT = 100
MAX_LABEL_VALUE = 63

# The trigger types kemu has a scaler for (pkg/scaling/scalers_builder.go buildScaler's switch).
TRIGGER_TYPES = ("redis", "redis-streams", "prometheus", "cpu", "memory", "cron", "kubernetes-workload")


def spec(obj: Obj) -> dict[str, Any]:
    value = obj.get("spec")
    return value if isinstance(value, dict) else {}


def annotations(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _int(value: Any, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


def polling_interval(obj: Obj) -> int:
    return _int(spec(obj).get("pollingInterval"), DEFAULT_POLLING_INTERVAL)


def cooldown_period(obj: Obj) -> int:
    return _int(spec(obj).get("cooldownPeriod"), DEFAULT_COOLDOWN_PERIOD)


def min_replica_count(obj: Obj) -> int | None:
    value = spec(obj).get("minReplicaCount")
    return None if value is None else _int(value, 0)


def hpa_min_replicas(obj: Obj) -> int:
    """``GetHPAMinReplicas``: minReplicaCount when > 0, else 1 (the HPA cannot go to 0; KEDA does)."""
    value = min_replica_count(obj)
    return value if value is not None and value > 0 else DEFAULT_HPA_MIN_REPLICAS


def hpa_max_replicas(obj: Obj) -> int:
    return _int(spec(obj).get("maxReplicaCount"), DEFAULT_HPA_MAX_REPLICAS)


def idle_replica_count(obj: Obj) -> int | None:
    value = spec(obj).get("idleReplicaCount")
    return None if value is None else _int(value, 0)


def hpa_config(obj: Obj) -> dict[str, Any]:
    advanced = spec(obj).get("advanced") or {}
    return (advanced.get("horizontalPodAutoscalerConfig") or {}) if isinstance(advanced, dict) else {}


def hpa_name(obj: Obj) -> str:
    """``getHpaName``: advanced.horizontalPodAutoscalerConfig.name, else ``keda-hpa-<name>``."""
    return str(hpa_config(obj).get("name") or f"keda-hpa-{(obj.get('metadata') or {}).get('name', '')}")


def target_ref(obj: Obj) -> tuple[str, str, str]:
    """(apiVersion, kind, name) of scaleTargetRef, defaulting to apps/v1 Deployment as KEDA does."""
    ref = spec(obj).get("scaleTargetRef") or {}
    return (str(ref.get("apiVersion") or "apps/v1"), str(ref.get("kind") or "Deployment"), str(ref.get("name") or ""))


def gvk_string(api_version: str, kind: str) -> str:
    """``GroupVersionKindResource.GVKString``: ``apps/v1.Deployment``."""
    return f"{api_version}.{kind}"


def triggers(obj: Obj) -> list[dict[str, Any]]:
    value = spec(obj).get("triggers")
    return [t for t in value if isinstance(t, dict)] if isinstance(value, list) else []


def fallback(obj: Obj) -> dict[str, Any] | None:
    value = spec(obj).get("fallback")
    return value if isinstance(value, dict) else None


def paused_replicas(obj: Obj) -> int | None:
    """The ``paused-replicas`` annotation as a count (None: absent or not an integer)."""
    raw = annotations(obj).get(PAUSED_REPLICAS)
    if raw is None:
        return None
    try:
        return int(raw)
    except ValueError:
        return None


def paused(obj: Obj) -> bool:
    """``HasPausedAnnotation`` + ``getBoolAnnotation``: a non-boolean ``paused`` value means true."""
    notes = annotations(obj)
    if PAUSED_REPLICAS in notes:
        return True
    raw = notes.get(PAUSED)
    if raw is None:
        return False
    return raw.strip().lower() not in ("false", "0", "f")


_NORMALIZE = re.compile(r"[/.:%()\"' <>|\[\]{}@#$&*+=,;?!\\^`~]")


def normalize(text: str) -> str:
    """``kedautil.NormalizeString``: characters a metric name cannot hold become ``-``."""
    return _NORMALIZE.sub("-", text)


def metric_name(index: int, name: str) -> str:
    """``GenerateMetricNameWithIndex``: ``s<trigger index>-<scaler's metric name>``."""
    return f"s{index}-{name}"


# scaledobject_types.go: advanced.scalingModifiers and its composite metric (controllers/keda/hpa.go).
COMPOSITE_METRIC_NAME = "composite-metric"
DEFAULT_INITIAL_COOLDOWN_PERIOD = 0  # seconds (pkg/scaling/executor/scale_executor.go)


def scaling_modifiers(obj: Obj) -> dict[str, Any] | None:
    """``IsUsingModifiers``: ``advanced.scalingModifiers`` when it sets anything, else None."""
    advanced = spec(obj).get("advanced") or {}
    value = advanced.get("scalingModifiers") if isinstance(advanced, dict) else None
    return value if isinstance(value, dict) and any(v not in (None, "") for v in value.values()) else None


def modifier_float(modifiers: dict[str, Any], field: str, default: float) -> float | None:
    """``scalingModifiers.target`` / ``activationTarget`` as a float (they are strings); None if not a number."""
    raw = modifiers.get(field)
    if raw in (None, ""):
        return default
    try:
        return float(raw)
    except (TypeError, ValueError):
        return None


def formula_trigger_names(obj: Obj) -> list[str]:
    """The names a formula may use: every named trigger but cpu/memory (``validateScalingModifiersFormula``)."""
    return [str(t["name"]) for t in triggers(obj) if t.get("name") and t.get("type") not in ("cpu", "memory")]


def initial_cooldown_period(obj: Obj) -> int:
    return _int(spec(obj).get("initialCooldownPeriod"), DEFAULT_INITIAL_COOLDOWN_PERIOD)
