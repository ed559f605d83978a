"""Kinds are data.

A :class:`Kind` says everything the store, the admission chain and the HTTP
façade need to serve a resource: its group/version/kind, plural and short
names, whether it is namespaced, which subresources it has. Adding a kind to
kemu is one :func:`register` call; nothing else in the store or the API
server switches on kind names.

Behaviour attached to a kind (validation, defaulting, admission, printer
columns) lives in the modules that own that behaviour and is looked up by the
kind's ``plural``/``group`` key, so this module stays a plain table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from emulator.api import errors


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = field(
        default=("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
    )
    # Fields of the object, besides metadata.name/namespace, usable in field selectors.
    selectable_fields: tuple[str, ...] = ()
    # A CustomResourceDefinition upstream (not kube-apiserver's own): served as JSON/YAML only, never protobuf.
    custom_resource: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def resource(self) -> str:
        """``plural`` or ``plural.group``: the store's and the registry's key for this kind."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def singular(self) -> str:
        return self.kind.lower()

    @property
    def has_status(self) -> bool:
        return "status" in self.subresources


_BY_RESOURCE: dict[str, Kind] = {}
_BY_GVK: dict[tuple[str, str, str], Kind] = {}


def register(kind: Kind) -> Kind:
    """Register ``kind``; registering the same resource twice with other data is a bug."""
    existing = _BY_RESOURCE.get(kind.resource)
    if existing is not None and existing != kind:
        raise ValueError(f"kind {kind.resource} registered twice with different data")
    _BY_RESOURCE[kind.resource] = kind
    _BY_GVK[(kind.group, kind.version, kind.kind)] = kind
    return kind


def all_kinds() -> list[Kind]:
    """The stored version of every resource."""
    return list(_BY_RESOURCE.values())


# Further versions a resource is served in (upstream: one storage version, several served
# versions, converted at the API boundary). Each is a Kind that differs only in ``version``;
# the converters turn a body of that version into the storage version's shape and back.
_ALTERNATES: dict[tuple[str, str, str], Kind] = {}
_STORAGE_OF: dict[Kind, Kind] = {}
_CONVERTERS: dict[Kind, tuple[Callable[[dict[str, Any]], dict[str, Any]], Callable[[dict[str, Any]], dict[str, Any]]]] \
    = {}


def register_version(storage: Kind, version: str, to_storage: Callable[[dict[str, Any]], dict[str, Any]],
                     from_storage: Callable[[dict[str, Any]], dict[str, Any]]) -> Kind:
    """Serve ``storage`` also as ``version``, converting bodies with the two functions."""
    alt = replace(storage, version=version)
    _ALTERNATES[(storage.group, version, storage.plural)] = alt
    _BY_GVK[(storage.group, version, storage.kind)] = alt
    _STORAGE_OF[alt] = storage
    _CONVERTERS[alt] = (to_storage, from_storage)
    return alt


def served_kinds() -> list[Kind]:
    """Every served (group, version, resource): stored versions first, so they are the preferred ones."""
    return [*_BY_RESOURCE.values(), *_ALTERNATES.values()]


def served(group: str, version: str, plural: str) -> Kind | None:
    """The kind serving ``plural`` in ``group/version`` (None: not served)."""
    kind = _BY_RESOURCE.get(f"{plural}.{group}" if group else plural)
    if kind is not None and kind.version == version:
        return kind
    return _ALTERNATES.get((group, version, plural))


def storage_version(kind: Kind) -> Kind:
    """The stored kind of a served one (itself when it is the stored version)."""
    return _STORAGE_OF.get(kind, kind)


def converters(kind: Kind) -> tuple[Callable[[dict[str, Any]], dict[str, Any]],
                                    Callable[[dict[str, Any]], dict[str, Any]]]:
    """(to storage, from storage) for an alternate version."""
    return _CONVERTERS[kind]


def by_resource(resource: str) -> Kind:
    """Look up by ``plural`` (core) or ``plural.group``; 404 NotFound for unknown resources."""
    try:
        return _BY_RESOURCE[resource]
    except KeyError:
        msg = f'the server could not find the requested resource "{resource}"'
        raise errors.StatusError(404, "NotFound", msg) from None


def by_group_plural(group: str, plural: str) -> Kind:
    return by_resource(f"{plural}.{group}" if group else plural)


def by_api_version_kind(api_version: str, kind: str) -> Kind:
    group, _, version = api_version.rpartition("/")
    try:
        return _BY_GVK[(group, version, kind)]
    except KeyError:
        raise errors.bad_request(f'no kind "{kind}" is registered for version "{api_version}"') from None


_POD_FIELDS = ("spec.nodeName", "spec.schedulerName", "status.phase", "spec.restartPolicy", "status.podIP")

NAMESPACE = register(Kind("", "v1", "Namespace", "namespaces", False, ("status", "finalize"), ("ns",),
                          selectable_fields=("status.phase",)))
NODE = register(Kind("", "v1", "Node", "nodes", False, ("status", "proxy"), ("no",),
                     selectable_fields=("spec.unschedulable",)))
# exec/attach/portforward/proxy are routed so they answer "not emulated" instead of 404.
POD = register(Kind("", "v1", "Pod", "pods", True, ("status", "binding", "eviction", "log", "exec", "attach",
                                                   "portforward", "proxy"), ("po",), ("all",),
                    selectable_fields=_POD_FIELDS))
EVENT = register(Kind("", "v1", "Event", "events", True, (), ("ev",),
                      selectable_fields=("involvedObject.kind", "involvedObject.name", "involvedObject.namespace",
                                         "involvedObject.uid", "reason", "type", "source")))
CONFIGMAP = register(Kind("", "v1", "ConfigMap", "configmaps", True, (), ("cm",)))
LIMITRANGE = register(Kind("", "v1", "LimitRange", "limitranges", True, (), ("limits",)))
LEASE = register(Kind("coordination.k8s.io", "v1", "Lease", "leases", True))
PRIORITYCLASS = register(Kind("scheduling.k8s.io", "v1", "PriorityClass", "priorityclasses", False, (), ("pc",)))
PDB = register(Kind("policy", "v1", "PodDisruptionBudget", "poddisruptionbudgets", True, ("status",), ("pdb",)))
DEPLOYMENT = register(Kind("apps", "v1", "Deployment", "deployments", True, ("status", "scale"), ("deploy",), ("all",)))
REPLICASET = register(Kind("apps", "v1", "ReplicaSet", "replicasets", True, ("status", "scale"), ("rs",), ("all",)))
DAEMONSET = register(Kind("apps", "v1", "DaemonSet", "daemonsets", True, ("status",), ("ds",), ("all",)))
RUNTIMECLASS = register(Kind("node.k8s.io", "v1", "RuntimeClass", "runtimeclasses", False))
PERSISTENTVOLUME = register(Kind("", "v1", "PersistentVolume", "persistentvolumes", False, ("status",), ("pv",)))
PERSISTENTVOLUMECLAIM = register(Kind("", "v1", "PersistentVolumeClaim", "persistentvolumeclaims", True, ("status",),
                                      ("pvc",)))
STORAGECLASS = register(Kind("storage.k8s.io", "v1", "StorageClass", "storageclasses", False, (), ("sc",)))
JOB = register(Kind("batch", "v1", "Job", "jobs", True, ("status",), (), ("all",)))
SECRET = register(Kind("", "v1", "Secret", "secrets", True, selectable_fields=("type",)))
SERVICEACCOUNT = register(Kind("", "v1", "ServiceAccount", "serviceaccounts", True, (), ("sa",)))
SERVICE = register(Kind("", "v1", "Service", "services", True, ("status", "proxy"), ("svc",), ("all",)))
ENDPOINTS = register(Kind("", "v1", "Endpoints", "endpoints", True, (), ("ep",)))
ENDPOINTSLICE = register(Kind("discovery.k8s.io", "v1", "EndpointSlice", "endpointslices", True))
STATEFULSET = register(Kind("apps", "v1", "StatefulSet", "statefulsets", True, ("status", "scale"), ("sts",), ("all",)))
CONTROLLERREVISION = register(Kind("apps", "v1", "ControllerRevision", "controllerrevisions", True))
CRONJOB = register(Kind("batch", "v1", "CronJob", "cronjobs", True, ("status",), ("cj",), ("all",)))
RESOURCEQUOTA = register(Kind("", "v1", "ResourceQuota", "resourcequotas", True, ("status",), ("quota",)))
HORIZONTALPODAUTOSCALER = register(Kind("autoscaling", "v2", "HorizontalPodAutoscaler", "horizontalpodautoscalers",
                                        True, ("status",), ("hpa",), ("all",)))


def _hpa_v1() -> Kind:
    from emulator.api import autoscaling_v1  # the converters import nothing of this module

    return register_version(HORIZONTALPODAUTOSCALER, "v1", autoscaling_v1.to_v2, autoscaling_v1.to_v1)


HORIZONTALPODAUTOSCALER_V1 = _hpa_v1()
# A custom resource upstream (kubernetes/autoscaler's CRD); kemu serves it like a built-in kind.
VERTICALPODAUTOSCALER = register(Kind("autoscaling.k8s.io", "v1", "VerticalPodAutoscaler", "verticalpodautoscalers",
                                      True, ("status",), ("vpa",), custom_resource=True))

# rbac.authorization.k8s.io/v1 (upstream pkg/apis/rbac): no short names, as upstream.
_RBAC = "rbac.authorization.k8s.io"
ROLE = register(Kind(_RBAC, "v1", "Role", "roles", True))
CLUSTERROLE = register(Kind(_RBAC, "v1", "ClusterRole", "clusterroles", False))
ROLEBINDING = register(Kind(_RBAC, "v1", "RoleBinding", "rolebindings", True))
CLUSTERROLEBINDING = register(Kind(_RBAC, "v1", "ClusterRoleBinding", "clusterrolebindings", False))
# Reviews are create-only and never stored: the API server answers them (emulator.apiserver.reviews).
SELFSUBJECTACCESSREVIEW = register(Kind("authorization.k8s.io", "v1", "SelfSubjectAccessReview",
                                        "selfsubjectaccessreviews", False, verbs=("create",)))
SELFSUBJECTRULESREVIEW = register(Kind("authorization.k8s.io", "v1", "SelfSubjectRulesReview",
                                       "selfsubjectrulesreviews", False, verbs=("create",)))
SUBJECTACCESSREVIEW = register(Kind("authorization.k8s.io", "v1", "SubjectAccessReview", "subjectaccessreviews",
                                    False, verbs=("create",)))
LOCALSUBJECTACCESSREVIEW = register(Kind("authorization.k8s.io", "v1", "LocalSubjectAccessReview",
                                         "localsubjectaccessreviews", True, verbs=("create",)))
SELFSUBJECTREVIEW = register(Kind("authentication.k8s.io", "v1", "SelfSubjectReview", "selfsubjectreviews", False,
                                  verbs=("create",)))
REVIEW_GROUPS = frozenset({"authorization.k8s.io", "authentication.k8s.io"})

# KEDA's custom resources (kedacore/keda config/crd): the operator in emulator/controllers/keda.
SCALEDOBJECT = register(Kind("keda.sh", "v1alpha1", "ScaledObject", "scaledobjects", True, ("status",), ("so",),
                             custom_resource=True))
SCALEDJOB = register(Kind("keda.sh", "v1alpha1", "ScaledJob", "scaledjobs", True, ("status",), ("sj",),
                          custom_resource=True))
TRIGGERAUTHENTICATION = register(Kind("keda.sh", "v1alpha1", "TriggerAuthentication", "triggerauthentications", True,
                                      ("status",), ("ta", "triggerauth"), custom_resource=True))
CLUSTERTRIGGERAUTHENTICATION = register(Kind("keda.sh", "v1alpha1", "ClusterTriggerAuthentication",
                                             "clustertriggerauthentications", False, ("status",),
                                             ("cta", "clustertriggerauth"), custom_resource=True))
