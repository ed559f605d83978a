"""The kubelet model end to end: profiles -> cgroups -> OOM/restarts -> eviction, on a ManualClock.

Every expected time is derived here from the profile and the rules: a leak of
r bytes/s from s is OOM-killed at the first tick where s + r * t > limit;
restarts follow CrashLoopBackOff (immediate, then 10 s, 20 s, 40 s...);
eviction happens at the first 10 s eviction round where memory.available <
100Mi, one pod per round, ranked BestEffort (usage above request) first.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from emulator.api.quantity import format_bytes
from emulator.clock import ManualClock
from emulator.kubelet.model import KubeletConfig, KubeletEvent, KubeletModel
from emulator.kubelet.profiles import ProfileError

MI = 1024**2
GI = 1024**3
T0 = 1_700_000_000.0  # ManualClock's default start; a multiple of 10 s, like the eviction rounds


def make_pod(name: str, annotations: dict[str, str], *, requests: dict | None = None, limits: dict | None = None,
             node: str = "n1", restart_policy: str = "Always", priority: int = 0) -> dict:
    resources = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}",
                     "annotations": {"kemu.io/startup-delay": "0s", **annotations}},
        "spec": {"nodeName": node, "restartPolicy": restart_policy, "priority": priority,
                 "containers": [{"name": "app", "image": "example", "resources": resources}]},
    }


def run(model: KubeletModel, clock: ManualClock, seconds: float, step: float = 1.0) -> list[KubeletEvent]:
    events = []
    for _ in range(round(seconds / step)):
        events += model.tick(clock.now()).events
        clock.advance(step)
    return events


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(T0)


# -- OOM kill and CrashLoopBackOff ------------------------------------------------------------


def test_leaking_container_is_oom_killed_and_backs_off(clock: ManualClock) -> None:
    start, rate, limit = 64 * MI, 1 * MI, 256 * MI
    model = KubeletModel()
    model.add_node("n1", cpu="4", memory="8Gi")
    model.add_pod(make_pod("leaky", {"kemu.io/profile": "memory-leak"}, limits={"cpu": "500m", "memory": "256Mi"}),
                  clock.now())
    events = run(model, clock, 1500)

    # With 1 s ticks from the container's start, the kill lands on the first whole second past the crossing.
    run_length = math.floor((limit - start) / rate) + 1  # 193 s
    delays = [0.0] + [min(10.0 * 2**k, 300.0) for k in range(10)]
    starts, kills = [0.0], []
    while True:
        kill = starts[-1] + run_length
        if kill >= 1500:
            break
        kills.append(kill)
        starts.append(kill + delays[len(kills) - 1])
    starts = [s for s in starts if s < 1500]

    started = [e.time - T0 for e in events if e.reason == "Started"]
    backoffs = [e.time - T0 for e in events if e.reason == "BackOff"]
    assert started == starts  # 0, 193, 396, 609, 842, 1115
    assert backoffs == kills[1:]  # the first restart is immediate, later ones back off 10 s, 20 s, 40 s, ...
    assert [b - a for a, b in zip(kills, starts[1:], strict=False)] == delays[:len(starts) - 1]

    status = model.pod_status("uid-leaky")
    (cs,) = status["containerStatuses"]
    assert status["phase"] == "Running" and status["qosClass"] == "Guaranteed"  # requests default to limits
    assert cs["restartCount"] == len(starts) - 1
    assert cs["lastState"]["terminated"]["exitCode"] == 137
    assert cs["lastState"]["terminated"]["reason"] == "OOMKilled"
    row = model.container_rows("uid-leaky")["app"]
    assert model.cgroups.oom_kills[row] == len(kills)  # memory.events oom_kill, kept across instances


def test_crash_loop_waiting_state_and_message(clock: ManualClock) -> None:
    model = KubeletModel()
    model.add_node("n1")
    model.add_pod(make_pod("crash", {"kemu.io/duration": "5s", "kemu.io/exit-code": "1"}), clock.now())
    run(model, clock, 12)  # exit at 5, restart at 5, exit at 10 -> back-off 10 s until 20
    (cs,) = model.pod_status("uid-crash")["containerStatuses"]
    assert cs["state"] == {"waiting": {"reason": "CrashLoopBackOff", "message":
                                       "back-off 10s restarting failed container=app pod=crash_default(uid-crash)"}}
    assert cs["lastState"]["terminated"]["exitCode"] == 1 and cs["lastState"]["terminated"]["reason"] == "Error"
    assert cs["restartCount"] == 1


RUN_TO_COMPLETION = [
    ("Never", "0", "Succeeded", 0),
    ("Never", "3", "Failed", 0),
    ("OnFailure", "0", "Succeeded", 0),
    ("OnFailure", "1", "Running", 1),
    ("Always", "0", "Running", 1),
]


@pytest.mark.parametrize(("policy", "code", "phase", "restarts"), RUN_TO_COMPLETION,
                         ids=["never-ok", "never-fails", "onfailure-ok", "onfailure-restarts", "always-restarts"])
def test_run_duration_exit_code_and_restart_policy(clock: ManualClock, policy: str, code: str, phase: str,
                                                   restarts: int) -> None:
    model = KubeletModel()
    model.add_node("n1")
    model.add_pod(make_pod("job", {"kemu.io/duration": "30s", "kemu.io/exit-code": code}, restart_policy=policy),
                  clock.now())
    run(model, clock, 29)
    assert model.pod_phase("uid-job") == "Running"
    run(model, clock, 3)  # t = 29, 30, 31: exits at exactly 30 s; a restart starts at the next tick
    status = model.pod_status("uid-job")
    assert status["phase"] == phase
    assert status["containerStatuses"][0]["restartCount"] == restarts
    last = status["containerStatuses"][0]["state"].get("terminated") or \
        status["containerStatuses"][0]["lastState"].get("terminated")
    assert last["exitCode"] == int(code) and last["reason"] == ("Completed" if code == "0" else "Error")


def test_startup_delay(clock: ManualClock) -> None:
    model = KubeletModel()
    model.add_node("n1")
    model.add_pod(make_pod("slow", {"kemu.io/startup-delay": "3s"}), clock.now())
    events = run(model, clock, 5)
    assert [e.time - T0 for e in events if e.reason == "Started"] == [3.0]
    assert model.pod_status("uid-slow")["phase"] == "Running"


# -- CPU through the model ------------------------------------------------------------------


def test_cpu_throttling_through_the_model(clock: ManualClock) -> None:
    model = KubeletModel()
    model.add_node("n1", cpu="4")
    model.add_pod(make_pod("hot", {"kemu.io/cpu": "900m"}, limits={"cpu": "500m"}), clock.now())
    model.add_pod(make_pod("cool", {"kemu.io/cpu": "300m"}, limits={"cpu": "500m"}), clock.now())
    run(model, clock, 11)  # t = 0 starts them (dt 0), then ten 1 s ticks
    quota, period = 500 * 100_000 // 1000, 100_000
    hot, cool = model.container_rows("uid-hot")["app"], model.container_rows("uid-cool")["app"]
    cg = model.cgroups
    assert (cg.nr_periods[hot], cg.nr_throttled[hot]) == (100, 100)
    assert cg.throttled_usec[hot] == pytest.approx(100 * (period - quota * 1000 / 900))
    assert (cg.nr_periods[cool], cg.nr_throttled[cool]) == (100, 0)
    assert model.pod_usage("uid-hot")["app"]["cpu"] == 500 and model.pod_usage("uid-cool")["app"]["cpu"] == 300
    assert model.node_usage()["n1"]["cpu"] == 800


# -- node memory pressure and eviction -----------------------------------------------------------


def test_memory_pressure_evicts_best_effort_first_guaranteed_survives(clock: ManualClock) -> None:
    cap = 4 * GI
    model = KubeletModel()
    model.add_node("n1", cpu="8", memory="4Gi")
    leak_a, leak_b = (500 * MI, 2 * MI), (400 * MI, 2 * MI)  # BestEffort pods leaking 2 MiB/s
    model.add_pod(make_pod("guaranteed", {"kemu.io/memory": "1Gi"},
                           requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"}), clock.now())
    model.add_pod(make_pod("burstable", {"kemu.io/memory": "1Gi"}, requests={"memory": "1536Mi"}), clock.now())
    model.add_pod(make_pod("be-a", {"kemu.io/memory": "leak(500Mi, 2Mi/s)"}), clock.now())
    model.add_pod(make_pod("be-b", {"kemu.io/memory": "leak(400Mi, 2Mi/s)"}), clock.now())
    events = run(model, clock, 1200)

    # Reference: every 10 s, memory.available = capacity - sum(usage); below 100Mi evict the largest exceeder.
    usage = {"guaranteed": lambda t: GI, "burstable": lambda t: GI,
             "be-a": lambda t: leak_a[0] + leak_a[1] * t, "be-b": lambda t: leak_b[0] + leak_b[1] * t}
    alive = set(usage)
    expected = []
    pressure_rounds = []
    for t in range(0, 1200, 10):
        available = cap - sum(usage[p](t) for p in alive)
        if available < 100 * MI:
            pressure_rounds.append(t)
            victim = max(alive & {"be-a", "be-b"}, key=lambda p: usage[p](t))
            used = format_bytes(int(usage[victim](t)))
            message = (f"The node was low on resource: memory. Threshold quantity: 100Mi, available: "
                       f"{format_bytes(int(available))}. Container app was using {used}, "
                       "request is 0, has larger consumption of memory. ")
            expected.append((float(t), f"uid-{victim}", message))
            alive.discard(victim)

    evictions = [(e.time - T0, e.pod_uid, e.message) for e in events if e.reason == "Evicted"]
    assert evictions == expected
    assert [e[1] for e in evictions] == ["uid-be-a", "uid-be-b"]
    for name in ("guaranteed", "burstable"):
        assert model.pod_phase(f"uid-{name}") == "Running"
    for name in ("be-a", "be-b"):
        status = model.pod_status(f"uid-{name}")
        assert (status["phase"], status["reason"]) == ("Failed", "Evicted")
    assert not any(e.reason == "SystemOOM" for e in events)  # eviction got there before the kernel

    # MemoryPressure: True at a round below the threshold, False once 5 minutes pass without one.
    expected_conditions = []
    for t in range(0, 1200, 10):
        seen = [r for r in pressure_rounds if r <= t]
        status = bool(seen) and t - seen[-1] < 300
        was = bool(expected_conditions) and expected_conditions[-1][1] == "NodeHasInsufficientMemory"
        if status != was:
            expected_conditions.append((float(t), "NodeHasInsufficientMemory" if status else "NodeHasSufficientMemory"))
    conditions = [(e.time - T0, e.reason) for e in events if e.reason.startswith("NodeHas")]
    assert conditions == expected_conditions  # True at 270, False at 570, True at 780, False at 1080
    assert model.node_conditions("n1") == {"MemoryPressure": False, "DiskPressure": False, "PIDPressure": False}


def test_node_oom_killer_in_the_model(clock: ManualClock) -> None:
    model = KubeletModel(KubeletConfig(eviction_hard={}))  # no eviction: the kernel has to act
    model.add_node("n1", memory="1Gi")
    model.add_pod(make_pod("big", {"kemu.io/memory": "600Mi"}, requests={"memory": "512Mi"}), clock.now())
    model.add_pod(make_pod("small", {"kemu.io/memory": "500Mi"}, restart_policy="Never"), clock.now())
    events = run(model, clock, 2)
    # badness: big = 1000*600/1024 + (1000 - 1000*512Mi//1Gi) = 585.9 + 500; small = 488.3 + 1000 -> small
    assert [(e.reason, e.pod_uid) for e in events if e.reason == "SystemOOM"] == [("SystemOOM", "uid-small")]
    (cs,) = model.pod_status("uid-small")["containerStatuses"]
    terminated = cs["state"].get("terminated") or cs["lastState"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "OOMKilled")


def test_ephemeral_storage_limit_eviction(clock: ManualClock) -> None:
    model = KubeletModel()
    model.add_node("n1")
    model.add_pod(make_pod("filler", {"kemu.io/profile": "disk-filler"}, limits={"ephemeral-storage": "100Mi"}),
                  clock.now())
    events = run(model, clock, 40)
    # 10 MiB/s passes 100Mi after 10 s; the next eviction round is at 20 s.
    assert [(e.time - T0, e.message) for e in events if e.reason == "Evicted"] == [
        (20.0, "Pod ephemeral local storage usage exceeds the total limit of containers 100Mi. ")]


def test_fork_bomb_pid_pressure(clock: ManualClock) -> None:
    config = KubeletConfig(eviction_hard={"memory.available": "100Mi", "pid.available": "10%"})
    model = KubeletModel(config)
    model.add_node("n1", pid_max=32_768)
    model.add_pod(make_pod("bomb", {"kemu.io/profile": "fork-bomb"}), clock.now())
    model.add_pod(make_pod("calm", {"kemu.io/pids": "50"}), clock.now())
    events = run(model, clock, 200)
    # pids = 1 + 200 t; pid.available = 32768 - 50 - pids < 3276 first at a 10 s round:
    t = next(t for t in range(0, 200, 10) if 32_768 - 50 - (1 + 200 * t) < 3276)
    evicted = [(e.time - T0, e.pod_uid) for e in events if e.reason == "Evicted"]
    assert evicted == [(float(t), "uid-bomb")]
    assert [e.reason for e in events if e.reason.startswith("NodeHas")] == ["NodeHasInsufficientPID"]


def test_pod_pid_limit_stops_the_fork_bomb(clock: ManualClock) -> None:
    model = KubeletModel(KubeletConfig(pod_pids_limit=1024))
    model.add_node("n1")
    model.add_pod(make_pod("bomb", {"kemu.io/profile": "fork-bomb"}), clock.now())
    run(model, clock, 20)
    assert model.pod_usage("uid-bomb")["app"]["pids"] == 1024


# -- determinism, errors, bookkeeping ----------------------------------------------------------


def test_runs_repeat_exactly() -> None:
    def one_run() -> list[tuple]:
        clock = ManualClock(T0)
        model = KubeletModel(KubeletConfig(seed=42))
        for n in range(3):
            model.add_node(f"n{n}", memory="2Gi")
        for i in range(30):
            profile = ["web", "crashloop", "memory-leak", "spiky", "batch"][i % 5]
            model.add_pod(make_pod(f"p{i}", {"kemu.io/profile": profile, "kemu.io/startup-delay": "uniform(0s, 5s)"},
                                   requests={"cpu": "200m", "memory": "128Mi"},
                                   limits={"cpu": "400m", "memory": "300Mi"}, node=f"n{i % 3}"), clock.now())
        events = run(model, clock, 400)
        return [(e.time, e.reason, e.pod_uid, e.message) for e in events] + [
            tuple(np.round(model.cgroups.usage_usec, 3))]

    assert one_run() == one_run()


def test_errors(clock: ManualClock) -> None:
    model = KubeletModel()
    model.add_node("n1")
    with pytest.raises(ProfileError, match=re.escape("annotation kemu.io/cpu: 'sine(1)'")):
        model.add_pod(make_pod("bad", {"kemu.io/cpu": "sine(1)"}), clock.now())
    with pytest.raises(KeyError, match="unknown node 'n9'"):
        model.add_pod(make_pod("lost", {}, node="n9"), clock.now())
    model.add_pod(make_pod("ok", {}), clock.now())
    with pytest.raises(ValueError, match="already admitted"):
        model.add_pod(make_pod("ok", {}), clock.now())
    with pytest.raises(ValueError, match="already registered"):
        model.add_node("n1")


def test_rows_are_reused_and_arrays_grow(clock: ManualClock) -> None:
    model = KubeletModel(capacity=4)
    model.add_node("n1", cpu="64", memory="256Gi")
    for i in range(10):
        model.add_pod(make_pod(f"p{i}", {"kemu.io/cpu": "10m"}), clock.now())
    run(model, clock, 2)
    assert model.node_usage()["n1"]["cpu"] == pytest.approx(100)
    row = model.container_rows("uid-p3")["app"]
    model.remove_pod("uid-p3")
    model.add_pod(make_pod("again", {"kemu.io/cpu": "20m"}), clock.now())
    assert model.container_rows("uid-again")["app"] == row
    run(model, clock, 2)
    assert model.node_usage()["n1"]["cpu"] == pytest.approx(110)
    model.remove_node("n1")
    assert model.node_names() == [] and model.node_usage() == {}


def test_phases_of_many_pods_at_once(clock: ManualClock) -> None:
    # 100 pods exit in the same tick: the batched phase computation must agree with the per-pod rules.
    model = KubeletModel()
    model.add_node("n1", cpu="64", memory="256Gi")
    cases = [(policy, code) for policy in ("Always", "OnFailure", "Never") for code in ("0", "1")]
    expected_phase = {("Always", "0"): "Running", ("Always", "1"): "Running", ("OnFailure", "0"): "Succeeded",
                      ("OnFailure", "1"): "Running", ("Never", "0"): "Succeeded", ("Never", "1"): "Failed"}
    pods = {}
    for i in range(100):
        policy, code = cases[i % len(cases)]
        model.add_pod(make_pod(f"p{i}", {"kemu.io/duration": "5s", "kemu.io/exit-code": code},
                               restart_policy=policy), clock.now())
        pods[f"uid-p{i}"] = (policy, code)
    report = None
    for _ in range(6):
        report = model.tick(clock.now())
        clock.advance(1)
    assert report is not None and len(report.changed_pods) == 100  # all exited at t = 5
    for uid, case in pods.items():
        assert model.pod_phase(uid) == expected_phase[case], (uid, case)


def test_node_default_profile(clock: ManualClock) -> None:
    model = KubeletModel()
    model.add_node({"metadata": {"name": "n1", "annotations": {"kemu.io/profile": "idle"}},
                    "status": {"capacity": {"cpu": "4", "memory": "8Gi"}}})
    model.add_node("n2", default_profile="crashloop")
    with pytest.raises(ProfileError, match="unknown profile 'nope'"):
        model.add_node("n3", default_profile="nope")
    assert model.add_pod(make_pod("a", {}, node="n1"), clock.now()).profile == "idle"
    assert model.add_pod(make_pod("b", {}, node="n2"), clock.now()).profile == "crashloop"
    assert model.add_pod(make_pod("c", {"kemu.io/profile": "web"}, node="n2"), clock.now()).profile == "web"


def test_finished_pods_are_not_eviction_candidates(clock: ManualClock) -> None:
    # Pressure arrives (t = 10 round) after "done" has Succeeded (t = 1). It would rank first (usage 0 -
    # request 0 > 960Mi - 1000Mi) but is no longer an active pod: the Guaranteed pod is the one evicted.
    model = KubeletModel()
    model.add_node("n1", memory="1Gi")
    model.add_pod(make_pod("done", {"kemu.io/duration": "1s"}, restart_policy="Never"), clock.now())
    model.add_pod(make_pod("g", {"kemu.io/memory": "ramp(100Mi, 960Mi, 5s)"}, requests={"cpu": "1", "memory": "1000Mi"},
                           limits={"cpu": "1", "memory": "1000Mi"}), clock.now())
    events = run(model, clock, 11)
    assert model.pod_phase("uid-done") == "Succeeded"
    assert [(e.time - T0, e.pod_uid) for e in events if e.reason == "Evicted"] == [(10.0, "uid-g")]
