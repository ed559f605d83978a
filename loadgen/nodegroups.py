"""What a run with node groups reports: nodes per group over time, pending pods, time to capacity, cost.

:class:`NodeGroupSampler` runs on a thread during ``kemu run`` when the
scenario declares ``cluster.node_groups``: once a second (wall) it counts the
Nodes of each group (label ``kemu.io/node-group``) and the pods still unbound,
stamped with cluster time. :func:`summarize` turns the samples into the
summary's ``autoscaling`` section:

* per group: price, the most and the last nodes, node-hours (the step integral
  of the node count over cluster time) and cost = node-hours x price per hour;
* ``timeToCapacitySeconds``: each *episode* is a stretch of samples with pods
  pending, from the first such sample to the first sample with none (cluster
  seconds) - how long a burst waited for scheduling, scale-up, boot and start;
* ``series``: the samples themselves (for plots), at most ``max_points``.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable
from typing import Any

from emulator.api.kinds import NODE
from emulator.cloud.nodegroups import LABEL_NODE_GROUP
from emulator.cloud.provider import Cloud
from emulator.server.core import ServerCore

__all__ = ["NodeGroupSampler", "summarize"]


class NodeGroupSampler:
    """Samples (cluster time, nodes per group, pending pods) every ``period`` wall seconds until stopped."""

    def __init__(self, core: ServerCore, pending: Callable[[], int], period: float = 1.0) -> None:
        self.core = core
        self.pending = pending
        self.period = period
        self.samples: list[tuple[float, dict[str, int], int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="node-group-sampler", daemon=True)

    def sample(self) -> None:
        counts: dict[str, int] = {}
        for node in self.core.list(NODE).items:
            group = ((node.get("metadata") or {}).get("labels") or {}).get(LABEL_NODE_GROUP)
            if group:
                counts[group] = counts.get(group, 0) + 1
        self.samples.append((self.core.clock.now(), counts, self.pending()))

    def _run(self) -> None:
        while True:
            with contextlib.suppress(Exception):  # a sample lost to a store hiccup is only a gap in the series
                self.sample()
            if self._stop.wait(self.period):
                return

    def start(self) -> NodeGroupSampler:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self.sample()


def summarize(samples: list[tuple[float, dict[str, int], int]], prices: dict[str, float],
              max_points: int = 600) -> dict[str, Any]:
    """The ``autoscaling`` summary section (see the module docstring)."""
    groups: dict[str, dict[str, Any]] = {g: {"pricePerHour": p, "nodesMax": 0, "nodesLast": 0, "nodeHours": 0.0}
                                         for g, p in prices.items()}
    for (t, counts, _), nxt in itertools.pairwise(samples):
        for g, n in counts.items():
            groups.setdefault(g, {"pricePerHour": 0.0, "nodesMax": 0, "nodesLast": 0, "nodeHours": 0.0})
            groups[g]["nodeHours"] += n * (nxt[0] - t) / 3600.0
    for _, counts, _ in samples:
        for g, n in counts.items():
            groups[g]["nodesMax"] = max(groups[g]["nodesMax"], n)
    if samples:
        for g, info in groups.items():
            info["nodesLast"] = samples[-1][1].get(g, 0)
    total = 0.0
    for info in groups.values():
        info["cost"] = round(info["nodeHours"] * info["pricePerHour"], 4)
        info["nodeHours"] = round(info["nodeHours"], 4)
        total += info["cost"]
    episodes: list[float] = []
    began: float | None = None
    for t, _, pending in samples:
        if pending and began is None:
            began = t
        elif not pending and began is not None:
            episodes.append(t - began)
            began = None
    step = max(1, len(samples) // max_points)
    return {
        "groups": groups,
        "costTotal": round(total, 4),
        "pendingMax": max((p for _, _, p in samples), default=0),
        "timeToCapacitySeconds": {"episodes": len(episodes), "unfinished": began is not None,
                                  "max": round(max(episodes), 1) if episodes else None,
                                  "mean": round(sum(episodes) / len(episodes), 1) if episodes else None},
        "series": [[round(t - samples[0][0], 1), counts, pending] for t, counts, pending in samples[::step]],
    }


def prices_of(core: ServerCore) -> dict[str, float]:
    """Each node group's price per hour, from the emulated cloud."""
    cloud = Cloud(core.store.redis, core.store.config.prefix)
    return {name: spec.price_per_hour for name, spec in cloud.groups().items()}
