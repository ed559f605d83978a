"""The ``least-waste`` expander: the options leaving the least idle CPU and memory (upstream ``expander/waste``).

For each option (upstream ``leastwaste.BestOptions``)::

    wasted_cpu    = (node_count * node cpu capacity    - cpu requested by its pods)    / (node_count * node cpu)
    wasted_memory = (node_count * node memory capacity - memory requested by its pods) / (node_count * node memory)
    score         = wasted_cpu + wasted_memory

capacity from the template node's ``status.capacity``, requests summed over the
pods' containers; the lowest score wins, ties are all kept.
"""

from __future__ import annotations

from collections.abc import Sequence

from emulator.api.quantity import cpu_millis, to_int
from emulator.clusterautoscaler.expander import Option


def wasted_score(option: Option) -> float:
    capacity = (option.template.get("status") or {}).get("capacity") or {}
    node_cpu, node_mem = cpu_millis(capacity.get("cpu", 0)), to_int(capacity.get("memory", 0))
    cpu = sum(p.requests.get("cpu", 0) for p in option.pods)
    mem = sum(p.requests.get("memory", 0) for p in option.pods)
    avail_cpu, avail_mem = node_cpu * option.node_count, node_mem * option.node_count
    wasted_cpu = (avail_cpu - cpu) / avail_cpu if avail_cpu else 0.0
    wasted_mem = (avail_mem - mem) / avail_mem if avail_mem else 0.0
    return wasted_cpu + wasted_mem


class LeastWaste:
    name = "least-waste"

    def best_options(self, options: Sequence[Option]) -> list[Option]:
        scored = [(wasted_score(o), o) for o in options]
        if not scored:
            return []
        least = min(s for s, _ in scored)
        return [o for s, o in scored if s == least]
