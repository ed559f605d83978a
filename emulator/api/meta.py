"""ObjectMeta accessors every layer shares: resourceVersion and ownerReferences.

Upstream reads these through ``meta.Accessor`` (``k8s.io/apimachinery/pkg/api/meta``:
``GetResourceVersion`` returns the opaque string) and edits ownerReferences in
the garbage collector's ``orphanDependents`` / ``releaseControllerRef`` patches
(``pkg/controller/garbagecollector/garbagecollector.go``,
``pkg/controller/controller_ref_manager.go``). kemu's store, API server,
informers, garbage collector and controller runtime all use these, so each
rule is written once.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from emulator.api.types import Obj

__all__ = ["resource_version", "without_owner_references"]


def resource_version(obj: Mapping[str, Any]) -> str:
    """``metadata.resourceVersion`` as the API carries it: a string, ``""`` when unset.

    kemu's store issues decimal integers; a caller that orders versions
    converts with ``int(resource_version(obj) or 0)``.
    """
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


def without_owner_references(meta: Obj, owner_uids: Collection[Any]) -> Obj | None:
    """Drop the ownerReferences pointing at ``owner_uids`` from ``meta`` in place.

    Returns ``meta`` when something was removed (the key goes when no
    reference is left, as a JSON patch of the last element leaves none), or
    ``None`` when no reference matched — the "nothing to write" answer
    :meth:`emulator.server.core.ServerCore.update_metadata` callbacks give.
    """
    refs = meta.get("ownerReferences") or []
    kept = [r for r in refs if r.get("uid") not in owner_uids]
    if len(kept) == len(refs):
        return None
    if kept:
        meta["ownerReferences"] = kept
    else:
        meta.pop("ownerReferences", None)
    return meta
