"""Redis connections the redis and redis-streams scalers share (``pkg/scalers/redis_scaler.go`` getRedisClient).

Trigger metadata names a Redis by ``address`` (``host:port``) or ``host`` + ``port``, a
``databaseIndex``, ``username`` / ``password`` (from a TriggerAuthentication) and
``enableTLS``. Without an address the scaler reads the cluster's own embedded Redis
(the store's), which is where queue-worker pods consume from. Clients are pooled per
connection settings (500 ScaledObjects on one Redis share one pool), and time out in
a second so an unreachable Redis is a fast scaler error.
"""

from __future__ import annotations

import threading
from typing import Any

import redis

from emulator.keda.scalers.base import ScalerConfig, ScalerError, get_bool, get_int, get_str

_lock = threading.Lock()
_clients: dict[tuple[Any, ...], redis.Redis] = {}
CONNECT_TIMEOUT = 1.0
READ_TIMEOUT = 2.0


def client_for(config: ScalerConfig, scaler: str) -> redis.Redis:
    """The Redis of the trigger's ``address`` / ``host``+``port`` (else the embedded one) at ``databaseIndex``."""
    address = get_str(config, scaler, "address")
    host = get_str(config, scaler, "host")
    port = get_str(config, scaler, "port")
    if address:
        host, sep, port = address.rpartition(":")
        if not sep:
            raise ScalerError(f"error parsing {scaler} metadata: address {address!r} is not host:port")
    elif host and not port:
        raise ScalerError(f'error parsing {scaler} metadata: no port given for host "{host}"')
    db = get_int(config, scaler, "databaseIndex", -1)
    tls = get_bool(config, scaler, "enableTLS", False)
    username, password = config.param("username"), config.param("password")
    if not host:
        embedded = getattr(config.env, "redis", None)
        if embedded is None:
            raise ScalerError(f"error parsing {scaler} metadata: no address or host given")
        kwargs = embedded.connection_pool.connection_kwargs
        if db < 0 or db == kwargs.get("db", 0):
            return embedded
        host, port = kwargs.get("host", "localhost"), str(kwargs.get("port", 6379))
    try:
        port_number = int(port)
    except ValueError:
        raise ScalerError(f"error parsing {scaler} metadata: port {port!r} is not a number") from None
    key = (host, port_number, max(db, 0), username, password, tls)
    with _lock:
        client = _clients.get(key)
        if client is None:
            client = _clients[key] = redis.Redis(
                host=host, port=port_number, db=max(db, 0), username=username, password=password, ssl=tls,
                socket_connect_timeout=CONNECT_TIMEOUT, socket_timeout=READ_TIMEOUT, decode_responses=False)
        return client


def call(scaler: str, fn: Any, *args: Any) -> Any:
    """Run one Redis call; connection and protocol failures are scaler errors (never a crashed loop)."""
    try:
        return fn(*args)
    except redis.RedisError as e:
        raise ScalerError(f"{scaler}: {e}") from None
