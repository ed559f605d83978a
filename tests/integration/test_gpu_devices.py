"""GPU devices in the kubelet model against a real Redis, on a ManualClock: advertise, Allocate, reject, free.

Pods are created bound (``spec.nodeName``), which skips the store's per-node room check, so
the kubelet's device manager is what stands between two shares and one device. Expected
device ids and messages are derived here from the rules (one device per share, tightest fit,
whole devices distinct), not read back from the implementation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import generate_latest

from emulator.api import errors
from emulator.api.gpu import DEVICE_INDEX_ANNOTATION, GPU_MODEL_LABEL
from emulator.api.kinds import NODE, POD
from emulator.api.quantity import to_int
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.kubelet.shard import KubeletShard, kubelet_shard_config
from emulator.scheduler.scheduler import SchedulerOptions
from emulator.scheduler_host import HostSettings, SchedulerHost
from emulator.server.core import ServerCore
from tests import builders as b
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

GPU_POOL = {"name": "gpu", "count": 1, "capacity": {"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "2"},
            "labels": {GPU_MODEL_LABEL: "T4"}}


@pytest.fixture
def shard(env: tuple[ServerCore, ManualClock]) -> Iterator[KubeletShard]:
    core, clock = env
    started = KubeletShard(core, 0, 1, kubelet_shard_config({}, [GPU_POOL, {**GPU_POOL, "name": "quad", "capacity": {
        **GPU_POOL["capacity"], "nvidia.com/gpu": "4"}}]), clock)
    started.start(timeout=30)
    yield started
    started.stop()


def step(shard: KubeletShard, clock: ManualClock) -> None:
    assert shard.sync(10), "informers did not catch up"
    clock.advance(1.0)
    shard.tick()
    assert shard.sync(10), "informers did not catch up"


def gpu_pod(name: str, node: str, *, milli: int = 0, whole: int = 0, **annotations: str) -> Obj:
    container = b.container(cpu="1", memory="1Gi")
    extended = {"alibabacloud.com/gpu-milli": str(milli)} if milli else {"nvidia.com/gpu": str(whole)}
    container["resources"]["requests"].update(extended)
    container["resources"]["limits"] = dict(extended)  # extended resources: limits must equal requests
    body = b.pod(name, containers=[container], node=node)
    body["metadata"]["annotations"] = {"kemu.io/startup-delay": "0s", **annotations}
    return body


def get(core: ServerCore, name: str) -> Obj | None:
    try:
        return core.get(POD, "default", name)
    except errors.StatusError as e:
        if e.code == 404:
            return None
        raise


def status(core: ServerCore, name: str) -> dict[str, Any]:
    return (get(core, name) or {}).get("status") or {}


def devices(core: ServerCore, name: str) -> str | None:
    return ((get(core, name) or {}).get("metadata") or {}).get("annotations", {}).get(DEVICE_INDEX_ANNOTATION)


def settle(core: ServerCore, shard: KubeletShard, clock: ManualClock, names: list[str], limit: int = 30) -> None:
    """Step until every pod is Running or Failed."""
    for _ in range(limit):
        if all(status(core, n).get("phase") in ("Running", "Failed") for n in names):
            return
        step(shard, clock)
    raise AssertionError({n: status(core, n).get("phase") for n in names})


def test_the_device_plugin_advertises_the_sharing_resource(env: tuple[ServerCore, ManualClock],
                                                           shard: KubeletShard) -> None:
    core, clock = env
    step(shard, clock)
    node = core.get(NODE, None, "gpu-00000")
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "2"
    assert node["status"]["capacity"]["alibabacloud.com/gpu-milli"] == "2000"  # 1000 per device
    assert to_int(node["status"]["allocatable"]["alibabacloud.com/gpu-milli"]) == 2000  # canonical form "2k"


def test_shares_get_one_device_each_and_a_pod_no_device_can_hold_is_rejected(
        env: tuple[ServerCore, ManualClock], shard: KubeletShard) -> None:
    core, clock = env
    step(shard, clock)
    core.create(POD, gpu_pod("a", "gpu-00000", milli=600))
    core.create(POD, gpu_pod("b", "gpu-00000", milli=600))
    settle(core, shard, clock, ["a", "b"])
    assert status(core, "a")["phase"] == status(core, "b")["phase"] == "Running"
    # Two 600s never share a device: one each, recorded on the pods by the device manager.
    assert sorted([devices(core, "a"), devices(core, "b")]) == ["0", "1"]

    # 800 milli-GPU are free on the node (2000 - 1200) but 400 on each device: a 500 share cannot run.
    core.create(POD, gpu_pod("c", "gpu-00000", milli=500))
    settle(core, shard, clock, ["c"])
    rejected = status(core, "c")
    assert rejected["phase"] == "Failed" and rejected["reason"] == "UnexpectedAdmissionError"
    assert rejected["message"] == ("Pod was rejected: Allocate failed due to requested number of devices "
                                   "unavailable for alibabacloud.com/gpu-milli. Requested: 500, Available: 400, "
                                   "which is unexpected")

    # Deleting a pod frees its share: a 500 now runs on the device "a" held.
    held = devices(core, "a")
    core.delete(POD, "default", "a", grace_period_seconds=0)
    for _ in range(10):
        if get(core, "a") is None:
            break
        step(shard, clock)
    assert get(core, "a") is None
    core.create(POD, gpu_pod("d", "gpu-00000", milli=500))
    settle(core, shard, clock, ["d"])
    assert status(core, "d")["phase"] == "Running" and devices(core, "d") == held


def test_whole_device_pods_get_distinct_devices_and_the_scheduler_choice_is_honoured(
        env: tuple[ServerCore, ManualClock], shard: KubeletShard) -> None:
    core, clock = env
    step(shard, clock)
    # The scheduler chose device 3 for this share (its gpu-index annotation): the device manager honours it.
    core.create(POD, gpu_pod("share", "quad-00000", milli=300, **{DEVICE_INDEX_ANNOTATION: "3"}))
    settle(core, shard, clock, ["share"])
    assert devices(core, "share") == "3"
    core.create(POD, gpu_pod("w1", "quad-00000", whole=2))
    settle(core, shard, clock, ["w1"])
    core.create(POD, gpu_pod("w2", "quad-00000", whole=2))
    settle(core, shard, clock, ["w2"])
    # Whole devices are the fully free ones: w1 takes 0-1; w2 finds only device 2 fully free.
    assert devices(core, "w1") == "0-1"
    assert status(core, "w2")["reason"] == "UnexpectedAdmissionError"
    assert "unavailable for nvidia.com/gpu. Requested: 2, Available: 1" in status(core, "w2")["message"]


# quad-00000 runs a 300 share on device 0; a 2-GPU pod arrives with the scheduler's choice (or none).
# Rule (upstream Allocate with the sharing plugin's annotation): the named devices when they are as many
# as asked and each fully free, else the lowest-indexed fully free devices (1 and 2).
WHOLE_ANNOTATION_CASES = [
    ("1-3", "1-3"),   # the policy's choice, not the lowest free IDs
    ("2-3", "2-3"),
    ("0-2", "1-2"),   # device 0 is shared: not fully free, the default
    ("3", "1-2"),     # one device named for two GPUs: the default
    ("", "1-2"),      # no choice (a scheduler without a GPU policy): the default, recorded on the pod
]


@pytest.mark.parametrize(("annotation", "expected"), WHOLE_ANNOTATION_CASES,
                         ids=[f"{a or 'none'}->{e}" for a, e in WHOLE_ANNOTATION_CASES])
def test_whole_gpus_get_the_devices_the_scheduler_chose(env: tuple[ServerCore, ManualClock], shard: KubeletShard,
                                                        annotation: str, expected: str) -> None:
    core, clock = env
    step(shard, clock)
    core.create(POD, gpu_pod("resident", "quad-00000", milli=300, **{DEVICE_INDEX_ANNOTATION: "0"}))
    settle(core, shard, clock, ["resident"])
    chosen = {DEVICE_INDEX_ANNOTATION: annotation} if annotation else {}
    core.create(POD, gpu_pod("whole", "quad-00000", whole=2, **chosen))
    settle(core, shard, clock, ["whole"])
    assert status(core, "whole")["phase"] == "Running"
    wait_for(lambda: devices(core, "whole") == expected, 10, "the device manager to record the devices")
    assert shard.admission.devices.pod_devices("quad-00000", get(core, "whole")["metadata"]["uid"]) == \
        tuple(int(d) for d in expected.split("-"))


def test_a_pod_whose_gpu_spec_names_another_model_is_rejected(env: tuple[ServerCore, ManualClock],
                                                              shard: KubeletShard) -> None:
    core, clock = env
    step(shard, clock)
    core.create(POD, gpu_pod("v100-only", "gpu-00000", milli=200, **{GPU_MODEL_LABEL: "V100M16|V100M32"}))
    settle(core, shard, clock, ["v100-only"])
    assert status(core, "v100-only")["reason"] == "UnexpectedAdmissionError"
    assert "GPU model T4 is not one of V100M16|V100M32" in status(core, "v100-only")["message"]


def test_dcgm_style_series_per_device(env: tuple[ServerCore, ManualClock], shard: KubeletShard) -> None:
    core, clock = env
    step(shard, clock)
    core.create(POD, gpu_pod("s", "gpu-00000", milli=300, **{DEVICE_INDEX_ANNOTATION: "1"}))
    settle(core, shard, clock, ["s"])
    rows = {(node, index): row for node, index, *row in shard.metrics.devices()}
    assert sorted(rows) == [("gpu-00000", 0), ("gpu-00000", 1), *((("quad-00000", i)) for i in range(4))]
    uuid, model, util, memory, milli = rows[("gpu-00000", 1)]
    # A 300 milli share: 30 % of the device's time and of a T4's 15109 MiB.
    assert (model, util, memory, milli) == ("T4", 30.0, 15109 * 300 / 1000, 300)
    assert uuid.startswith("GPU-") and uuid != rows[("gpu-00000", 0)][0]
    assert rows[("gpu-00000", 0)][2:] == [0.0, 0.0, 0]
    text = generate_latest().decode()
    assert f'DCGM_FI_DEV_GPU_UTIL{{Hostname="gpu-00000",UUID="{uuid}",gpu="1",modelName="T4",shard="0"}} 30.0' \
        in text


# ------------------------------------------------------------------------- the scheduler records its choice

GPU_PACKING_CONFIG = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                      "profiles": [{"plugins": {"multiPoint": {"enabled": [{"name": "GPUShare"},
                                                                           {"name": "GPUPacking", "weight": 5}]}}}]}


@pytest.fixture
def scheduler(redis_url: str) -> Iterator[SchedulerHost]:
    host = SchedulerHost(HostSettings(redis_url, config=GPU_PACKING_CONFIG), [SchedulerOptions(seed=0)])
    host.start(sync_timeout=30)
    yield host
    host.stop()


def test_the_scheduler_binds_with_the_device_its_policy_chose_and_the_kubelet_honours_it(
        env: tuple[ServerCore, ManualClock], shard: KubeletShard, scheduler: SchedulerHost) -> None:
    core, clock = env
    step(shard, clock)
    # quad-00000 runs a 300 share on device 2; the pod to schedule may only go there (nodeSelector).
    core.create(POD, gpu_pod("resident", "quad-00000", milli=300, **{DEVICE_INDEX_ANNOTATION: "2"}))
    settle(core, shard, clock, ["resident"])
    pending = gpu_pod("packed", "", milli=500)
    pending["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "quad-00000"}
    core.create(POD, pending)
    wait_for(lambda: (get(core, "packed") or {}).get("spec", {}).get("nodeName") == "quad-00000", 20,
             "the scheduler to bind the pod")
    # One feasible node, so scoring is skipped; Reserve asks GPUPacking, which picks the partly used device.
    assert devices(core, "packed") == "2"
    settle(core, shard, clock, ["packed"])
    assert status(core, "packed")["phase"] == "Running" and devices(core, "packed") == "2"
