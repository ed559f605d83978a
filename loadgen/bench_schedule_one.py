"""One scheduling cycle on scheduler_perf's shapes, without Ray or Redis: CPU microseconds per pod.

    .venv/bin/python -m loadgen.bench_schedule_one [--nodes 500,5000] [--pods 2000] [--breakdown]

The cluster is the one ``bench_scheduler``'s PreemptionAsync workload runs
on: ``--nodes`` scheduler_perf ``node-default`` nodes (4 cpu, 32Gi, 110
pods), each holding ``--init-per-node`` ``pod-low-priority`` pods (900m) in
a :class:`~emulator.scheduler.framework.snapshot.Snapshot`. ``--pods``
``pod-default`` pods (100m / 500Mi, SchedulingBasic's and PreemptionAsync's
measured pods) then go through ``Framework.schedule_pod`` with the default
profile, each placement applied with ``Snapshot.assume`` before the next, as
a scheduler's cache does. Reported per size: process CPU time per pod (cycle
+ assume) in blocks of 200 pods -- the minimum and the median block, steadier
than one total on a shared machine -- and the cycle's node counts.
``--breakdown`` also times each extension point and each plugin's call
(wall time, wrapped: a few microseconds of the wrapping included).
``--nominated K`` gives the framework a nominator holding K
``pod-high-priority`` preemptors (3 cpu, priority 10) nominated to nodes
spread over the cluster, as while PreemptionAsync's preemptors wait for
their victims: every cycle then also runs the nominated-pods pass.

``--preempt P`` measures PreemptionAsync's preemptions instead: after
``--pods`` ordinary pods are placed, ``P`` rounds each place ``--between``
ordinary pods and then one ``pod-high-priority`` preemptor (3 cpu, priority
10): its failing cycle (``schedule_pod`` over the full nodes), the FitError
message the scheduler writes, PostFilter (DefaultPreemption's dry run and
choice), then the victims forgotten and the preemptor assumed on its node,
as once the victims are gone and it binds. Reported: CPU µs per preemption
for each of those steps (median over the rounds) and per ordinary pod.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from emulator.scheduler import Snapshot, new_framework
from emulator.scheduler.framework import algorithm
from emulator.scheduler.framework.interface import CycleState
from emulator.scheduler.framework.runtime import Framework
from emulator.scheduler.framework.types import FitError, PodInfo, ScheduleResult
from loadgen.bench_scheduler import node_default, pod_default, pod_perf_high_priority, pod_perf_low_priority

BLOCK = 200


def build(n: int, per_node: int) -> Snapshot:
    nodes = [node_default(i) for i in range(n)]
    init = []
    for i in range(per_node * n):
        pod = pod_perf_low_priority(f"init-{i}")
        pod["spec"]["nodeName"] = nodes[i % n]["metadata"]["name"]
        init.append(pod)
    return Snapshot.build(nodes, init)


class Nominated:
    """A PodNominator (``framework/nominated.py``) holding ``k`` preemptors nominated to nodes spread out."""

    def __init__(self, snapshot: Snapshot, k: int) -> None:
        self.by_node: dict[str, list[PodInfo]] = {}
        for j in range(k):
            pod = pod_perf_high_priority(f"preemptor-{j}")
            pod["spec"]["priority"] = 10  # what Priority admission would set from the PriorityClass
            self.by_node.setdefault(snapshot.node_names[j * 97 % snapshot.num_nodes], []).append(PodInfo.of(pod))

    def nominated_pods_by_node(self) -> Mapping[str, Sequence[PodInfo]]:
        return self.by_node


def _timed(acc: dict[str, float], label: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[label] += time.perf_counter() - start
    return wrapper


def instrument(fw: Framework, acc: dict[str, float]) -> None:
    """Time each extension point and each plugin call of ``fw`` into ``acc`` (seconds by label)."""
    for method, label in (("run_pre_filter_plugins", "PreFilter"), ("_filter", "Filter"),
                          ("run_pre_score_plugins", "PreScore"), ("run_score_plugins", "Score")):
        setattr(fw, method, _timed(acc, label, getattr(fw, method)))
    for plugin in fw.plugins.values():
        for method in ("pre_filter", "filter_all", "pre_score", "score_all", "normalize_score"):
            if hasattr(plugin, method):
                setattr(plugin, method, _timed(acc, f"  {plugin.name}.{method}", getattr(plugin, method)))
    fw._filter_all = {p.name: getattr(p, "filter_all", None) for p in fw._filters}
    fw._score_all = {p.name: getattr(p, "score_all", None) for p in fw.plugins_at("score")}
    fw._normalize = {p.name: getattr(p, "normalize_score", None) for p in fw.plugins_at("score")}
    algorithm.select_host = _timed(acc, "select_host", algorithm.select_host)  # type: ignore[attr-defined]


def bench(n: int, pods: int, per_node: int, seed: int, *, breakdown: bool = False,
          nominated: int = 0) -> dict[str, Any]:
    snapshot = build(n, per_node)
    fw = new_framework(rng=random.Random(seed), nominator=Nominated(snapshot, nominated) if nominated else None)
    stream = [PodInfo.of(pod_default(f"measured-{i}")) for i in range(pods)]
    fw.schedule_one(PodInfo.of(pod_default("warm-up")), snapshot.fork())  # label columns, taint groups
    acc: dict[str, float] = defaultdict(float)
    if breakdown:
        instrument(fw, acc)
    blocks: list[float] = []
    feasible = evaluated = unschedulable = 0
    for start in range(0, pods, BLOCK):
        chunk = stream[start:start + BLOCK]
        cpu = time.process_time()
        for info in chunk:
            result = fw.schedule_pod(CycleState(), info, snapshot)
            if isinstance(result, FitError):
                unschedulable += 1
                continue
            snapshot.assume(info, result.node_index)
            feasible += result.feasible
            evaluated += result.evaluated
        blocks.append((time.process_time() - cpu) / len(chunk) * 1e6)
    placed = max(pods - unschedulable, 1)
    ordered = sorted(blocks)
    return {"nodes": n, "pods": pods, "cpu_us_per_pod_min_block": round(ordered[0], 1),
            "cpu_us_per_pod_median_block": round(ordered[len(ordered) // 2], 1),
            "feasible_per_cycle": round(feasible / placed, 1), "evaluated_per_cycle": round(evaluated / placed, 1),
            "unschedulable": unschedulable,
            "breakdown_us": {k: round(v / pods * 1e6, 1) for k, v in acc.items()}}


def bench_preemption(n: int, pods: int, per_node: int, seed: int, *, rounds: int, between: int,
                     nominated: int = 0) -> dict[str, Any]:
    """``--preempt``: per round ``between`` ordinary pods then one preemptor through its failing cycle,
    PostFilter and the victims' removal (see the module docstring). CPU µs per step, median over rounds."""
    snapshot = build(n, per_node)
    fw = new_framework(rng=random.Random(seed), nominator=Nominated(snapshot, nominated) if nominated else None)
    fw.schedule_one(PodInfo.of(pod_default("warm-up")), snapshot.fork())
    serial = iter(range(10**9))

    def place(count: int) -> None:
        for _ in range(count):
            info = PodInfo.of(pod_default(f"measured-{next(serial)}"))
            result = fw.schedule_pod(CycleState(), info, snapshot)
            if isinstance(result, ScheduleResult):
                snapshot.assume(info, result.node_index)

    place(pods)
    steps: dict[str, list[float]] = defaultdict(list)
    victims = preempted = 0
    for r in range(rounds):
        cpu = time.process_time()
        place(between)
        steps["ordinary pods (per pod)"].append((time.process_time() - cpu) / max(between, 1))
        raw = pod_perf_high_priority(f"preemptor-{r}")
        raw["spec"]["priority"] = 10  # what Priority admission would set from the PriorityClass
        info = PodInfo.of(raw)
        state = CycleState()
        t0 = time.process_time()
        fit = fw.schedule_pod(state, info, snapshot)
        t1 = time.process_time()
        assert isinstance(fit, FitError), "the preemptor fits somewhere: more --pods or --init-per-node"
        _ = fit.message
        t2 = time.process_time()
        post, status = fw.run_post_filter_plugins(state, info, snapshot, fit.diagnosis.node_to_status)
        t3 = time.process_time()
        chosen = getattr(post, "victims", ()) if status.is_success() else ()
        for victim in chosen:
            snapshot.forget(victim, post.node_name)  # type: ignore[union-attr]
        if chosen:
            snapshot.assume(info, post.node_name)  # type: ignore[union-attr]
            preempted += 1
            victims += len(chosen)
        t4 = time.process_time()
        for label, seconds in (("failing cycle", t1 - t0), ("FitError message", t2 - t1), ("PostFilter", t3 - t2),
                               ("victims out, preemptor in", t4 - t3), ("preemption total", t4 - t0)):
            steps[label].append(seconds)
    return {"nodes": n, "rounds": rounds, "preempted": preempted, "victims_per_preemption":
            round(victims / max(preempted, 1), 2),
            "us": {label: round(statistics.median(values) * 1e6, 1) for label, values in steps.items()}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="500,5000", help="comma-separated cluster sizes")
    ap.add_argument("--pods", type=int, default=2000, help="measured pods per size")
    ap.add_argument("--init-per-node", type=int, default=4, help="900m pods bound to each node first")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--breakdown", action="store_true", help="time each extension point and plugin call")
    ap.add_argument("--nominated", type=int, default=0, help="preemptors nominated to nodes meanwhile")
    ap.add_argument("--preempt", type=int, default=0, help="rounds of PreemptionAsync's preemption (see above)")
    ap.add_argument("--between", type=int, default=80, help="with --preempt: ordinary pods per round")
    args = ap.parse_args(argv)
    for n in (int(x) for x in args.nodes.split(",") if x):
        if args.preempt:
            out = bench_preemption(n, args.pods, args.init_per_node, args.seed, rounds=args.preempt,
                                   between=args.between, nominated=args.nominated)
            print(f"{n:>6} nodes: {out['preempted']}/{out['rounds']} preemptions, "
                  f"{out['victims_per_preemption']} victims each; CPU µs, median over rounds:", flush=True)
            for label, us in out["us"].items():
                print(f"    {label:<50} {us:>9.1f} µs")
            continue
        row = bench(n, args.pods, args.init_per_node, args.seed, breakdown=args.breakdown, nominated=args.nominated)
        print(f"{n:>6} nodes: {row['cpu_us_per_pod_min_block']:.1f} µs CPU per pod (min block of {BLOCK}), "
              f"median block {row['cpu_us_per_pod_median_block']:.1f}; {row['feasible_per_cycle']} feasible of "
              f"{row['evaluated_per_cycle']} evaluated per cycle; unschedulable {row['unschedulable']}", flush=True)
        for label, us in row["breakdown_us"].items():
            print(f"    {label:<50} {us:>7.1f} µs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
