"""The Cluster Autoscaler's pure parts: expanders through their Strategy interface, the binpacking estimator,
and configuration errors that name the field. Expected choices are worked out by hand in each table row."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from emulator import cli
from emulator.api.gotime import parse_go_duration
from emulator.api.types import Obj
from emulator.cloud.nodegroups import NodeGroupConfigError, parse_node_groups
from emulator.clusterautoscaler.cloudprovider import NodeGroup, ProviderInstance
from emulator.clusterautoscaler.cloudprovider.kemu import _default_allocatable
from emulator.clusterautoscaler.config import AutoscalingOptions, OptionsError
from emulator.clusterautoscaler.estimator.binpacking import BinpackingEstimator
from emulator.clusterautoscaler.expander import Option, build
from emulator.clusterautoscaler.expander.priority import parse_priorities
from emulator.clusterautoscaler.simulator.scheduling import PodSimulator
from emulator.config import Config, ConfigError
from emulator.kubelet.nodes import INSTANCE_TYPES
from emulator.scheduler.framework.types import PodInfo
from loadgen import plan as planning
from loadgen.nodegroups import summarize
from loadgen.runner import cluster_config
from loadgen.scenario import Scenario, ScenarioError
from tests import builders as b


class Group(NodeGroup):
    """A node group as the expanders see it: an id and a price (sizes do not matter to them)."""

    def __init__(self, name: str, price: float = 0.0) -> None:
        self.name = name
        self.price = price

    def id(self) -> str:
        return self.name

    def min_size(self) -> int:
        return 0

    def max_size(self) -> int:
        return 100

    def target_size(self) -> int:
        return 0

    def increase_size(self, delta: int) -> None:
        raise NotImplementedError

    def delete_nodes(self, names: Sequence[str]) -> None:
        raise NotImplementedError

    def nodes(self) -> list[ProviderInstance]:
        return []

    def template_node_info(self) -> Obj:
        return {}

    def price_per_hour(self) -> float:
        return self.price


def template(instance_type: str) -> Obj:
    return {"metadata": {"name": f"t-{instance_type}"}, "status": {"capacity": dict(INSTANCE_TYPES[instance_type])}}


def pods(n: int, cpu: str, memory: str) -> list[PodInfo]:
    return [PodInfo(b.pod(f"p{i}", containers=[b.container(cpu=cpu, memory=memory)])) for i in range(n)]


def option(name: str, instance_type: str, nodes: int, n_pods: int, price: float = 0.0) -> Option:
    return Option(Group(name, price), nodes, pods(n_pods, "1", "2Gi"), template(instance_type))


# Three pods of 1 cpu / 2Gi each, on three shapes:
#   general: 2 x m5.large (2 cpu, 8Gi):  cpu (4-3)/4 = 0.25, memory (16-6)/16 = 0.625 -> 0.875
#   compute: 1 x c5.xlarge (4 cpu, 8Gi): cpu (4-3)/4 = 0.25, memory (8-6)/8   = 0.25  -> 0.5
#   memory:  1 x m5.xlarge (4 cpu, 16Gi): cpu 0.25,          memory (16-6)/16 = 0.625 -> 0.875
# Prices per hour: general 2 x 0.096 = 0.192, compute 0.17, memory 0.192 (per pod: / 3).
OPTIONS = [("general", "m5.large", 2, 0.096), ("compute", "c5.xlarge", 1, 0.17), ("memory", "m5.xlarge", 1, 0.192)]


def options() -> list[Option]:
    return [option(name, itype, nodes, 3, price) for name, itype, nodes, price in OPTIONS]


@pytest.mark.parametrize(("expander", "priorities", "expected"), [
    ("least-waste", None, {"compute"}),
    ("price", None, {"compute"}),
    ("most-pods", None, {"general", "compute", "memory"}),
    ("priority", {10: [".*"], 50: ["^general$"]}, {"general"}),
    ("priority", {10: [".*"], 50: ["^compute", "mem"]}, {"compute", "memory"}),
    ("priority", {5: ["^gpu-.*"]}, {"general", "compute", "memory"}),
    ("priority", None, {"general", "compute", "memory"}),
], ids=["least-waste", "price", "most-pods-tie", "priority-top", "priority-two-match", "priority-no-match",
        "priority-no-configmap"])
def test_expander_best_options(expander: str, priorities: dict[int, list[str]] | None, expected: set[str]) -> None:
    chain = build([expander], priorities=lambda: priorities)
    assert {o.id for o in chain.strategies[0].best_options(options())} == expected


def test_least_waste_keeps_ties_and_chain_breaks_them() -> None:
    tie = [option("a", "m5.xlarge", 1, 3), option("b", "m5.xlarge", 1, 3)]
    chain = build(["least-waste"])
    assert {o.id for o in chain.strategies[0].best_options(tie)} == {"a", "b"}
    assert chain.best_option(tie) in tie
    # priority first, least-waste among what it left: general vs memory tie on priority, memory wastes the same
    # as general (0.875 both), so both stay and the chain picks one of them.
    chained = build(["priority", "least-waste"], priorities=lambda: {10: ["general", "memory"]})
    assert chained.best_option(options()).id in {"general", "memory"}


def test_priority_configmap_parsing() -> None:
    cm = {"data": {"priorities": "10:\n  - .*-spot-.*\n50:\n  - ^on-demand$\n"}}
    assert parse_priorities(cm) == {10: [".*-spot-.*"], 50: ["^on-demand$"]}
    assert parse_priorities({"data": {"priorities": "not: [a, map"}}) is None
    assert parse_priorities(None) is None


# ---------------------------------------------------------------------------------------- estimator

M5_XL = _default_allocatable(INSTANCE_TYPES["m5.xlarge"])  # 4 cpu, 16Gi - 100Mi, 110 pods


def xl_template() -> Obj:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "tmpl", "labels": {}},
            "spec": {}, "status": {"capacity": dict(INSTANCE_TYPES["m5.xlarge"]), "allocatable": dict(M5_XL)}}


def sized(cpus: list[str], *, port: int | None = None) -> list[PodInfo]:
    out = []
    for i, cpu in enumerate(cpus):
        c = b.container(cpu=cpu, memory="1Gi")
        if port is not None:
            c["ports"] = [{"containerPort": port, "hostPort": port, "protocol": "TCP"}]
        out.append(PodInfo(b.pod(f"p{i}", containers=[c])))
    return out


@pytest.mark.parametrize(("cpus", "port", "limit", "nodes", "placed"), [
    (["1"] * 20, None, 100, 5, 20),            # 4 one-cpu pods per 4-cpu node: 20 / 4
    (["3", "1", "3", "1"], None, 100, 2, 4),   # largest first: 3+1 and 3+1
    (["3", "3", "3"], None, 100, 3, 3),        # no two 3-cpu pods share a node
    (["1"] * 20, None, 2, 2, 8),               # capped at 2 nodes: 8 pods placed
    (["500m"] * 5, 8080, 100, 5, 5),           # one hostPort 8080 per node (NodePorts plugin)
    (["5"], None, 100, 0, 0),                  # fits no empty node
], ids=["uniform", "first-fit-decreasing", "no-sharing", "limit", "host-port", "too-big"])
def test_binpacking_estimate(cpus: list[str], port: int | None, limit: int, nodes: int, placed: int) -> None:
    estimate = BinpackingEstimator(PodSimulator()).estimate(sized(cpus, port=port), xl_template(), limit)
    assert (estimate.node_count, len(estimate.pods)) == (nodes, placed)


# ------------------------------------------------------------------------------------ configuration


@pytest.mark.parametrize(("groups", "message"), [
    ([{"name": "a", "min": 5, "max": 3}], "node_groups[0].min (5) must not be greater than max (3)"),
    ([{"name": "a", "max": 3}, {"name": "a", "max": 2}], "node_groups[1].name: 'a' is used twice"),
    ([{"name": "a", "max": 3, "failure_probability": 2}], "node_groups[0].failure_probability (2.0) must be"),
    ([{"name": "a", "max": 3, "provisioning_delay": "soon"}], "node_groups[0].provisioning_delay: 'soon' is not"),
    ([{"name": "a", "max": 3, "instance_type": "z9.huge"}], "node_groups[0].instance_type: unknown 'z9.huge'"),
    ([{"max": 3}], "node_groups[0].name is required"),
    ([{"name": "a", "max": 3, "colour": "red"}], "node_groups[0]: unknown key(s) colour"),
], ids=["min-over-max", "duplicate", "probability", "delay", "instance-type", "no-name", "unknown-key"])
def test_bad_node_groups_name_the_field(groups: list[dict[str, object]], message: str) -> None:
    with pytest.raises(NodeGroupConfigError) as err:
        parse_node_groups(groups)
    assert message in str(err.value)
    with pytest.raises(ConfigError) as cfg_err:  # kemu up's config loading stops with the same message
        Config.from_dict({"node_groups": groups})
    assert message in str(cfg_err.value)


@pytest.mark.parametrize(("flags", "message"), [
    ({"expander": "cheapest"}, "cluster_autoscaler.expander: unknown expander 'cheapest'; known: least-waste"),
    ({"expander": "priority,bogus"}, "unknown expander 'bogus'"),
    ({"scan-interval": "fast"}, "cluster_autoscaler.scan-interval: 'fast' is not a duration"),
    ({"scale-down-utilization-threshold": 1.5}, "cluster_autoscaler.scale-down-utilization-threshold (1.5)"),
    ({"scale-down-unneded-time": "10m"}, "cluster_autoscaler: unknown flag 'scale-down-unneded-time'"),
    ({"cores-total": "10:5"}, "cluster_autoscaler.cores-total: min (10) must not be greater than max (5)"),
], ids=["unknown-expander", "unknown-in-chain", "bad-duration", "threshold", "typo", "cores"])
def test_bad_autoscaler_flags_name_the_flag(flags: dict[str, object], message: str) -> None:
    with pytest.raises(OptionsError) as err:
        AutoscalingOptions.from_dict(flags)
    assert message in str(err.value)
    with pytest.raises(ConfigError) as cfg_err:
        Config.from_dict({"cluster_autoscaler": flags})
    assert message in str(cfg_err.value)


def test_flags_take_upstream_names_and_go_durations() -> None:
    o = AutoscalingOptions.from_dict({"scan-interval": "15s", "scale-down-unneeded-time": "1h30m",
                                      "expander": "priority,least-waste", "balance_similar_node_groups": "true",
                                      "memory-total": "0:64", "max-nodes-total": 30})
    assert (o.scan_interval, o.scale_down_unneeded_time, o.expander) == (15.0, 5400.0, ("priority", "least-waste"))
    assert o.balance_similar_node_groups is True and o.memory_total == (0, 64 * 1024**3) and o.max_nodes_total == 30
    defaults = AutoscalingOptions()
    assert (defaults.scale_down_utilization_threshold, defaults.scale_down_unneeded_time,
            defaults.scale_down_delay_after_add, defaults.scale_down_delay_after_failure,
            defaults.max_node_provision_time, defaults.expendable_pods_priority_cutoff) == \
        (0.5, 600, 600, 180, 900, -10)


@pytest.mark.parametrize(("text", "seconds"), [("10s", 10.0), ("1h30m", 5400.0), ("500ms", 0.5), ("0", 0.0),
                                               (90, 90.0), ("1.5m", 90.0)],
                         ids=["s", "h-m", "ms", "zero", "number", "fraction"])
def test_parse_go_duration(text: str | int, seconds: float) -> None:
    assert parse_go_duration(text) == seconds


def test_kemu_up_with_a_bad_node_group_file_stops_with_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KEMU_HOME", str(tmp_path / "home"))  # no cluster recorded there: nothing to refuse
    path = tmp_path / "groups.yaml"
    path.write_text("node_groups:\n- {name: web, min: 4, max: 2, instance_type: m5.large}\n")
    assert cli.main(["up", "--node-groups", str(path)]) == 1
    assert "node_groups[0].min (4) must not be greater than max (2)" in capsys.readouterr().err
    path.write_text("- {name: web, min: 0, max: 2, instance_type: m5.large}\n")
    cfg = cli._config(cli.build_parser().parse_args(["up", "--node-groups", str(path)]))
    assert cfg.node_groups == [{"name": "web", "min": 0, "max": 2, "instance_type": "m5.large"}]
    assert cfg.wants_kubelets()


def test_scenarios_declare_node_groups_and_autoscaler_flags() -> None:
    scenario = Scenario.from_dict({"cluster": {"node_groups": [{"name": "web", "max": 5, "price_per_hour": 0.1}],
                                               "cluster_autoscaler": {"expander": "price"}}})
    cfg = cluster_config(Config(), scenario)
    assert cfg.node_groups == [{"name": "web", "max": 5, "price_per_hour": 0.1}]
    assert cfg.cluster_autoscaler == {"expander": "price"}
    assert cfg.schedulers == 1 and cfg.kubelet_shards is None  # kubelets and a scheduler for the groups' nodes
    with pytest.raises(ScenarioError, match=r"cluster\.node_groups\[0\]\.min \(6\) must not be greater than max"):
        Scenario.from_dict({"cluster": {"node_groups": [{"name": "web", "min": 6, "max": 5}]}})
    with pytest.raises(ScenarioError, match=r"cluster\.cluster_autoscaler\.expander: unknown expander 'x'"):
        Scenario.from_dict({"cluster": {"cluster_autoscaler": {"expander": "x"}}})


@pytest.mark.parametrize(("samples", "nodes_max", "node_hours", "episodes", "ttc_max"), [
    # 2 nodes for 1800 s then 4 for 1800 s: (2 * 0.5 + 4 * 0.5) = 3 node-hours; pods pending from 0 to 1800.
    ([(0.0, {"g": 2}, 5), (1800.0, {"g": 4}, 0), (3600.0, {"g": 4}, 0)], 4, 3.0, 1, 1800.0),
    # Two pending episodes of 60 s and 120 s.
    ([(0.0, {"g": 1}, 3), (60.0, {"g": 1}, 0), (100.0, {"g": 2}, 2), (220.0, {"g": 2}, 0)], 2,
     (60 + 40 + 2 * 120) / 3600, 2, 120.0),
], ids=["one-episode", "two-episodes"])
def test_autoscaling_summary(samples: list[tuple[float, dict[str, int], int]], nodes_max: int, node_hours: float,
                             episodes: int, ttc_max: float) -> None:
    out = summarize(samples, {"g": 0.5})
    g = out["groups"]["g"]
    assert (g["nodesMax"], g["nodeHours"], g["cost"]) == (nodes_max, round(node_hours, 4),
                                                          round(round(node_hours, 4) * 0.5, 4))
    assert (out["timeToCapacitySeconds"]["episodes"], out["timeToCapacitySeconds"]["max"]) == (episodes, ttc_max)


def test_deployments_phase_with_an_hpa() -> None:
    scenario = Scenario.from_dict({"templates": {"default": {"cpu": "1"}},
                                   "phases": [{"deployments": {"count": 2, "replicas": 3, "hpa_min": 1,
                                                               "hpa_max": 9, "hpa_cpu": 70}}]})
    deployments = [a.name for a in planning.build(scenario).actions if a.op == planning.CREATE_DEPLOYMENT]
    hpas = [a for a in planning.build(scenario).actions if a.op == planning.CREATE_HPA]
    assert [a.name for a in hpas] == deployments and len(hpas) == 2  # one HPA per Deployment, same name
    spec = hpas[0].body()["spec"]
    assert (spec["minReplicas"], spec["maxReplicas"], spec["scaleTargetRef"]["kind"]) == (1, 9, "Deployment")
    assert spec["metrics"][0]["resource"]["target"] == {"type": "Utilization", "averageUtilization": 70}
