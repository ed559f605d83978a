"""The Recreate strategy: upstream ``pkg/controller/deployment/recreate.go``.

``rolloutRecreate``: scale every old ReplicaSet to zero, wait until none of
their pods is left running (``oldPodsRunning``), then create/scale the new one.
"""

from __future__ import annotations

from collections.abc import Sequence

from emulator.api.types import Obj
from emulator.controllers.deployment.progress import ProgressMixin
from emulator.controllers.deployment.util import actual_replica_count, deployment_complete, replicas_of


class RecreateMixin(ProgressMixin):
    """``recreate.go``'s methods of the Deployment controller."""

    def rollout_recreate(self, d: Obj, rs_list: list[Obj], pod_map: dict[str, list[Obj]]) -> None:
        new_rs, old_rss = self.get_all_replica_sets_and_sync_revision(d, rs_list, False)
        scaled = False
        for rs in self._current(old_rss, rs_list):
            if replicas_of(rs) > 0:
                changed, _ = self.scale_and_record(rs, 0, d, rs_list)
                scaled = scaled or changed
        if scaled:
            self.sync_rollout_status(self._all(old_rss, new_rs, rs_list), self._current_one(new_rs, rs_list), d)
            return
        if old_pods_running(new_rs, self._current(old_rss, rs_list), pod_map):
            self.sync_rollout_status(self._all(old_rss, new_rs, rs_list), self._current_one(new_rs, rs_list), d)
            return
        if new_rs is None:
            new_rs, old_rss = self.get_all_replica_sets_and_sync_revision(d, rs_list, True)
        assert new_rs is not None
        self.scale_and_record(self._current_one(new_rs, rs_list) or new_rs, replicas_of(d), d, rs_list)
        if deployment_complete(d, d.get("status") or {}):
            self.cleanup_deployment(self._current(old_rss, rs_list), d)
        self.sync_rollout_status(self._all(old_rss, new_rs, rs_list), self._current_one(new_rs, rs_list), d)


def old_pods_running(new_rs: Obj | None, old_rss: Sequence[Obj], pod_map: dict[str, list[Obj]]) -> bool:
    """``oldPodsRunning``: old ReplicaSets still report pods, or a pod of theirs is not terminal."""
    if actual_replica_count(old_rss) > 0:
        return True
    new_uid = new_rs["metadata"]["uid"] if new_rs is not None else None
    for uid, pods in pod_map.items():
        if uid == new_uid:
            continue
        for pod in pods:
            if (pod.get("status") or {}).get("phase") not in ("Failed", "Succeeded"):
                return True
    return False
