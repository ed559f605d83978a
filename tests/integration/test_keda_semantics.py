"""KEDA semantics on a ManualClock: scalingModifiers, initialCooldownPeriod, scalers rebuilt on auth changes,
and the webhook's scalingModifiers checks (the eager ScaledJob strategy: test_keda_scaledjob's table).

Expected values from kedacore/keda:

* ``advanced.scalingModifiers`` (``controllers/keda/hpa.go``, ``pkg/scaling/modifiers/formula.go``,
  ``scale_handler.go``): the HPA gets one External metric ``composite-metric`` (target
  ``scalingModifiers.target``, AverageValue unless ``metricType`` says Value) instead of one per
  trigger; its value is the formula over the triggers' values by trigger name; the object is active
  when that value is above ``activationTarget`` (default 0) — the triggers' own activity no longer counts.
* ``initialCooldownPeriod`` (``executor/scale_scaledobjects.go scaleToZeroOrIdle``): never active yet
  (no ``lastActiveTime``), the target goes to 0 only once ``creationTimestamp + initialCooldownPeriod``
  is strictly before now (default 0).
* Scalers are built again when a TriggerAuthentication or Secret they read changes, so the next poll
  uses the new credentials — also a broken one (a cached connection would hide it).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from prometheus_client import REGISTRY

from emulator.api import errors
from emulator.api.kinds import DEPLOYMENT, HORIZONTALPODAUTOSCALER, SCALEDOBJECT, SECRET, TRIGGERAUTHENTICATION
from emulator.clock import ManualClock
from emulator.controllers.manager import ControllerManager
from emulator.keda import metricstore
from emulator.server.core import ServerCore
from tests.integration.test_keda_operator import redis_trigger, scaled_object, worker_deployment
from tests.integration.test_keda_scaling import condition, hpa_exists, replicas, so_status
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

Obj = dict[str, Any]


def polls(manager: ControllerManager) -> int:
    operator: Any = manager.controllers()["keda-operator"]
    return int(operator.stats.polls)


def advance_one_poll(clock: ManualClock, manager: ControllerManager, seconds: float) -> None:
    """Once the last poll has finished (its next one is scheduled), move the cluster clock by ``seconds`` and
    wait until the operator polled again and finished."""
    operator: Any = manager.controllers()["keda-operator"]

    def settled() -> bool:
        return bool(operator.due) and all(due > clock.now() for due in list(operator.due.values()))

    wait_for(settled, 20, "the last poll finished")
    before = polls(manager)
    clock.advance(seconds)
    wait_for(lambda: polls(manager) > before and settled(), 20, f"the poll after {seconds} s")


# ------------------------------------------------------------------------------------- scalingModifiers
MODIFIER_CASES = [
    # (a items, b items, formula, activationTarget) -> composite value, active
    ("sum-below-activation", 8, 5, "a + b", "15", 8 + 5, False),
    ("sum-above-activation", 8, 10, "a + b", "15", 8 + 10, True),
    ("ternary", 8, 10, "a > 5 ? b : 0", "", 10, True),
    ("weighted-average", 30, 10, "(3 * a + b) / 4", "", (3 * 30 + 10) / 4, True),
    ("both-empty", 0, 0, "max(a, b)", "", 0, False),
]


@pytest.mark.parametrize(("case", "a_items", "b_items", "formula", "activation", "value", "active"), MODIFIER_CASES,
                         ids=[c[0] for c in MODIFIER_CASES])
def test_scaling_modifiers_composite_metric(
        core: ServerCore, start_manager: Callable[..., ControllerManager], case: str, a_items: int, b_items: int,
        formula: str, activation: str, value: float, active: bool) -> None:
    redis = core.store.redis
    for queue, items in ((f"{case}-a", a_items), (f"{case}-b", b_items)):
        redis.delete(queue)
        if items:
            redis.rpush(queue, *range(items))
    core.create(DEPLOYMENT, worker_deployment(case, f"{case}-a"))
    start_manager("keda-operator")
    modifiers = {"formula": formula, "target": "5"} | ({"activationTarget": activation} if activation else {})
    core.create(SCALEDOBJECT, scaled_object(
        case, case, [{**redis_trigger(f"{case}-a"), "name": "a"}, {**redis_trigger(f"{case}-b"), "name": "b"}],
        minReplicaCount=0, maxReplicaCount=10, advanced={"scalingModifiers": modifiers}))
    wait_for(lambda: hpa_exists(core, f"keda-hpa-{case}"), 20, "the HPA")
    # One External metric, the composite one, with scalingModifiers.target (hpa.go).
    assert core.get(HORIZONTALPODAUTOSCALER, "default", f"keda-hpa-{case}")["spec"]["metrics"] == [
        {"type": "External", "external": {
            "metric": {"name": "composite-metric", "selector": {"matchLabels": {"scaledobject.keda.sh/name": case}}},
            "target": {"type": "AverageValue", "averageValue": "5"}}}]
    wait_for(lambda: condition(core, case, "Active").get("status") in ("True", "False"), 20, "the first poll")
    assert condition(core, case, "Active")["status"] == ("True" if active else "False")
    assert so_status(core, case)["compositeScalerName"] == "composite-metric"
    stored = metricstore.read(redis, core.store.config.prefix, "default", case, "composite-metric")
    assert stored is not None and stored[0] == pytest.approx(value)
    labels = {"namespace": "default", "metric": "composite-metric", "scaledObject": case,
              "scaler": "composite-metric", "triggerIndex": "0", "type": "scaledobject"}
    assert REGISTRY.get_sample_value("keda_scaler_metrics_value", labels) == pytest.approx(value)
    assert REGISTRY.get_sample_value("keda_scaler_active", labels) == (1 if active else 0)
    assert replicas(core, case) == (1 if active else 0)


def test_scaling_modifiers_value_metric_type_and_fallback(
        core: ServerCore, clock: ManualClock, start_manager: Callable[..., ControllerManager]) -> None:
    # metricType Value; the only trigger unreachable past failureThreshold: the composite metric reads
    # fallback.replicas * scalingModifiers.target (fallback.go), whatever the formula says.
    threshold, fallback_replicas, target = 1, 3, 4
    core.create(DEPLOYMENT, worker_deployment("fbm", "fbm-q"))
    manager = start_manager("keda-operator")
    core.create(SCALEDOBJECT, scaled_object(
        "fbm", "fbm", [{**redis_trigger("fbm-q", address="127.0.0.1:1"), "name": "q"}], minReplicaCount=0,
        fallback={"failureThreshold": threshold, "replicas": fallback_replicas},
        advanced={"scalingModifiers": {"formula": "q * 2", "target": str(target), "metricType": "Value"}}))
    wait_for(lambda: hpa_exists(core, "keda-hpa-fbm"), 20, "the HPA")
    assert core.get(HORIZONTALPODAUTOSCALER, "default", "keda-hpa-fbm")["spec"]["metrics"][0]["external"][
        "target"] == {"type": "Value", "value": str(target)}
    wait_for(lambda: polls(manager) >= 1, 20, "the first poll")
    for _ in range(threshold):
        advance_one_poll(clock, manager, 30)
    wait_for(lambda: condition(core, "fbm", "Fallback").get("status") == "True", 20, "Fallback=True")
    stored = metricstore.read(core.store.redis, core.store.config.prefix, "default", "fbm", "composite-metric")
    assert stored is not None and stored[0] == fallback_replicas * target


# ------------------------------------------------------------------------------------- initialCooldownPeriod
COOLDOWN_CASES = [
    # (initialCooldownPeriod, [(cluster seconds since creation, replicas after that poll)])
    ("default-0", None, [(30, 0)]),
    ("120s", 120, [(30, 2), (90, 2), (120, 2), (150, 0)]),  # strictly before now: 120 s is not yet past
]


@pytest.mark.parametrize(("case", "initial", "steps"), COOLDOWN_CASES, ids=[c[0] for c in COOLDOWN_CASES])
def test_initial_cooldown_period_before_the_first_activation(
        core: ServerCore, clock: ManualClock, start_manager: Callable[..., ControllerManager], case: str,
        initial: int | None, steps: list[tuple[int, int]]) -> None:
    core.store.redis.delete(f"{case}-q")
    deployment = worker_deployment(case, f"{case}-q")
    deployment["spec"]["replicas"] = 2  # scaled outside KEDA: never active, no lastActiveTime
    core.create(DEPLOYMENT, deployment)
    manager = start_manager("keda-operator")
    spec: dict[str, Any] = {"minReplicaCount": 0, "pollingInterval": 30, "cooldownPeriod": 10}
    if initial is not None:
        spec["initialCooldownPeriod"] = initial
    core.create(SCALEDOBJECT, scaled_object(case, case, [redis_trigger(f"{case}-q")], **spec))
    created = clock.now()
    wait_for(lambda: polls(manager) >= 1, 20, "the first poll")
    for at, expected in steps:
        advance_one_poll(clock, manager, at - (clock.now() - created))
        assert replicas(core, case) == expected, f"{at} s after creation"
    assert "lastActiveTime" not in so_status(core, case)


def test_a_failing_scaler_does_not_scale_down(
        core: ServerCore, clock: ManualClock, start_manager: Callable[..., ControllerManager]) -> None:
    # RequestScale, inactive with isError and no fallback: TriggerError, and the target stays where it is
    # (scale_scaledobjects.go) - an unreachable queue is not an empty one.
    deployment = worker_deployment("down", "down-q")
    deployment["spec"]["replicas"] = 3
    core.create(DEPLOYMENT, deployment)
    manager = start_manager("keda-operator")
    core.create(SCALEDOBJECT, scaled_object("down", "down", [redis_trigger("down-q", address="127.0.0.1:1")],
                                            minReplicaCount=0, cooldownPeriod=0))
    wait_for(lambda: polls(manager) >= 1, 20, "the first poll")
    for _ in range(2):
        advance_one_poll(clock, manager, 30)
    assert condition(core, "down", "Ready")["reason"] == "TriggerError"
    assert replicas(core, "down") == 3


# ------------------------------------------------------------------------------------- auth changes
def _secret(name: str, password: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "default"}, "data": {
        "user": base64.b64encode(b"keda-sem").decode(), "pass": base64.b64encode(password.encode()).decode()}}


def _auth(secret: str) -> Obj:
    return {"metadata": {"name": "sem-auth", "namespace": "default"}, "spec": {"secretTargetRef": [
        {"parameter": "username", "name": secret, "key": "user"},
        {"parameter": "password", "name": secret, "key": "pass"}]}}


AUTH_CASES = [
    # (first password, the change, Ready after the next poll)
    ("secret-fixed", "wrong", "secret", "True"),
    ("secret-broken", "s3cret", "secret", "False"),
    ("trigger-authentication-repointed", "s3cret", "trigger-authentication", "False"),
]


@pytest.mark.parametrize(("case", "first", "change", "ready"), AUTH_CASES, ids=[c[0] for c in AUTH_CASES])
def test_auth_changes_rebuild_the_scalers(
        core: ServerCore, clock: ManualClock, start_manager: Callable[..., ControllerManager], case: str, first: str,
        change: str, ready: str) -> None:
    redis, queue = core.store.redis, f"sem-{case}"
    redis.execute_command("ACL", "SETUSER", "keda-sem", "on", ">s3cret", "~*", "+@all")
    redis.delete(queue)
    redis.rpush(queue, *range(12))
    core.create(SECRET, _secret("sem-creds", first))
    core.create(SECRET, _secret("sem-other", "wrong"))
    core.create(TRIGGERAUTHENTICATION, _auth("sem-creds"))
    core.create(DEPLOYMENT, worker_deployment(case, queue))
    manager = start_manager("keda-operator")
    kwargs = redis.connection_pool.connection_kwargs
    trigger = redis_trigger(queue, address=f"{kwargs['host']}:{kwargs['port']}")
    trigger["authenticationRef"] = {"name": "sem-auth"}
    core.create(SCALEDOBJECT, scaled_object(case, case, [trigger], minReplicaCount=0))
    first_ready = "True" if first == "s3cret" else "False"
    wait_for(lambda: condition(core, case, "Ready").get("status") == first_ready and polls(manager) >= 1, 20,
             f"Ready={first_ready} after the first poll")
    generation = core.get(SCALEDOBJECT, "default", case)["metadata"]["generation"]
    operator: Any = manager.controllers()["keda-operator"]
    built = operator.built[f"default/{case}"]

    if change == "secret":
        secret = core.get(SECRET, "default", "sem-creds")
        secret["data"]["pass"] = base64.b64encode(("s3cret" if first == "wrong" else "wrong").encode()).decode()
        core.update(SECRET, secret)
    else:
        auth = core.get(TRIGGERAUTHENTICATION, "default", "sem-auth")
        auth["spec"] = _auth("sem-other")["spec"]
        core.update(TRIGGERAUTHENTICATION, auth)
    wait_for(lambda: operator.built.get(f"default/{case}") not in (None, built), 20, "the scalers built again")
    advance_one_poll(clock, manager, 30)
    wait_for(lambda: condition(core, case, "Ready").get("status") == ready, 20, f"Ready={ready}")
    assert core.get(SCALEDOBJECT, "default", case)["metadata"]["generation"] == generation  # no spec change
    if ready == "False":
        assert condition(core, case, "Ready")["reason"] == "TriggerError"
    else:
        assert replicas(core, case) == 1


# ------------------------------------------------------------------------------------- the webhook
MODIFIER_WEBHOOK_CASES = [
    ("no-formula", {"target": "5"}, "error ScalingModifiers.Formula is mandatory"),
    ("no-target", {"formula": "a"},
     "error validating formula in ScalingModifiers\nformula is given but target is empty"),
    ("unknown-trigger", {"formula": "a + b", "target": "5"}, "error validating formula in ScalingModifiers\n"
                                                              "unknown name b"),
    ("target-zero", {"formula": "a", "target": "0"}, "error validating target in ScalingModifiers\nerror converting "
                                                      "target for scalingModifiers (string->float) to valid target: "
                                                      "%!w(<nil>)"),
    ("target-not-a-number", {"formula": "a", "target": "x"},
     'error validating target in ScalingModifiers\nerror converting target for scalingModifiers (string->float) to '
     'valid target: strconv.ParseFloat: parsing "x": invalid syntax'),
    ("utilization", {"formula": "a", "target": "5", "metricType": "Utilization"},
     "error validating target in ScalingModifiers\nerror trigger type is Utilization, but it needs to be "
     "AverageValue or Value for external metrics"),
]


@pytest.mark.parametrize(("case", "modifiers", "message"), MODIFIER_WEBHOOK_CASES,
                         ids=[c[0] for c in MODIFIER_WEBHOOK_CASES])
def test_the_webhook_checks_scaling_modifiers(core: ServerCore, case: str, modifiers: Obj, message: str) -> None:
    core.create(DEPLOYMENT, worker_deployment("mod", "q"))
    body = scaled_object("mod", "mod", [{**redis_trigger("q"), "name": "a"}], advanced={"scalingModifiers": modifiers})
    with pytest.raises(errors.StatusError) as raised:
        core.create(SCALEDOBJECT, body)
    assert raised.value.code == 403
    assert raised.value.message == f'admission webhook "vscaledobject.kb.io" denied the request: {message}'
    assert core.list(SCALEDOBJECT, "default").items == []
