"""What one API server process needs to know: Redis, address, access, clock.

Settings travel from the parent (``kemu up``, :class:`~emulator.cluster.LocalCluster`,
``python -m emulator.apiserver``) to every uvicorn worker process as JSON in
the ``KEMU_APISERVER_SETTINGS`` environment variable, because uvicorn's workers
import the application by name (:func:`emulator.apiserver.app.app_from_env`)
and take no arguments.

The cluster clock: a worker cannot share the parent's clock object, so the
parent passes one reading of it, ``clock_start`` (cluster time) taken at
``clock_wall`` (wall time), plus the speed; every worker then computes the
same cluster time (:meth:`ServerSettings.clock`), and ages in ``kubectl get``
agree with the cluster's.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, dataclass, fields
from typing import Any

from emulator.clock import SystemClock

ENV = "KEMU_APISERVER_SETTINGS"
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def is_loopback(host: str) -> bool:
    return host in LOOPBACK_HOSTS or host.startswith("127.")


@dataclass(frozen=True)
class ServerSettings:
    redis_url: str
    prefix: str = "kemu:"
    stream_cap: int = 200_000
    node_shards: int = 16
    host: str = "127.0.0.1"
    port: int = 6443
    workers: int = 1
    # Bearer token; "" means no token exists (every request is anonymous and allowed).
    token: str = ""
    # Whether a request without the token gets 401; kemu turns it on for non-loopback binds.
    require_token: bool = False
    # "RBAC" (every request authorized by roles and bindings, emulator.auth.rbac) or "AlwaysAllow".
    authorization_mode: str = "RBAC"
    # Serve HTTPS with this certificate and key (PEM files; emulator.apiserver.tls makes them); None: plain HTTP.
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    # The CA that signed tls_cert_file: what kemu's own clients (readiness checks, kubeconfigs) trust.
    tls_ca_file: str | None = None
    clock_speed: float = 1.0
    clock_start: float | None = None
    clock_wall: float | None = None
    # custom/external metrics (emulator.metricsapi.adapter): a prometheus-adapter rules file (None: kemu's
    # default rules) and a Prometheus to run their queries on (None: kemu's own series).
    metrics_rules: str | None = None
    prometheus_url: str | None = None
    # Seconds between BOOKMARK events of watches that asked for them.
    bookmark_interval: float = 60.0
    log_level: str = "warning"
    # Retries of a store call while Redis is unreachable before the request answers 503 (StoreConfig.retries).
    store_retries: int = 8

    def clock(self) -> SystemClock:
        if self.clock_start is None or self.clock_wall is None:
            return SystemClock(self.clock_speed)
        now = self.clock_start + (time.time() - self.clock_wall) * self.clock_speed
        return SystemClock(self.clock_speed, start=now)

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> ServerSettings:
        data: dict[str, Any] = json.loads(text)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    @classmethod
    def from_env(cls) -> ServerSettings:
        text = os.environ.get(ENV)
        if not text:
            raise RuntimeError(f"{ENV} is not set: start the API server with `python -m emulator.apiserver`")
        return cls.from_json(text)
