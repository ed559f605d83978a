"""The REST verbs and subresources, on top of the server core.

Each handler takes a :class:`Call` (the parsed request) and returns the
object to send and its HTTP status; :mod:`emulator.apiserver.app` does the
HTTP. Handlers are synchronous: they call the synchronous
:class:`~emulator.server.core.ServerCore`, whose single-object operations are
one or two Redis round trips (~0.1 ms each), so the app runs them directly on
the event loop and sends only lists and deletecollection to a worker thread.

What comes from where upstream (``staging/src/k8s.io/apiserver/pkg/endpoints/handlers``):

* create (``create.go``): the body's namespace must match the URL's (400),
  cluster-scoped objects lose a namespace they carry, ``dryRun=All`` stores
  nothing, 201 Created. ``fieldValidation`` (create and update): fields the
  kind's schema (:mod:`.openapi`, from the protobuf field table) does not
  have are a 400 ``strict decoding error`` under ``Strict``, a ``Warning``
  header under ``Warn`` (the default) and nothing under ``Ignore``; they are
  kept, where upstream's decoder drops them.
* update (``update.go``): the name and namespace in the body must match the
  URL (400); with ``metadata.resourceVersion`` the write is conditional (409
  when stale), without it it is unconditional.
* patch (``patch.go``): the four patch types go to :mod:`emulator.apiserver.patch`.
  The patch is re-applied to the latest object on conflict unless the patch
  itself pins ``metadata.resourceVersion``; server-side apply creates a missing
  object (201). A patch may not rename the object (400).
* managedFields: every create, update and patch is recorded for its field
  manager (``fieldManager``, else the User-Agent's product token, upstream
  ``managerOrUserAgent``) with :func:`~emulator.apiserver.patch.record_update`.
* delete (``delete.go``): DeleteOptions from the body, or from the query when
  the body is empty; preconditions (uid, resourceVersion); an object that is
  only marked for deletion (graceful pod deletion, finalizers) is returned as
  it now is, an object that is gone answers ``Status Success`` with its
  name/kind/uid, except pods, which return the deleted object as upstream's
  pod registry does (``ReturnDeletedObject``).
* deletecollection: list with the selectors, delete each, return the list of
  what was deleted.
* subresources: ``status`` (get/put/patch), ``scale`` (autoscaling/v1 Scale
  of deployments and replicasets, ``pkg/registry/apps/deployment/storage``),
  ``binding`` (upstream ``BindingREST``, delegated to :meth:`ServerCore.bind`:
  sets ``spec.nodeName`` and the PodScheduled condition atomically; a bound or
  deleting pod, or a node without room, is 409), ``eviction`` (delegated to
  :mod:`emulator.server.eviction`: PodDisruptionBudgets, 429) and ``log``
  (kemu's containers run no process: a plain-text note says so).
* retries: a read-modify-write is retried only on
  :class:`~emulator.api.errors.StaleResourceVersion`, never on other 409s.

Dry run of updates and patches computes and validates the new object without
storing it (admission runs only for real writes: see Simplifications in
``docs/architecture.md``).
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from typing import Any

import orjson

from emulator.api import errors, kinds
from emulator.api.kinds import Kind
from emulator.api.meta import resource_version
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.apiserver import content, listrv, openapi, patch, tables, versions
from emulator.apiserver.calls import (
    DRY_RUN_VALUES,
    Call,
    Result,
    check_field_validation,
    dry_run,
    field_manager,
    options_invalid,
    query_bool,
    query_int,
    query_list,
    unknown_field_warnings,
)
from emulator.apiserver.discovery import SUBRESOURCES
from emulator.apiserver.routing import RequestInfo
from emulator.clock import rfc3339
from emulator.server import defaults
from emulator.server.core import ServerCore
from emulator.server.validation import validate

# Server-owned metadata a client's update or patch cannot change (rest.BeforeUpdate).
_SERVER_META = ("uid", "creationTimestamp", "generation", "deletionTimestamp", "deletionGracePeriodSeconds")
_PATCH_ATTEMPTS = 16
_PROPAGATION_POLICIES = ("Orphan", "Background", "Foreground")


def _meta(obj: Obj) -> Obj:
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    return meta


def _require_object(body: Any, kind: Kind) -> Obj:
    if not isinstance(body, dict):
        raise errors.bad_request(f"the object provided is unrecognized (must be of type {kind.kind}): "
                                 "couldn't get version/kind; json parse error: the body is not a JSON object")
    return body


def _check_namespace(kind: Kind, obj: Obj, namespace: str | None) -> None:
    """The body's namespace must agree with the URL's (upstream ``EnsureObjectNamespaceMatchesRequestNamespace``)."""
    meta = _meta(obj)
    if not kind.namespaced:
        meta.pop("namespace", None)  # cluster-scoped: a namespace in the body is dropped, as upstream
        return
    body_ns = meta.get("namespace") or ""
    if not body_ns:
        meta["namespace"] = namespace
    elif body_ns != namespace:
        raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the "
                                 "request")


def _check_name(obj: Obj, name: str) -> None:
    body_name = _meta(obj).get("name") or ""
    if body_name != name:
        raise errors.bad_request(f"the name of the object ({body_name}) does not match the name on the URL ({name})")


def _stale(e: errors.StatusError) -> bool:
    """A 409 a re-read can cure (the object changed under us), as opposed to AlreadyExists, a bind to a full
    node, a failed uid precondition or a field-manager conflict."""
    return isinstance(e, errors.StaleResourceVersion)


def _uid(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def unchanged_unless_content(new: Obj, current: Obj) -> Obj:
    """``new`` with ``current``'s managedFields when nothing but managedFields timestamps differ.

    Upstream's field manager does the same (``IgnoreManagedFieldsTimestampsTransformer``): a
    no-op apply or update then writes nothing and keeps its resourceVersion.
    """
    new_meta, cur_meta = new.get("metadata") or {}, current.get("metadata") or {}
    new_mf, cur_mf = new_meta.get("managedFields"), cur_meta.get("managedFields")
    if new_mf == cur_mf or not isinstance(new_mf, list) or not isinstance(cur_mf, list) or len(new_mf) != len(cur_mf):
        return new
    if any({**a, "time": None} != {**b, "time": None} for a, b in zip(new_mf, cur_mf, strict=True)
           if isinstance(a, dict) and isinstance(b, dict)):
        return new
    candidate = {**new, "metadata": {**new_meta, "managedFields": cur_mf}}
    return candidate


def scale_of(kind: Kind, obj: Obj) -> Obj:
    """The ``autoscaling/v1 Scale`` view of a deployment or replicaset."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    selector = spec.get("selector")
    try:
        selector_text = str(LabelSelector.from_dict(selector)) if isinstance(selector, dict) else ""
    except errors.StatusError:
        selector_text = ""
    return {"kind": "Scale", "apiVersion": "autoscaling/v1",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                         if k in meta},
            "spec": {"replicas": int(spec.get("replicas") or 0)},
            "status": {"replicas": int(status.get("replicas") or 0), "selector": selector_text}}


class Handlers:
    def __init__(self, core: ServerCore) -> None:
        self.core = core
        self.clock = core.clock
        self._delete_params = set(inspect.signature(core.delete).parameters)

    def now(self) -> str:
        return rfc3339(self.clock.now())

    # ------------------------------------------------------------------ output
    def render(self, call: Call, obj: Obj, status: int = 200) -> Result:
        """One object in the representation the client asked for."""
        wanted = call.wanted
        if wanted.table:
            printer = tables.SCALE_PRINTER if obj.get("kind") == "Scale" else tables.printer_for(call.kind.resource)
            obj = tables.table(printer, [obj], self.clock.now(), include_object=call.query.get("includeObject")
                               or "Metadata", version=wanted.version, resource_version=resource_version(obj))
        elif wanted.partial:
            obj = {"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{wanted.version}",
                   "metadata": obj.get("metadata") or {}}
        return Result(obj, status)

    # ------------------------------------------------------------------ reads
    def get(self, call: Call) -> Result:
        info = call.info
        obj = self.core.get(info.kind, info.namespace, info.name)
        if info.subresource == "scale":
            obj = scale_of(info.kind, obj)
        return self.render(call, obj)

    def list(self, call: Call) -> Result:
        """List (in a worker thread): the store pages with ``limit``/``continue``; encoding happens here too."""
        info, kind = call.info, call.kind
        limit = query_int(call, "limit") or 0
        if limit < 0:
            raise errors.bad_request("limit must not be negative")
        version = listrv.parse(call.query, limit)  # resourceVersion / resourceVersionMatch (:mod:`.listrv`)
        result = self.core.list(kind, info.namespace, label_selector=call.query.get("labelSelector") or None,
                                field_selector=call.query.get("fieldSelector") or None, limit=limit,
                                continue_token=call.query.get("continue") or None)
        result = listrv.serve(self.core.store, self.core.store.stream_key(kind), version, result)
        rv = str(result.resource_version)
        wanted = call.wanted
        if wanted.table:
            body = tables.table(tables.printer_for(kind.resource), result.items, self.clock.now(),
                                include_object=call.query.get("includeObject") or "Metadata",
                                version=wanted.version, resource_version=rv, continue_token=result.continue_token)
        else:
            meta: Obj = {"resourceVersion": rv}
            if result.continue_token:
                meta["continue"] = result.continue_token
            if wanted.partial:
                items = [{"kind": "PartialObjectMetadata", "apiVersion": f"meta.k8s.io/{wanted.version}",
                          "metadata": o.get("metadata") or {}} for o in result.items]
                body = {"kind": "PartialObjectMetadataList", "apiVersion": f"meta.k8s.io/{wanted.version}",
                        "metadata": meta, "items": items}
            else:
                body = {"kind": f"{kind.kind}List", "apiVersion": kind.api_version, "metadata": meta,
                        "items": result.items}
        encoded, ctype = content.encode(body, wanted)
        return Result(None, 200, ctype, encoded)

    # ------------------------------------------------------------------ create
    def create(self, call: Call) -> Result:
        info, kind = call.info, call.kind
        if info.subresource == "binding":
            return self.bind(call)
        if info.subresource == "eviction":
            return self.evict(call)
        if info.name or info.subresource:
            raise errors.method_not_allowed("POST is not allowed on a named object; use PUT or PATCH")
        if kind.namespaced and info.namespace is None:
            raise errors.method_not_allowed(f"create {kind.plural} in a namespace: POST to "
                                            f"/{'api' if not kind.group else 'apis/' + kind.group}/{kind.version}"
                                            f"/namespaces/NAMESPACE/{kind.plural}")
        obj = _require_object(content.decode_object(call.body, call.headers.get("content-type"), kind.kind), kind)
        openapi.check_types(kind, obj)
        warnings = unknown_field_warnings(call, "CreateOptions", kind, obj)
        dry = dry_run(call, "CreateOptions")
        _check_namespace(kind, obj, info.namespace)
        obj = self._track_create(kind, obj, field_manager(call))
        created = self.core.create(kind, obj, dry_run=dry)
        result = self.render(call, created, 201)
        result.warnings = warnings
        return result

    def _track_create(self, kind: Kind, obj: Obj, manager: str) -> Obj:
        if not manager:
            return obj
        # Upstream records managed fields on the decoded object, defaults included; defaulting is
        # idempotent, so the core doing it again is harmless. A body too malformed to default is
        # left to the core's validation to reject.
        with contextlib.suppress(errors.StatusError, KeyError):  # the core rejects it properly
            defaults.apply_defaults(kind, obj)
        return patch.record_update(None, obj, manager, self.now(), kind=kind)

    # ------------------------------------------------------------------ update
    def update(self, call: Call) -> Result:
        info, kind = call.info, call.kind
        if info.subresource == "scale":
            return self.update_scale(call, None)
        if info.subresource not in ("", "status", "finalize"):
            raise errors.method_not_allowed(f"PUT is not allowed on {kind.plural}/{info.subresource}")
        obj = _require_object(content.decode_object(call.body, call.headers.get("content-type"), kind.kind), kind)
        openapi.check_types(kind, obj)
        warnings = unknown_field_warnings(call, "UpdateOptions", kind, obj) if not info.subresource else ()
        dry = dry_run(call, "UpdateOptions")
        _check_name(obj, info.name)
        _check_namespace(kind, obj, info.namespace)
        pinned = resource_version(obj)

        def replacement(current: Obj) -> tuple[Obj, bool]:
            new = dict(obj)
            if not pinned:
                new["metadata"] = {**_meta(obj), "resourceVersion": resource_version(current)}
            return new, bool(pinned)

        result = self._read_modify_write(call, dry, replacement)
        result.warnings = warnings
        return result

    def _read_modify_write(self, call: Call, dry: bool, make: Callable[[Obj], tuple[Obj, bool]]) -> Result:
        """The write loop PUT and PATCH share: read, build the new object, record field ownership, store.

        ``make(current)`` returns the new object and whether the client pinned a resourceVersion; an
        unpinned write that loses a race is rebuilt on the fresh object, a pinned one answers 409.
        """
        info, kind = call.info, call.kind
        manager = field_manager(call)
        for _ in range(_PATCH_ATTEMPTS):
            current = self.core.get(kind, info.namespace, info.name)
            new, pinned = make(current)
            if manager:
                new = patch.record_update(current, new, manager, self.now(), kind=kind, subresource=info.subresource)
                new = unchanged_unless_content(new, current)
            if dry:
                return self.render(call, self._preview(kind, new, current, info.subresource))
            try:
                return self.render(call, self.core.update(kind, new, subresource=info.subresource))
            except errors.StatusError as e:
                if not _stale(e) or pinned:
                    raise
        raise errors.conflict(kind.plural, info.name, "too many conflicting writes", kind.group)

    def _preview(self, kind: Kind, new: Obj, current: Obj, subresource: str) -> Obj:
        """What an update would store, validated, without storing it (dry run)."""
        if resource_version(new) and resource_version(new) != resource_version(current):
            raise errors.stale_resource_version(kind.plural, current["metadata"].get("name", ""), kind.group)
        if subresource == "status":
            return {**current, "status": new.get("status") or {}}
        out = dict(new)
        meta = dict(out.get("metadata") or {})
        for k in _SERVER_META:
            if k in current["metadata"]:
                meta[k] = current["metadata"][k]
            else:
                meta.pop(k, None)
        meta["resourceVersion"] = resource_version(current)
        out["metadata"] = meta
        if kind.has_status:
            out.pop("status", None)
            if "status" in current:
                out["status"] = current["status"]
        out.setdefault("apiVersion", kind.api_version)
        out.setdefault("kind", kind.kind)
        defaults.apply_defaults(kind, out)
        validate(kind, out, current)
        return out

    # ------------------------------------------------------------------ patch
    def patch(self, call: Call) -> Result:
        info, kind = call.info, call.kind
        media = patch.patch_type(call.headers.get("content-type") or "")
        if info.subresource not in ("", "status", "scale"):
            raise errors.method_not_allowed(f"PATCH is not allowed on {kind.plural}/{info.subresource}")
        check_field_validation(call, "PatchOptions")
        dry = dry_run(call, "PatchOptions")
        force = query_bool(call, "force")
        if force and media != patch.APPLY_PATCH_YAML:
            raise errors.bad_request("force may not be set for non-apply patch")
        if media == patch.APPLY_PATCH_YAML:
            return self._apply(call, dry, force)
        if info.subresource == "scale":
            return self.update_scale(call, media)
        def patched(current: Obj) -> tuple[Obj, bool]:
            new = patch.apply_patch(kind, current, call.body, media)
            if not isinstance(new, dict):
                raise errors.bad_request("the patch did not produce an object")
            openapi.check_types(kind, new)  # upstream decodes the patched JSON into the typed object
            self._check_identity(kind, new, current, info)
            return new, resource_version(new) != resource_version(current)

        return self._read_modify_write(call, dry, patched)

    @staticmethod
    def _check_identity(kind: Kind, new: Obj, current: Obj, info: RequestInfo) -> None:
        meta = new.get("metadata")
        if not isinstance(meta, dict):
            raise errors.bad_request("metadata must be an object")
        if (meta.get("name") or "") != info.name:
            raise errors.bad_request(f"the name of the object ({meta.get('name') or ''}) does not match the name on "
                                     f"the URL ({info.name})")
        if kind.namespaced and (meta.get("namespace") or "") != (info.namespace or ""):
            raise errors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                     "the request")
        if _uid(new) != _uid(current):
            raise errors.conflict(kind.plural, info.name, f"Precondition failed: UID in precondition: {_uid(new)}, "
                                  f"UID in object meta: {_uid(current)}", kind.group)

    def _apply(self, call: Call, dry: bool, force: bool) -> Result:
        """Server-side apply: merge the applied configuration, create the object if it is missing."""
        info, kind = call.info, call.kind
        if info.subresource == "scale":
            raise errors.unsupported_media_type(f"{patch.APPLY_PATCH_YAML} on the scale subresource")
        applied = patch.parse_apply_body(call.body)
        openapi.check_types(kind, applied)
        meta = applied.get("metadata")
        if isinstance(meta, dict):
            _check_name(applied, info.name)
            if kind.namespaced and meta.get("namespace") and meta["namespace"] != info.namespace:
                raise errors.bad_request("the namespace of the provided object does not match the namespace sent on "
                                         "the request")
        manager = field_manager(call, required=True)
        for _ in range(_PATCH_ATTEMPTS):
            try:
                current: Obj | None = self.core.get(kind, info.namespace, info.name)
            except errors.StatusError as e:
                if e.code != 404 or info.subresource:
                    raise
                current = None
            merged = patch.server_side_apply(kind, current, applied, manager, force=force, now=self.now(),
                                             subresource=info.subresource)
            merged_meta = _meta(merged)
            merged_meta["name"] = info.name
            if kind.namespaced:
                merged_meta["namespace"] = info.namespace
            if current is None:
                try:
                    return self.render(call, self.core.create(kind, merged, dry_run=dry), 201)
                except errors.StatusError as e:
                    if e.reason != "AlreadyExists":
                        raise
                    continue  # created meanwhile: apply to it
            merged_meta["resourceVersion"] = resource_version(current)
            merged = unchanged_unless_content(merged, current)
            if dry:
                return self.render(call, self._preview(kind, merged, current, info.subresource))
            try:
                return self.render(call, self.core.update(kind, merged, subresource=info.subresource))
            except errors.StatusError as e:
                if not _stale(e):
                    raise
        raise errors.conflict(kind.plural, info.name, "too many conflicting writes", kind.group)

    # ------------------------------------------------------------------ scale
    def update_scale(self, call: Call, patch_media: str | None) -> Result:
        """PUT (``patch_media`` None) or PATCH of ``/scale``: only ``spec.replicas`` reaches the object."""
        info, kind = call.info, call.kind
        dry = dry_run(call, "UpdateOptions" if patch_media is None else "PatchOptions")
        manager = field_manager(call)
        if patch_media is None:
            sent = _require_object(content.decode_object(call.body, call.headers.get("content-type"), "Scale"), kind)
            _check_name(sent, info.name)
        for _ in range(_PATCH_ATTEMPTS):
            current = self.core.get(kind, info.namespace, info.name)
            scale = scale_of(kind, current)
            if patch_media is not None:
                sent = patch.apply_patch(kind, scale, call.body, patch_media)
            # ScaleSpec.replicas is `omitempty` upstream: a client scaling to 0 sends no field at all.
            replicas = (sent.get("spec") or {}).get("replicas", 0)
            if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
                raise errors.invalid("Scale", info.name, [errors.Cause(
                    "spec.replicas", f"Invalid value: {orjson.dumps(replicas).decode()}: must be greater than or "
                    "equal to 0")], "autoscaling")
            pinned = resource_version(sent) if resource_version(sent) != resource_version(current) else ""
            new = {**current, "spec": {**(current.get("spec") or {}), "replicas": replicas},
                   "metadata": {**current["metadata"], "resourceVersion": pinned or resource_version(current)}}
            if manager:
                new = patch.record_update(current, new, manager, self.now(), kind=kind)
            if dry:
                return self.render(call, scale_of(kind, self._preview(kind, new, current, "")))
            try:
                return self.render(call, scale_of(kind, self.core.update(kind, new)))
            except errors.StatusError as e:
                if not _stale(e) or pinned:
                    raise
        raise errors.conflict(kind.plural, info.name, "too many conflicting writes", kind.group)

    # ------------------------------------------------------------------ delete
    def _delete_options(self, call: Call) -> Obj:
        body = content.decode_options(call.body, call.headers.get("content-type"), "DeleteOptions")
        if body:
            return body
        opts: Obj = {}
        grace = query_int(call, "gracePeriodSeconds")
        if grace is not None:
            opts["gracePeriodSeconds"] = grace
        if call.query.get("propagationPolicy"):
            opts["propagationPolicy"] = call.query["propagationPolicy"]
        if call.query.get("orphanDependents"):
            opts["orphanDependents"] = query_bool(call, "orphanDependents")
        if query_list(call, "dryRun"):
            opts["dryRun"] = query_list(call, "dryRun")
        return opts

    def _delete_one(self, kind: Kind, namespace: str | None, name: str, opts: Obj, dry: bool) -> tuple[Obj, bool]:
        """Delete (or preview deleting) one object; returns (object after the call, gone)."""
        grace = opts.get("gracePeriodSeconds")
        if grace is not None and (not isinstance(grace, int) or isinstance(grace, bool)):
            raise errors.bad_request("gracePeriodSeconds must be an integer")
        policy = opts.get("propagationPolicy")
        if policy is not None and policy not in _PROPAGATION_POLICIES:
            raise options_invalid("DeleteOptions", "propagationPolicy", policy, _PROPAGATION_POLICIES)
        pre = opts.get("preconditions") or {}
        if not isinstance(pre, dict):
            raise errors.bad_request("preconditions must be an object")
        if dry:
            current = self.core.get(kind, namespace, name)
            if pre.get("uid") and pre["uid"] != _uid(current):
                raise errors.conflict(kind.plural, name, f"Precondition failed: UID in precondition: {pre['uid']}, "
                                      f"UID in object meta: {_uid(current)}", kind.group)
            if pre.get("resourceVersion") and pre["resourceVersion"] != resource_version(current):
                raise errors.stale_resource_version(kind.plural, name, kind.group)
            return current, True
        kwargs: Obj = {"grace_period_seconds": grace, "preconditions": pre or None}
        if "propagation_policy" in self._delete_params:
            kwargs["propagation_policy"] = policy
        if "orphan_dependents" in self._delete_params and opts.get("orphanDependents") is not None:
            kwargs["orphan_dependents"] = bool(opts["orphanDependents"])
        obj = self.core.delete(kind, namespace, name, **kwargs)
        meta = obj.get("metadata") or {}
        marked = bool(meta.get("deletionTimestamp")) and bool(meta.get("finalizers") or
                                                               meta.get("deletionGracePeriodSeconds"))
        if marked:
            # Marked only if it is still there at the version we got back.
            try:
                still = self.core.get(kind, namespace, name)
                marked = _uid(still) == _uid(obj)
            except errors.StatusError as e:
                if e.code != 404:
                    raise
                marked = False
        return obj, not marked

    def delete(self, call: Call) -> Result:
        info, kind = call.info, call.kind
        if info.subresource:
            raise errors.method_not_allowed(f"DELETE is not allowed on {kind.plural}/{info.subresource}")
        opts = self._delete_options(call)
        dry = bool(opts.get("dryRun"))
        for v in opts.get("dryRun") or []:
            if v not in DRY_RUN_VALUES:
                raise options_invalid("DeleteOptions", "dryRun", v, DRY_RUN_VALUES)
        obj, gone = self._delete_one(kind, info.namespace, info.name, opts, dry)
        if not gone or kind is kinds.POD:
            return self.render(call, obj)
        details = {"name": info.name, "group": kind.group, "kind": kind.plural, "uid": _uid(obj)}
        return Result({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                       "details": details})

    def deletecollection(self, call: Call) -> Result:
        info, kind = call.info, call.kind
        opts = self._delete_options(call)
        dry = bool(opts.get("dryRun"))
        result = self.core.list(kind, info.namespace, label_selector=call.query.get("labelSelector") or None,
                                field_selector=call.query.get("fieldSelector") or None)
        deleted = []
        for item in result.items:
            meta = item.get("metadata") or {}
            try:
                obj, _ = self._delete_one(kind, meta.get("namespace"), meta.get("name", ""), opts, dry)
            except errors.StatusError as e:
                if e.code == 404:  # deleted by someone else meanwhile
                    continue
                raise
            deleted.append(obj)
        body = {"kind": f"{kind.kind}List", "apiVersion": kind.api_version,
                "metadata": {"resourceVersion": str(result.resource_version)}, "items": deleted}
        return Result(body)

    # ------------------------------------------------------------------ pod subresources
    def bind(self, call: Call) -> Result:
        """POST pods/{name}/binding: assign the pod to a node, once (upstream ``BindingREST.Create``)."""
        info = call.info
        binding = _require_object(content.decode_object(call.body, call.headers.get("content-type"), "Binding"),
                                  call.kind)
        meta = binding.get("metadata") or {}
        if meta.get("name") and meta["name"] != info.name:
            raise errors.bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL "
                                     f"({info.name})")
        target = binding.get("target") or {}
        node = target.get("name") if isinstance(target, dict) else None
        if not node:
            raise errors.invalid("Binding", info.name, [errors.Cause("target.name", "Required value",
                                                                     "FieldValueRequired")])
        if target.get("kind") not in (None, "", "Node"):
            raise errors.invalid("Binding", info.name, [errors.Cause("target.kind", "Unsupported value: "
                                                                     f'"{target["kind"]}": supported values: "Node"',
                                                                     "FieldValueNotSupported")])
        annotations = meta.get("annotations") or {}
        if dry_run(call, "CreateOptions"):
            self.core.get(kinds.POD, info.namespace, info.name)
        else:
            # The core's bind is the atomic one every scheduler uses: it also refuses a node without room.
            self.core.bind(info.namespace or "", info.name, str(node), annotations=annotations or None,
                           uid=str(meta.get("uid") or ""))
        return Result({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}, 201)

    def evict(self, call: Call) -> Result:
        info = call.info
        body = _require_object(content.decode_object(call.body, call.headers.get("content-type"), "Eviction"),
                               call.kind)
        meta = body.get("metadata") or {}
        if meta.get("name") and meta["name"] != info.name:
            raise errors.bad_request(f"name in URL does not match name in Eviction object: {info.name} != "
                                     f"{meta['name']}")
        try:
            from emulator.server import eviction  # lazy: written alongside PodDisruptionBudgets
        except ImportError:
            raise errors.method_not_allowed("pod eviction is not available in this kemu build") from None
        evict: Callable[..., Obj] = eviction.evict
        status = evict(self.core, info.namespace, info.name, body, dry_run=dry_run(call, "CreateOptions"))
        return Result(status, int(status.get("code") or 201) if isinstance(status, dict) else 201)

    def log(self, call: Call) -> Result:
        info = call.info
        pod = self.core.get(kinds.POD, info.namespace, info.name)
        names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        container = call.query.get("container") or ""
        if not container:
            if len(names) != 1:
                raise errors.bad_request(f"a container name must be specified for pod {info.name}, choose one of: "
                                         f"[{' '.join(str(n) for n in names)}]")
            container = str(names[0])
        elif container not in names:
            raise errors.bad_request(f"container {container} is not valid for pod {info.name}")
        text = (f"kemu does not emulate container logs: container {container} of pod {info.namespace}/{info.name} "
                "runs no process in the emulator.\n")
        return Result(None, 200, "text/plain", text.encode())

    # ------------------------------------------------------------------ dispatch
    def handle(self, call: Call) -> Result:
        info = call.info
        if kinds.storage_version(info.kind) is not info.kind:  # a served version other than the stored one
            return versions.serve(call, info.kind, self.handle, self.core)
        if info.subresource and info.subresource not in SUBRESOURCES:
            raise errors.StatusError(404, "NotFound", "the server could not find the requested resource")
        if info.subresource and info.verb not in SUBRESOURCES[info.subresource].verbs:
            raise errors.method_not_allowed(f"{info.verb} is not supported on {info.resource}/{info.subresource}")
        verb = info.verb
        if info.subresource == "log":
            return self.log(call)
        if verb == "get":
            return self.get(call)
        if verb == "list":
            return self.list(call)
        if verb == "create":
            return self.create(call)
        if verb == "update":
            return self.update(call)
        if verb == "patch":
            return self.patch(call)
        if verb == "delete":
            return self.delete(call)
        if verb == "deletecollection":
            return self.deletecollection(call)
        raise errors.method_not_allowed(f"verb {verb} is not supported")
