"""Printer columns and request routing of the API server, as pure functions (no Redis, no HTTP)."""

from __future__ import annotations

import pytest

from emulator.api import errors
from emulator.api.kinds import NAMESPACE, POD
from emulator.apiserver import content, printing, routing, tables
from emulator.clock import parse_rfc3339

NOW = parse_rfc3339("2024-05-01T12:00:00Z")


@pytest.mark.parametrize(("seconds", "text"), [
    (-5, "<invalid>"), (-1, "0s"), (0, "0s"), (119, "119s"), (120, "2m"), (125, "2m5s"), (600, "10m"),
    (179 * 60, "179m"), (3 * 3600, "3h"), (3 * 3600 + 120, "3h2m"), (8 * 3600, "8h"), (47 * 3600, "47h"),
    (48 * 3600, "2d"), (50 * 3600, "2d2h"), (8 * 86400, "8d"), (800 * 86400, "2y70d"), (9 * 365 * 86400, "9y"),
])
def test_human_duration_matches_upstream(seconds: int, text: str) -> None:
    assert printing.human_duration(seconds) == text


def pod(**status: object) -> dict:
    return {"metadata": {"name": "p", "namespace": "default", "creationTimestamp": "2024-05-01T11:59:00Z"},
            "spec": {"containers": [{"name": "a"}, {"name": "b"}]}, "status": {"phase": "Pending", **status}}


def cells(obj: dict) -> list:
    return tables.POD_PRINTER.cells(obj, NOW)


def test_pod_status_follows_kubectl_rules() -> None:
    assert cells(pod())[:5] == ["p", "0/2", "Pending", "0", "60s"]
    waiting = {"name": "a", "state": {"waiting": {"reason": "CrashLoopBackOff"}}, "restartCount": 3,
               "lastState": {"terminated": {"finishedAt": "2024-05-01T11:58:00Z"}}}
    running = {"name": "b", "ready": True, "state": {"running": {}}, "restartCount": 0}
    row = cells(pod(phase="Running", containerStatuses=[waiting, running]))
    assert row[1:4] == ["1/2", "CrashLoopBackOff", "3 (2m ago)"]
    done = {"name": "a", "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
    assert cells(pod(phase="Succeeded", containerStatuses=[done]))[2] == "Completed"
    init = pod(initContainerStatuses=[{"name": "i", "state": {"waiting": {"reason": "PodInitializing"}}}])
    init["spec"]["initContainers"] = [{"name": "i"}]
    assert cells(init)[2] == "Init:0/1"
    gated = pod(conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}])
    assert cells(gated)[2] == "SchedulingGated"
    deleting = pod(phase="Running")
    deleting["metadata"]["deletionTimestamp"] = "2024-05-01T12:00:30Z"
    assert cells(deleting)[2] == "Terminating"
    assert cells(pod(reason="Evicted", phase="Failed"))[2] == "Evicted"


def test_completed_pods_carry_the_completed_row_condition() -> None:
    table = tables.table(tables.POD_PRINTER, [pod(phase="Succeeded")], NOW)
    assert table["rows"][0]["conditions"][0]["type"] == "Completed"
    assert table["rows"][0]["object"] == {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                          "metadata": pod()["metadata"]}


def test_event_cells_prefer_series_and_name_the_target() -> None:
    event = {"metadata": {"name": "e"}, "type": "Warning", "reason": "FailedScheduling",
             "involvedObject": {"kind": "Pod", "name": "p"}, "message": " 0/3 nodes are available. ",
             "eventTime": "2024-05-01T11:00:00Z", "series": {"count": 7, "lastObservedTime": "2024-05-01T11:59:30Z"},
             "reportingComponent": "default-scheduler"}
    row = tables.PRINTERS["events"].cells(event, NOW)
    assert row == ["30s", "Warning", "FailedScheduling", "pod/p", "", "default-scheduler", "0/3 nodes are available.",
                   "60m", 7, "e"]


def test_routing_resolves_kinds_from_the_registry() -> None:
    info = routing.parse("GET", "/api/v1/namespaces/ns1/pods/p/status", None)
    assert (info.verb, info.namespace, info.name, info.subresource, info.kind) == ("get", "ns1", "p", "status", POD)
    assert routing.parse("GET", "/api/v1/pods", "true").verb == "watch"
    assert routing.parse("GET", "/api/v1/watch/namespaces/ns1/pods", None).verb == "watch"
    ns = routing.parse("PUT", "/api/v1/namespaces/ns1/status", None)
    assert (ns.kind, ns.name, ns.subresource, ns.namespace) == (NAMESPACE, "ns1", "status", None)
    assert routing.parse("DELETE", "/apis/apps/v1/namespaces/x/deployments", None).verb == "deletecollection"
    # pods/exec is routed now (answered "not emulated", emulator.apiserver.reviews); an unknown subresource is not.
    for bad in ("/api/v2/pods", "/apis/apps/v1/nodes", "/api/v1/namespaces/x/nodes", "/api/v1/pods/p/ephemeral"):
        with pytest.raises(errors.StatusError) as exc:
            routing.parse("GET", bad, None)
        assert exc.value.code == 404


def test_accept_negotiation() -> None:
    table = content.negotiate("application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
    assert table.table and table.version == "v1"
    assert not content.negotiate("application/vnd.kubernetes.protobuf,application/json").table
    assert content.negotiate("application/json;as=APIGroupDiscoveryList;v=v2;g=apidiscovery.k8s.io,"
                             "application/json") == content.PLAIN_JSON  # only discovery endpoints answer that
    with pytest.raises(errors.StatusError) as exc:
        content.negotiate("application/vnd.kubernetes.protobuf")
    assert exc.value.code == 406
