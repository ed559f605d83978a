"""Leader election through a ``coordination.k8s.io/v1`` Lease, as client-go ``tools/leaderelection``.

Several controller managers may run; only the one holding the Lease acts. The
algorithm is client-go's ``LeaderElector`` (``leaderelection.go``,
``resourcelock/leaselock.go``), on the cluster clock:

* **tryAcquireOrRenew.** Read the Lease (create it, holding it, if it does not
  exist). If its record differs from the one last observed, remember it and
  the *local* time it was observed: expiry is judged as "observed time +
  ``leaseDurationSeconds``", never from the holder's own ``renewTime``, so two
  processes need not agree on the time (client-go's defence against skew).
  If another identity holds a lease that has not expired, give up for now.
  Otherwise write our record (``holderIdentity``, ``leaseDurationSeconds``,
  ``acquireTime``, ``renewTime``, ``leaseTransitions`` + 1 when the holder
  changes) compare-and-set on the Lease's resourceVersion: of two candidates
  racing for an expired lease exactly one write succeeds.
* **acquire**: try every ``retry_period`` (with client-go's jitter of 1.2)
  until it succeeds.
* **renew**: every ``retry_period``, try to renew; if no attempt succeeded
  within ``renew_deadline`` of the first, leadership is lost and
  ``on_stopped_leading`` runs. Because ``renew_deadline`` < ``lease_duration``,
  a leader that cannot reach the store stops acting before any standby can
  take the lease (15 s / 10 s / 2 s, kube-controller-manager's defaults).
* **release on stop** (``ReleaseOnCancel``): a leader that stops cleanly writes
  an empty holder with ``leaseDurationSeconds: 1`` so a standby takes over at
  its next try instead of waiting out the lease. :meth:`LeaderElector.stop`
  with ``release=False`` models a crash.

``on_started_leading(cancelled)`` runs on its own thread (it may take long:
informers must sync) while the renew loop keeps the lease; when the renew loop
ends, ``cancelled`` is set, the callback is waited for, and
``on_stopped_leading`` runs, then the elector goes back to trying to acquire
(upstream's controller manager exits instead; re-joining as a standby is the
same thing for the rest of the cluster).
"""

from __future__ import annotations

import logging
import random
import socket
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from emulator.api import errors
from emulator.api.gotime import micro_time
from emulator.api.kinds import LEASE
from emulator.api.types import Obj
from emulator.clock import Clock
from emulator.controllers.runtime import EVENT_NORMAL, EventRecorder, wait_until
from emulator.server.core import ServerCore

log = logging.getLogger(__name__)

JITTER_FACTOR = 1.2  # client-go leaderelection.JitterFactor


def default_identity() -> str:
    """kube-controller-manager's identity: ``<hostname>_<uuid>``."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaderElectionConfig:
    lease_name: str = "kube-controller-manager"
    lease_namespace: str = "kube-system"
    identity: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    release_on_cancel: bool = True
    jitter: float = JITTER_FACTOR

    def __post_init__(self) -> None:
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= self.retry_period * JITTER_FACTOR:
            raise ValueError("renewDeadline must be greater than retryPeriod*JitterFactor")
        if self.retry_period < 1e-3:
            raise ValueError("retryPeriod must be positive")


class LeaderElector:
    """Runs the acquire → lead → renew loop on a thread; see the module docstring."""

    def __init__(self, core: ServerCore, config: LeaderElectionConfig, *, clock: Clock | None = None,
                 on_started_leading: Callable[[threading.Event], None] | None = None,
                 on_stopped_leading: Callable[[], None] | None = None,
                 on_new_leader: Callable[[str], None] | None = None,
                 recorder: EventRecorder | None = None, rng: random.Random | None = None) -> None:
        self.core = core
        self.config = config if config.identity else LeaderElectionConfig(**{**config.__dict__,
                                                                             "identity": default_identity()})
        self.identity = self.config.identity
        self.clock = clock or core.clock
        self.on_started_leading = on_started_leading
        self.on_stopped_leading = on_stopped_leading
        self.on_new_leader = on_new_leader
        self.recorder = recorder
        self._rng = rng or random.Random()
        self._lock = threading.Lock()
        self._observed: Obj = {}
        self._observed_raw: Obj | None = None
        self._observed_time = 0.0
        self._reported_leader = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._release_on_stop = config.release_on_cancel
        self._leading = False

    # ------------------------------------------------------------ state
    def is_leader(self) -> bool:
        """The last record we observed names us (client-go ``IsLeader``)."""
        with self._lock:
            return self._observed.get("holderIdentity") == self.identity

    @property
    def leading(self) -> bool:
        """Between acquiring the lease and losing (or giving up) it: when our controllers may act."""
        with self._lock:
            return self._leading

    def get_leader(self) -> str:
        with self._lock:
            return str(self._observed.get("holderIdentity") or "")

    def _observe(self, record: Obj, now: float) -> None:
        with self._lock:
            self._observed = dict(record)
            self._observed_raw = dict(record)
            self._observed_time = now

    def _lease_valid(self, now: float) -> bool:
        with self._lock:
            return self._observed_time + float(self._observed.get("leaseDurationSeconds") or 0) > now

    # ------------------------------------------------------------ one attempt
    def try_acquire_or_renew(self) -> bool:
        """One ``tryAcquireOrRenew``; True when we hold the lease afterwards."""
        cfg = self.config
        now = self.clock.now()
        record: Obj = {"holderIdentity": self.identity, "leaseDurationSeconds": int(cfg.lease_duration),
                       "acquireTime": micro_time(now), "renewTime": micro_time(now), "leaseTransitions": 0}
        try:
            lease = self.core.get(LEASE, cfg.lease_namespace, cfg.lease_name)
        except errors.StatusError as e:
            if e.code != 404:
                log.warning("leader election %s: error retrieving lease: %s", self.identity, e.message)
                return False
            try:
                self.core.create(LEASE, {"apiVersion": LEASE.api_version, "kind": LEASE.kind,
                                         "metadata": {"name": cfg.lease_name, "namespace": cfg.lease_namespace},
                                         "spec": record})
            except errors.StatusError as ce:
                log.info("leader election %s: error initially creating lease: %s", self.identity, ce.message)
                return False
            self._observe(record, now)
            return True
        except Exception as e:  # the store is unreachable: a failed attempt, not a crash
            log.warning("leader election %s: %s", self.identity, e)
            return False
        old = dict(lease.get("spec") or {})
        with self._lock:
            if old != self._observed_raw:
                self._observed = dict(old)
                self._observed_raw = dict(old)
                self._observed_time = now
        if old.get("holderIdentity") and self._lease_valid(now) and not self.is_leader():
            return False  # held by someone else and not expired
        if self.is_leader():
            record["acquireTime"] = old.get("acquireTime") or record["acquireTime"]
            record["leaseTransitions"] = int(old.get("leaseTransitions") or 0)
        else:
            record["leaseTransitions"] = int(old.get("leaseTransitions") or 0) + 1
        try:
            self.core.update(LEASE, {**lease, "spec": {**old, **record}})
        except errors.StatusError as e:
            log.info("leader election %s: failed to update lease: %s", self.identity, e.message)
            return False
        except Exception as e:
            log.warning("leader election %s: %s", self.identity, e)
            return False
        self._observe({**old, **record}, now)
        return True

    def release(self) -> bool:
        """Give the lease up (empty holder, 1 s duration) if we hold it."""
        if not self.is_leader():
            return True
        cfg = self.config
        now = self.clock.now()
        try:
            lease = self.core.get(LEASE, cfg.lease_namespace, cfg.lease_name)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != self.identity:
                return True
            record = {"holderIdentity": "", "leaseDurationSeconds": 1, "acquireTime": micro_time(now),
                      "renewTime": micro_time(now),
                      "leaseTransitions": int(spec.get("leaseTransitions") or 0)}
            self.core.update(LEASE, {**lease, "spec": {**spec, **record}})
        except Exception as e:
            log.warning("leader election %s: failed to release lease: %s", self.identity, e)
            return False
        self._observe(record, now)
        return True

    # ------------------------------------------------------------ the loop
    def start(self) -> LeaderElector:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=f"leader-election-{self.identity}", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float = 10.0, *, release: bool | None = None) -> None:
        """Stop the loop (leadership callbacks run); release the lease unless ``release`` is False (a crash)."""
        if release is not None:
            self._release_on_stop = release
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        self._thread = None

    def _maybe_report_new_leader(self) -> None:
        leader = self.get_leader()
        if leader and leader != self._reported_leader:
            self._reported_leader = leader
            if self.on_new_leader is not None:
                try:
                    self.on_new_leader(leader)
                except Exception:
                    log.exception("leader election: on_new_leader failed")

    def _jittered(self) -> float:
        return self.config.retry_period * (1.0 + self._rng.random() * self.config.jitter)

    def _acquire(self) -> bool:
        while not self._stop.is_set():
            # Every wait is to an absolute cluster time taken before the attempt: a clock stepped during
            # the attempt (a test's ManualClock, from another thread) then shortens the wait, never
            # pushes the next try past the time it was due.
            tried = self.clock.now()
            ok = self.try_acquire_or_renew()
            self._maybe_report_new_leader()
            if ok:
                log.info("leader election: %s acquired lease %s/%s", self.identity, self.config.lease_namespace,
                         self.config.lease_name)
                self._event("became leader")
                return True
            if not wait_until(self.clock, tried + self._jittered(), self._stop):
                return False
        return False

    def _renew(self) -> None:
        cfg = self.config
        while not self._stop.is_set():
            tried = self.clock.now()
            deadline = tried + cfg.renew_deadline
            renewed = False
            while not self._stop.is_set():
                if self.try_acquire_or_renew():
                    renewed = True
                    break
                if deadline <= self.clock.now() or not wait_until(
                        self.clock, min(tried + cfg.retry_period, deadline), self._stop):
                    break
                tried = self.clock.now()
            self._maybe_report_new_leader()
            if self._stop.is_set():
                return
            if not renewed:
                log.info("leader election: %s failed to renew lease %s/%s: timed out", self.identity,
                         cfg.lease_namespace, cfg.lease_name)
                self._event("stopped leading")
                return
            if not wait_until(self.clock, tried + cfg.retry_period, self._stop):
                return

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self._acquire():
                break
            cancelled = threading.Event()
            with self._lock:
                self._leading = True
            leading = threading.Thread(target=self._call_started, args=(cancelled,), name=f"leading-{self.identity}",
                                       daemon=True)
            leading.start()
            try:
                self._renew()
            finally:
                # Tell the leading callback to give up (it may still be waiting for caches), then wait for it.
                cancelled.set()
                leading.join()
                with self._lock:
                    self._leading = False
                if self._stop.is_set() and self._release_on_stop:
                    self.release()
                if self.on_stopped_leading is not None:
                    try:
                        self.on_stopped_leading()
                    except Exception:
                        log.exception("leader election: on_stopped_leading failed")

    def _call_started(self, cancelled: threading.Event) -> None:
        if self.on_started_leading is None:
            return
        try:
            self.on_started_leading(cancelled)
        except Exception:
            log.exception("leader election: on_started_leading failed")

    def _event(self, what: str) -> None:
        if self.recorder is None:
            return
        lease = {"apiVersion": LEASE.api_version, "kind": LEASE.kind,
                 "metadata": {"name": self.config.lease_name, "namespace": self.config.lease_namespace}}
        self.recorder.event(lease, EVENT_NORMAL, "LeaderElection", f"{self.identity} {what}")
