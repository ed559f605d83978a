"""Small object builders shared by the tests: Kubernetes JSON shapes with only what a test names."""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]


def container(name: str = "app", cpu: str | None = None, memory: str | None = None, *,
              lim_cpu: str | None = None, lim_memory: str | None = None, image: str = "nginx:1.27") -> Obj:
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    limits = {k: v for k, v in (("cpu", lim_cpu), ("memory", lim_memory)) if v is not None}
    resources: Obj = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {"name": name, "image": image, "resources": resources}


def pod(name: str = "p", namespace: str = "default", *, containers: list[Obj] | None = None,
        init: list[Obj] | None = None, labels: dict[str, str] | None = None, node: str | None = None,
        priority_class: str | None = None, runtime_class: str | None = None, **spec: Any) -> Obj:
    body: Obj = {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
                 "spec": {"containers": containers or [container()], **spec}}
    if init:
        body["spec"]["initContainers"] = init
    if node:
        body["spec"]["nodeName"] = node
    if priority_class:
        body["spec"]["priorityClassName"] = priority_class
    if runtime_class:
        body["spec"]["runtimeClassName"] = runtime_class
    return body


def node(name: str = "n1", cpu: str = "8", memory: str = "32Gi", labels: dict[str, str] | None = None) -> Obj:
    cap = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": {}, "status": {"capacity": cap, "allocatable": dict(cap)}}


def namespace(name: str) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}


def priority_class(name: str, value: int, *, global_default: bool = False, policy: str | None = None) -> Obj:
    body: Obj = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                 "value": value, "globalDefault": global_default}
    if policy:
        body["preemptionPolicy"] = policy
    return body


def limit_range(name: str, namespace: str = "default", *, default: dict[str, str] | None = None,
                default_request: dict[str, str] | None = None, max_: dict[str, str] | None = None) -> Obj:
    item: Obj = {"type": "Container"}
    if default:
        item["default"] = default
    if default_request:
        item["defaultRequest"] = default_request
    if max_:
        item["max"] = max_
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": name, "namespace": namespace},
            "spec": {"limits": [item]}}


def runtime_class(name: str, handler: str = "runc", overhead: dict[str, str] | None = None) -> Obj:
    body: Obj = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name},
                 "handler": handler}
    if overhead:
        body["overhead"] = {"podFixed": overhead}
    return body


# -- scheduler builders: nodes with any allocatable, taints and images; containers with any resources ----------


def sched_node(name: str = "n1", cpu: str = "8", memory: str = "32Gi", *, pods: str = "110",
               labels: dict[str, str] | None = None, taints: list[Obj] | None = None, unschedulable: bool = False,
               images: dict[str, int] | None = None, **allocatable: str) -> Obj:
    """A node for scheduler tests; more allocatable resources as ``**{"nvidia.com/gpu": "8"}``."""
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, **allocatable}
    spec: Obj = {}
    if taints:
        spec["taints"] = taints
    if unschedulable:
        spec["unschedulable"] = True
    status: Obj = {"capacity": dict(alloc), "allocatable": alloc}
    if images:
        status["images"] = [{"names": [image], "sizeBytes": size} for image, size in images.items()]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": dict(labels or {})},
            "spec": spec, "status": status}


def taint(key: str, value: str = "", effect: str = "NoSchedule") -> Obj:
    return {"key": key, "value": value, "effect": effect}


def toleration(key: str = "", value: str = "", effect: str = "", operator: str = "Equal") -> Obj:
    body: Obj = {"operator": operator}
    if key:
        body["key"] = key
    if value:
        body["value"] = value
    if effect:
        body["effect"] = effect
    return body


def res_container(name: str = "app", requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
                  *, image: str = "nginx:1.27", host_ports: list[tuple[str, str, int]] | None = None) -> Obj:
    """A container with arbitrary requests/limits and host ports given as (hostIP, protocol, hostPort)."""
    resources: Obj = {}
    if requests:
        resources["requests"] = dict(requests)
    if limits:
        resources["limits"] = dict(limits)
    body: Obj = {"name": name, "image": image, "resources": resources}
    if host_ports:
        body["ports"] = [{"containerPort": port, "hostPort": port, "hostIP": ip, "protocol": protocol}
                         for ip, protocol, port in host_ports]
    return body


def req_pod(name: str = "p", cpu: str | None = None, memory: str | None = None, *, node: str | None = None,
            extra: dict[str, str] | None = None, **spec: Any) -> Obj:
    """A one-container pod requesting ``cpu``/``memory`` (and ``extra`` resources), optionally bound to ``node``."""
    requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    requests.update(extra or {})
    return pod(name, containers=[res_container(requests=requests)], node=node, **spec)
