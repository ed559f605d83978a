"""The bootstrap RBAC policy kube-apiserver creates on start.

Upstream: ``plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go``
(``ClusterRoles``, ``ClusterRoleBindings``, the aggregated ``admin``/``edit``/
``view`` roles and their ``system:aggregate-to-*`` parts) and
``controller_policy.go``. kemu creates the roles a user and kemu's own
components need: the user-facing ``cluster-admin``, ``admin``, ``edit``,
``view``; ``system:discovery``, ``system:basic-user`` and
``system:public-info-viewer`` bound to every authenticated user (so kubectl's
discovery, ``auth can-i`` and ``auth whoami`` work for anyone); and the
component roles ``system:kube-scheduler``, ``system:kube-controller-manager``,
``system:node``, ``system:monitoring`` bound to their upstream users/groups.

``admin``/``edit``/``view`` are aggregated as upstream: each carries an
``aggregationRule`` selecting ``rbac.authorization.k8s.io/aggregate-to-<role>:
"true"``, and the ``system:aggregate-to-*`` roles carry the rules (the RBAC
index unions them, see :mod:`emulator.auth.rbac`), so a user's own role with
that label extends ``view`` as on a real cluster. Upstream lists resources kemu
does not serve as well (ingresses, networkpolicies...); they are kept, since
rules on unknown resources are harmless and manifests copy them.
"""

from __future__ import annotations

from emulator.api.types import Obj

READ = ["get", "list", "watch"]
WRITE = ["create", "delete", "deletecollection", "patch", "update"]
ALL_VERBS = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
AGGREGATE = "rbac.authorization.k8s.io/aggregate-to-"
_BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}


def _rule(verbs: list[str], groups: list[str], resources: list[str], names: list[str] | None = None) -> Obj:
    rule: Obj = {"verbs": verbs, "apiGroups": groups, "resources": resources}
    if names:
        rule["resourceNames"] = names
    return rule


def _urls(verbs: list[str], urls: list[str]) -> Obj:
    return {"verbs": verbs, "nonResourceURLs": urls}


def _role(name: str, rules: list[Obj], labels: dict[str, str] | None = None, aggregate_from: str = "") -> Obj:
    role: Obj = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                 "metadata": {"name": name, "labels": {**_BOOTSTRAP_LABELS, **(labels or {})},
                              "annotations": dict(_AUTOUPDATE)},
                 "rules": rules}
    if aggregate_from:
        role["aggregationRule"] = {"clusterRoleSelectors": [{"matchLabels": {AGGREGATE + aggregate_from: "true"}}]}
        role["rules"] = []  # filled by aggregation
    return role


def _binding(name: str, role: str, subjects: list[tuple[str, str]]) -> Obj:
    subs = [{"kind": kind, "apiGroup": "rbac.authorization.k8s.io", "name": n} for kind, n in subjects]
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": dict(_BOOTSTRAP_LABELS), "annotations": dict(_AUTOUPDATE)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": subs}


_VIEW_RULES = [
    _rule(READ, [""], ["configmaps", "endpoints", "persistentvolumeclaims", "persistentvolumeclaims/status", "pods",
                       "replicationcontrollers", "replicationcontrollers/scale", "serviceaccounts", "services",
                       "services/status"]),
    _rule(READ, [""], ["bindings", "events", "limitranges", "namespaces/status", "pods/log", "pods/status",
                       "replicationcontrollers/status", "resourcequotas", "resourcequotas/status"]),
    _rule(READ, [""], ["namespaces"]),
    _rule(READ, ["discovery.k8s.io"], ["endpointslices"]),
    _rule(READ, ["apps"], ["controllerrevisions", "daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                           "deployments/status", "replicasets", "replicasets/scale", "replicasets/status",
                           "statefulsets", "statefulsets/scale", "statefulsets/status"]),
    _rule(READ, ["autoscaling"], ["horizontalpodautoscalers", "horizontalpodautoscalers/status"]),
    _rule(READ, ["batch"], ["cronjobs", "cronjobs/status", "jobs", "jobs/status"]),
    _rule(READ, ["extensions"], ["daemonsets", "daemonsets/status", "deployments", "deployments/scale",
                                 "deployments/status", "ingresses", "ingresses/status", "networkpolicies",
                                 "replicasets", "replicasets/scale", "replicasets/status",
                                 "replicationcontrollers/scale"]),
    _rule(READ, ["policy"], ["poddisruptionbudgets", "poddisruptionbudgets/status"]),
    _rule(READ, ["networking.k8s.io"], ["ingresses", "ingresses/status", "networkpolicies"]),
    # kemu: the VPA is served as a built-in kind; upstream's VPA chart grants this through aggregate-to-view too.
    _rule(READ, ["autoscaling.k8s.io"], ["verticalpodautoscalers"]),
]

_EDIT_RULES = [
    _rule(["impersonate"], [""], ["serviceaccounts"]),
    _rule(WRITE, [""], ["pods", "pods/attach", "pods/exec", "pods/portforward", "pods/proxy"]),
    _rule(["create"], [""], ["pods/eviction"]),
    _rule(WRITE, [""], ["configmaps", "events", "persistentvolumeclaims", "replicationcontrollers",
                        "replicationcontrollers/scale", "secrets", "serviceaccounts", "services", "services/proxy"]),
    _rule(["create"], [""], ["serviceaccounts/token"]),
    _rule(WRITE, ["apps"], ["daemonsets", "deployments", "deployments/rollback", "deployments/scale", "replicasets",
                            "replicasets/scale", "statefulsets", "statefulsets/scale"]),
    _rule(WRITE, ["autoscaling"], ["horizontalpodautoscalers"]),
    _rule(WRITE, ["batch"], ["cronjobs", "jobs"]),
    _rule(WRITE, ["extensions"], ["daemonsets", "deployments", "deployments/rollback", "deployments/scale",
                                  "ingresses", "networkpolicies", "replicasets", "replicasets/scale",
                                  "replicationcontrollers/scale"]),
    _rule(WRITE, ["policy"], ["poddisruptionbudgets"]),
    _rule(WRITE, ["networking.k8s.io"], ["ingresses", "networkpolicies"]),
    _rule(ALL_VERBS, ["coordination.k8s.io"], ["leases"]),
    _rule(WRITE, ["autoscaling.k8s.io"], ["verticalpodautoscalers"]),
    # Read access edit has beyond view (upstream's "secrets and the exec-like subresources").
    _rule(READ, [""], ["pods/attach", "pods/exec", "pods/portforward", "pods/proxy", "secrets", "services/proxy"]),
]

_ADMIN_RULES = [
    _rule(["create"], ["authorization.k8s.io"], ["localsubjectaccessreviews"]),
    _rule(ALL_VERBS, ["rbac.authorization.k8s.io"], ["rolebindings", "roles"]),
]

_DISCOVERY_URLS = ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz",
                   "/version", "/version/"]


def cluster_roles() -> list[Obj]:
    return [
        _role("cluster-admin", [_rule(["*"], ["*"], ["*"]), _urls(["*"], ["*"])]),
        _role("admin", [], aggregate_from="admin"),
        _role("edit", [], {AGGREGATE + "admin": "true"}, aggregate_from="edit"),
        _role("view", [], {AGGREGATE + "edit": "true"}, aggregate_from="view"),
        _role("system:aggregate-to-admin", _ADMIN_RULES, {AGGREGATE + "admin": "true"}),
        _role("system:aggregate-to-edit", _EDIT_RULES, {AGGREGATE + "edit": "true"}),
        _role("system:aggregate-to-view", _VIEW_RULES, {AGGREGATE + "view": "true"}),
        _role("system:discovery", [_urls(["get"], _DISCOVERY_URLS)]),
        _role("system:public-info-viewer", [_urls(["get"], ["/healthz", "/livez", "/readyz", "/version",
                                                            "/version/"])]),
        _role("system:basic-user", [
            _rule(["create"], ["authorization.k8s.io"], ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]),
            _rule(["create"], ["authentication.k8s.io"], ["selfsubjectreviews"])]),
        _role("system:monitoring", [_urls(["get"], ["/healthz", "/healthz/*", "/livez", "/livez/*", "/metrics",
                                                    "/metrics/slis", "/readyz", "/readyz/*"])]),
        _role("system:kube-scheduler", [
            _rule(["create", "patch", "update"], ["", "events.k8s.io"], ["events"]),
            _rule(["create"], ["coordination.k8s.io"], ["leases"]),
            _rule(["get", "update"], ["coordination.k8s.io"], ["leases"], ["kube-scheduler"]),
            _rule(READ, [""], ["nodes"]),
            _rule(["delete", "get", "list", "watch"], [""], ["pods"]),
            _rule(["create"], [""], ["bindings", "pods/binding"]),
            _rule(["patch", "update"], [""], ["pods/status"]),
            _rule(READ, ["", "apps"], ["replicationcontrollers", "services", "replicasets", "statefulsets"]),
            _rule(READ, ["policy"], ["poddisruptionbudgets"]),
            _rule(READ, ["", "storage.k8s.io"], ["persistentvolumeclaims", "persistentvolumes", "storageclasses",
                                                 "csinodes", "csidrivers", "csistoragecapacities"]),
            _rule(READ, [""], ["namespaces"]),
            _rule(READ, ["scheduling.k8s.io"], ["priorityclasses"]),
            _rule(["create"], ["authentication.k8s.io"], ["tokenreviews"]),
            _rule(["create"], ["authorization.k8s.io"], ["subjectaccessreviews"])]),
        _role("system:kube-controller-manager", [
            _rule(["create", "patch", "update"], ["", "events.k8s.io"], ["events"]),
            _rule(["create"], ["coordination.k8s.io"], ["leases"]),
            _rule(["get", "update"], ["coordination.k8s.io"], ["leases"], ["kube-controller-manager"]),
            # Upstream gives the manager read access to everything and each controller its own service account;
            # kemu's controllers share one identity, so it holds the union of their rights.
            _rule(["*"], ["*"], ["*"]),
            _urls(["get"], ["/healthz", "/livez", "/readyz"])]),
        _role("system:node", [
            _rule(["create", "get", "list", "watch", "update", "patch", "delete"], [""], ["nodes", "nodes/status"]),
            _rule(READ, [""], ["pods", "services", "configmaps", "secrets", "persistentvolumeclaims",
                               "persistentvolumes", "endpoints"]),
            _rule(["create", "delete"], [""], ["pods"]),
            _rule(["patch", "update"], [""], ["pods/status"]),
            _rule(["create"], [""], ["pods/eviction"]),
            _rule(["create", "patch", "update"], ["", "events.k8s.io"], ["events"]),
            _rule(ALL_VERBS, ["coordination.k8s.io"], ["leases"]),
            _rule(READ, ["node.k8s.io"], ["runtimeclasses"])]),
    ]


def cluster_role_bindings() -> list[Obj]:
    return [
        _binding("cluster-admin", "cluster-admin", [("Group", "system:masters")]),
        _binding("system:discovery", "system:discovery", [("Group", "system:authenticated")]),
        _binding("system:basic-user", "system:basic-user", [("Group", "system:authenticated")]),
        _binding("system:public-info-viewer", "system:public-info-viewer",
                 [("Group", "system:authenticated"), ("Group", "system:unauthenticated")]),
        _binding("system:monitoring", "system:monitoring", [("Group", "system:monitoring")]),
        _binding("system:kube-scheduler", "system:kube-scheduler", [("User", "system:kube-scheduler")]),
        _binding("system:kube-controller-manager", "system:kube-controller-manager",
                 [("User", "system:kube-controller-manager")]),
        _binding("system:node", "system:node", [("Group", "system:nodes")]),
    ]
