"""Table-driven tests of emulator.server.validation.

Every invalid case starts from a valid object built by a small builder below, applies one
change (``path -> value``, ``DEL`` removes the key) and names the exact field path upstream
kube-apiserver reports, plus a fragment of the message.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from emulator.api import kinds
from emulator.api.errors import Cause, StatusError
from emulator.api.kinds import Kind
from emulator.server import validation
from emulator.server.validation import VALIDATORS, validate, validate_quantity

DEL = object()


def _set(obj: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a.b.0.c`` in ``obj`` (creating dicts on the way); ``DEL`` deletes the last key."""
    parts = [int(p) if p.isdigit() else p for p in path.split(".")]
    node: Any = obj
    for part in parts[:-1]:
        node = node[part] if isinstance(part, int) else node.setdefault(part, {})
    if value is DEL:
        del node[parts[-1]]
    else:
        node[parts[-1]] = value


def changed(obj: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A deep copy of ``obj`` with ``changes`` applied; keys use ``__`` for ``.``."""
    out = copy.deepcopy(obj)
    for path, value in changes.items():
        _set(out, path.replace("__", "."), value)
    return out


# ------------------------------------------------------------------------------ builders


def container(name: str = "app", **extra: Any) -> dict[str, Any]:
    c: dict[str, Any] = {
        "name": name,
        "image": "registry.k8s.io/pause:3.9",
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "256Mi"}},
    }
    c.update(extra)
    return c


def pod(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"containers": [container("app"), container("sidecar")]}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": "default", "labels": {"app": "web"}},
            "spec": body}


def node() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-1", "labels": {"zone": "a"}},
            "spec": {"taints": [{"key": "dedicated", "value": "infra", "effect": "NoSchedule"}]},
            "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "allocatable": {"cpu": "7800m", "memory": "31Gi", "pods": "110"}}}


def namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"},
            "spec": {"finalizers": ["kubernetes"]}}


def priority_class() -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "high"},
            "value": 1000, "preemptionPolicy": "PreemptLowerPriority", "globalDefault": False}


def limit_range() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "limits", "namespace": "default"},
            "spec": {"limits": [{"type": "Container", "max": {"cpu": "2"}, "min": {"cpu": "50m"},
                                 "default": {"cpu": "500m"}, "defaultRequest": {"cpu": "100m"},
                                 "maxLimitRequestRatio": {"cpu": "10"}}]}}


def runtime_class() -> dict[str, Any]:
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "gvisor"},
            "handler": "runsc", "overhead": {"podFixed": {"cpu": "250m", "memory": "64Mi"}}}


def pdb() -> dict[str, Any]:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}}


def _workload(kind: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "replicas": 3,
        "selector": {"matchLabels": {"app": "web"}},
        "template": {"metadata": {"labels": {"app": "web", "tier": "front"}},
                     "spec": {"containers": [container("app")], "restartPolicy": "Always"}},
    }
    body.update(spec)
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "web", "namespace": "default"},
            "spec": body}


def deployment() -> dict[str, Any]:
    return _workload("Deployment", strategy={"type": "RollingUpdate",
                                             "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}})


def replica_set() -> dict[str, Any]:
    return _workload("ReplicaSet")


def daemon_set() -> dict[str, Any]:
    d = _workload("DaemonSet", updateStrategy={"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}})
    del d["spec"]["replicas"]
    return d


def configmap() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "default"},
            "data": {"app.properties": "a=b", "KEY_NAME": "v"}}


def event() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "web-0.17a8c", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": "web-0"}, "reason": "Scheduled", "type": "Normal"}


def lease() -> dict[str, Any]:
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": "node-1", "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": "node-1", "leaseDurationSeconds": 40}}


def rejected(kind: Kind, obj: dict[str, Any], old: dict[str, Any] | None = None) -> StatusError:
    with pytest.raises(StatusError) as info:
        validate(kind, obj, old)
    return info.value


def fields(exc: StatusError) -> list[str]:
    return [c.field for c in exc.causes]


def cause_at(exc: StatusError, path: str, fragment: str = "") -> Cause:
    """The first cause at ``path`` whose message contains ``fragment``."""
    matches = [c for c in exc.causes if c.field == path and fragment in c.message]
    assert matches, f"no cause at {path!r} with {fragment!r}; causes: {[(c.field, c.message) for c in exc.causes]}"
    return matches[0]


# ------------------------------------------------------------------------------ valid objects

VALID = [
    (kinds.POD, pod()),
    (kinds.POD, pod(initContainers=[container("init", restartPolicy="Always", readinessProbe={"exec": {}})],
                    tolerations=[{"operator": "Exists"},
                                 {"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                                  "effect": "NoExecute", "tolerationSeconds": 300}],
                    nodeSelector={"kubernetes.io/os": "linux"},
                    affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": "zone", "operator": "In", "values": ["a", "b"]}]}]}},
                        "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 100, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                                                "labelSelector": {"matchLabels": {"app": "web"}}}}]}},
                    topologySpreadConstraints=[{"maxSkew": 1, "topologyKey": "zone",
                                                "whenUnsatisfiable": "DoNotSchedule",
                                                "labelSelector": {"matchLabels": {"app": "web"}}}],
                    overhead={"cpu": "250m"}, restartPolicy="OnFailure", terminationGracePeriodSeconds=0,
                    activeDeadlineSeconds=60, priorityClassName="high", schedulingGates=[{"name": "example.com/q"}],
                    volumes=[{"name": "data", "emptyDir": {}}])),
    (kinds.POD, changed(pod(), spec__containers__0__resources={
        "requests": {"example.com/gpu": "2", "cpu": 1}, "limits": {"example.com/gpu": 2, "cpu": "1000m"}})),
    # Hugepages are not checked for page-size divisibility or a cpu/memory companion.
    (kinds.POD, changed(pod(), spec__containers__0__resources={"limits": {"hugepages-2Mi": "3Mi"}})),
    (kinds.POD, changed(pod(), metadata__name=DEL, metadata__generateName="web-")),
    (kinds.NODE, node()),
    (kinds.NAMESPACE, namespace()),
    (kinds.PRIORITYCLASS, priority_class()),
    (kinds.PRIORITYCLASS, changed(priority_class(), metadata__name="system-node-critical", value=2000001000)),
    (kinds.PRIORITYCLASS, changed(priority_class(), value=-5, preemptionPolicy="Never")),
    (kinds.LIMITRANGE, limit_range()),
    (kinds.LIMITRANGE, changed(limit_range(), spec__limits=[
        {"type": "PersistentVolumeClaim", "max": {"storage": "10Gi"}}, {"type": "Pod", "max": {"cpu": "4"}}])),
    (kinds.RUNTIMECLASS, runtime_class()),
    (kinds.PDB, pdb()),
    (kinds.PDB, changed(pdb(), spec__minAvailable=DEL, spec__maxUnavailable=0)),
    (kinds.DEPLOYMENT, deployment()),
    (kinds.DEPLOYMENT, changed(deployment(), spec__selector={
        "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]},
                             {"key": "canary", "operator": "DoesNotExist"}]})),
    (kinds.DEPLOYMENT, changed(deployment(), spec__strategy={"type": "Recreate"})),
    (kinds.REPLICASET, replica_set()),
    (kinds.DAEMONSET, daemon_set()),
    (kinds.CONFIGMAP, configmap()),
    (kinds.EVENT, event()),
    (kinds.LEASE, lease()),
]


@pytest.mark.parametrize(("kind", "obj"), VALID, ids=[
    "pod", "pod-rich", "pod-extended-resources", "pod-hugepages-ignored", "pod-generate-name", "node",
    "namespace", "priorityclass", "priorityclass-system", "priorityclass-negative", "limitrange",
    "limitrange-pvc-pod", "runtimeclass", "pdb", "pdb-max-unavailable-zero", "deployment",
    "deployment-match-expressions", "deployment-recreate", "replicaset", "daemonset", "configmap", "event", "lease"])
def test_valid_objects_pass(kind: Kind, obj: dict[str, Any]) -> None:
    assert validate(kind, obj) is None


# ------------------------------------------------------------------------------ invalid objects

# (id, kind, object, field path upstream reports, message fragment)
INVALID: list[tuple[str, Kind, dict[str, Any], str, str]] = [
    # ObjectMeta
    ("name-missing", kinds.POD, changed(pod(), metadata__name=DEL), "metadata.name",
     "Required value: name or generateName is required"),
    ("name-not-subdomain", kinds.POD, changed(pod(), metadata__name="Web_0"), "metadata.name",
     "a lowercase RFC 1123 subdomain"),
    ("name-too-long", kinds.POD, changed(pod(), metadata__name="a" * 254), "metadata.name",
     "must be no more than 253 characters"),
    ("generate-name-bad", kinds.POD, changed(pod(), metadata__name=DEL, metadata__generateName="Web-"),
     "metadata.generateName", "RFC 1123 subdomain"),
    ("namespace-missing", kinds.POD, changed(pod(), metadata__namespace=DEL), "metadata.namespace",
     "Required value"),
    ("namespace-not-label", kinds.POD, changed(pod(), metadata__namespace="team.a"), "metadata.namespace",
     "must not contain dots"),
    ("namespace-on-cluster-scoped", kinds.NODE, changed(node(), metadata__namespace="default"),
     "metadata.namespace", "Forbidden: not allowed on this type"),
    ("label-key-bad", kinds.POD, changed(pod(), metadata__labels={"bad key": "x"}), "metadata.labels",
     "name part must consist of alphanumeric characters"),
    ("label-key-prefix-bad", kinds.POD, changed(pod(), metadata__labels={"Example.COM/app": "x"}),
     "metadata.labels", "prefix part a lowercase RFC 1123 subdomain"),
    ("label-value-bad", kinds.POD, changed(pod(), metadata__labels={"app": "-web"}), "metadata.labels",
     "a valid label must be an empty string"),
    ("label-value-too-long", kinds.POD, changed(pod(), metadata__labels={"app": "a" * 64}), "metadata.labels",
     "must be no more than 63 characters"),
    ("annotation-key-bad", kinds.POD, changed(pod(), metadata__annotations={"a/b/c": "x"}),
     "metadata.annotations", "a qualified name"),
    ("annotations-too-big", kinds.POD, changed(pod(), metadata__annotations={"big": "x" * (256 * 1024)}),
     "metadata.annotations", "Too long: must have at most 262144 bytes"),
    ("finalizer-not-qualified", kinds.POD, changed(pod(), metadata__finalizers=["cleanup"]),
     "metadata.finalizers[0]", "neither a standard finalizer name nor is it fully qualified"),
    ("owner-reference-no-uid", kinds.POD, changed(pod(), metadata__ownerReferences=[
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web"}]),
     "metadata.ownerReferences.uid", "must not be empty"),
    ("generation-negative", kinds.POD, changed(pod(), metadata__generation=-1), "metadata.generation",
     "must be greater than or equal to 0"),
    ("metadata-not-object", kinds.POD, changed(pod(), metadata="web-0"), "metadata", "must be an object"),
    ("namespace-name-dots", kinds.NAMESPACE, changed(namespace(), metadata__name="team.a"), "metadata.name",
     "must not contain dots"),
    ("namespace-finalizer-bad", kinds.NAMESPACE, changed(namespace(), spec__finalizers=["a/b/c"]),
     "spec.finalizers", "a qualified name"),
    ("event-name-bad", kinds.EVENT, changed(event(), metadata__name="Bad_Event"), "metadata.name",
     "RFC 1123 subdomain"),
    ("lease-namespace-missing", kinds.LEASE, changed(lease(), metadata__namespace=""), "metadata.namespace",
     "Required value"),
    # Pod: containers
    ("containers-missing", kinds.POD, changed(pod(), spec__containers=DEL), "spec.containers", "Required value"),
    ("containers-empty", kinds.POD, changed(pod(), spec__containers=[]), "spec.containers", "Required value"),
    ("containers-not-list", kinds.POD, changed(pod(), spec__containers={"name": "app"}), "spec.containers",
     "must be an array"),
    ("container-name-missing", kinds.POD, changed(pod(), spec__containers__0__name=DEL),
     "spec.containers[0].name", "Required value"),
    ("container-name-not-label", kinds.POD, changed(pod(), spec__containers__1__name="Side_car"),
     "spec.containers[1].name", "a lowercase RFC 1123 label"),
    ("container-name-duplicate", kinds.POD, changed(pod(), spec__containers__1__name="app"),
     "spec.containers[1].name", 'Duplicate value: "app"'),
    ("init-name-collides", kinds.POD, pod(initContainers=[container("app")]), "spec.initContainers[0].name",
     'Duplicate value: "app"'),
    ("image-missing", kinds.POD, changed(pod(), spec__containers__0__image=""), "spec.containers[0].image",
     "Required value"),
    ("image-whitespace", kinds.POD, changed(pod(), spec__containers__0__image=" nginx"),
     "spec.containers[0].image", "must not have leading or trailing whitespace"),
    ("image-pull-policy-bad", kinds.POD, changed(pod(), spec__containers__0__imagePullPolicy="Sometimes"),
     "spec.containers[0].imagePullPolicy", 'Unsupported value: "Sometimes"'),
    ("container-restart-policy", kinds.POD, changed(pod(), spec__containers__0__restartPolicy="Always"),
     "spec.containers[0].restartPolicy", "may not be set for non-init containers"),
    ("init-restart-policy", kinds.POD, pod(initContainers=[container("init", restartPolicy="OnFailure")]),
     "spec.initContainers[0].restartPolicy", 'supported values: "Always"'),
    ("init-probe-not-sidecar", kinds.POD, pod(initContainers=[container("init", livenessProbe={"exec": {}})]),
     "spec.initContainers[0].livenessProbe", "may not be set for init containers without restartPolicy=Always"),
    # Pod: resources
    ("request-garbage", kinds.POD, changed(pod(), spec__containers__0__resources__requests__cpu="12xyz"),
     "spec.containers[0].resources.requests[cpu]", "quantities must match the regular expression"),
    ("request-two-dots", kinds.POD, changed(pod(), spec__containers__1__resources__requests__memory="1.1.1"),
     "spec.containers[1].resources.requests[memory]", "quantities must match the regular expression"),
    ("request-1e1000", kinds.POD, changed(pod(), spec__containers__1__resources__requests__cpu="1e1000"),
     "spec.containers[1].resources.requests[cpu]", 'Invalid value: "1e1000": must be less than 1e992'),
    ("limit-negative", kinds.POD, changed(pod(), spec__containers__0__resources__limits__memory="-1"),
     "spec.containers[0].resources.limits[memory]", 'Invalid value: "-1": must be greater than or equal to 0'),
    ("request-over-limit", kinds.POD, changed(pod(), spec__containers__0__resources__requests__cpu="2"),
     "spec.containers[0].resources.requests", 'Invalid value: "2": must be less than or equal to cpu limit of 1'),
    ("resource-not-standard", kinds.POD, changed(pod(), spec__containers__0__resources__requests__gpu="1"),
     "spec.containers[0].resources.requests[gpu]", "must be a standard resource for containers"),
    ("extended-fractional", kinds.POD, changed(pod(), spec__containers__0__resources={
        "requests": {"example.com/gpu": "500m"}, "limits": {"example.com/gpu": "500m"}}),
     "spec.containers[0].resources.limits[example.com/gpu]", "must be an integer"),
    ("extended-request-not-limit", kinds.POD, changed(pod(), spec__containers__0__resources={
        "requests": {"example.com/gpu": "1"}, "limits": {"example.com/gpu": "2"}}),
     "spec.containers[0].resources.requests", "must be equal to example.com/gpu limit of 2"),
    ("extended-request-without-limit", kinds.POD, changed(pod(), spec__containers__0__resources={
        "requests": {"example.com/gpu": "1"}}),
     "spec.containers[0].resources.limits", "Limit must be set for non overcommitable resources"),
    ("overhead-garbage", kinds.POD, pod(overhead={"cpu": "lots"}), "spec.overhead.limits[cpu]",
     "quantities must match the regular expression"),
    # Pod: ports
    ("port-out-of-range", kinds.POD, changed(pod(), spec__containers__0__ports=[{"containerPort": 70000}]),
     "spec.containers[0].ports[0].containerPort", "must be between 1 and 65535, inclusive"),
    ("port-missing", kinds.POD, changed(pod(), spec__containers__0__ports=[{"name": "http"}]),
     "spec.containers[0].ports[0].containerPort", "Required value"),
    ("host-port-out-of-range", kinds.POD, changed(pod(), spec__containers__0__ports=[
        {"containerPort": 80, "hostPort": 65536}]),
     "spec.containers[0].ports[0].hostPort", "must be between 1 and 65535, inclusive"),
    ("port-protocol-bad", kinds.POD, changed(pod(), spec__containers__0__ports=[
        {"containerPort": 80, "protocol": "HTTP"}]),
     "spec.containers[0].ports[0].protocol", 'supported values: "SCTP", "TCP", "UDP"'),
    ("port-name-duplicate", kinds.POD, changed(pod(), spec__containers__0__ports=[
        {"containerPort": 80, "name": "http"}, {"containerPort": 81, "name": "http"}]),
     "spec.containers[0].ports[1].name", 'Duplicate value: "http"'),
    ("host-port-conflict", kinds.POD, changed(pod(), spec__containers__0__ports=[{"containerPort": 80, "hostPort": 80}],
                                              spec__containers__1__ports=[{"containerPort": 81, "hostPort": 80}]),
     "spec.containers[1].ports[0].hostPort", 'Duplicate value: "TCP//80"'),
    ("host-network-port-mismatch", kinds.POD, changed(pod(hostNetwork=True), spec__containers__0__ports=[
        {"containerPort": 80, "hostPort": 81}]),
     "spec.containers[0].ports[0].hostPort", "must match `containerPort` when `hostNetwork` is true"),
    # Pod: spec fields
    ("restart-policy-bad", kinds.POD, pod(restartPolicy="Sometimes"), "spec.restartPolicy",
     'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"'),
    ("grace-negative", kinds.POD, pod(terminationGracePeriodSeconds=-1), "spec.terminationGracePeriodSeconds",
     "must be greater than or equal to 0"),
    ("deadline-zero", kinds.POD, pod(activeDeadlineSeconds=0), "spec.activeDeadlineSeconds",
     "must be between 1 and 2147483647, inclusive"),
    ("node-name-bad", kinds.POD, pod(nodeName="Node_1"), "spec.nodeName", "RFC 1123 subdomain"),
    ("node-name-while-gated", kinds.POD, pod(nodeName="node-1", schedulingGates=[{"name": "wait"}]),
     "spec.nodeName", "cannot be set until all schedulingGates have been cleared"),
    ("ephemeral-on-create", kinds.POD, pod(ephemeralContainers=[{"name": "debug", "image": "busybox"}]),
     "spec.ephemeralContainers", "cannot be set on create"),
    ("volume-name-duplicate", kinds.POD, pod(volumes=[{"name": "data"}, {"name": "data"}]),
     "spec.volumes[1].name", 'Duplicate value: "data"'),
    ("node-selector-bad-value", kinds.POD, pod(nodeSelector={"zone": "a b"}), "spec.nodeSelector",
     "a valid label must be an empty string"),
    ("scheduling-gate-duplicate", kinds.POD, pod(schedulingGates=[{"name": "a"}, {"name": "a"}]),
     "spec.schedulingGates[1]", 'Duplicate value: "a"'),
    # Pod: tolerations
    ("toleration-operator-bad", kinds.POD, pod(tolerations=[{"key": "k", "operator": "Maybe"}]),
     "spec.tolerations[0].operator", 'supported values: "Equal", "Exists"'),
    ("toleration-exists-with-value", kinds.POD, pod(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]),
     "spec.tolerations[0].operator", "value must be empty when `operator` is 'Exists'"),
    ("toleration-effect-bad", kinds.POD, pod(tolerations=[{"key": "k", "operator": "Exists", "effect": "Never"}]),
     "spec.tolerations[0].effect", '"NoSchedule", "PreferNoSchedule", "NoExecute"'),
    ("toleration-seconds-not-noexecute", kinds.POD, pod(tolerations=[
        {"key": "k", "operator": "Exists", "effect": "NoSchedule", "tolerationSeconds": 5}]),
     "spec.tolerations[0].effect", "effect must be 'NoExecute' when `tolerationSeconds` is set"),
    ("toleration-empty-key-equal", kinds.POD, pod(tolerations=[{"operator": "Equal", "value": "v"}]),
     "spec.tolerations[0].operator", "operator must be Exists when `key` is empty"),
    ("toleration-key-bad", kinds.POD, pod(tolerations=[{"key": "a/b/c", "operator": "Exists"}]),
     "spec.tolerations[0].key", "a qualified name"),
    # Pod: affinity and spreading
    ("node-affinity-no-terms", kinds.POD, pod(affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}),
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms",
     "must have at least one node selector term"),
    ("node-affinity-operator-bad", kinds.POD, pod(affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "Near", "values": ["a"]}]}]}}}),
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
     ".matchExpressions[0].operator", "not a valid selector operator"),
    ("node-affinity-in-without-values", kinds.POD, pod(affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": "zone", "operator": "In"}]}]}}}),
     "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
     ".matchExpressions[0].values", "must be specified when `operator` is 'In' or 'NotIn'"),
    ("node-affinity-weight-zero", kinds.POD, pod(affinity={"nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]}}),
     "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight",
     "must be in the range 1-100"),
    ("pod-anti-affinity-no-topology-key", kinds.POD, pod(affinity={"podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {"matchLabels": {"app": "web"}}}]}}),
     "spec.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey",
     "Required value: can not be empty"),
    ("spread-max-skew-zero", kinds.POD, pod(topologySpreadConstraints=[
        {"maxSkew": 0, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]),
     "spec.topologySpreadConstraints[0].maxSkew", "Invalid value: 0: must be greater than zero"),
    ("spread-when-unsatisfiable-bad", kinds.POD, pod(topologySpreadConstraints=[
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "Whatever"}]),
     "spec.topologySpreadConstraints[0].whenUnsatisfiable", 'supported values: "DoNotSchedule", "ScheduleAnyway"'),
    ("spread-topology-key-empty", kinds.POD, pod(topologySpreadConstraints=[
        {"maxSkew": 1, "topologyKey": "", "whenUnsatisfiable": "ScheduleAnyway"}]),
     "spec.topologySpreadConstraints[0].topologyKey", "Required value: can not be empty"),
    ("spread-duplicate", kinds.POD, pod(topologySpreadConstraints=[
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"},
        {"maxSkew": 2, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]),
     "spec.topologySpreadConstraints[0].{topologyKey, whenUnsatisfiable}", 'Duplicate value: "{zone, DoNotSchedule}"'),
    # Node
    ("taint-effect-bad", kinds.NODE, changed(node(), spec__taints__0__effect="NoWay"), "metadata.taints[0].effect",
     'Unsupported value: "NoWay"'),
    ("taint-effect-missing", kinds.NODE, changed(node(), spec__taints__0__effect=DEL), "metadata.taints[0].effect",
     "Required value"),
    ("taint-key-bad", kinds.NODE, changed(node(), spec__taints__0__key="bad key"), "metadata.taints[0].key",
     "name part must consist of alphanumeric characters"),
    ("taint-duplicate", kinds.NODE, changed(node(), spec__taints=[
        {"key": "k", "effect": "NoSchedule"}, {"key": "k", "value": "other", "effect": "NoSchedule"}]),
     "metadata.taints[1]", "taints must be unique by key and effect pair"),
    ("capacity-negative", kinds.NODE, changed(node(), status__capacity__cpu="-2"), "status.capacity.cpu",
     "must be greater than or equal to 0"),
    ("allocatable-garbage", kinds.NODE, changed(node(), status__allocatable__memory="31GiB"),
     "status.allocatable.memory", "quantities must match the regular expression"),
    ("capacity-pods-fractional", kinds.NODE, changed(node(), status__capacity__pods="110.5"),
     "status.capacity.pods", "must be an integer"),
    # PriorityClass
    ("pc-value-missing", kinds.PRIORITYCLASS, changed(priority_class(), value=DEL), "value", "Required value"),
    ("pc-value-not-integer", kinds.PRIORITYCLASS, changed(priority_class(), value="high"), "value",
     "must be an integer"),
    ("pc-value-too-high", kinds.PRIORITYCLASS, changed(priority_class(), value=1_000_000_001), "value",
     "maximum allowed value of a user defined priority is 1000000000"),
    ("pc-system-prefix-unknown", kinds.PRIORITYCLASS, changed(priority_class(), metadata__name="system-mine"),
     "metadata.name", "system-mine is not a known system priority class"),
    ("pc-system-wrong-value", kinds.PRIORITYCLASS, changed(priority_class(), metadata__name="system-cluster-critical",
                                                            value=5), "metadata.name",
     "value of system-cluster-critical PriorityClass must be 2000000000"),
    ("pc-preemption-bad", kinds.PRIORITYCLASS, changed(priority_class(), preemptionPolicy="Always"),
     "preemptionPolicy", 'supported values: "PreemptLowerPriority", "Never"'),
    # LimitRange
    ("lr-type-bad", kinds.LIMITRANGE, changed(limit_range(), spec__limits__0__type="Node"), "spec.limits[0].type",
     "must be a standard limit type or fully qualified"),
    ("lr-type-duplicate", kinds.LIMITRANGE, changed(limit_range(), spec__limits=[
        {"type": "Container", "max": {"cpu": "1"}}, {"type": "Container", "max": {"cpu": "2"}}]),
     "spec.limits[1].type", 'Duplicate value: "Container"'),
    ("lr-quantity-garbage", kinds.LIMITRANGE, changed(limit_range(), spec__limits__0__max__cpu="two"),
     "spec.limits[0].max[cpu]", "quantities must match the regular expression"),
    ("lr-min-over-max", kinds.LIMITRANGE, changed(limit_range(), spec__limits__0__min__cpu="3"),
     "spec.limits[0].min[cpu]", "min value 3 is greater than max value 2"),
    ("lr-default-request-over-default", kinds.LIMITRANGE, changed(limit_range(),
                                                                 spec__limits__0__defaultRequest__cpu="600m"),
     "spec.limits[0].defaultRequest[cpu]", "default request value 600m is greater than default limit value 500m"),
    ("lr-default-over-max", kinds.LIMITRANGE, changed(limit_range(), spec__limits__0__default__cpu="3"),
     "spec.limits[0].default[cpu]", "default value 3 is greater than max value 2"),
    ("lr-pod-default", kinds.LIMITRANGE, changed(limit_range(), spec__limits__0__type="Pod"),
     "spec.limits[0].default", "may not be specified when `type` is 'Pod'"),
    ("lr-pvc-no-storage", kinds.LIMITRANGE, changed(limit_range(), spec__limits=[{"type": "PersistentVolumeClaim"}]),
     "spec.limits[0].limits", "either minimum or maximum storage value is required"),
    ("lr-ratio-below-one", kinds.LIMITRANGE, changed(limit_range(), spec__limits__0__maxLimitRequestRatio__cpu="500m"),
     "spec.limits[0].maxLimitRequestRatio[cpu]", "ratio 500m is less than 1"),
    ("lr-resource-name-bad", kinds.LIMITRANGE, changed(limit_range(), spec__limits__0__max={"gpu": "1"}),
     "spec.limits[0].max[gpu]", "must be a standard resource for containers"),
    # RuntimeClass
    ("rc-handler-missing", kinds.RUNTIMECLASS, changed(runtime_class(), handler=DEL), "handler",
     "a lowercase RFC 1123 label"),
    ("rc-handler-bad", kinds.RUNTIMECLASS, changed(runtime_class(), handler="run.sc"), "handler",
     "must not contain dots"),
    ("rc-overhead-negative", kinds.RUNTIMECLASS, changed(runtime_class(), overhead__podFixed__cpu="-250m"),
     "overhead.limits[cpu]", "must be greater than or equal to 0"),
    ("rc-overhead-garbage", kinds.RUNTIMECLASS, changed(runtime_class(), overhead__podFixed__memory="64 Mi"),
     "overhead.limits[memory]", "quantities must match the regular expression"),
    ("rc-scheduling-toleration-bad", kinds.RUNTIMECLASS, changed(runtime_class(), scheduling={
        "tolerations": [{"key": "k", "operator": "Sometimes"}]}),
     "scheduling.tolerations[0].operator", "Unsupported value"),
    # PodDisruptionBudget
    ("pdb-both", kinds.PDB, changed(pdb(), spec__maxUnavailable=1), "spec",
     "minAvailable and maxUnavailable cannot be both set"),
    ("pdb-neither", kinds.PDB, changed(pdb(), spec__minAvailable=DEL), "spec.minAvailable", "Required value"),
    ("pdb-negative", kinds.PDB, changed(pdb(), spec__minAvailable=-1), "spec.minAvailable",
     "Invalid value: -1: must be greater than or equal to 0"),
    ("pdb-over-100-percent", kinds.PDB, changed(pdb(), spec__minAvailable="150%"), "spec.minAvailable",
     "must not be greater than 100%"),
    ("pdb-not-percent", kinds.PDB, changed(pdb(), spec__minAvailable=DEL, spec__maxUnavailable="half"),
     "spec.maxUnavailable", "a valid percent string must be a numeric string followed by an ending '%'"),
    ("pdb-selector-operator-bad", kinds.PDB, changed(pdb(), spec__selector={
        "matchExpressions": [{"key": "app", "operator": "Like", "values": ["web"]}]}),
     "spec.selector.matchExpressions[0].operator", "not a valid selector operator"),
    ("pdb-selector-in-no-values", kinds.PDB, changed(pdb(), spec__selector={
        "matchExpressions": [{"key": "app", "operator": "In"}]}),
     "spec.selector.matchExpressions[0].values", "must be specified when `operator` is 'In' or 'NotIn'"),
    ("pdb-selector-exists-values", kinds.PDB, changed(pdb(), spec__selector={
        "matchExpressions": [{"key": "app", "operator": "Exists", "values": ["web"]}]}),
     "spec.selector.matchExpressions[0].values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
    ("pdb-selector-label-bad", kinds.PDB, changed(pdb(), spec__selector={"matchLabels": {"app": "we b"}}),
     "spec.selector.matchLabels", "a valid label must be an empty string"),
    # Deployment
    ("deploy-selector-missing", kinds.DEPLOYMENT, changed(deployment(), spec__selector=DEL), "spec.selector",
     "Required value"),
    ("deploy-selector-empty", kinds.DEPLOYMENT, changed(deployment(), spec__selector={}), "spec.selector",
     "empty selector is invalid for deployment"),
    ("deploy-selector-mismatch", kinds.DEPLOYMENT, changed(deployment(), spec__selector__matchLabels__app="api"),
     "spec.template.metadata.labels", "`selector` does not match template `labels`"),
    ("deploy-selector-expression-mismatch", kinds.DEPLOYMENT, changed(deployment(), spec__selector={
        "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["front"]}]}),
     "spec.template.metadata.labels", "`selector` does not match template `labels`"),
    ("deploy-replicas-negative", kinds.DEPLOYMENT, changed(deployment(), spec__replicas=-1), "spec.replicas",
     "must be greater than or equal to 0"),
    ("deploy-template-image-missing", kinds.DEPLOYMENT,
     changed(deployment(), spec__template__spec__containers__0__image=DEL),
     "spec.template.spec.containers[0].image", "Required value"),
    ("deploy-template-request-garbage", kinds.DEPLOYMENT,
     changed(deployment(), spec__template__spec__containers__0__resources__requests__cpu="1.1.1"),
     "spec.template.spec.containers[0].resources.requests[cpu]", "quantities must match the regular expression"),
    ("deploy-template-label-bad", kinds.DEPLOYMENT,
     changed(deployment(), spec__template__metadata__labels__tier="-front"),
     "spec.template.labels", "a valid label must be an empty string"),
    ("deploy-template-restart-never", kinds.DEPLOYMENT,
     changed(deployment(), spec__template__spec__restartPolicy="Never"),
     "spec.template.spec.restartPolicy", 'Unsupported value: "Never": supported values: "Always"'),
    ("deploy-strategy-type-bad", kinds.DEPLOYMENT, changed(deployment(), spec__strategy__type="BlueGreen"),
     "spec.strategy", 'supported values: "Recreate", "RollingUpdate"'),
    ("deploy-strategy-both-zero", kinds.DEPLOYMENT, changed(deployment(), spec__strategy__rollingUpdate={
        "maxSurge": 0, "maxUnavailable": "0%"}),
     "spec.strategy.rollingUpdate.maxUnavailable", "may not be 0 when `maxSurge` is 0"),
    ("deploy-strategy-surge-bad", kinds.DEPLOYMENT, changed(deployment(), spec__strategy__rollingUpdate__maxSurge="x"),
     "spec.strategy.rollingUpdate.maxSurge", "a valid percent string"),
    ("deploy-recreate-with-rolling", kinds.DEPLOYMENT, changed(deployment(), spec__strategy__type="Recreate"),
     "spec.strategy.rollingUpdate", "may not be specified when strategy `type` is 'Recreate'"),
    ("deploy-progress-deadline", kinds.DEPLOYMENT, changed(deployment(), spec__minReadySeconds=30,
                                                          spec__progressDeadlineSeconds=30),
     "spec.progressDeadlineSeconds", "must be greater than minReadySeconds"),
    # ReplicaSet and DaemonSet
    ("rs-selector-mismatch", kinds.REPLICASET, changed(replica_set(), spec__template__metadata__labels={"app": "x"}),
     "spec.template.metadata.labels", "`selector` does not match template `labels`"),
    ("rs-replicas-negative", kinds.REPLICASET, changed(replica_set(), spec__replicas=-3), "spec.replicas",
     "must be greater than or equal to 0"),
    ("rs-template-deadline", kinds.REPLICASET, changed(replica_set(), spec__template__spec__activeDeadlineSeconds=5),
     "spec.template.spec.activeDeadlineSeconds", "activeDeadlineSeconds in ReplicaSet is not Supported"),
    ("ds-selector-missing", kinds.DAEMONSET, changed(daemon_set(), spec__selector=DEL), "spec.selector",
     "Required value"),
    ("ds-selector-empty", kinds.DAEMONSET, changed(daemon_set(), spec__selector={"matchLabels": {}}), "spec.selector",
     "empty selector is invalid for daemonset"),
    ("ds-strategy-bad", kinds.DAEMONSET, changed(daemon_set(), spec__updateStrategy__type="Rolling"),
     "spec.updateStrategy", 'supported values: "RollingUpdate", "OnDelete"'),
    ("ds-surge-and-unavailable", kinds.DAEMONSET, changed(daemon_set(), spec__updateStrategy__rollingUpdate={
        "maxUnavailable": 1, "maxSurge": "10%"}),
     "spec.updateStrategy.rollingUpdate.maxSurge", "may not be set when maxUnavailable is non-zero"),
    ("ds-template-container-name", kinds.DAEMONSET,
     changed(daemon_set(), spec__template__spec__containers__0__name="App"),
     "spec.template.spec.containers[0].name", "a lowercase RFC 1123 label"),
    # ConfigMap
    ("cm-key-bad", kinds.CONFIGMAP, changed(configmap(), data={"bad/key": "v"}), "data[bad/key]",
     "a valid config key must consist of alphanumeric characters"),
    ("cm-key-dotdot", kinds.CONFIGMAP, changed(configmap(), data={"..": "v"}), "data[..]", "must not be '..'"),
    ("cm-key-in-both", kinds.CONFIGMAP, changed(configmap(), binaryData={"KEY_NAME": "dg=="}), "data[KEY_NAME]",
     "duplicate of key present in binaryData"),
    ("cm-too-large", kinds.CONFIGMAP, changed(configmap(), data={"a": "x" * (1024 * 1024 + 1)}), "",
     "Too long: must have at most 1048576 bytes"),
]


@pytest.mark.parametrize(("kind", "obj", "field", "fragment"), [c[1:] for c in INVALID], ids=[c[0] for c in INVALID])
def test_invalid_object_names_the_field(kind: Kind, obj: dict[str, Any], field: str, fragment: str) -> None:
    exc = rejected(kind, obj)
    assert exc.code == 422
    assert exc.reason == "Invalid"
    assert exc.kind == kind.kind
    assert exc.group == kind.group
    cause = cause_at(exc, field, fragment)
    assert cause.to_dict()["field"] == field
    if field:  # an over-size ConfigMap's cause has no field, as upstream
        assert str(cause).startswith(f"{field}: ")


# ------------------------------------------------------------------------------ exact upstream wording

EXACT: list[tuple[str, Kind, dict[str, Any], str, str, str]] = [
    ("dns-label", kinds.POD, changed(pod(), spec__containers__0__name="App"), "spec.containers[0].name",
     'Invalid value: "App": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or \'-\', '
     "and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', "
     "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')", "FieldValueInvalid"),
    ("dns-subdomain", kinds.POD, changed(pod(), metadata__name="Web"), "metadata.name",
     'Invalid value: "Web": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '
     "'-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
     "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')", "FieldValueInvalid"),
    ("request-over-limit", kinds.POD, changed(pod(), spec__containers__0__resources__requests__cpu="2"),
     "spec.containers[0].resources.requests", 'Invalid value: "2": must be less than or equal to cpu limit of 1',
     "FieldValueInvalid"),
    ("required", kinds.POD, changed(pod(), spec__containers__0__image=DEL), "spec.containers[0].image",
     "Required value", "FieldValueRequired"),
    ("not-supported", kinds.POD, pod(restartPolicy="Sometimes"), "spec.restartPolicy",
     'Unsupported value: "Sometimes": supported values: "Always", "OnFailure", "Never"', "FieldValueNotSupported"),
    ("forbidden", kinds.PDB, changed(pdb(), spec__selector={"matchExpressions": [
        {"key": "a", "operator": "Exists", "values": ["x"]}]}), "spec.selector.matchExpressions[0].values",
     "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'", "FieldValueForbidden"),
    ("duplicate", kinds.POD, changed(pod(), spec__containers__1__name="app"), "spec.containers[1].name",
     'Duplicate value: "app"', "FieldValueDuplicate"),
    ("selector-mismatch", kinds.DEPLOYMENT, changed(deployment(), spec__selector__matchLabels__app="api"),
     "spec.template.metadata.labels",
     'Invalid value: {"app":"web","tier":"front"}: `selector` does not match template `labels`', "FieldValueInvalid"),
]


@pytest.mark.parametrize(("kind", "obj", "field", "message", "reason"), [c[1:] for c in EXACT],
                         ids=[c[0] for c in EXACT])
def test_messages_match_upstream_wording(kind: Kind, obj: dict[str, Any], field: str, message: str,
                                         reason: str) -> None:
    cause = cause_at(rejected(kind, obj), field)
    assert cause.message == message
    assert cause.reason == reason


# ------------------------------------------------------------------------------ many causes at once


def test_all_causes_are_reported_not_just_the_first() -> None:
    bad = pod(restartPolicy="Sometimes", tolerations=[{"key": "k", "operator": "Maybe"}])
    bad["metadata"]["name"] = "Web_0"
    bad["spec"]["containers"][0]["image"] = ""
    bad["spec"]["containers"][1]["resources"]["requests"]["cpu"] = "12xyz"
    exc = rejected(kinds.POD, bad)
    assert set(fields(exc)) == {
        "metadata.name", "spec.containers[0].image", "spec.containers[1].resources.requests[cpu]",
        "spec.restartPolicy", "spec.tolerations[0].operator",
    }
    status = exc.to_status()
    assert status["code"] == 422
    assert status["details"]["name"] == "Web_0"
    assert len(status["details"]["causes"]) == len(exc.causes)
    assert exc.message.startswith('Pod "Web_0" is invalid: [metadata.name: Invalid value: "Web_0"')
    assert "spec.tolerations[0].operator: Unsupported value" in exc.message


def test_workload_template_errors_accumulate_with_spec_errors() -> None:
    bad = changed(deployment(), spec__replicas=-1, spec__template__spec__containers__0__resources__limits__cpu="-1",
                  spec__template__spec__tolerations=[{"key": "k", "operator": "Exists", "value": "v"}])
    assert set(fields(rejected(kinds.DEPLOYMENT, bad))) == {
        "spec.replicas", "spec.template.spec.containers[0].resources.limits[cpu]",
        # The 100m request now exceeds the -1 limit: upstream reports that as well.
        "spec.template.spec.containers[0].resources.requests",
        "spec.template.spec.tolerations[0].operator",
    }


# ------------------------------------------------------------------------------ updates

UPDATE_OK: list[tuple[str, Kind, dict[str, Any], dict[str, Any]]] = [
    ("pod-image", kinds.POD, pod(), changed(pod(), spec__containers__0__image="nginx:1.27")),
    ("pod-labels-status", kinds.POD, pod(), changed(pod(), metadata__labels__new="x", status={"phase": "Running"})),
    ("pod-bind", kinds.POD, pod(), pod(nodeName="node-1")),
    ("pod-deadline-set", kinds.POD, pod(), pod(activeDeadlineSeconds=30)),
    ("pod-deadline-lowered", kinds.POD, pod(activeDeadlineSeconds=30), pod(activeDeadlineSeconds=10)),
    ("pod-toleration-added", kinds.POD, pod(tolerations=[{"key": "a", "operator": "Exists"}]),
     pod(tolerations=[{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}])),
    ("pod-toleration-seconds", kinds.POD,
     pod(tolerations=[{"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
     pod(tolerations=[{"key": "a", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 10}])),
    ("pod-gate-removed", kinds.POD, pod(schedulingGates=[{"name": "a"}, {"name": "b"}]),
     pod(schedulingGates=[{"name": "b"}])),
    ("pod-gated-node-selector-added", kinds.POD, pod(schedulingGates=[{"name": "a"}], nodeSelector={"zone": "a"}),
     pod(schedulingGates=[{"name": "a"}], nodeSelector={"zone": "a", "disk": "ssd"})),
    ("deploy-replicas-template", kinds.DEPLOYMENT, deployment(),
     changed(deployment(), spec__replicas=10, spec__template__spec__containers__0__image="nginx")),
    ("pdb-spec", kinds.PDB, pdb(), changed(pdb(), spec__minAvailable=2)),
    ("pc-description", kinds.PRIORITYCLASS, priority_class(), changed(priority_class(), description="hi")),
    ("node-taints", kinds.NODE, node(), changed(node(), spec__taints=[], spec__unschedulable=True)),
    ("node-provider-id-first-set", kinds.NODE, node(), changed(node(), spec__providerID="kemu://node-1")),
    ("configmap-data", kinds.CONFIGMAP, configmap(), changed(configmap(), data={"k": "v"})),
    ("uid-omitted", kinds.CONFIGMAP, changed(configmap(), metadata__uid="u1"), configmap()),
    # Create-only pod rules (ValidatePodCreate) do not apply to updates.
    ("pod-ephemeral-kept", kinds.POD, pod(ephemeralContainers=[{"name": "debug", "image": "busybox"}]),
     changed(pod(ephemeralContainers=[{"name": "debug", "image": "busybox"}]), metadata__labels__x="y")),
    ("pod-bound-gated-relabel", kinds.POD, pod(nodeName="n1", schedulingGates=[{"name": "a"}]),
     changed(pod(nodeName="n1", schedulingGates=[{"name": "a"}]), metadata__labels__x="y")),
]


@pytest.mark.parametrize(("kind", "old", "new"), [c[1:] for c in UPDATE_OK], ids=[c[0] for c in UPDATE_OK])
def test_allowed_updates_pass(kind: Kind, old: dict[str, Any], new: dict[str, Any]) -> None:
    assert validate(kind, new, old) is None


UPDATE_BAD: list[tuple[str, Kind, dict[str, Any], dict[str, Any], str, str]] = [
    ("name", kinds.CONFIGMAP, configmap(), changed(configmap(), metadata__name="cfg2"), "metadata.name",
     'Invalid value: "cfg2": field is immutable'),
    ("namespace", kinds.POD, pod(), changed(pod(), metadata__namespace="other"), "metadata.namespace",
     "field is immutable"),
    ("uid", kinds.NODE, changed(node(), metadata__uid="u1"), changed(node(), metadata__uid="u2"), "metadata.uid",
     "field is immutable"),
    ("pod-resources", kinds.POD, pod(), changed(pod(), spec__containers__0__resources__limits__cpu="2"), "spec",
     "pod updates may not change fields other than"),
    ("pod-restart-policy", kinds.POD, pod(), pod(restartPolicy="Never"), "spec", "spec.restartPolicy"),
    ("pod-add-container", kinds.POD, pod(), changed(pod(), spec__containers=[container("a"), container("b"),
                                                                           container("c")]),
     "spec.containers", "pod updates may not add or remove containers"),
    ("pod-rebind", kinds.POD, pod(nodeName="node-1"), pod(nodeName="node-2"), "spec", "spec.nodeName"),
    ("pod-unbind", kinds.POD, pod(nodeName="node-1"), pod(), "spec", "spec.nodeName"),
    ("pod-deadline-raised", kinds.POD, pod(activeDeadlineSeconds=10), pod(activeDeadlineSeconds=30),
     "spec.activeDeadlineSeconds", "must be less than or equal to previous value"),
    ("pod-deadline-removed", kinds.POD, pod(activeDeadlineSeconds=10), pod(),
     "spec.activeDeadlineSeconds", "must not update from a positive integer to nil value"),
    ("pod-toleration-changed", kinds.POD, pod(tolerations=[{"key": "a", "operator": "Exists"}]),
     pod(tolerations=[{"key": "a", "operator": "Exists", "effect": "NoSchedule"}]),
     "spec.tolerations", "existing toleration can not be modified except its tolerationSeconds"),
    ("pod-gate-added", kinds.POD, pod(schedulingGates=[{"name": "a"}]),
     pod(schedulingGates=[{"name": "a"}, {"name": "b"}]), "spec.schedulingGates[1].name",
     "only deletion is allowed, but found new scheduling gate 'b'"),
    ("pod-gated-node-selector-changed", kinds.POD, pod(schedulingGates=[{"name": "a"}], nodeSelector={"zone": "a"}),
     pod(schedulingGates=[{"name": "a"}], nodeSelector={"zone": "b"}), "spec.nodeSelector",
     "only additions to spec.nodeSelector are allowed"),
    ("deploy-selector", kinds.DEPLOYMENT, deployment(),
     changed(deployment(), spec__selector__matchLabels__tier="front"), "spec.selector", "field is immutable"),
    ("rs-selector", kinds.REPLICASET, replica_set(),
     changed(replica_set(), spec__selector__matchLabels__tier="front"), "spec.selector", "field is immutable"),
    ("ds-selector", kinds.DAEMONSET, daemon_set(),
     changed(daemon_set(), spec__selector__matchLabels__tier="front"), "spec.selector", "field is immutable"),
    ("pc-value", kinds.PRIORITYCLASS, priority_class(), changed(priority_class(), value=2000), "value",
     "Forbidden: may not be changed in an update."),
    ("pc-preemption", kinds.PRIORITYCLASS, priority_class(), changed(priority_class(), preemptionPolicy="Never"),
     "preemptionPolicy", "field is immutable"),
    ("rc-handler", kinds.RUNTIMECLASS, runtime_class(), changed(runtime_class(), handler="runc"), "handler",
     "field is immutable"),
    ("cm-immutable-data", kinds.CONFIGMAP, changed(configmap(), immutable=True),
     changed(configmap(), immutable=True, data={"k": "v"}), "data", "field is immutable when `immutable` is set"),
    ("node-provider-id", kinds.NODE, changed(node(), spec__providerID="kemu://a"),
     changed(node(), spec__providerID="kemu://b"), "spec.providerID", "may not change providerID"),
]


@pytest.mark.parametrize(("kind", "old", "new", "field", "fragment"), [c[1:] for c in UPDATE_BAD],
                         ids=[c[0] for c in UPDATE_BAD])
def test_forbidden_updates_are_rejected(kind: Kind, old: dict[str, Any], new: dict[str, Any], field: str,
                                        fragment: str) -> None:
    exc = rejected(kind, new, old)
    assert exc.code == 422
    assert cause_at(exc, field, fragment).reason.startswith("FieldValue")


def test_malformed_update_is_rejected_not_crashing() -> None:
    new = changed(pod(), spec__containers={"app": {}}, spec__nodeSelector=["zone"], spec__schedulingGates=[])
    exc = rejected(kinds.POD, new, pod(schedulingGates=[{"name": "a"}], nodeSelector={"zone": "a"}))
    assert "spec.containers" in fields(exc)
    assert "spec.nodeSelector" in fields(exc)


def test_init_container_host_ports_are_checked_per_container() -> None:
    shared = [{"containerPort": 80, "hostPort": 80}]
    ok = pod(initContainers=[container("init-a", ports=shared), container("init-b", ports=shared)])
    assert validate(kinds.POD, ok) is None
    bad = pod(initContainers=[container("init-a"), container("init-b", ports=shared * 2)])
    assert "spec.initContainers[1].ports[1].hostPort" in fields(rejected(kinds.POD, bad))


def test_update_still_validates_the_new_object() -> None:
    new = changed(pod(), spec__containers__0__image="")
    assert "spec.containers[0].image" in fields(rejected(kinds.POD, new, pod()))


# ------------------------------------------------------------------------------ helpers and registry


def test_the_briefed_kinds_have_validators() -> None:
    briefed = [kinds.POD, kinds.NODE, kinds.NAMESPACE, kinds.PRIORITYCLASS, kinds.LIMITRANGE, kinds.RUNTIMECLASS,
               kinds.PDB, kinds.DEPLOYMENT, kinds.REPLICASET, kinds.DAEMONSET, kinds.EVENT, kinds.CONFIGMAP,
               kinds.LEASE]
    assert {k.resource for k in briefed} <= set(VALIDATORS)


def test_unknown_resource_gets_object_meta_validation_only() -> None:
    widget = Kind("example.com", "v1", "Widget", "widgets", True)
    assert validate(widget, {"metadata": {"name": "w", "namespace": "default"}, "spec": {"anything": -1}}) is None
    exc = rejected(widget, {"metadata": {"name": "W", "namespace": "default"}})
    assert fields(exc) == ["metadata.name"]
    assert exc.group == "example.com"


@pytest.mark.parametrize(("value", "non_negative", "message"), [
    ("100m", True, None),
    (2, True, None),
    ("-1", False, None),
    ("-1", True, 'Invalid value: "-1": must be greater than or equal to 0'),
    ("12xyz", True, "quantities must match the regular expression"),
    (True, True, "a quantity must be a string or a number"),
    # quantity.go ParseQuantity accepts any exponent that strconv.ParseInt(..., 10, 64) reads (suffix.go
    # interpret); kemu refuses values whose nanounits have over 1000 digits: value < 10**(1000 - 9).
    ("1e1000", True, "must be less than 1e992"),
    ("-1e1000", False, "must be less than 1e992"),
    ("1e2147483647", True, "must be less than 1e992"),
    ("1e992", True, "must be less than 1e992"),
    ("9.99e991", True, None),
    ("1e9223372036854775808", True, "unable to parse quantity's suffix"),  # past int64: ErrSuffix
    ("99999999999999999999999Ei", True, None),  # BinarySI: capped at 2^63-1 (maxAllowed), not refused
    ("1e-1000", True, None),  # rounded up to 1n
    (1e308, True, None),
], ids=["milli", "int", "negative-allowed", "negative", "garbage", "bool", "1e1000", "minus-1e1000",
        "max-int32-exponent", "bound", "under-bound", "exponent-past-int64", "binary-capped", "tiny", "float-max"])
def test_validate_quantity(value: Any, non_negative: bool, message: str | None) -> None:
    causes: list[Cause] = []
    q = validate_quantity(value, "spec.x", causes, non_negative=non_negative)
    if message is None:
        assert causes == []
        assert q is not None
    else:
        assert [c.field for c in causes] == ["spec.x"]
        assert message in causes[0].message


@pytest.mark.parametrize(("value", "errors"), [
    ("my-name", 0), ("a" * 63, 0), ("a" * 64, 1), ("a.b", 1), ("-a", 1), ("", 1),
], ids=["ok", "max-length", "too-long", "dots", "leading-dash", "empty"])
def test_dns1123_label(value: str, errors: int) -> None:
    assert len(validation.dns1123_label_errors(value)) == errors


@pytest.mark.parametrize(("value", "errors"), [
    ("app", 0), ("example.com/app", 0), ("App_1.x", 0), ("/app", 1), ("a/b/c", 1), ("example.com/", 2),
    ("a" * 64, 1), ("-app", 1),
], ids=["plain", "prefixed", "mixed-case", "empty-prefix", "two-slashes", "empty-name", "too-long", "leading-dash"])
def test_qualified_name(value: str, errors: int) -> None:
    assert len(validation.qualified_name_errors(value)) == errors
