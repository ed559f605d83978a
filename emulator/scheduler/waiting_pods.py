"""Pods held at Permit: allowed once every waiting plugin allows them, rejected by one, or timed out.

Upstream ``pkg/scheduler/framework/runtime/waiting_pods_map.go``
(``waitingPod``); our own Python, a :class:`threading.Timer` per waiting
plugin.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from emulator.api.types import ObjView
from emulator.scheduler.framework.interface import Code, Status
from emulator.scheduler.framework.types import PodInfo

__all__ = ["WaitingPod"]


class WaitingPod:
    """A pod held at Permit (upstream ``waitingPod``): allowed once every waiting plugin allows it."""

    def __init__(self, info: PodInfo, timeouts: Mapping[str, float],
                 on_done: Callable[[WaitingPod, Status | None], None]) -> None:
        self.info = info
        self.pending = dict(timeouts)
        self._on_done = on_done
        self._lock = threading.Lock()
        self._done = False
        self._timers = []
        for plugin, timeout in timeouts.items():
            timer = threading.Timer(timeout, self.reject, (plugin, f"rejected due to timeout after waiting "
                                                                   f"{timeout:g}s at plugin {plugin}"))
            timer.daemon = True
            self._timers.append(timer)

    @property
    def uid(self) -> str:
        return self.info.uid

    @property
    def pod(self) -> ObjView:
        return self.info.pod

    def start(self) -> None:
        for timer in self._timers:
            timer.start()

    def _finish(self, status: Status | None) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        for timer in self._timers:
            timer.cancel()
        self._on_done(self, status)

    def allow(self, plugin: str) -> None:
        with self._lock:
            self.pending.pop(plugin, None)
            done = not self.pending
        if done:
            self._finish(None)

    def reject(self, plugin: str, message: str) -> None:
        self._finish(Status(Code.UNSCHEDULABLE, message, plugin=plugin))
