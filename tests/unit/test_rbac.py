"""RBAC rule evaluation, request attributes, the bootstrap policy, OpenAPI schemas and unknown fields.

Expected decisions are upstream's ``RuleAllows`` (``pkg/apis/rbac/v1/evaluation_helpers.go``) and
``RequestInfoFactory.NewRequestInfo`` worked out by hand for each row.
"""

from __future__ import annotations

from typing import Any

import pytest

from emulator.api.kinds import CONFIGMAP, POD, ROLE, VERTICALPODAUTOSCALER
from emulator.apiserver import openapi
from emulator.auth import bootstrap
from emulator.auth.attributes import Attributes, forbidden_message, request_attributes
from emulator.auth.rbac import RBACAuthorizer, RBACIndex, Rule
from emulator.auth.user import ADMIN, authenticated

ALICE = authenticated("alice", ("team-a",))


@pytest.mark.parametrize(("method", "path", "query", "expected"), [
    ("GET", "/api/v1/namespaces/ns/pods", {}, ("list", True, "ns", "", "pods", "", "")),
    ("GET", "/api/v1/namespaces/ns/pods", {"watch": "true"}, ("watch", True, "ns", "", "pods", "", "")),
    ("GET", "/api/v1/watch/namespaces/ns/pods", {}, ("watch", True, "ns", "", "pods", "", "")),
    ("GET", "/api/v1/namespaces/ns/pods", {"fieldSelector": "metadata.name=web"},
     ("list", True, "ns", "", "pods", "", "web")),
    ("GET", "/api/v1/namespaces/ns/pods/web/log", {}, ("get", True, "ns", "", "pods", "log", "web")),
    ("POST", "/api/v1/namespaces/ns/pods/web/exec", {}, ("create", True, "ns", "", "pods", "exec", "web")),
    ("DELETE", "/apis/apps/v1/namespaces/ns/deployments", {}, ("deletecollection", True, "ns", "apps",
                                                               "deployments", "", "")),
    ("PUT", "/api/v1/namespaces/ns/status", {}, ("update", True, "ns", "", "namespaces", "status", "ns")),
    ("GET", "/api/v1/namespaces/ns", {}, ("get", True, "ns", "", "namespaces", "", "ns")),
    ("GET", "/api/v1/nodes", {}, ("list", True, "", "", "nodes", "", "")),
    ("GET", "/apis/apps/v1", {}, ("get", False, "", "", "", "", "")),
    ("GET", "/api", {}, ("get", False, "", "", "", "", "")),
    ("HEAD", "/healthz", {}, ("get", False, "", "", "", "", "")),
], ids=["list", "watch-param", "watch-prefix", "field-selector-name", "subresource", "exec", "deletecollection",
        "namespace-status", "namespace-itself", "cluster-list", "group-discovery", "api-root", "health"])
def test_request_attributes(method: str, path: str, query: dict[str, str], expected: tuple[Any, ...]) -> None:
    a = request_attributes(ALICE, method, path, query.get("watch"), query.get("fieldSelector"))
    assert (a.verb, a.resource_request, a.namespace, a.api_group, a.resource, a.subresource, a.name) == expected


def _attrs(verb: str, resource: str = "", sub: str = "", name: str = "", group: str = "", path: str = "",
           namespace: str = "ns") -> Attributes:
    if path:
        return Attributes(ALICE, verb, False, path)
    return Attributes(ALICE, verb, True, "", namespace, group, "v1", resource, sub, name)


@pytest.mark.parametrize(("rule", "attrs", "allowed"), [
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, _attrs("get", "pods"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, _attrs("list", "pods"), False),
    ({"verbs": ["*"], "apiGroups": [""], "resources": ["pods"]}, _attrs("delete", "pods"), True),
    ({"verbs": ["get"], "apiGroups": ["apps"], "resources": ["pods"]}, _attrs("get", "pods"), False),
    ({"verbs": ["get"], "apiGroups": ["*"], "resources": ["deployments"]}, _attrs("get", "deployments",
                                                                               group="apps"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"]}, _attrs("get", "pods", "log"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods/log"]}, _attrs("get", "pods", "log"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["*/log"]}, _attrs("get", "pods", "log"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["*/log"]}, _attrs("get", "pods"), False),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["*"]}, _attrs("get", "pods", "status"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["web"]},
     _attrs("get", "pods", name="web"), True),
    ({"verbs": ["get"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["web"]},
     _attrs("get", "pods", name="db"), False),
    ({"verbs": ["list"], "apiGroups": [""], "resources": ["pods"], "resourceNames": ["web"]},
     _attrs("list", "pods"), False),
    ({"verbs": ["get"], "nonResourceURLs": ["/healthz"]}, _attrs("get", path="/healthz"), True),
    ({"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}, _attrs("get", path="/apis/apps/v1"), True),
    ({"verbs": ["get"], "nonResourceURLs": ["/apis/*"]}, _attrs("get", path="/api"), False),
    ({"verbs": ["get"], "nonResourceURLs": ["*"]}, _attrs("post", path="/x"), False),
    ({"verbs": ["get"], "apiGroups": ["*"], "resources": ["*"]}, _attrs("get", path="/healthz"), False),
], ids=["exact", "other-verb", "verb-star", "other-group", "group-star", "subresource-needs-own-rule",
        "subresource-rule", "star-subresource", "star-subresource-not-parent", "resource-star-covers-subresources",
        "resource-name", "other-resource-name", "names-never-match-collections", "url", "url-prefix",
        "url-prefix-miss", "url-verb", "resource-rule-not-url"])
def test_rule_allows(rule: dict[str, Any], attrs: Attributes, allowed: bool) -> None:
    assert Rule.of(rule).allows(attrs) is allowed


def _binding(kind: str, ns: str | None, name: str, role_kind: str, role: str, subjects: list[dict[str, str]]) -> dict:
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    return {"kind": kind, "metadata": meta, "roleRef": {"kind": role_kind, "name": role}, "subjects": subjects}


def _authorizer() -> RBACAuthorizer:
    roles = [{"metadata": {"name": "cm-reader", "namespace": "team-a"},
              "rules": [{"verbs": ["get"], "apiGroups": [""], "resources": ["configmaps"]}]}]
    extra_view = {"metadata": {"name": "widgets-view", "labels": {bootstrap.AGGREGATE + "view": "true"}},
                  "rules": [{"verbs": ["list"], "apiGroups": ["example.com"], "resources": ["widgets"]}]}
    bindings = [
        _binding("RoleBinding", "team-a", "alice-view", "ClusterRole", "view", [{"kind": "User", "name": "alice"}]),
        _binding("RoleBinding", "team-a", "robots", "Role", "cm-reader",
                 [{"kind": "ServiceAccount", "name": "robot"}]),
        _binding("RoleBinding", "team-b", "team-a-edit", "ClusterRole", "edit", [{"kind": "Group", "name": "team-a"}]),
    ]
    cluster_bindings = [*bootstrap.cluster_role_bindings(),
                        _binding("ClusterRoleBinding", None, "ops", "ClusterRole", "admin",
                                 [{"kind": "ServiceAccount", "name": "ops", "namespace": "kube-system"}])]
    return RBACAuthorizer(RBACIndex(roles, [*bootstrap.cluster_roles(), extra_view], bindings, cluster_bindings))


ROBOT = authenticated("system:serviceaccount:team-a:robot", ("system:serviceaccounts",))
OPS = authenticated("system:serviceaccount:kube-system:ops")


@pytest.mark.parametrize(("user", "method", "path", "allowed"), [
    (ALICE, "GET", "/api/v1/namespaces/team-a/pods", True),
    (ALICE, "POST", "/api/v1/namespaces/team-a/pods", False),
    (ALICE, "GET", "/api/v1/namespaces/team-a/secrets", False),  # view never reads secrets
    (ALICE, "GET", "/apis/example.com/v1/namespaces/team-a/widgets", True),  # aggregated into view
    (ALICE, "POST", "/api/v1/namespaces/team-b/pods", True),  # through her group's edit binding
    (ALICE, "GET", "/api/v1/namespaces/team-b/secrets", True),
    (ALICE, "GET", "/apis/example.com/v1/namespaces/team-b/widgets", True),  # view ⊂ edit, transitively
    (ALICE, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/team-b/rolebindings", False),  # admin only
    (ALICE, "GET", "/api/v1/pods", False),  # cluster-wide list needs a cluster binding
    (ALICE, "GET", "/apis", True),  # system:discovery
    (ALICE, "GET", "/metrics", False),
    (ALICE, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", True),  # system:basic-user
    (ROBOT, "GET", "/api/v1/namespaces/team-a/configmaps/x", True),
    (ROBOT, "GET", "/api/v1/namespaces/team-b/configmaps/x", False),
    (OPS, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/any/rolebindings", True),
    (authenticated("bob"), "GET", "/api/v1/namespaces/team-a/pods", False),
    (ADMIN, "DELETE", "/api/v1/nodes/n1", True),
], ids=["view-list", "view-create", "view-secrets", "aggregated-label", "group-edit", "edit-secrets",
        "aggregation-transitive", "edit-no-rbac", "cluster-list", "discovery", "metrics", "basic-user",
        "sa-default-namespace", "sa-other-namespace", "sa-cluster-binding", "unbound", "system-masters"])
def test_authorizer(user: Any, method: str, path: str, allowed: bool) -> None:
    assert _authorizer().authorize(request_attributes(user, method, path)) is allowed


@pytest.mark.parametrize(("method", "path", "message"), [
    ("GET", "/api/v1/namespaces/team-b/pods", 'User "alice" cannot list resource "pods" in API group "" in the '
                                              'namespace "team-b"'),
    ("GET", "/api/v1/nodes/n1/proxy", 'User "alice" cannot get resource "nodes/proxy" in API group "" at the '
                                      "cluster scope"),
    ("GET", "/metrics", 'User "alice" cannot get path "/metrics"'),
], ids=["namespaced", "cluster-subresource", "path"])
def test_forbidden_message(method: str, path: str, message: str) -> None:
    assert forbidden_message(request_attributes(ALICE, method, path)) == message


def test_openapi_schema_from_the_field_table() -> None:
    defs = openapi.definitions([POD], "#/definitions/")
    pod = defs["io.k8s.api.core.v1.Pod"]
    assert pod["x-kubernetes-group-version-kind"] == [{"group": "", "version": "v1", "kind": "Pod"}]
    assert pod["properties"]["metadata"] == {"$ref": "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
    containers = defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"]
    assert containers == {"type": "array", "items": {"$ref": "#/definitions/io.k8s.api.core.v1.Container"}}
    limits = defs["io.k8s.api.core.v1.ResourceRequirements"]["properties"]["limits"]
    assert limits == {"type": "object",
                      "additionalProperties": {"$ref": "#/definitions/io.k8s.apimachinery.pkg.api.resource.Quantity"}}
    # an inlined message (Probe's ProbeHandler) contributes its fields to the parent
    assert "httpGet" in defs["io.k8s.api.core.v1.Probe"]["properties"]
    role = openapi.definitions([ROLE], "#/definitions/")["io.k8s.api.rbac.v1.Role"]
    assert role["properties"]["rules"]["items"] == {"$ref": "#/definitions/io.k8s.api.rbac.v1.PolicyRule"}
    vpa = openapi.definitions([VERTICALPODAUTOSCALER], "#/definitions/")
    assert vpa["io.k8s.api.autoscaling.v1.VerticalPodAutoscaler"]["x-kubernetes-preserve-unknown-fields"] is True


@pytest.mark.parametrize(("kind", "obj", "unknown"), [
    (CONFIGMAP, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "b"}}, []),
    (CONFIGMAP, {"metadata": {"name": "x", "labelz": {}}, "foo": 1}, ["metadata.labelz", "foo"]),
    (POD, {"spec": {"containers": [{"name": "a"}, {"name": "b", "imag": "x"}],
                    "affinity": {"nodeAffinity": {"required": {}}}}},
     ["spec.containers[1].imag", "spec.affinity.nodeAffinity.required"]),
    (POD, {"spec": {"containers": [{"name": "a", "resources": {"limits": {"cpu": "1", "anything": "2"}},
                                    "livenessProbe": {"httpGet": {"port": 80}, "periodSeconds": 3}}]}}, []),
    (VERTICALPODAUTOSCALER, {"spec": {"whatever": 1}}, []),
], ids=["known", "top-and-metadata", "nested-lists", "maps-and-inlined", "custom-resource-open"])
def test_unknown_fields(kind: Any, obj: dict[str, Any], unknown: list[str]) -> None:
    assert openapi.unknown_fields(kind, obj) == unknown
