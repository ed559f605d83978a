"""Trigger metric values between the KEDA operator and ``external.metrics.k8s.io``.

Upstream the KEDA metrics server asks the operator (gRPC, ``pkg/metricsservice``) for a
ScaledObject's metric; with ``useCachedMetrics`` the operator answers with the value its
last poll read. kemu always answers that way: every poll of a ScaledObject writes its
metrics' values — fallback values included — to one Redis hash, and the metrics
adapter (:mod:`emulator.metricsapi.adapter`) serves them under KEDA's names::

    P keda:metrics   hash  "<namespace>/<scaledobject>/<metric>" -> "<value> <cluster time>"

One HSET per poll and one HGET per HPA read, whatever the number of ScaledObjects.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["KEY", "forget", "read", "write"]

KEY = "keda:metrics"


def _field(namespace: str, name: str, metric: str) -> str:
    return f"{namespace}/{name}/{metric}"


def write(client: Any, prefix: str, namespace: str, name: str, *, values: Mapping[str, float], missing: list[str],
          now: float) -> None:
    """Store this poll's ``values``; drop the ``missing`` metrics (failed reads without a fallback)."""
    pipe = client.pipeline(transaction=False)
    if values:
        pipe.hset(prefix + KEY, mapping={_field(namespace, name, m): f"{v!r} {now!r}" for m, v in values.items()})
    if missing:
        pipe.hdel(prefix + KEY, *(_field(namespace, name, m) for m in missing))
    pipe.execute()


def read(client: Any, prefix: str, namespace: str, name: str, metric: str) -> tuple[float, float] | None:
    """(value, cluster time of the poll) of one ScaledObject's metric, None when it has none."""
    raw = client.hget(prefix + KEY, _field(namespace, name, metric))
    if raw is None:
        return None
    value, _, at = (raw.decode() if isinstance(raw, bytes) else str(raw)).partition(" ")
    return float(value), float(at)


def forget(client: Any, prefix: str, namespace: str, name: str, metrics: list[str]) -> None:
    if metrics:
        client.hdel(prefix + KEY, *(_field(namespace, name, m) for m in metrics))
