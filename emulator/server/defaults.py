"""Defaulting on create, as the kube-apiserver's scheme defaulters do.

Upstream applies defaults when an object is decoded (``pkg/apis/*/v1/defaults.go``)
and fills server-owned metadata in the registry strategies
(``staging/src/k8s.io/apiserver/pkg/registry/rest/create.go``). Here both are
plain functions over the object's JSON shape, looked up by resource in
:data:`DEFAULTERS`, so a new kind adds one entry. They mutate in place: the
core hands them a private copy of the request body.
"""

from __future__ import annotations

import base64
import os
import secrets
from collections.abc import Callable
from typing import Any

from emulator.api import errors
from emulator.api.kinds import Kind
from emulator.api.types import Obj
from emulator.clock import rfc3339

# RFC 4122 variant bits (10xx) over a random hex digit: the first digit of a v4 UUID's fourth group.
_VARIANT_DIGIT = {d: "89ab"[int(d, 16) & 3] for d in "0123456789abcdef"}


def new_uid() -> str:
    """A random (version 4) UUID string, as ``str(uuid.uuid4())`` - upstream's ``uuid.NewUUID`` for
    ``metadata.uid`` - formatted straight from the random bytes: a third of the cost, and every
    object and Event created pays it."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{_VARIANT_DIGIT[h[16]]}{h[17:20]}-{h[20:]}"


# Upstream's name generator alphabet (no vowels, no confusable characters): names.SimpleNameGenerator.
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def default_metadata(kind: Kind, obj: Obj, now: float) -> None:
    """Server-owned metadata of a new object: uid, creationTimestamp, generation, namespace, generated name."""
    meta = obj.setdefault("metadata", {})
    if kind.namespaced and not meta.get("namespace"):
        meta["namespace"] = "default"
    if not meta.get("name") and meta.get("generateName"):
        meta["name"] = meta["generateName"] + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
    meta["uid"] = new_uid()
    meta["creationTimestamp"] = rfc3339(now)
    meta["generation"] = 1
    for server_owned in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"):
        meta.pop(server_owned, None)
    obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind


def _default_container(c: Obj) -> None:
    image = c.get("image") or ""
    if "imagePullPolicy" not in c:
        # pkg/apis/core/v1/defaults.go SetDefaults_Container: ":latest" or no tag pulls Always.
        tagless = ":" not in image.rsplit("/", 1)[-1] and "@" not in image
        c["imagePullPolicy"] = "Always" if tagless or image.endswith(":latest") else "IfNotPresent"
    c.setdefault("terminationMessagePath", "/dev/termination-log")
    c.setdefault("terminationMessagePolicy", "File")
    res = c.setdefault("resources", {})
    limits = res.get("limits") or {}
    if limits:
        # SetDefaults_ResourceRequirements: a limit without a request makes the request equal to it.
        requests = res.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)
    for port in c.get("ports") or []:
        port.setdefault("protocol", "TCP")


def default_pod_spec(spec: Obj) -> None:
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for c in spec.get("initContainers") or []:
        _default_container(c)
    for c in spec.get("containers") or []:
        _default_container(c)
    for t in spec.get("tolerations") or []:
        if t.get("operator") is None and "value" in t:
            t["operator"] = "Equal"


def _pod(obj: Obj) -> None:
    default_pod_spec(obj.setdefault("spec", {}))
    status = obj.setdefault("status", {})
    status.setdefault("phase", "Pending")


def _namespace(obj: Obj) -> None:
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    obj.setdefault("status", {}).setdefault("phase", "Active")


def _priority_class(obj: Obj) -> None:
    obj.setdefault("preemptionPolicy", "PreemptLowerPriority")
    obj.setdefault("globalDefault", False)


def _limit_range(obj: Obj) -> None:
    # pkg/apis/core/v1/defaults.go SetDefaults_LimitRangeItem: for containers a max implies the
    # default limit, and a default limit (or a min) implies the default request.
    for item in (obj.get("spec") or {}).get("limits") or []:
        if item.get("type") != "Container":
            continue
        default = item.setdefault("default", {})
        for name, value in (item.get("max") or {}).items():
            default.setdefault(name, value)
        request = item.setdefault("defaultRequest", {})
        for name, value in default.items():
            request.setdefault(name, value)
        for name, value in (item.get("min") or {}).items():
            request.setdefault(name, value)
        if not default:
            item.pop("default")
        if not request:
            item.pop("defaultRequest")


def _template(obj: Obj) -> None:
    default_pod_spec(obj.setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {}))


def _deployment(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    strategy = spec.setdefault("strategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        ru = strategy.setdefault("rollingUpdate", {})
        ru.setdefault("maxSurge", "25%")
        ru.setdefault("maxUnavailable", "25%")
    spec.setdefault("revisionHistoryLimit", 10)
    spec.setdefault("progressDeadlineSeconds", 600)
    _template(obj)


def _replica_set(obj: Obj) -> None:
    obj.setdefault("spec", {}).setdefault("replicas", 1)
    _template(obj)


def _daemon_set(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    strategy = spec.setdefault("updateStrategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        strategy.setdefault("rollingUpdate", {}).setdefault("maxUnavailable", 1)
    spec.setdefault("revisionHistoryLimit", 10)
    _template(obj)


def _job(obj: Obj) -> None:
    """batch/v1 defaults and the generated selector (pkg/registry/batch/job/strategy.go ``generateSelector``).

    Without ``manualSelector`` the server selects by the Job's own uid and labels the template
    with ``batch.kubernetes.io/controller-uid`` / ``batch.kubernetes.io/job-name`` and their legacy
    twins ``controller-uid`` / ``job-name``; the uid exists here because metadata is defaulted first.
    """
    spec = obj.setdefault("spec", {})
    spec.setdefault("parallelism", 1)
    spec.setdefault("backoffLimit", 6)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    meta = obj.get("metadata") or {}
    uid, name = meta.get("uid"), meta.get("name")
    if uid and name and not spec.get("manualSelector") and not spec.get("selector"):
        spec["selector"] = {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
        tmeta = spec.setdefault("template", {}).setdefault("metadata", {})
        labels = tmeta.setdefault("labels", {})
        for key, value in (("batch.kubernetes.io/controller-uid", uid), ("batch.kubernetes.io/job-name", name),
                           ("controller-uid", uid), ("job-name", name)):
            labels.setdefault(key, value)
    _template(obj)


def _persistent_volume(obj: Obj) -> None:
    spec = obj.setdefault("spec", {})
    spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
    spec.setdefault("volumeMode", "Filesystem")
    # Upstream defaults the phase to Pending and its PV controller moves it on within a moment; kemu has no
    # PV controller yet, so a new PV starts where that controller would put it: Available, or Bound when
    # it is created pre-bound to a claim.
    obj.setdefault("status", {}).setdefault("phase", "Bound" if spec.get("claimRef") else "Available")


def _persistent_volume_claim(obj: Obj) -> None:
    obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
    obj.setdefault("status", {}).setdefault("phase", "Pending")


def _storage_class(obj: Obj) -> None:
    obj.setdefault("reclaimPolicy", "Delete")
    obj.setdefault("volumeBindingMode", "Immediate")


def _secret(obj: Obj) -> None:
    """``type: Opaque``, and ``stringData`` written into ``data`` base64-encoded (it wins on a shared key).

    Upstream converts core/v1 Secret to the internal type that way
    (``pkg/apis/core/v1/conversion.go`` ``Convert_v1_Secret_To_core_Secret``); stringData is never stored.
    """
    obj.setdefault("type", "Opaque")
    string_data = obj.pop("stringData", None)
    if string_data:
        data = obj.get("data") or {}
        for key, value in string_data.items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        obj["data"] = data


def _service(obj: Obj) -> None:
    """``SetDefaults_Service`` (pkg/apis/core/v1/defaults.go): type, affinity, port protocols and targetPorts."""
    spec = obj.setdefault("spec", {})
    stype = spec.setdefault("type", "ClusterIP")
    if stype != "ExternalName":
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if stype in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if stype == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    if spec.get("sessionAffinity") == "ClientIP":
        spec.setdefault("sessionAffinityConfig", {}).setdefault("clientIP", {}).setdefault("timeoutSeconds", 10800)
    for port in spec.get("ports") or []:
        port.setdefault("protocol", "TCP")
        if port.get("targetPort") in (None, 0, ""):
            port["targetPort"] = port.get("port")
    obj.setdefault("status", {}).setdefault("loadBalancer", {})


def _endpoint_ports(ports: list[Obj] | None) -> None:
    for port in ports or []:
        port.setdefault("protocol", "TCP")


def _endpoints(obj: Obj) -> None:
    for subset in obj.get("subsets") or []:
        _endpoint_ports(subset.get("ports"))


def _endpoint_slice(obj: Obj) -> None:
    """``SetDefaults_EndpointPort`` (pkg/apis/discovery/v1/defaults.go): name "" and protocol TCP."""
    for port in obj.get("ports") or []:
        port.setdefault("name", "")
        port.setdefault("protocol", "TCP")


def _stateful_set(obj: Obj) -> None:
    """``SetDefaults_StatefulSet`` (pkg/apis/apps/v1/defaults.go)."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("replicas", 1)
    spec.setdefault("podManagementPolicy", "OrderedReady")
    strategy = spec.setdefault("updateStrategy", {})
    strategy.setdefault("type", "RollingUpdate")
    if strategy["type"] == "RollingUpdate":
        strategy.setdefault("rollingUpdate", {}).setdefault("partition", 0)
    spec.setdefault("revisionHistoryLimit", 10)
    retention = spec.setdefault("persistentVolumeClaimRetentionPolicy", {})
    retention.setdefault("whenDeleted", "Retain")
    retention.setdefault("whenScaled", "Retain")
    for claim in spec.get("volumeClaimTemplates") or []:
        claim.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")
        claim.setdefault("status", {}).setdefault("phase", "Pending")
    _template(obj)


def _cron_job(obj: Obj) -> None:
    """``SetDefaults_CronJob`` (pkg/apis/batch/v1/defaults.go); the job template's pod spec as any template's."""
    spec = obj.setdefault("spec", {})
    spec.setdefault("concurrencyPolicy", "Allow")
    spec.setdefault("suspend", False)
    spec.setdefault("successfulJobsHistoryLimit", 3)
    spec.setdefault("failedJobsHistoryLimit", 1)
    job_spec = spec.setdefault("jobTemplate", {}).setdefault("spec", {})
    default_pod_spec(job_spec.setdefault("template", {}).setdefault("spec", {}))
# pkg/apis/autoscaling/v2/defaults.go: the scale-up rules (max of 4 pods and 100 % per 15 s, no window)
# and scale-down rules (100 % per 15 s; the window stays unset: the controller's
# --horizontal-pod-autoscaler-downscale-stabilization, 300 s, applies).
_HPA_SCALE_UP_RULES: Obj = {"stabilizationWindowSeconds": 0, "selectPolicy": "Max",
                            "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                         {"type": "Percent", "value": 100, "periodSeconds": 15}]}
_HPA_SCALE_DOWN_RULES: Obj = {"selectPolicy": "Max", "policies": [{"type": "Percent", "value": 100,
                                                                  "periodSeconds": 15}]}
_HPA_DEFAULT_CPU_UTILIZATION = 80  # pkg/apis/autoscaling DefaultCPUUtilization


def _hpa_rules(given: Any, defaults: Obj) -> Obj:
    """``copyHPAScalingRules``: the defaults, overridden by every field the user set."""
    out = {k: ([dict(p) for p in v] if isinstance(v, list) else v) for k, v in defaults.items()}
    if isinstance(given, dict):
        out.update({k: v for k, v in given.items() if v is not None})
    return out


def _horizontal_pod_autoscaler(obj: Obj) -> None:
    """``SetDefaults_HorizontalPodAutoscaler`` (autoscaling/v2)."""
    spec = obj.setdefault("spec", {})
    if spec.get("minReplicas") is None:
        spec["minReplicas"] = 1
    if not spec.get("metrics"):
        spec["metrics"] = [{"type": "Resource", "resource": {"name": "cpu", "target": {
            "type": "Utilization", "averageUtilization": _HPA_DEFAULT_CPU_UTILIZATION}}}]
    behavior = spec.get("behavior")
    if isinstance(behavior, dict):  # only a given behavior is completed (SetDefaults_HorizontalPodAutoscalerBehavior)
        behavior["scaleUp"] = _hpa_rules(behavior.get("scaleUp"), _HPA_SCALE_UP_RULES)
        behavior["scaleDown"] = _hpa_rules(behavior.get("scaleDown"), _HPA_SCALE_DOWN_RULES)


def _rbac_binding(obj: Obj) -> None:
    # pkg/apis/rbac/v1/defaults.go: roleRef and User/Group subjects default to the RBAC group.
    ref = obj.get("roleRef")
    if isinstance(ref, dict) and not ref.get("apiGroup"):
        ref["apiGroup"] = "rbac.authorization.k8s.io"
    for s in obj.get("subjects") or ():
        if isinstance(s, dict) and not s.get("apiGroup") and s.get("kind") in ("User", "Group"):
            s["apiGroup"] = "rbac.authorization.k8s.io"


DEFAULTERS: dict[str, Callable[[Obj], None]] = {
    "pods": _pod,
    "namespaces": _namespace,
    "priorityclasses.scheduling.k8s.io": _priority_class,
    "limitranges": _limit_range,
    "deployments.apps": _deployment,
    "replicasets.apps": _replica_set,
    "daemonsets.apps": _daemon_set,
    "jobs.batch": _job,
    "persistentvolumes": _persistent_volume,
    "persistentvolumeclaims": _persistent_volume_claim,
    "storageclasses.storage.k8s.io": _storage_class,
    "secrets": _secret,
    "services": _service,
    "endpoints": _endpoints,
    "endpointslices.discovery.k8s.io": _endpoint_slice,
    "statefulsets.apps": _stateful_set,
    "cronjobs.batch": _cron_job,
    "horizontalpodautoscalers.autoscaling": _horizontal_pod_autoscaler,
    "rolebindings.rbac.authorization.k8s.io": _rbac_binding,
    "clusterrolebindings.rbac.authorization.k8s.io": _rbac_binding,
}


def apply_defaults(kind: Kind, obj: Obj) -> None:
    """Kind-specific field defaults (create and update alike, as upstream's decode-time defaulting).

    Defaulting runs before validation and relies on the JSON types of the fields it fills;
    a body with ``"spec": "x"`` is one upstream rejects while decoding, with 400, and so do we.
    """
    fn = DEFAULTERS.get(kind.resource)
    if fn is None:
        return
    try:
        fn(obj)
    except (AttributeError, TypeError) as e:
        raise errors.bad_request(f"the object provided is unrecognized (must be of type {kind.kind}): "
                                 f"a field has the wrong JSON type ({e})") from None
