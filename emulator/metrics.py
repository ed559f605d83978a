"""Metrics plumbing: every kemu process exports Prometheus metrics and says where.

Each process keeps its metrics in prometheus-client collectors (module-level,
as prometheus-client intends; names follow upstream Kubernetes where upstream
has one). :func:`serve` exposes them on a free loopback port, and
:class:`TargetRegistration` records ``host:port`` with labels in Redis
(``<prefix>targets``, one hash field per process, refreshed with an expiry
time so a dead process drops out). :func:`discover` turns that hash into the
JSON Prometheus's ``http_sd_configs`` expects, so one scrape job finds every
process, locally and in compose; the API server serves it.

Where a process listens and what it advertises: the bind host is
``KEMU_METRICS_HOST`` (default ``127.0.0.1``: nothing is exposed unless asked);
the address registered for Prometheus is ``KEMU_METRICS_ADVERTISE`` when set
(compose sets the service name), else the bound host, else -- bound to the
wildcard, which no scraper can dial -- this machine's primary IP.
:func:`serve_and_register` is the one call a process needs (the load driver
uses it with ``component="loadgen"``); docs/metrics.md lists every metric.
"""

from __future__ import annotations

import contextlib
import os
import socket
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
HOST_ENV = "KEMU_METRICS_HOST"
ADVERTISE_ENV = "KEMU_METRICS_ADVERTISE"
_WILDCARDS = frozenset({"0.0.0.0", "::", ""})


def bind_host() -> str:
    """Where metrics endpoints listen: ``$KEMU_METRICS_HOST``, loopback by default."""
    return os.environ.get(HOST_ENV) or "127.0.0.1"


def machine_ip() -> str:
    """This machine's primary IP (the source address of its default route), loopback if it has none."""
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        # A UDP connect sends nothing: it only asks the kernel which source address it would route from.
        s.connect(("10.255.255.255", 1))
        return str(s.getsockname()[0])
    with contextlib.suppress(OSError):
        return socket.gethostbyname(socket.gethostname())
    return "127.0.0.1"


def advertised_host(bound: str) -> str:
    """The host other machines should scrape: ``$KEMU_METRICS_ADVERTISE``, the bound host, or the machine's IP."""
    explicit = os.environ.get(ADVERTISE_ENV)
    if explicit:
        return explicit
    return machine_ip() if bound in _WILDCARDS else bound


def serve(host: str | None = None, port: int = 0, registry: CollectorRegistry = REGISTRY) -> tuple[str, int]:
    """Serve ``/metrics`` in a daemon thread; returns the address to advertise (see the module docstring).

    ``host`` None binds :func:`bind_host` (``$KEMU_METRICS_HOST``).
    """
    _server, adv_host, bound_port = _start(host, port, registry)
    return adv_host, bound_port


def _start(host: str | None, port: int, registry: CollectorRegistry) -> tuple[Any, str, int]:
    server, _thread = start_http_server(port, addr=host or bind_host(), registry=registry)
    bound_host, bound_port = server.server_address[:2]
    return server, advertised_host(str(bound_host)), int(bound_port)


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


@dataclass
class MetricsEndpoint:
    """A served ``/metrics`` and its registration (what :func:`serve_and_register` returns)."""

    address: str
    registration: TargetRegistration
    server: Any = None  # prometheus-client's WSGI server (a daemon thread serves it)
    release: Any = None  # set on shared endpoints: stop() hands the endpoint back instead

    def stop(self) -> None:
        if self.release is not None:
            self.release()
            return
        self.registration.stop()  # first: Prometheus drops the target at its next discovery refresh
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


# One process, one target: every series of a registry is served once, however many parts of the
# process (controller managers, a load driver ...) ask to be scraped. Two endpoints serving the
# same registry would make Prometheus count every series of the process twice.
_SHARED: dict[tuple[int, str, str], list[Any]] = {}  # key -> [endpoint, users]
_SHARED_LOCK = threading.Lock()


def _shared_key(client: redis.Redis, prefix: str, registry: CollectorRegistry) -> tuple[int, str, str]:
    kw = client.connection_pool.connection_kwargs
    return id(registry), prefix, f"{kw.get('host')}:{kw.get('port')}/{kw.get('db')}{kw.get('path', '')}"


def _release(key: tuple[int, str, str]) -> None:
    with _SHARED_LOCK:
        entry = _SHARED[key]
        entry[1] -= 1
        if entry[1] > 0:
            return
        del _SHARED[key]
    entry[0].release = None
    entry[0].stop()


def process_instance(component: str) -> str:
    """A target name unique per process across machines and containers (pids repeat between containers)."""
    import os
    import socket

    return f"{component}-{socket.gethostname()}-{os.getpid()}"


def serve_and_register(client: redis.Redis, instance: str, component: str, *, prefix: str = "kemu:",
                       labels: dict[str, str] | None = None, host: str | None = None,
                       registry: CollectorRegistry = REGISTRY) -> MetricsEndpoint:
    """Serve this process's metrics and register the target (``component`` label) until ``stop()``.

    The load driver calls ``serve_and_register(store.redis, "loadgen", "loadgen")``; the
    controller-manager host (:class:`emulator.cluster.LocalCluster`) does the same with
    ``component="controller-manager"``. A second call in the same process (same registry, same
    cluster) shares the first endpoint - one target per process, its first caller's name and
    labels - and the endpoint stops when the last caller stops it.
    """
    key = _shared_key(client, prefix, registry)
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is not None:
            entry[1] += 1
            first: MetricsEndpoint = entry[0]
            return MetricsEndpoint(first.address, first.registration, None, release=lambda: _release(key))
        server, adv_host, port = _start(host, 0, registry)
        address = f"[{adv_host}]:{port}" if ":" in adv_host else f"{adv_host}:{port}"
        registration = TargetRegistration(client, instance, address, {"component": component, **(labels or {})},
                                          prefix=prefix).start()
        endpoint = MetricsEndpoint(address, registration, server, release=lambda: _release(key))
        _SHARED[key] = [endpoint, 1]
    return MetricsEndpoint(address, registration, server, release=lambda: _release(key))
