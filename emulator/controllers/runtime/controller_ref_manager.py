"""Controller references: kube-controller-manager ``controller_ref_manager.go``, apimachinery ``controller_ref.go``.

:func:`get_controller_of` and :func:`new_controller_ref` are ``metav1.GetControllerOf``
and ``metav1.NewControllerRef``. :class:`ControllerRefManager` is
``BaseControllerRefManager.ClaimObject`` over a list of candidates: it keeps what
the controller owns and still matches, adopts orphans matching the selector (after
a fresh read — :func:`recheck_deletion_timestamp` — proves the controller is not
being deleted) and releases owned objects that no longer match. Objects being
deleted are never adopted. Adoption and release are metadata writes with a uid
precondition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from emulator.api import errors
from emulator.api.kinds import Kind
from emulator.api.meta import without_owner_references
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.server.core import ServerCore


def get_controller_of(obj: Mapping[str, Any]) -> Obj | None:
    """``metav1.GetControllerOf``: the ownerReference with ``controller: true``, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller") is True:
            return ref
    return None


def new_controller_ref(owner: Mapping[str, Any], kind: Kind) -> Obj:
    """``metav1.NewControllerRef``: controller and blockOwnerDeletion both true."""
    meta = owner.get("metadata") or {}
    return {"apiVersion": kind.api_version, "kind": kind.kind, "name": meta.get("name", ""),
            "uid": meta.get("uid", ""), "controller": True, "blockOwnerDeletion": True}


class ControllerRefManager:
    """``BaseControllerRefManager.ClaimObject`` over a list of candidates (pods or ReplicaSets).

    ``claim`` returns the objects the controller owns after the pass:

    * owned by another controller: ignored;
    * owned by us and matching: kept (even while we are being deleted: it costs no write);
    * owned by us and not matching: released, unless we are being deleted;
    * orphan, matching, not being deleted, same namespace, and we are not being deleted:
      adopted — once ``can_adopt`` (a fresh read of the controller) has passed.

    Errors of individual adopt/release writes are collected (a NotFound means the object is
    gone and is not an error); the caller raises them after using what was claimed.
    """

    def __init__(self, core: ServerCore, controller: Obj, controller_kind: Kind, selector: LabelSelector,
                 can_adopt: Callable[[], None] | None = None) -> None:
        self.core = core
        self.controller = controller
        self.controller_kind = controller_kind
        self.selector = selector
        meta = controller.get("metadata") or {}
        self.uid = meta.get("uid", "")
        self.namespace = meta.get("namespace") or ""
        self.deleting = bool(meta.get("deletionTimestamp"))
        self._can_adopt = can_adopt
        self._can_adopt_done: Exception | bool | None = False
        self.errors: list[Exception] = []

    def _check_can_adopt(self) -> None:
        if self._can_adopt_done is False:
            try:
                if self._can_adopt is not None:
                    self._can_adopt()
                self._can_adopt_done = None
            except Exception as e:
                self._can_adopt_done = e
        if isinstance(self._can_adopt_done, Exception):
            raise self._can_adopt_done

    def claim(self, kind: Kind, candidates: Iterable[Obj],
              extra_match: Callable[[Obj], bool] | None = None) -> list[Obj]:
        claimed: list[Obj] = []
        uid, matches = self.uid, self.selector.matches
        for obj in candidates:
            # Fast path for the common case — ours and still matching — which needs no write.
            meta = obj.get("metadata") or {}
            for ref in meta.get("ownerReferences") or ():
                if ref.get("controller") is True:
                    if ref.get("uid") == uid and extra_match is None and matches(meta.get("labels")):
                        claimed.append(obj)
                        meta = None
                    break
            if meta is None:
                continue
            try:
                if self._claim_one(kind, obj, extra_match):
                    claimed.append(obj)
            except errors.StatusError as e:
                if e.code != 404:
                    self.errors.append(e)
            except Exception as e:
                self.errors.append(e)
        return claimed

    def _matches(self, obj: Obj, extra_match: Callable[[Obj], bool] | None) -> bool:
        if not self.selector.matches((obj.get("metadata") or {}).get("labels")):
            return False
        return extra_match is None or extra_match(obj)

    def _claim_one(self, kind: Kind, obj: Obj, extra_match: Callable[[Obj], bool] | None) -> bool:
        meta = obj.get("metadata") or {}
        ref = get_controller_of(obj)
        if ref is not None:
            if ref.get("uid") != self.uid:
                return False
            if self._matches(obj, extra_match):
                return True
            if self.deleting:
                return False
            self._release(kind, obj)
            return False
        if self.deleting or not self._matches(obj, extra_match):
            return False
        if meta.get("deletionTimestamp"):
            return False
        if self.namespace and meta.get("namespace") != self.namespace:
            return False
        self._check_can_adopt()
        self._adopt(kind, obj)
        return True

    def _adopt(self, kind: Kind, obj: Obj) -> None:
        meta = obj["metadata"]
        ref = new_controller_ref(self.controller, self.controller_kind)

        def add_ref(m: Obj) -> Obj | None:
            refs = list(m.get("ownerReferences") or [])
            current = next((r for r in refs if r.get("controller") is True), None)
            if current is not None:
                if current.get("uid") == self.uid:
                    return None
                # Someone else adopted it first: upstream's patch fails validation the same way.
                raise errors.conflict(kind.plural, meta["name"], "Only one reference can have Controller set to "
                                      "true", kind.group)
            refs = [r for r in refs if r.get("uid") != self.uid] + [ref]
            m["ownerReferences"] = refs
            return m

        self.core.update_metadata(kind, meta.get("namespace"), meta["name"], add_ref, uid=meta.get("uid", ""))

    def _release(self, kind: Kind, obj: Obj) -> None:
        meta = obj["metadata"]
        self.core.update_metadata(kind, meta.get("namespace"), meta["name"],
                                  lambda m: without_owner_references(m, (self.uid,)), uid=meta.get("uid", ""))


def recheck_deletion_timestamp(core: ServerCore, kind: Kind, obj: Obj) -> Callable[[], None]:
    """``controller.RecheckDeletionTimestamp``: a fresh read proves the controller is the same and not being deleted."""
    meta = obj["metadata"]

    def check() -> None:
        fresh = core.get(kind, meta.get("namespace"), meta["name"])
        fmeta = fresh["metadata"]
        if fmeta.get("uid") != meta.get("uid"):
            raise errors.conflict(kind.plural, meta["name"], f"original {kind.kind} {meta.get('namespace')}/"
                                  f"{meta['name']} is gone: got uid {fmeta.get('uid')}, wanted {meta.get('uid')}",
                                  kind.group)
        if fmeta.get("deletionTimestamp"):
            raise errors.conflict(kind.plural, meta["name"], f"{meta.get('namespace')}/{meta['name']} has just been "
                                  f"deleted at {fmeta['deletionTimestamp']}", kind.group)

    return check
