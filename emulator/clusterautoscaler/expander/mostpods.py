"""The ``most-pods`` expander: the options that schedule the most pending pods (upstream ``expander/mostpods``)."""

from __future__ import annotations

from collections.abc import Sequence

from emulator.clusterautoscaler.expander import Option


class MostPods:
    name = "most-pods"

    def best_options(self, options: Sequence[Option]) -> list[Option]:
        most = max((len(o.pods) for o in options), default=0)
        return [o for o in options if len(o.pods) == most]
