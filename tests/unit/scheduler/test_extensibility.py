"""Extensibility: the GPUBinPack example plugin, custom plugins named in a configuration (registry, entry point,
import path), and a real HTTP scheduler extender on 127.0.0.1 changing placements through the framework."""

from __future__ import annotations

import json
import random
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import metadata
from typing import Any

import numpy as np
import pytest

from emulator.extender_http import HTTPTransport
from emulator.scheduler import in_tree_registry, plugin_api
from emulator.scheduler.extender import (
    ExtenderConfig,
    ExtenderPlugin,
    HTTPExtender,
    parse_duration,
    validate_extenders,
    with_extenders,
)
from emulator.scheduler.framework.interface import Code, CycleState, Status
from emulator.scheduler.framework.profile import PluginRef, PluginSet, Profile
from emulator.scheduler.framework.runtime import Framework
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import FitError, NodeInfo, PodInfo, ScheduleResult, SchedulingError
from emulator.scheduler.plugins import default_preemption as dp
from emulator.scheduler.plugins.examples import gpu_binpack
from tests.builders import req_pod, sched_node
from tests.unit.scheduler.util import run_score

GPU = "nvidia.com/gpu"


# -- GPUBinPack ---------------------------------------------------------------------------------------------------


def gpu_nodes() -> list[dict[str, Any]]:
    return [sched_node("empty", **{GPU: "8"}), sched_node("busy", **{GPU: "8"}), sched_node("full", **{GPU: "8"}),
            sched_node("cpu-only")]


def gpu_pods() -> list[dict[str, Any]]:
    return [req_pod("six", "1", extra={GPU: "6"}, node="busy"), req_pod("eight", "1", extra={GPU: "8"}, node="full")]


def test_gpu_binpack_scores_fewest_free_gpus_highest():
    snapshot = Snapshot.build(gpu_nodes(), gpu_pods())
    plugin = gpu_binpack.new()
    # A 2-GPU pod on the two nodes it fits: free after placement 6 and 0; reversed onto 0..100 by the max (6).
    _, raw = run_score(plugin, req_pod("p", "1", extra={GPU: "2"}), snapshot, nodes=[0, 1], normalize=False)
    assert raw == [6, 0]
    assert run_score(plugin, req_pod("p", "1", extra={GPU: "2"}), snapshot, nodes=[0, 1])[1] == [
        100 - 100 * 6 // 6, 100 - 100 * 0 // 6] == [0, 100]
    # A pod without GPUs prefers nodes without free GPUs: free 8, 2, 0, 0.
    assert run_score(plugin, req_pod("q", "1"), snapshot)[1] == [100 - 100 * f // 8 for f in (8, 2, 0, 0)]
    with pytest.raises(ValueError, match="resourceName"):
        gpu_binpack.new({"resourceName": 5})


def test_gpu_binpack_enabled_by_configuration_changes_the_placement():
    nodes = [sched_node("busy", cpu="16", **{GPU: "8"}), sched_node("empty", cpu="16", **{GPU: "8"})]
    snapshot = Snapshot.build(nodes, [req_pod("six", "8", extra={GPU: "6"}, node="busy")])
    new = req_pod("p", "1", extra={GPU: "2"})
    registry = in_tree_registry()
    default = Framework(registry, rng=random.Random(0)).schedule_one(new, snapshot)
    assert isinstance(default, ScheduleResult) and default.node == "empty"  # LeastAllocated spreads
    config = {"profiles": [{"schedulerName": "gpu-packer", "plugins": {"multiPoint": {"enabled": [
        {"name": "GPUBinPack", "weight": 5}]}}}]}
    plugin_api.resolve_plugins(registry, plugin_api.plugin_names(config))
    profile = Profile.default(registry, scheduler_name="gpu-packer")
    profile.multi_point.enabled.append(PluginRef("GPUBinPack", 5))
    packed = Framework(registry, profile, rng=random.Random(0)).schedule_one(new, snapshot)
    assert isinstance(packed, ScheduleResult) and packed.node == "busy"


# -- custom plugins by import path and entry point -------------------------------------------------------------------


class PreferLastNode:
    """A test plugin built as ``PreferLastNode(args, handle)``: scores nodes by their position (times ``step``)."""

    name = "PreferLastNode"

    def __init__(self, args: Any, handle: Any) -> None:
        self.step = int((args or {}).get("step", 1))

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None]:
        return min(node.index * self.step, 100), None


def test_import_path_plugin_named_in_a_configuration():
    spec = f"{__name__}:PreferLastNode"
    config = {"profiles": [{"plugins": {"score": {"enabled": [{"name": spec, "weight": 50}]}},
                            "pluginConfig": [{"name": spec, "args": {"step": 10}}]}]}
    assert plugin_api.plugin_names(config) == [spec]
    registry = plugin_api.resolve_plugins(in_tree_registry(), plugin_api.plugin_names(config))
    profile = Profile.default(registry, points={"score": PluginSet([PluginRef(spec, 50)])},
                              plugin_config={spec: {"step": 10}})
    fw = Framework(registry, profile, rng=random.Random(0))
    assert fw.plugins[spec].name == spec and fw.plugins[spec].step == 10
    result = fw.schedule_one(req_pod("p"), Snapshot.build([sched_node(f"n{i}") for i in range(4)]))
    assert isinstance(result, ScheduleResult) and result.node == "n3"
    with pytest.raises(ValueError, match="does not exist"):
        plugin_api.resolve_plugins(in_tree_registry(), ["NoSuchPlugin"])
    with pytest.raises(ModuleNotFoundError):
        plugin_api.resolve_plugins(in_tree_registry(), ["no_such_module:Thing"])


def test_entry_point_plugin(monkeypatch):
    entry = metadata.EntryPoint(name="Lasty", value=f"{__name__}:PreferLastNode", group=plugin_api.ENTRY_POINT_GROUP)
    monkeypatch.setattr(plugin_api.metadata, "entry_points",
                        lambda group: [entry] if group == plugin_api.ENTRY_POINT_GROUP else [])
    registry = plugin_api.resolve_plugins(in_tree_registry(), ["GPUBinPack", "Lasty"])
    plugin = registry["Lasty"](None, None)
    assert plugin.name == "Lasty" and isinstance(plugin, PreferLastNode)


# -- a real HTTP extender ------------------------------------------------------------------------------------------


class ExtenderServer:
    """A tiny extender on 127.0.0.1: ``handlers[verb](body) -> (status, answer)``; every request is recorded."""

    def __init__(self) -> None:
        self.handlers: dict[str, Callable[[Any], tuple[int, Any]]] = {}
        self.requests: list[tuple[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                verb = self.path.rsplit("/", 1)[-1]
                server.requests.append((self.path, body))
                status, answer = server.handlers[verb](body)
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/scheduler"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def verbs(self) -> list[str]:
        return [path.rsplit("/", 1)[-1] for path, _ in self.requests]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[ExtenderServer]:
    s = ExtenderServer()
    yield s
    s.close()


@pytest.fixture
def transport() -> Iterator[HTTPTransport]:
    with HTTPTransport() as t:
        yield t


NODES = [sched_node(f"n{i}") for i in range(1, 5)]


def node_names(body: Any) -> list[str]:
    if "NodeNames" in body:
        return list(body["NodeNames"])
    return [n["metadata"]["name"] for n in body["Nodes"]["items"]]


def extended(transport: HTTPTransport, *configs: dict[str, Any], registry: Any = None) -> Framework:
    extenders = [HTTPExtender(ExtenderConfig.from_dict(c), transport) for c in configs]
    reg, profile = with_extenders(registry or in_tree_registry(), Profile.default(registry or in_tree_registry()),
                                  extenders)
    return Framework(reg, profile, rng=random.Random(0))


def test_filter_and_prioritize_change_the_placement(server, transport):
    def filter_(body: Any) -> tuple[int, Any]:
        names = node_names(body)
        keep = [n for n in body["Nodes"]["items"] if n["metadata"]["name"] in ("n3", "n4")]
        return 200, {"Nodes": {"items": keep}, "FailedNodes": {"n1": "n1 is cursed"},
                     "FailedAndUnresolvableNodes": {"n2": "n2 is gone"}, "Error": "" if names else "no nodes"}

    server.handlers = {"filter": filter_,
                       "prioritize": lambda body: (200, [{"Host": "n3", "Score": 2}, {"Host": "n4", "Score": 7}])}
    fw = extended(transport, {"urlPrefix": server.url, "filterVerb": "filter", "prioritizeVerb": "prioritize",
                              "weight": 3})
    snapshot = Snapshot.build(NODES)
    result = fw.schedule_one(req_pod("p", "1"), snapshot)
    assert isinstance(result, ScheduleResult) and result.node == "n4"
    assert server.verbs() == ["filter", "prioritize"]
    _, filter_body = server.requests[0]
    assert filter_body["Pod"]["metadata"]["name"] == "p" and node_names(filter_body) == ["n1", "n2", "n3", "n4"]
    assert node_names(server.requests[1][1]) == ["n3", "n4"]  # only feasible nodes are prioritized
    # The weighted extender score: Score * weight * (100 / MaxExtenderPriority 10).
    state = CycleState()
    feasible = np.asarray([2, 3])
    fw.run_pre_score_plugins(state, PodInfo.of(req_pod("p", "1")), snapshot, feasible)
    scores = fw.run_score_plugins(state, PodInfo.of(req_pod("p", "1")), snapshot, feasible)
    name = f"Extender({server.url})"
    assert scores.plugin_scores[name].tolist() == [2 * 10, 7 * 10] and scores.weights[name] == 3


def test_extender_failures_appear_in_the_fit_error(server, transport):
    server.handlers = {"filter": lambda body: (200, {"Nodes": {"items": []},
                                                     "FailedNodes": {"n1": "n1 is cursed"},
                                                     "FailedAndUnresolvableNodes": {"n2": "n2 is gone"}})}
    fw = extended(transport, {"urlPrefix": server.url, "filterVerb": "filter"})
    result = fw.schedule_one(req_pod("p", "1"), Snapshot.build(NODES))
    assert isinstance(result, FitError)
    dropped = f"node(s) were filtered out by extender {server.url}"
    assert str(result) == (f"0/4 nodes are available: 1 n1 is cursed, 1 n2 is gone, 2 {dropped}. "
                           "preemption: 0/4 nodes are available: 1 No preemption victims found for incoming pod, "
                           "3 Preemption is not helpful for scheduling.")
    statuses = dict(result.diagnosis.node_to_status.items())
    assert statuses["n1"].code == Code.UNSCHEDULABLE and statuses["n2"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    # Nodes dropped without a message have no status upstream: preemption treats them as unresolvable.
    assert statuses["n3"].code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE


def test_node_cache_capable_extender_gets_and_returns_names(server, transport):
    server.handlers = {"filter": lambda body: (200, {"NodeNames": ["n2"]})}
    fw = extended(transport, {"urlPrefix": server.url, "filterVerb": "filter", "nodeCacheCapable": True})
    result = fw.schedule_one(req_pod("p", "1"), Snapshot.build(NODES))
    assert isinstance(result, ScheduleResult) and result.node == "n2"
    _, body = server.requests[0]
    assert body["NodeNames"] == ["n1", "n2", "n3", "n4"] and "Nodes" not in body


def test_extenders_see_only_the_nodes_the_plugins_found_feasible(server, transport):
    """Upstream findNodesThatPassExtenders: a cordoned node and one too small never reach the extender."""
    server.handlers = {"filter": lambda body: (200, {"NodeNames": ["n4"], "FailedNodes": {"n1": "too hot"}})}
    fw = extended(transport, {"urlPrefix": server.url, "filterVerb": "filter", "nodeCacheCapable": True})
    nodes = [sched_node("n1"), sched_node("n2", unschedulable=True), sched_node("n3", cpu="1"), sched_node("n4")]
    result = fw.schedule_one(req_pod("p", "2"), Snapshot.build(nodes))
    assert isinstance(result, ScheduleResult) and result.node == "n4"
    assert node_names(server.requests[0][1]) == ["n1", "n4"]


def test_extenders_see_at_most_num_feasible_nodes_to_find(server, transport):
    # 200 nodes: adaptive percentage 50 - 200 / 125 = 49 -> 98 nodes, raised to minFeasibleNodesToFind 100.
    server.handlers = {"filter": lambda body: (200, {"NodeNames": node_names(body)}),
                       "prioritize": lambda body: (200, [{"Host": n, "Score": 1} for n in node_names(body)])}
    fw = extended(transport, {"urlPrefix": server.url, "filterVerb": "filter", "prioritizeVerb": "prioritize",
                              "weight": 1, "nodeCacheCapable": True})
    result = fw.schedule_one(req_pod("p", "1"), Snapshot.build([sched_node(f"n{i:03d}") for i in range(200)]))
    assert isinstance(result, ScheduleResult)
    assert [len(node_names(body)) for _, body in server.requests] == [100, 100]


def test_extender_errors_fail_the_cycle_unless_ignorable(server, transport):
    server.handlers = {"filter": lambda body: (500, {})}
    config = {"urlPrefix": server.url, "filterVerb": "filter"}
    with pytest.raises(SchedulingError, match=r"failed filter with extender at URL .* code 500"):
        extended(transport, config).schedule_one(req_pod("p", "1"), Snapshot.build(NODES))
    result = extended(transport, {**config, "ignorable": True}).schedule_one(req_pod("p", "1"), Snapshot.build(NODES))
    assert isinstance(result, ScheduleResult)
    server.handlers = {"filter": lambda body: (200, {"Error": "backend down"})}
    with pytest.raises(SchedulingError, match="backend down"):
        extended(transport, config).schedule_one(req_pod("p", "1"), Snapshot.build(NODES))
    server.handlers = {"filter": lambda body: (200, {"NodeNames": ["ghost"]})}
    with pytest.raises(SchedulingError, match='claims a filtered node "ghost"'):
        extended(transport, {**config, "nodeCacheCapable": True}).schedule_one(req_pod("p", "1"), Snapshot.build(NODES))


def test_managed_resources_limit_the_pods_an_extender_sees(server, transport):
    server.handlers = {"filter": lambda body: (200, {"NodeNames": ["n1"]})}
    fw = extended(transport, {"urlPrefix": server.url, "filterVerb": "filter", "nodeCacheCapable": True,
                              "managedResources": [{"name": "example.com/fpga", "ignoredByScheduler": True}]})
    plain = fw.schedule_one(req_pod("plain", "1"), Snapshot.build(NODES))
    assert isinstance(plain, ScheduleResult) and server.requests == []
    # The FPGA pod is the extender's: it decides, and NodeResourcesFit ignores the resource no node offers.
    fpga = fw.schedule_one(req_pod("fpga", "1", extra={"example.com/fpga": "1"}), Snapshot.build(NODES))
    assert isinstance(fpga, ScheduleResult) and fpga.node == "n1" and server.verbs() == ["filter"]
    assert fw.plugins["NodeResourcesFit"].ignored == frozenset({"example.com/fpga"})


def test_bind_verb(server, transport):
    server.handlers = {"bind": lambda body: (200, {"Error": ""})}
    fw = extended(transport, {"urlPrefix": server.url, "bindVerb": "bind"})
    assert [p.name for p in fw.plugins_at("bind")] == [f"Extender({server.url})"]
    pod = req_pod("p", "1")
    pod["metadata"]["uid"] = "uid-p"
    status = fw.run_bind_plugins(CycleState(), PodInfo.of(pod), "n3")
    assert status.code == Code.SUCCESS
    assert server.requests[0][1] == {"PodName": "p", "PodNamespace": "default", "PodUID": "uid-p", "Node": "n3"}
    server.handlers = {"bind": lambda body: (200, {"Error": "node is full"})}
    assert fw.run_bind_plugins(CycleState(), PodInfo.of(pod), "n3").code == Code.ERROR


class RecordingBinder:
    name = "DefaultBinder"

    def __init__(self) -> None:
        self.bound: list[tuple[str, str]] = []

    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        self.bound.append((pod.name, node_name))
        return None


def test_binder_extender_goes_before_default_binder(server, transport):
    server.handlers = {"bind": lambda body: (200, {})}
    binder = RecordingBinder()
    registry = in_tree_registry()
    registry.register("DefaultBinder", lambda args, handle: binder)
    fw = extended(transport, {"urlPrefix": server.url, "bindVerb": "bind",
                              "managedResources": [{"name": "example.com/fpga"}]}, registry=registry)
    assert [p.name for p in fw.plugins_at("bind")] == [f"Extender({server.url})", "DefaultBinder"]
    fpga = PodInfo.of(req_pod("fpga", "1", extra={"example.com/fpga": "1"}))
    assert fw.run_bind_plugins(CycleState(), fpga, "n1").code == Code.SUCCESS and binder.bound == []
    # A pod the extender does not manage: it answers Skip and DefaultBinder binds.
    assert fw.run_bind_plugins(CycleState(), PodInfo.of(req_pod("plain", "1")), "n2").code == Code.SUCCESS
    assert binder.bound == [("plain", "n2")] and server.verbs() == ["bind"]


def test_preempt_verb_can_veto_candidates(server, transport):
    nodes = [sched_node("n1", cpu="2"), sched_node("n2", cpu="2")]
    low = [req_pod("low1", "2", node="n1", priority=1), req_pod("low2", "2", node="n2", priority=2)]
    for i, body in enumerate(low):
        body["metadata"]["uid"] = f"uid-{i}"

    def preempt(body: Any) -> tuple[int, Any]:
        offered = body["NodeNameToMetaVictims"]
        assert set(offered) == {"n1", "n2"}
        return 200, {"NodeNameToMetaVictims": {"n2": offered["n2"]}}  # n1 is off limits

    server.handlers = {"preempt": preempt}
    fw = extended(transport, {"urlPrefix": server.url, "preemptVerb": "preempt", "nodeCacheCapable": True})
    state = CycleState()
    result = fw.schedule_one(req_pod("high", "2", priority=10), Snapshot.build(nodes, low), state=state)
    assert isinstance(result, FitError)
    chosen = state.read(dp.RESULT_KEY)
    # Without the extender n1 would win (lower victim priority); the extender only allows n2.
    assert chosen.node_name == "n2" and [p.name for p in chosen.victims] == ["low2"]
    assert server.verbs() == ["preempt"]


def test_configuration_parsing_and_validation():
    config = ExtenderConfig.from_dict({"urlPrefix": "http://x", "prioritizeVerb": "p", "weight": 2,
                                       "httpTimeout": "1m30s", "managedResources": [{"name": "example.com/a"}]})
    assert config.http_timeout == 90.0 and config.weight == 2
    assert ExtenderConfig.from_dict({"urlPrefix": "http://x"}).http_timeout == 5.0
    assert parse_duration("250ms") == 0.25 and parse_duration(3) == 3.0
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration("soon")
    with pytest.raises(ValueError, match="positive weight"):
        validate_extenders([ExtenderConfig("http://x", prioritize_verb="p")])
    with pytest.raises(ValueError, match="only one extender can implement bind"):
        validate_extenders([ExtenderConfig("http://x", bind_verb="b"), ExtenderConfig("http://y", bind_verb="b")])
    twice = [ExtenderConfig.from_dict({"urlPrefix": url, "managedResources": [{"name": "example.com/a"}]})
             for url in ("a", "b")]
    with pytest.raises(ValueError, match="duplicate extender managed resource name"):
        validate_extenders(twice)


class FakeTransport:
    """A transport without sockets: answers from a function, for the per-node path."""

    def __init__(self, answer: Callable[[str, Any], Any]) -> None:
        self.answer = answer
        self.calls = 0

    def post(self, url: str, body: bytes, timeout: float) -> tuple[int, bytes]:
        self.calls += 1
        return 200, json.dumps(self.answer(url, json.loads(body))).encode()


def test_per_node_filter_and_score_agree_with_the_vectorised_forms():
    def answer(url: str, body: Any) -> Any:
        names = node_names(body)
        if url.endswith("/filter"):
            return {"Nodes": {"items": [n for n in body["Nodes"]["items"] if n["metadata"]["name"] != "n2"]},
                    "FailedNodes": {"n2": "no"}}
        return [{"Host": n, "Score": int(n[1:])} for n in names]

    plugin = ExtenderPlugin(HTTPExtender(ExtenderConfig("http://fake", filter_verb="filter",
                                                        prioritize_verb="prioritize", weight=1),
                                         FakeTransport(answer)), "ext")
    snapshot = Snapshot.build(NODES)
    info = PodInfo.of(req_pod("p"))
    kept, rejected, verdict = plugin.filter_feasible(CycleState(), info, snapshot, np.arange(4))
    per_node = [plugin.filter(CycleState(), info, snapshot.node_info(i)) for i in range(4)]
    assert [i in kept for i in range(4)] == [s is None for s in per_node] == [True, False, True, True]
    assert rejected.tolist() == [1] and verdict.status_for(1, "ext").reasons == per_node[1].reasons == ["no"]
    vector = plugin.score_all(CycleState(), info, snapshot, np.arange(4))
    assert vector.tolist() == [plugin.score(CycleState(), info, snapshot.node_info(i))[0] for i in range(4)]
    assert vector.tolist() == [10, 20, 30, 40]
