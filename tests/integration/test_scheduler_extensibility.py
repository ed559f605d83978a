"""Custom plugins and HTTP extenders named in a KubeSchedulerConfiguration change placements end to end.

The whole path is real: a configuration *file* read by :class:`~emulator.scheduler_host.SchedulerHost`, the
plugin resolved by name (the registry's ``GPUBinPack``, and the same example loaded by import path through
``plugin_api.resolve_plugins``), extenders called over the host's ``HTTPTransport`` on a real HTTP server
on 127.0.0.1, pods created in the real store (Redis) and bound by the scheduling loop. Each test has a
control pod that shows where the default profile would have put the pod, so the custom policy is what moved it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from emulator.api.kinds import NODE, POD
from emulator.scheduler.scheduler import SchedulerOptions
from emulator.scheduler_host import HostSettings, SchedulerHost
from tests.builders import req_pod, sched_node
from tests.integration.test_scheduler import bound_to, core  # noqa: F401  (core: a fixture)
from tests.unit.scheduler.test_extensibility import ExtenderServer, node_names
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

GPU = "nvidia.com/gpu"
BY_PATH = "emulator.scheduler.plugins.examples.gpu_binpack:new"


def gpu_pod(name: str, cpu: str, memory: str, gpus: str, **spec: Any) -> dict[str, Any]:
    """A pod requesting GPUs; extended resources must have limits equal to requests (API validation)."""
    pod = req_pod(name, cpu, memory, extra={GPU: gpus}, **spec)
    pod["spec"]["containers"][0]["resources"]["limits"] = {GPU: gpus}
    return pod


@pytest.fixture
def host_from_file(redis_url: str, tmp_path: Path) -> Iterator[Callable[[dict[str, Any]], SchedulerHost]]:
    """Start a host whose configuration is written to (and read back from) a YAML file."""
    started: list[SchedulerHost] = []

    def start(doc: dict[str, Any]) -> SchedulerHost:
        path = tmp_path / f"scheduler-{len(started)}.yaml"
        path.write_text(yaml.safe_dump(doc))
        host = SchedulerHost(HostSettings(redis_url, config_path=str(path)), [SchedulerOptions(seed=0)])
        started.append(host.start(sync_timeout=30))
        return host

    yield start
    for host in started:
        host.stop()


@pytest.fixture
def extender() -> Iterator[ExtenderServer]:
    server = ExtenderServer()
    yield server
    server.close()


def schedule(core: Any, pod: dict[str, Any]) -> str:  # noqa: F811  (core is the value, not the fixture)
    core.create(POD, pod)
    name = pod["metadata"]["name"]
    wait_for(lambda: bound_to(core, name) is not None, 20, f"{name} to be bound")
    node = bound_to(core, name)
    assert node is not None
    return node


def test_gpu_binpack_named_in_a_config_file_packs_gpu_pods(core, host_from_file):  # noqa: F811
    # "busy" has 6 of 8 GPUs and half its CPU taken; "empty" nothing. LeastAllocated/Balanced prefer "empty".
    core.create(NODE, sched_node("busy", cpu="16", memory="64Gi", **{GPU: "8"}))
    core.create(NODE, sched_node("empty", cpu="16", memory="64Gi", **{GPU: "8"}))
    core.create(POD, gpu_pod("resident", "8", "32Gi", "6", nodeName="busy"))
    packed = {"plugins": {"multiPoint": {"enabled": [{"name": "GPUBinPack", "weight": 5}]}}}
    by_path = {"plugins": {"multiPoint": {"enabled": [{"name": BY_PATH, "weight": 5}]}},
               "pluginConfig": [{"name": BY_PATH, "args": {"resourceName": GPU}}]}
    host = host_from_file({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                           "profiles": [{"schedulerName": "default-scheduler"},
                                        {"schedulerName": "gpu-packer", **packed},
                                        {"schedulerName": "gpu-packer-by-path", **by_path}]})
    # Resolved by import path: the plugin answers to the configured string in the running framework.
    assert host.schedulers[0].frameworks["gpu-packer-by-path"].plugins[BY_PATH].name == BY_PATH
    assert "GPUBinPack" not in host.schedulers[0].frameworks["default-scheduler"].plugins

    # Control: the default profile spreads the 1-GPU pod onto the idle node.
    assert schedule(core, gpu_pod("control", "1", "1Gi", "1")) == "empty"
    # GPUBinPack (weight 5): "busy" is left with 1 free GPU against 6 on "empty" -> 500 points outweigh the
    # default plugins' preference for the idle node.
    assert schedule(core, gpu_pod("packed", "1", "1Gi", "1", schedulerName="gpu-packer")) == "busy"
    # The same example plugin loaded by module:attribute packs the next pod onto the last free GPU of "busy".
    assert schedule(core, gpu_pod("by-path", "1", "1Gi", "1",
                                  schedulerName="gpu-packer-by-path")) == "busy"
    # And the default profile still spreads: "busy" has no GPU left, but a CPU-only pod prefers the idle node too.
    assert schedule(core, req_pod("control-2", "1", "1Gi")) == "empty"


def test_http_extender_in_the_config_filters_and_prioritizes(core, host_from_file, extender):  # noqa: F811
    for name in ("n1", "n2", "n3"):
        core.create(NODE, sched_node(name, cpu="8", memory="32Gi"))
    # Default scoring ranks n1 (empty) > n3 (a little used) > n2 (mostly used).
    core.create(POD, req_pod("on-n2", "6", "24Gi", node="n2"))
    core.create(POD, req_pod("on-n3", "2", "8Gi", node="n3"))

    def filter_(body: Any) -> tuple[int, Any]:
        # Pods labelled gpu-team=blocked fit nowhere; every other pod may not use n1.
        labels = body["Pod"]["metadata"].get("labels") or {}
        names = node_names(body)
        if labels.get("gpu-team") == "blocked":
            return 200, {"NodeNames": [], "FailedNodes": {n: "quota exhausted" for n in names}}
        return 200, {"NodeNames": [n for n in names if n != "n1"], "FailedNodes": {"n1": "n1 is draining"}}

    def prioritize(body: Any) -> tuple[int, Any]:
        return 200, [{"Host": n, "Score": 10 if n == "n2" else 0} for n in node_names(body)]

    extender.handlers = {"filter": filter_, "prioritize": prioritize}
    host_from_file({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                    "profiles": [{"schedulerName": "default-scheduler"}, {"schedulerName": "plain"}],
                    "extenders": [{"urlPrefix": extender.url, "filterVerb": "filter", "prioritizeVerb": "prioritize",
                                   "weight": 5, "nodeCacheCapable": True, "httpTimeout": "2s"}]})

    # Without the extender the pod would go to n1; n1 is filtered out and n2's 10 x 5 x 10 = 500 points win
    # over n3's better resource scores (each at most 100 x weight 1 or 2).
    assert schedule(core, req_pod("web", "1", "2Gi")) == "n2"
    # Extenders apply to every profile, as upstream's do.
    assert schedule(core, req_pod("other", "1", "1Gi", schedulerName="plain")) == "n2"
    seen = [(path.rsplit("/", 1)[-1], body["Pod"]["metadata"]["name"]) for path, body in extender.requests]
    assert ("filter", "web") in seen and ("prioritize", "web") in seen and ("filter", "other") in seen
    # The extender's failure messages join the plugins' in the unschedulable pod's upstream-style message
    # (n2 is full by now: web and other took its last 2 CPUs).
    blocked = req_pod("blocked", "1", "1Gi")
    blocked["metadata"]["labels"] = {"gpu-team": "blocked"}
    core.create(POD, blocked)

    def message() -> str | None:
        conds = core.get(POD, "default", "blocked")["status"].get("conditions") or []
        return next((c["message"] for c in conds if c["type"] == "PodScheduled"), None)

    wait_for(lambda: message() is not None, 20, "the PodScheduled condition of the blocked pod")
    assert (message() or "").startswith("0/3 nodes are available: 1 Insufficient cpu, 2 quota exhausted. "), \
        message()
    assert bound_to(core, "blocked") is None
