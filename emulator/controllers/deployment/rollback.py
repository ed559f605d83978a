"""Rollback by annotation: upstream ``pkg/controller/deployment/rollback.go``.

``kubectl rollout undo`` is client-side for apps/v1 (it copies an old
ReplicaSet's template and annotations into the Deployment); the old
``deprecated.deployment.rollback.to`` annotation is still honoured here: the
template of the ReplicaSet of the wanted revision (0: the previous one) is
copied into the Deployment and the annotation cleared.
"""

from __future__ import annotations

from emulator.api.kinds import DEPLOYMENT
from emulator.api.types import Obj
from emulator.controllers.deployment.sync import SyncMixin
from emulator.controllers.deployment.util import (
    ANNOTATIONS_TO_SKIP,
    ROLLBACK_DONE,
    ROLLBACK_REVISION_NOT_FOUND,
    ROLLBACK_TEMPLATE_UNCHANGED,
    ROLLBACK_TO,
    copy_json,
    equal_ignore_hash,
    last_revision,
    revision,
    rollback_to,
    without_hash,
)
from emulator.controllers.runtime import EVENT_NORMAL, EVENT_WARNING


class RollbackMixin(SyncMixin):
    """``rollback.go``'s methods of the Deployment controller."""

    def rollback(self, d: Obj, rs_list: list[Obj]) -> None:
        """``rollback``: copy the template of the ReplicaSet of the wanted revision (0: the previous one)."""
        new_rs, old_rss = self.get_all_replica_sets_and_sync_revision(d, rs_list, True)
        all_rss = [rs for rs in self._all(old_rss, new_rs, rs_list) if rs is not None]
        to = rollback_to(d) or 0
        if to == 0:
            to = last_revision(all_rss)
            if to == 0:
                self.event(d, EVENT_WARNING, ROLLBACK_REVISION_NOT_FOUND, "Unable to find last revision.")
                self._clear_rollback_to(d)
                return
        for rs in all_rss:
            if revision(rs) == to:
                performed = False
                template = (rs.get("spec") or {}).get("template")
                if not equal_ignore_hash((d.get("spec") or {}).get("template"), template):
                    d["spec"]["template"] = without_hash(copy_json(template or {}))
                    annotations = {k: v for k, v in (d["metadata"].get("annotations") or {}).items()
                                   if k in ANNOTATIONS_TO_SKIP}
                    annotations.update({k: v for k, v in (rs["metadata"].get("annotations") or {}).items()
                                        if k not in ANNOTATIONS_TO_SKIP})
                    d["metadata"]["annotations"] = annotations
                    performed = True
                else:
                    self.event(d, EVENT_WARNING, ROLLBACK_TEMPLATE_UNCHANGED, "The rollback revision contains the "
                               f'same template as current deployment "{d["metadata"]["name"]}"')
                self._clear_rollback_to(d)
                if performed:
                    self.event(d, EVENT_NORMAL, ROLLBACK_DONE,
                               f'Rolled back deployment "{d["metadata"]["name"]}" to revision {to}')
                return
        self.event(d, EVENT_WARNING, ROLLBACK_REVISION_NOT_FOUND, "Unable to find the revision to rollback to.")
        self._clear_rollback_to(d)

    def _clear_rollback_to(self, d: Obj) -> None:
        annotations = dict(d["metadata"].get("annotations") or {})
        annotations.pop(ROLLBACK_TO, None)
        d["metadata"]["annotations"] = annotations
        self.core.update(DEPLOYMENT, d)
