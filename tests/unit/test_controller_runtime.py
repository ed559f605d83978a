"""The controller runtime's pure parts: rate limiters, the work queue, expectations, and the controllers' arithmetic.

Numbers are upstream's (client-go ``default_rate_limiters_test.go``, ``queue_test.go``,
``pkg/controller/controller_utils_test.go``, ``replica_set_test.go``, ``deployment_util_test.go``).
"""

from __future__ import annotations

import threading
from typing import Any

import pytest

from emulator.api.types import Obj
from emulator.clock import ManualClock, rfc3339
from emulator.controllers.deployment import util as dep
from emulator.controllers.manager import ManagerConfig, enabled_controllers
from emulator.controllers.replicaset import (
    calculate_status,
    pods_to_delete,
    rank_pods_for_deletion,
    slow_start_batch,
)
from emulator.controllers.runtime import (
    BucketRateLimiter,
    Controller,
    ControllerContext,
    ControllerExpectations,
    ItemExponentialFailureRateLimiter,
    UIDTrackingControllerExpectations,
    WorkQueue,
    default_controller_rate_limiter,
)
from tests.waiting import wait_for

NOW = 1_700_000_000.0


# ----------------------------------------------------------------------------- rate limiters
def test_item_exponential_backoff_doubles_from_5ms_and_caps_at_1000s() -> None:
    limiter = ItemExponentialFailureRateLimiter(0.005, 1000.0)
    delays = [limiter.when("a") for _ in range(20)]
    assert delays[:5] == [0.005, 0.01, 0.02, 0.04, 0.08]
    assert delays[17] == pytest.approx(0.005 * 2 ** 17)  # 655.36 s
    assert delays[18:] == [1000.0, 1000.0]  # 1310.72 s capped
    assert limiter.num_requeues("a") == 20
    assert limiter.when("b") == 0.005  # per item
    limiter.forget("a")
    assert limiter.num_requeues("a") == 0 and limiter.when("a") == 0.005


def test_bucket_lets_a_burst_of_100_through_then_spaces_items_at_10_qps() -> None:
    clock = ManualClock(NOW)
    limiter = BucketRateLimiter(10.0, 100, clock)
    assert [limiter.when(i) for i in range(100)] == [0.0] * 100
    assert [round(limiter.when(i), 6) for i in range(100, 103)] == [0.1, 0.2, 0.3]
    clock.advance(0.1)  # one token back: the bucket stands at -2, the next reservation waits 0.3 s
    assert limiter.when("x") == pytest.approx(0.3)
    clock.advance(1.0)  # ten more: positive again
    assert limiter.when("y") == 0.0


@pytest.mark.parametrize(("failures_before", "burst_used", "expected"), [
    (0, 0, 0.005),      # first failure: the per-item back-off wins
    (10, 0, 5.12),      # 0.005 * 2**10
    (0, 100, 0.1),      # bucket exhausted: its 0.1 s beats the item's 5 ms
    (5, 100, 0.16),     # 0.005 * 2**5 beats the bucket's 0.1 s
])
def test_default_controller_rate_limiter_is_the_max_of_both(failures_before: int, burst_used: int,
                                                            expected: float) -> None:
    limiter = default_controller_rate_limiter(ManualClock(NOW))
    for _ in range(failures_before):
        limiter.limiters[0].when("key")
    for i in range(burst_used):
        limiter.limiters[1].when(i)
    assert limiter.when("key") == pytest.approx(expected)


# ----------------------------------------------------------------------------- work queue
def test_queue_deduplicates_and_never_hands_out_a_key_twice_at_once() -> None:
    q = WorkQueue("t-dedupe", clock=ManualClock(NOW))
    q.add("a")
    q.add("b")
    q.add("a")  # dirty: no second entry
    assert len(q) == 2
    item, _ = q.get()
    assert item == "a"
    q.add("a")  # processing: remembered, not queued
    assert len(q) == 1
    item2, _ = q.get()
    assert item2 == "b"
    assert q.get(timeout=0.01) == (None, False)  # "a" is not handed out while processing
    q.done("a")  # now it is queued again
    assert q.get(timeout=0.01) == ("a", False)
    q.done("a")
    q.done("b")
    assert q.is_idle()


def test_queue_shutdown_wakes_blocked_workers() -> None:
    q = WorkQueue("t-shutdown", clock=ManualClock(NOW))
    results: list[Any] = []
    worker = threading.Thread(target=lambda: results.append(q.get()))
    worker.start()
    q.shutdown()
    worker.join(5)
    assert results == [(None, True)]
    q.add("late")
    assert len(q) == 0


def test_add_after_waits_on_the_cluster_clock_and_keeps_the_earlier_time() -> None:
    clock = ManualClock(NOW)
    q = WorkQueue("t-after", clock=clock)
    q.add_after("a", 10.0)
    q.add_after("a", 30.0)  # later: ignored
    q.add_after("b", 20.0)
    q.add_after("b", 5.0)  # earlier: wins

    def next_key() -> Any:
        key, _ = q.get(timeout=0.01)
        if key is not None:
            q.done(key)
        return key

    # "Not yet" is checked with a marker key: delayed keys enter the queue in order of their
    # cluster time, so a key due before the marker would be got before it.
    q.add_after("mark-4s", 4.0)
    clock.advance(4.0)
    assert wait_for(next_key, 5, "the 4 s marker") == "mark-4s"  # b (due at 5 s) and a (10 s) wait
    clock.advance(2.0)
    assert wait_for(next_key, 5, "b after 5 s") == "b"
    assert len(q) == 0
    clock.advance(4.0)
    assert wait_for(next_key, 5, "a after 10 s") == "a"
    q.add_after("mark-31s", 21.0)  # due after the superseded 30 s entry for "a"
    clock.advance(100.0)
    # The superseded entry does not fire again: had it, "a" would come before the marker.
    assert wait_for(next_key, 5, "the 31 s marker") == "mark-31s"
    assert len(q) == 0
    q.shutdown()


class _DeadlineController(Controller):
    """Asks to be requeued at a fixed cluster time; the clock is stepped while it reconciles."""

    def __init__(self, clock: ManualClock, deadline: float, step: float) -> None:
        super().__init__("t-deadline", ControllerContext(core=None, informers=None, clock=clock))  # type: ignore[arg-type]
        self.deadline, self.step, self.manual = deadline, step, clock

    def reconcile(self, key: str) -> float | None:
        now = self.manual.now()
        self.manual.advance(self.step)  # a test thread stepping the clock between the read and the requeue
        return self.deadline - now if now < self.deadline else None


@pytest.mark.parametrize("step", [0.0, 5.0, 20.0], ids=["clock-still", "stepped-5s", "stepped-past-deadline"])
def test_requeue_after_counts_from_the_reconciles_start_so_a_stepped_clock_never_delays_it(step: float) -> None:
    clock = ManualClock(NOW)
    ctrl = _DeadlineController(clock, NOW + 10.0, step)
    ctrl.queue.add("k")
    assert ctrl.process_next_item(timeout=1.0)
    assert ctrl.reconciles == 1
    clock.advance(max(0.0, NOW + 10.0 - clock.now()))  # to the deadline, not a step beyond it
    assert wait_for(lambda: ctrl.process_next_item(timeout=0.01), 5, "the key back at its deadline")
    assert ctrl.reconciles == 2
    ctrl.queue.shutdown()


def test_rate_limited_adds_count_retries_and_forget_resets() -> None:
    clock = ManualClock(NOW)
    q = WorkQueue("t-ratelimited", clock=clock)
    for _ in range(3):
        q.add_rate_limited("k")
    assert q.num_requeues("k") == 3
    clock.advance(0.005)  # the first back-off (5 ms) has passed; the key is queued once (dirty set)
    assert wait_for(lambda: q.get(timeout=0.01)[0], 5, "the rate-limited key") == "k"
    q.done("k")
    q.forget("k")
    assert q.num_requeues("k") == 0
    q.shutdown()


# ----------------------------------------------------------------------------- expectations
def test_expectations_block_until_observed_or_expired() -> None:
    clock = ManualClock(NOW)
    exp = ControllerExpectations(clock)
    assert exp.satisfied_expectations("ns/rs")  # none recorded
    exp.expect_creations("ns/rs", 2)
    assert not exp.satisfied_expectations("ns/rs")
    exp.creation_observed("ns/rs")
    assert not exp.satisfied_expectations("ns/rs")
    exp.creation_observed("ns/rs")
    assert exp.satisfied_expectations("ns/rs")
    exp.expect_deletions("ns/rs", 1)
    assert not exp.satisfied_expectations("ns/rs")
    clock.advance(300.0)
    assert not exp.satisfied_expectations("ns/rs")  # exactly 5 minutes: not yet
    clock.advance(0.001)
    assert exp.satisfied_expectations("ns/rs")  # expired: a lost event cannot stall the controller
    exp.delete_expectations("ns/rs")
    assert exp.get_expectations("ns/rs") is None


def test_uid_tracking_counts_each_deleted_pod_once() -> None:
    exp = UIDTrackingControllerExpectations(ManualClock(NOW))
    exp.expect_deletions("ns/rs", ["ns/a", "ns/b"])
    exp.deletion_observed("ns/rs", "ns/a")  # graceful deletion seen as an update ...
    exp.deletion_observed("ns/rs", "ns/a")  # ... and then the final delete: counted once
    exp.deletion_observed("ns/rs", "ns/zzz")  # not ours
    record = exp.get_expectations("ns/rs")
    assert record is not None and (record.add, record.delete) == (0, 1)
    assert exp.get_uids("ns/rs") == {"ns/b"}
    exp.deletion_observed("ns/rs", "ns/b")
    assert exp.satisfied_expectations("ns/rs")


# ----------------------------------------------------------------------------- ReplicaSet arithmetic
def test_slow_start_batches_double_and_stop_at_the_first_failure() -> None:
    sizes: list[int] = []

    def ok(n: int) -> tuple[int, Exception | None]:
        sizes.append(n)
        return n, None

    assert slow_start_batch(20, 1, ok) == (20, None)
    assert sizes == [1, 2, 4, 8, 5]
    sizes.clear()

    def fails_in_third(n: int) -> tuple[int, Exception | None]:
        sizes.append(n)
        return (n - 1, RuntimeError("quota")) if len(sizes) == 3 else (n, None)

    done, error = slow_start_batch(500, 1, fails_in_third)
    assert sizes == [1, 2, 4] and done == 6 and str(error) == "quota"


def pod(name: str, *, node: str = "n1", phase: str = "Running", ready: bool = True, ready_ago: float = 3600,
        created_ago: float = 7200, restarts: int = 0, cost: str | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": "default", "uid": f"uid-{name}",
                 "creationTimestamp": rfc3339(NOW - created_ago)}
    if cost is not None:
        meta["annotations"] = {"controller.kubernetes.io/pod-deletion-cost": cost}
    status: Obj = {"phase": phase, "containerStatuses": [{"name": "app", "restartCount": restarts}]}
    if ready:
        status["conditions"] = [{"type": "Ready", "status": "True", "lastTransitionTime": rfc3339(NOW - ready_ago)}]
    return {"metadata": meta, "spec": {"nodeName": node}, "status": status}


# Each row: (pod deleted first, pod kept, rank of the first, rank of the second) — upstream's rules in order.
DELETION_ORDER = [
    ("unassigned before assigned", pod("a", node=""), pod("b"), 0, 0),
    ("pending before unknown", pod("a", phase="Pending", ready=False), pod("b", phase="Unknown", ready=False), 0, 0),
    ("unknown before running", pod("a", phase="Unknown", ready=False), pod("b", ready=False), 0, 0),
    ("not ready before ready", pod("a", ready=False), pod("b"), 0, 0),
    ("lower deletion cost first", pod("a", cost="-10"), pod("b", cost="5"), 0, 0),
    ("deletion cost beats doubling up", pod("a", cost="1"), pod("b", cost="2"), 1, 5),
    ("more related pods on the node first", pod("a"), pod("b"), 3, 1),
    ("ready for less time first", pod("a", ready_ago=60), pod("b", ready_ago=86400), 1, 1),
    ("more restarts first", pod("a", restarts=5), pod("b", restarts=1), 1, 1),
    ("newer first", pod("a", created_ago=60), pod("b", created_ago=86400), 1, 1),
    ("an invalid cost counts as 0", pod("a", cost="cheap"), pod("b", cost="3"), 0, 0),
]


@pytest.mark.parametrize(("rule", "first", "second", "rank_first", "rank_second"), DELETION_ORDER,
                         ids=[row[0] for row in DELETION_ORDER])
def test_scale_down_order_follows_upstream_active_pods_with_ranks(rule: str, first: Obj, second: Obj,
                                                                  rank_first: int, rank_second: int) -> None:
    del rule
    assert rank_pods_for_deletion([second, first], [rank_second, rank_first], NOW)[0] is first
    assert rank_pods_for_deletion([first, second], [rank_first, rank_second], NOW)[0] is first


def test_ready_times_in_the_same_log2_bucket_tie_break_by_uid() -> None:
    # 100 s and 120 s ago fall in the same power-of-two bucket of nanoseconds: uid decides, not age.
    older = pod("z-older", ready_ago=120, created_ago=120)
    newer = pod("a-newer", ready_ago=100, created_ago=100)
    assert rank_pods_for_deletion([older, newer], [0, 0], NOW)[0] is newer  # uid-a-newer < uid-z-older
    older2 = pod("a-older", ready_ago=120, created_ago=120)
    newer2 = pod("z-newer", ready_ago=100, created_ago=100)
    assert rank_pods_for_deletion([newer2, older2], [0, 0], NOW)[0] is older2


def test_pods_to_delete_ranks_by_pods_on_the_same_node() -> None:
    # Two pods share n1, one is alone on n2: one from the crowded node goes first.
    pods = [pod("alone", node="n2"), pod("p1", node="n1"), pod("p2", node="n1")]
    victims = pods_to_delete(pods, pods, 1, NOW)
    assert victims[0]["spec"]["nodeName"] == "n1"
    assert pods_to_delete(pods, pods, 3, NOW) == pods  # all go: no sort needed


def test_replica_set_status_counts_available_after_min_ready_seconds() -> None:
    rs = {"metadata": {"generation": 1}, "spec": {"replicas": 3, "minReadySeconds": 30,
                                                   "template": {"metadata": {"labels": {"app": "web"}}}}}
    pods = [pod("old", ready_ago=60), pod("fresh", ready_ago=10), pod("starting", ready=False)]
    pods[0]["metadata"]["labels"] = {"app": "web"}
    status = calculate_status(rs, pods, None, NOW)
    assert (status["replicas"], status["fullyLabeledReplicas"], status["readyReplicas"],
            status["availableReplicas"]) == (3, 1, 2, 1)
    failed = calculate_status({**rs, "spec": {**rs["spec"], "replicas": 5}}, pods, RuntimeError("quota"), NOW)
    [cond] = failed["conditions"]
    assert (cond["type"], cond["reason"], cond["message"]) == ("ReplicaFailure", "FailedCreate", "quota")
    assert "conditions" not in calculate_status({**rs, "status": failed}, pods, None, NOW)


# ----------------------------------------------------------------------------- Deployment arithmetic
@pytest.mark.parametrize(("surge", "unavailable", "replicas", "expected"), [
    ("25%", "25%", 10, (3, 2)),   # surge rounds up, unavailable down
    ("25%", "25%", 1, (1, 0)),
    (0, "10%", 5, (0, 1)),        # both resolve to 0: unavailable becomes 1
    (1, 0, 3, (1, 0)),
    ("50%", 2, 7, (4, 2)),
])
def test_resolve_fenceposts(surge: Any, unavailable: Any, replicas: int, expected: tuple[int, int]) -> None:
    assert dep.resolve_fenceposts(surge, unavailable, replicas) == expected


def test_max_unavailable_never_exceeds_replicas_and_is_zero_for_recreate() -> None:
    d = {"spec": {"replicas": 2, "strategy": {"type": "RollingUpdate",
                                             "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 5}}}}
    assert dep.max_unavailable(d) == 2
    assert dep.max_unavailable({"spec": {"replicas": 2, "strategy": {"type": "Recreate"}}}) == 0


def test_pod_template_hash_is_fnv32a_safe_encoded_and_moves_with_the_collision_count() -> None:
    assert dep.fnv32a(b"") == 0x811C9DC5 and dep.fnv32a(b"a") == 0xE40C292C  # FNV-1a reference vectors
    # Digits map to ten letters of the alphabet: real hashes look like "7c5ddbdf54".
    assert dep.safe_encode_string("0123456789") == "456789bcdf"
    template = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "a", "image": "x"}]}}
    h = dep.compute_hash(template, None)
    assert h == dep.compute_hash({"spec": template["spec"], "metadata": template["metadata"]}, None)  # key order
    assert set(h) <= set("456789bcdf") and 1 <= len(h) <= 10
    assert dep.compute_hash(template, 1) != h != dep.compute_hash(template, 0)


def test_equal_ignore_hash() -> None:
    a = {"metadata": {"labels": {"app": "web", "pod-template-hash": "abc"}}, "spec": {"containers": []}}
    b = {"metadata": {"labels": {"app": "web"}}, "spec": {}}
    assert dep.equal_ignore_hash(a, b)
    assert not dep.equal_ignore_hash(a, {"metadata": {"labels": {"app": "api"}}})


def rs(name: str, replicas: int, created_ago: float, *, max_replicas: int | None = None) -> Obj:
    annotations = {} if max_replicas is None else {dep.MAX_REPLICAS: str(max_replicas)}
    return {"metadata": {"name": name, "uid": name, "creationTimestamp": rfc3339(NOW - created_ago),
                         "annotations": annotations}, "spec": {"replicas": replicas}}


def test_proportional_scaling_fraction() -> None:
    d = {"metadata": {}, "spec": {"replicas": 20, "strategy": {"type": "RollingUpdate",
                                                              "rollingUpdate": {"maxSurge": 3, "maxUnavailable": 2}}},
         "status": {"replicas": 13}}
    # Deployment scaled 10 (max 13 with surge) -> 20 (max 23): an RS of 8 grows to round(8*23/13) = 14.
    assert dep.replica_set_fraction(rs("old", 8, 100, max_replicas=13), d) == 6
    assert dep.proportion(rs("old", 8, 100, max_replicas=13), d, 10, 0) == 6
    assert dep.proportion(rs("old", 8, 100, max_replicas=13), d, 10, 7) == 3  # never beyond what is left


def test_find_active_or_latest() -> None:
    old1, old2, new = rs("o1", 0, 300), rs("o2", 0, 200), rs("n", 0, 100)
    assert dep.find_active_or_latest(new, [old1, old2]) is new
    assert dep.find_active_or_latest(None, [old1, old2]) is old2  # the newest
    active = rs("o3", 2, 150)
    assert dep.find_active_or_latest(new, [old1, active]) is active
    assert dep.find_active_or_latest(rs("n2", 1, 1), [active]) is None


def test_last_revision_is_the_second_highest() -> None:
    sets = [{"metadata": {"annotations": {dep.REVISION: r}}} for r in ("3", "7", "5", "junk")]
    assert dep.last_revision(sets) == 5 and dep.max_revision(sets) == 7


# ----------------------------------------------------------------------------- manager configuration
@pytest.mark.parametrize(("selection", "expected"), [
    (("*",), ["garbagecollector", "disruption", "replicaset", "deployment", "job", "ttl-after-finished",
              "daemonset", "nodelifecycle", "taint-eviction-controller", "namespace", "resourcequota",
              "endpointslice", "endpoints", "statefulset", "cronjob", "horizontalpodautoscaling", "vpa-recommender",
              "vpa-updater", "keda-operator", "keda-scaledjob"]),
    (("*", "-garbagecollector", "-nodelifecycle"), ["disruption", "replicaset", "deployment", "job",
                                                    "ttl-after-finished", "daemonset", "taint-eviction-controller",
                                                    "namespace", "resourcequota", "endpointslice",
                                                    "endpoints", "statefulset", "cronjob",
                                                    "horizontalpodautoscaling", "vpa-recommender", "vpa-updater",
                                                    "keda-operator", "keda-scaledjob"]),
    (("replicaset",), ["replicaset"]),
    (("deployment", "replicaset"), ["replicaset", "deployment"]),
])
def test_controllers_selection_uses_the_controllers_flag_syntax(selection: tuple[str, ...],
                                                                expected: list[str]) -> None:
    assert enabled_controllers(selection) == expected


def test_unknown_controller_or_setting_is_an_error() -> None:
    with pytest.raises(ValueError, match="unknown controllers"):
        enabled_controllers(["*", "-nosuch"])
    with pytest.raises(ValueError, match="unknown controller manager settings"):
        ManagerConfig.from_dict({"lease_secs": 3})
    assert ManagerConfig.from_dict({"controllers": "replicaset,deployment"}).controllers == ("replicaset",
                                                                                             "deployment")
