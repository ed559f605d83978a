"""Kubelet shard configuration and node shapes: pools, allocatable, images, durations (no Redis)."""

from __future__ import annotations

import pytest

from emulator.api.gotime import go_duration, micro_time
from emulator.api.quantity import to_int
from emulator.config import Config, ConfigError
from emulator.kubelet import eviction as ev
from emulator.kubelet import nodes as nd
from emulator.kubelet.shard import KubeletShardConfig, kubelet_shard_config

MI = 1024**2
GI = 1024**3


def test_allocatable_subtracts_reservations_and_hard_eviction_thresholds() -> None:
    thresholds = ev.parse_thresholds({"memory.available": "100Mi", "nodefs.available": "10%"}, hard=True)
    alloc = nd.allocatable({"cpu": "8", "memory": "32Gi", "ephemeral-storage": "100Gi", "pods": "110"},
                           kube_reserved={"cpu": "100m", "memory": "1Gi"}, system_reserved={"cpu": "50m"},
                           eviction_hard=thresholds)
    assert alloc["cpu"] == "7850m"
    assert to_int(alloc["memory"]) == 32 * GI - GI - 100 * MI
    assert to_int(alloc["ephemeral-storage"]) == 100 * GI - int(100 * GI * 0.1)
    assert alloc["pods"] == "110"


def test_pool_nodes_get_names_zones_and_distinct_addresses() -> None:
    pool = nd.NodePool.from_dict({"name": "gpu", "count": 3, "instance_type": "p3.2xlarge", "zones": ["a", "b"]})
    nodes = [nd.new_pool_node(pool, i, o, allocatable_of=dict) for p, i, o in nd.pool_nodes([pool]) if p is pool]
    assert [n["metadata"]["name"] for n in nodes] == ["gpu-00000", "gpu-00001", "gpu-00002"]
    assert [n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes] == ["a", "b", "a"]
    assert nodes[0]["status"]["capacity"]["nvidia.com/gpu"] == "1"
    assert len({n["spec"]["podCIDR"] for n in nodes}) == 3
    ips = [n["status"]["addresses"][0]["address"] for n in nodes]
    assert len(set(ips)) == 3 and not any(ip.endswith((".0", ".255")) for ip in ips)


@pytest.mark.parametrize(("pool", "message"), [
    ({"name": "x", "count": -1}, "count must not be negative"),
    ({"name": "x", "count": 1, "instance_type": "nope"}, "unknown instance_type"),
    ({"name": "x", "count": 1, "taints": [{"key": "k"}]}, "needs a key and an effect"),
    ({"name": "x", "count": 1, "capacity": {"cpu": "lots"}}, "is not a quantity"),
    ({"name": "x", "colour": "red"}, "unknown key(s) colour"),
])
def test_bad_node_pools_are_named(pool: dict, message: str) -> None:
    with pytest.raises(nd.NodeConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        kubelet_shard_config({}, [pool])


def total_nodes(cfg: KubeletShardConfig) -> int:
    """Nodes the pools of ``cfg`` hold."""
    return sum(p.count for p in cfg.pools)


def test_kubelet_settings_mix_shard_and_model_keys() -> None:
    cfg = kubelet_shard_config({"tick-interval": 2, "seed": 7, "eviction_hard": {"memory.available": "200Mi"},
                                "events": "warnings"}, [{"name": "a", "count": 2}, {"name": "b", "count": 3}])
    assert cfg.tick_interval == 2 and cfg.model.seed == 7 and cfg.events == "warnings"
    assert total_nodes(cfg) == 5 and cfg.renew_interval == 10.0
    with pytest.raises(nd.NodeConfigError, match="unknown key"):
        kubelet_shard_config({"tick": 1})
    with pytest.raises(nd.NodeConfigError, match="used twice"):
        kubelet_shard_config({}, [{"name": "a"}, {"name": "a"}])


def test_config_keys_for_kubelets_are_checked() -> None:
    assert not Config.from_dict({}).wants_kubelets()
    assert Config.from_dict({"nodes": 10}).wants_kubelets()
    assert not Config.from_dict({"nodes": 10, "kubelet_shards": 0}).wants_kubelets()
    assert Config.from_dict({"kubelet_shards": 1}).wants_kubelets()  # kubelets for API-created nodes only
    with pytest.raises(ConfigError, match="between 0 and node_shards"):
        Config.from_dict({"nodes": 10, "kubelet_shards": 17})
    with pytest.raises(ConfigError, match="unknown instance_type"):
        Config.from_dict({"nodes": 10, "instance_type": "m9.huge"})
    with pytest.raises(ConfigError, match="node_pools must be a list"):
        Config.from_dict({"node_pools": {"name": "x"}})


def test_images_are_named_as_pods_and_as_the_runtime_write_them() -> None:
    assert nd.normalize_image("nginx") == "nginx:latest"
    assert nd.normalize_image("registry:5000/app") == "registry:5000/app:latest"
    assert nd.qualified_image("nginx:1.27") == "docker.io/library/nginx:1.27"
    assert nd.qualified_image("bitnami/redis") == "docker.io/bitnami/redis:latest"
    assert nd.qualified_image("ghcr.io/org/app:2") == "ghcr.io/org/app:2"
    entry = nd.image_entry("nginx", 123)
    assert entry["sizeBytes"] == 123 and "nginx:latest" in entry["names"]
    assert entry["names"][0].startswith("docker.io/library/nginx@sha256:")


@pytest.mark.parametrize(("seconds", "text"), [
    (0.0, "0s"), (0.2, "200ms"), (1.5, "1.5s"), (10.5, "10.5s"), (65.25, "1m5.25s"), (3600.0, "1h0m0s"),
    (10.5129, "10.512s"),
])
def test_go_duration_matches_time_duration_string(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


def test_micro_time_has_six_fractional_digits() -> None:
    assert micro_time(1_700_000_000.25) == "2023-11-14T22:13:20.250000Z"
