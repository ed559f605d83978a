"""``kubectl autoscale`` end to end: API server process, controllers, a real kubelet shard, on a ManualClock.

A Deployment whose pods each use a fixed 90m of CPU (``kemu.io/cpu``) against a 100m
request is autoscaled with ``--cpu-percent=50 --min=2 --max=10``. Upstream's formula
gives ``ceil(n * 90 / 50)`` per sync: 2 -> 4 -> 8 -> 15, the scale-up limit without
``behavior`` is ``max(2n, 4)`` and the maximum 10 caps the last step, so the HPA must
rise through rescale events each at most ``max(2n, 4)``, reach exactly 10, report
``ScalingLimited=True/TooManyReplicas`` and hold 10. ``kubectl get hpa`` and
``kubectl describe hpa`` print what a real cluster prints; bad input is refused with
the field named. With per-pod CPU following a load target (rate / ready pods x 5m per
request/s) the HPA settles where upstream's formula stops moving and holds there; and
``autoscaling/v1`` is served to the official client by conversion. The custom-metric
walkthrough: pods export ``http_requests_per_second`` (``kemu load set web 1000``), an
HPA of type Pods targets 100 per pod and reaches ceil(1000 / 100) = 10; at 200 requests/s
it goes back to 2 only once 300 s of cluster time have passed since the last higher
recommendation (each sync's recommendation worked out from its metric by the formula).

The controllers run on their own threads on the test's clock; the test moves the
clock, ticks the kubelet shard, binds pending pods (the scheduler's job) and waits on
conditions with deadlines.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from emulator import loadtargets
from emulator.api.errors import StatusError
from emulator.api.kinds import DEPLOYMENT, EVENT, HORIZONTALPODAUTOSCALER, NODE, POD
from emulator.api.types import Obj
from emulator.clock import ManualClock
from emulator.controllers.manager import ControllerManager, ManagerConfig
from emulator.kubelet.shard import KubeletShard
from emulator.server.core import ServerCore
from emulator.store.store import Store, StoreConfig
from tests.kubectl_env import serving_api
from tests.shards import metrics_shard
from tests.waiting import hpa_controller_settled, wait_for

pytestmark = pytest.mark.integration

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
TOKEN = "hpa-test-token"
REQUEST_M, USAGE_M, TARGET_PERCENT = 100, 90, 50
MIN, MAX = 2, 10
MANIFEST = f"""\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: {MIN}
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
      annotations:
        kemu.io/cpu: "{USAGE_M}m"
        kemu.io/startup-delay: "0s"
    spec:
      containers:
      - name: app
        image: nginx:1.27
        resources:
          requests:
            cpu: {REQUEST_M}m
"""


class Cluster:
    def __init__(self, core: ServerCore, clock: ManualClock, shard: KubeletShard, env: dict[str, str],
                 manager: ControllerManager) -> None:
        self.core, self.clock, self.shard, self.env = core, clock, shard, env
        self.hpa_controller: Any = manager.controllers()["horizontalpodautoscaling"]
        self._next_node = 0

    def kubectl(self, *args: str, stdin: str | None = None, ok: bool = True) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([KUBECTL, *args], env=self.env, input=stdin, capture_output=True, text=True, timeout=90,
                           check=False)
        if ok:
            assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stdout}{r.stderr}"
        return r

    def bind_pending(self) -> None:
        """The scheduler's part: bind every unbound pod to the shard's nodes, round robin."""
        nodes = sorted(n["metadata"]["name"] for n in self.core.list(NODE).items)
        if not nodes:
            return  # the shard registers its nodes on its first tick
        for pod in self.core.list(POD, "default").items:
            if not (pod.get("spec") or {}).get("nodeName") and not pod["metadata"].get("deletionTimestamp"):
                self.core.bind("default", pod["metadata"]["name"], nodes[self._next_node % len(nodes)])
                self._next_node += 1

    def step(self, seconds: float = 5.0) -> None:
        """Move cluster time by ``seconds``, in one order every run.

        The controllers run on their own threads and the HPA's sync fires as soon as the clock shows
        its due time, so the order is the test's to fix: first everything due at the current time is
        done (:meth:`settle`); the scheduler's part binds the pending pods and the kubelet shard sees
        the bindings; the shard ticks *at the new time* - pods admitted and started, the load shared,
        the usage window for that time published - and the HPA's pod cache catches up with it; only
        then does the clock show the new time, so a sync due then reads that window and those pods
        (as upstream's reads the latest sample); and what falls due then is done before returning.
        """
        self.settle()
        assert self.shard.sync(10), "kubelet informers did not catch up"
        self.bind_pending()
        assert self.shard.sync(10), "the kubelet informers did not deliver the bindings"
        self.shard.tick(self.clock.now() + seconds)
        assert self.shard.sync(10), "kubelet informers did not catch up"
        self.settle()
        self.clock.advance(seconds)
        self.settle()

    def settle(self) -> None:
        """Wait until the controllers have done what is due at the current cluster time.

        * The Deployment's pods exist: after a rescale, the deployment and ReplicaSet controllers
          created (or marked for deletion) the pods before cluster time moves on, so the new pods
          start on the next tick rather than a few steps later under load.
        * The HPA controller has done what is due (``tests.waiting.hpa_controller_settled``): its
          caches hold the store's HPAs and pods (their phases as the kubelet last wrote them), every
          HPA has its next sync scheduled and none is due, queued or running.
        """
        def pods_match_replicas() -> bool:
            try:
                replicas = self.replicas()
            except StatusError:
                return True  # no Deployment (an HPA whose target is missing)
            pods = self.core.list(POD, "default").items
            return sum(1 for p in pods if not p["metadata"].get("deletionTimestamp")) == replicas

        def settled() -> bool:
            return pods_match_replicas() and hpa_controller_settled(self.core, self.hpa_controller)
        wait_for(settled, 60.0, "the controllers' work due at the current cluster time", interval=0.005)

    def run_until(self, done: Callable[[], bool], limit: float, seconds: float = 5.0,
                  why: Callable[[], str] = str) -> None:
        """Step cluster time until ``done()``, letting the controllers catch up after every step."""
        waited = 0.0
        while True:
            self.settle()
            if done():
                return
            assert waited < limit, f"condition not met after {limit} cluster seconds {why()}"
            self.step(seconds)
            waited += seconds

    def hpa(self) -> Obj:
        return self.core.get(HORIZONTALPODAUTOSCALER, "default", "web")

    def replicas(self) -> int:
        return int(self.core.get(DEPLOYMENT, "default", "web")["spec"]["replicas"])


@pytest.fixture
def cluster(redis_url: str, tmp_path: Path) -> Iterator[Cluster]:
    store = Store.connect(redis_url, StoreConfig(node_shards=4))
    # Cluster time starts an hour in the past so kubectl's AGE columns read like a real cluster's.
    clock = ManualClock(time.time() - 3600)
    core = ServerCore(store, clock)
    core.bootstrap()
    with serving_api(redis_url, tmp_path, TOKEN) as (_server, env), metrics_shard(core, clock, 15, nodes=2) as shard:
        manager = ControllerManager(core, ManagerConfig(leader_elect=False, controllers=(
            "replicaset", "deployment", "horizontalpodautoscaling")), clock=clock)
        manager.start()
        try:
            assert manager.wait_active(30)
            yield Cluster(core, clock, shard, env, manager)
        finally:
            manager.stop()
    store.close()


def rescale_sizes(core: ServerCore) -> list[int]:
    events = [e for e in core.list(EVENT, "default").items
              if e["involvedObject"].get("kind") == "HorizontalPodAutoscaler" and e["reason"] == "SuccessfulRescale"]
    events.sort(key=lambda e: (e["firstTimestamp"], e["metadata"]["name"]))
    return [int(e["message"].split(";")[0].removeprefix("New size: ")) for e in events]


def rescaled_to(core: ServerCore, size: int) -> list[int] | None:
    """The rescale sizes once the last one is ``size`` (None before)."""
    sizes = rescale_sizes(core)
    return sizes if sizes and sizes[-1] == size else None


def condition(hpa: Obj, ctype: str) -> Obj:
    return next(c for c in hpa["status"]["conditions"] if c["type"] == ctype)


def test_kubectl_autoscale_converges_to_the_formula_and_holds(cluster: Cluster) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=MANIFEST)
    # The two pods run and have been Ready for longer than a metrics window.
    cluster.run_until(lambda: sum(1 for p in cluster.core.list(POD, "default").items
                                  if (p.get("status") or {}).get("phase") == "Running") == MIN, 120)
    for _ in range(8):
        cluster.step()

    out = cluster.kubectl("autoscale", "deployment", "web", f"--min={MIN}", f"--max={MAX}",
                          f"--cpu-percent={TARGET_PERCENT}").stdout
    assert out.strip() == "horizontalpodautoscaler.autoscaling/web autoscaled"
    hpa = cluster.hpa()
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}
    assert hpa["spec"]["metrics"] == [{"type": "Resource", "resource": {"name": "cpu", "target": {
        "type": "Utilization", "averageUtilization": TARGET_PERCENT}}}]
    # Before the first sync (15 s after creation) nothing is known.
    before = cluster.kubectl("get", "hpa").stdout.splitlines()
    assert before[0].split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    assert before[1].split()[:7] == ["web", "Deployment/web", "cpu:", f"<unknown>/{TARGET_PERCENT}%", str(MIN),
                                     str(MAX), "0"]

    # Converge: ceil(n * usage / target) per sync, at most max(2n, 4) more per rescale, capped at MAX.
    cluster.run_until(lambda: cluster.replicas() == MAX and condition(cluster.hpa(), "ScalingLimited")["reason"]
                      == "TooManyReplicas" and cluster.hpa()["status"]["currentReplicas"] == MAX, 600)
    # The event recorder flushes every wall second.
    sizes = wait_for(lambda: rescaled_to(cluster.core, MAX), 10.0, f"a SuccessfulRescale event to {MAX}")
    ratio = USAGE_M / TARGET_PERCENT  # 90 % of the request against a 50 % target
    assert sizes[0] == min(math.ceil(MIN * ratio), max(2 * MIN, 4)) == 4
    assert sizes[-1] == MAX
    previous = MIN
    for size in sizes:
        assert previous < size <= min(max(2 * previous, 4), MAX), sizes
        previous = size
    assert math.ceil(8 * ratio) > MAX  # the last step is the cap, not the formula

    # Hold: several more sync periods change nothing.
    for _ in range(12):
        cluster.step()
    assert cluster.replicas() == MAX
    assert rescale_sizes(cluster.core) == sizes
    hpa = cluster.hpa()
    utilization = hpa["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"]
    assert abs(utilization - USAGE_M * 100 // REQUEST_M) <= 2  # the kubelet's CPU average over the window
    assert hpa["status"]["desiredReplicas"] == MAX and hpa["status"]["currentReplicas"] == MAX
    assert condition(hpa, "ScalingLimited")["status"] == "True"
    assert condition(hpa, "AbleToScale")["status"] == "True"
    assert condition(hpa, "ScalingActive") | {"lastTransitionTime": ""} == {
        "type": "ScalingActive", "status": "True", "reason": "ValidMetricFound", "lastTransitionTime": "",
        "message": "the HPA was able to successfully calculate a replica count from cpu resource utilization "
                   "(percentage of request)"}

    row = cluster.kubectl("get", "hpa").stdout.splitlines()[1].split()
    assert row[:7] == ["web", "Deployment/web", "cpu:", f"{utilization}%/{TARGET_PERCENT}%", str(MIN), str(MAX),
                       str(MAX)]
    described = cluster.kubectl("describe", "hpa", "web").stdout
    for line in ("Reference:                                             Deployment/web",
                 f'resource cpu on pods  (as a percentage of request):  {utilization}% ', "Min replicas:"):
        assert line in described, described
    assert "ScalingLimited  True    TooManyReplicas" in described, described
    assert "the desired replica count is more than the maximum replica count" in described
    assert "SuccessfulRescale" in described
    assert f"New size: {sizes[0]}; reason: cpu resource utilization (percentage of request) above target" \
        in described


def test_bad_input_is_refused_with_the_field_and_runtime_problems_become_conditions(cluster: Cluster) -> None:
    r = cluster.kubectl("autoscale", "deployment", "web", "--min=5", "--max=3", "--cpu-percent=50", ok=False)
    # kubectl itself checks min <= max before sending anything.
    assert r.returncode != 0
    bad = """\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: bad
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 5
  maxReplicas: 3
"""
    r = cluster.kubectl("apply", "-f", "-", stdin=bad, ok=False)
    assert r.returncode != 0
    assert 'spec.maxReplicas: Invalid value: 3: must be greater than or equal to `minReplicas`' in r.stderr
    unknown = bad.replace("minReplicas: 5", "minReplicas: 1") + "  metrics:\n  - type: Bogus\n"
    r = cluster.kubectl("apply", "-f", "-", stdin=unknown, ok=False)
    assert 'spec.metrics[0].type: Unsupported value: "Bogus"' in r.stderr
    assert cluster.core.list(HORIZONTALPODAUTOSCALER, "default").items == []  # nothing else changed

    # A target that does not exist (kubectl autoscale checks; an applied manifest need not) is a runtime
    # condition and event, as upstream reports it.
    cluster.kubectl("apply", "-f", "-", stdin=bad.replace("minReplicas: 5", "minReplicas: 1").replace(
        "name: bad", "name: missing").replace("name: web", "name: missing"))
    hpa_of = lambda: cluster.core.get(HORIZONTALPODAUTOSCALER, "default", "missing")  # noqa: E731
    cluster.run_until(lambda: bool((hpa_of().get("status") or {}).get("conditions")), 60)
    able = condition(hpa_of(), "AbleToScale")
    assert (able["status"], able["reason"]) == ("False", "FailedGetScale")
    assert 'deployments.apps "missing" not found' in able["message"]
    # The event recorder flushes every wall second.
    wait_for(lambda: any(e["reason"] == "FailedGetScale" and e["involvedObject"]["name"] == "missing"
                         for e in cluster.core.list(EVENT, "default").items), 10.0, "a FailedGetScale event")


def test_autoscaling_v1_is_served_by_conversion_to_the_official_client(cluster: Cluster) -> None:
    """autoscaling/v1 through the official client: create, read, patch; stored as v2 with upstream annotations."""
    from kubernetes import client, config

    api_client = config.new_client_from_config(config_file=cluster.env["KUBECONFIG"])
    v1 = client.AutoscalingV1Api(api_client)
    body = client.V1HorizontalPodAutoscaler(
        metadata=client.V1ObjectMeta(name="legacy", annotations={
            "autoscaling.alpha.kubernetes.io/metrics": '[{"type":"Pods","pods":{"metricName":"rps",'
                                                      '"targetAverageValue":"10"}}]'}),
        spec=client.V1HorizontalPodAutoscalerSpec(
            scale_target_ref=client.V1CrossVersionObjectReference(api_version="apps/v1", kind="Deployment",
                                                                  name="web"),
            max_replicas=5, target_cpu_utilization_percentage=60))
    created = v1.create_namespaced_horizontal_pod_autoscaler("default", body)
    assert created.api_version == "autoscaling/v1" and created.spec.min_replicas == 1  # defaulted
    stored = cluster.core.get(HORIZONTALPODAUTOSCALER, "default", "legacy")
    assert stored["apiVersion"] == "autoscaling/v2" and "annotations" not in stored["metadata"]
    assert stored["spec"]["metrics"] == [
        {"type": "Pods", "pods": {"metric": {"name": "rps"}, "target": {"type": "AverageValue", "averageValue": "10"}}},
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 60}}}]
    v1.patch_namespaced_horizontal_pod_autoscaler("legacy", "default", {"spec": {"targetCPUUtilizationPercentage": 70}})
    read = v1.read_namespaced_horizontal_pod_autoscaler("legacy", "default")
    assert read.spec.target_cpu_utilization_percentage == 70
    assert read.metadata.annotations == {"autoscaling.alpha.kubernetes.io/metrics": json.dumps(
        [{"type": "Pods", "pods": {"metricName": "rps", "targetAverageValue": "10"}}], separators=(",", ":"))}
    listed = v1.list_namespaced_horizontal_pod_autoscaler("default")
    assert [h.metadata.name for h in listed.items] == ["legacy"] and listed.api_version == "autoscaling/v1"
    # The v2 view has the patched target; kubectl (which prefers v2) shows it.
    assert cluster.kubectl("get", "hpa", "legacy").stdout.splitlines()[1].split()[2:5] == [
        "<unknown>/10,", "cpu:", "<unknown>/70%"]
    api_client.close()


LOAD_RATE, COST_M = 80.0, 5  # requests/s offered to the target; millicores one request/s costs a pod


def load_utilization(replicas: int) -> float:
    """Per-pod CPU as a percentage of the 100m request when LOAD_RATE is shared by ``replicas`` ready pods."""
    return LOAD_RATE / replicas * COST_M * 100 / REQUEST_M


def test_kubectl_autoscale_follows_the_load_to_the_formulas_fixed_point(cluster: Cluster) -> None:
    """Per-pod CPU follows the load (rate / ready pods x cost): the HPA settles where the formula stops moving."""
    manifest = MANIFEST.replace(f'kemu.io/cpu: "{USAGE_M}m"', 'kemu.io/cpu: "0m"\n'
                                f'        kemu.io/cost-per-request: "{COST_M}m"\n'
                                '        kemu.io/load-target: web')
    loadtargets.set_rate(cluster.core.store.redis, cluster.core.store.config.prefix, "web", LOAD_RATE)
    cluster.kubectl("apply", "-f", "-", stdin=manifest)
    cluster.kubectl("autoscale", "deployment", "web", f"--min={MIN}", f"--max={MAX}",
                    f"--cpu-percent={TARGET_PERCENT}")
    # Upstream's steps from MIN: ceil(n * utilization / target), at most max(2n, 4), until the ratio is
    # within the 0.1 tolerance.
    n = MIN
    while abs(load_utilization(n) / TARGET_PERCENT - 1) > 0.1:
        n = min(math.ceil(n * load_utilization(n) / TARGET_PERCENT), max(2 * n, 4), MAX)
    assert n == 8  # 400m of CPU in all, 50m (50 %) each
    cluster.run_until(lambda: cluster.replicas() == n and cluster.hpa()["status"].get("currentReplicas") == n
                      and condition(cluster.hpa(), "ScalingActive")["status"] == "True", 900)
    for _ in range(24):  # two minutes more: it holds
        cluster.step()
    assert cluster.replicas() == n
    hpa = cluster.hpa()
    assert abs(hpa["status"]["currentMetrics"][0]["resource"]["current"]["averageUtilization"] - TARGET_PERCENT) <= 5
    assert condition(hpa, "ScalingLimited")["reason"] == "DesiredWithinRange"
    # The event recorder flushes every wall second.
    sizes = wait_for(lambda: rescaled_to(cluster.core, n), 10.0, f"a SuccessfulRescale event to {n}")
    previous = MIN
    for size in sizes:  # every rescale within the scale-up limit, ending at the fixed point
        assert previous < size <= max(2 * previous, 4), sizes
        previous = size
    assert sizes[-1] == n


# ----------------------------------------------------------------------------- the custom-metric walkthrough
RPS_TARGET, RPS_MAX = 100, 20  # averageValue of http_requests_per_second per pod; maxReplicas
HIGH_RATE, LOW_RATE = 1000.0, 200.0
DOWN_WINDOW = 300.0  # scaleDown.stabilizationWindowSeconds as defaulted (upstream's 300 s)
UP_WINDOW = 60.0
TOLERANCE = 0.1
CUSTOM_HPA = f"""\
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: web
spec:
  scaleTargetRef: {{apiVersion: apps/v1, kind: Deployment, name: web}}
  minReplicas: {MIN}
  maxReplicas: {RPS_MAX}
  metrics:
  - type: Pods
    pods:
      metric: {{name: http_requests_per_second}}
      target: {{type: AverageValue, averageValue: "{RPS_TARGET}"}}
  behavior:
    scaleUp:
      stabilizationWindowSeconds: {UP_WINDOW:g}
      policies: [{{type: Percent, value: 900, periodSeconds: 15}}]
"""


def pods_recommendation(replicas: int, average: float) -> int:
    """Upstream ``GetMetricReplicas`` for a Pods metric with every pod reporting: the usage ratio
    against the target, unchanged within the tolerance, else ``ceil(ratio * pods)``."""
    ratio = average / RPS_TARGET
    return replicas if abs(ratio - 1.0) <= TOLERANCE else math.ceil(ratio * replicas)


def wait_rescaled_to(core: ServerCore, size: int) -> list[int]:
    from tests.waiting import wait_for  # the event recorder flushes every wall second

    return wait_for(lambda: (s := rescale_sizes(core)) and s[-1] == size and s, 10, f"a SuccessfulRescale to {size}")


def test_custom_metric_walkthrough_scales_out_with_the_load_and_in_after_the_window(cluster: Cluster) -> None:
    """docs' walkthrough: pods export http_requests_per_second, an HPA of type Pods targets 100 per pod;
    1,000 requests/s -> 10 replicas; 200 requests/s -> 2, only once the 300 s window has passed."""
    from emulator.api.quantity import parse_quantity
    from emulator.cli import main as kemu

    manifest = MANIFEST.replace(f'kemu.io/cpu: "{USAGE_M}m"', 'kemu.io/cpu: "10m"\n'
                                '        kemu.io/load-target: web')
    redis_url = cluster.core.store.redis.connection_pool.connection_kwargs
    url = f"redis://{redis_url['host']}:{redis_url['port']}/{redis_url.get('db', 0)}"
    assert kemu(["load", "--redis-url", url, "set", "web", str(int(HIGH_RATE))]) == 0
    cluster.kubectl("apply", "-f", "-", stdin=manifest)
    assert cluster.kubectl("apply", "-f", "-", stdin=CUSTOM_HPA).stdout.strip() == \
        "horizontalpodautoscaler.autoscaling/web created"

    # Scale out: from n pods sharing the load, ceil(n * (rate / n) / target) = ceil(rate / target) in one step
    # (the Percent 900 policy allows 2 -> 20). The per-pod values are means over the 15 s metrics window, so
    # a sync right after the rescale still sees part of the old, higher share and would overshoot (and an
    # overshoot to 11 would then hold: 1000 / 11 is within the 0.1 tolerance of 100); the 60 s scale-up
    # window (the lowest recommendation of the last minute) rides that out, as on a real cluster.
    high = math.ceil(HIGH_RATE / RPS_TARGET)
    assert high == 10 and abs(HIGH_RATE / (high + 1) / RPS_TARGET - 1) <= TOLERANCE
    cluster.run_until(lambda: cluster.replicas() == high and cluster.hpa()["status"].get("currentReplicas") == high
                      and cluster.hpa()["status"].get("desiredReplicas") == high, 1800,
                      why=lambda: f"rescales {rescale_sizes(cluster.core)}, status {cluster.hpa().get('status')}")
    for _ in range(9):  # three more syncs: every pod reports a full window at 1,000 / 10 each
        cluster.step()
    cluster.settle()
    assert cluster.replicas() == high
    sizes = wait_rescaled_to(cluster.core, high)
    assert sizes == sorted(set(sizes)) and sizes[-1] == high, sizes  # up only, never past the fixed point
    hpa = cluster.hpa()
    current = hpa["status"]["currentMetrics"][0]["pods"]["current"]["averageValue"]
    assert abs(parse_quantity(current).milli_value() / 1000 - HIGH_RATE / high) <= 1  # 100 requests/s per pod
    assert condition(hpa, "ScalingActive")["reason"] == "ValidMetricFound"
    assert condition(hpa, "ScalingLimited")["reason"] == "DesiredWithinRange"
    row = cluster.kubectl("get", "hpa").stdout.splitlines()[1].split()
    assert row[:6] == ["web", "Deployment/web", f"{current}/{RPS_TARGET}", str(MIN), str(RPS_MAX), str(high)]

    # Scale in: every sync now recommends fewer pods, but the controller keeps the highest recommendation
    # of the last 300 s. Follow each sync's metric and work out its recommendation: the last one above
    # the new count (>= the steady 10 at the old load) starts the window.
    low = max(MIN, math.ceil(LOW_RATE / RPS_TARGET))
    assert low == 2
    assert kemu(["load", "--redis-url", url, "set", "web", str(int(LOW_RATE))]) == 0
    key = "default/web"
    controller = cluster.hpa_controller
    last_high = controller.last_reconciled[key]  # the sync before the step: 10 pods at 100 each
    seen = last_high
    while cluster.replicas() != low:
        cluster.step()
        cluster.settle()
        synced = controller.last_reconciled[key]
        if synced == seen:
            continue
        seen = synced
        status = cluster.hpa()["status"]
        average = parse_quantity(status["currentMetrics"][0]["pods"]["current"]["averageValue"]).milli_value() / 1000
        # With behavior, upstream keeps a recommendation while its timestamp is After(now - window).
        if cluster.replicas() == low:
            assert synced >= last_high + DOWN_WINDOW, (synced, last_high)
            break
        # Still at 10: only allowed while the window holds a higher recommendation.
        assert synced < last_high + DOWN_WINDOW, (synced, last_high)
        if max(low, pods_recommendation(status["currentReplicas"], average)) > low:
            last_high = synced
        assert synced - last_high <= DOWN_WINDOW
    scale_down_at = seen
    # The load stepped down at most one sync after last_high's first value; the window is cluster time.
    assert last_high + DOWN_WINDOW <= scale_down_at < last_high + DOWN_WINDOW + controller.sync_period
    down = wait_rescaled_to(cluster.core, low)[len(sizes):]
    assert down == sorted(set(down), reverse=True) and down[0] < high, down  # down only, each after its window

    out = cluster.kubectl("get", "hpa").stdout.splitlines()
    assert out[0].split() == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"]
    hpa = cluster.hpa()
    current = hpa["status"]["currentMetrics"][0]["pods"]["current"]["averageValue"]
    # measured on the pods before the scale-in: below the target by more than the tolerance
    assert (parse_quantity(current).milli_value() / 1000) < RPS_TARGET * (1 - TOLERANCE)
    assert out[1].split()[:5] == ["web", "Deployment/web", f"{current}/{RPS_TARGET}", str(MIN), str(RPS_MAX)]
    described = cluster.kubectl("describe", "hpa", "web").stdout
    assert '"http_requests_per_second" on pods:' in described, described
    assert f"{current} / {RPS_TARGET}" in described, described
    for line in ("AbleToScale     True    SucceededRescale", "ScalingActive   True    ValidMetricFound",
                 f"New size: {high}; reason: pods metric http_requests_per_second above target",
                 f"New size: {low}; reason: All metrics below target"):
        assert line in described, described
    assert described.count("SuccessfulRescale") >= 2

