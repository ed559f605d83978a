"""Rollout progress: upstream ``pkg/controller/deployment/progress.go``.

``syncRolloutStatus`` — the status plus the ``Progressing`` condition
(``ReplicaSetUpdated``, ``NewReplicaSetAvailable``, ``ProgressDeadlineExceeded``
measured on the cluster clock) and ``ReplicaFailure`` copied from the
ReplicaSets (``getReplicaFailures``) — and ``requeueStuckDeployment``, which
comes back when a stalled rollout's deadline is due.
"""

from __future__ import annotations

from emulator.api.types import Obj
from emulator.clock import parse_rfc3339
from emulator.controllers.deployment.sync import SyncMixin
from emulator.controllers.deployment.util import (
    NEW_RS_AVAILABLE,
    REPLICA_SET_UPDATED,
    TIMED_OUT,
    calculate_status,
    deployment_complete,
    deployment_progressing,
    deployment_timed_out,
    get_condition,
    has_progress_deadline,
    new_condition,
    remove_condition,
    set_condition,
    status_equal,
    with_availability,
)
from emulator.controllers.runtime import meta_key


class ProgressMixin(SyncMixin):
    """``progress.go``'s methods of the Deployment controller."""

    def sync_rollout_status(self, all_rss: list[Obj | None], new_rs: Obj | None, d: Obj) -> None:
        """``syncRolloutStatus``: the status plus the Progressing condition and ReplicaFailure."""
        now = self.clock.now()
        status = with_availability(calculate_status(all_rss, new_rs, d, now), d, now)
        if not has_progress_deadline(d):
            remove_condition(status, "Progressing")
        current = get_condition(d.get("status") or {}, "Progressing")
        complete_already = (int(status.get("replicas") or 0) == int(status.get("updatedReplicas") or 0)
                            and current is not None and current.get("reason") == NEW_RS_AVAILABLE)
        if has_progress_deadline(d) and not complete_already:
            name = new_rs["metadata"]["name"] if new_rs is not None else None
            if deployment_complete(d, status):
                msg = (f'ReplicaSet "{name}" has successfully progressed.' if name
                       else f'Deployment "{d["metadata"]["name"]}" has successfully progressed.')
                set_condition(status, new_condition("Progressing", "True", NEW_RS_AVAILABLE, msg, now))
            elif deployment_progressing(d, status):
                msg = (f'ReplicaSet "{name}" is progressing.' if name
                       else f'Deployment "{d["metadata"]["name"]}" is progressing.')
                cond = new_condition("Progressing", "True", REPLICA_SET_UPDATED, msg, now)
                if current is not None:
                    if current.get("status") == "True":
                        cond["lastTransitionTime"] = current.get("lastTransitionTime")
                    remove_condition(status, "Progressing")
                # Appended directly: unlike SetDeploymentCondition, a progress update with the same
                # reason must still move lastUpdateTime (upstream handles this case the same way).
                status["conditions"] = [*(status.get("conditions") or []), cond]
            elif deployment_timed_out(d, status, now):
                msg = (f'ReplicaSet "{name}" has timed out progressing.' if name
                       else f'Deployment "{d["metadata"]["name"]}" has timed out progressing.')
                set_condition(status, new_condition("Progressing", "False", TIMED_OUT, msg, now))
        failure = self._replica_failure(all_rss, new_rs)
        if failure is not None:
            set_condition(status, failure)
        else:
            remove_condition(status, "ReplicaFailure")
        if status_equal(d.get("status") or {}, status):
            self._requeue_stuck(d, status, now)
            return
        d["status"] = status
        self._write_status(d)

    @staticmethod
    def _replica_failure(all_rss: list[Obj | None], new_rs: Obj | None) -> Obj | None:
        """``getReplicaFailures``: the new ReplicaSet's ReplicaFailure condition first, else any old one's."""
        for group in ([new_rs], all_rss):
            for rs in group:
                if rs is None:
                    continue
                for c in (rs.get("status") or {}).get("conditions") or []:
                    if c.get("type") == "ReplicaFailure":
                        ts = c.get("lastTransitionTime")
                        return {"type": "ReplicaFailure", "status": c.get("status"), "lastUpdateTime": ts,
                                "lastTransitionTime": ts, "reason": c.get("reason", ""),
                                "message": c.get("message", "")}
        return None

    def _requeue_stuck(self, d: Obj, status: Obj, now: float) -> None:
        """``requeueStuckDeployment``: come back when the progress deadline of a stalled rollout is due."""
        current = get_condition(d.get("status") or {}, "Progressing")
        if not has_progress_deadline(d) or current is None:
            return
        if deployment_complete(d, status) or current.get("reason") == TIMED_OUT:
            return
        last = current.get("lastUpdateTime")
        if not last:
            return
        after = parse_rfc3339(last) + int(d["spec"]["progressDeadlineSeconds"]) - now
        if after < 1.0:
            self.queue.add_rate_limited(meta_key(d))
        else:
            # One more second, as upstream, so the check lands after the deadline rather than on it.
            self._requeue_after = after + 1.0
