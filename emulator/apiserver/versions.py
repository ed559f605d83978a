"""Serving a resource in a version other than the stored one (upstream's conversion at the API boundary).

kube-apiserver stores one version of a resource and converts requests and responses of
every other served version (``autoscaling/v1`` HorizontalPodAutoscalers are stored as
``autoscaling/v2``). Here a request routed to an alternate version
(:func:`emulator.api.kinds.register_version`) is turned into a request on the stored
version and its answer converted back:

* create / update (``""`` or ``status``): the body (JSON, YAML or protobuf) is decoded,
  converted to the stored version and handed on as JSON;
* patch: the stored object is read, converted to the served version, patched there (the
  patch speaks that version's fields), converted back and written as an update at the
  resourceVersion that was read; server-side apply is refused with 415 (not modelled);
* get / list / delete: the stored answer is converted; Tables need no conversion (their
  rows come from the stored object, as upstream prints from the internal version).

Watches of an alternate version stream stored-version objects (a documented simplification).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import orjson

from emulator.api import errors, kinds
from emulator.api.kinds import Kind
from emulator.api.types import Obj
from emulator.apiserver import content, openapi, patch


def _convert_result(result: Any, from_storage: Callable[[Obj], Obj], alt: Kind, wanted: Any) -> Any:
    if wanted.table or wanted.partial:
        return result
    if result.encoded is not None:  # a list, already encoded
        body = orjson.loads(result.encoded)
        if body.get("kind") == f"{alt.kind}List":
            body["apiVersion"] = alt.api_version
            body["items"] = [from_storage(i) for i in body.get("items") or []]
            encoded, ctype = content.encode(body, wanted)
            return replace(result, encoded=encoded, content_type=ctype)
        return result
    body = result.body
    if isinstance(body, dict) and body.get("kind") == alt.kind:
        return replace(result, body=from_storage(body))
    return result


def serve(call: Any, alt: Kind, handle: Callable[[Any], Any], core: Any) -> Any:
    """Answer ``call`` (routed to ``alt``) through ``handle`` on the stored version."""
    storage = kinds.storage_version(alt)
    to_storage, from_storage = kinds.converters(alt)
    info = call.info
    stored_info = replace(info, kind=storage, version=storage.version)
    headers = dict(call.headers)
    body = call.body
    if info.verb in ("create", "update") and info.subresource in ("", "status"):
        sent = content.decode_object(call.body, call.headers.get("content-type"), alt.kind)
        if not isinstance(sent, dict):
            raise errors.bad_request(f"the object provided is unrecognized (must be of type {alt.kind})")
        openapi.check_types(alt, sent)  # the converter reads the fields as their declared types
        body = orjson.dumps(to_storage(sent))
        headers["content-type"] = "application/json"
    elif info.verb == "patch" and info.subresource in ("", "status"):
        media = patch.patch_type(call.headers.get("content-type") or "")
        if media == patch.APPLY_PATCH_YAML:
            raise errors.unsupported_media_type(f"{media} on {alt.api_version} (apply the stored version "
                                                f"{storage.api_version})")
        current = core.get(storage, info.namespace, info.name)
        patched = patch.apply_patch(alt, from_storage(current), call.body, media)
        if not isinstance(patched, dict):
            raise errors.bad_request("the patch did not produce an object")
        openapi.check_types(alt, patched)
        new = to_storage(patched)
        new.setdefault("metadata", {}).setdefault("resourceVersion", current["metadata"].get("resourceVersion"))
        body = orjson.dumps(new)
        headers["content-type"] = "application/json"
        stored_info = replace(stored_info, verb="update")
    result = handle(replace(call, info=stored_info, body=body, headers=headers))
    return _convert_result(result, from_storage, alt, call.wanted)
