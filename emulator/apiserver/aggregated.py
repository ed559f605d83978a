"""API groups served by something other than the store: kemu's stand-in for APIService aggregation.

Upstream, ``metrics.k8s.io`` is not kube-apiserver's own: an ``APIService``
delegates the group to metrics-server, and discovery lists it like any other
group. kemu has no separate server to delegate to, so an aggregated API here
is a read-only provider object — a group/version, its ``APIResourceList``
entries, and a function answering GETs — registered in :data:`AGGREGATED`.
Discovery merges these groups in, and :meth:`ApiServer.resource` hands their
paths to the provider before the kind registry's routing sees them.

The providers: ``metrics.k8s.io/v1beta1`` (NodeMetrics, PodMetrics),
answered from the usage the kubelet shards publish (:mod:`emulator.kubelet.usage`),
which is what ``kubectl top nodes|pods`` reads; ``custom.metrics.k8s.io/v1beta2``
and ``external.metrics.k8s.io/v1beta1``, answered by the rules-driven adapter
(:mod:`emulator.metricsapi.adapter`), whose paths are not ``resource[/name]``
and so are handed over whole (``route``). :func:`configure_metrics` sets the
adapter's rules file and Prometheus (the server's ``metrics_rules`` and
``prometheus_url`` settings) and refreshes their discovery.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from emulator.api import errors
from emulator.api.types import Obj
from emulator.kubelet import usage
from emulator.metricsapi import adapter as metrics_adapter
from emulator.store.store import Store


@dataclass(frozen=True)
class AggregatedAPI:
    group: str
    version: str
    resource_list: Obj  # the APIResourceList of group/version
    # answer(store, resource, namespace, name, query) for a GET of a collection or one object
    answer: Callable[[Store, str, str | None, str | None, Mapping[str, str]], Obj]
    # route(store, path after the version, query): for APIs whose paths are not resource[/name]
    route: Callable[[Store, list[str], Mapping[str, str]], Obj] | None = None

    @property
    def resources(self) -> list[Obj]:
        return list(self.resource_list["resources"])


def _metrics_answer(store: Store, resource: str, namespace: str | None, name: str | None,
                    query: Mapping[str, str]) -> Obj:
    return usage.answer(store, resource, namespace=namespace, name=name,
                        label_selector=query.get("labelSelector") or None)


_METRICS_GROUP, _METRICS_VERSION = usage.API_VERSION.split("/")
METRICS = AggregatedAPI(_METRICS_GROUP, _METRICS_VERSION, usage.RESOURCE_LIST, _metrics_answer)


def _routed_only(store: Store, resource: str, namespace: str | None, name: str | None,
                 query: Mapping[str, str]) -> Obj:  # pragma: no cover - serve() routes these APIs
    raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")


def _custom_route(store: Store, rest: list[str], query: Mapping[str, str]) -> Obj:
    return metrics_adapter.adapter_for(store).serve_custom(rest, query)


def _external_route(store: Store, rest: list[str], query: Mapping[str, str]) -> Obj:
    return metrics_adapter.adapter_for(store).serve_external(rest, query)


def _metrics_apis(rules_path: str | None = None, prometheus_url: str | None = None) -> list[AggregatedAPI]:
    custom, external = metrics_adapter.resource_lists(rules_path, prometheus_url)
    return [AggregatedAPI(metrics_adapter.CUSTOM_GROUP, metrics_adapter.CUSTOM_VERSION, custom, _routed_only,
                          _custom_route),
            AggregatedAPI(metrics_adapter.EXTERNAL_GROUP, metrics_adapter.EXTERNAL_VERSION, external, _routed_only,
                          _external_route)]


AGGREGATED: dict[str, AggregatedAPI] = {api.group: api for api in [METRICS, *_metrics_apis()]}


def configure_metrics(rules_path: str | None = None, prometheus_url: str | None = None,
                      now: Callable[[], float] | None = None) -> None:
    """Serve custom and external metrics under this rules file (None: kemu's) and Prometheus (None: own series)."""
    metrics_adapter.configure(rules_path, prometheus_url, now)
    for api in _metrics_apis(rules_path, prometheus_url):
        AGGREGATED[api.group] = api


def find(parts: list[str]) -> AggregatedAPI | None:
    """The provider serving ``/apis/{group}/...`` if ``group`` is aggregated."""
    if len(parts) >= 2 and parts[0] == "apis":
        return AGGREGATED.get(parts[1])
    return None


def serve(api: AggregatedAPI, store: Store, method: str, parts: list[str], query: Mapping[str, str]) -> Obj:
    """Answer ``/apis/{group}/{version}/[namespaces/{ns}/]{resource}[/{name}]`` (GET only)."""
    if len(parts) < 4 or parts[2] != api.version:
        raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
    if method != "GET":
        raise errors.method_not_allowed(f"{method} is not supported by {api.group}/{api.version}: it is read-only")
    if query.get("watch") in ("1", "true"):
        raise errors.method_not_allowed(f"watch is not supported by {api.group}/{api.version}")
    rest = parts[3:]
    if api.route is not None:
        return api.route(store, rest, query)
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    names = {r["name"]: r for r in api.resources}
    if not rest or rest[0] not in names or len(rest) > 2:
        raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
    resource = rest[0]
    if namespace is not None and not names[resource]["namespaced"]:
        raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
    return api.answer(store, resource, namespace, rest[1] if len(rest) == 2 else None, query)
