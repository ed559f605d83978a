"""Which pods back a Service, and on which ports: what the Endpoints and EndpointSlice controllers share.

Upstream keeps these in ``pkg/controller/util/endpoint`` and
``staging/src/k8s.io/endpointslice/util`` (``ShouldPodBeInEndpoints``,
``podutil.FindPort``, ``GetPodServiceMemberships``); both controllers import them
there, so kemu keeps them in the API layer, out of either controller.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from emulator.api.pdb import is_pod_ready
from emulator.api.types import Obj

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by"
HEADLESS_LABEL = "service.kubernetes.io/headless"


def selects(selector: Mapping[str, str] | None, labels: Mapping[str, str] | None) -> bool:
    """A Service selector (a plain map) selects ``labels``; an empty or missing selector selects nothing here."""
    if not selector:
        return False
    labels = labels or {}
    return all(labels.get(k) == v for k, v in selector.items())


def should_be_in_endpoints(pod: Obj, include_terminating: bool) -> bool:
    """``ShouldPodBeInEndpoints``: a pod with an IP, not terminal, and (unless asked) not being deleted."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return False
    if not status.get("podIP"):
        return False
    return include_terminating or not (pod.get("metadata") or {}).get("deletionTimestamp")


def find_port(pod: Obj, service_port: Mapping[str, Any]) -> int | None:
    """``podutil.FindPort``: the service port's targetPort on this pod (a named port looks at the containers)."""
    target = service_port.get("targetPort")
    if target is None or target == "":
        target = service_port.get("port")
    if isinstance(target, int):
        return target
    if isinstance(target, str) and target.isdigit():
        return int(target)
    protocol = service_port.get("protocol", "TCP")
    for container in (pod.get("spec") or {}).get("containers") or []:
        for port in container.get("ports") or []:
            if port.get("name") == target and port.get("protocol", "TCP") == protocol:
                return int(port["containerPort"])
    return None


def endpoint_ports(service: Obj, pod: Obj) -> tuple[tuple[str, str, int, str | None], ...]:
    """(name, protocol, port, appProtocol) for every service port resolvable on ``pod``, in service order."""
    out = []
    for sp in (service.get("spec") or {}).get("ports") or []:
        port = find_port(pod, sp)
        if port is not None:
            out.append((sp.get("name") or "", sp.get("protocol", "TCP"), port, sp.get("appProtocol")))
    return tuple(out)


def pod_conditions(service: Obj, pod: Obj) -> dict[str, bool]:
    """EndpointSlice ``conditions``: ready = serving and not terminating (or publishNotReadyAddresses)."""
    terminating = bool((pod.get("metadata") or {}).get("deletionTimestamp"))
    serving = is_pod_ready(pod)
    ready = bool((service.get("spec") or {}).get("publishNotReadyAddresses")) or (serving and not terminating)
    return {"ready": ready, "serving": serving, "terminating": terminating}


def pod_hostname(service: Obj, pod: Obj) -> str:
    """A pod's DNS hostname in the Service: its ``hostname`` when its ``subdomain`` is the Service's name."""
    spec = pod.get("spec") or {}
    if spec.get("hostname") and spec.get("subdomain") == (service.get("metadata") or {}).get("name"):
        return str(spec["hostname"])
    return ""


def selected_pods(indexer: Any, namespace: str, selector: Mapping[str, str]) -> list[Obj]:
    """The cached pods of ``namespace`` a Service selector selects (an informer indexer with a label index).

    Looks up one ``key=value`` pair of the selector in the ``label`` index (every pod carrying it, in any
    namespace) and filters those, instead of testing every pod of the namespace.
    """
    if not selector:
        return []
    key, value = next(iter(selector.items()))
    return [p for p in indexer.by_index("label", f"{key}={value}")
            if (p.get("metadata") or {}).get("namespace") == namespace
            and selects(selector, p["metadata"].get("labels"))]


def services_selecting(services: Iterable[Obj], pod: Obj) -> list[Obj]:
    """``GetPodServiceMemberships``: the Services (of the pod's namespace) whose selector selects the pod."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return [s for s in services if selects((s.get("spec") or {}).get("selector"), labels)]
