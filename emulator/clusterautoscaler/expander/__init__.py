"""Expanders: which of the node groups that could help gets the scale-up (upstream ``expander/``).

Every expander is a :class:`Strategy` - it narrows a list of :class:`Option`
(one per node group that could host some of the pending pods: the group, how
many nodes, which pods) to the best ones. ``--expander`` may name several,
comma-separated (``priority,least-waste``): each narrows what the one before
left, and a random choice breaks a remaining tie, as upstream's
``expander/factory/chain.go``. One module per expander:
:mod:`.random`, :mod:`.mostpods`, :mod:`.waste` (least-waste), :mod:`.price`,
:mod:`.priority`.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from emulator.api.types import Obj
from emulator.clusterautoscaler.cloudprovider import NodeGroup
from emulator.scheduler.framework.types import PodInfo

__all__ = ["Chain", "Option", "Strategy", "build"]


@dataclass
class Option:
    """Upstream ``expander.Option``: grow ``node_group`` by ``node_count`` nodes to host ``pods``."""

    node_group: NodeGroup
    node_count: int
    pods: list[PodInfo]
    template: Obj = field(default_factory=dict)
    debug: str = ""

    @property
    def id(self) -> str:
        return self.node_group.id()


class Strategy(Protocol):
    """Upstream ``expander.Filter``: the best of ``options`` (never empty when ``options`` is not)."""

    name: str

    def best_options(self, options: Sequence[Option]) -> list[Option]: ...


class Chain:
    """``--expander a,b,c``: each strategy narrows the previous one's choice; random breaks a final tie."""

    def __init__(self, strategies: Sequence[Strategy], rng: _random.Random | None = None) -> None:
        self.strategies = list(strategies)
        self.rng = rng or _random.Random()

    def best_option(self, options: Sequence[Option]) -> Option | None:
        remaining = list(options)
        for strategy in self.strategies:
            if len(remaining) <= 1:
                break
            narrowed = strategy.best_options(remaining)
            if narrowed:
                remaining = narrowed
        if not remaining:
            return None
        return remaining[0] if len(remaining) == 1 else self.rng.choice(remaining)


def build(names: Sequence[str], *, rng: _random.Random | None = None,
          priorities: Callable[[], Mapping[int, Sequence[str]] | None] | None = None, **_: Any) -> Chain:
    """The chain for ``--expander`` ``names`` (validated by the options)."""
    from emulator.clusterautoscaler.expander import mostpods, price, priority, waste
    from emulator.clusterautoscaler.expander import random as random_expander

    rng = rng or _random.Random()
    made: list[Strategy] = []
    for name in names:
        if name == "random":
            made.append(random_expander.RandomStrategy(rng))
        elif name == "most-pods":
            made.append(mostpods.MostPods())
        elif name == "least-waste":
            made.append(waste.LeastWaste())
        elif name == "price":
            made.append(price.Price())
        elif name == "priority":
            made.append(priority.Priority(priorities or (lambda: None)))
        else:
            raise ValueError(f"unknown expander {name!r}")
    return Chain(made, rng)
