"""The ``descheduler`` controller: the descheduling loop inside the (leader-elected) controller manager.

Built by the controller manager from :data:`emulator.controllers.manager.CONTROLLERS`
only when enabled (``--controllers`` ``descheduler``, which ``kemu up
--descheduler-policy FILE`` adds). It reads the cluster from the manager's
shared informer caches (nodes, pods with their node index, PriorityClasses,
Namespaces, PodDisruptionBudgets) and holds one key, requeued every
``descheduling_interval`` cluster seconds (see
:mod:`emulator.descheduler.descheduler` for the options).
"""

from __future__ import annotations

import logging
from typing import Any

from emulator.api.kinds import NAMESPACE, NODE, PDB, POD, PRIORITYCLASS
from emulator.controllers.runtime import Controller, ControllerContext
from emulator.descheduler.descheduler import (
    CONTROLLER_NAME,
    DEFAULT_INTERVAL,
    LOOP_KEY,
    Descheduler,
    PassResult,
    metrics_sources,
    policy_from_option,
)
from emulator.descheduler.framework import ClusterSnapshot

log = logging.getLogger(__name__)


class DeschedulerController(Controller):
    """Runs :meth:`Descheduler.run_once` now and then every interval; see the module docstring."""

    def __init__(self, ctx: ControllerContext) -> None:
        super().__init__(CONTROLLER_NAME, ctx, workers=1)
        self.policy = policy_from_option(ctx.option("descheduler_policy", None))
        self.interval = float(ctx.option("descheduling_interval", DEFAULT_INTERVAL))
        self.descheduler = Descheduler(self.policy, ctx.clock, core=ctx.core,
                                       dry_run=bool(ctx.option("descheduler_dry_run", False)), recorder=ctx.recorder)
        informers = ctx.informers
        self.nodes = self.watch(informers.informer_for(NODE))
        self.pods = self.watch(informers.informer_for(POD))
        self.priority_classes = self.watch(informers.informer_for(PRIORITYCLASS))
        self.namespaces = self.watch(informers.informer_for(NAMESPACE))
        self.pdbs = self.watch(informers.informer_for(PDB))
        self.last: PassResult | None = None

    def start(self) -> DeschedulerController:
        super().start()
        self.enqueue_key(LOOP_KEY)
        return self

    def snapshot(self) -> ClusterSnapshot:
        node_src, pod_src = metrics_sources(self.core, self.clock)
        return ClusterSnapshot.build(
            self.nodes.get_store().list(), self.pods.get_store().list(),
            priority_classes={pc["metadata"]["name"]: int(pc.get("value") or 0)
                              for pc in self.priority_classes.get_store().list()},
            namespaces={ns["metadata"]["name"]: ns for ns in self.namespaces.get_store().list()},
            pdbs=list(self.pdbs.get_store().list()), node_usage_source=node_src, pod_usage_source=pod_src)

    def reconcile(self, key: str) -> float | None:
        if key != LOOP_KEY:
            return None
        self.last = self.descheduler.run_once(self.snapshot())
        return self.interval if self.interval > 0 else None


def new_controller(ctx: Any) -> DeschedulerController:
    """The controller manager's constructor for this controller."""
    return DeschedulerController(ctx)
