"""Run a controller's ``sync_once()`` periodically in a thread until told to stop.

This is the stop-gap runtime until controllers get informers and work queues
(another issue): :class:`ControllerLoop` calls one function every ``period``
wall-clock seconds in a daemon thread, keeps going when a pass raises (the error
is logged and counted; upstream ``wait.Until`` + ``HandleCrash`` behave the same
way), and stops promptly when :meth:`ControllerLoop.stop` is called or the shared
``threading.Event`` is set: the thread waits on that event, never in ``sleep``.

Periods in *cluster* time (the collector's sweep interval, the two-minute
expiry of a PDB's ``disruptedPods``) are measured by the controllers themselves
against their injected :class:`~emulator.clock.Clock`; the loop's period is only
how often a controller looks, so it is wall-clock time.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

log = logging.getLogger(__name__)


class Syncable(Protocol):
    def sync_once(self) -> Any: ...


class ControllerLoop:
    """One controller pass every ``period`` seconds in a background thread."""

    def __init__(self, name: str, fn: Callable[[], Any] | Syncable, period: float = 1.0, *,
                 stop_event: threading.Event | None = None) -> None:
        if period <= 0:
            raise ValueError("period must be positive")
        self.name = name
        self._fn: Callable[[], Any] = fn if callable(fn) else fn.sync_once
        self.period = period
        self._stop = stop_event or threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._pass_done = threading.Condition(self._lock)
        self.passes = 0
        self.errors = 0
        self.last_error: BaseException | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> ControllerLoop:
        if self.running:
            return self
        self._thread = threading.Thread(target=self._run, name=f"kemu-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Ask the loop to stop and wait (up to ``timeout``) for the pass in progress to finish."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def wait_passes(self, n: int, timeout: float) -> bool:
        """Block until ``n`` more passes completed (for tests and start-up); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._pass_done:
            target = self.passes + n
            while self.passes < target:
                left = deadline - time.monotonic()
                if left <= 0 or not self._pass_done.wait(left):
                    return self.passes >= target
        return True

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            try:
                self._fn()
            except Exception as e:  # one bad pass must not kill the controller
                with self._lock:
                    self.errors += 1
                    self.last_error = e
                log.exception("controller %s: pass failed", self.name)
            with self._pass_done:
                self.passes += 1
                self._pass_done.notify_all()
            # Wait out the rest of the period on the stop event, so stop() is immediate.
            self._stop.wait(max(0.0, self.period - (time.monotonic() - started)))
