"""The ``random`` expander: any option that helps (upstream ``expander/random``)."""

from __future__ import annotations

import random as _random
from collections.abc import Sequence

from emulator.clusterautoscaler.expander import Option


class RandomStrategy:
    name = "random"

    def __init__(self, rng: _random.Random | None = None) -> None:
        self.rng = rng or _random.Random()

    def best_options(self, options: Sequence[Option]) -> list[Option]:
        return [self.rng.choice(list(options))] if options else []
