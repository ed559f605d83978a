"""Discovery and OpenAPI, generated from the kind registry.

Clients learn what a server serves from these documents; all of them are
built once per process from :func:`emulator.api.kinds.all_kinds` and cached
as bytes, so a new kind appears everywhere with no code here.

* ``/version`` (upstream ``version.Info``). kemu reports Kubernetes 1.32, the
  API level it emulates; ``gitVersion`` carries a ``-kemu`` suffix.
* Legacy discovery: ``/api`` (APIVersions), ``/apis`` (APIGroupList),
  ``/apis/{group}`` (APIGroup), ``/api/v1`` and ``/apis/{group}/{version}``
  (APIResourceList, subresources listed as ``pods/status``).
* Aggregated discovery (KEP-3352), which kubectl 1.32 asks for first:
  ``/api`` and ``/apis`` with ``Accept: application/json;g=apidiscovery.k8s.io;
  v=v2;as=APIGroupDiscoveryList`` (v2beta1 too) answer every group, version,
  resource and subresource in one document. The response's ``Content-Type``
  names the kind: client-go only treats it as aggregated when it does.
* OpenAPI v3: ``/openapi/v3`` lists one document per group-version and each
  document holds, per kind, its paths and a PATCH operation carrying the
  ``x-kubernetes-group-version-kind`` extension and the ``fieldValidation``
  query parameter. That is what ``kubectl`` (``resource.NewQueryParamVerifierV3``,
  ``staging/src/k8s.io/cli-runtime/pkg/resource/query_param_verifier_v3.go``)
  looks for to decide that the server validates fields itself, so
  ``kubectl apply`` needs no client-side schema (and no ``--validate=false``).
  The PATCH operations deliberately do not list
  ``application/strategic-merge-patch+json`` in their request bodies: kubectl
  then computes client-side-apply patches from its compiled-in Go types (which
  know every merge key) instead of from kemu's schema-less documents.
  Schemas come from :mod:`.openapi` (generated from the protobuf field
  table), so ``kubectl explain pod.spec.containers`` walks real fields.
* OpenAPI v2: ``/openapi/v2`` is one Swagger 2.0 document with the same
  schemas, as JSON or, for client-go, as gnostic protobuf (:mod:`.openapi_proto`).

Subresources served by :mod:`emulator.apiserver.handlers` are described in
:data:`SUBRESOURCES` (verbs and the kind they answer with).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import lru_cache

import orjson

from emulator.api.kinds import Kind, served_kinds
from emulator.api.types import Obj
from emulator.apiserver import openapi, openapi_proto
from emulator.apiserver.aggregated import AGGREGATED

KUBE_MAJOR, KUBE_MINOR = "1", "32"
GIT_VERSION = f"v{KUBE_MAJOR}.{KUBE_MINOR}.0-kemu"


@dataclass(frozen=True)
class Subresource:
    verbs: tuple[str, ...]
    group: str | None  # None: the parent's group/version/kind
    version: str = ""
    kind: str = ""


# What each subresource answers and accepts; only these are routed (others in Kind.subresources 404).
SUBRESOURCES: dict[str, Subresource] = {
    "status": Subresource(("get", "patch", "update"), None),
    "scale": Subresource(("get", "patch", "update"), "autoscaling", "v1", "Scale"),
    "binding": Subresource(("create",), "", "v1", "Binding"),
    "eviction": Subresource(("create",), "policy", "v1", "Eviction"),
    "log": Subresource(("get",), "", "v1", "Pod"),
    # Namespace finalize: what the namespace controller (and `kubectl replace --raw .../finalize`) uses to
    # drop spec.finalizers of a terminating namespace.
    "finalize": Subresource(("update",), None),
}


def served_subresources(kind: Kind) -> list[str]:
    return [s for s in kind.subresources if s in SUBRESOURCES]


def version_info() -> Obj:
    return {"major": KUBE_MAJOR, "minor": KUBE_MINOR, "emulationMajor": KUBE_MAJOR, "emulationMinor": KUBE_MINOR,
            "gitVersion": GIT_VERSION, "gitCommit": "", "gitTreeState": "clean",
            "buildDate": "1970-01-01T00:00:00Z", "goVersion": "python", "compiler": "kemu",
            "platform": "linux/amd64"}


def _group_versions() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k in served_kinds():
        versions = out.setdefault(k.group, [])
        if k.version not in versions:
            versions.append(k.version)
    for api in AGGREGATED.values():  # groups served by a provider (metrics.k8s.io), listed like any other
        versions = out.setdefault(api.group, [])
        if api.version not in versions:
            versions.append(api.version)
    return out


def _kinds_of(group: str, version: str) -> list[Kind]:
    return sorted((k for k in served_kinds() if k.group == group and k.version == version), key=lambda k: k.plural)


def _storage_hash(kind: Kind) -> str:
    # Upstream storageVersionHash: an opaque, stable hash of the storage group/version/kind.
    return hashlib.sha256(f"{kind.api_version}/{kind.kind}".encode()).digest()[:8].hex()


# ----------------------------------------------------------------------------- legacy discovery
def api_versions(server_address: str) -> Obj:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def _group_doc(group: str, versions: list[str]) -> Obj:
    gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
    return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}


def api_group_list() -> Obj:
    groups = [_group_doc(g, vs) for g, vs in sorted(_group_versions().items()) if g]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(group: str) -> Obj | None:
    versions = _group_versions().get(group) if group else None
    if not versions:
        return None
    return {"kind": "APIGroup", "apiVersion": "v1", **_group_doc(group, versions)}


def api_resource_list(group: str, version: str) -> Obj | None:
    api = AGGREGATED.get(group)
    if api is not None and api.version == version:
        return dict(api.resource_list)
    kinds = _kinds_of(group, version)
    if not kinds:
        return None
    resources: list[Obj] = []
    for k in kinds:
        entry: Obj = {"name": k.plural, "singularName": k.singular, "namespaced": k.namespaced, "kind": k.kind,
                      "verbs": list(k.verbs), "storageVersionHash": _storage_hash(k)}
        if k.short_names:
            entry["shortNames"] = list(k.short_names)
        if k.categories:
            entry["categories"] = list(k.categories)
        resources.append(entry)
        for name in served_subresources(k):
            sub = SUBRESOURCES[name]
            item: Obj = {"name": f"{k.plural}/{name}", "singularName": "", "namespaced": k.namespaced,
                         "kind": sub.kind or k.kind, "verbs": list(sub.verbs)}
            if sub.group is not None:
                item["group"], item["version"] = sub.group, sub.version
            resources.append(item)
    gv = f"{group}/{version}" if group else version
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}


# ----------------------------------------------------------------------------- aggregated discovery
def _aggregated_resource(k: Kind) -> Obj:
    entry: Obj = {"resource": k.plural, "responseKind": {"group": k.group, "version": k.version, "kind": k.kind},
                  "scope": "Namespaced" if k.namespaced else "Cluster", "singularResource": k.singular,
                  "verbs": list(k.verbs)}
    if k.short_names:
        entry["shortNames"] = list(k.short_names)
    if k.categories:
        entry["categories"] = list(k.categories)
    subs = []
    for name in served_subresources(k):
        sub = SUBRESOURCES[name]
        kind = ({"group": k.group, "version": k.version, "kind": k.kind} if sub.group is None
                else {"group": sub.group, "version": sub.version, "kind": sub.kind})
        subs.append({"subresource": name, "responseKind": kind, "verbs": list(sub.verbs)})
    if subs:
        entry["subresources"] = subs
    return entry


def _aggregated_resources(group: str, version: str) -> list[Obj]:
    api = AGGREGATED.get(group)
    if api is not None and api.version == version:
        return [{"resource": r["name"], "responseKind": {"group": group, "version": version, "kind": r["kind"]},
                 "scope": "Namespaced" if r["namespaced"] else "Cluster", "singularResource": r["name"].rstrip("s"),
                 "verbs": list(r["verbs"])} for r in api.resources
                if "/" not in r["name"]]  # custom metrics' "pods/<metric>": legacy discovery lists them
    return [_aggregated_resource(k) for k in _kinds_of(group, version)]


def aggregated(legacy: bool, version: str) -> Obj:
    """The APIGroupDiscoveryList of ``/api`` (``legacy``) or ``/apis``."""
    items = []
    for group, versions in sorted(_group_versions().items()):
        if (group == "") != legacy:
            continue
        vdocs = [{"version": v, "resources": _aggregated_resources(group, v), "freshness": "Current"}
                 for v in versions]
        meta: Obj = {"name": group, "creationTimestamp": None} if group else {"creationTimestamp": None}
        items.append({"metadata": meta, "versions": vdocs})
    return {"kind": "APIGroupDiscoveryList", "apiVersion": f"apidiscovery.k8s.io/{version}",
            "metadata": {}, "items": items}


# ----------------------------------------------------------------------------- OpenAPI v3
def _gv_path(group: str, version: str) -> str:
    return f"api/{version}" if not group else f"apis/{group}/{version}"


def _schema_name(k: Kind) -> str:
    return openapi.kind_definition_name(k)


_QUERY = ("dryRun", "fieldManager", "fieldValidation")


def _operation(k: Kind, verb: str, action: str, ref: str, *, patch: bool = False, body: bool = False) -> Obj:
    op: Obj = {"operationId": f"{verb}{k.kind}", "tags": [k.group or "core"],
               "x-kubernetes-action": action,
               "x-kubernetes-group-version-kind": {"group": k.group, "version": k.version, "kind": k.kind},
               "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": ref}}}}}}
    if patch or body:
        op["parameters"] = [{"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
                            for n in (*_QUERY, *(("force",) if patch else ()))]
    if patch:
        # No strategic-merge-patch+json here on purpose: see the module docstring.
        op["requestBody"] = {"content": {ct: {"schema": {"type": "object"}} for ct in (
            "application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml")}}
    elif body:
        op["requestBody"] = {"content": {"application/json": {"schema": {"$ref": ref}}}}
    return op


def openapi_v3_document(group: str, version: str) -> Obj | None:
    kinds = _kinds_of(group, version)
    if not kinds:
        return None
    prefix = "/" + _gv_path(group, version)
    paths: Obj = {}
    schemas: Obj = openapi.definitions(kinds, "#/components/schemas/")
    for k in kinds:
        ref = f"#/components/schemas/{_schema_name(k)}"
        if "create" in k.verbs and len(k.verbs) == 1:  # reviews: POST only
            scope = f"{prefix}/namespaces/{{namespace}}/{k.plural}" if k.namespaced else f"{prefix}/{k.plural}"
            paths[scope] = {"post": _operation(k, "create", "post", ref, body=True)}
            continue
        scope = f"{prefix}/namespaces/{{namespace}}/{k.plural}" if k.namespaced else f"{prefix}/{k.plural}"
        paths[scope] = {"get": _operation(k, "list", "list", ref),
                        "post": _operation(k, "create", "post", ref, body=True)}
        item = f"{scope}/{{name}}"
        paths[item] = {"get": _operation(k, "read", "get", ref), "put": _operation(k, "replace", "put", ref, body=True),
                       "patch": _operation(k, "patch", "patch", ref, patch=True),
                       "delete": _operation(k, "delete", "delete", ref)}
        if "status" in served_subresources(k):
            paths[f"{item}/status"] = {"get": _operation(k, "read", "get", ref),
                                       "put": _operation(k, "replace", "put", ref, body=True),
                                       "patch": _operation(k, "patch", "patch", ref, patch=True)}
    return {"openapi": "3.0.0", "info": {"title": "Kubernetes (kemu)", "version": GIT_VERSION},
            "paths": paths, "components": {"schemas": schemas}}


@lru_cache(maxsize=64)
def openapi_v3_bytes(group: str, version: str) -> bytes | None:
    doc = openapi_v3_document(group, version)
    return None if doc is None else orjson.dumps(doc)


@lru_cache(maxsize=1)
def openapi_v3_index() -> bytes:
    paths = {}
    for group, versions in sorted(_group_versions().items()):
        for v in versions:
            body = openapi_v3_bytes(group, v) or b""
            digest = hashlib.sha512(body).hexdigest()[:64].upper()
            paths[_gv_path(group, v)] = {"serverRelativeURL": f"/openapi/v3/{_gv_path(group, v)}?hash={digest}"}
    return orjson.dumps({"paths": paths})


# ----------------------------------------------------------------------------- OpenAPI v2
def _v2_operation(k: Kind, verb: str, action: str, ref: str, *, body: bool = False, patch: bool = False) -> Obj:
    op: Obj = {"operationId": f"{verb}{k.kind}", "tags": [k.group or "core"], "x-kubernetes-action": action,
               "x-kubernetes-group-version-kind": {"group": k.group, "version": k.version, "kind": k.kind},
               "produces": ["application/json", "application/yaml"],
               "responses": {"200": {"description": "OK", "schema": {"$ref": ref}}}}
    if body or patch:
        params: list[Obj] = [{"name": "body", "in": "body", "required": True,
                              "schema": {"type": "object"} if patch else {"$ref": ref}}]
        params += [{"name": n, "in": "query", "type": "string", "uniqueItems": True}
                   for n in (*_QUERY, *(("force",) if patch else ()))]
        op["parameters"] = params
        if patch:  # no strategic-merge-patch+json, for the reason in the module docstring
            op["consumes"] = ["application/json-patch+json", "application/merge-patch+json",
                              "application/apply-patch+yaml"]
    return op


def openapi_v2_document() -> Obj:
    """One Swagger 2.0 document for every group version (``/openapi/v2``), schemas from :mod:`.openapi`."""
    kinds = openapi.served_kinds()
    paths: Obj = {}
    for k in kinds:
        ref = f"#/definitions/{_schema_name(k)}"
        prefix = "/" + _gv_path(k.group, k.version)
        scope = f"{prefix}/namespaces/{{namespace}}/{k.plural}" if k.namespaced else f"{prefix}/{k.plural}"
        if k.verbs == ("create",):
            paths[scope] = {"post": _v2_operation(k, "create", "post", ref, body=True)}
            continue
        paths[scope] = {"get": _v2_operation(k, "list", "list", ref),
                        "post": _v2_operation(k, "create", "post", ref, body=True)}
        paths[f"{scope}/{{name}}"] = {"get": _v2_operation(k, "read", "get", ref),
                                      "put": _v2_operation(k, "replace", "put", ref, body=True),
                                      "patch": _v2_operation(k, "patch", "patch", ref, patch=True),
                                      "delete": _v2_operation(k, "delete", "delete", ref)}
    return {"swagger": "2.0", "info": {"title": "Kubernetes (kemu)", "version": GIT_VERSION}, "paths": paths,
            "definitions": openapi.definitions(kinds, "#/definitions/")}


@lru_cache(maxsize=1)
def openapi_v2_bytes() -> bytes:
    return orjson.dumps(openapi_v2_document())


@lru_cache(maxsize=1)
def openapi_v2_protobuf() -> bytes:
    return openapi_proto.document(openapi_v2_document())


def etag(body: bytes) -> str:
    return '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
