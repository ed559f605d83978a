"""The ``price`` expander: the option whose new nodes cost least per pod they schedule (upstream ``expander/price``).

Simplified: upstream scores ``(node price + stabilisation) / (pod price +
stabilisation)`` times a penalty for node shapes far from a preferred size
(``price.go``, ``preferred.go``), pricing pods by their requests. kemu scores
``node_count * price_per_hour / pods scheduled`` (the group's price from its
node group spec): the cheapest capacity for the same pending pods wins; ties
(equal cost) are all kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from emulator.clusterautoscaler.expander import Option


def cost_per_pod(option: Option) -> float:
    return option.node_count * option.node_group.price_per_hour() / max(1, len(option.pods))


class Price:
    name = "price"

    def best_options(self, options: Sequence[Option]) -> list[Option]:
        scored = [(cost_per_pod(o), o) for o in options]
        if not scored:
            return []
        cheapest = min(s for s, _ in scored)
        return [o for s, o in scored if s == cheapest]
