"""RBAC validation: ``pkg/apis/rbac/validation/validation.go``.

Roles and ClusterRoles: every rule names verbs; a rule is either a resource
rule (apiGroups and resources required) or a non-resource rule (URLs only,
and only in a ClusterRole). Bindings: ``roleRef`` names a Role or ClusterRole
of ``rbac.authorization.k8s.io`` (a ClusterRoleBinding only a ClusterRole) and
cannot change; each subject is a User, Group (``rbac.authorization.k8s.io``)
or ServiceAccount (core group, namespace required in a ClusterRoleBinding).
"""

from __future__ import annotations

from typing import Any

from emulator.api.errors import Cause
from emulator.api.names import dns1123_subdomain_errors
from emulator.api.types import Obj
from emulator.server.validation.field import check_label_selector, dict_at, invalid, list_at, not_supported, required
from emulator.server.validation.objectmeta import path_segment_name_errors
from emulator.server.validation.registry import register

GROUP = "rbac.authorization.k8s.io"


def _check_rules(causes: list[Cause], rules: Any, namespaced: bool) -> None:
    for i, raw in enumerate(list_at(causes, "rules", rules)):
        path = f"rules[{i}]"
        rule = dict_at(causes, path, raw)
        if not rule.get("verbs"):
            required(causes, f"{path}.verbs", "verbs must contain at least one value")
        urls = rule.get("nonResourceURLs") or []
        if urls:
            if namespaced:
                invalid(causes, f"{path}.nonResourceURLs", urls, "namespaced rules cannot apply to non-resource URLs")
            if rule.get("apiGroups") or rule.get("resources") or rule.get("resourceNames"):
                invalid(causes, f"{path}.nonResourceURLs", urls,
                        "rules cannot apply to both regular resources and non-resource URLs")
            continue
        if not rule.get("apiGroups"):
            required(causes, f"{path}.apiGroups", "resource rules must supply at least one api group")
        if not rule.get("resources"):
            required(causes, f"{path}.resources", "resource rules must supply at least one resource")


@register("roles.rbac.authorization.k8s.io")
def _validate_role(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    _check_rules(causes, obj.get("rules"), namespaced=True)


@register("clusterroles.rbac.authorization.k8s.io")
def _validate_cluster_role(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    _check_rules(causes, obj.get("rules"), namespaced=False)
    agg = obj.get("aggregationRule")
    if agg is not None:
        agg = dict_at(causes, "aggregationRule", agg)
        selectors = list_at(causes, "aggregationRule.clusterRoleSelectors", agg.get("clusterRoleSelectors"))
        if not selectors:
            required(causes, "aggregationRule.clusterRoleSelectors",
                     "at least one clusterRoleSelector required if aggregationRule is non-nil")
        for i, sel in enumerate(selectors):
            check_label_selector(causes, f"aggregationRule.clusterRoleSelectors[{i}]", sel)


def _check_subject(causes: list[Cause], path: str, s: Any, namespaced: bool) -> None:
    s = dict_at(causes, path, s)
    name = s.get("name") or ""
    if not name:
        required(causes, f"{path}.name", "")
    kind = s.get("kind")
    api_group = s.get("apiGroup") or ""
    if kind == "ServiceAccount":
        if name:
            for msg in dns1123_subdomain_errors(str(name)):
                invalid(causes, f"{path}.name", name, msg)
        if api_group:
            not_supported(causes, f"{path}.apiGroup", api_group, [""])
        if not namespaced and not s.get("namespace"):
            required(causes, f"{path}.namespace", "")
    elif kind in ("User", "Group"):
        if api_group != GROUP:
            not_supported(causes, f"{path}.apiGroup", api_group, [GROUP])
    else:
        not_supported(causes, f"{path}.kind", kind, ["ServiceAccount", "User", "Group"])


def _check_binding(causes: list[Cause], obj: Obj, old: Obj | None, namespaced: bool) -> None:
    ref = dict_at(causes, "roleRef", obj.get("roleRef"))
    if ref.get("apiGroup") != GROUP:
        not_supported(causes, "roleRef.apiGroup", ref.get("apiGroup") or "", [GROUP])
    kinds = ["Role", "ClusterRole"] if namespaced else ["ClusterRole"]
    if ref.get("kind") not in kinds:
        not_supported(causes, "roleRef.kind", ref.get("kind") or "", kinds)
    name = ref.get("name") or ""
    if not name:
        required(causes, "roleRef.name", "")
    else:
        for msg in path_segment_name_errors(str(name)):
            invalid(causes, "roleRef.name", name, msg)
    for i, s in enumerate(list_at(causes, "subjects", obj.get("subjects"))):
        _check_subject(causes, f"subjects[{i}]", s, namespaced)
    if old is not None and old.get("roleRef") != obj.get("roleRef"):
        invalid(causes, "roleRef", obj.get("roleRef"), "cannot change roleRef")


@register("rolebindings.rbac.authorization.k8s.io")
def _validate_role_binding(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    _check_binding(causes, obj, old, namespaced=True)


@register("clusterrolebindings.rbac.authorization.k8s.io")
def _validate_cluster_role_binding(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    _check_binding(causes, obj, old, namespaced=False)
