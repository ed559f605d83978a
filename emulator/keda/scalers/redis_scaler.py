"""The ``redis`` scaler: a Redis list's length (kedacore/keda ``pkg/scalers/redis_scaler.go``).

Metadata: ``listName`` (required), ``listLength`` (target items per replica, default 5),
``activationListLength`` (default 0: active while the list has any item),
``address`` or ``host`` + ``port``, ``databaseIndex``, ``enableTLS``; ``username`` and
``password`` usually from a TriggerAuthentication. The metric is ``s<i>-redis-<listName>``
with an AverageValue target of ``listLength``, so the HPA asks for
``ceil(length / listLength)`` replicas. The length is the key's size whatever its type
(LLEN, SCARD, HLEN, ZCARD; 0 when the key does not exist), read in one round trip.
"""

from __future__ import annotations

from emulator.api.types import Obj
from emulator.keda.scalers.base import ScalerConfig, external_spec, get_float, get_str
from emulator.keda.scalers.redis_client import call, client_for

NAME = "redis"

# Upstream's getListLengthFn switches on TYPE; one script does it atomically.
_LENGTH = """
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'list' then return redis.call('LLEN', KEYS[1]) end
if t == 'set' then return redis.call('SCARD', KEYS[1]) end
if t == 'hash' then return redis.call('HLEN', KEYS[1]) end
if t == 'zset' then return redis.call('ZCARD', KEYS[1]) end
if t == 'stream' then return redis.call('XLEN', KEYS[1]) end
return 0
"""


class RedisScaler:
    def __init__(self, config: ScalerConfig) -> None:
        self.config = config
        self.list_name = get_str(config, NAME, "listName", required=True)
        self.list_length = get_float(config, NAME, "listLength", 5.0)
        if self.list_length <= 0:
            self.list_length = 5.0
        self.activation = get_float(config, NAME, "activationListLength", 0.0)
        self.client = client_for(config, NAME)
        self._script = self.client.register_script(_LENGTH)

    def metric_specs(self) -> list[Obj]:
        return [external_spec(self.config, f"redis-{self.list_name}", self.list_length)]

    def metrics_and_activity(self, metric_name: str) -> tuple[list[float], bool]:
        length = float(call(NAME, self._script, [self.list_name]))
        return [length], length > self.activation

    def close(self) -> None:
        return None  # the connection pool is shared
