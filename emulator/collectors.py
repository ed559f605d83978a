"""Prometheus collectors that read live objects at scrape time.

Some series describe state (pending pods per queue, nodes by condition)
rather than count events: computing them on every change would put work on
hot paths for numbers read every few seconds. A :class:`SourceCollector`
instead holds the objects that know those numbers (schedulers, controller
managers) weakly - an object that goes away simply stops being reported -
and subclasses turn :meth:`SourceCollector.sources` into metric families in
``collect``. Only ``prometheus_client`` is imported here, so layers that must
stay free of I/O libraries (the scheduler) can use it.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, TypeVar

from prometheus_client import REGISTRY
from prometheus_client.registry import Collector

C = TypeVar("C", bound=Collector)


class SourceCollector(Collector):
    """A registry of live sources for a collector's ``collect`` (see the module docstring)."""

    def __init__(self) -> None:
        self._sources: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()

    def add(self, source: Any) -> None:
        with self._lock:
            self._sources.add(source)

    def remove(self, source: Any) -> None:
        with self._lock:
            self._sources.discard(source)

    def sources(self) -> list[Any]:
        """The sources alive now (a copy: ``collect`` runs without the lock)."""
        with self._lock:
            return list(self._sources)


_registered: dict[type[Collector], Collector] = {}
_registered_lock = threading.Lock()


def registered(cls: type[C]) -> C:
    """The process's one ``cls`` collector, registered in the default registry on first use."""
    with _registered_lock:
        instance = _registered.get(cls)
        if instance is None:
            instance = _registered[cls] = cls()
            REGISTRY.register(instance)
        return instance  # type: ignore[return-value]
