"""Scenario files and their plans: validation with the field named, seeded and repeatable timelines."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from emulator.api.gpu import GPU_MODEL_LABEL, gpu_request
from emulator.config import Config
from loadgen import bench_openb, trace
from loadgen import plan as planning
from loadgen.runner import cluster_config
from loadgen.scenario import Scenario, ScenarioError

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = sorted((ROOT / "loadgen" / "scenarios").glob("*.yaml"))
TEMPLATES = {"default": {"cpu": ["100m", "250m", "1"], "memory": ["64Mi", "1Gi"], "profile": ["web", "batch"]}}


def scenario(*phases: dict[str, Any], **top: Any) -> Scenario:
    return Scenario.from_dict({"templates": TEMPLATES, "namespaces": 3, **top, "phases": list(phases)})


def creates(p: planning.Plan) -> list[tuple[float, str, str, dict[str, Any]]]:
    return [(a.t, a.namespace, a.name, a.body()) for a in p.actions if a.op == planning.CREATE_POD]


def test_same_seed_same_pod_sequence_other_seed_other_pods() -> None:
    def data(seed: int) -> dict[str, Any]:
        return {"templates": TEMPLATES, "namespaces": 3, "seed": seed,
                "phases": [{"pods": {"count": 300, "rate": 100, "arrival": "poisson"}},
                           {"churn": {"rate": 20, "duration": 2}}]}

    first, again = planning.build(Scenario.from_dict(data(1))), planning.build(Scenario.from_dict(data(1)))
    assert first.actions == again.actions and creates(first) == creates(again)
    other = planning.build(Scenario.from_dict(data(2)))
    assert creates(other) != creates(first)
    assert [a.t for a in other.actions] != [a.t for a in first.actions]  # arrivals are seeded too


def test_adding_a_phase_does_not_reshuffle_the_others() -> None:
    one = planning.build(scenario({"name": "a", "pods": {"count": 50}}))
    two = planning.build(scenario({"name": "a", "pods": {"count": 50}}, {"name": "b", "pods": {"count": 50}}))
    assert creates(one) == creates(two)[:50]


def test_phases_run_one_after_another_unless_given_a_start() -> None:
    p = planning.build(scenario({"name": "ramp", "pods": {"count": 10, "rate": 5}},
                                {"name": "burst", "burst": {"count": 4}},
                                {"name": "bg", "at": 0.5, "load": {"shape": "constant", "base": 7, "duration": 3}}))
    windows = {w.name: (w.start, w.end) for w in p.phases}
    assert windows["ramp"] == (0.0, 1.8)  # 10 pods at 5/s: the last one at 1.8 s
    assert windows["burst"] == (1.8, 1.8)
    assert windows["bg"] == (0.5, 3.5)
    assert [a.t for a in p.actions if a.phase == "burst"] == [1.8] * 4
    assert [a.t for a in p.actions] == sorted(a.t for a in p.actions)


def test_pod_bodies_carry_template_draws_priority_mix_and_phase_label() -> None:
    s = scenario({"name": "ramp", "pods": {"count": 400}},
                 priorities=[{"name": "high", "value": 1000, "weight": 1}, {"name": "low", "value": 0, "weight": 3}])
    bodies = [b for *_, b in creates(planning.build(s))]
    assert {b["metadata"]["annotations"]["kemu.io/profile"] for b in bodies} == {"web", "batch"}
    assert {b["metadata"]["labels"]["kemu.io/phase"] for b in bodies} == {"ramp"}
    classes = Counter(b["spec"]["priorityClassName"] for b in bodies)
    assert set(classes) == {"high", "low"} and classes["low"] > 2 * classes["high"]  # weights 3:1
    assert Counter(b["metadata"]["namespace"] for b in bodies) == {"load-0": 134, "load-1": 133, "load-2": 133}


def test_lifetime_and_churn_never_delete_a_pod_twice_or_before_it_exists() -> None:
    p = planning.build(scenario({"name": "ramp", "pods": {"count": 200, "rate": 100, "lifetime": 1.5}},
                                {"name": "churn", "at": 0.5, "churn": {"rate": 50, "duration": 2}}))
    created = {(a.namespace, a.name): a.t for a in p.actions if a.op == planning.CREATE_POD}
    deletes = [(a.namespace, a.name, a.t) for a in p.actions if a.op == planning.DELETE_POD]
    assert len({(ns, n) for ns, n, _ in deletes}) == len(deletes)  # each pod deleted at most once
    assert all(created[(ns, n)] < t for ns, n, t in deletes)
    by_churn = [a for a in p.actions if a.op == planning.DELETE_POD and a.phase == "churn"]
    assert len(by_churn) == 100  # 2 s at 50/s, and there is always a live pod to pick


def test_deployments_are_created_then_scaled() -> None:
    p = planning.build(scenario({"name": "web", "deployments": {"count": 2, "replicas": 5, "scale_to": 8,
                                                                "scale_after": 3}}))
    ops = [(a.op, a.name, a.t) for a in p.actions]
    assert ops == [(planning.CREATE_DEPLOYMENT, "web-000", 0.0), (planning.CREATE_DEPLOYMENT, "web-001", 0.0),
                   (planning.SCALE_DEPLOYMENT, "web-000", 3.0), (planning.SCALE_DEPLOYMENT, "web-001", 3.0)]
    body = p.actions[0].body()
    assert body["kind"] == "Deployment" and body["spec"]["replicas"] == 5
    assert body["spec"]["selector"]["matchLabels"] == {"app": "web-000"}
    assert body["spec"]["template"]["metadata"]["labels"]["app"] == "web-000"
    assert p.expected_pods() == 16


@pytest.mark.parametrize(
    ("load", "expected"),
    [
        ({"shape": "constant", "base": 5, "duration": 2}, [5, 5, 5]),
        ({"shape": "ramp", "base": 0, "amplitude": 10, "duration": 4}, [0, 2.5, 5, 7.5, 10]),
        ({"shape": "step", "base": 1, "amplitude": 9, "duration": 4}, [1, 1, 10, 10, 10]),
        ({"shape": "sine", "base": 10, "amplitude": 10, "period": 4, "duration": 4}, [10, 20, 10, 0, 10]),
    ],
    ids=["constant", "ramp", "step", "sine"],
)
def test_load_series_shapes(load: dict[str, Any], expected: list[float]) -> None:
    p = planning.build(scenario({"load": {"kind": "queue", "target": "jobs", **load}}))
    assert [a.value for a in p.actions] == pytest.approx(expected, abs=1e-6)
    assert {dict(a.detail)["kind"] for a in p.actions} == {"queue"}


def test_trace_replay_maps_openb_pods_and_nodes() -> None:
    s = scenario({"name": "openb", "trace": {"file": "openb_pod_list_sample.csv", "speedup": 1000, "limit": 50}},
                 cluster={"trace_nodes": {"file": "openb_node_list_sample.csv"}})
    rows = trace.pods(s.resolve("openb_pod_list_sample.csv", trace=True), limit=50)
    p = planning.build(s)
    made = creates(p)
    assert [n for _, _, n, _ in made] == [r.name for r in rows]
    assert made[0][0] == 0.0 and made[-1][0] == pytest.approx((rows[-1].created - rows[0].created) / 1000)
    gpu = next(b for *_, b in made if trace.GPU_MILLI_RESOURCE in b["spec"]["containers"][0]["resources"]["requests"])
    res = gpu["spec"]["containers"][0]["resources"]
    assert res["limits"][trace.GPU_MILLI_RESOURCE] == res["requests"][trace.GPU_MILLI_RESOURCE]

    pools = s.node_pools()
    assert sum(pool["count"] for pool in pools) == 100  # every node of the sample list, grouped by shape
    gpu_pool = next(pool for pool in pools if "nvidia.com/gpu" in pool["capacity"])
    assert int(gpu_pool["capacity"][trace.GPU_MILLI_RESOURCE]) == 1000 * int(gpu_pool["capacity"]["nvidia.com/gpu"])
    assert gpu_pool["labels"][trace.GPU_MODEL_LABEL]


def test_trace_replay_carries_gpu_spec_as_the_bench_does() -> None:
    # A slice of the gpuspec33 excerpt: pods 40-139 in creation order, some pinned to GPU models.
    s = scenario({"name": "openb", "trace": {"file": "openb_pod_list_gpuspec_sample.csv", "speedup": 1000,
                                             "offset": 40, "limit": 100}})
    with s.resolve("openb_pod_list_gpuspec_sample.csv", trace=True).open(newline="") as f:
        rows = sorted(csv.DictReader(f), key=lambda r: (float(r["creation_time"]), r["name"]))[40:140]
    made = {n: body for _, _, n, body in creates(planning.build(s))}
    assert sorted(made) == sorted(r["name"] for r in rows)
    pinned = [r for r in rows if r["gpu_spec"]]
    assert pinned and len(pinned) < len(rows)  # the slice has both kinds
    by_name = {p.name: p for p in trace.pods(s.resolve("openb_pod_list_gpuspec_sample.csv", trace=True))}
    for r in rows:
        annotations = made[r["name"]]["metadata"].get("annotations") or {}
        # The model constraint is the pod annotation, exactly the CSV's gpu_spec ("" -> none) ...
        assert annotations.get(GPU_MODEL_LABEL, "") == r["gpu_spec"]
        # ... so the replayed pod asks the devices and models the bench's pod asks.
        wanted = frozenset(r["gpu_spec"].split("|")) if r["gpu_spec"] else frozenset()
        request = gpu_request(made[r["name"]])
        assert request == gpu_request(bench_openb.pod_object(by_name[r["name"]]))
        assert request.models == wanted
        assert request.total_milli == int(r["num_gpu"]) * int(r["gpu_milli"])


def test_cluster_becomes_node_pools_schedulers_and_controllers() -> None:
    s = Scenario.from_dict({"seed": 3, "clock_speed": 2.0, "controllers": False,
                            "cluster": {"nodes": 12, "node_cpu": "8", "node_memory": "32Gi", "node_pods": 50,
                                        "zones": 2, "kubelet_shards": 2,
                                        "node_pools": [{"name": "gpu", "count": 2, "instance_type": "p3.2xlarge"}]},
                            "schedulers": {"count": 2}})
    cfg = cluster_config(Config(), s)
    assert cfg.node_pools == [{"name": "node", "count": 12, "capacity": {"cpu": "8", "memory": "32Gi", "pods": "50"},
                               "zones": ["zone-a", "zone-b"]},
                              {"name": "gpu", "count": 2, "instance_type": "p3.2xlarge"}]
    assert (cfg.kubelet_shards, cfg.schedulers, cfg.kubelet["seed"], cfg.clock_speed) == (2, 2, 3, 2.0)
    assert cfg.controller_managers == 0 and cfg.wants_kubelets() and cfg.scheduler_count() == 2
    none = cluster_config(Config(), Scenario.from_dict({"cluster": {"nodes": 0}}))
    assert not none.wants_kubelets() and none.scheduler_count() == 0


@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
def test_shipped_scenarios_load_and_plan(path: Path) -> None:
    s = Scenario.load(path)
    assert planning.build(s).actions


def test_a_template_attaches_deployment_pods_to_a_load_target() -> None:
    """Pods of a template with load_target carry kemu.io/load-target, so the load phase's series reaches them."""
    s = Scenario.from_dict({"templates": {"default": {"cpu": "100m"}, "web": {"profile": "web", "load_target": "web"}},
                            "phases": [{"deployments": {"count": 1, "replicas": 2, "template": "web"}},
                                       {"load": {"target": "web", "base": 50, "duration": 2}}]})
    p = planning.build(s)
    template = next(a for a in p.actions if a.op == planning.CREATE_DEPLOYMENT).body()["spec"]["template"]
    assert template["metadata"]["annotations"] == {"kemu.io/profile": "web", "kemu.io/load-target": "web"}
    assert {(a.name, a.value) for a in p.actions if a.op == planning.SET_LOAD} == {("web", 50.0)}
    plain = planning.build(scenario({"pods": {"count": 1}}))
    assert "kemu.io/load-target" not in creates(plain)[0][3]["metadata"].get("annotations", {})  # no target


@pytest.mark.parametrize(("objects", "autoscalers"), [
    ([], False),
    ([{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"}}], False),
    ([{"apiVersion": "autoscaling.k8s.io/v1", "kind": "VerticalPodAutoscaler", "metadata": {"name": "web"}}], True),
], ids=["none", "a-deployment", "a-vpa"])
def test_objects_are_kept_and_autoscalers_found(objects: list[dict[str, Any]], autoscalers: bool) -> None:
    s = Scenario.from_dict({"objects": objects})
    assert list(s.objects) == objects
    assert s.has_autoscalers() is autoscalers


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"phases": [{"pods": {"count": "many"}}]}, "phases[0].pods.count: expected an integer >= 0, got 'many'"),
        ({"phases": [{"pods": {"rate": "fast"}}]}, "phases[0].pods.rate: expected a number >= 0, got 'fast'"),
        ({"phases": [{"pods": {"arrival": "bursty"}}]}, "phases[0].pods.arrival: must be one of constant, poisson"),
        ({"phases": [{"pods": {"arrival": "poisson"}}]}, "phases[0].pods.rate: poisson arrivals need a rate > 0"),
        ({"phases": [{"pods": {}, "burst": {}}]}, "phases[0]: needs exactly one of"),
        ({"phases": [{"name": "x"}]}, "phases[0]: needs exactly one of"),
        ({"phases": [{"pod": {}}]}, "unknown key phases[0].pod"),
        ({"phases": [{"pods": {"template": "big"}}]}, "phases[0].pods.template: no template 'big'"),
        ({"phases": [{"name": "a", "pods": {}}, {"name": "a", "burst": {}}]}, "two phases are named 'a'"),
        ({"phases": [{"churn": {"rate": 0}}]}, "phases[0].churn.rate: must be > 0"),
        ({"phases": [{"trace": {"file": "nope.csv"}}]}, "nope.csv: no such file"),
        ({"phases": [{"load": {"shape": "square"}}]}, "phases[0].load.shape: must be one of"),
        ({"phases": [{"load": {"kind": "cpu"}}]}, "phases[0].load.kind: must be one of http, queue, push"),
        ({"phases": [{"load": {"target": "Web Site"}}]}, "phases[0].load.target: load target name 'Web Site'"),
        ({"templates": {"default": {"load_target": "Web"}}}, "templates.default.load_target: load target name"),
        ({"phases": [{"deployments": {"scale_to": -2}}]}, "phases[0].deployments.scale_to"),
        ({"phases": {"pods": {}}}, "phases: expected a list"),
        ({"templates": {"default": {"cpu": ["1", "12xyz"]}}}, "templates.default.cpu[1]: quantities must match"),
        ({"templates": {"default": {"memory": []}}}, "templates.default.memory: must not be empty"),
        ({"templates": {"default": {"profile": ["web", "nope"]}}}, "templates.default.profile[1]: unknown profile"),
        ({"templates": {"default": {"priority": "vip"}}}, "templates.default.priority: 'vip' is not one of"),
        ({"templates": {"default": {"cpu": {"a": 1}}}}, "templates.default.cpu"),
        ({"objects": {"kind": "Deployment"}}, "objects: expected a list of manifests"),
        ({"objects": ["Deployment"]}, "objects[0]: expected a mapping"),
        ({"objects": [{"kind": "Deployment"}]}, "objects[0].apiVersion: required"),
        ({"objects": [{"apiVersion": "apps/v1", "kind": "Deploy", "metadata": {"name": "a"}}]},
         'objects[0].kind: no kind "Deploy" is registered for version "apps/v1"'),
        ({"objects": [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {}}]},
         "objects[0].metadata.name: required"),
        ({"objects": [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n", "namespace": "x"}}]},
         "objects[0].metadata.namespace: Node is not namespaced"),
        ({"objects": [{"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "a"}},
                      {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                       "metadata": {"name": "a", "namespace": "default"}}]},
         "objects[1]: HorizontalPodAutoscaler 'a' appears twice in objects"),
        ({"clusters": {}}, "unknown key clusters"),
        ({"cluster": {"gpus": 1}}, "unknown key cluster.gpus"),
        ({"cluster": [1]}, "cluster: expected a mapping"),
        ({"cluster": {"node_cpu": "12xyz"}}, "cluster.node_cpu: quantities must match"),
        ({"cluster": {"kubelet_shards": "two"}}, "cluster.kubelet_shards: expected an integer >= 0"),
        ({"cluster": {"zones": 0}}, "cluster.zones: must be between 1 and 26"),
        ({"cluster": {"node_pools": [{"name": "a", "count": 1, "colour": "red"}]}}, "cluster.node_pools[0]"),
        ({"cluster": {"trace_nodes": {"file": "missing.csv"}}}, "missing.csv: no such file"),
        ({"cluster": {"trace_nodes": {"rows": 3}}}, "unknown key cluster.trace_nodes.rows"),
        ({"schedulers": {"count": -1}}, "schedulers.count: expected an integer >= 0"),
        ({"schedulers": {"replicas": 2}}, "unknown key schedulers.replicas"),
        ({"cluster": {"nodes": 5}, "schedulers": {"count": 0}}, "schedulers.count: must be at least 1"),
        ({"driver": {"kind": "grpc"}}, "driver.kind: must be one of store, http, null"),
        ({"driver": {"processes": 0}}, "driver.processes: must be at least 1"),
        ({"driver": {"max_backlog": 0}}, "driver.max_backlog: must be at least 1"),
        ({"controllers": "yes"}, "controllers: expected true or false"),
        ({"priorities": {"high": 1}}, "priorities: expected a list"),
        ({"priorities": [{"value": 1}]}, "priorities[0].name: expected a PriorityClass"),
        ({"priorities": [{"name": "x", "value": "hi"}]}, "priorities[0].value: expected"),
        ({"priorities": [{"name": "x", "tier": 1}]}, "unknown key priorities[0].tier"),
        ({"phases": [{"pods": {"count": 5}}], "expect_pending": 6}, "expect_pending: 6 is more than"),
        ({"settle_timeout": "soon"}, "settle_timeout: expected a number >= 0"),
    ],
    ids=["count-not-int", "rate-not-number", "bad-arrival", "poisson-without-rate", "two-kinds", "no-kind",
         "unknown-kind", "unknown-template", "duplicate-phase", "churn-zero-rate", "missing-trace", "bad-shape",
         "bad-load-kind", "bad-load-target", "bad-template-target", "bad-scale", "phases-not-list", "bad-quantity",
         "empty-memory", "unknown-profile",
         "unknown-priority", "list-of-mapping", "objects-not-list", "object-not-mapping", "object-no-api-version",
         "object-unknown-kind", "object-no-name", "object-cluster-scoped-namespace", "object-twice", "unknown-top",
         "unknown-nested", "not-mapping", "bad-node-cpu",
         "shards-not-int", "zero-zones", "bad-pool", "missing-trace-nodes", "trace-nodes-unknown",
         "schedulers-negative", "schedulers-unknown", "nodes-without-scheduler", "bad-driver", "zero-processes",
         "zero-backlog", "controllers-not-bool", "priorities-not-list", "priority-no-name", "priority-bad-value",
         "priority-unknown-key", "too-many-pending", "settle-not-number"],
)
def test_bad_scenario_names_the_field(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as exc:
        Scenario.from_dict(data)
    assert message in str(exc.value)
