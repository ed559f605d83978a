"""RBAC, users over TLS, access reviews, OpenAPI and field validation: kubectl and the Python client.

One API server serves the module over HTTPS (a CA and certificate from :mod:`emulator.apiserver.tls`);
every test gets an emptied store with the bootstrap objects (the bootstrap RBAC policy among them)
and the users alice (group team-a), bob and carol, each with a pinned token and a kubeconfig context.
Expected 403 messages are upstream's ``forbiddenMessage`` wording written out in the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import orjson
import pytest
from kubernetes.client.rest import ApiException

from emulator.api.kinds import CONFIGMAP, NAMESPACE, PDB, PRIORITYCLASS, ROLEBINDING
from emulator.apiserver import kubeconfig, users
from emulator.apiserver.process import ApiServerProcess
from emulator.apiserver.tls import ensure_certificates
from emulator.server.core import ServerCore
from emulator.store.redis_server import EmbeddedRedis
from emulator.store.store import Store
from tests import kubectl_env
from tests.kubectl_env import running_api
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

ADMIN_TOKEN = "rbac-admin-token"
USERS = {"alice": ("team-a",), "bob": (), "carol": ()}


def token_of(name: str) -> str:
    return f"token-of-{name}"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return ensure_certificates(tmp_path_factory.mktemp("pki"), ["127.0.0.1"])


@pytest.fixture(scope="module")
def server(redis_server: EmbeddedRedis, pki: tuple[Path, Path, Path]) -> Iterator[ApiServerProcess]:
    ca, cert, key = pki
    with running_api(redis_server.url, token=ADMIN_TOKEN, tls_cert_file=str(cert), tls_key_file=str(key),
                     tls_ca_file=str(ca)) as proc:
        yield proc


def bind(core: ServerCore, namespace: str, name: str, role: str, user: str) -> None:
    core.create(ROLEBINDING, {"metadata": {"name": name, "namespace": namespace},
                              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                          "name": role},
                              "subjects": [{"kind": "User", "name": user}]})


@pytest.fixture
def core(redis_url: str, server: ApiServerProcess) -> ServerCore:
    """Bootstrap objects, users, namespaces team-a/team-b; alice views team-a, bob edits it."""
    c = ServerCore(Store.connect(redis_url))
    c.bootstrap()
    for name, groups in USERS.items():
        users.add_user(c.store.redis, "kemu:", users.UserSpec(name, groups, token_of(name)))
    for ns in ("default", "team-a", "team-b"):
        c._ensure(NAMESPACE, {"metadata": {"name": ns}})
    bind(c, "team-a", "alice-view", "view", "alice")
    bind(c, "team-a", "bob-edit", "edit", "bob")
    return c


def client(server: ApiServerProcess, ca: Path, token: str) -> kubernetes.client.CoreV1Api:
    cfg = kubernetes.client.Configuration()
    cfg.host = server.url
    cfg.ssl_ca_cert = str(ca)
    cfg.api_key = {"authorization": f"Bearer {token}"}
    return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(cfg))


def settled(core: ServerCore, server: ApiServerProcess, ca: Path) -> None:
    """Wait until the API server's RBAC index holds this test's bindings (upstream: the informer's lag).

    The index follows the four RBAC streams separately, so both a RoleBinding (bob's edit in team-a)
    and a ClusterRoleBinding (the bootstrap system:basic-user grant every authenticated user has,
    which access reviews need) must be visible.
    """
    bob = client(server, ca, token_of("bob"))
    bob_authz = kubernetes.client.AuthorizationV1Api(bob.api_client)

    def ready() -> bool:
        try:
            bob.list_namespaced_pod("team-a")
            bob_authz.create_self_subject_access_review({"spec": {"resourceAttributes": {"verb": "get",
                                                                                         "resource": "pods"}}})
            return True
        except ApiException as e:
            assert e.status == 403, e.body
            return False

    wait_for(ready, 10.0, "the test's bindings and the bootstrap grants in the API server's RBAC index")


class Kubectl(kubectl_env.Kubectl):
    """kubectl over TLS, as the admin or (``--user``) any of :data:`USERS`."""

    def __init__(self, home: Path, server: ApiServerProcess, ca: Path) -> None:
        super().__init__(home, kubeconfig.write(home / "kubeconfig", server.url, ADMIN_TOKEN, ca_pem=ca.read_bytes(),
                                                users={n: token_of(n) for n in USERS}))


@pytest.fixture
def kubectl(tmp_path: Path, server: ApiServerProcess, core: ServerCore, pki: tuple[Path, Path, Path]) -> Kubectl:
    settled(core, server, pki[0])
    return Kubectl(tmp_path, server, pki[0])


def forbidden(user: str, verb: str, resource: str, namespace: str, group: str = "") -> str:
    """Upstream ``NewForbidden`` around ``forbiddenMessage`` for a namespaced collection request."""
    qualified = f"{resource}.{group}" if group else resource
    return (f'{qualified} is forbidden: User "{user}" cannot {verb} resource "{resource}" in API group "{group}" '
            f'in the namespace "{namespace}"')


# ----------------------------------------------------------------------------- RBAC tables
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"},
       "spec": {"containers": [{"name": "web", "image": "nginx"}]}}


@pytest.mark.parametrize(("user", "verb", "namespace", "allowed"), [
    ("alice", "list", "team-a", True),
    ("alice", "create", "team-a", False),
    ("alice", "list", "team-b", False),
    ("bob", "list", "team-a", True),
    ("bob", "create", "team-a", True),
    ("bob", "create", "team-b", False),
    ("carol", "list", "team-a", False),
], ids=["view-lists-its-namespace", "view-cannot-create", "view-not-in-other-namespace", "edit-lists",
        "edit-creates", "edit-not-in-other-namespace", "unbound-user"])
def test_python_client_rbac_table(core: ServerCore, server: ApiServerProcess, pki: tuple[Path, Path, Path],
                                  user: str, verb: str, namespace: str, allowed: bool) -> None:
    settled(core, server, pki[0])
    api = client(server, pki[0], token_of(user))
    try:
        if verb == "list":
            api.list_namespaced_pod(namespace)
        else:
            api.create_namespaced_pod(namespace, POD)
    except ApiException as e:
        assert not allowed, e.body
        assert e.status == 403
        status = orjson.loads(e.body)
        assert status["reason"] == "Forbidden"
        assert status["message"] == forbidden(user, verb, "pods", namespace)
        assert status["details"] == {"kind": "pods"}
        return
    assert allowed, f"{user} could {verb} pods in {namespace}"


def test_kubectl_forbidden_wording_and_auth_commands(kubectl: Kubectl) -> None:
    assert kubectl("--context", "alice", "get", "pods", "-n", "team-a").returncode == 0
    r = kubectl("--context", "alice", "get", "pods", "-n", "team-b", ok=False)
    assert r.returncode != 0
    assert f"Error from server (Forbidden): {forbidden('alice', 'list', 'pods', 'team-b')}" in r.stderr
    r = kubectl("--context", "alice", "create", "configmap", "x", "-n", "team-a", ok=False)
    # kubectl's typed create wraps the server's message in its own words, as against a real cluster
    assert f"error: failed to create configmap: {forbidden('alice', 'create', 'configmaps', 'team-a')}" in r.stderr
    assert kubectl("--context", "bob", "create", "configmap", "x", "-n", "team-a").stdout.strip() == \
        "configmap/x created"
    # auth can-i: as alice, and as the admin impersonating alice (--as sends Impersonate-User)
    cases = [(("--context", "alice", "auth", "can-i", "list", "pods", "-n", "team-a"), "yes"),
             (("--context", "alice", "auth", "can-i", "create", "pods", "-n", "team-a"), "no"),
             (("--context", "alice", "auth", "can-i", "get", "secrets", "-n", "team-a"), "no"),
             (("auth", "can-i", "list", "pods", "-n", "team-b", "--as", "alice"), "no"),
             (("auth", "can-i", "create", "deployments.apps", "-n", "team-a", "--as", "bob"), "yes"),
             (("auth", "can-i", "create", "pods"), "yes")]
    for args, want in cases:
        r = kubectl(*args, ok=False)
        assert r.stdout.strip() == want, (args, r.stdout, r.stderr)
    who = kubectl("--context", "alice", "auth", "whoami", "-o", "json").stdout
    assert orjson.loads(who)["status"]["userInfo"] == {
        "username": "alice", "uid": "kemu-user-alice", "groups": ["team-a", "system:authenticated"]}
    table = kubectl("auth", "whoami").stdout.split()
    assert table[:4] == ["ATTRIBUTE", "VALUE", "Username", "kemu-admin"]
    # alice may not impersonate: upstream's impersonation filter answers 403 naming the verb
    r = kubectl("--context", "alice", "get", "pods", "-n", "team-a", "--as", "bob", ok=False)
    assert ('users "bob" is forbidden: User "alice" cannot impersonate resource "users" in API group "" at the '
            "cluster scope") in r.stderr


def test_kubectl_creates_rbac_objects_and_prints_them(kubectl: Kubectl, core: ServerCore) -> None:
    """kubectl create role/rolebinding send protobuf; the table has upstream's columns."""
    kubectl("create", "role", "pod-reader", "-n", "team-b", "--verb=get,list", "--resource=pods")
    kubectl("create", "rolebinding", "carol-reads", "-n", "team-b", "--role=pod-reader", "--user=carol",
            "--group=auditors", "--serviceaccount=team-b:robot")
    kubectl("create", "clusterrole", "node-reader", "--verb=get,list,watch", "--resource=nodes")
    kubectl("create", "clusterrolebinding", "carol-nodes", "--clusterrole=node-reader", "--user=carol")
    wide = kubectl("get", "rolebinding", "carol-reads", "-n", "team-b", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert wide[1].split()[:2] == ["carol-reads", "Role/pod-reader"]
    assert wide[1].split()[3:] == ["carol", "auditors", "team-b:robot"]
    assert kubectl("get", "clusterrole", "node-reader").stdout.split()[:3] == ["NAME", "CREATED", "AT"]
    stored = core.get(ROLEBINDING, "team-b", "carol-reads")
    assert stored["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"}

    def carol_can(*args: str) -> bool:
        return kubectl("--context", "carol", "auth", "can-i", *args, ok=False).stdout.strip() == "yes"

    wait_for(lambda: carol_can("list", "pods", "-n", "team-b"), 10.0, "carol's new role binding")
    assert not carol_can("delete", "pods", "-n", "team-b")
    wait_for(lambda: carol_can("list", "nodes"), 10.0, "carol's new cluster role binding")
    r = kubectl("create", "rolebinding", "bad", "-n", "team-b", "--clusterrole=view", "--user=", ok=False)
    assert r.returncode != 0


def test_rbac_validation_messages(kubectl: Kubectl) -> None:
    manifest = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: broken, namespace: team-a}
rules:
- apiGroups: [""]
  nonResourceURLs: ["/healthz"]
  verbs: []
"""
    r = kubectl("create", "-f", "-", ok=False, stdin=manifest)
    assert 'The Role "broken" is invalid' in r.stderr
    assert "rules[0].verbs: Required value: verbs must contain at least one value" in r.stderr
    assert "rules[0].nonResourceURLs: Invalid value" in r.stderr
    assert "namespaced rules cannot apply to non-resource URLs" in r.stderr


# ----------------------------------------------------------------------------- OpenAPI and field validation
THREE = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: app-config}
data: {mode: fast}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: web}
value: 1000
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: web}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: web}}
"""


def test_three_object_file_creates(kubectl: Kubectl, core: ServerCore) -> None:
    out = kubectl("create", "-f", "-", stdin=THREE).stdout.splitlines()
    assert out == ["configmap/app-config created", "priorityclass.scheduling.k8s.io/web created",
                   "poddisruptionbudget.policy/web created"]
    assert core.get(CONFIGMAP, "default", "app-config")["data"] == {"mode": "fast"}
    assert core.get(PRIORITYCLASS, None, "web")["value"] == 1000
    assert core.get(PDB, "default", "web")["spec"]["minAvailable"] == 1


def test_unknown_kind_is_no_matches(kubectl: Kubectl) -> None:
    r = kubectl("create", "-f", "-", ok=False, stdin="apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")
    assert 'no matches for kind "Widget" in version "example.com/v1"' in r.stderr
    assert "failed to download openapi" not in r.stderr


@pytest.mark.parametrize(("path", "fields"), [
    ("pod.spec.containers", {"image": "<string>", "resources": "<ResourceRequirements>", "ports": "<[]ContainerPort>",
                             "name": "<string>"}),
    ("deployment.spec.strategy.rollingUpdate", {"maxSurge": "<IntOrString>", "maxUnavailable": "<IntOrString>"}),
    ("clusterrole.rules", {"verbs": "<[]string>", "nonResourceURLs": "<[]string>"}),
    ("rolebinding.subjects", {"kind": "<string>", "namespace": "<string>"}),
], ids=["pod-containers", "deployment-rolling-update", "clusterrole-rules", "rolebinding-subjects"])
def test_explain(kubectl: Kubectl, path: str, fields: dict[str, str]) -> None:
    out = kubectl("explain", path).stdout
    listed = {line.split()[0]: line.split()[1] for line in out.splitlines()
              if line.startswith("  ") and not line.startswith("    ") and len(line.split()) == 2}
    assert {k: listed.get(k) for k in fields} == fields


@pytest.mark.parametrize(("validate", "code", "expected"), [
    ("strict", 1, 'Error from server (BadRequest): error when creating "STDIN": ConfigMap in version "v1" cannot be '
                  'handled as a ConfigMap: strict decoding error: unknown field "foo", unknown field '
                  '"metadata.bogus"'),
    ("warn", 0, 'Warning: unknown field "foo"'),
    ("ignore", 0, ""),
], ids=["strict-rejects", "warn-warns", "ignore-says-nothing"])
def test_field_validation(kubectl: Kubectl, validate: str, code: int, expected: str) -> None:
    body = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: odd, bogus: 1}\ndata: {a: b}\nfoo: 1\n"
    r = kubectl("create", "-f", "-", f"--validate={validate}", ok=False, stdin=body)
    assert r.returncode == code, r.stderr
    assert expected in r.stderr
    if not expected:
        assert "unknown field" not in r.stderr


@pytest.mark.parametrize(("args", "what"), [
    (("exec", "web", "--", "ls"), "pods/exec (kubectl exec)"),
    (("attach", "web"), "pods/attach (kubectl attach)"),
], ids=["exec", "attach"])
def test_processes_are_not_emulated(kubectl: Kubectl, core: ServerCore, args: tuple[str, ...], what: str) -> None:
    core.create(CONFIGMAP, {"metadata": {"name": "x", "namespace": "default"}})  # the store is live
    kubectl("run", "web", "--image=nginx")
    r = kubectl(*args, ok=False)
    assert f"kemu does not emulate container processes: {what} is not available for pod \"web\"" in r.stderr
    assert "NotFound" not in r.stderr


def test_python_client_self_subject_review_and_access_review(core: ServerCore, server: ApiServerProcess,
                                                              pki: tuple[Path, Path, Path]) -> None:
    settled(core, server, pki[0])
    cfg = kubernetes.client.Configuration()
    cfg.host, cfg.ssl_ca_cert = server.url, str(pki[0])
    cfg.api_key = {"authorization": f"Bearer {token_of('alice')}"}
    api = kubernetes.client.ApiClient(cfg)
    authz = kubernetes.client.AuthorizationV1Api(api)
    review: Any = authz.create_self_subject_access_review(
        {"spec": {"resourceAttributes": {"namespace": "team-a", "verb": "watch", "resource": "pods"}}})
    assert review.status.allowed is True
    review = authz.create_self_subject_access_review(
        {"spec": {"nonResourceAttributes": {"path": "/metrics", "verb": "get"}}})
    assert review.status.allowed is False
    with pytest.raises(ApiException) as e:  # SubjectAccessReview needs its own grant: alice has none
        authz.create_subject_access_review({"spec": {"user": "bob", "resourceAttributes": {"verb": "get"}}})
    assert e.value.status == 403
    # The admin may ask about alice, cluster-wide (SubjectAccessReview) and in a namespace (LocalSubjectAccessReview).
    admin_cfg = kubernetes.client.Configuration()
    admin_cfg.host, admin_cfg.ssl_ca_cert = server.url, str(pki[0])
    admin_cfg.api_key = {"authorization": f"Bearer {ADMIN_TOKEN}"}
    admin = kubernetes.client.AuthorizationV1Api(kubernetes.client.ApiClient(admin_cfg))
    sar: Any = admin.create_subject_access_review({"spec": {
        "user": "alice", "groups": ["team-a"],
        "resourceAttributes": {"namespace": "team-a", "verb": "delete", "resource": "pods"}}})
    assert sar.status.allowed is False
    local: Any = admin.create_namespaced_local_subject_access_review("team-a", {"spec": {
        "user": "alice", "resourceAttributes": {"namespace": "team-a", "verb": "get", "resource": "pods"}}})
    assert local.status.allowed is True
    with pytest.raises(ApiException) as e:  # the namespace in the body must be the URL's
        admin.create_namespaced_local_subject_access_review("team-a", {"spec": {
            "user": "alice", "resourceAttributes": {"namespace": "team-b", "verb": "get", "resource": "pods"}}})
    assert e.value.status == 422
    authn = kubernetes.client.AuthenticationV1Api(api)
    who: Any = authn.create_self_subject_review({})
    assert who.status.user_info.username == "alice"
    with pytest.raises(ApiException) as e:  # a wrong token is 401, whatever else holds
        client(server, pki[0], "no-such-token").list_namespaced_pod("team-a")
    assert e.value.status == 401


def test_aggregated_cluster_roles_are_written_and_extend_view(kubectl: Kubectl, core: ServerCore) -> None:
    """The clusterrole-aggregation job: view/edit/admin carry their parts' rules, a labelled role joins view."""
    def rules_of(name: str) -> list[dict[str, Any]]:
        return orjson.loads(kubectl("get", "clusterrole", name, "-o", "json").stdout).get("rules") or []

    pods_read = {"verbs": ["get", "list", "watch"], "apiGroups": [""]}
    wait_for(lambda: any({k: r.get(k) for k in pods_read} == pods_read and "pods" in r.get("resources", [])
                         for r in rules_of("view")), 10.0, "view's aggregated rules")
    assert len(rules_of("admin")) > len(rules_of("edit")) > len(rules_of("view"))
    widgets = """\
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: widgets-view
  labels: {rbac.authorization.k8s.io/aggregate-to-view: "true"}
rules:
- {apiGroups: [example.com], resources: [widgets], verbs: [list]}
"""
    kubectl("create", "-f", "-", stdin=widgets)
    widget_rule = {"apiGroups": ["example.com"], "resources": ["widgets"], "verbs": ["list"]}
    wait_for(lambda: widget_rule in rules_of("admin"), 10.0, "widgets-view aggregated up to admin")
    assert widget_rule in rules_of("view") and widget_rule in rules_of("edit")
    # kubectl auth can-i sends an unknown resource with group "" (as against a real cluster): ask directly
    review = ("apiVersion: authorization.k8s.io/v1\nkind: SelfSubjectAccessReview\nspec:\n  resourceAttributes:\n"
              "    {namespace: team-a, verb: list, group: example.com, resource: widgets}\n")
    answer = kubectl("create", "-f", "-", "--as", "alice", "--validate=false", "-o", "jsonpath={.status.allowed}",
                     stdin=review)
    assert answer.stdout == "true"
