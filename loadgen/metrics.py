"""The load driver's Prometheus metrics (``kemu run``, benchmarks that drive a cluster).

A load driver is a kemu process like any other: it serves ``/metrics`` and
registers itself for Prometheus with ``component="loadgen"``
(:func:`start`, a thin wrapper over :func:`emulator.metrics.serve_and_register`).
These are the series it exports; the driver updates them as it goes (the
counters on every create batch, the gauges whenever it recomputes them):

* ``kemu_loadgen_pods_created_total`` -- pods the driver created;
* ``kemu_loadgen_create_errors_total`` -- creates the server refused;
* ``kemu_loadgen_backlog`` -- created pods not yet scheduled (what the
  driver's back-pressure looks at);
* ``kemu_loadgen_http_requests_per_second{target}`` -- the HTTP request-rate
  series of a scenario's ``load`` phases, per target (what an HPA on a
  request-rate metric would read);
* ``kemu_loadgen_queue_depth{queue}`` -- the queue-depth series of a
  scenario's ``load`` phases (what a KEDA-style scaler would read for a
  work queue).

The series without labels exist (at 0) from import on, so dashboards show a
flat line before the first pod rather than "no data".
"""

from __future__ import annotations

import redis
from prometheus_client import Counter, Gauge

from emulator.metrics import MetricsEndpoint, process_instance, serve_and_register

PODS_CREATED = Counter("kemu_loadgen_pods_created", "Pods the load driver created")
CREATE_ERRORS = Counter("kemu_loadgen_create_errors", "Pod creates the server refused")
BACKLOG = Gauge("kemu_loadgen_backlog", "Pods the load driver created that are not scheduled yet")
HTTP_REQUESTS_PER_SECOND = Gauge("kemu_loadgen_http_requests_per_second",
                                 "Request rate the load driver is aiming at a target", ["target"])
QUEUE_DEPTH = Gauge("kemu_loadgen_queue_depth", "Items waiting in one of the load driver's queues", ["queue"])


def start(client: redis.Redis, *, prefix: str = "kemu:", instance: str | None = None) -> MetricsEndpoint:
    """Serve the driver's metrics and register them for Prometheus; ``stop()`` the result when done."""
    return serve_and_register(client, instance or process_instance("loadgen"), "loadgen", prefix=prefix)
