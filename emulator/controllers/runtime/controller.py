"""The Controller base: informer handlers → work queue → workers calling ``reconcile``.

Upstream every kube-controller-manager controller writes the same loop by hand
(``Run`` → ``worker`` → ``processNextWorkItem`` → ``syncHandler``, e.g.
``pkg/controller/replicaset/replica_set.go``); kemu has it once, in
:class:`Controller`. Informer handlers put keys on the queue; ``workers``
threads take keys and call :meth:`Controller.reconcile`. A reconcile that
raises is retried with the rate limiter (and given up after ``max_retries`` when
set, as the Deployment controller's 15); one that returns a number is requeued
after that many cluster seconds. Each reconcile is timed
(``controller_runtime_reconcile_time_seconds``, the name sigs.k8s.io
controller-runtime uses; and an in-process sample buffer for benchmarks).

Beside it, the small helpers every controller shares: queue keys
(``cache.MetaNamespaceKeyFunc``), delete-tombstone unwrapping, the controller-uid
index, ``resolveControllerRef``, a parsed-selector cache, and
:class:`PodOwnerController` — the pod handlers of the DaemonSet and Job
controllers.
"""

from __future__ import annotations

import abc
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from prometheus_client import Counter, Histogram

from emulator.api import errors
from emulator.api.kinds import POD, Kind
from emulator.api.selectors import LabelSelector
from emulator.api.types import Obj
from emulator.clock import Clock
from emulator.controllers.runtime.controller_ref_manager import get_controller_of
from emulator.controllers.runtime.events import EVENT_NORMAL, EventRecorder
from emulator.controllers.runtime.expectations import ControllerExpectations
from emulator.controllers.runtime.ratelimiters import RateLimiter
from emulator.controllers.runtime.workqueue import LatencySamples, WorkQueue
from emulator.informers.shared_informer import ResourceEventHandlerFuncs
from emulator.server.core import ServerCore

log = logging.getLogger(__name__)


RECONCILE_TIME = Histogram("controller_runtime_reconcile_time_seconds", "Length of time per reconciliation per "
                           "controller", ["controller"],
                           buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
RECONCILE_TOTAL = Counter("controller_runtime_reconcile", "Total number of reconciliations per controller",
                          ["controller", "result"])


# ----------------------------------------------------------------------------- keys, indexes, lookups


def meta_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name`` (or ``name``), the key controllers queue (``cache.MetaNamespaceKeyFunc``)."""
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace")
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


def split_key(key: str) -> tuple[str | None, str]:
    ns, _, name = key.rpartition("/")
    return ns or None, name


def controller_index_func(obj: Obj) -> list[str]:
    """Index objects by their controller's uid, and orphans by ``orphan/<namespace>``.

    One index answers both questions a ``ControllerRefManager`` asks: "what do I own?"
    (``controller_uid``) and "which orphans could I adopt?" (``orphan/ns``) without scanning
    the namespace.
    """
    ref = get_controller_of(obj)
    if ref is not None and ref.get("uid"):
        return [str(ref["uid"])]
    return [f"orphan/{(obj.get('metadata') or {}).get('namespace') or ''}"]


CONTROLLER_INDEX = "controller"


def resolve_controller_ref(indexer: Any, namespace: str, ref: Mapping[str, Any], kind: str,
                           group: str | None = None) -> Obj | None:
    """``resolveControllerRef``: the cached object a controller ownerReference names, if any.

    The reference must name ``kind`` (and, when ``group`` is given, an ``apiVersion`` of that
    API group, e.g. ``"apps"``); the object is looked up in ``indexer`` as
    ``<namespace>/<ref.name>`` and returned only if its uid is the reference's uid — a
    reference to an object since deleted and re-created under the same name resolves to None.
    """
    if ref.get("kind") != kind:
        return None
    if group is not None and str(ref.get("apiVersion") or "").rpartition("/")[0] != group:
        return None
    obj = indexer.get_by_key(f"{namespace}/{ref.get('name', '')}")
    if obj is None or obj["metadata"].get("uid") != ref.get("uid"):
        return None
    return obj


class SelectorCache:
    """Parsed ``spec.selector`` of controller objects, cached per uid and generation.

    A workload's selector is immutable in apps/v1 (and a new generation re-parses it anyway),
    so parsing it once per (uid, generation) is safe. The cache is cleared wholesale when it
    grows past ``max_size`` entries. Parse errors (:class:`~emulator.api.errors.StatusError`)
    propagate and are not cached.
    """

    def __init__(self, max_size: int = 100_000) -> None:
        self.max_size = max_size
        self._selectors: dict[tuple[str, int], LabelSelector] = {}

    def selector_of(self, obj: Mapping[str, Any]) -> LabelSelector:
        """The parsed ``spec.selector`` of ``obj``."""
        meta = obj["metadata"]
        key = (meta.get("uid") or "", int(meta.get("generation") or 0))
        selector = self._selectors.get(key)
        if selector is None:
            selector = LabelSelector.from_dict((obj.get("spec") or {}).get("selector"), "spec.selector")
            if len(self._selectors) > self.max_size:
                self._selectors.clear()
            self._selectors[key] = selector
        return selector

    def matching(self, candidates: Iterable[Obj], labels: Mapping[str, str]) -> list[Obj]:
        """The candidates whose selector is valid, non-empty and matches ``labels``.

        What ``GetPodReplicaSets`` / ``getDeploymentsForReplicaSet`` do for an orphan: the
        controllers that could adopt it. A candidate with an invalid selector is skipped.
        """
        out = []
        for obj in candidates:
            try:
                selector = self.selector_of(obj)
            except errors.StatusError:
                continue
            if not selector.empty and selector.matches(labels):
                out.append(obj)
        return out


# ----------------------------------------------------------------------------- the controller base


@dataclass
class ControllerContext:
    """What a controller is built from: the server core, the process's informer factory, the clock, events.

    ``options`` holds per-controller settings (``concurrent_replicaset_syncs`` ...) from the
    controller manager's configuration.
    """

    core: ServerCore
    informers: Any  # emulator.informers.SharedInformerFactory (Any: keeps this module import-light)
    clock: Clock
    recorder: EventRecorder | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def option(self, name: str, default: Any) -> Any:
        return self.options.get(name, default)


class Runnable(Protocol):
    """What the controller manager starts and stops."""

    name: str

    def start(self) -> Any: ...

    def stop(self, timeout: float = 10.0) -> None: ...


class Controller(abc.ABC):
    """Informer handlers → :class:`WorkQueue` → ``workers`` threads calling :meth:`reconcile`.

    Subclasses register their informers and handlers in ``__init__`` (through
    ``ctx.informers``), call :meth:`watch` for each informer whose sync they need before
    working, and implement :meth:`reconcile`. ``start`` is called by the controller manager
    after the factory has started and every informer has synced.
    """

    #: retries after which a failing key is dropped (None: retry forever, as the ReplicaSet controller does).
    max_retries: int | None = None

    def __init__(self, name: str, ctx: ControllerContext, *, workers: int = 1,
                 rate_limiter: RateLimiter | None = None) -> None:
        self.name = name
        self.ctx = ctx
        self.core = ctx.core
        self.clock = ctx.clock
        self.workers = workers
        self.recorder = ctx.recorder
        self.queue = WorkQueue(name, clock=ctx.clock, rate_limiter=rate_limiter)
        self.reconcile_latency = LatencySamples()
        self._m_reconcile = RECONCILE_TIME.labels(name)
        self._synced: list[Callable[[], bool]] = []
        self._threads: list[threading.Thread] = []
        self.reconciles = 0
        self.errors = 0

    # ------------------------------------------------------------------ wiring
    def watch(self, informer: Any) -> Any:
        """Remember that ``informer`` must have synced before the workers start; returns it."""
        self._synced.append(informer.has_synced)
        return informer

    def has_synced(self) -> bool:
        return all(fn() for fn in self._synced)

    def watch_kind(self, kind: Kind, *, delete: Callable[[Any], None] | None = None) -> Any:
        """Watch the kind this controller reconciles: every add and update queues the object's key.

        ``delete`` handles deletions (None: they are not handled). Returns the informer.
        """
        informer = self.watch(self.ctx.informers.informer_for(kind))
        informer.add_event_handler(ResourceEventHandlerFuncs(
            add=lambda obj, _initial: self.enqueue(obj), update=lambda _old, new: self.enqueue(new), delete=delete))
        return informer

    def enqueue(self, obj: Mapping[str, Any]) -> None:
        self.queue.add(meta_key(obj))

    def enqueue_key(self, key: str) -> None:
        self.queue.add(key)

    def enqueue_deleted(self, obj: Any) -> None:
        """A delete notification: queue the object's key, so that reconcile finds it gone."""
        key = deleted_key(obj)
        if key:
            self.enqueue_key(key)

    def enqueue_after(self, key: str, delay: float) -> None:
        self.queue.add_after(key, delay)

    def event(self, obj: Mapping[str, Any], event_type: str, reason: str, message: str) -> None:
        if self.recorder is not None:
            self.recorder.event(obj, event_type, reason, message)

    # ------------------------------------------------------------------ running
    def start(self) -> Controller:
        if self._threads:
            return self
        for i in range(self.workers):
            t = threading.Thread(target=self._worker, name=f"{self.name}-worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.queue.shutdown()
        deadline = time.monotonic() + timeout
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        self._threads = []

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)

    def _worker(self) -> None:
        while self.process_next_item():
            pass

    def process_next_item(self, timeout: float | None = None) -> bool:
        """Take one key and reconcile it; False once the queue shut down (or on ``timeout``)."""
        key, shutdown = self.queue.get(timeout)
        if shutdown:
            return False
        if key is None:
            return False
        try:
            self._process(str(key))
        finally:
            self.queue.done(key)
        return True

    def _process(self, key: str) -> None:
        started = time.perf_counter()
        # A requeue delay counts from when the reconcile began: it computed ``deadline - now`` with
        # a ``now`` no later than this, so the key never fires after the deadline it asked for.
        began = self.clock.now()
        result = "success"
        try:
            requeue_after = self.reconcile(key)
        except Exception as e:
            result = "error"
            self.errors += 1
            self._handle_error(key, e)
        else:
            self.queue.forget(key)
            if requeue_after is not None:
                result = "requeue_after"
                self.queue.add_after(key, requeue_after, since=began)
        finally:
            took = time.perf_counter() - started
            self.reconciles += 1
            self._m_reconcile.observe(took)
            self.reconcile_latency.add(took)
            RECONCILE_TOTAL.labels(self.name, result).inc()

    def _handle_error(self, key: str, error: Exception) -> None:
        if isinstance(error, errors.StatusError) and any(
                c.reason == "NamespaceTerminating" for c in error.causes or []):
            self.queue.forget(key)  # nothing can be created there any more: upstream drops the key
            return
        if self.max_retries is None or self.queue.num_requeues(key) < self.max_retries:
            level = logging.DEBUG if isinstance(error, errors.StatusError) and error.reason == "Conflict" \
                else logging.INFO
            log.log(level, "%s: error syncing %r, requeuing: %s", self.name, key, error,
                    exc_info=not isinstance(error, errors.StatusError))
            self.queue.add_rate_limited(key)
            return
        log.warning("%s: dropping %r out of the queue after %d retries: %s", self.name, key, self.max_retries, error)
        self.queue.forget(key)

    @abc.abstractmethod
    def reconcile(self, key: str) -> float | None:
        """Bring the object of ``key`` to its desired state; return cluster seconds to requeue after, or None."""


class PodOwnerController(Controller):
    """A :class:`Controller` that creates pods under its own controller reference and counts them.

    The pod and owner delete handlers the DaemonSet and Job controllers share (upstream's
    ``addPod`` / ``updatePod`` / ``deletePod`` with plain :class:`ControllerExpectations`):
    a pod event wakes the owner its controller reference resolves to (:meth:`owner_key_of`),
    a new pod counts as an observed creation, and a pod that starts or finishes being
    deleted as an observed deletion (once: a graceful deletion is counted when its
    ``deletionTimestamp`` appears, not again when the pod goes). Subclasses call
    :meth:`watch_owners_and_pods` with their owner kind.
    """

    expectations: ControllerExpectations
    _owner_informer: Any
    _owner_kind: str

    def watch_owners_and_pods(self, owner: Kind) -> tuple[Any, Any]:
        """Watch the owner kind (:meth:`watch_kind`) and pods (the handlers below); returns both informers.

        Sets up the plain expectations these handlers count in.
        """
        self.expectations = ControllerExpectations(self.clock)
        self._owner_kind = owner.kind
        self._owner_informer = self.watch_kind(owner, delete=self._delete_owner)
        pods = self.watch(self.ctx.informers.informer_for(POD))
        ensure_indexers(pods, {CONTROLLER_INDEX: controller_index_func})
        pods.add_event_handler(ResourceEventHandlerFuncs(
            add=self._add_pod, update=self._update_pod, delete=self._delete_pod))
        return self._owner_informer, pods

    def owner_key_of(self, pod: Obj) -> str | None:
        """The queue key of the (cached) owner that ``pod``'s controller reference names, or None."""
        ref = get_controller_of(pod)
        if ref is None:
            return None
        owner = resolve_controller_ref(self._owner_informer.indexer, (pod.get("metadata") or {}).get("namespace") or "",
                                       ref, self._owner_kind)
        return meta_key(owner) if owner is not None else None

    def delete_owned_pod(self, owner: Obj, key: str, pod: Obj) -> errors.StatusError | None:
        """Delete one of ``owner``'s pods (uid precondition), counting in ``key``'s expectations.

        A failed delete is observed at once (no watch event will come) and returned, unless the pod
        is gone or replaced already (404/409); a deleted pod is a SuccessfulDelete event.
        """
        pmeta = pod["metadata"]
        try:
            self.core.delete(POD, pmeta["namespace"], pmeta["name"], preconditions={"uid": pmeta["uid"]})
        except errors.StatusError as e:
            self.expectations.deletion_observed(key)
            return e if e.code not in (404, 409) else None
        self.event(owner, EVENT_NORMAL, "SuccessfulDelete", f"Deleted pod: {pmeta['name']}")
        return None

    def _delete_owner(self, obj: Any) -> None:
        """An owner went away: forget its expectations."""
        key = deleted_key(obj)
        if key is not None:
            self.expectations.delete_expectations(key)

    def _add_pod(self, pod: Obj, _initial: bool) -> None:
        key = self.owner_key_of(pod)
        if key is not None:
            self.expectations.creation_observed(key)
            self.enqueue_key(key)

    def _update_pod(self, old: Obj, new: Obj) -> str | None:
        """Returns the key of the owner it woke (None: a resync, or no owner)."""
        if old["metadata"].get("resourceVersion") == new["metadata"].get("resourceVersion"):
            return None
        key = self.owner_key_of(new)
        if key is None:
            return None
        if new["metadata"].get("deletionTimestamp") and not old["metadata"].get("deletionTimestamp"):
            self.expectations.deletion_observed(key)
        self.enqueue_key(key)
        return key

    def _delete_pod(self, obj: Any) -> None:
        pod = object_of(obj)
        if pod is None:
            return
        key = self.owner_key_of(pod)
        if key is not None:
            if not pod["metadata"].get("deletionTimestamp"):
                self.expectations.deletion_observed(key)
            self.enqueue_key(key)


def ensure_indexers(informer: Any, indexers: Mapping[str, Callable[[Obj], Iterable[str]]]) -> None:
    """Add the index functions ``informer`` lacks (several controllers share one informer)."""
    existing = informer.indexer.indexers
    missing = {name: fn for name, fn in indexers.items() if name not in existing}
    if missing:
        # Another controller may add it in between: same name, same function.
        with contextlib.suppress(ValueError):
            informer.indexer.add_indexers(missing)


def deleted_key(obj: Any) -> str | None:
    """The queue key of a delete notification's object (a ``DeletedFinalStateUnknown`` tombstone carries it)."""
    deleted = object_of(obj)
    return getattr(obj, "key", None) or (meta_key(deleted) if deleted is not None else None)


def object_of(obj: Any) -> Obj | None:
    """The object of a delete notification, unwrapping a ``DeletedFinalStateUnknown`` tombstone (None if empty)."""
    if isinstance(obj, dict):
        return obj
    inner = getattr(obj, "obj", None)
    return inner if isinstance(inner, dict) else None
