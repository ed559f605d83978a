"""Where metric samples come from: kemu's own series, or a real Prometheus over its HTTP API.

prometheus-adapter has two calls into Prometheus: ``/api/v1/series`` (which
series a rule's ``seriesQuery`` finds: discovery) and ``/api/v1/query`` (the
rendered ``metricsQuery``: values). A :class:`SeriesSource` is those two
calls. :class:`OwnSeries` answers them from what kemu itself keeps in Redis —
the per-pod app series the kubelet shards publish
(:func:`emulator.kubelet.usage.pod_series`: ``http_requests_per_second``,
``http_request_duration_seconds``, labels ``namespace`` and ``pod``) and the
load targets (:mod:`emulator.loadtargets`: ``kemu_loadgen_http_requests_per_second``
labelled ``target``, ``kemu_loadgen_queue_depth`` labelled ``queue``) — and
evaluates the PromQL subset of :func:`emulator.metricsapi.rules.parse_query`.
:class:`PrometheusSeries` sends them to a real Prometheus (``--prometheus-url``)
with httpx.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from emulator import loadtargets
from emulator.kubelet import usage
from emulator.metricsapi.rules import Matcher, parse_query

__all__ = ["OWN_SERIES", "BackendError", "OwnSeries", "PrometheusSeries", "Sample", "SeriesSource"]

Labels = dict[str, str]


@dataclass(frozen=True)
class Sample:
    labels: Labels  # without __name__
    value: float
    timestamp: float  # cluster time (own series) or Prometheus time
    window: float | None = None  # seconds the value averages over, when known


class BackendError(Exception):
    """The series backend (Prometheus) could not answer: the API says 503, not 500."""


class SeriesSource(Protocol):
    def series(self, matchers: tuple[Matcher, ...]) -> list[tuple[str, frozenset[str]]]:
        """Names and label names of the series matching a ``seriesQuery`` (discovery)."""
        ...

    def query(self, promql: str) -> list[Sample]:
        """The instant vector of a rendered ``metricsQuery``."""
        ...


# kemu's own series: name -> its label names.
OWN_SERIES: dict[str, tuple[str, ...]] = {
    usage.REQUESTS_SERIES: ("namespace", "pod"),
    usage.LATENCY_SERIES: ("namespace", "pod"),
    "kemu_loadgen_http_requests_per_second": ("target",),
    "kemu_loadgen_queue_depth": ("queue",),
}
_POD_SERIES = (usage.REQUESTS_SERIES, usage.LATENCY_SERIES)
_PLAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")  # a namespace name, no regex metacharacters


def _could_match(matchers: tuple[Matcher, ...], name: str, label_names: tuple[str, ...]) -> bool:
    """Discovery over label *names*: a series has every label it declares, with some non-empty value."""
    for m in matchers:
        if m.label == "__name__":
            if not m.matches({"__name__": name}):
                return False
        elif m.label not in label_names:
            if not m.matches({}):
                return False
        elif m.op == "=" and m.value == "":
            return False
    return True


class OwnSeries:
    """kemu's own series from Redis (see the module docstring); ``now`` is the cluster clock."""

    def __init__(self, client: Any, prefix: str, now: Callable[[], float] = time.time) -> None:
        self.client = client
        self.prefix = prefix
        self.now = now

    def series(self, matchers: tuple[Matcher, ...]) -> list[tuple[str, frozenset[str]]]:
        return [(name, frozenset(labels)) for name, labels in OWN_SERIES.items()
                if _could_match(matchers, name, labels)]

    def _samples(self, names: list[str], matchers: tuple[Matcher, ...], now: float) -> list[tuple[str, Sample]]:
        out: list[tuple[str, Sample]] = []
        if any(n in _POD_SERIES for n in names):
            # One namespace's hash when the query names one (= or a regex that is a plain name), else all.
            namespace = next((m.value for m in matchers if m.label == "namespace" and (
                m.op == "=" or (m.op == "=~" and _PLAIN.fullmatch(m.value)))), None)
            for ns, pod, timestamp, window, values in usage.pod_series(self.client, self.prefix, namespace, now=now):
                for name in names:
                    if name in _POD_SERIES and name in values:
                        out.append((name, Sample({"namespace": ns, "pod": pod}, float(values[name]), timestamp,
                                                 window)))
        if "kemu_loadgen_http_requests_per_second" in names:
            for target, rate in loadtargets.rates(self.client, self.prefix).items():
                out.append(("kemu_loadgen_http_requests_per_second", Sample({"target": target}, rate, now)))
        if "kemu_loadgen_queue_depth" in names:
            for queue, depth in loadtargets.queues(self.client, self.prefix).items():
                out.append(("kemu_loadgen_queue_depth", Sample({"queue": queue}, depth, now)))
        return out

    def query(self, promql: str) -> list[Sample]:
        q = parse_query(promql)
        now = self.now()
        names = [name for name in OWN_SERIES if all(m.matches({"__name__": name}) for m in q.matchers
                                                     if m.label == "__name__")]
        selected = [s for name, s in self._samples(names, q.matchers, now)
                    if all(m.matches({**s.labels, "__name__": name}) for m in q.matchers)]
        if q.aggregation is None:
            return selected
        groups: dict[tuple[tuple[str, str], ...], list[Sample]] = {}
        for s in selected:
            key = tuple((label, s.labels.get(label, "")) for label in q.by)
            groups.setdefault(key, []).append(s)
        out = []
        for key, members in groups.items():
            values = [s.value for s in members]
            value = {"sum": sum, "max": max, "min": min, "count": len,
                     "avg": lambda v: sum(v) / len(v)}[q.aggregation](values)
            out.append(Sample({k: v for k, v in key if v}, float(value), min(s.timestamp for s in members),
                              members[0].window))
        return out


class PrometheusSeries:
    """A real Prometheus over its HTTP API; discovery answers are kept for ``relist`` seconds."""

    def __init__(self, url: str, *, timeout: float = 10.0, relist: float = 30.0) -> None:
        self.url = url.rstrip("/")
        self._http = httpx.Client(base_url=self.url, timeout=timeout)
        self._relist = relist
        self._cache: dict[tuple[Matcher, ...], tuple[float, list[tuple[str, frozenset[str]]]]] = {}

    def _get(self, path: str, params: dict[str, str]) -> Any:
        try:
            response = self._http.get(path, params=params)
            body = response.json()
        except (httpx.HTTPError, ValueError) as e:
            raise BackendError(f"Prometheus at {self.url} did not answer {path}: {e}") from None
        if body.get("status") != "success":
            raise BackendError(f"Prometheus at {self.url}: {body.get('errorType', 'error')}: {body.get('error')}")
        return body["data"]

    def series(self, matchers: tuple[Matcher, ...]) -> list[tuple[str, frozenset[str]]]:
        cached = self._cache.get(matchers)
        if cached is not None and time.monotonic() - cached[0] < self._relist:
            return cached[1]
        selector = "{" + ",".join(m.text() for m in matchers) + "}"
        found: dict[str, set[str]] = {}
        for labels in self._get("/api/v1/series", {"match[]": selector}):
            name = labels.pop("__name__", "")
            found.setdefault(name, set()).update(labels)
        result = [(name, frozenset(labels)) for name, labels in sorted(found.items())]
        self._cache[matchers] = (time.monotonic(), result)
        return result

    def query(self, promql: str) -> list[Sample]:
        data = self._get("/api/v1/query", {"query": promql})
        if data.get("resultType") != "vector":
            raise BackendError(f"Prometheus answered a {data.get('resultType')}, not a vector, to {promql!r}")
        out = []
        for item in data["result"]:
            labels = dict(item.get("metric") or {})
            labels.pop("__name__", None)
            timestamp, value = item["value"]
            out.append(Sample(labels, float(value), float(timestamp)))
        return out

    def close(self) -> None:
        self._http.close()
