"""API groups served by something other than the store: kemu's stand-in for APIService aggregation.

Upstream, ``metrics.k8s.io`` is not kube-apiserver's own: an ``APIService``
delegates the group to metrics-server, and discovery lists it like any other
group. kemu has no separate server to delegate to, so an aggregated API here
is a read-only provider object — a group/version, its ``APIResourceList``
entries, and a function answering GETs — registered in :data:`AGGREGATED`.
Discovery merges these groups in, and :meth:`ApiServer.resource` hands their
paths to the provider before the kind registry's routing sees them.

Today's one provider is ``metrics.k8s.io/v1beta1`` (NodeMetrics, PodMetrics),
answered from the usage the kubelet shards publish (:mod:`emulator.kubelet.usage`),
which is what ``kubectl top nodes|pods`` reads.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from emulator.api import errors
from emulator.api.types import Obj
from emulator.kubelet import usage
from emulator.store.store import Store


@dataclass(frozen=True)
class AggregatedAPI:
    group: str
    version: str
    resource_list: Obj  # the APIResourceList of group/version
    # answer(store, resource, namespace, name, query) for a GET of a collection or one object
    answer: Callable[[Store, str, str | None, str | None, Mapping[str, str]], Obj]

    @property
    def resources(self) -> list[Obj]:
        return list(self.resource_list["resources"])


def _metrics_answer(store: Store, resource: str, namespace: str | None, name: str | None,
                    query: Mapping[str, str]) -> Obj:
    return usage.answer(store, resource, namespace=namespace, name=name,
                        label_selector=query.get("labelSelector") or None)


_METRICS_GROUP, _METRICS_VERSION = usage.API_VERSION.split("/")
METRICS = AggregatedAPI(_METRICS_GROUP, _METRICS_VERSION, usage.RESOURCE_LIST, _metrics_answer)
AGGREGATED: dict[str, AggregatedAPI] = {METRICS.group: METRICS}


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
