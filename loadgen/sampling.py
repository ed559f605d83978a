"""A sampler thread for ``kemu run``: reads the cluster every ``interval`` wall seconds until stopped.

What ``kubectl get ... -w`` would show, as time series: :class:`loadgen.autoscalers.AutoscalerSampler`
(HPAs and VPAs) and :class:`loadgen.keda.KedaSampler` (ScaledObjects, ScaledJobs and their lists) read
the API server through the server core on their own thread; a failed read costs one sample, never the
run, and :meth:`Sampler.stop` takes one last sample: the state the run ended in.
"""

from __future__ import annotations

import abc
import contextlib
import threading
import time
from typing import Self

from emulator.server.core import ServerCore

__all__ = ["Sampler"]


class Sampler(abc.ABC):
    """Calls :meth:`sample` every ``interval`` wall seconds on a thread; ``t0`` / ``cluster_t0`` are the start."""

    def __init__(self, core: ServerCore, *, interval: float, name: str) -> None:
        self.core = core
        self.interval = interval
        self.t0 = time.perf_counter()
        self.cluster_t0 = core.clock.now()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    @abc.abstractmethod
    def sample(self) -> None:
        ...

    def start(self) -> Self:
        self.t0 = time.perf_counter()
        self.cluster_t0 = self.core.clock.now()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
        self.sample()  # the state the run ended in

    def _run(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # a failed read costs one sample, never the run
                self.sample()
            self._stop.wait(self.interval)
