"""The ``priority`` expander: groups ranked by the ``cluster-autoscaler-priority-expander`` ConfigMap
(upstream ``expander/priority``).

The ConfigMap (in the autoscaler's namespace) holds under ``data.priorities``
a YAML map of priority → list of regular expressions over node group names::

    priorities: |-
      10:
        - .*-spot-.*
      50:
        - ^on-demand-large$

The options whose group matches an expression of the highest priority any
option matches win (a group matching several takes its highest); with no
ConfigMap, or no match, every option stays.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import yaml

from emulator.clusterautoscaler.expander import Option

log = logging.getLogger(__name__)

CONFIG_MAP_NAME = "cluster-autoscaler-priority-expander"
PRIORITIES_KEY = "priorities"


def parse_priorities(config_map: Mapping[str, Any] | None) -> dict[int, list[str]] | None:
    """The priority table of the ConfigMap (None when absent or malformed: upstream logs and ignores it)."""
    text = ((config_map or {}).get("data") or {}).get(PRIORITIES_KEY)
    if not text:
        return None
    try:
        raw = yaml.safe_load(text)
        table = {int(k): [str(x) for x in (v or [])] for k, v in (raw or {}).items()}
        for patterns in table.values():
            for p in patterns:
                re.compile(p)
        return table
    except (yaml.YAMLError, TypeError, ValueError, AttributeError, re.error) as e:
        log.warning("priority expander: ignoring malformed %s ConfigMap: %s", CONFIG_MAP_NAME, e)
        return None


class Priority:
    name = "priority"

    def __init__(self, priorities: Callable[[], Mapping[int, Sequence[str]] | None]) -> None:
        self.priorities = priorities

    def best_options(self, options: Sequence[Option]) -> list[Option]:
        table = self.priorities()
        if not table:
            return list(options)
        best: list[Option] = []
        best_priority: int | None = None
        for option in options:
            group = option.id
            matched = [prio for prio, patterns in table.items() if any(re.search(p, group) for p in patterns)]
            if not matched:
                continue
            prio = max(matched)
            if best_priority is None or prio > best_priority:
                best, best_priority = [option], prio
            elif prio == best_priority:
                best.append(option)
        return best or list(options)
