"""Controller managers with leader election through a Lease, against a real Redis.

Two managers share a manual cluster clock: one leads, the other stands by; killing the
leader (no lease release, as a dead process) hands the rollout to the standby after the
lease expires, with no pod created twice and none lost. The same failover is exercised
with Ray actors, and through ``LocalCluster``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from emulator.api.kinds import DEPLOYMENT, EVENT, LEASE, POD, REPLICASET
from emulator.api.types import Obj
from emulator.clock import ManualClock, SystemClock
from emulator.cluster import LocalCluster
from emulator.config import Config
from emulator.controllers.leaderelection import LeaderElectionConfig, LeaderElector
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.server.core import ServerCore
from emulator.store.store import Store
from tests import workloads as w
from tests.kubelet_standin import ReadyMonitor, StandInKubelet
from tests.waiting import wait_for
from tests.workloads import retry_on_conflict

pytestmark = pytest.mark.integration

LABELS = {"app": "web"}


def lease(core: ServerCore) -> Obj:
    return core.get(LEASE, "kube-system", "kube-controller-manager")["spec"]


def managers(core: ServerCore, clock: ManualClock, *names: str) -> list[ControllerManager]:
    config = ManagerConfig(controllers=("replicaset", "deployment"))
    return [ControllerManager(core, ManagerConfig(**{**config.__dict__, "identity": n}), clock=clock) for n in names]


def advance_until(clock: ManualClock, condition: Any, what: str, step: float = 0.5, timeout: float = 30) -> Any:
    """Move cluster time in small steps until ``condition()`` holds (the managers' loops follow the clock)."""
    return wait_for(condition, timeout, what, tick=lambda: clock.advance(step))


def rolled_out(core: ServerCore, generation: int) -> bool:
    d = core.get(DEPLOYMENT, "default", "web")
    s, n = d.get("status") or {}, d["spec"]["replicas"]
    return (d["metadata"]["generation"] == generation <= s.get("observedGeneration", 0)
            and s.get("updatedReplicas") == n == s.get("replicas") == s.get("availableReplicas"))


def test_one_leads_and_the_standby_takes_over_a_rollout_after_the_leader_dies(core: ServerCore,
                                                                              clock: ManualClock) -> None:
    a, b = managers(core, clock, "manager-a", "manager-b")
    gate = threading.Event()
    gate.set()
    kubelet = StandInKubelet(core, nodes=3, ready_when=lambda pod: gate.is_set()).start()
    a.start()
    assert a.wait_active(20)
    b.start()
    try:
        advance_until(clock, lambda: b.elector is not None and b.elector.get_leader() == "manager-a",
                      "the standby to see the leader")
        assert a.is_leader and not b.is_leader and not b.active and b.controllers() == {}
        assert lease(core)["holderIdentity"] == "manager-a" and lease(core)["leaseDurationSeconds"] == 15
        body = w.deployment("web", 4, LABELS)
        body["spec"]["strategy"] = {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
        core.create(DEPLOYMENT, body)
        wait_for(lambda: rolled_out(core, 1), 30, "revision 1 by the leader")
        monitor = ReadyMonitor(core, "app=web")
        gate.clear()  # new pods will not become Ready: the rollout stalls half-way
        def new_image() -> Obj:
            d = core.get(DEPLOYMENT, "default", "web")
            d["spec"]["template"]["spec"]["containers"][0]["image"] = "nginx:1.28"
            return core.update(DEPLOYMENT, d)

        retry_on_conflict(new_image)
        wait_for(lambda: len(core.list(REPLICASET, "default").items) == 2 and any(
            p["spec"]["containers"][0]["image"] == "nginx:1.28" for p in core.list(POD, "default").items),
            20, "the rollout to start")
        a.crash()  # killed: no lease release, its controllers are gone
        assert not a.active and a.controllers() == {}
        gate.set()
        # The standby judges expiry from when it saw the record change, which is no earlier than the dead
        # leader's last renewal (up to a retry period before the crash): the lease runs 15 s from there.
        last_renewal = datetime.fromisoformat(lease(core)["renewTime"]).timestamp()
        advance_until(clock, lambda: b.active, "the standby to take the lease and start")
        assert clock.now() - last_renewal >= 15  # not before the dead leader's lease expired
        spec = lease(core)
        assert spec["holderIdentity"] == "manager-b" and spec["leaseTransitions"] == 1
        wait_for(lambda: rolled_out(core, 2), 60, "the standby to finish the rollout")
        wait_for(lambda: len(monitor.pods) == 4, 20, "old pods gone")
        monitor.stop()
        new_pods = monitor.created  # every pod created since the update
        assert len(new_pods) == len(set(new_pods)) == 4, new_pods  # one per replica: none twice, none lost
        assert min(monitor.history) >= 4  # maxUnavailable 0 held across the failover
        assert all(p["spec"]["containers"][0]["image"] == "nginx:1.28" for p in monitor.pods.values())
    finally:
        kubelet.stop()
        b.stop()
        a.stop()


def test_a_stopped_leader_releases_the_lease_and_the_standby_takes_it_at_once(core: ServerCore,
                                                                              clock: ManualClock) -> None:
    a, b = managers(core, clock, "manager-a", "manager-b")
    a.start()
    assert a.wait_active(20)
    b.start()
    try:
        advance_until(clock, lambda: b.elector is not None and b.elector.get_leader() == "manager-a", "observed")
        a.stop()
        assert lease(core)["holderIdentity"] == "" and lease(core)["leaseDurationSeconds"] == 1
        released = clock.now()
        advance_until(clock, lambda: b.active, "the standby to lead", step=0.25)
        assert clock.now() - released <= 2.0 * 2.2 + 0.5  # one retry period (with jitter), not a lease duration
        core.create(DEPLOYMENT, w.deployment("web", 2, LABELS))
        wait_for(lambda: len(core.list(POD, "default").items) == 2, 20, "the new leader's controllers at work")
        b.controllers()["deployment"].recorder.flush()
        b.elector.recorder.flush()  # type: ignore[union-attr]
        messages = {e["message"] for e in core.list(EVENT, "kube-system").items if e["reason"] == "LeaderElection"}
        assert {"manager-a became leader", "manager-b became leader"} <= messages
    finally:
        b.stop()
        a.stop()


def test_a_leader_that_cannot_renew_stops_its_controllers(core: ServerCore, clock: ManualClock) -> None:
    [a] = managers(core, clock, "manager-a")
    a.start()
    try:
        assert a.wait_active(20)
        controllers = a.controllers()
        # Someone else takes the lease (as a partitioned leader would find it): renewals fail from now on.
        def steal() -> Obj:
            current = core.get(LEASE, "kube-system", "kube-controller-manager")
            return core.update(LEASE, {**current, "spec": {**current["spec"], "holderIdentity": "intruder"}})

        retry_on_conflict(steal)
        clock.advance(2.5)  # past retryPeriod: the leader tries to renew and finds the intruder's record
        wait_for(lambda: a.elector.get_leader() == "intruder", 10, "a failed renewal")  # type: ignore[union-attr]
        assert a.active  # within renewDeadline it keeps acting
        advance_until(clock, lambda: not a.active, "the leader to stop its controllers", step=1.0)
        assert a.controllers() == {} and not a.is_leader
        # Nobody acts while the intruder "leads": the stopped controllers' workers exit and their queues
        # are shut down, so a new Deployment is never synced.
        wait_for(lambda: not any(c.running for c in controllers.values()), 10,  # type: ignore[attr-defined]
                 "the stopped controllers' workers to exit")
        assert all(c.queue.shutting_down for c in controllers.values())  # type: ignore[attr-defined]
        core.create(DEPLOYMENT, w.deployment("web", 2, LABELS))
        assert core.list(REPLICASET, "default").items == []
    finally:
        a.stop()


def test_local_cluster_runs_one_leader_among_its_controller_managers(redis_url: str, tmp_path: Path) -> None:
    cluster = LocalCluster(Config(data_dir=tmp_path / "data", redis_url=redis_url, api_enabled=False,
                                  controller_managers=2, controller_manager={"retry_period": 2.0}))
    core = cluster.start()
    try:
        first, second = cluster.controller_managers
        wait_for(lambda: first.active or second.active, 30, "a leader")
        leader = first if first.active else second
        assert not (first.active and second.active)
        assert lease(core)["holderIdentity"] == leader.identity
        kubelet = StandInKubelet(core, nodes=2).start()
        try:
            core.create(DEPLOYMENT, w.deployment("web", 3, LABELS))
            wait_for(lambda: rolled_out(core, 1), 30, "the rollout")
        finally:
            kubelet.stop()
    finally:
        cluster.stop()
    assert cluster.controller_managers == []


RULES = """
rules:
- seriesQuery: '{__name__="http_requests_per_second",namespace!="",pod!=""}'
  resources: {overrides: {namespace: {resource: namespace}, pod: {resource: pod}}}
  name: {matches: "^http_(.*)$", as: "web_${1}"}
  metricsQuery: 'sum(<<.Series>>{<<.LabelMatchers>>}) by (<<.GroupBy>>)'
"""


@pytest.mark.parametrize("prometheus_url", [None, "http://127.0.0.1:9/"], ids=["own-series", "prometheus"])
def test_local_cluster_gives_the_hpa_controller_the_configured_metrics_rules_and_prometheus(
        redis_url: str, tmp_path: Path, prometheus_url: str | None) -> None:
    from emulator.metricsapi.series import OwnSeries, PrometheusSeries

    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    cluster = LocalCluster(Config(data_dir=tmp_path / "data", redis_url=redis_url, api_enabled=False,
                                  metrics=False, metrics_rules=str(rules), prometheus_url=prometheus_url,
                                  controller_manager={"controllers": ["horizontalpodautoscaling"]}))
    cluster.start()
    try:
        manager, = cluster.controller_managers
        wait_for(lambda: "horizontalpodautoscaling" in manager.controllers(), 30, "the HPA controller")
        adapter = manager.controllers()["horizontalpodautoscaling"].metrics_client.adapter  # type: ignore[attr-defined]
        assert adapter.rules.source == str(rules)
        assert [r.name_as for r in adapter.rules.custom] == ["web_${1}"] and adapter.rules.external == ()
        if prometheus_url is None:
            assert isinstance(adapter.source, OwnSeries)
        else:
            assert isinstance(adapter.source, PrometheusSeries) and adapter.source.url == prometheus_url.rstrip("/")
    finally:
        cluster.stop()


# ----------------------------------------------------------------------------- Ray actors
@pytest.fixture(scope="module")
def ray_session() -> Iterator[Any]:
    import ray

    from actors.launcher import init_ray

    started = init_ray()  # the same light, loopback-only, token-authenticated instance kemu starts
    yield ray
    if started:
        ray.shutdown()


def test_killing_the_leader_actor_hands_the_rollout_to_the_standby(redis_url: str, ray_session: Any) -> None:
    from actors.controllers import start_controller_managers

    ray = ray_session
    speed = 10.0  # lease 15 s of cluster time = 1.5 s of wall time
    clock = SystemClock(speed)
    core = ServerCore(Store.connect(redis_url), clock=clock)
    core.bootstrap()
    config = {"controllers": ["replicaset", "deployment"]}
    actors = start_controller_managers(2, redis_url, config, clock_speed=speed, clock_start=clock.now(),
                                       clock_wall=__import__("time").time())
    kubelet = StandInKubelet(core, nodes=2).start()
    try:
        statuses = wait_for(lambda: (s := ray.get([a.status.remote() for a in actors]))
                            and sum(x["active"] for x in s) == 1 and s, 60, "one active leader")
        leader = next(i for i, s in enumerate(statuses) if s["active"])
        body = w.deployment("web", 6, LABELS)
        core.create(DEPLOYMENT, body)
        wait_for(lambda: len(core.list(POD, "default").items) >= 1, 30, "the rollout to start")
        ray.kill(actors[leader])
        standby = actors[1 - leader]
        wait_for(lambda: ray.get(standby.status.remote())["active"], 60, "the standby to take over")
        wait_for(lambda: rolled_out(core, 1), 60, "the rollout finished by the standby")
        names = [p["metadata"]["name"] for p in core.list(POD, "default").items]
        assert len(names) == 6
        assert lease(core)["holderIdentity"] == ray.get(standby.status.remote())["identity"]
        ray.get(standby.stop.remote())
    finally:
        kubelet.stop()
        for actor in actors:
            ray.kill(actor)


class _SteppedElector(LeaderElector):
    """Steps the shared ManualClock during its ``step_on``-th attempt, as a test thread may at any moment."""

    def __init__(self, core: ServerCore, config: LeaderElectionConfig, clock: ManualClock, step_on: int,
                 step: float) -> None:
        super().__init__(core, config, clock=clock)
        self.manual, self.step_on, self.step = clock, step_on, step
        self.attempts = 0

    def try_acquire_or_renew(self) -> bool:
        ok = super().try_acquire_or_renew()
        self.attempts += 1
        if self.attempts == self.step_on:
            self.manual.advance(self.step)
        return ok


@pytest.mark.parametrize(("held_by_other", "step_on"), [(False, 2), (True, 1)], ids=["renewal", "acquire-retry"])
def test_the_next_attempt_is_due_a_retry_period_after_the_last_began_even_if_the_clock_moved_during_it(
        core: ServerCore, clock: ManualClock, held_by_other: bool, step_on: int) -> None:
    retry, step = 2.0, 1.5
    config = LeaderElectionConfig(identity="stepped", retry_period=retry, jitter=0.0)
    if held_by_other:  # a live holder: every attempt fails and the elector retries every retryPeriod
        assert LeaderElector(core, LeaderElectionConfig(identity="other"), clock=clock).try_acquire_or_renew()
    elector = _SteppedElector(core, config, clock, step_on, step).start()
    try:
        wait_for(lambda: elector.attempts == step_on, 10, f"attempt {step_on} (the clock moved during it)")
        assert elector.is_leader() is not held_by_other
        clock.advance(retry - step)  # a retry period after that attempt began, not after the clock moved
        wait_for(lambda: elector.attempts == step_on + 1, 10, "the next attempt, a retry period after")
    finally:
        elector.stop(release=False)
