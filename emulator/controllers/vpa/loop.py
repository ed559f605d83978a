"""What the VPA's recommender and updater share: a periodic pass over VPAs, pods and their controllers.

Both upstream binaries run ``RunOnce`` on a ticker (``--recommender-interval``,
``--updater-interval``, 1 minute). Here a controller's work queue holds one
key that requeues itself after the interval on the cluster clock, so the pass
runs in the controller manager like any reconcile. Both walk from a pod to the
VPA's target through the pod's controllers: ReplicaSets come from the shared
informer, other controllers from reads memoised for one pass.
"""

from __future__ import annotations

import abc
from typing import Any

from emulator.api import errors
from emulator.api.kinds import POD, REPLICASET, VERTICALPODAUTOSCALER, Kind, by_api_version_kind
from emulator.api.types import Obj
from emulator.controllers.runtime import Controller, ControllerContext

KEY = "pass"
DEFAULT_INTERVAL = 60.0  # --recommender-interval, --updater-interval
_APPS_OWNERS = ("Deployment", "DaemonSet", "StatefulSet")


class PeriodicVPAController(Controller):
    """A controller whose only key runs :meth:`run_once` every ``interval`` cluster seconds."""

    def __init__(self, name: str, ctx: ControllerContext, *, interval_option: str,
                 interval: float | None = None) -> None:
        super().__init__(name, ctx)
        self.interval = float(interval or ctx.option(interval_option, DEFAULT_INTERVAL))
        self.vpas = self.watch(ctx.informers.informer_for(VERTICALPODAUTOSCALER))
        self.pods = self.watch(ctx.informers.informer_for(POD))
        self.replicasets = self.watch(ctx.informers.informer_for(REPLICASET))
        self._memo: dict[tuple[str, str, str], Obj | None] = {}

    def start(self) -> Any:
        self.enqueue_key(KEY)
        return super().start()

    def reconcile(self, key: str) -> float | None:
        if key != KEY:
            return None
        self.forget_reads()
        self.run_once()
        return self.interval

    def forget_reads(self) -> None:
        """Start a pass: objects read through :meth:`get` are read afresh."""
        self._memo = {}

    @abc.abstractmethod
    def run_once(self) -> int:
        """One pass; returns how many objects it changed."""

    def get(self, kind: Kind, namespace: str, name: str) -> Obj | None:
        """One object, read at most once per pass; None when it does not exist."""
        memo_key = (kind.resource, namespace, name)
        if memo_key not in self._memo:
            try:
                self._memo[memo_key] = self.core.get(kind, namespace, name)
            except errors.StatusError as e:
                if e.code != 404:
                    raise
                self._memo[memo_key] = None
        return self._memo[memo_key]

    def owner(self, kind: str, namespace: str, name: str) -> Obj | None:
        """A pod's controller, or its controller's controller (the ``get_owner`` of ``controlled_by_target``)."""
        if kind == "ReplicaSet":
            return self.replicasets.indexer.get_by_key(f"{namespace}/{name}")
        if kind not in _APPS_OWNERS:
            return None
        try:
            return self.get(by_api_version_kind("apps/v1", kind), namespace, name)
        except errors.StatusError:
            return None  # a kind this cluster does not serve
