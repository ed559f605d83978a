"""The namespace controller: empties a terminating namespace, then finalizes it so the server deletes it.

A re-implementation of upstream ``pkg/controller/namespace/namespace_controller.go`` and
``pkg/controller/namespace/deletion/namespaced_resources_deleter.go`` on kemu's controller
runtime. Deleting a Namespace whose ``spec.finalizers`` holds ``kubernetes`` (the default) only
marks it: ``deletionTimestamp`` and ``status.phase: Terminating``
(:meth:`~emulator.server.core.ServerCore.delete`); from then on the store refuses creates in it
(403, reason ``NamespaceTerminating``). One reconcile of a namespace key:

1. Re-read the namespace from the store (the cache may lag). Not being deleted: nothing to do.
   Already finalized (no ``kubernetes`` in ``spec.finalizers``): delete it again, which removes it.
2. **Delete the content.** Every registered namespaced kind is listed in the namespace (one
   pipelined round trip, :meth:`Store.list_many`, where upstream asks discovery and lists per
   group-version-resource), and every object not already being deleted is deleted with
   Background propagation, as upstream's ``deleteCollection`` does. Pods go gracefully: a
   bound, running pod keeps ``deletionTimestamp`` until its kubelet confirms — the controller
   does not force anything, it waits, as upstream does.
3. **Count what remains** (a second list): objects held by a grace period or by finalizers.
   The namespace's conditions say so, with upstream's types, reasons and messages
   (``NamespaceDeletionContentFailure`` when a delete failed, ``NamespaceContentRemaining`` "Some
   resources are remaining: pods. has 2 resource instances", ``NamespaceFinalizersRemaining``
   "Some content in the namespace has finalizers remaining: ..."; ``False`` with the OK reasons
   otherwise). Status is written only when it changes.
4. **Requeue or finalize.** Content left: the key is requeued after upstream's estimate
   (half the longest remaining pod grace period plus one second, ``estimateGracefulTermination``;
   one second when nothing but finalizers hold it) — and at once when one of its pods is
   finally deleted (a pod informer handler; upstream only polls). Nothing left: the
   ``kubernetes`` finalizer is removed through the ``finalize`` subresource
   (:meth:`~emulator.server.core.ServerCore.finalize_namespace`), which deletes the namespace
   (upstream ``ShouldDeleteNamespaceDuringUpdate``).

Controllers that react to the deletions (a ReplicaSet re-creating a pod) are refused by the
store, so the content only shrinks. Simplifications: see ``docs/architecture.md``.
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from emulator.api import errors
from emulator.api.kinds import NAMESPACE, POD, Kind, all_kinds
from emulator.api.types import Obj
from emulator.clock import parse_rfc3339, rfc3339
from emulator.controllers.runtime import Controller, ControllerContext, object_of
from emulator.informers import ResourceEventHandlerFuncs
from emulator.server.core import FINALIZER_KUBERNETES

log = logging.getLogger(__name__)

# kube-controller-manager --concurrent-namespace-syncs default.
DEFAULT_WORKERS = 10

# Upstream namespace_conditions.go: the condition types the deleter maintains, with their OK reason/message.
DISCOVERY_FAILURE = "NamespaceDeletionDiscoveryFailure"
GV_PARSING_FAILURE = "NamespaceDeletionGroupVersionParsingFailure"
CONTENT_FAILURE = "NamespaceDeletionContentFailure"
CONTENT_REMAINING = "NamespaceContentRemaining"
FINALIZERS_REMAINING = "NamespaceFinalizersRemaining"
CONDITION_TYPES = (DISCOVERY_FAILURE, GV_PARSING_FAILURE, CONTENT_FAILURE, CONTENT_REMAINING, FINALIZERS_REMAINING)
OK = {
    DISCOVERY_FAILURE: ("ResourcesDiscovered", "All resources successfully discovered"),
    GV_PARSING_FAILURE: ("ParsedGroupVersions", "All legacy kube types successfully parsed"),
    CONTENT_FAILURE: ("ContentDeleted", "All content successfully deleted, may be waiting on finalization"),
    CONTENT_REMAINING: ("ContentRemoved", "All content successfully removed"),
    FINALIZERS_REMAINING: ("ContentHasNoFinalizers", "All content-preserving finalizers finished"),
}
FAILED_REASONS = {CONTENT_FAILURE: "ContentDeletionFailed", CONTENT_REMAINING: "SomeResourcesRemain",
                  FINALIZERS_REMAINING: "SomeFinalizersRemain"}


def _namespaced_kinds() -> list[Kind]:
    return [k for k in all_kinds() if k.namespaced]


def _group_resource(kind: Kind) -> str:
    """``GroupResource.String()``: ``pods`` for core, ``jobs.batch`` otherwise."""
    return kind.resource


class NamespaceController(Controller):
    """Deletes the content of terminating namespaces and finalizes them; see the module docstring."""

    def __init__(self, ctx: ControllerContext, *, workers: int | None = None) -> None:
        super().__init__("namespace", ctx, workers=workers or int(
            ctx.option("concurrent_namespace_syncs", DEFAULT_WORKERS)))
        self.ns_informer = self.watch(ctx.informers.informer_for(NAMESPACE))
        self.pod_informer = self.watch(ctx.informers.informer_for(POD))
        self.ns_informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda obj, _initial: self._enqueue_if_deleting(obj),
            update=lambda _old, new: self._enqueue_if_deleting(new)))
        self.pod_informer.add_event_handler(ResourceEventHandlerFuncs(delete=self._pod_deleted))
        self.finalized = 0

    def _enqueue_if_deleting(self, ns: Obj) -> None:
        if ns["metadata"].get("deletionTimestamp"):
            self.enqueue_key(ns["metadata"]["name"])

    def _pod_deleted(self, obj: Any) -> None:
        # The last pods of a terminating namespace usually wait for their kubelet: look again when one goes.
        pod = object_of(obj)
        namespace = (pod or {}).get("metadata", {}).get("namespace")
        ns = self.ns_informer.indexer.get_by_key(namespace) if namespace else None
        if ns is not None and ns["metadata"].get("deletionTimestamp"):
            self.enqueue_key(namespace)

    # ------------------------------------------------------------------ reconcile
    def reconcile(self, key: str) -> float | None:
        ns = errors.get_or_none(self.core, NAMESPACE, None, key)
        if ns is None:
            return None
        meta = ns["metadata"]
        if not meta.get("deletionTimestamp"):
            return None
        uid = meta.get("uid") or ""
        if FINALIZER_KUBERNETES not in ((ns.get("spec") or {}).get("finalizers") or []):
            self._delete_namespace(key, uid)
            return None
        failures = self._delete_content(key)
        remaining, finalizers, estimate = self._remaining(key)
        self._set_conditions(ns, failures, remaining, finalizers)
        if failures:
            raise errors.internal(f"namespace {key}: failed to delete all resource types, {len(failures)} "
                                  f"remaining: {'; '.join(failures)}")
        if remaining:
            return estimate / 2 + 1 if estimate > 0 else 1.0
        finalizers_left = [f for f in (ns.get("spec") or {}).get("finalizers") or [] if f != FINALIZER_KUBERNETES]
        try:
            done = self.core.finalize_namespace(key, finalizers_left, uid=uid)
        except errors.StatusError as e:
            if e.code == 404:
                return None
            raise
        self.finalized += 1
        if self._still_there(key, done):
            # Other spec finalizers or metadata finalizers hold it: delete again once they are gone
            # (the namespace's own update events requeue it).
            self._delete_namespace(key, uid)
        log.debug("namespace: %s finalized", key)
        return None

    def _still_there(self, name: str, obj: Obj) -> bool:
        current = errors.get_or_none(self.core, NAMESPACE, None, name)
        if current is None:
            return False
        return current["metadata"].get("uid") == obj["metadata"].get("uid")

    def _delete_namespace(self, name: str, uid: str) -> None:
        try:
            self.core.delete(NAMESPACE, None, name, preconditions={"uid": uid} if uid else None)
        except errors.StatusError as e:
            if e.code not in (404, 409):
                raise

    def _delete_content(self, namespace: str) -> list[str]:
        """Issue a delete for every object of the namespace not already being deleted; the failures' messages."""
        failures: list[str] = []
        kinds = _namespaced_kinds()
        for kind, items in zip(kinds, self.core.store.list_many([(k, namespace) for k in kinds]), strict=True):
            for obj in items:
                meta = obj["metadata"]
                if meta.get("deletionTimestamp"):
                    continue  # already going: deleting again could only shorten a pod's grace period
                try:
                    self.core.delete(kind, namespace, meta["name"], propagation_policy="Background",
                                     preconditions={"uid": meta.get("uid") or ""})
                except errors.StatusError as e:
                    if e.code not in (404, 409):
                        failures.append(f"{_group_resource(kind)} {meta['name']}: {e.message}")
        return failures

    def _remaining(self, namespace: str) -> tuple[dict[str, int], Counter[str], float]:
        """(instances left per group-resource, finalizers holding them, longest remaining pod grace in seconds)."""
        remaining: dict[str, int] = {}
        finalizers: Counter[str] = Counter()
        estimate = 0.0
        now = self.clock.now()
        kinds = _namespaced_kinds()
        for kind, items in zip(kinds, self.core.store.list_many([(k, namespace) for k in kinds]), strict=True):
            if not items:
                continue
            remaining[_group_resource(kind)] = len(items)
            for obj in items:
                meta = obj["metadata"]
                finalizers.update(meta.get("finalizers") or [])
                if kind is POD and meta.get("deletionTimestamp"):
                    # deletionTimestamp is when the grace period ends (the server sets now + grace).
                    estimate = max(estimate, parse_rfc3339(meta["deletionTimestamp"]) - now)
        return remaining, finalizers, estimate

    def _set_conditions(self, ns: Obj, failures: list[str], remaining: dict[str, int],
                        finalizers: Counter[str]) -> None:
        """Upstream ``updateNamespaceStatusFunc`` + conditions: one condition per type, False when all is well."""
        failed: dict[str, str] = {}
        if failures:
            failed[CONTENT_FAILURE] = (f"Failed to delete all resource types, {len(failures)} remaining: "
                                       f"{'; '.join(failures)}")
        if remaining:
            failed[CONTENT_REMAINING] = "Some resources are remaining: " + ", ".join(
                f"{gr} has {n} resource instances" for gr, n in sorted(remaining.items()))
        if finalizers:
            failed[FINALIZERS_REMAINING] = "Some content in the namespace has finalizers remaining: " + ", ".join(
                f"{f} in {n} resource instances" for f, n in sorted(finalizers.items()))
        status = dict(ns.get("status") or {})
        old = {c.get("type"): c for c in status.get("conditions") or []}
        now = rfc3339(self.clock.now())
        conditions = [c for c in status.get("conditions") or [] if c.get("type") not in CONDITION_TYPES]
        for ctype in CONDITION_TYPES:
            want = ("True", FAILED_REASONS[ctype], failed[ctype]) if ctype in failed else ("False", *OK[ctype])
            prev = old.get(ctype)
            if prev is not None and (prev.get("status"), prev.get("reason"), prev.get("message")) == want:
                conditions.append(prev)
                continue
            conditions.append({"type": ctype, "status": want[0], "lastTransitionTime": now, "reason": want[1],
                               "message": want[2]})
        if conditions == status.get("conditions"):
            return
        status["conditions"] = conditions
        status["phase"] = "Terminating"
        try:
            self.core.update_status(NAMESPACE, {**ns, "status": status})
        except errors.StatusError as e:
            if e.code not in (404, 409):
                raise


def new_controller(ctx: ControllerContext) -> NamespaceController:
    """The controller manager's constructor for this controller."""
    return NamespaceController(ctx)
