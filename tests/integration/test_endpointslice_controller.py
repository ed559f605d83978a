"""Services, their ClusterIPs and NodePorts, and the EndpointSlice and Endpoints controllers, on a real Redis.

The test plays the kubelet: it gives pods an IP and a Ready condition (or takes it away) by
hand, and checks what the controllers write. Expected slice sizes come from upstream's rule
(at most ``--max-endpoints-per-slice`` = 100 endpoints a slice, filled before a new one).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable

import pytest

from emulator.api import errors
from emulator.api.kinds import ENDPOINTS, ENDPOINTSLICE, NODE, POD, SERVICE
from emulator.api.types import Obj
from emulator.clock import rfc3339
from emulator.controllers.manager import ControllerManager
from emulator.server.core import ServerCore
from emulator.server.services import NODE_PORT_RANGE, SERVICE_CIDR
from tests import builders as b
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

SELECTOR = {"app": "web"}


@pytest.fixture
def manager(start_manager: Callable[..., ControllerManager]) -> ControllerManager:
    return start_manager("endpointslice", "endpoints")


def service(name: str = "web", **spec: object) -> Obj:
    body = b.service(name, SELECTOR)
    body["spec"] = {"selector": SELECTOR, "ports": [{"name": "http", "port": 80, "targetPort": 8080}], **spec}
    return body


def running_pod(core: ServerCore, name: str, ip: str, *, ready: bool = True) -> Obj:
    body = b.pod(name, node="node-a")
    body["metadata"]["labels"] = dict(SELECTOR)
    pod = core.create(POD, body)
    return set_ready(core, pod, ready, ip)


def set_ready(core: ServerCore, pod: Obj, ready: bool, ip: str | None = None) -> Obj:
    now = rfc3339(core.clock.now())
    status = {**pod["status"], "phase": "Running", "podIP": ip or pod["status"]["podIP"],
              "conditions": [{"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": now}]}
    current = core.get(POD, "default", pod["metadata"]["name"])
    return core.update_status(POD, {**current, "status": status})


def slices(core: ServerCore, name: str = "web") -> list[Obj]:
    return core.list(ENDPOINTSLICE, "default", label_selector=f"kubernetes.io/service-name={name}").items


def ready_addresses(core: ServerCore) -> set[str]:
    return {a for s in slices(core) for e in s.get("endpoints") or [] if e["conditions"]["ready"]
            for a in e["addresses"]}


def endpoints_of(core: ServerCore) -> tuple[set[str], set[str]]:
    try:
        ep = core.get(ENDPOINTS, "default", "web")
    except errors.StatusError:
        return set(), set()
    subsets = ep.get("subsets") or []
    return ({a["ip"] for s in subsets for a in s.get("addresses") or []},
            {a["ip"] for s in subsets for a in s.get("notReadyAddresses") or []})


def test_cluster_ips_and_node_ports_are_allocated_once_each(core: ServerCore) -> None:
    network = ipaddress.ip_network(SERVICE_CIDR)
    ips = {core.create(SERVICE, service(f"s{i}"))["spec"]["clusterIP"] for i in range(20)}
    assert len(ips) == 20 and all(ipaddress.ip_address(ip) in network for ip in ips)
    headless = core.create(SERVICE, service("db", clusterIP="None"))
    assert headless["spec"]["clusterIPs"] == ["None"]
    node_port = core.create(SERVICE, service("np", type="NodePort"))
    port = node_port["spec"]["ports"][0]["nodePort"]
    assert NODE_PORT_RANGE[0] <= port <= NODE_PORT_RANGE[1]
    assert node_port["spec"]["ports"][0]["targetPort"] == 8080 and node_port["spec"]["ports"][0]["protocol"] == "TCP"
    taken = next(iter(ips))
    with pytest.raises(errors.StatusError) as e:
        core.create(SERVICE, service("dup", clusterIP=taken))
    assert e.value.code == 422 and "spec.clusterIPs" in e.value.message and "already allocated" in e.value.message
    with pytest.raises(errors.StatusError) as e:
        core.create(SERVICE, service("dupport", type="NodePort", ports=[{"port": 80, "nodePort": port}]))
    assert e.value.code == 422 and "spec.ports[0].nodePort" in e.value.message
    # A replace that leaves the ClusterIP out keeps it; changing it is refused.
    current = core.get(SERVICE, "default", "s0")
    spec = {k: v for k, v in current["spec"].items() if k not in ("clusterIP", "clusterIPs")}
    kept = core.update(SERVICE, {**current, "spec": spec})
    assert kept["spec"]["clusterIP"] == current["spec"]["clusterIP"]
    current = kept
    with pytest.raises(errors.StatusError) as e:
        core.update(SERVICE, {**current, "spec": {**current["spec"], "clusterIP": "10.96.0.99",
                                                   "clusterIPs": ["10.96.0.99"]}})
    assert e.value.code == 422 and "may not change once set" in e.value.message
    # Back to ClusterIP: the NodePort goes with the type that needed it (dropTypeDependentFields).
    to_cluster_ip = {**node_port, "spec": {**node_port["spec"], "type": "ClusterIP"}}
    to_cluster_ip["spec"].pop("externalTrafficPolicy")
    assert "nodePort" not in core.update(SERVICE, to_cluster_ip)["spec"]["ports"][0]
    # Deleting frees the address for the next Service that asks for it.
    core.delete(SERVICE, "default", "s0")
    again = core.create(SERVICE, service("s0b", clusterIP=current["spec"]["clusterIP"]))
    assert again["spec"]["clusterIP"] == current["spec"]["clusterIP"]


@pytest.mark.parametrize(("body", "field"), [
    (service("1bad"), "metadata.name"),
    (service("noports", ports=[]), "spec.ports"),
    (service("badport", ports=[{"port": 70000}]), "spec.ports[0].port"),
    (service("twoports", ports=[{"port": 80}, {"port": 81}]), "spec.ports[0].name"),
    (service("badtype", type="Magic"), "spec.type"),
    (service("ext", type="ExternalName"), "spec.externalName"),
    (service("cipnp", ports=[{"port": 80, "nodePort": 30001}]), "spec.ports[0].nodePort"),
], ids=["name-not-dns1035", "no-ports", "port-range", "unnamed-ports", "type", "externalname-required",
        "nodeport-on-clusterip"])
def test_bad_services_are_422_naming_the_field(core: ServerCore, body: Obj, field: str) -> None:
    with pytest.raises(errors.StatusError) as e:
        core.create(SERVICE, body)
    assert e.value.code == 422
    assert field in {c.field for c in e.value.causes}


def test_slices_and_endpoints_follow_pod_readiness(core: ServerCore, manager: ControllerManager) -> None:
    core.create(SERVICE, service())
    pods = [running_pod(core, f"web-{i}", f"10.244.0.{i + 10}") for i in range(3)]
    everyone = {f"10.244.0.{i + 10}" for i in range(3)}
    wait_for(lambda: ready_addresses(core) == everyone, 20, "three ready endpoints")
    (only,) = slices(core)
    assert only["addressType"] == "IPv4" and only["ports"] == [{"name": "http", "port": 8080, "protocol": "TCP"}]
    assert only["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"] == "endpointslice-controller.k8s.io"
    assert only["metadata"]["ownerReferences"][0]["kind"] == "Service"
    wait_for(lambda: endpoints_of(core) == (everyone, set()), 20, "Endpoints with three addresses")

    set_ready(core, pods[1], False)
    wait_for(lambda: ready_addresses(core) == everyone - {"10.244.0.11"}, 20, "pod 1 out of the ready endpoints")
    endpoint = next(e for s in slices(core) for e in s["endpoints"] if e["addresses"] == ["10.244.0.11"])
    assert endpoint["conditions"] == {"ready": False, "serving": False, "terminating": False}
    wait_for(lambda: endpoints_of(core) == (everyone - {"10.244.0.11"}, {"10.244.0.11"}), 20,
             "pod 1 among the Endpoints' notReadyAddresses")

    set_ready(core, pods[1], True)
    wait_for(lambda: ready_addresses(core) == everyone, 20, "pod 1 back")
    core.delete(POD, "default", "web-2", grace_period_seconds=0)
    wait_for(lambda: ready_addresses(core) == everyone - {"10.244.0.12"}, 20, "a deleted pod's endpoint gone")
    wait_for(lambda: endpoints_of(core)[0] == everyone - {"10.244.0.12"}, 20, "and gone from the Endpoints")


@pytest.mark.parametrize("pods", [100, 101, 250], ids=["exactly-one-slice", "one-over", "two-and-a-half"])
def test_slices_split_at_100_endpoints(core: ServerCore, manager: ControllerManager, pods: int) -> None:
    for i in range(pods):
        running_pod(core, f"web-{i}", f"10.244.{i // 250}.{i % 250 + 1}")
    # The Service comes once the controller has seen every pod, so one reconcile places them all.
    cached = manager.controllers()["endpointslice"].pods.indexer  # type: ignore[attr-defined]
    wait_for(lambda: sum(1 for p in cached.list() if p["status"].get("podIP")) == pods, 20, "pods in the cache")
    core.create(SERVICE, service())
    expected = [100] * (pods // 100) + ([pods % 100] if pods % 100 else [])  # fill 100, then open another
    wait_for(lambda: sorted((len(s.get("endpoints") or []) for s in slices(core)), reverse=True) == expected, 60,
             f"{pods} endpoints in slices of {expected}")


def test_slices_never_exceed_100_as_pods_arrive(core: ServerCore, manager: ControllerManager) -> None:
    core.create(SERVICE, service())
    for i in range(230):
        running_pod(core, f"web-{i}", f"10.244.0.{i + 1}")
    wait_for(lambda: sum(len(s.get("endpoints") or []) for s in slices(core)) == 230, 60, "230 endpoints")
    assert all(len(s["endpoints"]) <= 100 for s in slices(core))
    assert len(slices(core)) >= 3


def test_service_without_endpoints_has_a_placeholder_and_slices_go_with_it(core: ServerCore,
                                                                           manager: ControllerManager) -> None:
    core.create(SERVICE, service())
    placeholder = wait_for(lambda: slices(core), 20, "the placeholder slice")
    assert placeholder[0].get("endpoints") in (None, []) and placeholder[0].get("ports") in (None, [])
    running_pod(core, "web-0", "10.244.0.10")
    wait_for(lambda: ready_addresses(core) == {"10.244.0.10"} and len(slices(core)) == 1, 20,
             "the placeholder turned into the slice of one endpoint")


def test_endpoints_carry_their_node_and_zone(core: ServerCore, manager: ControllerManager) -> None:
    core.create(NODE, b.node("node-a", labels={"topology.kubernetes.io/zone": "zone-1"}))
    # The zone is read from the controller's node cache when the endpoints are computed (the node and
    # pod streams are delivered separately): the node must be in that cache before the pod arrives.
    nodes = manager.controllers()["endpointslice"].nodes  # type: ignore[attr-defined]
    wait_for(lambda: any(n["metadata"]["name"] == "node-a" for n in nodes.get_store().list()), 20,
             "the controller's node cache to hold node-a")
    core.create(SERVICE, service())
    running_pod(core, "web-0", "10.244.0.10")
    wait_for(lambda: ready_addresses(core) == {"10.244.0.10"}, 20, "the endpoint")
    (endpoint,) = slices(core)[0]["endpoints"]
    assert (endpoint["nodeName"], endpoint["zone"]) == ("node-a", "zone-1")
    assert endpoint["targetRef"]["name"] == "web-0"


def test_deleting_the_service_takes_its_slices_and_endpoints(core: ServerCore,
                                                             start_manager: Callable[..., ControllerManager]) -> None:
    start_manager("endpointslice", "endpoints", "garbagecollector")
    core.create(SERVICE, service())
    running_pod(core, "web-0", "10.244.0.10")
    wait_for(lambda: ready_addresses(core) == {"10.244.0.10"} and endpoints_of(core)[0] == {"10.244.0.10"}, 20,
             "a slice and Endpoints")
    core.delete(SERVICE, "default", "web")
    wait_for(lambda: not slices(core), 20, "the slices collected with their Service (owner reference)")
    wait_for(lambda: "web" not in {e["metadata"]["name"] for e in core.list(ENDPOINTS, "default").items}, 20,
             "the Endpoints deleted by name")
