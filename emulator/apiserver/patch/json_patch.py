"""Patch content types, JSON patch and merge patch: apiserver ``pkg/endpoints/handlers/patch.go``.

* ``application/json-patch+json`` (RFC 6902) via the ``jsonpatch`` library. A
  body that is not a list of operations is 400; an operation that cannot be
  applied (failed ``test``, missing path, unknown op) is 422, as upstream turns
  every ``Apply`` error into 422; more than 10000 operations is 413 and copies
  adding more than 3 MiB are 422.
* ``application/merge-patch+json`` (RFC 7386): objects merge, ``null`` deletes,
  everything else replaces.
* ``application/strategic-merge-patch+json`` goes to :mod:`.strategic`;
  ``application/apply-patch+yaml`` (server-side apply) to :mod:`.apply`, which
  needs a field manager.
"""

from __future__ import annotations

from typing import Any, Final

import jsonpatch
import jsonpointer
import orjson

from emulator.api import errors
from emulator.api.errors import Cause, StatusError
from emulator.api.kinds import Kind
from emulator.api.types import Obj
from emulator.apiserver.patch.jsonvalue import check_depth, copy_json, json_type
from emulator.apiserver.patch.schema import schema_for
from emulator.apiserver.patch.strategic import smp_map

# ----------------------------------------------------------------------------- content types

JSON_PATCH: Final = "application/json-patch+json"
MERGE_PATCH: Final = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH: Final = "application/strategic-merge-patch+json"
# kubectl and client-go send YAML; JSON bodies are valid YAML, so they parse too. There is no
# "apply-patch+json" upstream (only +yaml and the feature-gated +cbor), so it is a 415 here as there.
APPLY_PATCH_YAML: Final = "application/apply-patch+yaml"
PATCH_CONTENT_TYPES: Final = (JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH, APPLY_PATCH_YAML)

# Upstream handlers/patch.go: maxJSONPatchOperations.
MAX_JSON_PATCH_OPERATIONS: Final = 10000
# Upstream server/config.go JSONPatchMaxCopyBytes: "copy" ops may not add more than this in total,
# or a short patch could double the document thousands of times.
JSON_PATCH_MAX_COPY_BYTES: Final = 3 * 1024 * 1024


def patch_type(content_type: str) -> str:
    """The patch type named by a ``Content-Type`` header (parameters dropped); 415 if kemu cannot apply it."""
    media = content_type.split(";", 1)[0].strip()
    if media not in PATCH_CONTENT_TYPES:
        raise errors.unsupported_media_type(content_type)
    return media


def _load_json(body: bytes | str) -> Any:
    try:
        patch = orjson.loads(body)
    except orjson.JSONDecodeError:
        # Upstream validateAndTranscodePatch: the same words for every non-apply patch type.
        raise errors.bad_request("invalid JSON patch") from None
    check_depth(patch, "invalid JSON patch", body)
    return patch


# ----------------------------------------------------------------------------- entry point: non-apply patches


def apply_patch(kind: Kind, current: Obj, body: bytes | str, content_type: str) -> Obj:
    """Apply a JSON, merge or strategic merge patch to ``current`` and return the new object.

    ``current`` is never modified. 415 for a content type that is not a patch type, 400
    for a body that cannot be decoded or a malformed strategic directive, 422 for a JSON
    patch operation that cannot be applied (or copies over 3 MiB in total), 413 for more
    than 10000 JSON patch operations.
    Server-side apply bodies go to :func:`server_side_apply` (it needs a field manager).
    """
    media = patch_type(content_type)
    if media == APPLY_PATCH_YAML:
        raise errors.internal("apply patches are handled by server_side_apply, not apply_patch")
    patch = _load_json(body)
    doc = copy_json(current)
    try:
        if media == JSON_PATCH:
            return _json_patch(doc, patch)
        if not isinstance(patch, dict):
            # Upstream decodes strategic/merge bodies into a map; anything else cannot become an object.
            raise errors.bad_request(
                f"json: cannot unmarshal {json_type(patch)} into Go value of type map[string]interface {{}}")
        if media == MERGE_PATCH:
            return _merge_patch(doc, patch)
        return smp_map(doc, patch, schema_for(kind), "")
    except RecursionError:
        raise errors.bad_request("the patch is nested too deeply") from None


def _json_patch(doc: Obj, ops: Any) -> Obj:
    """RFC 6902. Decoding failures are 400 and application failures 422, as in upstream's jsonPatcher."""
    if not isinstance(ops, list) or not all(isinstance(op, dict) for op in ops):
        raise errors.bad_request(f"json: cannot unmarshal {json_type(ops)} into Go value of type jsonpatch.Patch")
    if len(ops) > MAX_JSON_PATCH_OPERATIONS:
        raise errors.too_large(
            f"The allowed maximum operations in a JSON patch is {MAX_JSON_PATCH_OPERATIONS}, got {len(ops)}")
    try:
        if any(op.get("op") == "copy" for op in ops):
            result = _json_patch_counting_copies(doc, ops)
        else:
            result = jsonpatch.JsonPatch(ops).apply(doc, in_place=True)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, KeyError, IndexError, TypeError,
            ValueError, AttributeError) as e:
        raise _unprocessable(str(e) or type(e).__name__) from None
    if not isinstance(result, dict):
        raise _unprocessable(f"the patched document is a JSON {json_type(result)}, not an object")
    return result


def _json_patch_counting_copies(doc: Any, ops: list[Obj]) -> Any:
    """Apply op by op, refusing once copied values add up to more than JSON_PATCH_MAX_COPY_BYTES."""
    copied = 0
    for op in ops:
        if op.get("op") == "copy":
            copied += len(orjson.dumps(jsonpointer.resolve_pointer(doc, op.get("from"))))
            if copied > JSON_PATCH_MAX_COPY_BYTES:
                raise ValueError(f"Unable to complete the copy, the accumulated size increase of copy is {copied}, "
                                 f"exceeding the limit {JSON_PATCH_MAX_COPY_BYTES}")
        doc = jsonpatch.JsonPatch([op]).apply(doc, in_place=True)
    return doc


def _unprocessable(detail: str) -> StatusError:
    # Upstream answers with NewGenericServerResponse(422): a fixed message and the library's error
    # dropped. We keep the message and carry the detail as a cause so a client can see it.
    return StatusError(422, "Invalid", "the server rejected our request due to an error in our request",
                       causes=[Cause("patch", detail)])


def _merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 MergePatch: objects merge recursively, null deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return patch
    if not isinstance(target, dict):
        target = {}
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        else:
            target[key] = _merge_patch(target.get(key), value)
    return target
