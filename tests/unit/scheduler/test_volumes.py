"""VolumeZone and VolumeBinding tables (zonal PVs, WaitForFirstConsumer claims), the framework placing a claim-backed
pod, and the PersistentVolume / PersistentVolumeClaim / StorageClass kinds with their defaults and validation."""

from __future__ import annotations

import random
from typing import Any

import pytest

from emulator.api import kinds
from emulator.api.errors import StatusError
from emulator.scheduler import in_tree_registry
from emulator.scheduler.framework.interface import Code, CycleState, is_success
from emulator.scheduler.framework.runtime import Framework
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import FitError, PodInfo, ScheduleResult
from emulator.scheduler.plugins import volume_binding as vb
from emulator.scheduler.plugins import volume_zone as vz
from emulator.scheduler.plugins.listers import StaticLister
from emulator.server.defaults import apply_defaults
from emulator.server.validation import validate
from tests.builders import (
    claim_volume,
    persistent_volume,
    persistent_volume_claim,
    pod,
    sched_node,
    storage_class,
)
from tests.unit.scheduler.util import prepare, run_filter

ZONE = "topology.kubernetes.io/zone"
BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
NODES = [sched_node("n1", labels={HOST: "n1", ZONE: "a"}), sched_node("n2", labels={HOST: "n2", ZONE: "b"}),
         sched_node("n3", labels={HOST: "n3", ZONE: "a"}), sched_node("n4", labels={HOST: "n4"})]
NO_ZONE = vz.ERR_REASON_CONFLICT
AFFINITY = vb.ERR_REASON_NODE_CONFLICT
NO_PV = vb.ERR_REASON_BIND_CONFLICT


def claiming(*claims: str, name: str = "p") -> dict[str, Any]:
    return pod(name, volumes=[claim_volume(f"v{i}", c) for i, c in enumerate(claims)])


def reasons(statuses: list[Any]) -> list[tuple[str, ...] | None]:
    return [None if is_success(s) else tuple(s.reasons) for s in statuses]


# -- VolumeZone -------------------------------------------------------------------------------------------------


def zone_pv(name: str, labels: dict[str, str]) -> dict[str, Any]:
    return persistent_volume(name, labels=labels, claim=("default", "data"), phase="Bound")


ZONE_CASES = [
    ("zone a", [zone_pv("pv", {ZONE: "a"})], [None, (NO_ZONE,), None, None]),
    ("several zones", [zone_pv("pv", {ZONE: "a__b"})], [None, None, None, None]),
    ("beta label judged by the node's GA label", [zone_pv("pv", {BETA_ZONE: "b"})],
     [(NO_ZONE,), None, (NO_ZONE,), None]),
    ("a region the nodes lack", [zone_pv("pv", {"topology.kubernetes.io/region": "r1"})],
     [(NO_ZONE,), (NO_ZONE,), (NO_ZONE,), None]),
]


@pytest.mark.parametrize(("objects", "expected"), [c[1:] for c in ZONE_CASES], ids=[c[0] for c in ZONE_CASES])
def test_volume_zone(objects, expected):
    listers = StaticLister.from_objects([persistent_volume_claim("data", volume="pv"), *objects])
    statuses = run_filter(vz.new(listers=listers), claiming("data"), Snapshot.build(NODES))
    assert reasons(statuses) == expected
    assert all(s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE for s in statuses if s is not None)


@pytest.mark.parametrize(("objects", "claim", "code", "message"), [
    ([], "data", Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'persistentvolumeclaim "data" not found'),
    ([persistent_volume_claim("data", storage_class="fast"), storage_class("fast", wait=False)], "data",
     Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "PersistentVolume had no name"),
    ([persistent_volume_claim("data", storage_class="wffc"), storage_class("wffc")], "data", Code.SKIP, ""),
    ([persistent_volume_claim("data", volume="gone")], "data", Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
     'persistentvolume "gone" not found'),
    ([persistent_volume_claim("data", storage_class="")], "data", Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
     "PersistentVolumeClaim had no pv name and storageClass name"),
])
def test_volume_zone_pre_filter(objects, claim, code, message):
    _, _, status = prepare(vz.new(listers=StaticLister.from_objects(objects)), claiming(claim), Snapshot.build(NODES))
    assert status is not None and status.code == code and status.message == message


# -- VolumeBinding ----------------------------------------------------------------------------------------------


LOCAL = storage_class("local", provisioner="kubernetes.io/no-provisioner")


def local_pv(name: str, size: str, zone: str, **kwargs: Any) -> dict[str, Any]:
    return persistent_volume(name, size, storage_class="local", node_affinity={ZONE: [zone]}, **kwargs)


BINDING_CASES = [
    ("bound PV with node affinity", [persistent_volume_claim("data", volume="pv"),
                                     persistent_volume("pv", node_affinity={ZONE: ["a"]}, claim=("default", "data"),
                                                       phase="Bound")],
     [None, (AFFINITY,), None, (AFFINITY,)]),
    ("bound to a PV that does not exist", [persistent_volume_claim("data", volume="gone")],
     [(vb.ERR_REASON_PV_NOT_EXIST,)] * 4),
    ("WaitForFirstConsumer: a static PV per zone", [
        persistent_volume_claim("data", "4Gi", storage_class="local"), LOCAL,
        local_pv("pv-a", "5Gi", "a"), local_pv("pv-b", "20Gi", "b")],
     [None, None, None, (NO_PV,)]),
    ("WaitForFirstConsumer: too small, wrong class or taken PVs do not match", [
        persistent_volume_claim("data", "8Gi", storage_class="local"), LOCAL,
        local_pv("small", "5Gi", "a"), persistent_volume("other-class", "50Gi", storage_class="fast"),
        local_pv("taken", "50Gi", "b", claim=("default", "someone-else"))],
     [(NO_PV,)] * 4),
    ("WaitForFirstConsumer: access modes must be offered", [
        persistent_volume_claim("data", "1Gi", storage_class="local", modes=["ReadWriteMany"]), LOCAL,
        local_pv("rwo", "5Gi", "a"), local_pv("rwx", "5Gi", "b", modes=["ReadWriteMany", "ReadWriteOnce"])],
     [(NO_PV,), None, (NO_PV,), (NO_PV,)]),
    ("WaitForFirstConsumer: dynamic provisioning in allowed zones", [
        persistent_volume_claim("data", storage_class="zonal"), storage_class("zonal", zones=["b"])],
     [(NO_PV,), None, (NO_PV,), (NO_PV,)]),
    ("bound and unbound claims both judged", [
        persistent_volume_claim("data", volume="pv"),
        persistent_volume("pv", node_affinity={ZONE: ["a"]}, claim=("default", "data"), phase="Bound"),
        persistent_volume_claim("scratch", storage_class="zonal"), storage_class("zonal", zones=["b"])],
     [(NO_PV,), (AFFINITY,), (NO_PV,), (AFFINITY, NO_PV)]),
]


@pytest.mark.parametrize(("objects", "expected"), [c[1:] for c in BINDING_CASES],
                         ids=[c[0] for c in BINDING_CASES])
def test_volume_binding_filter(objects, expected):
    claims = [o["metadata"]["name"] for o in objects if o["kind"] == "PersistentVolumeClaim"]
    statuses = run_filter_per_node(vb.new(listers=StaticLister.from_objects(objects)), claiming(*claims))
    assert reasons(statuses) == expected
    assert all(s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE for s in statuses if s is not None)


def run_filter_per_node(plugin: vb.VolumeBinding, new: dict[str, Any]) -> list[Any]:
    snapshot = Snapshot.build(NODES)
    state, info, status = prepare(plugin, new, snapshot)
    assert status is None, status
    return [plugin.filter(state, info, snapshot.node_info(i)) for i in range(snapshot.num_nodes)]


def test_smallest_matching_pv_is_chosen_and_reserve_records_the_decision():
    objects = [persistent_volume_claim("data", "4Gi", storage_class="local"), LOCAL,
               local_pv("big", "50Gi", "a"), local_pv("mid", "8Gi", "a"), local_pv("small", "5Gi", "a"),
               local_pv("unavailable", "4Gi", "a", phase="Released")]
    plugin = vb.new(listers=StaticLister.from_objects(objects))
    snapshot = Snapshot.build(NODES)
    state, info, _ = prepare(plugin, claiming("data"), snapshot)
    assert plugin.filter(state, info, snapshot.node_info(0)) is None
    assert plugin.reserve(state, info, "n1") is None
    assert vb.decision(state) == ("n1", vb.PodVolumes(static_bindings=(("small", "default/data"),)))
    assert plugin.pre_bind(state, info, "n1") is None
    plugin.unreserve(state, info, "n1")
    assert vb.decision(state) is None


def test_pre_bound_pv_wins_and_two_claims_do_not_share_a_pv():
    objects = [persistent_volume_claim("a", "1Gi", storage_class="local"),
               persistent_volume_claim("b", "1Gi", storage_class="local"), LOCAL,
               local_pv("small", "1Gi", "a"), local_pv("reserved", "100Gi", "a", claim=("default", "b"))]
    plugin = vb.new(listers=StaticLister.from_objects(objects))
    snapshot = Snapshot.build(NODES)
    state, info, _ = prepare(plugin, claiming("a", "b"), snapshot)
    assert plugin.filter(state, info, snapshot.node_info(0)) is None
    plugin.reserve(state, info, "n1")
    assert vb.decision(state) == ("n1", vb.PodVolumes((("small", "default/a"), ("reserved", "default/b"))))
    # One PV for two claims: the second claim finds none and the class cannot provision.
    lonely = [o for o in objects if o["metadata"]["name"] != "reserved"]
    plugin = vb.new(listers=StaticLister.from_objects(lonely))
    state, info, _ = prepare(plugin, claiming("a", "b"), snapshot)
    assert plugin.filter(state, info, snapshot.node_info(0)).reasons == [NO_PV]


def test_dynamic_provisioning_decision():
    objects = [persistent_volume_claim("data", storage_class="zonal"), storage_class("zonal", zones=["b"])]
    plugin = vb.new(listers=StaticLister.from_objects(objects))
    snapshot = Snapshot.build(NODES)
    state, info, _ = prepare(plugin, claiming("data"), snapshot)
    assert plugin.filter(state, info, snapshot.node_info(1)) is None
    plugin.reserve(state, info, "n2")
    assert vb.decision(state) == ("n2", vb.PodVolumes(dynamic_provisions=("default/data",)))


@pytest.mark.parametrize(("objects", "volumes", "code", "message"), [
    ([], [claim_volume("v", "data")], Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'persistentvolumeclaim "data" not found'),
    ([], [{"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}}], Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
     'waiting for ephemeral volume controller to create the persistentvolumeclaim "p-scratch"'),
    ([persistent_volume_claim("data", storage_class="fast"), storage_class("fast", wait=False)],
     [claim_volume("v", "data")], Code.UNSCHEDULABLE_AND_UNRESOLVABLE, vb.ERR_UNBOUND_IMMEDIATE),
    ([], [{"name": "cfg", "configMap": {"name": "x"}}], Code.SKIP, ""),
])
def test_volume_binding_pre_filter(objects, volumes, code, message):
    _, _, status = prepare(vb.new(listers=StaticLister.from_objects(objects)), pod("p", volumes=volumes),
                           Snapshot.build(NODES))
    assert status is not None and status.code == code and status.message == message


def test_local_pv_narrows_the_nodes_in_pre_filter():
    objects = [persistent_volume_claim("data", volume="local-n3"),
               persistent_volume("local-n3", node_affinity={HOST: ["n3"]}, claim=("default", "data"), phase="Bound")]
    result, status = vb.new(listers=StaticLister.from_objects(objects)).pre_filter(
        CycleState(), PodInfo.of(claiming("data")), Snapshot.build(NODES))
    assert status is None and result is not None and result.node_names == {"n3"}


def framework(objects: list[dict[str, Any]]) -> Framework:
    listers = StaticLister.from_objects(objects)
    registry = in_tree_registry()
    for module in (vb, vz):
        registry.unregister(module.NAME)
        registry.register(module.NAME, lambda args, handle, m=module: m.new(args, handle, listers=listers))
    return Framework(registry, rng=random.Random(0))


def test_framework_places_a_claim_backed_pod_where_its_volume_can_be():
    objects = [persistent_volume_claim("data", "4Gi", storage_class="local"), LOCAL, local_pv("pv-b", "5Gi", "b"),
               persistent_volume_claim("old", volume="zonal-pv"),
               persistent_volume("zonal-pv", labels={ZONE: "b"}, claim=("default", "old"), phase="Bound")]
    fw = framework(objects)
    result = fw.schedule_one(claiming("data"), Snapshot.build(NODES))
    assert isinstance(result, ScheduleResult) and result.node == "n2"
    result = fw.schedule_one(claiming("old"), Snapshot.build(NODES))
    assert isinstance(result, ScheduleResult) and result.node in ("n2", "n4")  # n4 has no zone label at all
    result = fw.schedule_one(claiming("data"), Snapshot.build([NODES[0], NODES[2]]))
    assert isinstance(result, FitError)
    assert str(result).startswith(f"0/2 nodes are available: 2 {NO_PV}.")


# -- kinds, defaults, validation ------------------------------------------------------------------------------------


def test_storage_kinds_are_registered():
    assert kinds.by_resource("persistentvolumes").namespaced is False
    assert kinds.by_resource("persistentvolumes").has_status
    assert kinds.by_resource("persistentvolumeclaims").namespaced is True
    assert kinds.by_resource("persistentvolumeclaims").short_names == ("pvc",)
    sc = kinds.by_api_version_kind("storage.k8s.io/v1", "StorageClass")
    assert (sc.resource, sc.namespaced) == ("storageclasses.storage.k8s.io", False)


def test_defaults():
    pv = persistent_volume("pv")
    for key in ("persistentVolumeReclaimPolicy", "volumeMode"):
        del pv["spec"][key]
    del pv["status"]
    apply_defaults(kinds.by_resource("persistentvolumes"), pv)
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain" and pv["spec"]["volumeMode"] == "Filesystem"
    assert pv["status"]["phase"] == "Available"
    sc = {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "x"}, "provisioner": "p"}
    apply_defaults(kinds.by_resource("storageclasses.storage.k8s.io"), sc)
    assert (sc["reclaimPolicy"], sc["volumeBindingMode"]) == ("Delete", "Immediate")
    pvc = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "c"}, "spec": {}}
    apply_defaults(kinds.by_resource("persistentvolumeclaims"), pvc)
    assert pvc["spec"]["volumeMode"] == "Filesystem" and pvc["status"]["phase"] == "Pending"


def causes(resource: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[tuple[str, str]]:
    try:
        validate(kinds.by_resource(resource), obj, old)
    except StatusError as exc:
        return [(c.field, c.message) for c in exc.causes]
    return []


def test_validation():
    assert causes("persistentvolumes", persistent_volume("pv", node_affinity={ZONE: ["a"]})) == []
    bad_pv = persistent_volume("pv")
    bad_pv["spec"].update(accessModes=[], capacity={"storage": "0"}, persistentVolumeReclaimPolicy="Keep")
    fields = [f for f, _ in causes("persistentvolumes", bad_pv)]
    assert fields == ["spec.accessModes", "spec.capacity[storage]", "spec.persistentVolumeReclaimPolicy"]
    assert causes("persistentvolumeclaims", persistent_volume_claim("c")) == []
    no_size = persistent_volume_claim("c")
    no_size["spec"]["resources"] = {}
    assert causes("persistentvolumeclaims", no_size) == [("spec.resources[storage]", "Required value")]
    old = persistent_volume_claim("c", storage_class="a")
    assert causes("persistentvolumeclaims", persistent_volume_claim("c", storage_class="a", volume="pv"), old) == []
    assert [f for f, _ in causes("persistentvolumeclaims", persistent_volume_claim("c", storage_class="b"), old)] == [
        "spec"]
    assert causes("storageclasses.storage.k8s.io", storage_class("s", zones=["a"])) == []
    changed_sc = storage_class("s", wait=False)
    assert [f for f, _ in causes("storageclasses.storage.k8s.io", changed_sc, storage_class("s"))] == [
        "volumeBindingMode"]
    no_provisioner = storage_class("s")
    del no_provisioner["provisioner"]
    assert [f for f, _ in causes("storageclasses.storage.k8s.io", no_provisioner)] == ["provisioner"]
