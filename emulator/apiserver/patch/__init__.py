"""PATCH for the API server: JSON patch, merge patch, strategic merge patch and server-side apply.

Everything here is a pure function of JSON-shaped dicts: no I/O, no clock (the
caller passes ``now``), no store. The HTTP façade decodes the request, calls
:func:`apply_patch` or :func:`server_side_apply`, validates identity and
writes the result; every expected failure is an :class:`errors.StatusError`
carrying the code upstream answers with. The modules, as upstream splits them:

* :mod:`.json_patch` — content types and the JSON / merge patchers of
  apiserver ``endpoints/handlers/patch.go``; dispatches strategic patches;
* :mod:`.strategic` — strategic merge patch, apimachinery
  ``pkg/util/strategicpatch/patch.go``;
* :mod:`.schema` — the per-field merge metadata both of them and apply read
  (upstream's Go struct tags and OpenAPI list markers, here as data);
* :mod:`.apply` — server-side apply and update tracking,
  ``sigs.k8s.io/structured-merge-diff`` ``merge/update.go``;
* :mod:`.fieldpath` — field sets of an object (structured-merge-diff
  ``fieldpath/`` and ``typed/``'s ``ToFieldSet`` / ``Compare``);
* :mod:`.managedfields` — ``metadata.managedFields`` encoding and the
  update-manager cap (apimachinery ``pkg/util/managedfields/internal``);
* :mod:`.jsonvalue` — JSON equality, hashing and copying helpers they share.
"""

from __future__ import annotations

from emulator.apiserver.patch.apply import parse_apply_body, record_update, server_side_apply
from emulator.apiserver.patch.json_patch import (
    APPLY_PATCH_YAML,
    JSON_PATCH,
    JSON_PATCH_MAX_COPY_BYTES,
    MAX_JSON_PATCH_OPERATIONS,
    MERGE_PATCH,
    PATCH_CONTENT_TYPES,
    STRATEGIC_MERGE_PATCH,
    apply_patch,
    patch_type,
)
from emulator.apiserver.patch.managedfields import MAX_UPDATE_MANAGERS
from emulator.apiserver.patch.schema import MERGE_KEYS, FieldMeta, schema_for

__all__ = [
    "APPLY_PATCH_YAML",
    "JSON_PATCH",
    "JSON_PATCH_MAX_COPY_BYTES",
    "MAX_JSON_PATCH_OPERATIONS",
    "MAX_UPDATE_MANAGERS",
    "MERGE_KEYS",
    "MERGE_PATCH",
    "PATCH_CONTENT_TYPES",
    "STRATEGIC_MERGE_PATCH",
    "FieldMeta",
    "apply_patch",
    "parse_apply_body",
    "patch_type",
    "record_update",
    "schema_for",
    "server_side_apply",
]
