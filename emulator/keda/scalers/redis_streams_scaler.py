"""The ``redis-streams`` scaler: a stream's pending entries, length or lag (``pkg/scalers/redis_streams_scaler.go``).

Metadata: ``stream`` (required), ``consumerGroup``; one of ``pendingEntriesCount``
(XPENDING of the group; the default, 5), ``streamLength`` (XLEN) or ``lagCount`` (the
group's ``lag`` from XINFO GROUPS); ``activationLagCount`` (default 0), plus the Redis
connection fields of the ``redis`` scaler. The metric is ``s<i>-redis-streams-<stream>``.
"""

from __future__ import annotations

from emulator.api.types import Obj
from emulator.keda.scalers.base import ScalerConfig, ScalerError, external_spec, get_float, get_str
from emulator.keda.scalers.redis_client import call, client_for

NAME = "redis-streams"
PENDING, LENGTH, LAG = "pending", "length", "lag"


def _text(raw: object) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


class RedisStreamsScaler:
    def __init__(self, config: ScalerConfig) -> None:
        self.config = config
        self.stream = get_str(config, NAME, "stream", required=True)
        self.group = get_str(config, NAME, "consumerGroup")
        meta = config.metadata
        if "pendingEntriesCount" in meta:
            self.factor, self.target = PENDING, get_float(config, NAME, "pendingEntriesCount")
        elif "streamLength" in meta:
            self.factor, self.target = LENGTH, get_float(config, NAME, "streamLength")
        elif "lagCount" in meta:
            self.factor, self.target = LAG, get_float(config, NAME, "lagCount")
        else:
            self.factor, self.target = PENDING, 5.0
        if self.factor != LENGTH and not self.group:
            raise ScalerError(f'error parsing {NAME} metadata: missing required parameter "consumerGroup"')
        self.activation = get_float(config, NAME, "activationLagCount", 0.0)
        self.client = client_for(config, NAME)

    def metric_specs(self) -> list[Obj]:
        return [external_spec(self.config, f"redis-streams-{self.stream}", self.target)]

    def _value(self) -> float:
        if self.factor == LENGTH:
            return float(call(NAME, self.client.xlen, self.stream))
        if self.factor == PENDING:
            summary = call(NAME, self.client.xpending, self.stream, self.group)
            return float((summary or {}).get("pending", 0))
        for group in call(NAME, self.client.xinfo_groups, self.stream) or []:
            if _text(group.get("name")) == self.group:
                lag = group.get("lag")
                return float(lag) if lag is not None else 0.0
        raise ScalerError(f"{NAME}: consumer group {self.group!r} not found on stream {self.stream!r}")

    def metrics_and_activity(self, metric_name: str) -> tuple[list[float], bool]:
        value = self._value()
        return [value], value > self.activation

    def close(self) -> None:
        return None
