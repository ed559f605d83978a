"""The RollingUpdate strategy: upstream ``pkg/controller/deployment/rolling.go``.

``rolloutRolling``: scale the new ReplicaSet up to at most ``replicas +
maxSurge`` pods in all, then scale old ones down while at least ``replicas -
maxUnavailable`` pods stay available — unhealthy old pods first
(``cleanupUnhealthyReplicas``, then ``scaleDownOldReplicaSetsForRollingUpdate``).
"""

from __future__ import annotations

import logging

from emulator.api import errors
from emulator.api.types import Obj
from emulator.controllers.deployment.progress import ProgressMixin
from emulator.controllers.deployment.util import (
    available_replica_count,
    by_creation,
    deployment_complete,
    max_unavailable,
    new_rs_new_replicas,
    replica_count,
    replicas_of,
    status_int,
)
from emulator.controllers.runtime import meta_key

log = logging.getLogger(__name__)


class RollingMixin(ProgressMixin):
    """``rolling.go``'s methods of the Deployment controller."""

    def rollout_rolling(self, d: Obj, rs_list: list[Obj]) -> None:
        new_rs, old_rss = self.get_all_replica_sets_and_sync_revision(d, rs_list, True)
        assert new_rs is not None
        if self.reconcile_new_replica_set(self._all(old_rss, new_rs, rs_list), new_rs, d, rs_list):
            self.sync_rollout_status(self._all(old_rss, new_rs, rs_list), self._current_one(new_rs, rs_list), d)
            return
        active_old = [rs for rs in self._current(old_rss, rs_list) if replicas_of(rs) > 0]
        if self.reconcile_old_replica_sets(self._all(old_rss, new_rs, rs_list), active_old,
                                           self._current_one(new_rs, rs_list), d, rs_list):
            self.sync_rollout_status(self._all(old_rss, new_rs, rs_list), self._current_one(new_rs, rs_list), d)
            return
        if deployment_complete(d, d.get("status") or {}):
            self.cleanup_deployment(self._current(old_rss, rs_list), d)
        self.sync_rollout_status(self._all(old_rss, new_rs, rs_list), self._current_one(new_rs, rs_list), d)

    def reconcile_new_replica_set(self, all_rss: list[Obj | None], new_rs: Obj, d: Obj, rs_list: list[Obj]) -> bool:
        new_rs = self._current_one(new_rs, rs_list) or new_rs
        if replicas_of(new_rs) == replicas_of(d):
            return False
        if replicas_of(new_rs) > replicas_of(d):
            scaled, _ = self.scale_and_record(new_rs, replicas_of(d), d, rs_list)
            return scaled
        scaled, _ = self.scale_and_record(new_rs, new_rs_new_replicas(d, all_rss, new_rs), d, rs_list)
        return scaled

    def reconcile_old_replica_sets(self, all_rss: list[Obj | None], old_rss: list[Obj], new_rs: Obj | None,
                                   d: Obj, rs_list: list[Obj]) -> bool:
        """``reconcileOldReplicaSets``: scale old ReplicaSets down as far as availability allows."""
        if replica_count(old_rss) == 0:
            return False
        all_pods = replica_count(all_rss)
        min_available = replicas_of(d) - max_unavailable(d)
        new_unavailable = replicas_of(new_rs) - status_int(new_rs, "availableReplicas")
        max_scaled_down = all_pods - min_available - new_unavailable
        if max_scaled_down <= 0:
            return False
        try:
            old_rss, cleaned = self.cleanup_unhealthy_replicas(old_rss, d, max_scaled_down, rs_list)
        except (errors.StatusError, ValueError) as e:
            log.info("deployment %s: cleaning up unhealthy replicas: %s", meta_key(d), e)
            return False  # upstream logs and reports no scaling; the next pass retries
        try:
            scaled = self.scale_down_old_replica_sets_for_rolling_update(
                [*old_rss, self._current_one(new_rs, rs_list)], old_rss, d, rs_list)
        except (errors.StatusError, ValueError) as e:
            log.info("deployment %s: scaling down old replica sets: %s", meta_key(d), e)
            return False
        return cleaned + scaled > 0

    def cleanup_unhealthy_replicas(self, old_rss: list[Obj], d: Obj, max_cleanup: int, rs_list: list[Obj]
                                   ) -> tuple[list[Obj], int]:
        """``cleanupUnhealthyReplicas``: old ReplicaSets lose their unavailable pods first (oldest first)."""
        old_rss = by_creation(old_rss)
        total = 0
        for i, rs in enumerate(old_rss):
            if total >= max_cleanup:
                break
            if replicas_of(rs) == 0 or replicas_of(rs) == status_int(rs, "availableReplicas"):
                continue
            count = min(max_cleanup - total, replicas_of(rs) - status_int(rs, "availableReplicas"))
            if count < 0:
                # The status is older than the spec (it still counts pods of a larger size): "scaling
                # down" by a negative count would scale up. Upstream refuses the same way.
                raise ValueError(f"when cleaning up unhealthy replicas, got invalid request to scale down "
                                 f"{rs['metadata']['name']} {replicas_of(rs)} -> {replicas_of(rs) - count}")
            _, updated = self.scale_and_record(rs, replicas_of(rs) - count, d, rs_list)
            total += count
            old_rss[i] = updated
        return old_rss, total

    def scale_down_old_replica_sets_for_rolling_update(self, all_rss: list[Obj | None], old_rss: list[Obj], d: Obj,
                                                       rs_list: list[Obj]) -> int:
        """``scaleDownOldReplicaSetsForRollingUpdate``: only what keeps ``replicas - maxUnavailable`` available."""
        min_available = replicas_of(d) - max_unavailable(d)
        available = available_replica_count(all_rss)
        if available <= min_available:
            return 0
        total, target = 0, available - min_available
        for rs in by_creation(old_rss):
            if total >= target:
                break
            if replicas_of(rs) == 0:
                continue
            count = min(replicas_of(rs), target - total)
            if count < 0:
                raise ValueError(f"when scaling down old RS, got invalid request to scale down "
                                 f"{rs['metadata']['name']} {replicas_of(rs)} -> {replicas_of(rs) - count}")
            self.scale_and_record(rs, replicas_of(rs) - count, d, rs_list)
            total += count
        return total
