"""Metrics plumbing: every kemu process exports Prometheus metrics and says where.

Each process keeps its metrics in prometheus-client collectors (module-level,
as prometheus-client intends; names follow upstream Kubernetes where upstream
has one). :func:`serve` exposes them on a free loopback port, and
:class:`TargetRegistration` records ``host:port`` with labels in Redis
(``<prefix>targets``, one hash field per process, refreshed with an expiry
time so a dead process drops out). :func:`discover` turns that hash into the
JSON Prometheus's ``http_sd_configs`` expects, so one scrape job finds every
process, locally and in compose; the API server serves it.
"""

from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import orjson
import redis
from prometheus_client import REGISTRY, CollectorRegistry, start_http_server

TARGETS_KEY = "targets"
# Where the API server serves the discovery document (one http_sd_configs job in dashboards/prometheus.yml).
SD_PATH = "/kemu/v1/targets"
TARGET_TTL_SECONDS = 30.0


def serve(host: str = "127.0.0.1", port: int = 0, registry: CollectorRegistry = REGISTRY) -> tuple[str, int]:
    """Serve ``/metrics`` in a daemon thread; returns the address actually bound."""
    server, _thread = start_http_server(port, addr=host, registry=registry)
    bound_host, bound_port = server.server_address[:2]
    return str(bound_host), int(bound_port)


@dataclass
class TargetRegistration:
    """Keeps one process's scrape target in Redis until :meth:`stop`."""

    client: redis.Redis
    instance: str
    address: str
    labels: dict[str, str] = field(default_factory=dict)
    prefix: str = "kemu:"
    ttl: float = TARGET_TTL_SECONDS
    _stop: threading.Event = field(default_factory=threading.Event, init=False)
    _thread: threading.Thread | None = field(default=None, init=False)

    @property
    def key(self) -> str:
        return self.prefix + TARGETS_KEY

    def refresh(self, now: float | None = None) -> None:
        expires = (time.time() if now is None else now) + self.ttl
        entry = {"targets": [self.address], "labels": self.labels, "expires": expires}
        self.client.hset(self.key, self.instance, orjson.dumps(entry))

    def start(self) -> TargetRegistration:
        self.refresh()
        self._thread = threading.Thread(target=self._run, name=f"metrics-target-{self.instance}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.ttl / 3):
            try:
                self.refresh()
            except redis.RedisError:
                continue  # Redis restarting: the next refresh re-registers

    def stop(self) -> None:
        self._stop.set()
        with contextlib.suppress(redis.RedisError):
            self.client.hdel(self.key, self.instance)


def discover(client: redis.Redis, prefix: str = "kemu:", now: float | None = None) -> list[dict[str, Any]]:
    """Live targets in ``http_sd_configs`` form, sorted by instance; expired entries are removed."""
    now = time.time() if now is None else now
    out: list[dict[str, Any]] = []
    stale: list[bytes] = []
    for instance, raw in sorted(client.hgetall(prefix + TARGETS_KEY).items()):
        entry = orjson.loads(raw)
        if entry.get("expires", 0) < now:
            stale.append(instance)
            continue
        labels = {"instance": instance.decode(), **entry.get("labels", {})}
        out.append({"targets": entry["targets"], "labels": labels})
    if stale:
        client.hdel(prefix + TARGETS_KEY, *stale)
    return out
