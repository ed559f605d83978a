"""The HTTP API server over raw HTTP: errors as Status, discovery, tables, watches, subresources.

One API server process serves the whole module (starting one costs about a second); every test
starts from an emptied Redis (the ``redis_url`` fixture) and re-creates the bootstrap objects.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest

from emulator.api.kinds import CLUSTERROLE, CONFIGMAP, DEPLOYMENT, NAMESPACE, NODE, POD, all_kinds
from emulator.apiserver.process import ApiServerProcess
from emulator.auth.rbac import aggregated_rules
from emulator.server.core import ServerCore
from emulator.store.redis_server import EmbeddedRedis
from emulator.store.store import Store, StoreConfig
from tests import builders as b
from tests.kubectl_env import running_api
from tests.waiting import store_writes, wait_for

pytestmark = pytest.mark.integration

JSON = {"Content-Type": "application/json"}
TABLE = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
         "application/json")


@pytest.fixture(scope="module")
def server(redis_server: EmbeddedRedis) -> Iterator[ApiServerProcess]:
    with running_api(redis_server.url, bookmark_interval=0.3) as proc:
        yield proc


@pytest.fixture
def core(redis_url: str, server: ApiServerProcess) -> ServerCore:
    c = ServerCore(Store.connect(redis_url))
    c.bootstrap()
    return c


@pytest.fixture
def http(server: ApiServerProcess, core: ServerCore) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=10.0) as client:
        yield client


def status_of(r: httpx.Response, code: int) -> dict[str, Any]:
    """The response must be a Status with ``code`` as both HTTP code and body code."""
    assert r.status_code == code, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert body["kind"] == "Status" and body["code"] == code and body["status"] == "Failure"
    return body


def settled_rv(core: ServerCore) -> int:
    """The store's resourceVersion once the API server has nothing left to write on its own.

    The server's RBAC source does upstream's clusterrole-aggregation: after each test's flush and
    ``bootstrap()`` it notices the new ClusterRoles (within its one-second quiet check) and writes the
    aggregated rules into ``admin``, ``edit`` and ``view`` over a few passes. Those writes would land
    between a "stores nothing" check's baseline and its comparison whenever the test runs slower than
    the server (heavy load), so the baseline is taken once no ClusterRole needs aggregating: the
    bootstrap state always does, and only the server's own writes settle it.
    """
    wait_for(lambda: not aggregated_rules(core.list(CLUSTERROLE).items), 30, "the server's ClusterRole aggregation",
             wake=store_writes(core, CLUSTERROLE))
    return core.store.current_rv()


def written_since(core: ServerCore, rv: int) -> list[str]:
    """What was stored after ``rv`` (the failure message of a "stores nothing" check)."""
    return [f"{kind.resource}/{o['metadata'].get('name')}@{o['metadata']['resourceVersion']}"
            for kind in all_kinds() for o in core.list(kind).items if int(o["metadata"]["resourceVersion"]) > rv]


def pod_json(name: str, **kw: Any) -> bytes:
    return orjson.dumps(b.pod(name, **kw))


# ---------------------------------------------------------------- errors: each is a Status and stores nothing
def test_malformed_json_is_400_and_stores_nothing(http: httpx.Client, core: ServerCore) -> None:
    rv = settled_rv(core)
    body = status_of(http.post("/api/v1/namespaces/default/pods", content=b'{"metadata": {"name": "x"', headers=JSON),
                     400)
    assert body["reason"] == "BadRequest" and "json parse error" in body["message"]
    # Well-formed JSON of the wrong shape is rejected as upstream's decoder does, not as a server error.
    for wrong in (b'{"metadata": {"name": "x"}, "spec": "oops"}', b'[1, 2]',
                  b'{"metadata": {"name": "x"}, "spec": {"containers": [1]}}'):
        assert status_of(http.post("/api/v1/namespaces/default/pods", content=wrong, headers=JSON), 400)
    assert core.store.current_rv() == rv, written_since(core, rv)
    assert core.list(POD).items == []


def test_invalid_object_is_422_naming_the_field(http: httpx.Client, core: ServerCore) -> None:
    rv = settled_rv(core)
    bad = b.pod("bad")
    bad["spec"]["containers"][0]["name"] = "Not_A_DNS_Label"
    body = status_of(http.post("/api/v1/namespaces/default/pods", content=orjson.dumps(bad), headers=JSON), 422)
    assert body["reason"] == "Invalid"
    assert "spec.containers[0].name" in [c["field"] for c in body["details"]["causes"]]
    assert core.store.current_rv() == rv, written_since(core, rv)


def test_stale_resource_version_is_409_and_stores_nothing(http: httpx.Client, core: ServerCore) -> None:
    cm = core.create(CONFIGMAP, {"metadata": {"name": "cm", "namespace": "default"}, "data": {"v": "1"}})
    core.update(CONFIGMAP, {**cm, "data": {"v": "2"}})
    rv = settled_rv(core)
    stale = {**cm, "data": {"v": "3"}}  # carries the first resourceVersion
    body = status_of(http.put("/api/v1/namespaces/default/configmaps/cm", content=orjson.dumps(stale), headers=JSON),
                     409)
    assert body["reason"] == "Conflict"
    assert core.store.current_rv() == rv, written_since(core, rv)
    assert core.get(CONFIGMAP, "default", "cm")["data"] == {"v": "2"}


def test_oversize_body_is_413_and_stores_nothing(http: httpx.Client, core: ServerCore) -> None:
    rv = settled_rv(core)
    big = {"metadata": {"name": "big"}, "data": {"blob": "x" * (3 * 1024 * 1024 + 1)}}
    body = status_of(http.post("/api/v1/namespaces/default/configmaps", content=orjson.dumps(big), headers=JSON),
                     413)
    assert body["reason"] == "RequestEntityTooLarge" and "3145728" in body["message"]
    assert core.store.current_rv() == rv, written_since(core, rv)


def test_unsupported_content_type_is_415_and_stores_nothing(http: httpx.Client, core: ServerCore) -> None:
    rv = settled_rv(core)
    r = http.post("/api/v1/namespaces/default/pods", content=pod_json("p"), headers={"Content-Type": "text/plain"})
    assert status_of(r, 415)["reason"] == "UnsupportedMediaType"
    # Protobuf is decoded (emulator.apiserver.protobuf): JSON bytes labelled protobuf are a bad request.
    r = http.post("/api/v1/namespaces/default/pods", content=pod_json("p"),
                  headers={"Content-Type": "application/vnd.kubernetes.protobuf"})
    assert "does not appear to be a protobuf message" in status_of(r, 400)["message"]
    # A patch type that is not a patch type is 415 too.
    r = http.patch("/api/v1/namespaces/default/pods/p", content=b"{}", headers=JSON)
    assert status_of(r, 415)["reason"] == "UnsupportedMediaType"
    assert core.store.current_rv() == rv, written_since(core, rv)


def test_name_and_namespace_must_match_the_url(http: httpx.Client, core: ServerCore) -> None:
    created = core.create(CONFIGMAP, {"metadata": {"name": "a", "namespace": "default"}})
    rv = settled_rv(core)
    renamed = {**created, "metadata": {**created["metadata"], "name": "b"}}
    body = status_of(http.put("/api/v1/namespaces/default/configmaps/a", content=orjson.dumps(renamed), headers=JSON),
                     400)
    assert "does not match the name on the URL" in body["message"]
    elsewhere = {"metadata": {"name": "c", "namespace": "kube-system"}}
    r = http.post("/api/v1/namespaces/default/configmaps", content=orjson.dumps(elsewhere), headers=JSON)
    assert "namespace of the provided object does not match" in status_of(r, 400)["message"]
    assert core.store.current_rv() == rv, written_since(core, rv)


def test_unknown_paths_404_and_wrong_methods_405(http: httpx.Client) -> None:
    assert status_of(http.get("/api/v1/namespaces/default/widgets"), 404)["reason"] == "NotFound"
    assert status_of(http.get("/api/v1/namespaces/default/pods/nope"), 404)["message"] == 'pods "nope" not found'
    assert status_of(http.get("/apis/apps/v2/deployments"), 404)["reason"] == "NotFound"
    assert status_of(http.put("/api/v1/namespaces/default/pods", content=b"{}", headers=JSON), 405)
    assert status_of(http.post("/api/v1/pods", content=pod_json("p"), headers=JSON), 405)


def test_token_is_required_when_the_server_says_so(redis_url: str) -> None:
    with running_api(redis_url, token="s3cret", require_token=True) as proc, \
            httpx.Client(base_url=proc.url, timeout=10.0) as c:
        assert status_of(c.get("/api/v1/namespaces"), 401)["reason"] == "Unauthorized"
        assert status_of(c.get("/api/v1/namespaces", headers={"Authorization": "Bearer wrong"}), 401)
        assert c.get("/api/v1/namespaces", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert c.get("/healthz").status_code == 200  # health stays readable, as upstream


def test_token_is_optional_on_loopback_without_the_flag(redis_url: str) -> None:
    with running_api(redis_url, token="s3cret", require_token=False) as proc, \
            httpx.Client(base_url=proc.url, timeout=10.0) as c:
        assert c.get("/api/v1/namespaces").status_code == 200
        assert c.get("/api/v1/namespaces", headers={"Authorization": "Bearer s3cret"}).status_code == 200
        assert status_of(c.get("/api/v1/namespaces", headers={"Authorization": "Bearer wrong"}), 401)


# ---------------------------------------------------------------- discovery
def test_aggregated_discovery_lists_every_kind_with_subresources(http: httpx.Client) -> None:
    accept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json"
    r = http.get("/apis", headers={"Accept": accept})
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    groups = {g["metadata"]["name"]: g for g in r.json()["items"]}
    assert {"apps", "policy", "scheduling.k8s.io", "coordination.k8s.io", "node.k8s.io"} <= set(groups)
    deploy = next(x for x in groups["apps"]["versions"][0]["resources"] if x["resource"] == "deployments")
    scale = next(s for s in deploy["subresources"] if s["subresource"] == "scale")
    assert scale["responseKind"] == {"group": "autoscaling", "version": "v1", "kind": "Scale"}
    core_doc = http.get("/api", headers={"Accept": accept}).json()
    pods = next(x for x in core_doc["items"][0]["versions"][0]["resources"] if x["resource"] == "pods")
    assert pods["shortNames"] == ["po"] and pods["scope"] == "Namespaced"
    assert {s["subresource"] for s in pods["subresources"]} == {"status", "binding", "eviction", "log"}
    # ETags let clients revalidate their discovery cache.
    again = http.get("/apis", headers={"Accept": accept, "If-None-Match": r.headers["etag"]})
    assert again.status_code == 304
    legacy = http.get("/api/v1").json()
    assert "pods/status" in [x["name"] for x in legacy["resources"]]
    assert http.get("/version").json()["minor"] == "32"


def test_openapi_v3_announces_server_side_field_validation(http: httpx.Client) -> None:
    index = http.get("/openapi/v3").json()["paths"]
    doc = http.get(index["apis/apps/v1"]["serverRelativeURL"]).json()
    patch = doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"]
    assert patch["x-kubernetes-group-version-kind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert "fieldValidation" in [p["name"] for p in patch["parameters"]]


# ---------------------------------------------------------------- tables
def test_pod_table_has_upstream_columns_and_status_rules(http: httpx.Client, core: ServerCore) -> None:
    core.create(NODE, b.node("n1"))
    core.create(POD, b.pod("pending"))
    bound = core.create(POD, b.pod("creating"))
    r = http.post("/api/v1/namespaces/default/pods/creating/binding", headers=JSON,
                  content=orjson.dumps({"metadata": {"name": "creating"}, "target": {"kind": "Node", "name": "n1"}}))
    assert r.status_code == 201
    bound = core.get(POD, "default", "creating")
    waiting = {"name": "app", "ready": False, "restartCount": 0, "state": {"waiting": {"reason": "ContainerCreating"}}}
    core.update_status(POD, {**bound, "status": {**bound["status"], "containerStatuses": [waiting]}})
    running = core.create(POD, b.pod("running", node="n1"))
    ready = {"name": "app", "ready": True, "restartCount": 2, "state": {"running": {}},
             "lastState": {"terminated": {"exitCode": 1, "finishedAt": "2020-01-01T00:00:00Z"}}}
    core.update_status(POD, {**running, "status": {**running["status"], "phase": "Running", "podIP": "10.0.0.7",
                                                   "containerStatuses": [ready]}})
    core.delete(POD, "default", "running")  # bound and running: only marked, so it shows Terminating

    table = http.get("/api/v1/namespaces/default/pods", headers={"Accept": TABLE}).json()
    assert table["kind"] == "Table" and table["apiVersion"] == "meta.k8s.io/v1"
    assert [c["name"] for c in table["columnDefinitions"]] == [
        "Name", "Ready", "Status", "Restarts", "Age", "IP", "Node", "Nominated Node", "Readiness Gates"]
    assert [c["priority"] for c in table["columnDefinitions"]] == [0, 0, 0, 0, 0, 1, 1, 1, 1]
    rows = {r["cells"][0]: r for r in table["rows"]}
    assert rows["pending"]["cells"][1:4] == ["0/1", "Pending", "0"]
    assert rows["creating"]["cells"][2] == "ContainerCreating"
    assert rows["creating"]["cells"][6] == "n1"
    assert rows["running"]["cells"][1] == "1/1" and rows["running"]["cells"][2] == "Terminating"
    assert rows["running"]["cells"][3].startswith("2 (") and rows["running"]["cells"][5] == "10.0.0.7"
    assert rows["pending"]["object"]["kind"] == "PartialObjectMetadata"
    assert rows["pending"]["object"]["metadata"]["namespace"] == "default"


def test_node_and_deployment_tables(http: httpx.Client, core: ServerCore) -> None:
    node = b.node("n1", labels={"node-role.kubernetes.io/control-plane": ""})
    node["status"]["conditions"] = [{"type": "Ready", "status": "True"}]
    node["status"]["nodeInfo"] = {"kubeletVersion": "v1.32.0"}
    node["spec"]["unschedulable"] = True
    core.create(NODE, node)
    row = http.get("/api/v1/nodes/n1", headers={"Accept": TABLE}).json()["rows"][0]
    assert row["cells"][:3] == ["n1", "Ready,SchedulingDisabled", "control-plane"]
    assert row["cells"][4] == "v1.32.0"
    deploy = {"metadata": {"name": "web", "namespace": "default"},
              "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}}}
    core.create(DEPLOYMENT, deploy)
    table = http.get("/apis/apps/v1/namespaces/default/deployments", headers={"Accept": TABLE}).json()
    assert [c["name"] for c in table["columnDefinitions"]][:5] == ["Name", "Ready", "Up-to-date", "Available", "Age"]
    assert table["rows"][0]["cells"][:4] == ["web", "0/3", 0, 0]
    assert table["rows"][0]["cells"][5:] == ["c", "nginx:1.27", "app=web"]


# ---------------------------------------------------------------- watch
class Events:
    """Reads a streaming watch response event by event; a watchdog closes it at the deadline."""

    def __init__(self, r: httpx.Response) -> None:
        self.r = r
        self.lines = r.iter_lines()

    def read(self, n: int = 0, until: Any = None, timeout: float = 10.0) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = []
        timer = threading.Timer(timeout, self.r.close)
        timer.start()
        try:
            for line in self.lines:
                if not line:
                    continue
                events.append(orjson.loads(line))
                if (n and len(events) >= n) or (until is not None and until(events[-1])):
                    break
        finally:
            timer.cancel()
        return events


def test_watch_from_zero_lists_then_follows_with_bookmarks(http: httpx.Client, core: ServerCore) -> None:
    core.create(POD, b.pod("before", labels={"app": "x"}))
    core.create(POD, b.pod("other", labels={"app": "y"}))
    params = {"watch": "1", "labelSelector": "app=x", "allowWatchBookmarks": "true", "timeoutSeconds": "10"}
    with http.stream("GET", "/api/v1/namespaces/default/pods", params=params) as r:
        assert r.status_code == 200
        stream = Events(r)
        first = stream.read(1)
        assert (first[0]["type"], first[0]["object"]["metadata"]["name"]) == ("ADDED", "before")
        core.create(POD, b.pod("after", labels={"app": "x"}))
        core.create(POD, b.pod("ignored", labels={"app": "y"}))
        core.delete(POD, "default", "before")
        last = str(core.store.current_rv())
        # Bookmarks come every 0.3 s here; one must eventually report the last version read, the
        # filtered-out "ignored" pod included.
        events = stream.read(until=lambda e: e["type"] == "BOOKMARK"
                             and e["object"]["metadata"]["resourceVersion"] == last)
    changes = [(e["type"], e["object"]["metadata"]["name"]) for e in events if e["type"] != "BOOKMARK"]
    assert changes == [("ADDED", "after"), ("DELETED", "before")]
    assert events[-1]["type"] == "BOOKMARK" and events[-1]["object"]["kind"] == "Pod"


def test_watch_ends_at_timeout_seconds(http: httpx.Client, core: ServerCore) -> None:
    """The server ends the stream itself: it serves a change made after the request, then closes cleanly.

    The client's read timeout (10 s) bounds how long that may take; how close to ``timeoutSeconds`` the
    end comes is wall-clock behaviour, not asserted here.
    """
    params = {"watch": "true", "resourceVersion": str(core.store.current_rv()), "timeoutSeconds": "1"}
    with http.stream("GET", "/api/v1/namespaces", params=params) as r:
        assert r.status_code == 200
        core.create(NAMESPACE, {"metadata": {"name": "late"}})
        events = [orjson.loads(line) for line in r.iter_lines() if line]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in events] == [("ADDED", "late")]


def test_too_old_watch_is_410(http: httpx.Client, redis_url: str) -> None:
    small = ServerCore(Store.connect(redis_url, StoreConfig(stream_cap=10)))
    for i in range(60):
        small.create(CONFIGMAP, {"metadata": {"name": f"cm{i}", "namespace": "default"}})
    body = status_of(http.get("/api/v1/configmaps", params={"watch": "1", "resourceVersion": "2"}), 410)
    assert body["reason"] == "Expired" and "too old resource version" in body["message"]


def test_table_watch_sends_column_definitions_once(http: httpx.Client, core: ServerCore) -> None:
    rv = core.store.current_rv()
    with http.stream("GET", "/api/v1/namespaces/default/pods", headers={"Accept": TABLE},
                     params={"watch": "1", "resourceVersion": str(rv), "timeoutSeconds": "10"}) as r:
        core.create(POD, b.pod("a"))
        core.create(POD, b.pod("b"))
        events = Events(r).read(2)
    assert [e["object"]["kind"] for e in events] == ["Table", "Table"]
    assert "columnDefinitions" in events[0]["object"] and "columnDefinitions" not in events[1]["object"]
    assert [e["object"]["rows"][0]["cells"][0] for e in events] == ["a", "b"]


# ---------------------------------------------------------------- subresources, patches, deletes
def test_binding_sets_node_once(http: httpx.Client, core: ServerCore) -> None:
    core.create(NODE, b.node("n1"))
    core.create(NODE, b.node("n2"))
    core.create(POD, b.pod("p"))
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
               "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}
    r = http.post("/api/v1/namespaces/default/pods/p/binding", content=orjson.dumps(binding), headers=JSON)
    assert r.status_code == 201 and r.json()["status"] == "Success"
    pod = core.get(POD, "default", "p")
    assert pod["spec"]["nodeName"] == "n1"
    assert {"type": "PodScheduled", "status": "True"}.items() <= pod["status"]["conditions"][-1].items()
    again = {**binding, "target": {"kind": "Node", "name": "n2"}}
    body = status_of(http.post("/api/v1/namespaces/default/pods/p/binding", content=orjson.dumps(again),
                               headers=JSON), 409)
    assert "already assigned to node" in body["message"]
    assert core.get(POD, "default", "p")["spec"]["nodeName"] == "n1"


def test_pod_log_says_it_is_not_emulated(http: httpx.Client, core: ServerCore) -> None:
    core.create(POD, b.pod("p"))
    r = http.get("/api/v1/namespaces/default/pods/p/log")
    assert r.status_code == 200 and "does not emulate container logs" in r.text
    assert status_of(http.get("/api/v1/namespaces/default/pods/p/log", params={"container": "nope"}), 400)


def test_scale_subresource_get_put_patch(http: httpx.Client, core: ServerCore) -> None:
    deploy = {"metadata": {"name": "web", "namespace": "default"},
              "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                       "template": {"metadata": {"labels": {"app": "web"}},
                                    "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}}
    core.create(DEPLOYMENT, deploy)
    url = "/apis/apps/v1/namespaces/default/deployments/web/scale"
    scale = http.get(url).json()
    assert scale["kind"] == "Scale" and scale["apiVersion"] == "autoscaling/v1"
    assert scale["spec"]["replicas"] == 1 and scale["status"]["selector"] == "app=web"
    scale["spec"]["replicas"] = 4
    assert http.put(url, content=orjson.dumps(scale), headers=JSON).json()["spec"]["replicas"] == 4
    r = http.patch(url, content=b'{"spec":{"replicas":7}}', headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200 and r.json()["spec"]["replicas"] == 7
    stored = core.get(DEPLOYMENT, "default", "web")
    assert stored["spec"]["replicas"] == 7 and stored["metadata"]["generation"] == 3
    # The earlier Scale carries a stale resourceVersion now.
    assert status_of(http.put(url, content=orjson.dumps(scale), headers=JSON), 409)
    # Scaling to zero as a Go client does: ScaleSpec.replicas is omitempty, so the field is absent.
    current = http.get(url).json()
    r = http.put(url, content=orjson.dumps({**current, "spec": {}}), headers=JSON)
    assert r.status_code == 200 and r.json()["spec"]["replicas"] == 0
    assert core.get(DEPLOYMENT, "default", "web")["spec"]["replicas"] == 0


def test_status_subresource_only_changes_status(http: httpx.Client, core: ServerCore) -> None:
    core.create(NODE, b.node("n1"))
    patch = {"spec": {"unschedulable": True}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
    r = http.patch("/api/v1/nodes/n1/status", content=orjson.dumps(patch),
                   headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200
    node = core.get(NODE, None, "n1")
    assert node["status"]["conditions"] == [{"type": "Ready", "status": "True"}]
    assert not node["spec"].get("unschedulable")


def test_json_patch_and_dry_run(http: httpx.Client, core: ServerCore) -> None:
    cm = {"metadata": {"name": "cm", "namespace": "default"}, "data": {"a": "1"}}
    r = http.post("/api/v1/namespaces/default/configmaps", content=orjson.dumps(cm), headers=JSON)
    assert r.status_code == 201
    ops = [{"op": "add", "path": "/data/b", "value": "2"}]
    r = http.patch("/api/v1/namespaces/default/configmaps/cm", content=orjson.dumps(ops), params={"dryRun": "All"},
                   headers={"Content-Type": "application/json-patch+json"})
    assert r.status_code == 200 and r.json()["data"] == {"a": "1", "b": "2"}
    assert core.get(CONFIGMAP, "default", "cm")["data"] == {"a": "1"}  # dry run stored nothing
    r = http.patch("/api/v1/namespaces/default/configmaps/cm", content=orjson.dumps(ops),
                   params={"fieldManager": "patcher"}, headers={"Content-Type": "application/json-patch+json"})
    assert r.status_code == 200
    stored = core.get(CONFIGMAP, "default", "cm")
    assert stored["data"] == {"a": "1", "b": "2"}
    # The creator (named by its User-Agent) owns data.a and the data map its create added ("."), the patcher data.b.
    owners = {m["manager"]: m["fieldsV1"] for m in stored["metadata"]["managedFields"]}
    assert owners == {"python-httpx": {"f:data": {".": {}, "f:a": {}}}, "patcher": {"f:data": {"f:b": {}}}}


def test_delete_preconditions_and_results(http: httpx.Client, core: ServerCore) -> None:
    cm = core.create(CONFIGMAP, {"metadata": {"name": "cm", "namespace": "default"}})
    wrong = {"preconditions": {"uid": "not-the-uid"}}
    assert status_of(http.request("DELETE", "/api/v1/namespaces/default/configmaps/cm", content=orjson.dumps(wrong),
                                  headers=JSON), 409)
    right = {"preconditions": {"uid": cm["metadata"]["uid"], "resourceVersion": cm["metadata"]["resourceVersion"]}}
    r = http.request("DELETE", "/api/v1/namespaces/default/configmaps/cm", content=orjson.dumps(right), headers=JSON)
    assert r.status_code == 200
    assert r.json()["status"] == "Success" and r.json()["details"]["uid"] == cm["metadata"]["uid"]
    # A bound pod is only marked (graceful deletion): the answer is the pod, with its deletionTimestamp.
    core.create(POD, b.pod("p", node="n1"))
    r = http.delete("/api/v1/namespaces/default/pods/p", params={"gracePeriodSeconds": "30"})
    assert r.status_code == 200 and r.json()["metadata"]["deletionTimestamp"]
    assert core.get(POD, "default", "p")["metadata"]["deletionGracePeriodSeconds"] == 30


def test_deletecollection_with_label_selector(http: httpx.Client, core: ServerCore) -> None:
    for i in range(4):
        core.create(CONFIGMAP, {"metadata": {"name": f"cm{i}", "namespace": "default",
                                             "labels": {"even": str(i % 2 == 0).lower()}}})
    r = http.delete("/api/v1/namespaces/default/configmaps", params={"labelSelector": "even=true"})
    assert r.status_code == 200 and r.json()["kind"] == "ConfigMapList"
    assert sorted(o["metadata"]["name"] for o in r.json()["items"]) == ["cm0", "cm2"]
    assert sorted(o["metadata"]["name"] for o in core.list(CONFIGMAP).items) == ["cm1", "cm3"]


def test_list_pages_with_limit_and_continue(http: httpx.Client, core: ServerCore) -> None:
    for i in range(5):
        core.create(POD, b.pod(f"p{i}", node=f"n{i % 2}"))
    names, token = [], None
    while True:
        params = {"limit": "2", **({"continue": token} if token else {})}
        page = http.get("/api/v1/pods", params=params).json()
        names += [o["metadata"]["name"] for o in page["items"]]
        token = page["metadata"].get("continue")
        if not token:
            break
    assert names == [f"p{i}" for i in range(5)]
    on_n1 = http.get("/api/v1/pods", params={"fieldSelector": "spec.nodeName=n1"}).json()["items"]
    assert sorted(o["metadata"]["name"] for o in on_n1) == ["p1", "p3"]


def test_namespace_finalize_subresource_releases_a_terminating_namespace(http: httpx.Client,
                                                                         core: ServerCore) -> None:
    core.create(NAMESPACE, {"metadata": {"name": "going"}})
    r = http.delete("/api/v1/namespaces/going")
    assert r.status_code in (200, 202)
    ns = http.get("/api/v1/namespaces/going").json()
    assert ns["status"]["phase"] == "Terminating" and ns["spec"]["finalizers"] == ["kubernetes"]
    ns["spec"]["finalizers"] = []
    r = http.put("/api/v1/namespaces/going/finalize", content=orjson.dumps(ns), headers=JSON)
    assert r.status_code == 200
    assert status_of(http.get("/api/v1/namespaces/going"), 404)


def test_metrics_and_scrape_target_discovery(http: httpx.Client, core: ServerCore) -> None:
    from emulator.metrics import SD_PATH, TargetRegistration

    reg = TargetRegistration(core.store.redis, "kemu-scheduler-0", "127.0.0.1:9999", {"component": "scheduler"})
    reg.refresh()
    try:
        targets = http.get(SD_PATH).json()
        by_instance = {t["labels"]["instance"]: t for t in targets}
        assert by_instance["kemu-scheduler-0"]["targets"] == ["127.0.0.1:9999"]
        assert by_instance["apiserver"]["labels"]["component"] == "apiserver"
        assert by_instance["apiserver"]["targets"] == [http.base_url.netloc.decode()]
    finally:
        reg.stop()
    assert "kemu-scheduler-0" not in {t["labels"]["instance"] for t in http.get(SD_PATH).json()}
    body = http.get("/metrics").text
    assert "# TYPE process_cpu_seconds_total counter" in body or "# TYPE python_info gauge" in body
