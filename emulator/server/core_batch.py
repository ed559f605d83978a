"""Batch writes of the server core: many objects' updates, status patches or deletes at once.

Kubernetes has no batch write API: client-go writes one object per request. Each method here gives,
per object, exactly what the single write of :class:`~emulator.server.core.ServerCore` gives (an
update's compare-and-set on the resourceVersion, a status patch, a grace-0 or graceful delete with a
uid precondition), but pipelines the objects into a few store round trips; an object whose fast path
loses a race is written again on its own through the single write, so the outcome is what writing
one by one would give. Internal writers use them: the kubelet's status manager (pod and node status,
leases, the final delete of terminated pods) and the scheduler's API writer (nominations, a
preemption's victims: status patch then delete).

:class:`BatchWrites` is a mixin of :class:`~emulator.server.core.ServerCore`: callers keep calling
``core.update_many(...)``, ``core.delete_many(...)`` and so on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from emulator.api import errors
from emulator.api.kinds import SERVICE, Kind
from emulator.api.types import Obj

if TYPE_CHECKING:
    from emulator.store.store import Store

_DELETE_NOW = object()  # a deletion plan: remove the object now
_ONE_BY_ONE = object()  # a deletion plan of update_status_and_delete_many: through delete()
_DELETE_ATTEMPTS = 64


class BatchWrites:
    """The batch writes of :class:`~emulator.server.core.ServerCore` (which provides the single writes)."""

    store: Store

    if TYPE_CHECKING:
        def update(self, kind: Kind, body: Any, *, subresource: str = "") -> Obj: ...

        def delete(self, kind: Kind, namespace: str | None, name: str, *, grace_period_seconds: int | None = None,
                   preconditions: dict[str, str] | None = None, propagation_policy: str | None = None,
                   orphan_dependents: bool | None = None) -> Obj: ...

        def _finish_if_released(self, kind: Kind, obj: Obj) -> Obj: ...

        def _deletion_plan(self, kind: Kind, current: Obj, requested_grace: int | None, policy: str | None,
                           orphan_dependents: bool | None) -> Obj | object | None: ...

        def _after_mark(self, kind: Kind, before: Obj, marked: Obj) -> Obj: ...

    def update_many(self, kind: Kind, objs: list[Obj], *, subresource: str = "") -> list[Obj | errors.StatusError]:
        """Batched updates for internal writers (kubelet shards: leases, node and pod status).

        One pipelined round trip (:meth:`Store.update_many`): each object is a compare-and-set
        against its own ``metadata.resourceVersion``, so it lands only if nothing changed since
        the caller read it. The contract that makes that enough: each object *is* the one the
        caller read (an informer's copy or a previous write's result) with only the part it owns
        changed - its status (``subresource="status"``) or its spec. Objects are stored as given:
        not copied, not validated (trusted internal callers; user input goes through
        :meth:`update`). An object whose precondition failed is retried on its own through
        :meth:`update` without a resourceVersion (read, replace the status - or the spec, keeping
        the stored status - write), so a concurrent writer's change is kept and the caller's
        still lands. Returns, per object, the stored object or its error (404 when gone).
        """
        results = self.store.update_many(kind, objs)
        if subresource == "status" and kind.has_status:
            self._status_again(kind, objs, results)
        out: list[Obj | errors.StatusError] = []
        for obj, stored in zip(objs, results, strict=True):
            result: Obj | errors.StatusError = stored
            try:
                if isinstance(stored, errors.StaleResourceVersion):
                    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
                    result = self.update(kind, {**obj, "metadata": meta}, subresource=subresource)
                elif not isinstance(stored, errors.StatusError):
                    result = self._finish_if_released(kind, stored)
            except errors.StatusError as e:
                result = e
            out.append(result)
        return out

    def _status_again(self, kind: Kind, objs: list[Obj], results: list[Obj | errors.StatusError]) -> None:
        """Retry the stale status writes of a batch together, in place in ``results``: one read of the stored
        objects and one write of each with its status replaced (what :meth:`update` does for one, two round
        trips per object); what is stale again is left for :meth:`update_many`'s own retry, one by one."""
        stale = [i for i, r in enumerate(results) if isinstance(r, errors.StaleResourceVersion)]
        if len(stale) < 2:
            return
        metas = [objs[i].get("metadata") or {} for i in stale]
        currents = self.store.get_many(kind, [(m.get("namespace") or None, m.get("name") or "") for m in metas])
        writes: list[tuple[int, Obj]] = []
        for i, meta, current in zip(stale, metas, currents, strict=True):
            if current is None:
                results[i] = errors.not_found(kind.plural, meta.get("name") or "", kind.group)
                continue
            new = {**current, "status": objs[i].get("status") or {}}
            if new == current:
                results[i] = current  # the store already says it (as update's guaranteed_update answers)
            else:
                writes.append((i, new))
        if writes:
            for (i, _new), stored in zip(writes, self.store.update_many(kind, [w for _, w in writes]), strict=True):
                if not isinstance(stored, errors.StaleResourceVersion):
                    results[i] = stored

    def update_status_many(self, kind: Kind, objs: list[Obj]) -> list[Obj | errors.StatusError]:
        """:meth:`update_many` of the status subresource."""
        return self.update_many(kind, objs, subresource="status")

    def delete_many(self, kind: Kind, objs: list[Obj]) -> list[Obj | errors.StatusError]:
        """Grace-0 deletes of objects the caller holds, each as ``delete(..., grace_period_seconds=0,
        preconditions={"uid": uid})`` would do it, in one store round trip where it can.

        For internal writers (a kubelet's final delete of the pods it terminated: upstream's status
        manager deletes each with grace 0 and a uid precondition). Each object must be the one the
        caller read (an informer's copy or a write's result). If deleting it now is what
        :meth:`delete` would plan for it (no finalizers left), it is deleted conditionally on its
        resourceVersion and uid, pipelined with the others; one that changed in between (409), or
        that needs marking rather than deleting, goes through :meth:`delete` on its own, which plans
        against the stored object. Returns, per object, the deleted object or its error.
        """
        done: dict[int, Obj | errors.StatusError] = {}
        fast = [i for i, obj in enumerate(objs) if kind is not SERVICE
                and self._deletion_plan(kind, obj, 0, None, None) is _DELETE_NOW]
        for i, result in zip(fast, self.store.delete_many(kind, [objs[i] for i in fast]), strict=True):
            if not isinstance(result, errors.StaleResourceVersion):
                done[i] = result
        out: list[Obj | errors.StatusError] = []
        for i, obj in enumerate(objs):
            result = done.get(i)
            if result is None:
                meta = obj["metadata"]
                try:
                    result = self.delete(kind, meta.get("namespace"), meta["name"], grace_period_seconds=0,
                                         preconditions={"uid": meta.get("uid") or ""})
                except errors.StatusError as e:
                    result = e
            out.append(result)
        return out

    def delete_named_many(self, kind: Kind, names: Sequence[tuple[str | None, str]]) -> list[Obj | errors.StatusError]:
        """Deletes by (namespace, name), each as ``delete(kind, namespace, name)`` would do it, in two store round
        trips (one read of them all, one pipelined write of each mark or removal) where it can.

        For a load driver deleting a batch of pods (client-go would send one DELETE each). Each object is
        planned against the stored one as :meth:`delete` plans it (a bound pod gets ``deletionTimestamp`` and
        its grace period, an unbound or finished one goes at once, finalizers are kept); a write that loses a
        race, a Service (its allocations) or a Namespace goes through :meth:`delete` on its own. Returns, per
        name, the object as the delete left it (marked, or deleted) or its error (404 when it is gone).
        """
        out: list[Obj | errors.StatusError | None] = [None] * len(names)
        currents = self.store.get_many(kind, list(names))
        now: list[int] = []
        marks: list[tuple[int, Obj]] = []
        one_by_one: list[int] = []
        for i, current in enumerate(currents):
            if current is None:
                out[i] = errors.not_found(kind.plural, names[i][1], kind.group)
            elif kind is SERVICE or kind.kind == "Namespace":
                one_by_one.append(i)
            else:
                plan = self._deletion_plan(kind, current, None, None, None)
                if plan is None:
                    out[i] = current  # a graceful deletion is under way already
                elif plan is _DELETE_NOW:
                    now.append(i)
                else:
                    assert isinstance(plan, dict)
                    marks.append((i, plan))
        removed = self.store.delete_many(kind, [currents[i] for i in now]) if now else []  # type: ignore[misc]
        marked = self.store.update_many(kind, [plan for _, plan in marks]) if marks else []
        for i, res in zip(now, removed, strict=True):
            if isinstance(res, errors.StaleResourceVersion):
                one_by_one.append(i)
            else:
                out[i] = res
        for (i, _plan), res in zip(marks, marked, strict=True):
            if isinstance(res, errors.StaleResourceVersion):
                one_by_one.append(i)
            elif isinstance(res, errors.StatusError):
                out[i] = res
            else:
                try:
                    out[i] = self._after_mark(kind, currents[i], res)  # type: ignore[arg-type]
                except errors.StatusError as e:
                    out[i] = e
        for i in one_by_one:
            try:
                out[i] = self.delete(kind, names[i][0], names[i][1])
            except errors.StatusError as e:
                out[i] = e
        return [res if res is not None else errors.internal("no outcome") for res in out]

    def patch_status_many(self, kind: Kind, targets: list[tuple[str | None, str, str]],
                          change: Callable[[int, Obj], Obj | None], *,
                          known: Sequence[Obj | None] | None = None) -> list[Obj | errors.StatusError]:
        """Status patches of many objects, (namespace, name, uid) each, in two store round trips (read, writes):
        for internal writers that patch many objects at once (the scheduler's nominations, a preemption's victims).

        ``change(i, current)`` gets target ``i``'s stored object (do not modify it) and returns its new status,
        or None to leave it as it is. A write that loses a race to another writer is made again on the new object
        (a patch has no resourceVersion precondition). Returns, per target, the object as it is after the call
        or its error: 404 when it is gone, 409 when its uid is not ``uid`` (re-created under the same name).

        ``known[i]`` (optional): the caller's copy of target ``i`` as it read it (an informer's), with its
        ``metadata.resourceVersion`` and uid. The first write is then made on it without reading the store: if
        the object changed since, that write fails its resourceVersion precondition and the object is read and
        written again as without ``known`` (one round trip fewer when the copy is current, as it mostly is). A
        copy under another uid, or without a resourceVersion, is not used.
        """
        out: list[Obj | errors.StatusError | None] = [None] * len(targets)
        pending = list(range(len(targets)))
        for attempt in range(_DELETE_ATTEMPTS):
            if not pending:
                break
            writes: list[tuple[int, Obj]] = []
            currents: list[Obj | None] = [None] * len(pending)
            unread = list(range(len(pending)))
            if attempt == 0 and known is not None:
                unread = [j for j, i in enumerate(pending) if not _usable_copy(known[i], targets[i][2])]
                for j, i in enumerate(pending):
                    currents[j] = known[i]
            if unread:
                for j, current in zip(unread, self.store.get_many(kind, [targets[pending[j]][:2] for j in unread]),
                                      strict=True):
                    currents[j] = current
            for i, current in zip(pending, currents, strict=True):
                _, name, uid = targets[i]
                found = "" if current is None else current["metadata"].get("uid") or ""
                if current is None or (uid and found != uid):
                    out[i] = errors.not_found(kind.plural, name, kind.group) if current is None else errors.conflict(
                        kind.plural, name, f"Precondition failed: UID in precondition: {uid}, UID in object "
                                           f"meta: {found}", kind.group)
                    continue
                status = change(i, current)
                if status is None:
                    out[i] = current
                else:
                    writes.append((i, {**current, "status": status}))
            stored = self.store.update_many(kind, [obj for _, obj in writes]) if writes else []
            pending = []
            for (i, _), res in zip(writes, stored, strict=True):
                if isinstance(res, errors.StaleResourceVersion):
                    pending.append(i)
                else:
                    out[i] = res
        for i in pending:
            out[i] = errors.conflict(kind.plural, targets[i][1], f"gave up after {_DELETE_ATTEMPTS} conflicting "
                                     "writes", kind.group)
        return [res if res is not None else errors.internal("no outcome") for res in out]

    def update_status_and_delete_many(self, kind: Kind, targets: list[tuple[str | None, str, str]],
                                      change: Callable[[Obj], Obj | None], *,
                                      known: Sequence[Obj | None] | None = None) -> list[Obj | errors.StatusError]:
        """For each (namespace, name, uid): a status patch, then a delete with the object's own grace period
        and a uid precondition -- upstream's preemption of a victim (``PatchPodStatus`` with DisruptionTarget,
        then ``DeletePod``), for all of them in three store round trips (read, status writes, deletes).

        ``change`` gets a copy of an object's status and returns the new one (None: no change); the patches are
        :meth:`patch_status_many`'s. A delete that loses a race is made again on its own (:meth:`delete` plans it
        against the stored object). Returns, per target, the object as the delete left it (deleted, or marked for
        graceful deletion) or its error: 404 when it is gone, 409 when its uid is not ``uid``. ``known``: the
        caller's copies of the objects, as :meth:`patch_status_many` takes them (two round trips when current).
        """
        out: list[Obj | errors.StatusError | None] = []
        written: dict[int, Obj] = {}
        for i, res in enumerate(self.patch_status_many(
                kind, targets, lambda _, current: change({**(current.get("status") or {})}), known=known)):
            out.append(res if isinstance(res, errors.StatusError) else None)
            if not isinstance(res, errors.StatusError):
                written[i] = res
        # A Service's deletion releases its allocations: those go one by one (below), as does a changed object.
        plans = {i: self._deletion_plan(kind, obj, None, None, None) if kind is not SERVICE else _ONE_BY_ONE
                 for i, obj in written.items()}
        now = [i for i, plan in plans.items() if plan is _DELETE_NOW]
        marks = [i for i, plan in plans.items() if isinstance(plan, dict)]
        results = zip([*now, *marks], [*self.store.delete_many(kind, [written[i] for i in now]),
                                       *self.store.update_many(kind, [plans[i] for i in marks])], strict=True)
        for i, res in results:
            out[i] = res if isinstance(res, errors.StatusError) or i in now else self._after_mark(
                kind, written[i], res)
        for i, obj in written.items():
            if plans[i] is None:
                out[i] = obj  # a graceful deletion is under way already: only a shorter grace would change it
            elif plans[i] is _ONE_BY_ONE or isinstance(out[i], errors.StaleResourceVersion):
                try:
                    out[i] = self.delete(kind, targets[i][0], targets[i][1], preconditions={"uid": targets[i][2]})
                except errors.StatusError as e:
                    out[i] = e
        return [res if res is not None else errors.internal("no outcome") for res in out]


def _usable_copy(copy: Obj | None, uid: str) -> bool:
    """Whether a caller's copy can stand for the stored object in a first, resourceVersion-checked write."""
    if copy is None:
        return False
    meta = copy.get("metadata") or {}
    return bool(meta.get("resourceVersion")) and (not uid or (meta.get("uid") or "") == uid)
