"""``custom.metrics.k8s.io/v1beta2`` and ``external.metrics.k8s.io/v1beta1``, served as prometheus-adapter does.

Upstream these groups belong to an adapter behind an APIService
(kubernetes-sigs/prometheus-adapter on custom-metrics-apiserver); kemu serves
them from the API server as aggregated providers
(:mod:`emulator.apiserver.aggregated`). A :class:`MetricsAdapter` holds the
rules (:mod:`emulator.metricsapi.rules`) and a series source
(:mod:`emulator.metricsapi.series`: kemu's own series, or a real Prometheus)
and answers, as prometheus-adapter does:

* ``/apis/custom.metrics.k8s.io/v1beta2/namespaces/{ns}/{resource}/{name|*}/{metric}``
  (``labelSelector`` picks the objects when ``*``; ``metricLabelSelector``
  filters the series) → a ``MetricValueList``, one item per object with a value;
* ``.../namespaces/{ns}/metrics/{metric}`` → the metric of the namespace itself;
* ``/apis/custom.metrics.k8s.io/v1beta2/{resource}/{name|*}/{metric}`` for cluster-scoped objects;
* ``/apis/external.metrics.k8s.io/v1beta1/namespaces/{ns}/{metric}``
  (``labelSelector`` on the metric's labels) → an ``ExternalMetricValueList``;
  a selector ``scaledobject.keda.sh/name=<so>`` asks for a KEDA ScaledObject's trigger
  metric (``s0-redis-<list>``), served from its operator's last poll
  (:mod:`emulator.keda.metricstore`) as KEDA's metrics server does — one provider
  for the group, as on a real cluster where KEDA's adapter owns it.

For each request the adapter finds the rule whose series maps to the metric
name and associates the resource, renders its ``metricsQuery`` with
``<<.Series>>``, ``<<.LabelMatchers>>`` (the objects' names as
``label=~"a|b"``, the namespace, the metric label selector) and
``<<.GroupBy>>`` (the resource's label), runs it on the source and maps
result series back to objects by that label. Values are quantities in the
API (``12500m`` for 12.5). An unknown metric or resource is a 404 ``Status``,
a bad selector a 400, an unreachable Prometheus a 503 — never a 500.
:meth:`MetricsAdapter.pod_values` and friends are the same reads without
HTTP, which :class:`emulator.metricsapi.custom.CustomMetricsClient` (the
autoscalers' seam) uses, so a controller reads exactly what ``kubectl get
--raw`` shows.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from emulator.api import errors, keda, kinds
from emulator.api.labels import DOES_NOT_EXIST, EXISTS, IN, NOT_EQUALS, NOT_IN
from emulator.api.quantity import format_millis
from emulator.api.selectors import LabelSelector, parse_label_selector
from emulator.api.types import Obj
from emulator.clock import rfc3339
from emulator.keda import metricstore
from emulator.metricsapi.rules import Matcher, Rule, Rules, RulesError, render
from emulator.metricsapi.series import BackendError, OwnSeries, PrometheusSeries, SeriesSource
from emulator.store.store import Store

__all__ = ["CUSTOM_GROUP", "CUSTOM_VERSION", "EXTERNAL_GROUP", "EXTERNAL_VERSION", "MetricValue", "MetricsAdapter",
           "adapter_for", "configure"]

log = logging.getLogger(__name__)

CUSTOM_GROUP, CUSTOM_VERSION = "custom.metrics.k8s.io", "v1beta2"
EXTERNAL_GROUP, EXTERNAL_VERSION = "external.metrics.k8s.io", "v1beta1"


@dataclass(frozen=True)
class MetricValue:
    """One value the adapter found: for an object (``name``) or an external series (``labels``)."""

    name: str
    labels: Mapping[str, str]
    value: float
    timestamp: float
    window: float | None

    @property
    def milli(self) -> int:
        """The value in milli-units, as ``Quantity.MilliValue()`` reads the API's quantity."""
        return round(self.value * 1000)


def _not_found(message: str) -> errors.StatusError:
    return errors.StatusError(404, "NotFound", message)


def _name_matcher(label: str, names: list[str]) -> Matcher:
    # Object names are DNS names: '.' is their only regex metacharacter.
    return Matcher(label, "=~", "|".join(n.replace(".", "\\.") for n in names))


def selector_matchers(selector: LabelSelector | None) -> list[Matcher]:
    """A label selector as PromQL label matchers (how prometheus-adapter turns metricLabelSelector into a query)."""
    out: list[Matcher] = []
    for key, op, values in (selector.requirements if selector is not None else ()):
        if op == EXISTS:
            out.append(Matcher(key, "!=", ""))
        elif op == DOES_NOT_EXIST:
            out.append(Matcher(key, "=", ""))
        elif op == IN:
            out.append(Matcher(key, "=~", "|".join(values)) if len(values) > 1 else Matcher(key, "=", values[0]))
        elif op == NOT_IN:
            out.append(Matcher(key, "!~", "|".join(values)))
        elif op == NOT_EQUALS:
            out.append(Matcher(key, "!=", values[0]))
        elif op in ("gt", "lt"):
            raise errors.bad_request(f"metric label selectors cannot use {op}: {selector}")
        else:
            out.append(Matcher(key, "=", values[0]))
    return out


def _selector_object(selector: LabelSelector) -> Obj:
    """``metav1.LabelSelector`` of a parsed selector (the ``metric.selector`` of a MetricValue)."""
    labels: dict[str, str] = {}
    expressions: list[Obj] = []
    names = {IN: "In", NOT_IN: "NotIn", EXISTS: "Exists", DOES_NOT_EXIST: "DoesNotExist"}
    for key, op, values in selector.requirements:
        if op in ("=", "==") or (op == IN and len(values) == 1):
            labels[key] = values[0]
        elif op == NOT_EQUALS:
            expressions.append({"key": key, "operator": "NotIn", "values": list(values)})
        else:
            expressions.append({"key": key, "operator": names.get(op, op), **({"values": list(values)} if values
                                                                               else {})})
    out: Obj = {}
    if labels:
        out["matchLabels"] = labels
    if expressions:
        out["matchExpressions"] = expressions
    return out


def _parse_selector(text: str | None) -> LabelSelector | None:
    return parse_label_selector(text) if text else None


class MetricsAdapter:
    """Rules plus a series source, answering custom and external metrics requests (see the module docstring)."""

    def __init__(self, store: Store, rules: Rules, source: SeriesSource) -> None:
        self.store = store
        self.rules = rules
        self.source = source

    @classmethod
    def build(cls, store: Store, rules_path: str | None = None, prometheus_url: str | None = None,
              now: Callable[[], float] | None = None) -> MetricsAdapter:
        """The rules file (default: kemu's) over a Prometheus at ``prometheus_url`` or kemu's own series."""
        rules = Rules.load(rules_path)
        source: SeriesSource
        if prometheus_url:
            source = PrometheusSeries(prometheus_url)
        else:
            rules.check_local()
            source = OwnSeries(store.redis, store.config.prefix, now or time.time)
        return cls(store, rules, source)

    # -- discovery --------------------------------------------------------------------------

    def _metrics(self, rules: tuple[Rule, ...]) -> list[tuple[Rule, str, str, frozenset[str]]]:
        """(rule, series, metric name, label names) of every series the rules find."""
        out = []
        for rule in rules:
            try:
                found = self.source.series(rule.matchers)
            except BackendError as e:
                log.warning("metrics rules: %s", e)
                continue
            for series, labels in found:
                metric = rule.metric_name(series)
                if metric:
                    out.append((rule, series, metric, labels))
        return out

    def custom_resource_list(self) -> Obj:
        """The APIResourceList of custom.metrics.k8s.io/v1beta2: ``<resource>/<metric>`` per association."""
        entries: dict[str, Obj] = {}
        for rule, _, metric, labels in self._metrics(self.rules.custom):
            for label, resource in rule.overrides.items():
                if label in labels:
                    name = f"{resource}/{metric}"
                    entries[name] = {"name": name, "singularName": "", "namespaced": resource != "namespaces",
                                     "kind": "MetricValueList", "verbs": ["get"]}
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{CUSTOM_GROUP}/{CUSTOM_VERSION}",
                "resources": [entries[k] for k in sorted(entries)]}

    def external_resource_list(self) -> Obj:
        names = sorted({metric for _, _, metric, _ in self._metrics(self.rules.external)})
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{EXTERNAL_GROUP}/{EXTERNAL_VERSION}",
                "resources": [{"name": n, "singularName": "", "namespaced": True, "kind": "ExternalMetricValueList",
                               "verbs": ["get"]} for n in names]}

    # -- reads ------------------------------------------------------------------------------

    def _rule_for(self, metric: str, resource: str) -> tuple[Rule, str, str]:
        for rule, series, name, labels in self._metrics(self.rules.custom):
            label = rule.resource_label(resource)
            if name == metric and label is not None and label in labels:
                return rule, series, label
        raise _not_found(f"the server could not find the metric {metric} for {resource}")

    def _query(self, promql: str) -> list[Any]:
        try:
            return self.source.query(promql)
        except BackendError as e:
            raise errors.StatusError(503, "ServiceUnavailable", str(e)) from None
        except RulesError as e:
            raise errors.StatusError(503, "ServiceUnavailable", f"cannot evaluate {promql!r}: {e}") from None

    def object_values(self, resource: str, namespace: str | None, name: str, metric: str, *,
                      selector: LabelSelector | None = None,
                      metric_selector: LabelSelector | None = None) -> tuple[kinds.Kind, list[MetricValue]]:
        """Values of ``metric`` for one object (``name``) or, with ``name == "*"``, the objects ``selector`` picks."""
        kind = kinds.by_resource(resource)  # 404 for resources the cluster does not have
        if kind.namespaced and namespace is None:
            raise _not_found(f"{resource} are namespaced: ask under /namespaces/{{namespace}}/")
        rule, series, label = self._rule_for(metric, resource)
        if name == "*":
            listed = self.store.list(kind, namespace if kind.namespaced else None, label_selector=selector)
            names = sorted(o["metadata"]["name"] for o in listed.items)
        else:
            names = [name]
        if not names:
            return kind, []
        matchers = [_name_matcher(label, names)]
        ns_label = rule.namespace_label()
        if kind.namespaced and ns_label and ns_label != label:
            matchers.append(Matcher(ns_label, "=", namespace or ""))
        matchers += selector_matchers(metric_selector)
        samples = self._query(render(rule.metrics_query, series, matchers, [label]))
        by_name = {s.labels.get(label): s for s in samples}
        values = [MetricValue(n, by_name[n].labels, by_name[n].value, by_name[n].timestamp, by_name[n].window)
                  for n in names if n in by_name]
        if name != "*" and not values:
            raise _not_found(f"the server could not find the metric {metric} for {resource} {name}")
        return kind, values

    def external_values(self, namespace: str, metric: str,
                        selector: LabelSelector | None = None) -> list[MetricValue]:
        owner = selector.exact(keda.OWNER_LABEL) if selector is not None else None
        if owner and self.store is not None:
            # A KEDA ScaledObject's trigger metric (s0-redis-<list> ...): its operator's last poll.
            found = metricstore.read(self.store.redis, self.store.config.prefix, namespace, owner, metric)
            if found is not None:
                return [MetricValue(metric, {keda.OWNER_LABEL: owner}, found[0], found[1], None)]
        for rule, series, name, _ in self._metrics(self.rules.external):
            if name != metric:
                continue
            matchers = selector_matchers(selector)
            ns_label = rule.namespace_label()
            if ns_label:
                matchers.append(Matcher(ns_label, "=", namespace))
            group_by = sorted({key for key, _, _ in (selector.requirements if selector is not None else ())})
            samples = self._query(render(rule.metrics_query, series, matchers, group_by))
            return [MetricValue(metric, s.labels, s.value, s.timestamp, s.window) for s in samples]
        raise _not_found(f"the server could not find the external metric {metric}")

    # -- HTTP -------------------------------------------------------------------------------

    def serve_custom(self, rest: list[str], query: Mapping[str, str]) -> Obj:
        """``rest``: the path after ``/apis/custom.metrics.k8s.io/v1beta2/``."""
        namespace: str | None = None
        if len(rest) == 4 and rest[0] == "namespaces" and rest[2] == "metrics":
            resource, namespace, name, metric = "namespaces", None, rest[1], rest[3]
        elif len(rest) == 5 and rest[0] == "namespaces":
            namespace, resource, name, metric = rest[1], rest[2], rest[3], rest[4]
        elif len(rest) == 3:
            resource, name, metric = rest
        else:
            raise _not_found("the server could not find the requested resource")
        selector = _parse_selector(query.get("labelSelector"))
        metric_selector = _parse_selector(query.get("metricLabelSelector"))
        kind, values = self.object_values(resource, namespace, name, metric, selector=selector,
                                          metric_selector=metric_selector)
        metric_id: Obj = {"name": metric}
        if metric_selector is not None:
            metric_id["selector"] = _selector_object(metric_selector)
        items = []
        for v in values:
            described: Obj = {"kind": kind.kind, "name": v.name, "apiVersion": kind.api_version}
            if kind.namespaced:
                described["namespace"] = namespace
            item: Obj = {"describedObject": described, "metric": metric_id, "timestamp": rfc3339(v.timestamp)}
            if v.window is not None:
                item["windowSeconds"] = round(v.window)
            item["value"] = format_millis(v.milli)
            items.append(item)
        return {"kind": "MetricValueList", "apiVersion": f"{CUSTOM_GROUP}/{CUSTOM_VERSION}", "metadata": {},
                "items": items}

    def serve_external(self, rest: list[str], query: Mapping[str, str]) -> Obj:
        """``rest``: the path after ``/apis/external.metrics.k8s.io/v1beta1/``."""
        if len(rest) != 3 or rest[0] != "namespaces":
            raise _not_found("the server could not find the requested resource")
        namespace, metric = rest[1], rest[2]
        values = self.external_values(namespace, metric, _parse_selector(query.get("labelSelector")))
        items = [{"metricName": metric, "metricLabels": dict(v.labels), "timestamp": rfc3339(v.timestamp),
                  "value": format_millis(v.milli)} for v in values]
        return {"kind": "ExternalMetricValueList", "apiVersion": f"{EXTERNAL_GROUP}/{EXTERNAL_VERSION}",
                "metadata": {}, "items": items}


# -- the API server's adapter -----------------------------------------------------------------

_settings: tuple[str | None, str | None] = (None, None)
_adapters: dict[int, MetricsAdapter] = {}
_clock: Callable[[], float] | None = None


def configure(rules_path: str | None = None, prometheus_url: str | None = None,
              now: Callable[[], float] | None = None) -> None:
    """Set the rules file and Prometheus the API server's adapter uses (its ``metrics_rules`` / ``prometheus_url``).

    ``now`` is the API server's cluster clock (the own series' timestamps are cluster time).
    Bad rules fail here, at start-up, not on the first request.
    """
    global _settings, _clock
    rules = Rules.load(rules_path)
    if not prometheus_url:
        rules.check_local()
    _settings = (rules_path, prometheus_url)
    _clock = now
    _adapters.clear()


def resource_lists(rules_path: str | None = None, prometheus_url: str | None = None) -> tuple[Obj, Obj]:
    """Discovery of both groups under these rules: (custom APIResourceList, external APIResourceList).

    With kemu's own series the lists follow from the rules alone; with a Prometheus they
    are what its ``/api/v1/series`` answers now (empty while it is unreachable).
    """
    rules = Rules.load(rules_path)
    source: SeriesSource = PrometheusSeries(prometheus_url) if prometheus_url else OwnSeries(None, "")
    adapter = MetricsAdapter(None, rules, source)  # type: ignore[arg-type]  # discovery reads no store
    return adapter.custom_resource_list(), adapter.external_resource_list()


def adapter_for(store: Store) -> MetricsAdapter:
    """The configured adapter over ``store`` (one per store, built on first use)."""
    adapter = _adapters.get(id(store))
    if adapter is None or adapter.store is not store:
        rules_path, prometheus_url = _settings
        adapter = MetricsAdapter.build(store, rules_path, prometheus_url, _clock)
        _adapters[id(store)] = adapter
    return adapter
