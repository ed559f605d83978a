"""A valid manifest of every kind kemu's API server serves: the seeds the API fuzz test mutates.

The kinds a user's charts carry come from ``tests/manifests/`` (the helm-rendered corpus); the
rest are built here, or by :mod:`tests.builders`, in the shapes their own tests use. Each seed is
valid as it stands: ``POST`` it to the collection of its kind and the API server answers 201.
:func:`seeds` raises when a served kind has no seed, so a new kind cannot escape the fuzz test.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from emulator.api import kinds
from emulator.api.kinds import Kind
from tests import builders as b

Obj = dict[str, Any]
MANIFESTS = Path(__file__).parent / "manifests"


def _container(name: str = "app") -> Obj:
    return {"name": name, "image": "registry.k8s.io/pause:3.9",
            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "1", "memory": "128Mi"}}}


def _template(labels: dict[str, str], restart: str = "Always") -> Obj:
    return {"metadata": {"labels": labels}, "spec": {"restartPolicy": restart, "containers": [_container()]}}


def _meta(name: str, **extra: Any) -> Obj:
    return {"name": name, **extra}


def _built() -> list[Obj]:
    """Seeds of the kinds the manifest corpus does not carry."""
    labels = {"app": "fuzz"}
    selector = {"matchLabels": labels}
    rs = b.replica_set("fuzz-rs", labels)
    rs["spec"]["template"] = _template(labels)
    return [
        b.pod("fuzz-pod", containers=[_container(), _container("sidecar")], labels=labels),
        b.node("fuzz-node"),
        {"apiVersion": "v1", "kind": "Event", "metadata": _meta("fuzz.17a8c"),
         "involvedObject": {"kind": "Pod", "name": "fuzz-pod"}, "reason": "Scheduled", "type": "Normal",
         "message": "assigned", "count": 1},
        {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": _meta("fuzz-lease"),
         "spec": {"holderIdentity": "fuzz", "leaseDurationSeconds": 40}},
        b.pdb("fuzz-pdb", labels, 1),
        rs,
        {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": _meta("fuzz-ds"),
         "spec": {"selector": selector, "template": _template(labels),
                  "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}}}},
        b.runtime_class("fuzz-rc", overhead={"cpu": "10m", "memory": "16Mi"}),
        b.persistent_volume("fuzz-pv"),
        b.persistent_volume_claim("fuzz-pvc"),
        b.storage_class("fuzz-sc"),
        {"apiVersion": "batch/v1", "kind": "Job", "metadata": _meta("fuzz-job"),
         "spec": {"completions": 2, "parallelism": 1, "backoffLimit": 3, "template": _template({}, "Never")}},
        {"apiVersion": "v1", "kind": "Endpoints", "metadata": _meta("fuzz-ep"),
         "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"name": "http", "port": 80}]}]},
        {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": _meta("fuzz-eps"),
         "addressType": "IPv4", "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": True}}],
         "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
        {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": _meta("fuzz-cr"),
         "revision": 1, "data": {"spec": {"template": _template(labels)}}},
        {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": _meta("fuzz-hpa"),
         "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                  "minReplicas": 1, "maxReplicas": 5,
                  "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                      "type": "Utilization", "averageUtilization": 60}}},
                              {"type": "Pods", "pods": {"metric": {"name": "qps"}, "target": {
                                  "type": "AverageValue", "averageValue": "10"}}}],
                  "behavior": {"scaleDown": {"stabilizationWindowSeconds": 300, "policies": [
                      {"type": "Pods", "value": 1, "periodSeconds": 60}]}}}},
        {"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": _meta("fuzz-hpa1"),
         "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                  "minReplicas": 1, "maxReplicas": 5, "targetCPUUtilizationPercentage": 70}},
        {"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler", "metadata": _meta("fuzz-vpa"),
         "spec": {"targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                  "updatePolicy": {"updateMode": "Auto", "minReplicas": 1},
                  "resourcePolicy": {"containerPolicies": [{"containerName": "*", "minAllowed": {"cpu": "50m"},
                                                            "maxAllowed": {"cpu": "2", "memory": "1Gi"}}]}}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": _meta("fuzz-reader"),
         "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                   {"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]},
        {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview", "metadata": {},
         "spec": {"resourceAttributes": {"namespace": "default", "verb": "list", "resource": "pods"}}},
        {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview", "metadata": {},
         "spec": {"namespace": "default"}},
        {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview", "metadata": {},
         "spec": {"user": "alice", "groups": ["dev"],
                  "resourceAttributes": {"namespace": "default", "verb": "get", "resource": "pods"}}},
        {"apiVersion": "authorization.k8s.io/v1", "kind": "LocalSubjectAccessReview", "metadata": {},
         "spec": {"user": "alice", "resourceAttributes": {"verb": "get", "resource": "pods"}}},
        {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview", "metadata": {}},
        {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject", "metadata": _meta("fuzz-so"),
         "spec": {"scaleTargetRef": {"name": "web"}, "minReplicaCount": 0, "maxReplicaCount": 10,
                  "pollingInterval": 30, "cooldownPeriod": 300,
                  "triggers": [{"type": "redis", "metadata": {"listName": "q", "listLength": "5"},
                                "authenticationRef": {"name": "fuzz-ta"}},
                               {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}]}},
        {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledJob", "metadata": _meta("fuzz-sj"),
         "spec": {"pollingInterval": 30, "maxReplicaCount": 10, "successfulJobsHistoryLimit": 2,
                  "jobTargetRef": {"backoffLimit": 0, "template": _template({}, "Never")},
                  "triggers": [{"type": "redis", "metadata": {"listName": "q", "listLength": "5"}}]}},
        {"apiVersion": "keda.sh/v1alpha1", "kind": "TriggerAuthentication", "metadata": _meta("fuzz-ta"),
         "spec": {"secretTargetRef": [{"parameter": "password", "name": "creds", "key": "pass"}],
                  "env": [{"parameter": "user", "name": "USER"}]}},
        {"apiVersion": "keda.sh/v1alpha1", "kind": "ClusterTriggerAuthentication", "metadata": _meta("fuzz-cta"),
         "spec": {"secretTargetRef": [{"parameter": "password", "name": "creds", "key": "pass"}]}},
    ]


def _from_manifests() -> list[Obj]:
    docs: list[Obj] = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        docs.extend(d for d in yaml.safe_load_all(path.read_text()) if d)
    return docs


def seeds() -> dict[Kind, Obj]:
    """One valid manifest per served kind (every version), namespace left unset: the caller picks it."""
    out: dict[Kind, Obj] = {}
    for doc in [*_from_manifests(), *_built()]:
        kind = kinds.by_api_version_kind(doc["apiVersion"], doc["kind"])
        if kind in out:
            continue
        body = copy.deepcopy(doc)
        body.get("metadata", {}).pop("namespace", None)
        out[kind] = body
    missing = [f"{k.api_version} {k.kind}" for k in kinds.served_kinds() if k not in out]
    if missing:
        raise LookupError(f"no seed manifest for the served kinds: {', '.join(missing)}")
    return out
