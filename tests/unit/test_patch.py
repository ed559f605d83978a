"""PATCH semantics: JSON patch, merge patch, strategic merge patch and server-side apply.

Expected results follow upstream: ``strategicpatch/patch.go`` for merge rules and list
ordering, ``handlers/patch.go`` for status codes, the Go struct tags for which lists merge,
and ``structured-merge-diff`` / ``managedfields`` for apply ownership and conflict texts.
The bodies in the ``KUBECTL_*`` cases are the ones kubectl sends for that command.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from emulator.api import kinds
from emulator.api.errors import StatusError
from emulator.api.kinds import Kind
from emulator.api.types import Obj
from emulator.apiserver.patch import (
    APPLY_PATCH_YAML,
    JSON_PATCH,
    MAX_UPDATE_MANAGERS,
    MERGE_KEYS,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    apply_patch,
    parse_apply_body,
    patch_type,
    record_update,
    server_side_apply,
)

ABSENT = object()
T0, T1, T2 = "2024-05-01T10:00:00Z", "2024-05-01T10:00:01Z", "2024-05-01T10:00:02Z"

# ----------------------------------------------------------------------------- builders


def ctr(name: str = "app", image: str = "nginx:1", **extra: Any) -> Obj:
    return {"name": name, "image": image, **extra}


def deployment(*containers: Obj, replicas: int | None = 1, labels: dict[str, str] | None = None,
               **spec: Any) -> Obj:
    body: Obj = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"containers": list(containers) or [ctr()]}},
                 **spec},
    }
    if replicas is not None:
        body["spec"]["replicas"] = replicas
    if labels is not None:
        body["metadata"]["labels"] = dict(labels)
    return body


def pod(*containers: Obj, finalizers: list[str] | None = None, **spec: Any) -> Obj:
    body: Obj = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
                 "spec": {"containers": list(containers) or [ctr()], **spec}}
    if finalizers is not None:
        body["metadata"]["finalizers"] = list(finalizers)
    return body


def node(taints: list[Obj] | None = None, **status: Any) -> Obj:
    body: Obj = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, "spec": {}, "status": dict(status)}
    if taints is not None:
        body["spec"]["taints"] = taints
    return body


def pdb(match: dict[str, str]) -> Obj:
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b", "namespace": "d"},
            "spec": {"selector": {"matchLabels": dict(match)}}}


def taint(key: str, effect: str = "NoSchedule", value: str | None = None) -> Obj:
    t = {"key": key, "effect": effect}
    if value is not None:
        t["value"] = value
    return t


def dig(obj: Any, path: str) -> Any:
    """``spec.template.spec.containers`` -> that value, or ABSENT."""
    for part in path.split("."):
        if not isinstance(obj, dict) or part not in obj:
            return ABSENT
        obj = obj[part]
    return obj


def patched(kind: Kind, current: Obj, patch: Any, content_type: str) -> Obj:
    """Apply a patch and check the input object was left alone."""
    before = json.dumps(current, sort_keys=True)
    body = patch if isinstance(patch, bytes) else json.dumps(patch).encode()
    result = apply_patch(kind, current, body, content_type)
    assert json.dumps(current, sort_keys=True) == before, "apply_patch mutated its input"
    assert result is not current
    return result


def fails(fn: Any, *args: Any, **kwargs: Any) -> StatusError:
    with pytest.raises(StatusError) as info:
        fn(*args, **kwargs)
    return info.value


def fields_of(obj: Obj, manager: str, operation: str | None = None) -> Obj:
    entries = [e for e in obj["metadata"].get("managedFields", [])
               if e["manager"] == manager and (operation is None or e["operation"] == operation)]
    assert len(entries) == 1, f"expected one entry for {manager}, got {entries}"
    return entries[0]["fieldsV1"]


def without_times(obj: Obj) -> Obj:
    out = json.loads(json.dumps(obj))
    for e in out["metadata"].get("managedFields", []):
        e.pop("time", None)
    return out


# ----------------------------------------------------------------------------- content types


@pytest.mark.parametrize(("header", "expected"), [
    ("application/json-patch+json", JSON_PATCH),
    ("application/merge-patch+json", MERGE_PATCH),
    ("application/strategic-merge-patch+json; charset=utf-8", STRATEGIC_MERGE_PATCH),
    ("application/apply-patch+yaml", APPLY_PATCH_YAML),
], ids=["json", "merge", "strategic-with-charset", "apply"])
def test_patch_type_accepts_upstream_types(header: str, expected: str) -> None:
    assert patch_type(header) == expected


@pytest.mark.parametrize("header", ["text/plain", "application/json", "application/apply-patch+json", ""],
                         ids=["text", "plain-json", "apply-json-not-upstream", "empty"])
def test_unknown_content_type_is_415(header: str) -> None:
    err = fails(apply_patch, kinds.POD, pod(), b"{}", header)
    assert (err.code, err.reason) == (415, "UnsupportedMediaType")


# ----------------------------------------------------------------------------- merge patch (RFC 7386)

MERGE_CASES: list[tuple[str, Kind, Obj, Any, str, Any]] = [
    ("null-deletes", kinds.DEPLOYMENT, deployment(labels={"a": "1", "b": "2"}),
     {"metadata": {"labels": {"a": None}}}, "metadata.labels", {"b": "2"}),
    ("nested-merge-keeps-siblings", kinds.DEPLOYMENT, deployment(labels={"a": "1"}),
     {"metadata": {"labels": {"c": "3"}, "annotations": {"x": "y"}}}, "metadata", {
         "name": "web", "namespace": "default", "labels": {"a": "1", "c": "3"}, "annotations": {"x": "y"}}),
    ("lists-replaced-not-merged", kinds.DEPLOYMENT, deployment(ctr("app"), ctr("sidecar")),
     {"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "x"}]}}}},
     "spec.template.spec.containers", [{"name": "app", "image": "x"}]),
    ("object-over-scalar-drops-nulls", kinds.POD, pod(), {"spec": {"hostname": {"a": 1, "b": None}}},
     "spec.hostname", {"a": 1}),
    ("KUBECTL_label", kinds.POD, pod(), {"metadata": {"labels": {"tier": "db"}}}, "metadata.labels", {"tier": "db"}),
    ("KUBECTL_label-remove", kinds.DEPLOYMENT, deployment(labels={"tier": "db", "x": "1"}),
     {"metadata": {"labels": {"tier": None}}}, "metadata.labels", {"x": "1"}),
    ("KUBECTL_annotate", kinds.NODE, node(), {"metadata": {"annotations": {"note": "hi"}}},
     "metadata.annotations", {"note": "hi"}),
    ("KUBECTL_scale", kinds.DEPLOYMENT, deployment(replicas=1), {"spec": {"replicas": 10}}, "spec.replicas", 10),
]


@pytest.mark.parametrize(("kind", "current", "patch", "path", "expected"),
                         [c[1:] for c in MERGE_CASES], ids=[c[0] for c in MERGE_CASES])
def test_merge_patch(kind: Kind, current: Obj, patch: Any, path: str, expected: Any) -> None:
    assert dig(patched(kind, current, patch, MERGE_PATCH), path) == expected


# ----------------------------------------------------------------------------- JSON patch (RFC 6902)

JSON_CASES: list[tuple[str, list[Obj], str, Any]] = [
    ("add-escaped-key", [{"op": "add", "path": "/metadata/labels", "value": {}},
                         {"op": "add", "path": "/metadata/labels/example.com~1role", "value": "db"}],
     "metadata.labels", {"example.com/role": "db"}),
    ("copy-within-limit", [{"op": "copy", "from": "/spec/containers/0", "path": "/spec/containers/-"}],
     "spec.containers", [ctr("app"), ctr("side", "s:1"), ctr("app")]),
    ("replace-image", [{"op": "replace", "path": "/spec/containers/0/image", "value": "nginx:2"}],
     "spec.containers", [{"name": "app", "image": "nginx:2"}, {"name": "side", "image": "s:1"}]),
    ("remove", [{"op": "remove", "path": "/spec/containers/1"}],
     "spec.containers", [{"name": "app", "image": "nginx:1"}]),
    ("test-then-replace", [{"op": "test", "path": "/spec/containers/1/name", "value": "side"},
                           {"op": "replace", "path": "/spec/containers/1/image", "value": "s:2"}],
     "spec.containers", [{"name": "app", "image": "nginx:1"}, {"name": "side", "image": "s:2"}]),
]


@pytest.mark.parametrize(("ops", "path", "expected"), [c[1:] for c in JSON_CASES], ids=[c[0] for c in JSON_CASES])
def test_json_patch(ops: list[Obj], path: str, expected: Any) -> None:
    current = pod(ctr("app"), ctr("side", "s:1"))
    assert dig(patched(kinds.POD, current, ops, JSON_PATCH), path) == expected


JSON_ERRORS: list[tuple[str, Any, int, str]] = [
    ("test-fails", [{"op": "test", "path": "/spec/containers/0/image", "value": "other"}], 422, "Invalid"),
    ("remove-missing", [{"op": "remove", "path": "/metadata/labels/nope"}], 422, "Invalid"),
    ("replace-missing", [{"op": "replace", "path": "/spec/nope/x", "value": 1}], 422, "Invalid"),
    ("unknown-op", [{"op": "frobnicate", "path": "/spec"}], 422, "Invalid"),
    ("root-becomes-list", [{"op": "replace", "path": "", "value": [1]}], 422, "Invalid"),
    ("not-a-list", {"op": "add", "path": "/a", "value": 1}, 400, "BadRequest"),
    ("list-of-strings", ["add"], 400, "BadRequest"),
    ("too-many-ops", [{"op": "test", "path": "/kind", "value": "Pod"}] * 10001, 413, "RequestEntityTooLarge"),
    ("copies-doubling-the-document", [{"op": "add", "path": "/spec/x", "value": ["y" * 1000] * 100}]
     + [{"op": "copy", "from": "/spec", "path": f"/spec/c{i}"} for i in range(40)], 422, "Invalid"),
]


@pytest.mark.parametrize(("ops", "code", "reason"), [c[1:] for c in JSON_ERRORS], ids=[c[0] for c in JSON_ERRORS])
def test_json_patch_errors(ops: Any, code: int, reason: str) -> None:
    err = fails(apply_patch, kinds.POD, pod(), json.dumps(ops).encode(), JSON_PATCH)
    assert (err.code, err.reason) == (code, reason)


def test_failed_json_patch_test_uses_upstream_message_and_names_the_detail() -> None:
    err = fails(apply_patch, kinds.POD, pod(), b'[{"op":"test","path":"/kind","value":"Node"}]', JSON_PATCH)
    assert err.message == "the server rejected our request due to an error in our request"
    assert err.causes and err.causes[0].field == "patch"


# ----------------------------------------------------------------------------- strategic merge patch

TEMPLATE = "spec.template.spec.containers"
SMP_CASES: list[tuple[str, Kind, Obj, Any, str, Any]] = [
    ("containers-merged-by-name", kinds.DEPLOYMENT, deployment(ctr("app", "a:1"), ctr("sidecar", "s:1")),
     {"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "image": "s:2"}]}}}},
     TEMPLATE, [ctr("app", "a:1"), ctr("sidecar", "s:2")]),
    ("new-container-without-order-goes-first", kinds.DEPLOYMENT, deployment(ctr("app"), ctr("sidecar")),
     {"spec": {"template": {"spec": {"containers": [{"name": "new", "image": "n"}]}}}},
     TEMPLATE, [ctr("new", "n"), ctr("app"), ctr("sidecar")]),
    ("delete-directive-on-container", kinds.DEPLOYMENT, deployment(ctr("app"), ctr("sidecar")),
     {"spec": {"template": {"spec": {"containers": [{"$patch": "delete", "name": "sidecar"}]}}}},
     TEMPLATE, [ctr("app")]),
    ("replace-directive-on-list", kinds.DEPLOYMENT, deployment(ctr("app"), ctr("sidecar")),
     {"spec": {"template": {"spec": {"containers": [{"$patch": "replace"}, {"name": "only", "image": "o"}]}}}},
     TEMPLATE, [ctr("only", "o")]),
    ("ports-merged-by-containerPort", kinds.POD,
     pod(ctr(ports=[{"containerPort": 80, "name": "http"}, {"containerPort": 443, "name": "https"}])),
     {"spec": {"containers": [{"name": "app", "ports": [{"containerPort": 443, "name": "tls"}]}]}},
     "spec.containers", [ctr(ports=[{"containerPort": 80, "name": "http"}, {"containerPort": 443, "name": "tls"}])]),
    ("env-merged-by-name", kinds.POD,
     pod(ctr(env=[{"name": "A", "value": "1"}, {"name": "B", "value": "2"}])),
     {"spec": {"containers": [{"name": "app", "env": [{"name": "B", "value": "3"}, {"name": "C", "value": "4"}]}]}},
     "spec.containers", [ctr(env=[{"name": "A", "value": "1"}, {"name": "B", "value": "3"},
                                  {"name": "C", "value": "4"}])]),
    ("env-var-null-field-deleted", kinds.POD,
     pod(ctr(env=[{"name": "A", "value": "1"}])),
     {"spec": {"containers": [{"name": "app", "env": [{"name": "A", "value": None,
                                                      "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}]}},
     "spec.containers", [ctr(env=[{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}])]),
    ("volumes-merged-by-name", kinds.POD, pod(volumes=[{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}}]),
     {"spec": {"volumes": [{"name": "b", "configMap": {"name": "cm"}}]}},
     "spec.volumes", [{"name": "a", "emptyDir": {}}, {"name": "b", "emptyDir": {}, "configMap": {"name": "cm"}}]),
    ("setElementOrder-reorders", kinds.DEPLOYMENT, deployment(ctr("app"), ctr("sidecar")),
     {"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "sidecar"}, {"name": "app"}]}}}},
     TEMPLATE, [ctr("sidecar"), ctr("app")]),
    ("setElementOrder-places-new-item", kinds.DEPLOYMENT, deployment(ctr("a"), ctr("c")),
     {"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
                                     "containers": [{"name": "b", "image": "b:1"}]}}}},
     TEMPLATE, [ctr("a"), ctr("b", "b:1"), ctr("c")]),
    ("deleteFromPrimitiveList-finalizers", kinds.POD, pod(finalizers=["a", "b", "c"]),
     {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}, "metadata.finalizers", ["a", "c"]),
    ("finalizers-merge-as-set", kinds.POD, pod(finalizers=["a", "b"]),
     {"metadata": {"finalizers": ["b", "c"]}}, "metadata.finalizers", ["a", "b", "c"]),
    ("finalizers-new-one-first", kinds.POD, pod(finalizers=["a", "b"]),
     {"metadata": {"finalizers": ["z"]}}, "metadata.finalizers", ["z", "a", "b"]),
    ("finalizers-set-order-and-delete", kinds.POD, pod(finalizers=["a", "b", "c"]),
     {"metadata": {"$setElementOrder/finalizers": ["c", "a"], "$deleteFromPrimitiveList/finalizers": ["b"]}},
     "metadata.finalizers", ["c", "a"]),
    ("ownerReferences-merged-by-uid", kinds.POD,
     {**pod(), "metadata": {"name": "p", "ownerReferences": [{"uid": "1", "name": "a"}]}},
     {"metadata": {"ownerReferences": [{"uid": "1", "name": "renamed"}]}},
     "metadata.ownerReferences", [{"uid": "1", "name": "renamed"}]),
    ("tolerations-replaced", kinds.POD,
     pod(tolerations=[{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}]),
     {"spec": {"tolerations": [{"key": "c", "operator": "Exists"}]}},
     "spec.tolerations", [{"key": "c", "operator": "Exists"}]),
    ("KUBECTL_taint-add-sends-full-list", kinds.NODE, node(taints=[taint("a")]),
     {"spec": {"taints": [taint("a"), taint("b", "NoExecute", "x")]}},
     "spec.taints", [taint("a"), taint("b", "NoExecute", "x")]),
    ("KUBECTL_taint-remove-one", kinds.NODE, node(taints=[taint("a"), taint("b")]),
     {"spec": {"taints": [taint("b")]}}, "spec.taints", [taint("b")]),
    ("KUBECTL_taint-remove-last", kinds.NODE, node(taints=[taint("a")]), {"spec": {"taints": None}},
     "spec.taints", ABSENT),
    ("KUBECTL_cordon", kinds.NODE, node(), {"spec": {"unschedulable": True}}, "spec.unschedulable", True),
    ("KUBECTL_uncordon", kinds.NODE, {**node(), "spec": {"unschedulable": True}}, {"spec": {"unschedulable": None}},
     "spec.unschedulable", ABSENT),
    ("KUBECTL_label", kinds.NODE, node(), {"metadata": {"labels": {"k": "v"}}}, "metadata.labels", {"k": "v"}),
    ("KUBECTL_annotate", kinds.POD, pod(), {"metadata": {"annotations": {"a": "b"}}},
     "metadata.annotations", {"a": "b"}),
    ("KUBECTL_scale", kinds.DEPLOYMENT, deployment(replicas=2), {"spec": {"replicas": 10}}, "spec.replicas", 10),
    ("KUBECTL_set-image", kinds.DEPLOYMENT, deployment(ctr("app", "a:1"), ctr("sidecar", "s:1")),
     {"spec": {"template": {"spec": {"$setElementOrder/containers": [{"name": "app"}, {"name": "sidecar"}],
                                     "containers": [{"image": "a:2", "name": "app"}]}}}},
     TEMPLATE, [ctr("app", "a:2"), ctr("sidecar", "s:1")]),
    ("retainKeys-clears-unlisted", kinds.DEPLOYMENT,
     deployment(strategy={"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}),
     {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate", "rollingUpdate": None}}},
     "spec.strategy", {"type": "Recreate"}),
    ("map-replace-directive", kinds.POD, pod(nodeSelector={"a": "1", "b": "2"}),
     {"spec": {"nodeSelector": {"$patch": "replace", "c": "3"}}}, "spec.nodeSelector", {"c": "3"}),
    ("map-delete-directive", kinds.POD, pod(nodeSelector={"a": "1"}),
     {"spec": {"nodeSelector": {"$patch": "delete"}}}, "spec.nodeSelector", {}),
    ("null-deletes-key", kinds.DEPLOYMENT, deployment(labels={"a": "1", "b": "2"}),
     {"metadata": {"labels": {"a": None}}}, "metadata.labels", {"b": "2"}),
    ("node-conditions-merged-by-type", kinds.NODE,
     node(conditions=[{"type": "Ready", "status": "True"}, {"type": "MemoryPressure", "status": "False"}]),
     {"status": {"conditions": [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"}]}},
     "status.conditions", [{"type": "Ready", "status": "False", "reason": "KubeletNotReady"},
                           {"type": "MemoryPressure", "status": "False"}]),
    ("node-addresses-merged-by-type", kinds.NODE,
     node(addresses=[{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": "n1"}]),
     {"status": {"addresses": [{"type": "InternalIP", "address": "10.0.0.2"}]}},
     "status.addresses", [{"type": "InternalIP", "address": "10.0.0.2"}, {"type": "Hostname", "address": "n1"}]),
    ("node-images-replaced", kinds.NODE, node(images=[{"names": ["a"]}, {"names": ["b"]}]),
     {"status": {"images": [{"names": ["c"]}]}}, "status.images", [{"names": ["c"]}]),
    ("pod-containerStatuses-replaced", kinds.POD,
     {**pod(), "status": {"containerStatuses": [{"name": "app", "ready": False}, {"name": "x", "ready": False}]}},
     {"status": {"containerStatuses": [{"name": "app", "ready": True}]}},
     "status.containerStatuses", [{"name": "app", "ready": True}]),
    ("pdb-selector-replace-strategy", kinds.PDB, pdb({"app": "a", "tier": "t"}),
     {"spec": {"selector": {"matchLabels": {"app": "b"}}}}, "spec.selector", {"matchLabels": {"app": "b"}}),
    ("deployment-selector-merges", kinds.DEPLOYMENT, deployment(),
     {"spec": {"selector": {"matchLabels": {"tier": "t"}}}}, "spec.selector",
     {"matchLabels": {"app": "web", "tier": "t"}}),
    ("kind-without-table-merges-maps", kinds.CONFIGMAP,
     {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}},
     {"data": {"b": "2"}}, "data", {"a": "1", "b": "2"}),
]


@pytest.mark.parametrize(("kind", "current", "patch", "path", "expected"),
                         [c[1:] for c in SMP_CASES], ids=[c[0] for c in SMP_CASES])
def test_strategic_merge_patch(kind: Kind, current: Obj, patch: Any, path: str, expected: Any) -> None:
    assert dig(patched(kind, current, patch, STRATEGIC_MERGE_PATCH), path) == expected


def test_client_side_apply_patch_as_kubectl_sends_it() -> None:
    """kubectl apply (client-side): a three-way patch with last-applied and ordering/deletion directives."""
    last = '{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":3}}\n'
    current = deployment(ctr("app", "a:1"), ctr("sidecar", "s:1"), replicas=1)
    current["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{}\n", "keep": "me"}
    body = {
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": last}},
        "spec": {"replicas": 3, "template": {"spec": {
            "$setElementOrder/containers": [{"name": "app"}, {"name": "web"}],
            "containers": [{"image": "web:1", "name": "web"}, {"$patch": "delete", "name": "sidecar"}]}}},
    }
    result = patched(kinds.DEPLOYMENT, current, body, STRATEGIC_MERGE_PATCH)
    assert dig(result, TEMPLATE) == [ctr("app", "a:1"), ctr("web", "web:1")]
    assert result["spec"]["replicas"] == 3
    assert result["metadata"]["annotations"] == {"kubectl.kubernetes.io/last-applied-configuration": last,
                                                 "keep": "me"}
    assert "$setElementOrder/containers" not in json.dumps(result)


SMP_ERRORS: list[tuple[str, Obj, Any, int, str]] = [
    ("container-without-merge-key", pod(), {"spec": {"containers": [{"image": "x"}]}},
     400, "does not contain declared merge key: name"),
    ("delete-without-merge-key", pod(), {"spec": {"containers": [{"$patch": "delete"}]}},
     400, "does not contain declared merge key: name"),
    ("merge-directive-in-list", pod(), {"spec": {"containers": [{"$patch": "merge", "name": "app"}]}},
     400, "merging lists cannot yet be specified in the patch"),
    ("unknown-map-directive", {**pod(), "metadata": {"name": "p", "labels": {"a": "1"}}},
     {"metadata": {"labels": {"$patch": "bogus"}}}, 400, "unknown patch type: bogus"),
    ("retainKeys-not-listing-patched-key", deployment(strategy={"type": "RollingUpdate"}),
     {"spec": {"strategy": {"$retainKeys": ["type"], "rollingUpdate": {"maxSurge": 2}}}},
     400, "invalid patch format of retainKeys"),
    ("retainKeys-not-a-list", deployment(strategy={"type": "Recreate"}),
     {"spec": {"strategy": {"$retainKeys": "type"}}}, 400, "invalid patch format of retainKeys"),
    ("setElementOrder-not-a-list", pod(finalizers=["a"]), {"metadata": {"$setElementOrder/finalizers": "a"}},
     400, "invalid patch format of setElementOrder list"),
    ("setElementOrder-without-slash", pod(finalizers=["a"]), {"metadata": {"$setElementOrderfinalizers": ["a"]}},
     400, "invalid patch format of setElementOrder list"),
    ("setElementOrder-disagrees-with-patch", pod(),
     {"spec": {"$setElementOrder/containers": [{"name": "app"}], "containers": [{"name": "other", "image": "x"}]}},
     400, "doesn't match $setElementOrder list"),
    ("deleteFromPrimitiveList-without-slash", pod(finalizers=["a"]),
     {"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}}, 400, "invalid patch format of primitive list"),
    ("list-of-lists", pod(finalizers=["a"]), {"metadata": {"finalizers": [["b"]]}},
     422, "lists of lists are not supported"),
    ("mixed-element-types", pod(finalizers=["a"]), {"metadata": {"finalizers": [1]}},
     400, "list element types are not identical"),
    ("body-is-a-list", pod(), [{"op": "add"}], 400, "cannot unmarshal array"),
    ("body-is-a-string", pod(), "spec", 400, "cannot unmarshal string"),
]


def test_directives_inside_new_values_are_dropped_not_rejected() -> None:
    """Upstream removeDirectives: a value the live object lacks is taken as-is minus directives."""
    body = {"metadata": {"labels": {"$patch": "bogus"}},
            "spec": {"nodeSelector": {"$retainKeys": "x", "a": "1"}}}
    result = patched(kinds.POD, pod(), body, STRATEGIC_MERGE_PATCH)
    assert "labels" not in result["metadata"]
    assert result["spec"]["nodeSelector"] == {"a": "1"}


@pytest.mark.parametrize(("current", "patch", "code", "text"), [c[1:] for c in SMP_ERRORS],
                         ids=[c[0] for c in SMP_ERRORS])
def test_strategic_merge_patch_errors(current: Obj, patch: Any, code: int, text: str) -> None:
    kind = kinds.DEPLOYMENT if current["kind"] == "Deployment" else kinds.POD
    err = fails(apply_patch, kind, current, json.dumps(patch).encode(), STRATEGIC_MERGE_PATCH)
    assert err.code == code
    assert text in err.message


@pytest.mark.parametrize("content_type", [MERGE_PATCH, STRATEGIC_MERGE_PATCH, JSON_PATCH],
                         ids=["merge", "strategic", "json"])
@pytest.mark.parametrize("body", [b"{", b"", b"\xff\xfe", b"{'a': 1}", b"NaN"],
                         ids=["truncated", "empty", "not-utf8", "single-quotes", "nan"])
def test_undecodable_body_is_400(content_type: str, body: bytes) -> None:
    err = fails(apply_patch, kinds.POD, pod(), body, content_type)
    assert (err.code, err.reason, err.message) == (400, "BadRequest", "invalid JSON patch")


def test_merge_patch_that_is_an_array_is_400() -> None:
    err = fails(apply_patch, kinds.POD, pod(), b"[1, 2]", MERGE_PATCH)
    assert (err.code, err.reason) == (400, "BadRequest")


def test_apply_bodies_are_not_for_apply_patch() -> None:
    err = fails(apply_patch, kinds.POD, pod(), b"{}", APPLY_PATCH_YAML)
    assert err.code == 500


def test_table_records_upstream_strategies_exactly() -> None:
    """Spot checks against the Go struct tags: the ones that are easy to get wrong."""
    pods, nodes = MERGE_KEYS["pods"], MERGE_KEYS["nodes"]
    assert (pods["spec.containers"].strategy, pods["spec.containers"].merge_key) == ("merge", "name")
    assert pods["spec.containers[].ports"].keys == ("containerPort", "protocol")
    assert pods["spec.containers[].ports"].merge_key == "containerPort"
    assert pods["spec.tolerations"].strategy == "" and pods["spec.tolerations"].ssa == "atomic"
    assert nodes["spec.taints"].strategy == ""
    assert nodes["status.images"].strategy == ""
    assert (nodes["status.addresses"].strategy, nodes["status.addresses"].merge_key) == ("merge", "type")
    assert pods["status.hostIPs"].strategy == "merge" and pods["status.hostIPs"].ssa == "atomic"
    assert pods["metadata.finalizers"].ssa == "set" and pods["metadata.finalizers"].merge_key == ""
    deploys = MERGE_KEYS["deployments.apps"]
    assert deploys["spec.template.spec.containers[].env"].merge_key == "name"
    assert "spec.template.spec.tolerations" in deploys and deploys["spec.template.spec.tolerations"].strategy == ""


# ----------------------------------------------------------------------------- server-side apply


def applied_deployment(replicas: int | None = 3, labels: dict[str, str] | None = None,
                       containers: list[Obj] | None = None) -> Obj:
    cfg: Obj = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "default"}}
    spec: Obj = {}
    if labels is not None:
        cfg["metadata"]["labels"] = labels
    if replicas is not None:
        spec["replicas"] = replicas
    if containers is not None:
        spec["template"] = {"spec": {"containers": containers}}
    if spec:  # an empty "spec: {}" would be owned as a leaf, as upstream does
        cfg["spec"] = spec
    return cfg


def ssa(current: Obj | None, cfg: Obj, manager: str, now: str = T0, *, force: bool = False,
        kind: Kind = kinds.DEPLOYMENT) -> Obj:
    before = (json.dumps(current, sort_keys=True), json.dumps(cfg, sort_keys=True))
    result = server_side_apply(kind, current, cfg, manager, force=force, now=now)
    assert (json.dumps(current, sort_keys=True), json.dumps(cfg, sort_keys=True)) == before, "inputs mutated"
    return result


def test_apply_create_records_fieldsv1_like_upstream() -> None:
    cfg = applied_deployment(labels={"app": "web"}, containers=[ctr("app", ports=[{"containerPort": 80}])])
    obj = ssa(None, cfg, "kubectl")
    assert obj["spec"]["replicas"] == 3
    assert obj["metadata"]["managedFields"] == [{
        "manager": "kubectl", "operation": "Apply", "apiVersion": "apps/v1", "time": T0,
        "fieldsType": "FieldsV1",
        "fieldsV1": {
            "f:metadata": {"f:labels": {"f:app": {}}},
            "f:spec": {
                "f:replicas": {},
                "f:template": {"f:spec": {"f:containers": {'k:{"name":"app"}': {
                    ".": {}, "f:image": {}, "f:name": {},
                    "f:ports": {'k:{"containerPort":80,"protocol":"TCP"}': {".": {}, "f:containerPort": {}}},
                }}}},
            },
        },
    }]


def test_reapply_unchanged_config_changes_only_the_time() -> None:
    cfg = applied_deployment(labels={"a": "1"}, containers=[ctr("app")])
    first = ssa(None, cfg, "kubectl", T0)
    second = ssa(first, cfg, "kubectl", T1)
    assert second["metadata"]["managedFields"][0]["time"] == T1
    assert without_times(second) == without_times(first)


@pytest.mark.parametrize(("old_cfg", "new_cfg", "path", "expected"), [
    (applied_deployment(labels={"a": "1", "b": "2"}), applied_deployment(labels={"a": "1"}),
     "metadata.labels", {"a": "1"}),
    (applied_deployment(labels={"a": "1"}), applied_deployment(), "metadata.labels", ABSENT),
    (applied_deployment(replicas=3), applied_deployment(replicas=None), "spec.replicas", ABSENT),
    (applied_deployment(containers=[ctr("app"), ctr("side")]), applied_deployment(containers=[ctr("app")]),
     TEMPLATE, [ctr("app")]),
    (applied_deployment(containers=[ctr("app", ports=[{"containerPort": 80}, {"containerPort": 81}])]),
     applied_deployment(containers=[ctr("app", ports=[{"containerPort": 81}])]),
     TEMPLATE, [ctr("app", ports=[{"containerPort": 81}])]),
], ids=["one-label", "all-labels", "replicas", "container", "port"])
def test_field_dropped_from_config_is_removed(old_cfg: Obj, new_cfg: Obj, path: str, expected: Any) -> None:
    obj = ssa(ssa(None, old_cfg, "kubectl"), new_cfg, "kubectl", T1)
    assert dig(obj, path) == expected


def test_dropped_field_survives_when_another_manager_owns_it() -> None:
    obj = ssa(None, applied_deployment(labels={"a": "1", "b": "2"}), "alice")
    obj = ssa(obj, applied_deployment(replicas=None, labels={"b": "2"}), "bob", T1)  # same value: shared
    obj = ssa(obj, applied_deployment(labels={"a": "1"}), "alice", T2)
    assert obj["metadata"]["labels"] == {"a": "1", "b": "2"}
    assert fields_of(obj, "bob") == {"f:metadata": {"f:labels": {"f:b": {}}}}


def test_appliers_own_different_items_of_one_list() -> None:
    obj = ssa(None, applied_deployment(containers=[ctr("app", "a:1")]), "alice")
    obj = ssa(obj, applied_deployment(replicas=None, containers=[ctr("side", "s:1")]), "bob", T1)
    obj = ssa(obj, applied_deployment(containers=[ctr("app", "a:2")]), "alice", T2)
    assert dig(obj, TEMPLATE) == [ctr("app", "a:2"), ctr("side", "s:1")]
    obj = ssa(obj, applied_deployment(replicas=None, containers=[]), "bob", T2)
    assert dig(obj, TEMPLATE) == [ctr("app", "a:2")]


CONFLICTS: list[tuple[str, Obj, Obj, str, list[str]]] = [
    ("one-field", applied_deployment(replicas=3), applied_deployment(replicas=5),
     'Apply failed with 1 conflict: conflict with "alice": .spec.replicas', [".spec.replicas"]),
    ("container-image", applied_deployment(replicas=None, containers=[ctr("app", "a:1")]),
     applied_deployment(replicas=None, containers=[ctr("app", "a:2")]),
     'Apply failed with 1 conflict: conflict with "alice": .spec.template.spec.containers[name="app"].image',
     ['.spec.template.spec.containers[name="app"].image']),
    ("two-fields", applied_deployment(replicas=3, labels={"x": "1"}), applied_deployment(replicas=4, labels={"x": "2"}),
     'Apply failed with 2 conflicts: conflicts with "alice":\n- .metadata.labels.x\n- .spec.replicas',
     [".metadata.labels.x", ".spec.replicas"]),
]


@pytest.mark.parametrize(("first", "second", "message", "fields"), [c[1:] for c in CONFLICTS],
                         ids=[c[0] for c in CONFLICTS])
def test_second_applier_conflicts(first: Obj, second: Obj, message: str, fields: list[str]) -> None:
    obj = ssa(None, first, "alice")
    err = fails(server_side_apply, kinds.DEPLOYMENT, obj, second, "bob", force=False, now=T1)
    assert (err.code, err.reason, err.message) == (409, "Conflict", message)
    assert [c.field for c in err.causes] == fields
    assert {c.reason for c in err.causes} == {"FieldManagerConflict"}
    assert err.causes[0].message == 'conflict with "alice"'


def test_same_value_is_shared_not_a_conflict() -> None:
    obj = ssa(None, applied_deployment(replicas=3), "alice")
    obj = ssa(obj, applied_deployment(replicas=3), "bob", T1)
    assert fields_of(obj, "alice") == fields_of(obj, "bob") == {"f:spec": {"f:replicas": {}}}


def test_force_takes_ownership() -> None:
    obj = ssa(None, applied_deployment(replicas=3, labels={"a": "1"}), "alice")
    obj = ssa(obj, applied_deployment(replicas=5), "bob", T1, force=True)
    assert obj["spec"]["replicas"] == 5
    assert fields_of(obj, "alice") == {"f:metadata": {"f:labels": {"f:a": {}}}}
    assert fields_of(obj, "bob") == {"f:spec": {"f:replicas": {}}}
    err = fails(server_side_apply, kinds.DEPLOYMENT, obj, applied_deployment(replicas=3, labels={"a": "1"}),
                "alice", force=False, now=T2)
    assert err.message == 'Apply failed with 1 conflict: conflict with "bob": .spec.replicas'


@pytest.mark.parametrize(("manager", "subresource", "who"), [
    ("kubectl-scale", "scale", '"kubectl-scale" with subresource "scale" using apps/v1'),
    ("kubectl-client-side-apply", "", '"kubectl-client-side-apply" using apps/v1'),
], ids=["scale-subresource", "patch-of-object"])
def test_update_after_apply_makes_the_next_apply_conflict(manager: str, subresource: str, who: str) -> None:
    obj = ssa(None, applied_deployment(replicas=3, labels={"a": "1"}), "kubectl")
    scaled = apply_patch(kinds.DEPLOYMENT, obj, b'{"spec":{"replicas":10}}', MERGE_PATCH)
    obj = record_update(obj, scaled, manager, T1, kind=kinds.DEPLOYMENT, subresource=subresource)
    assert fields_of(obj, manager, "Update") == {"f:spec": {"f:replicas": {}}}
    assert fields_of(obj, "kubectl", "Apply") == {"f:metadata": {"f:labels": {"f:a": {}}}}
    err = fails(server_side_apply, kinds.DEPLOYMENT, obj, applied_deployment(replicas=3, labels={"a": "1"}),
                "kubectl", force=False, now=T2)
    assert err.message == f"Apply failed with 1 conflict: conflict with {who}: .spec.replicas"
    assert ssa(obj, applied_deployment(replicas=3, labels={"a": "1"}), "kubectl", T2, force=True)["spec"][
        "replicas"] == 3


def test_first_apply_to_untracked_object_conflicts_with_before_first_apply() -> None:
    live = deployment(replicas=1)
    err = fails(server_side_apply, kinds.DEPLOYMENT, live, applied_deployment(replicas=3), "kubectl",
                force=False, now=T0)
    assert err.message == ('Apply failed with 1 conflict: conflict with "before-first-apply" using apps/v1: '
                           ".spec.replicas")
    obj = ssa(live, applied_deployment(replicas=1), "kubectl")
    assert fields_of(obj, "kubectl") == {"f:spec": {"f:replicas": {}}}
    assert "f:replicas" in fields_of(obj, "before-first-apply")["f:spec"]


def test_status_is_not_owned_through_the_main_resource() -> None:
    cfg = {**applied_deployment(), "status": {"replicas": 7}}
    obj = ssa(None, cfg, "kubectl")
    assert "f:status" not in fields_of(obj, "kubectl")


SSA_ERRORS: list[tuple[str, Obj, str, int, str]] = [
    ("other-kind", {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web"}}, "kubectl",
     400, "invalid object type: /v1, Kind=Pod"),
    ("no-type", {"metadata": {"name": "web"}}, "kubectl", 400, "invalid object type: /, Kind="),
    ("managed-fields-in-config", {**applied_deployment(), "metadata": {"name": "web", "managedFields": []}},
     "kubectl", 400, "metadata.managedFields must be nil"),
    ("item-without-key", applied_deployment(containers=[{"image": "x"}]), "kubectl",
     400, 'omits key field "name"'),
    ("duplicate-keys", applied_deployment(containers=[ctr("app"), ctr("app")]), "kubectl",
     400, 'duplicate entries for key [name="app"]'),
    ("no-manager", applied_deployment(), "", 422, "fieldManager: Required value"),
]


@pytest.mark.parametrize(("cfg", "manager", "code", "text"), [c[1:] for c in SSA_ERRORS],
                         ids=[c[0] for c in SSA_ERRORS])
def test_apply_errors(cfg: Obj, manager: str, code: int, text: str) -> None:
    err = fails(server_side_apply, kinds.DEPLOYMENT, None, cfg, manager, force=False, now=T0)
    assert err.code == code
    assert text in err.message


# ----------------------------------------------------------------------------- record_update


def test_create_is_tracked_without_identity_or_status_fields() -> None:
    new = {**deployment(replicas=2), "status": {"replicas": 0}}
    obj = record_update(None, new, "kubectl-create", T0)
    entry = obj["metadata"]["managedFields"][0]
    assert (entry["manager"], entry["operation"], entry["apiVersion"], entry["time"]) == (
        "kubectl-create", "Update", "apps/v1", T0)
    assert "f:metadata" not in entry["fieldsV1"]  # name and namespace are never owned
    assert "f:status" not in entry["fieldsV1"]
    assert entry["fieldsV1"]["f:spec"]["f:replicas"] == {}
    assert "managedFields" not in new["metadata"]


def test_update_of_untracked_object_stays_untracked() -> None:
    live = deployment(replicas=1)
    obj = record_update(live, deployment(replicas=4), "kubectl-edit", T1)
    assert "managedFields" not in obj["metadata"]


def test_update_moves_changed_fields_and_drops_removed_ones() -> None:
    obj = ssa(None, applied_deployment(replicas=None, labels={"a": "1", "b": "2", "c": "3"}), "alice")
    new = json.loads(json.dumps(obj))
    new["metadata"]["labels"] = {"a": "9", "b": "2"}  # change a, keep b, remove c
    obj = record_update(obj, new, "kubectl-label", T1, kind=kinds.DEPLOYMENT)
    assert fields_of(obj, "alice") == {"f:metadata": {"f:labels": {"f:b": {}}}}
    assert fields_of(obj, "kubectl-label") == {"f:metadata": {"f:labels": {"f:a": {}}}}


def test_explicit_empty_managed_fields_clears_them() -> None:
    obj = ssa(None, applied_deployment(), "alice")
    new = json.loads(json.dumps(obj))
    new["metadata"]["managedFields"] = []
    assert "managedFields" not in record_update(obj, new, "kubectl", T1)["metadata"]


def test_update_managers_are_capped() -> None:
    obj = record_update(None, deployment(), "creator", T0)
    for i in range(MAX_UPDATE_MANAGERS + 2):
        new = json.loads(json.dumps(obj))
        new["metadata"].setdefault("labels", {})[f"l{i}"] = "x"
        obj = record_update(obj, new, f"writer-{i}", f"2024-05-01T10:{i + 1:02d}:00Z")
    updaters = [e for e in obj["metadata"]["managedFields"] if e["operation"] == "Update"]
    assert len(updaters) == MAX_UPDATE_MANAGERS
    ancient = [e for e in updaters if e["manager"] == "ancient-changes"]
    assert len(ancient) == 1
    assert "f:spec" in ancient[0]["fieldsV1"] and "f:l0" in ancient[0]["fieldsV1"]["f:metadata"]["f:labels"]


# ----------------------------------------------------------------------------- apply body decoding


@pytest.mark.parametrize(("body", "expected"), [
    (b"apiVersion: v1\nkind: ConfigMap\ndata:\n  day: 2024-01-01\n  n: 3\n",
     {"apiVersion": "v1", "kind": "ConfigMap", "data": {"day": "2024-01-01", "n": 3}}),
    (b'{"apiVersion": "v1", "kind": "Pod"}', {"apiVersion": "v1", "kind": "Pod"}),
    (b"a:\n  1: one\n", {"a": {"1": "one"}}),
], ids=["yaml-dates-stay-strings", "json", "int-keys-become-strings"])
def test_parse_apply_body(body: bytes, expected: Obj) -> None:
    assert parse_apply_body(body) == expected


LAUGHS = b"a: &a [x, x, x, x, x, x, x, x, x, x]\n" + b"".join(
    b"%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n" % ((c + 1, c + 1) + (c,) * 10)
    for c in range(ord("a"), ord("h")))


@pytest.mark.parametrize("body", [b"- a\n- b\n", b"a: [1\n", b"a: .nan\n", b"just text", b"", LAUGHS,
                                  b"a: &x [*x]\n"],
                         ids=["list", "broken-yaml", "nan", "scalar", "empty", "billion-laughs", "self-alias"])
def test_parse_apply_body_rejects_non_objects(body: bytes) -> None:
    err = fails(parse_apply_body, body)
    assert (err.code, err.reason) == (400, "BadRequest")


# ----------------------------------------------------------------------------- "." self-markers
#
# Upstream structured-merge-diff serialises a path that is both owned and holds owned children
# with a ".": {} entry (fieldpath/serialize.go). What an Update owns is TypedValue.Compare's
# Added + Modified (typed/compare.go): every leaf it set, and every map, list or list item that
# was absent before the write (a walker with no lhs inserts its own path). A create compares with
# the kind's Go zero value, where struct fields (spec, template, template.spec) and the
# non-omitempty containers list already exist, but maps such as labels and every list item do not.


def _configmap(data: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> Obj:
    body: Obj = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default"}}
    if labels is not None:
        body["metadata"]["labels"] = labels
    if data is not None:
        body["data"] = data
    return body


def _tracked_configmap(**kwargs: Any) -> Obj:
    return record_update(None, _configmap(**kwargs), "creator", T0)


_CTR_ITEM = {".": {}, "f:image": {}, "f:name": {}, "f:resources": {".": {}, "f:limits": {".": {}, "f:cpu": {}}}}


@pytest.mark.parametrize(("current", "new", "manager", "expected"), [
    (None, _configmap(data={"a": "1"}, labels={"app": "x"}), "creator",
     {"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}}),
    (None, deployment(ctr("app", resources={"limits": {"cpu": "1"}})), "creator",
     {"f:spec": {"f:replicas": {}, "f:selector": {},
                 "f:template": {"f:metadata": {"f:labels": {".": {}, "f:app": {}}},
                                "f:spec": {"f:containers": {'k:{"name":"app"}': _CTR_ITEM}}}}}),
    (_tracked_configmap(data={"a": "1"}), _configmap(data={"a": "1"}, labels={"app": "x"}), "labeller",
     {"f:metadata": {"f:labels": {".": {}, "f:app": {}}}}),
    (_tracked_configmap(data={"a": "1"}, labels={"app": "x"}), _configmap(data={"a": "1"}, labels={"app": "y"}),
     "labeller", {"f:metadata": {"f:labels": {"f:app": {}}}}),
    (_tracked_configmap(data={"a": "1"}), _configmap(data={"a": "1", "b": "2"}), "writer",
     {"f:data": {"f:b": {}}}),
    (_tracked_configmap(data={"a": "1"}, labels={}), _configmap(data={"a": "1"}, labels={"app": "x"}), "labeller",
     {"f:metadata": {"f:labels": {"f:app": {}}}}),
], ids=["create-maps", "create-structs-and-items", "update-adds-map", "update-changes-map", "update-adds-key",
        "update-fills-empty-map"])
def test_update_owns_the_maps_it_adds(current: Obj | None, new: Obj, manager: str, expected: Obj) -> None:
    obj = record_update(current, new, manager, T1)
    assert fields_of(obj, manager, "Update") == expected


def test_update_that_removes_a_map_drops_its_dot_from_every_manager() -> None:
    obj = _tracked_configmap(data={"a": "1"}, labels={"app": "x"})
    assert fields_of(obj, "creator")["f:metadata"] == {"f:labels": {".": {}, "f:app": {}}}
    obj = record_update(obj, _configmap(data={"a": "1"}), "unlabeller", T1)
    assert fields_of(obj, "creator") == {"f:data": {".": {}, "f:a": {}}}
    assert all(e["manager"] != "unlabeller" for e in obj["metadata"]["managedFields"])  # it owns nothing


def test_apply_owns_list_items_but_not_the_maps_of_its_config() -> None:
    """ToFieldSet (typed/tofieldset.go) inserts list items and keys of map-typed maps, not struct fields."""
    cfg = applied_deployment(labels={"app": "web"}, containers=[ctr("app", resources={"limits": {"cpu": "1"}})])
    obj = ssa(None, cfg, "kubectl")
    assert fields_of(obj, "kubectl", "Apply") == {
        "f:metadata": {"f:labels": {"f:app": {}}},
        "f:spec": {"f:replicas": {}, "f:template": {"f:spec": {"f:containers": {'k:{"name":"app"}': {
            ".": {}, "f:image": {}, "f:name": {}, "f:resources": {"f:limits": {"f:cpu": {}}}}}}}}}
