"""A stand-in kubelet (and scheduler) for controller tests, and a watch-based readiness monitor.

Controller tests need pods to *run*: :class:`StandInKubelet` binds pending pods to
its nodes (round robin, through the real atomic bind), marks them Running and
Ready, and confirms graceful deletions (delete with grace 0, as a kubelet does
once containers stopped). ``ready_when`` decides which pods may become Ready
(a test holds back a rollout by returning False). It runs on a thread
(``start``/``stop``) or one ``step()`` at a time.

:class:`ReadyMonitor` follows pod events from the store's watch and records,
after every event, how many pods matching a selector are Ready and not being
deleted — so a test can assert an invariant over the whole run (for example
"never fewer than N Ready"), not just at the moments it looked.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable

from emulator.api import errors
from emulator.api.kinds import NODE, POD
from emulator.api.selectors import LabelSelector, parse_label_selector
from emulator.api.types import Obj
from emulator.clock import rfc3339
from emulator.server.core import ServerCore
from tests import builders as b


def is_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def running_ready_status(pod: Obj, now: float) -> Obj:
    ts = rfc3339(now)
    status = dict(pod.get("status") or {})
    status["phase"] = "Running"
    status.setdefault("startTime", ts)
    status["conditions"] = [
        {"type": t, "status": "True", "lastProbeTime": None, "lastTransitionTime": ts}
        for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")]
    status["containerStatuses"] = [{"name": c["name"], "image": c.get("image", ""), "ready": True, "restartCount": 0,
                                    "started": True, "state": {"running": {"startedAt": ts}}}
                                   for c in pod["spec"].get("containers") or []]
    return status


class StandInKubelet:
    def __init__(self, core: ServerCore, *, nodes: int = 0, namespace: str | None = None,
                 ready_when: Callable[[Obj], bool] | None = None, period: float = 0.02) -> None:
        self.core = core
        self.namespace = namespace
        self.ready_when = ready_when or (lambda _pod: True)
        self.period = period
        self.nodes = [f"node-{i}" for i in range(nodes)]
        for name in self.nodes:
            with contextlib.suppress(errors.StatusError):
                core.create(NODE, b.node(name, cpu="64", memory="256Gi"))
        self._next_node = itertools.cycle(self.nodes) if self.nodes else None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.errors: list[BaseException] = []

    def step(self) -> int:
        """One pass over the pods; returns how many pods it changed."""
        changed = 0
        for listed in self.core.list(POD, self.namespace).items:
            pod, meta, spec = listed, listed["metadata"], listed["spec"]
            try:
                if meta.get("deletionTimestamp"):
                    self.core.delete(POD, meta["namespace"], meta["name"], grace_period_seconds=0)
                    changed += 1
                    continue
                if self._next_node is not None and not spec.get("nodeName"):
                    pod = self.core.bind(meta["namespace"], meta["name"], next(self._next_node), uid=meta["uid"])
                    changed += 1
                if not is_ready(pod) and self.ready_when(pod):
                    self.core.update_status(POD, {**pod, "status": running_ready_status(pod, self.core.clock.now())})
                    changed += 1
            except errors.StatusError as e:
                if e.code not in (404, 409):
                    raise
        return changed

    def start(self) -> StandInKubelet:
        self._thread = threading.Thread(target=self._run, name="stand-in-kubelet", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.period):
            try:
                self.step()
            except BaseException as e:  # surfaced by stop(): a test must not pass over a broken kubelet
                self.errors.append(e)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        if self.errors:
            raise self.errors[0]


class ReadyMonitor:
    """Counts Ready, not-deleting pods matching ``selector`` after every watch event."""

    def __init__(self, core: ServerCore, selector: str | LabelSelector, namespace: str = "default") -> None:
        self.core = core
        self.selector = parse_label_selector(selector) if isinstance(selector, str) else selector
        self.namespace = namespace
        self.pods: dict[str, Obj] = {}
        self.history: list[int] = []
        self.created: list[str] = []  # names of every pod ADDED, in order
        self._stop = threading.Event()
        self._lock = threading.Lock()
        listed = core.list(POD, namespace)
        self.pods = {p["metadata"]["name"]: p for p in listed.items
                     if self.selector.matches(p["metadata"].get("labels"))}
        self.history.append(self._count())
        self._watch = core.watch(POD, since_rv=listed.resource_version)
        self._thread = threading.Thread(target=self._run, name="ready-monitor", daemon=True)
        self._thread.start()

    def _count(self) -> int:
        return sum(1 for p in self.pods.values() if is_ready(p) and not p["metadata"].get("deletionTimestamp"))

    def _run(self) -> None:
        while not self._stop.is_set():
            for event in self._watch.next_batch(timeout=0.1):
                meta = event.object["metadata"]
                if meta.get("namespace") != self.namespace or not self.selector.matches(meta.get("labels")):
                    continue
                with self._lock:
                    if event.type == "DELETED":
                        self.pods.pop(meta["name"], None)
                    else:
                        if event.type == "ADDED":
                            self.created.append(meta["name"])
                        self.pods[meta["name"]] = event.object
                    self.history.append(self._count())

    def ready(self) -> int:
        with self._lock:
            return self._count()

    def min_after(self, reached: int) -> int | None:
        """The lowest count seen after the count first reached ``reached`` (None if it never did)."""
        with self._lock:
            for i, n in enumerate(self.history):
                if n >= reached:
                    return min(self.history[i:])
        return None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._watch.close()

