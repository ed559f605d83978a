"""The API server's request and watch metrics, with kube-apiserver's names and verbs.

Upstream (``staging/src/k8s.io/apiserver/pkg/endpoints/metrics/metrics.go``)
counts every request in ``apiserver_request_total{verb,group,version,resource,
subresource,scope,component,code}`` and times it in
``apiserver_request_duration_seconds``. kemu keeps the names, the buckets and
upstream's *reported* verbs -- ``GET``, ``LIST``, ``WATCH``, ``POST``,
``PUT``, ``PATCH`` (``APPLY`` for server-side apply), ``DELETE``,
``DELETECOLLECTION`` -- so queries written for a real cluster work, with a
smaller label set (``verb``, ``group``, ``resource``, ``subresource``,
``code``): one process serves one version of each resource and the scope
follows from the resource.

Cost matters: this is the hot path (thousands of requests/s per worker). The
hook is not a generic ASGI middleware (that would wrap every response in
another coroutine and parse the path a second time) but a few lines in
:meth:`~emulator.apiserver.app.ApiServer.resource`, which already knows the
verb and resource; label children are cached per label tuple, so a request
costs one dict lookup, a counter increment and a histogram observe.

Watches are long-running: they are counted in ``apiserver_request_total``
when they start but not timed (upstream also leaves them out of the
latency SLO); ``apiserver_longrunning_requests`` is the number open now,
``apiserver_watch_events_total`` counts events sent. kemu's lag measure,
``kemu_apiserver_watch_lag_resource_versions``, is observed for each batch of
events a watch sends: the cluster's newest resourceVersion when the batch was
read minus the resourceVersion of the last event in it -- how many writes
(to any kind, the counter is global) had been committed beyond what the
watcher is being sent. A watch keeping up shows values near the write rate
times the read interval; a growing value means the watch falls behind.

With ``--workers N`` every worker process has its own copy of these
metrics; each worker then serves them on its own port and registers itself
as a target (``instance="apiserver-<pid>"``), and Prometheus sums them.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from emulator.apiserver.routing import RequestInfo

# upstream requestLatencies buckets
_DURATION_BUCKETS = (0.005, 0.025, 0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 1.25, 1.5, 2, 3, 4, 5, 6, 8, 10, 15, 20, 30,
                     45, 60)
_LAG_BUCKETS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 50000)

REQUESTS = Counter(
    "apiserver_request_total",
    "Counter of apiserver requests broken out for each verb, API resource and HTTP response code.",
    ["verb", "group", "resource", "subresource", "code"])
REQUEST_DURATION = Histogram(
    "apiserver_request_duration_seconds",
    "Response latency distribution in seconds for each verb, group and resource (watches excluded).",
    ["verb", "group", "resource", "subresource"], buckets=_DURATION_BUCKETS)
LONGRUNNING = Gauge(
    "apiserver_longrunning_requests",
    "Gauge of all active long-running apiserver requests (watches) broken out by verb, group and resource.",
    ["verb", "group", "resource"])
WATCH_EVENTS = Counter(
    "apiserver_watch_events_total", "Number of events sent in watch clients", ["group", "resource"])
WATCH_LAG = Histogram(
    "kemu_apiserver_watch_lag_resource_versions",
    "For each batch of watch events sent: the newest resourceVersion in the cluster when the batch was read "
    "minus the resourceVersion of the batch's last event (writes the watcher is behind by).",
    ["group", "resource"], buckets=_LAG_BUCKETS)

# kemu's verbs (emulator.apiserver.routing) -> upstream's reported verbs (metrics.CleanVerb).
_REPORTED = {"get": "GET", "list": "LIST", "watch": "WATCH", "create": "POST", "update": "PUT", "patch": "PATCH",
             "delete": "DELETE", "deletecollection": "DELETECOLLECTION"}
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"

_requests: dict[tuple[str, str, str, str, str], Counter] = {}
_durations: dict[tuple[str, str, str, str], Histogram] = {}


def reported_verb(verb: str, content_type: str | None = None) -> str:
    """Upstream's metric verb for a kemu verb (``PATCH`` with the apply content type is ``APPLY``)."""
    if verb == "patch" and content_type and content_type.startswith(APPLY_CONTENT_TYPE):
        return "APPLY"
    return _REPORTED.get(verb, verb.upper())


def observe(verb: str, info: RequestInfo, code: int, seconds: float | None) -> None:
    """Count one request (``verb`` as :func:`reported_verb` says) and time it unless ``seconds`` is None (a watch)."""
    group, resource, subresource = info.group, info.resource, info.subresource
    key = (verb, group, resource, subresource, str(code))
    counter = _requests.get(key)
    if counter is None:
        counter = _requests[key] = REQUESTS.labels(*key)
    counter.inc()
    if seconds is None:
        return
    dkey = (verb, group, resource, subresource)
    hist = _durations.get(dkey)
    if hist is None:
        hist = _durations[dkey] = REQUEST_DURATION.labels(*dkey)
    hist.observe(seconds)


def preinitialise() -> None:
    """Zero series for what the dashboards query, so a panel shows 0 rather than "no data" on a quiet server."""
    for verb in ("LIST", "WATCH", "POST"):
        REQUESTS.labels(verb, "", "pods", "", "200" if verb != "POST" else "201")
    LONGRUNNING.labels("WATCH", "", "pods")
    WATCH_EVENTS.labels("", "pods")
    WATCH_LAG.labels("", "pods")
