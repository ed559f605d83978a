"""The ``pods/{name}/eviction`` subresource: delete a pod only if its PodDisruptionBudget allows it.

A re-implementation of upstream ``pkg/registry/core/pod/storage/eviction.go``
(``EvictionREST.Create``) over :class:`~emulator.server.core.ServerCore`, step
for step:

1. The body is a ``policy/v1`` (or ``v1beta1``) ``Eviction`` whose name must be
   the pod's; its ``deleteOptions`` are used for the final delete.
2. A pod that is terminal (``Succeeded``/``Failed``), ``Pending``, or already
   being deleted does not count against any budget (``canIgnorePDB``): it is
   deleted at once. A ``Pending`` pod is deleted with a resourceVersion
   precondition, so it cannot become Ready between the check and the delete;
   on conflict the check runs again.
3. Otherwise the namespace's PDBs whose selector matches the pod are found.
   None: plain delete. More than one: 500 with upstream's message.
4. An unhealthy (not Ready) pod is deleted without spending the budget when the
   PDB's ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``, or (default
   ``IfHealthyBudget``) when ``currentHealthy >= desiredHealthy > 0``; the
   delete then carries a resourceVersion precondition and a conflict answers 429.
5. Else ``checkAndDecrement``: the PDB's ``status.observedGeneration`` must be
   current (429 "still being processed" otherwise), ``disruptionsAllowed`` must
   be positive (429 with a ``DisruptionBudget`` cause "needs N healthy pods and
   has M currently"; negative or an over-full ``disruptedPods`` map: 403). The
   status is written back compare-and-set, with ``disruptionsAllowed`` - 1 and
   the pod recorded in ``disruptedPods`` (cluster clock), so the disruption
   controller does not count it as healthy while it goes away; a conflicting
   write re-reads the PDB and checks again (upstream ``EvictionsRetry``: 20 tries).
6. The pod gets the ``DisruptionTarget`` condition (``EvictionByEvictionAPI``,
   the PodDisruptionConditions feature, GA upstream) and is deleted with the
   eviction's ``deleteOptions`` — gracefully if it is bound and running.

Success returns upstream's ``Status`` (the create handler fills in ``code: 201``).

Two deliberate differences (the more-than-one-PDB answer, immediate retries) are
listed under Simplifications in ``docs/architecture.md``.
"""

from __future__ import annotations

from emulator.api import errors, pdb
from emulator.api.kinds import PDB, POD
from emulator.api.types import Obj
from emulator.clock import rfc3339
from emulator.server.core import ServerCore

EVICTION_API_VERSIONS = ("policy/v1", "policy/v1beta1")
RETRY_STEPS = 20  # upstream EvictionsRetry.Steps
VIOLATION_MESSAGE = "Cannot evict pod as it would violate the pod's disruption budget."
MULTIPLE_PDBS_MESSAGE = ("This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
                         "support.")


class BudgetCause(errors.Cause):
    """A ``metav1.StatusCause`` of type ``DisruptionBudget``: a reason and a message, no field."""

    def to_dict(self) -> dict[str, str]:
        return {"reason": self.reason, "message": self.message}


def success_status() -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}


def too_many_requests(cause: str, retry_after_seconds: int = 0) -> errors.StatusError:
    """Upstream's 429 for a budget that does not allow the eviction (retryAfterSeconds 0 is omitted, as in JSON)."""
    err = errors.too_many_requests(VIOLATION_MESSAGE, retry_after_seconds or None)
    err.causes.append(BudgetCause("", cause, pdb.DISRUPTION_BUDGET_CAUSE))
    return err


def _still_processing(pdb_name: str) -> errors.StatusError:
    # createTooManyRequestsError: the budget's status lags its spec, or a race was lost.
    return too_many_requests(f"The disruption budget {pdb_name} is still being processed by the server.", 10)


def _delete_options(body: Obj, namespace: str, name: str, dry_run: bool) -> tuple[Obj, bool]:
    if not isinstance(body, dict):
        raise errors.bad_request(f"not a Eviction object: {type(body).__name__}")
    api_version, kind = body.get("apiVersion"), body.get("kind")
    if (api_version and api_version not in EVICTION_API_VERSIONS) or (kind and kind != "Eviction"):
        raise errors.bad_request(f"the API version in the data ({api_version}) or kind ({kind}) does not match the "
                                 "expected policy/v1, Kind=Eviction")
    meta = body.get("metadata") or {}
    if not isinstance(meta, dict):
        raise errors.bad_request("metadata must be an object")
    if meta.get("name") != name:
        raise errors.bad_request("name in URL does not match name in Eviction object")
    if meta.get("namespace") and meta["namespace"] != namespace:
        raise errors.bad_request("the namespace of the provided object does not match the namespace sent on the "
                                 "request")
    options = body.get("deleteOptions") or {}
    if not isinstance(options, dict):
        raise errors.bad_request("deleteOptions must be an object")
    body_dry = options.get("dryRun") or []
    if not isinstance(body_dry, list) or any(d != "All" for d in body_dry):
        raise errors.invalid("DeleteOptions", "", [errors.Cause(
            "dryRun", f'Unsupported value: {body_dry!r}: supported values: "All"', "FieldValueNotSupported")])
    return options, dry_run or bool(body_dry)


def _rv_precondition(options: Obj) -> str:
    return str((options.get("preconditions") or {}).get("resourceVersion") or "")


def _with_rv_precondition(options: Obj, rv: str) -> Obj:
    return {**options, "preconditions": {**(options.get("preconditions") or {}), "resourceVersion": rv}}


def _can_ignore_pdb(pod: Obj) -> bool:
    """``canIgnorePDB``: terminal, Pending and already-deleting pods disrupt nothing more by going."""
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Succeeded", "Failed", "Pending") or bool(pod["metadata"].get("deletionTimestamp"))


def _should_enforce_resource_version(pod: Obj) -> bool:
    return not pdb.is_terminal(pod) and not pod["metadata"].get("deletionTimestamp")


def evict(core: ServerCore, namespace: str, name: str, body: Obj, *, dry_run: bool = False) -> Obj:
    """POST ``/api/v1/namespaces/{namespace}/pods/{name}/eviction``; returns the success Status or raises.

    ``dry_run`` is the request's ``dryRun=All``: every check runs, nothing is written.
    """
    options, dry = _delete_options(body, namespace, name, dry_run)
    original_rv = _rv_precondition(options)

    # Pods that can go regardless of budgets (retried on conflict unless the caller pinned a version).
    pod: Obj = {}
    for attempt in range(RETRY_STEPS):
        pod = core.get(POD, namespace, name)
        if not _can_ignore_pdb(pod):
            break
        opts = options
        if _should_enforce_resource_version(pod) and not original_rv:
            opts = _with_rv_precondition(options, pod["metadata"]["resourceVersion"])
        try:
            _add_condition_and_delete(core, namespace, name, opts, dry)
        except errors.StatusError as e:
            if e.reason != "Conflict" or original_rv or attempt == RETRY_STEPS - 1:
                raise
            continue
        return success_status()

    budgets = [p for p in core.list(PDB, namespace).items if pdb.budget_matches(p, pod)]
    if len(budgets) > 1:
        raise errors.StatusError(500, "", MULTIPLE_PDBS_MESSAGE)
    update_deletion_options = False
    pdb_name = ""
    if budgets:
        budget = budgets[0]
        pdb_name = budget["metadata"]["name"]
        if not pdb.is_pod_ready(pod):
            # An unhealthy pod does not count towards currentHealthy: deleting it spends no budget
            # when the policy says so, or (IfHealthyBudget, the default) when the application is
            # healthy enough without it.
            policy = (budget.get("spec") or {}).get("unhealthyPodEvictionPolicy") or pdb.IF_HEALTHY_BUDGET
            status = budget.get("status") or {}
            current, desired = int(status.get("currentHealthy") or 0), int(status.get("desiredHealthy") or 0)
            if policy == pdb.ALWAYS_ALLOW or (current >= desired > 0):
                update_deletion_options = True
        if not update_deletion_options:
            _check_and_decrement_with_retry(core, budget, name, dry)

    opts = options
    if update_deletion_options:
        # The pod must not have become Ready since we looked.
        opts = _with_rv_precondition(options, pod["metadata"]["resourceVersion"])
    try:
        _add_condition_and_delete(core, namespace, name, opts, dry)
    except errors.StatusError as e:
        if e.reason == "Conflict" and update_deletion_options and not original_rv:
            raise _still_processing(pdb_name) from None
        raise
    return success_status()


def _check_and_decrement_with_retry(core: ServerCore, budget: Obj, pod_name: str, dry: bool) -> None:
    meta = budget["metadata"]
    for attempt in range(RETRY_STEPS):
        if attempt:
            budget = core.get(PDB, meta["namespace"], meta["name"])
        try:
            check_and_decrement(core, budget, pod_name, dry_run=dry)
            return
        except errors.StatusError as e:
            if e.reason != "Conflict" or attempt == RETRY_STEPS - 1:
                raise


def check_and_decrement(core: ServerCore, budget: Obj, pod_name: str, *, dry_run: bool = False) -> None:
    """Upstream ``checkAndDecrement``: spend one disruption of ``budget`` on ``pod_name`` (CAS; 409 if it moved)."""
    meta = budget["metadata"]
    name = meta["name"]
    status = dict(budget.get("status") or {})
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise _still_processing(name)
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed < 0:
        raise errors.forbidden("poddisruptionbudget", name, "pdb disruptions allowed is negative", "policy")
    if len(status.get("disruptedPods") or {}) > pdb.MAX_DISRUPTED_POD_SIZE:
        raise errors.forbidden("poddisruptionbudget", name, "DisruptedPods map too big - too many evictions not "
                               "confirmed by PDB controller", "policy")
    if allowed == 0:
        raise too_many_requests(f"The disruption budget {name} needs {int(status.get('desiredHealthy') or 0)} "
                                f"healthy pods and has {int(status.get('currentHealthy') or 0)} currently")
    now = rfc3339(core.clock.now())
    status["disruptionsAllowed"] = allowed - 1
    if allowed - 1 == 0:
        status["conditions"] = [dict(c) for c in status.get("conditions") or []]
        pdb.update_disruption_allowed_condition(status, now)
    if dry_run:
        return
    # Tell the disruption controller this pod is about to go, so it stops counting it as healthy
    # (it drops the entry after pdb.DELETION_TIMEOUT_SECONDS if the pod was not deleted after all).
    status["disruptedPods"] = {**(status.get("disruptedPods") or {}), pod_name: now}
    core.update_status(PDB, {**budget, "status": status})  # conditional: the budget's resourceVersion


def _add_condition_and_delete(core: ServerCore, namespace: str, name: str, options: Obj, dry: bool) -> None:
    """Upstream ``addConditionAndDeletePod``: mark the pod ``DisruptionTarget``, then delete it with ``options``."""
    if dry:
        return
    pre = options.get("preconditions") or {}
    pre_uid, pre_rv = str(pre.get("uid") or ""), str(pre.get("resourceVersion") or "")
    now = rfc3339(core.clock.now())

    def add_condition(pod: Obj) -> Obj | None:
        meta = pod["metadata"]
        if pre_uid and pre_uid != meta.get("uid"):
            raise errors.conflict("Pod", name, f"the UID in the precondition ({pre_uid}) does not match the UID in "
                                  f"record ({meta.get('uid')}). The object might have been deleted and then recreated")
        if pre_rv and pre_rv != meta.get("resourceVersion"):
            raise errors.conflict("Pod", name, f"the ResourceVersion in the precondition ({pre_rv}) does not match the "
                                  f"ResourceVersion in record ({meta.get('resourceVersion')}). The object might have "
                                  "been modified")
        status = dict(pod.get("status") or {})
        conditions = [dict(c) for c in status.get("conditions") or []]
        wanted = {"type": "DisruptionTarget", "status": "True", "reason": "EvictionByEvictionAPI",
                  "message": "Eviction API: evicting"}
        for cond in conditions:
            if cond.get("type") == "DisruptionTarget":
                if all(cond.get(k) == v for k, v in wanted.items()):
                    return None
                if cond.get("status") != "True":
                    cond["lastTransitionTime"] = now
                cond.update(wanted)
                break
        else:
            conditions.append({**wanted, "lastProbeTime": None, "lastTransitionTime": now})
        status["conditions"] = conditions
        return {**pod, "status": status}

    updated = core.store.guaranteed_update(POD, namespace, name, add_condition)
    if pre_rv:
        # We changed the pod ourselves: the delete must expect the version we wrote.
        pre = {**pre, "resourceVersion": updated["metadata"]["resourceVersion"]}
    core.delete(POD, namespace, name, grace_period_seconds=options.get("gracePeriodSeconds"),
                preconditions=pre or None, propagation_policy=options.get("propagationPolicy"),
                orphan_dependents=options.get("orphanDependents"))
