"""Small object builders shared by the tests: Kubernetes JSON shapes with only what a test names."""

from __future__ import annotations

from typing import Any

from emulator.api.types import Obj


def given(**fields: Any) -> Obj:
    """The optional fields that are set (not None, not empty), in the order given."""
    return {k: v for k, v in fields.items() if v}


def not_none(**fields: Any) -> Obj:
    """The optional fields that are not None (0, "" and empty ones included), in the order given."""
    return {k: v for k, v in fields.items() if v is not None}


def container(name: str = "app", cpu: str | None = None, memory: str | None = None, *,
              lim_cpu: str | None = None, lim_memory: str | None = None, image: str = "nginx:1.27") -> Obj:
    resources = given(requests=not_none(cpu=cpu, memory=memory), limits=not_none(cpu=lim_cpu, memory=lim_memory))
    return {"name": name, "image": image, "resources": resources}


def pod(name: str = "p", namespace: str = "default", *, containers: list[Obj] | None = None,
        init: list[Obj] | None = None, labels: dict[str, str] | None = None, node: str | None = None,
        priority_class: str | None = None, runtime_class: str | None = None, **spec: Any) -> Obj:
    body: Obj = {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
                 "spec": {"containers": containers or [container()], **spec}}
    body["spec"].update(given(initContainers=init, nodeName=node, priorityClassName=priority_class,
                              runtimeClassName=runtime_class))
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
    item: Obj = {"type": "Container", **given(default=default, defaultRequest=default_request, max=max_)}
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
    return {"operator": operator, **given(key=key, value=value, effect=effect)}


def res_container(name: str = "app", requests: dict[str, str] | None = None, limits: dict[str, str] | None = None,
                  *, image: str = "nginx:1.27", host_ports: list[tuple[str, str, int]] | None = None) -> Obj:
    """A container with arbitrary requests/limits and host ports given as (hostIP, protocol, hostPort)."""
    resources = {k: dict(v) for k, v in given(requests=requests, limits=limits).items()}
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


# -- topology spread, pod affinity, storage and budgets (scheduler plugin tests) ----------------------------------


def spread(key: str, max_skew: int = 1, when: str = "DoNotSchedule", match: dict[str, str] | None = None,
           **extra: Any) -> Obj:
    """A topologySpreadConstraint on ``key`` selecting ``match`` labels; extra fields as given (camelCase)."""
    body: Obj = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    if match is not None:
        body["labelSelector"] = {"matchLabels": dict(match)}
    body.update(extra)
    return body


def affinity_term(key: str, match: dict[str, str] | None = None, *, namespaces: list[str] | None = None,
                  namespace_selector: Obj | None = None, expressions: list[Obj] | None = None) -> Obj:
    """A PodAffinityTerm over topology ``key`` selecting ``match`` labels."""
    selector: Obj = {}
    if match is not None:
        selector["matchLabels"] = dict(match)
    if expressions is not None:
        selector["matchExpressions"] = list(expressions)
    body: Obj = {"topologyKey": key, "labelSelector": selector}
    if namespaces is not None:
        body["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        body["namespaceSelector"] = namespace_selector
    return body


def pod_affinity(required: list[Obj] | None = None, preferred: list[tuple[int, Obj]] | None = None, *,
                 anti_required: list[Obj] | None = None, anti_preferred: list[tuple[int, Obj]] | None = None) -> Obj:
    """A pod ``affinity`` with podAffinity / podAntiAffinity terms (preferred ones as (weight, term))."""
    out: Obj = {}
    for field, req, pref in (("podAffinity", required, preferred), ("podAntiAffinity", anti_required, anti_preferred)):
        block: Obj = {}
        if req:
            block["requiredDuringSchedulingIgnoredDuringExecution"] = list(req)
        if pref:
            block["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": w, "podAffinityTerm": t} for w, t in pref]
        if block:
            out[field] = block
    return out


def owned_by(body: Obj, kind: str, name: str, api_version: str = "apps/v1") -> Obj:
    """``body`` with a controller ownerReference to ``kind/name``."""
    body["metadata"]["ownerReferences"] = [{"apiVersion": api_version, "kind": kind, "name": name,
                                            "uid": f"uid-{name}", "controller": True}]
    return body


def replica_set(name: str, match: dict[str, str], namespace: str = "default") -> Obj:
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": dict(match)},
                     "template": {"metadata": {"labels": dict(match)}, "spec": {"containers": [container()]}}}}


def service(name: str, selector: dict[str, str] | None, namespace: str = "default") -> Obj:
    spec: Obj = {} if selector is None else {"selector": dict(selector)}
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": namespace}, "spec": spec}


def labelled_namespace(name: str, labels: dict[str, str]) -> Obj:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(labels)}}


def pdb(name: str, match: dict[str, str], allowed: int, namespace: str = "default",
        disrupted: list[str] | None = None) -> Obj:
    """A PodDisruptionBudget whose status allows ``allowed`` more disruptions."""
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"selector": {"matchLabels": dict(match)}, "minAvailable": 1},
            "status": {"disruptionsAllowed": allowed,
                       "disruptedPods": {p: "2024-01-01T00:00:00Z" for p in disrupted or ()}}}


def storage_class(name: str, *, wait: bool = True, provisioner: str = "csi.example.com",
                  zones: list[str] | None = None) -> Obj:
    """A StorageClass, WaitForFirstConsumer unless ``wait`` is False, limited to ``zones`` if given."""
    body: Obj = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": name},
                 "provisioner": provisioner, "reclaimPolicy": "Delete",
                 "volumeBindingMode": "WaitForFirstConsumer" if wait else "Immediate"}
    if zones is not None:
        body["allowedTopologies"] = [{"matchLabelExpressions": [
            {"key": "topology.kubernetes.io/zone", "values": list(zones)}]}]
    return body


def persistent_volume(name: str, size: str = "10Gi", *, storage_class: str = "", zone: str | None = None,
                      node_affinity: dict[str, list[str]] | None = None, modes: list[str] | None = None,
                      claim: tuple[str, str] | None = None, phase: str = "Available",
                      labels: dict[str, str] | None = None) -> Obj:
    """A PV; ``zone`` adds the zone label, ``node_affinity`` {label: values} a required In term."""
    meta_labels = dict(labels or {})
    if zone is not None:
        meta_labels["topology.kubernetes.io/zone"] = zone
    spec: Obj = {"capacity": {"storage": size}, "accessModes": modes or ["ReadWriteOnce"],
                 "persistentVolumeReclaimPolicy": "Retain", "storageClassName": storage_class,
                 "volumeMode": "Filesystem", "csi": {"driver": "csi.example.com", "volumeHandle": name}}
    if node_affinity:
        spec["nodeAffinity"] = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": k, "operator": "In", "values": list(v)} for k, v in node_affinity.items()]}]}}
    if claim is not None:
        spec["claimRef"] = {"namespace": claim[0], "name": claim[1]}
    return {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": name, "labels": meta_labels},
            "spec": spec, "status": {"phase": phase}}


def persistent_volume_claim(name: str, size: str = "5Gi", *, storage_class: str | None = "",
                            volume: str = "", namespace: str = "default", modes: list[str] | None = None) -> Obj:
    """A PVC; bound to PV ``volume`` when given."""
    spec: Obj = {"accessModes": modes or ["ReadWriteOnce"], "resources": {"requests": {"storage": size}},
                 "volumeMode": "Filesystem"}
    if storage_class is not None:
        spec["storageClassName"] = storage_class
    if volume:
        spec["volumeName"] = volume
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec,
            "status": {"phase": "Bound" if volume else "Pending"}}


def claim_volume(name: str, claim: str) -> Obj:
    """A pod volume backed by PVC ``claim``."""
    return {"name": name, "persistentVolumeClaim": {"claimName": claim}}
