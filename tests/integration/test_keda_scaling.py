"""KEDA's operator on a ManualClock: pause annotations, fallback on an unreachable Redis, bad input.

Expected values from kedacore/keda: a paused ScaledObject has no HPA and holds the target at
``autoscaling.keda.sh/paused-replicas``; a metric that failed more than
``fallback.failureThreshold`` polls in a row reads ``fallback.replicas * target``
(``fallback.go doFallback``) so the HPA holds ``fallback.replicas``, and an inactive target at
0 is scaled to ``fallback.replicas``; scaler errors are ``Ready=False`` (``TriggerError``) and
``KEDAScalerFailed`` events. Bad input is the webhook's 403 or a ``ScaledObjectCheckFailed``
condition with upstream's message, and nothing else changes.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import REGISTRY

from emulator.api import errors
from emulator.api.kinds import (
    DEPLOYMENT,
    EVENT,
    HORIZONTALPODAUTOSCALER,
    POD,
    SCALEDOBJECT,
    SECRET,
    TRIGGERAUTHENTICATION,
)
from emulator.api.selectors import parse_label_selector
from emulator.clock import ManualClock
from emulator.controllers.manager import ControllerManager
from emulator.kubelet import usage as kubelet_usage
from emulator.metricsapi.adapter import MetricsAdapter
from emulator.server.core import ServerCore
from tests.integration.test_keda_operator import redis_trigger, scaled_object, worker_deployment
from tests.kubelet_standin import running_ready_status
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

Obj = dict[str, Any]


def so_status(core: ServerCore, name: str) -> Obj:
    return core.get(SCALEDOBJECT, "default", name).get("status") or {}


def condition(core: ServerCore, name: str, ctype: str) -> Obj:
    return next((c for c in so_status(core, name).get("conditions") or [] if c["type"] == ctype), {})


def replicas(core: ServerCore, name: str) -> int:
    return int(core.get(DEPLOYMENT, "default", name)["spec"].get("replicas") or 0)


def hpa_exists(core: ServerCore, name: str) -> bool:
    try:
        core.get(HORIZONTALPODAUTOSCALER, "default", name)
    except errors.StatusError as e:
        assert e.code == 404
        return False
    return True


def event_messages(core: ServerCore, reason: str) -> list[str]:
    return [e["message"] for e in core.list(EVENT, "default").items if e.get("reason") == reason]


def set_annotations(core: ServerCore, name: str, annotations: dict[str, str] | None) -> None:
    """What ``kubectl annotate`` does: read, change, write; again on a conflict with the operator's status write."""
    for _ in range(5):
        so = core.get(SCALEDOBJECT, "default", name)
        if annotations is None:
            so["metadata"].pop("annotations", None)
        else:
            so["metadata"]["annotations"] = annotations
        try:
            core.update(SCALEDOBJECT, so)
            return
        except errors.StatusError as e:
            if e.code != 409:
                raise
    raise AssertionError(f"ScaledObject {name}: 5 conflicts in a row")


def test_paused_replicas_hold_the_target_and_remove_the_hpa(
        core: ServerCore, clock: ManualClock, start_manager: Callable[..., ControllerManager]) -> None:
    core.store.redis.delete("paused-q")
    core.create(DEPLOYMENT, {**worker_deployment("paused", "paused-q")})
    start_manager("keda-operator")
    core.create(SCALEDOBJECT, scaled_object("paused", "paused", [redis_trigger("paused-q")], minReplicaCount=1,
                                            maxReplicaCount=10))
    wait_for(lambda: hpa_exists(core, "keda-hpa-paused"), 20, "the HPA")
    wait_for(lambda: replicas(core, "paused") == 1, 20, "minReplicaCount applied (inactive, below min)")

    set_annotations(core, "paused", {"autoscaling.keda.sh/paused-replicas": "3"})
    wait_for(lambda: replicas(core, "paused") == 3 and not hpa_exists(core, "keda-hpa-paused"), 20,
             "paused-replicas applied and the HPA removed")
    assert condition(core, "paused", "Paused") | {"lastTransitionTime": None} == {
        "type": "Paused", "status": "True", "reason": "ScaledObjectPaused", "message": "ScaledObject is paused",
        "lastTransitionTime": None}
    assert so_status(core, "paused")["pausedReplicaCount"] == 3
    assert REGISTRY.get_sample_value("keda_scaled_object_paused", {"namespace": "default",
                                                                   "scaledObject": "paused"}) == 1
    core.store.redis.rpush("paused-q", *range(100))  # would activate and scale: paused holds
    for _ in range(4):
        clock.advance(30)
    wait_for(lambda: condition(core, "paused", "Paused").get("status") == "True", 5, "still paused")
    assert replicas(core, "paused") == 3 and not hpa_exists(core, "keda-hpa-paused")

    set_annotations(core, "paused", None)
    wait_for(lambda: condition(core, "paused", "Paused").get("reason") == "ScaledObjectUnpaused", 20, "unpaused")
    wait_for(lambda: hpa_exists(core, "keda-hpa-paused"), 20, "the HPA back")
    assert "pausedReplicaCount" not in so_status(core, "paused")


def test_fallback_after_failure_threshold_failed_polls(
        core: ServerCore, clock: ManualClock, start_manager: Callable[..., ControllerManager]) -> None:
    threshold, fallback_replicas, list_length = 3, 4, 10
    core.create(DEPLOYMENT, worker_deployment("fb", "fb-q"))
    start_manager("keda-operator")
    # Port 1 refuses connections: every poll fails at once.
    core.create(SCALEDOBJECT, scaled_object(
        "fb", "fb", [redis_trigger("fb-q", address="127.0.0.1:1")], minReplicaCount=0, maxReplicaCount=10,
        fallback={"failureThreshold": threshold, "replicas": fallback_replicas}))
    metric = "s0-redis-fb-q"

    def failures() -> int:
        return int((so_status(core, "fb").get("health") or {}).get(metric, {}).get("numberOfFailures") or 0)

    for polls in range(1, threshold + 2):
        wait_for(lambda n=polls: failures() == n, 20, f"failed poll {polls}")
        if polls <= threshold:
            assert replicas(core, "fb") == 0, f"fallback before {threshold} failures ({polls})"
            assert condition(core, "fb", "Fallback").get("status") == "False"
            clock.advance(30)
    wait_for(lambda: replicas(core, "fb") == fallback_replicas, 20, "fallback replicas")
    assert condition(core, "fb", "Fallback")["reason"] == "FallbackExists"
    ready = condition(core, "fb", "Ready")
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False", "TriggerError", "Triggers defined in ScaledObject are not working correctly")
    # The HPA reads fallback.replicas * target, so it holds fallback.replicas.
    adapter = MetricsAdapter.build(core.store, now=clock.now)
    values = adapter.external_values("default", metric, parse_label_selector("scaledobject.keda.sh/name=fb"))
    assert [v.value for v in values] == [fallback_replicas * list_length]
    labels = {"namespace": "default", "metric": metric, "scaledObject": "fb", "scaler": "redisScaler",
              "triggerIndex": "0", "type": "scaledobject"}
    assert (REGISTRY.get_sample_value("keda_scaler_errors_total", labels) or 0) >= threshold + 1
    assert (REGISTRY.get_sample_value("keda_scaled_object_errors_total",
                                      {"namespace": "default", "scaledObject": "fb"}) or 0) >= threshold + 1
    assert REGISTRY.get_sample_value("keda_internal_scale_loop_latency_seconds",
                                     {"namespace": "default", "type": "scaledobject", "resource": "fb"}) is not None
    wait_for(lambda: event_messages(core, "KEDAScalerFailed"), 10, "KEDAScalerFailed events")
    assert "127.0.0.1:1" in event_messages(core, "KEDAScalerFailed")[0] or \
        "refused" in event_messages(core, "KEDAScalerFailed")[0].lower()


BAD_TRIGGERS = [
    ("unknown-type", [{"type": "kafkaa", "metadata": {"topic": "t"}}], "no scaler found for type: kafkaa"),
    ("missing-auth", [{"type": "redis", "metadata": {"listName": "q"}, "authenticationRef": {"name": "nope"}}],
     'error getting triggerAuth: triggerauthentications.keda.sh "nope" not found'),
    ("bad-metadata", [{"type": "prometheus", "metadata": {"serverAddress": "http://127.0.0.1:1", "query": "up"}}],
     'error parsing prometheus metadata: missing required parameter "threshold"'),
]


@pytest.mark.parametrize(("name", "triggers", "message"), BAD_TRIGGERS, ids=[c[0] for c in BAD_TRIGGERS])
def test_bad_triggers_are_a_check_failed_condition(
        core: ServerCore, start_manager: Callable[..., ControllerManager], name: str, triggers: list[Obj],
        message: str) -> None:
    core.create(DEPLOYMENT, worker_deployment(name, "q"))
    start_manager("keda-operator")
    core.create(SCALEDOBJECT, scaled_object(name, name, triggers))
    wait_for(lambda: condition(core, name, "Ready").get("status") == "False", 20, "Ready=False")
    ready = condition(core, name, "Ready")
    assert (ready["reason"], ready["message"]) == (
        "ScaledObjectCheckFailed", "Failed to ensure HPA is correctly created for ScaledObject")
    wait_for(lambda: message in event_messages(core, "ScaledObjectCheckFailed"), 10, "the event")
    assert not hpa_exists(core, f"keda-hpa-{name}") and replicas(core, name) == 0


WEBHOOK_CASES = [
    ("other-hpa", {}, "the workload 'web' of type 'apps/v1.Deployment' is already managed by the hpa 'web'"),
    ("min-above-max", {"minReplicaCount": 5, "maxReplicaCount": 2}, "MinReplicaCount=5 must be less than "
                                                                     "MaxReplicaCount=2"),
    ("idle-not-below-min", {"idleReplicaCount": 1, "minReplicaCount": 1},
     "IdleReplicaCount=1 must be less than MinReplicaCount=1"),
    ("duplicate-trigger-names", {"triggers": [{"type": "cron", "name": "a", "metadata": {}},
                                              {"type": "cron", "name": "a", "metadata": {}}]},
     'triggerName "a" is defined multiple times in the ScaledObject/ScaledJob, but it must be unique'),
    ("no-triggers", {"triggers": []}, "no triggers defined in the ScaledObject/ScaledJob"),
    ("fallback-cpu-only", {"triggers": [{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "50"}}],
                           "fallback": {"failureThreshold": 3, "replicas": 2}},
     "at least one trigger (that is not cpu or memory) has to have the `AverageValue` type for the fallback to be "
     "enabled"),
]


@pytest.mark.parametrize(("case", "spec", "message"), WEBHOOK_CASES, ids=[c[0] for c in WEBHOOK_CASES])
def test_the_webhook_denies_with_upstreams_message(core: ServerCore, case: str, spec: Obj, message: str) -> None:
    core.create(DEPLOYMENT, worker_deployment("web", "q"))
    if case == "other-hpa":
        core.create(HORIZONTALPODAUTOSCALER, {"metadata": {"name": "web", "namespace": "default"}, "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 3,
            "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                                       "averageUtilization": 50}}}]}})
    body = scaled_object("web", "web", [redis_trigger("q")])
    body["spec"].update(spec)
    with pytest.raises(errors.StatusError) as raised:
        core.create(SCALEDOBJECT, body)
    assert raised.value.code == 403
    assert raised.value.message == f'admission webhook "vscaledobject.kb.io" denied the request: {message}'
    assert core.list(SCALEDOBJECT, "default").items == []
    assert [h["metadata"]["name"] for h in core.list(HORIZONTALPODAUTOSCALER, "default").items] == \
        (["web"] if case == "other-hpa" else [])


def test_schema_rejects_a_trigger_without_type(core: ServerCore) -> None:
    body = scaled_object("x", "x", [{"metadata": {"listName": "q"}}])
    with pytest.raises(errors.StatusError) as raised:
        core.create(SCALEDOBJECT, body)
    assert raised.value.code == 422
    assert [c.field for c in raised.value.causes] == ["spec.triggers[0].type"]


def test_idle_replicas_activation_threshold_and_hpa_config(
        core: ServerCore, clock: ManualClock, start_manager: Callable[..., ControllerManager]) -> None:
    """idleReplicaCount 0 with minReplicaCount 2: inactive -> idle after cooldown; active -> min (RequestScale)."""
    redis, queue = core.store.redis, "idle-q"
    redis.delete(queue)
    redis.rpush(queue, *range(3))  # 3 <= activationListLength 3: not active
    core.create(DEPLOYMENT, worker_deployment("idle", queue))
    start_manager("keda-operator")
    behavior = {"scaleDown": {"stabilizationWindowSeconds": 60, "policies": [
        {"type": "Pods", "value": 1, "periodSeconds": 30}]}}
    core.create(SCALEDOBJECT, scaled_object(
        "idle", "idle", [redis_trigger(queue, activationListLength="3")], idleReplicaCount=0, minReplicaCount=2,
        maxReplicaCount=8, cooldownPeriod=60,
        advanced={"horizontalPodAutoscalerConfig": {"name": "custom-hpa", "behavior": behavior}}))
    wait_for(lambda: hpa_exists(core, "custom-hpa"), 20, "the HPA under its configured name")
    hpa = core.get(HORIZONTALPODAUTOSCALER, "default", "custom-hpa")
    assert hpa["spec"]["minReplicas"] == 2 and hpa["spec"]["maxReplicas"] == 8
    assert hpa["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] == 60
    assert hpa["spec"]["behavior"]["scaleDown"]["policies"] == behavior["scaleDown"]["policies"]
    wait_for(lambda: condition(core, "idle", "Active").get("reason") == "ScalerNotActive", 20, "inactive")
    assert replicas(core, "idle") == 0  # at idle: nothing to do while inactive

    redis.rpush(queue, "one-more")  # 4 > 3: active -> from idle to minReplicaCount
    clock.advance(30)
    wait_for(lambda: replicas(core, "idle") == 2, 20, "idle -> minReplicaCount on activation")
    redis.delete(queue)
    clock.advance(30)  # inactive, but the last active poll was 30 s ago: cooling down
    wait_for(lambda: condition(core, "idle", "Active").get("reason") == "ScalerNotActive", 20, "inactive again")
    assert replicas(core, "idle") == 2
    clock.advance(30)  # 60 s since the last active poll: not more than cooldownPeriod yet (strictly after)
    clock.advance(30)
    wait_for(lambda: replicas(core, "idle") == 0, 20, "back to idleReplicaCount after cooldownPeriod")


def test_missing_scale_target_is_a_check_failed_condition(
        core: ServerCore, start_manager: Callable[..., ControllerManager]) -> None:
    start_manager("keda-operator")
    core.create(SCALEDOBJECT, scaled_object("ghost", "no-such-deployment", [redis_trigger("q")]))
    wait_for(lambda: condition(core, "ghost", "Ready").get("status") == "False", 20, "Ready=False")
    ready = condition(core, "ghost", "Ready")
    assert (ready["reason"], ready["message"]) == ("ScaledObjectCheckFailed",
                                                   "ScaledObject doesn't have correct scaleTargetRef specification")
    assert not hpa_exists(core, "keda-hpa-ghost")


def test_deleting_the_scaled_object_removes_its_hpa_and_metrics(
        core: ServerCore, clock: ManualClock, start_manager: Callable[..., ControllerManager]) -> None:
    redis, queue = core.store.redis, "gone-q"
    redis.delete(queue)
    redis.rpush(queue, *range(20))
    core.create(DEPLOYMENT, worker_deployment("gone", queue))
    start_manager("keda-operator", "garbagecollector")
    core.create(SCALEDOBJECT, scaled_object("gone", "gone", [redis_trigger(queue)], minReplicaCount=0))
    wait_for(lambda: replicas(core, "gone") == 1 and hpa_exists(core, "keda-hpa-gone"), 20, "activated, HPA")
    adapter = MetricsAdapter.build(core.store, now=clock.now)
    selector = parse_label_selector("scaledobject.keda.sh/name=gone")
    assert [v.value for v in adapter.external_values("default", f"s0-redis-{queue}", selector)] == [20.0]
    core.delete(SCALEDOBJECT, "default", "gone")
    wait_for(lambda: not hpa_exists(core, "keda-hpa-gone"), 20, "the HPA garbage-collected")

    def forgotten() -> bool:
        try:
            adapter.external_values("default", f"s0-redis-{queue}", selector)
        except errors.StatusError as e:
            return e.code == 404
        return False
    wait_for(forgotten, 20, "the metric no longer served")
    assert replicas(core, "gone") == 1  # the target is left as it is (no restoreToOriginalReplicaCount)


@pytest.mark.parametrize(("usage_m", "active"), [(80, True), (20, False)], ids=["above", "below"])
def test_cpu_trigger_is_a_resource_metric_and_reads_metrics_k8s_io(
        core: ServerCore, clock: ManualClock, start_manager: Callable[..., ControllerManager], usage_m: int,
        active: bool) -> None:
    """cpu (Utilization 50, activationValue 30) over 2 pods requesting 100m: usage/request*100 vs 30."""
    body = worker_deployment("cpu", "unused")
    body["spec"]["replicas"] = 2
    core.create(DEPLOYMENT, body)
    for i in range(2):
        pod = {"metadata": {"name": f"cpu-{i}", "namespace": "default", "labels": {"app": "cpu"}},
               "spec": {"nodeName": "n1", "containers": [{"name": "worker", "image": "w:1", "resources": {
                   "requests": {"cpu": "100m"}}}]}}
        stored = core.create(POD, pod)
        core.update_status(POD, {**stored, "status": running_ready_status(stored, clock.now())})
    pipe = core.store.redis.pipeline(transaction=False)
    kubelet_usage.write_snapshot(pipe, core.store.config.prefix, timestamp=clock.now(), window=15.0, nodes={}, pods={
        ("default", f"cpu-{i}"): [("worker", usage_m * 1_000_000, 64 * 1024**2)] for i in range(2)})
    pipe.execute()
    start_manager("keda-operator")
    core.create(SCALEDOBJECT, scaled_object("cpu", "cpu", [
        {"type": "cpu", "metricType": "Utilization", "metadata": {"value": "50", "activationValue": "30"}}],
        minReplicaCount=1, maxReplicaCount=4))
    wait_for(lambda: hpa_exists(core, "keda-hpa-cpu"), 20, "the HPA")
    assert core.get(HORIZONTALPODAUTOSCALER, "default", "keda-hpa-cpu")["spec"]["metrics"] == [
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}}]
    wait_for(lambda: condition(core, "cpu", "Active").get("status") in ("True", "False"), 20, "a poll")
    assert condition(core, "cpu", "Active")["status"] == ("True" if active else "False")
    assert so_status(core, "cpu")["resourceMetricNames"] == ["cpu"]


@pytest.mark.parametrize(("password", "ready"), [("s3cret", "True"), ("wrong", "False")], ids=["right", "wrong"])
def test_trigger_authentication_reads_a_secret(
        core: ServerCore, start_manager: Callable[..., ControllerManager], password: str, ready: str) -> None:
    """secretTargetRef: username and password from a Secret reach the redis scaler (an ACL user on the real Redis)."""
    redis, queue = core.store.redis, f"auth-q-{password}"
    redis.execute_command("ACL", "SETUSER", "keda-op", "on", ">s3cret", "~*", "+@all")
    redis.delete(queue)
    redis.rpush(queue, *range(12))
    core.create(SECRET, {"metadata": {"name": "redis-creds", "namespace": "default"}, "data": {
        "user": base64.b64encode(b"keda-op").decode(), "pass": base64.b64encode(password.encode()).decode()}})
    core.create(TRIGGERAUTHENTICATION, {"metadata": {"name": "redis-auth", "namespace": "default"}, "spec": {
        "secretTargetRef": [{"parameter": "username", "name": "redis-creds", "key": "user"},
                            {"parameter": "password", "name": "redis-creds", "key": "pass"}]}})
    core.create(DEPLOYMENT, worker_deployment("auth", queue))
    start_manager("keda-operator")
    kwargs = redis.connection_pool.connection_kwargs
    trigger = redis_trigger(queue, address=f"{kwargs['host']}:{kwargs['port']}")
    trigger["authenticationRef"] = {"name": "redis-auth"}
    core.create(SCALEDOBJECT, scaled_object("auth", "auth", [trigger], minReplicaCount=0))
    wait_for(lambda: condition(core, "auth", "Ready").get("status") == ready and
             condition(core, "auth", "Active").get("status") in ("True", "False"), 20, f"Ready={ready} after a poll")
    assert so_status(core, "auth")["authenticationsTypes"] == "TriggerAuthentication/redis-auth"
    assert replicas(core, "auth") == (1 if ready == "True" else 0)
