"""Pod resource arithmetic: effective requests, limits and QoS class.

These functions take a pod (or container) as the plain dict the object model
stores, in its Kubernetes JSON shape, and answer the questions the scheduler,
the kubelet emulation and quota ask of it. They follow upstream exactly:

* ``pod_requests`` / ``pod_limits``: ``PodRequests`` / ``PodLimits`` in
  ``k8s.io/component-helpers/resource/helpers.go``, including restartable init
  containers ("sidecars", ``restartPolicy: Always`` on an init container, KEP
  753): the pod needs the larger of its steady state (app containers plus
  sidecars) and the peak of its init phase, where each init container runs
  alongside the sidecars started before it. ``spec.overhead`` is added on top.
* ``qos_class``: ``ComputePodQOS`` in
  ``pkg/apis/core/v1/helper/qos/qos.go``; only cpu and memory count.
* Requests are read as the apiserver stores them after defaulting:
  ``SetDefaults_Pod`` (``pkg/apis/core/v1/defaults.go``) gives a container
  that sets a limit but no request for a resource a request equal to the
  limit. Applying that here makes the answers right for pods that have not
  been through defaulting, and changes nothing for pods that have.

Amounts are summed exactly, in integer nanounits, and rounded up once at the
end, as upstream sums ``Quantity`` values before calling ``MilliValue`` or
``Value``. Results are ints: millicores for ``cpu``, base units (bytes,
devices, counts) for every other resource.

Not modelled: pod-level resources (``spec.resources``, the PodLevelResources
feature; these functions behave as upstream with that gate off), in-place
resize status (``UseStatusResources``), DRA node-allocatable claims and the
scheduler's scoring defaults for missing requests (``NonMissingContainerRequests``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any

from emulator.api.quantity import parse_quantity

__all__ = [
    "BEST_EFFORT",
    "BURSTABLE",
    "GUARANTEED",
    "QOS_COMPUTE_RESOURCES",
    "STANDARD_RESOURCE_NAMES",
    "container_limits",
    "container_requests",
    "is_extended_resource",
    "is_native_resource",
    "pod_limits",
    "pod_requests",
    "qos_class",
]

CPU = "cpu"
MEMORY = "memory"

# The core/v1 ResourceName constants for compute and storage (types.go).
STANDARD_RESOURCE_NAMES: frozenset[str] = frozenset({CPU, MEMORY, "ephemeral-storage", "storage", "pods"})
# qos.go supportedQoSComputeResources.
QOS_COMPUTE_RESOURCES: frozenset[str] = frozenset({CPU, MEMORY})

GUARANTEED = "Guaranteed"
BURSTABLE = "Burstable"
BEST_EFFORT = "BestEffort"

_NANO_SCALE = -9  # amounts are summed in units of 1e-9
_NANOS_PER_MILLI = 10**6
_NANOS_PER_UNIT = 10**9


# -- resource names -----------------------------------------------------------------


def is_native_resource(name: str) -> bool:
    """Unprefixed, or in a ``*kubernetes.io/`` namespace (v1 helper ``IsNativeResource``)."""
    return "/" not in name or "kubernetes.io/" in name


# validation.IsQualifiedName: an optional DNS-1123 subdomain prefix, then a
# name of at most 63 alphanumerics, '-', '_' or '.', starting and ending alphanumeric.
_DNS1123_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_QUALIFIED_NAME_PART = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")


def is_extended_resource(name: str) -> bool:
    """Whether ``name`` is an extended resource such as ``nvidia.com/gpu``.

    Upstream ``IsExtendedResourceName`` (``pkg/apis/core/v1/helper/helpers.go``):
    not native, not quota's ``requests.`` form, and still a qualified name once
    quota prefixes it with ``requests.``.
    """
    if is_native_resource(name) or name.startswith("requests."):
        return False
    prefix, _, short = f"requests.{name}".partition("/")
    return (
        len(prefix) <= 253
        and _DNS1123_SUBDOMAIN.fullmatch(prefix) is not None
        and len(short) <= 63
        and _QUALIFIED_NAME_PART.fullmatch(short) is not None
    )


# -- per-container amounts, in nanounits ---------------------------------------------


@lru_cache(maxsize=4096)
def _nanos_of_text(text: str) -> int:
    # Manifests repeat a handful of spellings; cache the exact conversion too.
    return parse_quantity(text).scaled_value(_NANO_SCALE)


def _nanos(value: Any) -> int:
    """Exact amount of a quantity in 1e-9 units. Parsed quantities are whole nanos."""
    if type(value) is str:
        return _nanos_of_text(value)
    return parse_quantity(value).scaled_value(_NANO_SCALE)


def _resources(container: Mapping[str, Any]) -> tuple[Mapping[str, Any], Mapping[str, Any]]:
    resources = container.get("resources") or {}
    return resources.get("requests") or {}, resources.get("limits") or {}


def _request_nanos(container: Mapping[str, Any]) -> dict[str, int]:
    requests, limits = _resources(container)
    result = {name: _nanos(value) for name, value in requests.items()}
    for name, value in limits.items():
        # SetDefaults_Pod: a limit without a request is also the request. An
        # explicit request, even "0", is kept.
        if name not in result:
            result[name] = _nanos(value)
    return result


def _limit_nanos(container: Mapping[str, Any]) -> dict[str, int]:
    _, limits = _resources(container)
    return {name: _nanos(value) for name, value in limits.items()}


def _add(total: dict[str, int], amounts: Mapping[str, int]) -> None:
    """helpers.go addResourceList: a resource absent from ``total`` is added, even at zero."""
    for name, amount in amounts.items():
        total[name] = total.get(name, 0) + amount


def _raise_to(total: dict[str, int], amounts: Mapping[str, int]) -> None:
    """helpers.go maxResourceList: per resource, keep the larger."""
    for name, amount in amounts.items():
        if name not in total or amount > total[name]:
            total[name] = amount


def _aggregate(pod: Mapping[str, Any], per_container: Callable[[Mapping[str, Any]], dict[str, int]]) -> dict[str, int]:
    """helpers.go aggregateContainerResourcesByFn, on spec values only."""
    spec = pod.get("spec") or {}
    total: dict[str, int] = {}
    for container in spec.get("containers") or ():
        _add(total, per_container(container))

    # Init containers run one at a time, each alongside the sidecars started
    # before it; sidecars then keep running next to the app containers.
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for container in spec.get("initContainers") or ():
        amounts = per_container(container)
        if container.get("restartPolicy") == "Always":
            _add(total, amounts)
            _add(sidecars, amounts)
            running = sidecars
        else:
            running = dict(amounts)
            _add(running, sidecars)
        _raise_to(init_peak, running)
    _raise_to(total, init_peak)
    return total


def _overhead_nanos(pod: Mapping[str, Any]) -> dict[str, int]:
    overhead = (pod.get("spec") or {}).get("overhead") or {}
    return {name: _nanos(value) for name, value in overhead.items()}


def _to_units(nanos: Mapping[str, int]) -> dict[str, int]:
    """Round each exact total up once: millicores for cpu, base units otherwise."""
    return {
        name: _ceil_div(amount, _NANOS_PER_MILLI if name == CPU else _NANOS_PER_UNIT) for name, amount in nanos.items()
    }


def _ceil_div(amount: int, unit: int) -> int:
    # Away from zero, like Quantity.MilliValue/Value; the ceiling for the
    # non-negative amounts validation allows.
    whole, rest = divmod(abs(amount), unit)
    if rest:
        whole += 1
    return whole if amount >= 0 else -whole


# -- public API ------------------------------------------------------------------------


def container_requests(container: Mapping[str, Any]) -> dict[str, int]:
    """A container's requests after defaulting (limits fill missing requests), in kemu's units."""
    return _to_units(_request_nanos(container))


def container_limits(container: Mapping[str, Any]) -> dict[str, int]:
    """A container's limits, in kemu's units (millicores for cpu, base units otherwise)."""
    return _to_units(_limit_nanos(container))


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """What the scheduler reserves for ``pod`` (upstream ``PodRequests`` with default options).

    Per resource: max(app containers + sidecars, the init-phase peak) plus
    ``spec.overhead``. Every resource named by any container or by the
    overhead appears, even at zero.
    """
    total = _aggregate(pod, _request_nanos)
    _add(total, _overhead_nanos(pod))
    return _to_units(total)


def pod_limits(pod: Mapping[str, Any]) -> dict[str, int]:
    """The pod's effective limits (upstream ``PodLimits`` with default options).

    Aggregated like requests, but without defaulting (a container with no
    limit contributes nothing), and overhead is added only to resources that
    already have a non-zero limit.
    """
    total = _aggregate(pod, _limit_nanos)
    for name, amount in _overhead_nanos(pod).items():
        if total.get(name):
            total[name] += amount
    return _to_units(total)


def qos_class(pod: Mapping[str, Any]) -> str:
    """``Guaranteed``, ``Burstable`` or ``BestEffort``, computed from the spec (upstream ``ComputePodQOS``).

    Guaranteed: every container, init containers included, has positive cpu
    and memory limits, and summed over the pod cpu/memory requests equal the
    limits. BestEffort: no container has a positive cpu or memory request or
    limit. Anything else is Burstable. Upstream ``GetPodQOS`` prefers
    ``status.qosClass`` once set; callers that want that read it first.
    """
    spec = pod.get("spec") or {}
    containers: Iterable[Mapping[str, Any]] = [*(spec.get("containers") or ()), *(spec.get("initContainers") or ())]
    requests: dict[str, int] = {}
    limits: dict[str, int] = {}
    guaranteed = True
    for container in containers:
        positive_requests = _positive_compute(_request_nanos(container))
        positive_limits = _positive_compute(_limit_nanos(container))
        _add(requests, positive_requests)
        _add(limits, positive_limits)
        if len(positive_limits) < len(QOS_COMPUTE_RESOURCES):  # needs both a cpu and a memory limit
            guaranteed = False
    if not requests and not limits:
        return BEST_EFFORT
    if guaranteed and requests == limits:
        return GUARANTEED
    return BURSTABLE


def _positive_compute(amounts: Mapping[str, int]) -> dict[str, int]:
    # qos.go ignores other resources and zero amounts entirely.
    return {name: amount for name, amount in amounts.items() if name in QOS_COMPUTE_RESOURCES and amount > 0}


HostPort = tuple[str, str, int]
"""(hostIP, protocol, hostPort), sanitised: ``0.0.0.0`` for no IP, ``TCP`` for no protocol."""


def host_ports(pod: Mapping[str, Any]) -> tuple[HostPort, ...]:
    """The host ports a pod claims on its node (schedutil ``GetHostPorts``).

    App containers and restartable init containers (sidecars) count; ordinary
    init containers have exited before the app starts.
    """
    spec = pod.get("spec") or {}
    ports: list[HostPort] = []
    sidecars = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
    for container in (*sidecars, *(spec.get("containers") or ())):
        for port in container.get("ports") or ():
            host_port = int(port.get("hostPort") or 0)
            if host_port > 0:
                ports.append((port.get("hostIP") or "0.0.0.0", port.get("protocol") or "TCP", host_port))
    return tuple(ports)
