"""The pod evictor: limits, the eviction API, events and metrics (upstream ``pkg/descheduler/evictions/evictions.go``).

:meth:`PodEvictor.evict_pod` follows ``PodEvictor.EvictPod``:

1. limits first, in upstream's order — total (``maxNoOfPodsToEvictTotal``),
   per node (``maxNoOfPodsToEvictPerNode``), per namespace
   (``maxNoOfPodsToEvictPerNamespace``); a limit reached raises
   :class:`EvictionTotalLimitError` / :class:`EvictionNodeLimitError` /
   :class:`EvictionNamespaceLimitError` so the plugin moves to the next node
   or stops, and counts ``descheduler_pods_evicted{result=<the limit>}``;
2. the eviction itself, a ``policy/v1`` ``Eviction`` posted to the pod's
   ``eviction`` subresource (:func:`emulator.server.eviction.evict`): the
   PodDisruptionBudget decides. A 429 (the budget allows no disruption now) is
   an error the plugin logs and passes over ("error when evicting pod
   (ignoring)"); a 404 (the pod is already gone) is neither an error nor an
   eviction; in dry-run mode nothing is posted;
3. success counts towards every limit, ``descheduler_pods_evicted{result=success}``
   and a Normal Event on the pod (reason: the strategy, message
   ``pod eviction from NODE node by sigs.k8s.io/descheduler``); a failure counts
   ``result=error`` and, with ``evictionFailureEventNotification``, a Warning
   ``EvictionFailed`` Event.

Counters are per descheduling loop (:meth:`reset_counters`), as upstream's.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, NamedTuple

from emulator.api import errors
from emulator.api.types import Obj
from emulator.descheduler.metrics import PODS_EVICTED

log = logging.getLogger(__name__)


class EvictionLimitError(Exception):
    result = ""


class EvictionNodeLimitError(EvictionLimitError):
    result = "maximum number of pods per node reached"

    def __init__(self, node: str) -> None:
        super().__init__(f"maximum number of evicted pods per node {node} reached")


class EvictionNamespaceLimitError(EvictionLimitError):
    result = "maximum number of pods per namespace reached"

    def __init__(self, namespace: str) -> None:
        super().__init__(f"maximum number of evicted pods per namespace {namespace} reached")


class EvictionTotalLimitError(EvictionLimitError):
    result = "maximum number of pods evicted reached"

    def __init__(self) -> None:
        super().__init__("maximum number of evicted pods per a descheduling cycle reached")


class EvictionError(Exception):
    """The eviction API refused (429 budget, 500 ...): the plugin logs it and tries the next pod."""


@dataclass(frozen=True)
class EvictOptions:
    strategy: str = ""
    profile: str = ""
    reason: str = ""


class Eviction(NamedTuple):
    """One eviction done (or, in dry-run mode, that would have been done); a tuple: a pass may record
    tens of thousands."""

    namespace: str
    name: str
    node: str
    strategy: str
    profile: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


class PodEvictor:
    """Evicts pods through the eviction API within the policy's limits; see the module docstring.

    ``core`` is a :class:`~emulator.server.core.ServerCore` (None only in dry-run mode);
    ``recorder`` an :class:`~emulator.controllers.runtime.EventRecorder` or None.
    """

    def __init__(self, core: Any, *, dry_run: bool = False, max_per_node: int | None = None,
                 max_per_namespace: int | None = None, max_total: int | None = None,
                 grace_period_seconds: int | None = None, recorder: Any = None,
                 failure_events: bool = False) -> None:
        if core is None and not dry_run:
            raise ValueError("a PodEvictor that really evicts needs the server core")
        self.core = core
        self.dry_run = dry_run
        self.max_per_node = max_per_node
        self.max_per_namespace = max_per_namespace
        self.max_total = max_total
        self.grace_period_seconds = grace_period_seconds
        self.recorder = recorder
        self.failure_events = failure_events
        self._lock = threading.Lock()
        self.node_count: dict[str, int] = {}
        self.namespace_count: dict[str, int] = {}
        self.total = 0
        self.evicted: list[Eviction] = []  # this loop's evictions, in order
        self.failed: list[tuple[str, str]] = []  # (pod key, error) of this loop
        self._children: dict[tuple[str, ...], Any] = {}

    def reset_counters(self) -> None:
        with self._lock:
            self.node_count, self.namespace_count, self.total = {}, {}, 0
            self.evicted, self.failed = [], []

    def node_evicted(self, node: str) -> int:
        return self.node_count.get(node, 0)

    def evict_pod(self, pod: Obj, opts: EvictOptions) -> None:
        """Evict ``pod`` or raise (a limit error, or :class:`EvictionError`); a pod already gone is a no-op."""
        meta = pod["metadata"]
        namespace, name, node = meta.get("namespace") or "", meta["name"], pod["spec"].get("nodeName") or ""
        labels = (opts.strategy, opts.profile, namespace, node)
        with self._lock:
            limit: EvictionLimitError | None = None
            if self.max_total is not None and self.total + 1 > self.max_total:
                limit = EvictionTotalLimitError()
            elif node and self.max_per_node is not None and self.node_count.get(node, 0) + 1 > self.max_per_node:
                limit = EvictionNodeLimitError(node)
            elif (self.max_per_namespace is not None
                  and self.namespace_count.get(namespace, 0) + 1 > self.max_per_namespace):
                limit = EvictionNamespaceLimitError(namespace)
            if limit is not None:
                self._counter(limit.result, labels).inc()
                raise limit
        try:
            gone = self._evict(namespace, name)
        except errors.StatusError as e:
            message = e.message
            if e.code == 429:
                message = f"error when evicting pod (ignoring) {name!r}: {e.message}"
            self._counter("error", labels).inc()
            with self._lock:
                self.failed.append((f"{namespace}/{name}", message))
            log.info("descheduler: evicting %s/%s failed: %s", namespace, name, message)
            if self.failure_events and self.recorder is not None:
                self.recorder.event(pod, "Warning", "EvictionFailed",
                                    f"pod eviction from {node} node by sigs.k8s.io/descheduler failed: {message}")
            raise EvictionError(message) from None
        if gone:
            return
        with self._lock:
            if node:
                self.node_count[node] = self.node_count.get(node, 0) + 1
            self.namespace_count[namespace] = self.namespace_count.get(namespace, 0) + 1
            self.total += 1
            self.evicted.append(Eviction(namespace, name, node, opts.strategy, opts.profile))
        self._counter("success", labels).inc()
        if self.dry_run:
            log.debug("descheduler: evicted pod %s/%s in dry run mode (%s, node %s)", namespace, name, opts.strategy,
                      node)
            return
        log.debug("descheduler: evicted pod %s/%s (%s, node %s)", namespace, name, opts.strategy, node)
        if self.recorder is not None:
            self.recorder.event(pod, "Normal", opts.reason or opts.strategy or "NotSet",
                                f"pod eviction from {node} node by sigs.k8s.io/descheduler")

    def _counter(self, result: str, labels: tuple[str, str, str, str]) -> Any:
        """The ``descheduler_pods_evicted`` child for these labels (looked up once: a pass may evict thousands)."""
        key = (result, *labels)
        child = self._children.get(key)
        if child is None:
            strategy, profile, namespace, node = labels
            child = self._children[key] = PODS_EVICTED.labels(result=result, strategy=strategy, profile=profile,
                                                              namespace=namespace, node=node)
        return child

    def _evict(self, namespace: str, name: str) -> bool:
        """Post the Eviction; True when the pod was already gone (404)."""
        if self.dry_run:
            return False
        from emulator.server.eviction import evict

        options: Obj = {}
        if self.grace_period_seconds is not None:
            options["gracePeriodSeconds"] = self.grace_period_seconds
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": name, "namespace": namespace}, "deleteOptions": options}
        try:
            evict(self.core, namespace, name, body)
        except errors.StatusError as e:
            if e.code == 404:
                log.info("descheduler: pod %s/%s not found when evicting", namespace, name)
                return True
            raise
        return False
