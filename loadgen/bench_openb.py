"""``kemu bench openb``: the FGD paper's openb experiments through kemu's scheduler framework, in process.

    kemu bench openb --trace default[,gpushare40,gpuspec33] --policies fgd,packing --seeds 42-44 [--jobs 2]
                     [--nodes 0] [--pods 0] [--out DIR]
    kemu bench openb --report-from DIR

What the authors' simulator (``hkust-adsl/kubernetes-scheduler-simulator``)
does for each (trace, policy, seed), with kemu's framework and snapshot:

1. the cluster is ``openb_node_list_gpu_node.csv`` (1,213 nodes, 6,212 GPUs;
   ``--nodes N``: its first N), one Node per row with ``nvidia.com/gpu``,
   ``alibabacloud.com/gpu-milli`` and the model label;
2. the pod list is shuffled with the seed and *tuned* to 1.3 x the cluster's
   GPU capacity: pods past that are dropped, or sampled copies (with the
   seed) are added until it is reached (``--pods N``: its first N instead);
3. pods are scheduled one by one, nothing is ever deleted, each placement is
   assumed in the snapshot and reserved (the device choice), failures are
   counted;
4. after every pod: arrived GPU workload (requested milli of the pods seen /
   capacity) and GPU allocation ratio (allocated / capacity); at every 2 %
   of arrived workload the fragmentation of the cluster against the target
   workload (the task types of the tuned pod list, FGD's M; ``--popularity
   95`` keeps only the top types covering 95 % of the pods, as the
   simulator's example configuration), as % of all GPUs and of idle GPUs.

The profile is a KubeSchedulerConfiguration: PrioritySort, NodeResourcesFit
(Filter only), GPUShare (device Filter and Reserve) and the policy's Score
plugin, ``percentageOfNodesToScore: 100``. Output: one CSV per run
(``<trace>-<policy>-<seed>.csv``), ``runs.csv`` (one line per run, with its
speed), ``summary.csv``, a table of the allocation ratio at 100 % and 130 %
arrived workload (mean ± std over seeds) and ``report.html``: the paper's
curves (allocation % vs arrived workload per policy) of every run in the
directory (:mod:`loadgen.report_openb`; ``--report-from DIR`` redraws it
without running, e.g. after three traces were written into one ``--out``).
"""

from __future__ import annotations

import argparse
import csv
import math
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from emulator.api.gpu import (
    GPU_MILLI_RESOURCE,
    GPU_MODEL_LABEL,
    GPU_RESOURCE,
    MILLI,
    TargetWorkload,
    fragmentation,
    gpu_request,
)
from emulator.cli import CLIError
from emulator.scheduler import Snapshot
from emulator.scheduler.config import build_frameworks, parse_configuration
from emulator.scheduler.framework.interface import CycleState
from emulator.scheduler.framework.types import CPU, PodInfo, ScheduleResult
from emulator.scheduler.plugins import in_tree_factories
from loadgen.trace import TracePod
from loadgen.trace import pods as trace_pods

DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "openb"
POLICIES = {"random": "GPURandom", "dotprod": "GPUDotProduct", "clustering": "GPUClustering",
            "packing": "GPUPacking", "bestfit": "GPUBestFit", "fgd": "GPUFragmentation"}
TRACES = ("default", "gpushare40", "gpuspec33")
TUNE_RATIO = 1.3
FRAG_STEP = 0.02  # fragmentation sampled every 2 % of arrived workload


def dataset_dir() -> Path:
    for candidate in (DATASET, Path("/work/shared/datasets/openb")):
        if candidate.is_dir():
            return candidate
    return DATASET


def openb_nodes(path: Path, limit: int = 0) -> list[dict[str, Any]]:
    """The openb node list as Node objects (allocatable = the row; the model as label)."""
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if limit:
        rows = rows[:limit]
    nodes = []
    for r in rows:
        gpus = int(r["gpu"] or 0)
        allocatable = {"cpu": f"{r['cpu_milli']}m", "memory": f"{r['memory_mib']}Mi", "pods": "10000"}
        labels = {"kubernetes.io/hostname": r["sn"]}
        if gpus:
            allocatable[GPU_RESOURCE] = str(gpus)
            allocatable[GPU_MILLI_RESOURCE] = str(gpus * MILLI)
            labels[GPU_MODEL_LABEL] = r["model"].strip()
        nodes.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": r["sn"], "labels": labels},
                      "spec": {}, "status": {"capacity": dict(allocatable), "allocatable": allocatable}})
    return nodes


def pod_object(p: TracePod, suffix: str = "") -> dict[str, Any]:
    requests = {"cpu": f"{p.cpu_milli}m", "memory": f"{p.memory_mib}Mi"}
    if p.gpu_milli:
        requests[GPU_MILLI_RESOURCE] = str(p.gpu_milli)
    annotations = {GPU_MODEL_LABEL: p.gpu_spec} if p.gpu_spec else {}
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": p.name + suffix, "namespace": "openb", "annotations": annotations},
            "spec": {"containers": [{"name": "main", "image": "openb", "resources": {"requests": requests}}]}}


def tuned_workload(pods: Sequence[TracePod], capacity_milli: int, seed: int,
                   ratio: float = TUNE_RATIO) -> list[dict[str, Any]]:
    """Shuffle with ``seed``, then drop or add sampled copies until the GPU request is ``ratio`` x capacity."""
    rng = random.Random(seed)
    order = list(pods)
    rng.shuffle(order)
    target = ratio * capacity_milli
    out: list[dict[str, Any]] = []
    total = 0
    for p in order:
        if total >= target:
            break
        out.append(pod_object(p))
        total += p.gpu_milli
    copies = 0
    gpu_pods = [p for p in pods if p.gpu_milli]
    while total < target and gpu_pods:
        p = rng.choice(pods)
        copies += 1
        out.append(pod_object(p, f"-copy{copies}"))
        total += p.gpu_milli
    return out


def framework_for(policy: str, seed: int, workload: TargetWorkload) -> Any:
    plugin = POLICIES[policy]
    args: list[dict[str, Any]] = []
    if plugin == "GPURandom":
        args.append({"name": plugin, "args": {"seed": seed}})
    if plugin == "GPUFragmentation":
        args.append({"name": plugin, "args": {"targetWorkload": [
            {"cpuMilli": cpu, "gpuCount": count, "gpuMilli": milli, "models": sorted(models), "weight": p}
            for (cpu, count, milli, models), p in workload.types.items()]}})
    doc = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
           "percentageOfNodesToScore": 100,
           "profiles": [{"schedulerName": f"openb-{policy}", "plugins": {
               "multiPoint": {"enabled": [{"name": "PrioritySort"}, {"name": "GPUShare"},
                                          {"name": plugin, "weight": 1}], "disabled": [{"name": "*"}]},
               "filter": {"enabled": [{"name": "NodeResourcesFit"}]}}, "pluginConfig": args}]}
    registry = in_tree_factories()
    config = parse_configuration(doc, available=list(registry))
    return build_frameworks(config, registry, rng=random.Random(seed))[f"openb-{policy}"]


@dataclass
class RunResult:
    trace: str
    policy: str
    seed: int
    nodes: int
    pods: int
    scheduled: int
    failed: int
    seconds: float
    rows: list[dict[str, float]]
    cpu_seconds: float = 0.0  # the process's CPU time over the same loop: what a loaded machine cannot inflate much

    @property
    def pods_per_s(self) -> float:
        return self.pods / self.seconds if self.seconds else 0.0

    def alloc_at(self, arrived: float) -> float:
        """Allocation ratio (%) when the arrived workload first reaches ``arrived`` (%)."""
        for row in self.rows:
            if row["arrived_pct"] >= arrived - 1e-9:
                return row["alloc_pct"]
        return self.rows[-1]["alloc_pct"] if self.rows else 0.0


def cluster_fragmentation(snapshot: Snapshot, models: np.ndarray, workload: TargetWorkload) -> float:
    cpu_free = snapshot.allocatable(CPU) - snapshot.requested(CPU)
    return float(fragmentation(snapshot.device_free(), cpu_free, models, workload).sum())


def run_one(trace: str, policy: str, seed: int, *, nodes: int = 0, pods: int = 0, dataset: Path | None = None,
            node_list: Path | None = None, pod_list: Path | None = None, popularity: float = 100.0) -> RunResult:
    """One (trace, policy, seed) run; ``node_list``/``pod_list`` override the dataset's files (CI uses excerpts)."""
    base = dataset or dataset_dir()
    node_objs = openb_nodes(node_list or base / "openb_node_list_gpu_node.csv", nodes)
    snapshot = Snapshot.build(node_objs)
    capacity = int(snapshot.device_capacity().sum())
    listed = trace_pods(pod_list or base / f"openb_pod_list_{trace}.csv")
    if pods:
        rng = random.Random(seed)
        listed = list(listed)
        rng.shuffle(listed)
        workload_pods = [pod_object(p) for p in listed[:pods]]
        while len(workload_pods) < pods:  # a short list: sampled copies, as the tuning adds them
            workload_pods.append(pod_object(rng.choice(listed), f"-copy{len(workload_pods)}"))
    else:
        workload_pods = tuned_workload(listed, capacity, seed)
    requests = [gpu_request(p) for p in workload_pods]
    cpus = [int(p["spec"]["containers"][0]["resources"]["requests"]["cpu"][:-1]) for p in workload_pods]
    # FGD's target workload M: the task types of the workload (CPU-only ones included, as the authors'
    # typicalPodsConfig.isInvolvedCpuPods), the most popular covering `popularity` % of the pods. The
    # simulator's example config cuts at 95 %, which drops the rare 8-GPU pods (0.5 % of the pods, 6 % of
    # the GPU asked): FGD then strands every idle 8-GPU node (see docs/architecture.md). Default: all types.
    target = TargetWorkload.from_requests(zip(cpus, requests, strict=True), popularity=popularity,
                                          include_cpu=True)
    fwk = framework_for(policy, seed, target)
    fwk.set_snapshot(snapshot)
    column = snapshot.label_column(GPU_MODEL_LABEL)
    models = np.asarray([*column.values, ""], dtype=object)[column.codes]
    rows: list[dict[str, float]] = []
    arrived = allocated = 0
    failed = 0
    next_frag = 0.0
    start, cpu_start = time.perf_counter(), time.process_time()
    for pod, request in zip(workload_pods, requests, strict=True):
        info = PodInfo(pod)
        state = CycleState()
        arrived += request.total_milli
        result = fwk.schedule_one(info, snapshot, state=state)
        if isinstance(result, ScheduleResult):
            snapshot.assume(info, result.node_index)
            status = fwk.run_reserve_plugins_reserve(state, info, result.node)
            if status is not None and not status.is_success():
                snapshot.forget(info, result.node_index)
                failed += 1
            else:
                allocated += request.total_milli
        else:
            failed += 1
        row = {"arrived_pct": 100.0 * arrived / capacity, "alloc_pct": 100.0 * allocated / capacity,
               "frag_pct_total": math.nan, "frag_pct_idle": math.nan}
        if row["arrived_pct"] / 100.0 >= next_frag:
            frag = cluster_fragmentation(snapshot, models, target)
            idle = capacity - int(snapshot.device_capacity().sum() - snapshot.device_free().sum())
            row["frag_pct_total"] = 100.0 * frag / capacity
            row["frag_pct_idle"] = 100.0 * frag / idle if idle else 0.0
            next_frag += FRAG_STEP
        rows.append(row)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    return RunResult(trace, policy, seed, len(node_objs), len(workload_pods), len(workload_pods) - failed, failed,
                     seconds, rows, cpu_seconds)


def write_run(result: RunResult, out: Path) -> Path:
    path = out / f"{result.trace}-{result.policy}-{result.seed}.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["pod", "arrived_pct", "alloc_pct", "frag_pct_total", "frag_pct_idle"])
        writer.writeheader()
        for i, row in enumerate(result.rows):
            writer.writerow({"pod": i + 1, **{k: ("" if math.isnan(v) else f"{v:.4f}") for k, v in row.items()}})
    return path


RUNS_FIELDS = ["trace", "policy", "seed", "nodes", "pods", "scheduled", "failed", "seconds", "pods_per_s",
               "cpu_seconds"]


def append_run(result: RunResult, out: Path) -> None:
    """One line per run in ``runs.csv`` (kept across invocations: the report reads the speeds there)."""
    path = out / "runs.csv"
    new = not path.is_file()
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=RUNS_FIELDS)
        if new:
            writer.writeheader()
        writer.writerow({"trace": result.trace, "policy": result.policy, "seed": result.seed, "nodes": result.nodes,
                         "pods": result.pods, "scheduled": result.scheduled, "failed": result.failed,
                         "seconds": f"{result.seconds:.3f}", "pods_per_s": f"{result.pods_per_s:.1f}",
                         "cpu_seconds": f"{result.cpu_seconds:.3f}"})


def parse_seeds(text: str) -> list[int]:
    seeds: list[int] = []
    for raw in text.split(","):
        part = raw.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            seeds.extend(range(int(lo), int(hi) + 1))
        elif part:
            seeds.append(int(part))
    return seeds


def summarize(results: Sequence[RunResult]) -> list[dict[str, Any]]:
    table = []
    keys = sorted({(r.trace, r.policy) for r in results}, key=lambda k: (k[0], list(POLICIES).index(k[1])))
    for trace, policy in keys:
        runs = [r for r in results if (r.trace, r.policy) == (trace, policy)]
        row: dict[str, Any] = {"trace": trace, "policy": policy, "runs": len(runs)}
        for at in (100.0, 130.0):
            values = [r.alloc_at(at) for r in runs]
            row[f"alloc_pct_at_{int(at)}"] = statistics.fmean(values)
            row[f"alloc_std_at_{int(at)}"] = statistics.pstdev(values) if len(values) > 1 else 0.0
        row["pods_per_s"] = statistics.fmean(r.pods_per_s for r in runs)
        row["cpu_seconds"] = statistics.fmean(r.cpu_seconds for r in runs)
        table.append(row)
    return table


def cmd_openb(args: argparse.Namespace) -> int:
    from loadgen.report_openb import write_openb_report

    if args.report_from:
        source = Path(args.report_from)
        if not source.is_dir():
            raise CLIError(f"--report-from: {source} is not a directory")
        print(f"report: {write_openb_report(source)}")
        return 0
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if unknown or not policies:
        raise CLIError(f"--policies: unknown policy {', '.join(unknown) or '(none given)'}; "
                       f"known: {', '.join(POLICIES)}")
    try:
        seeds = parse_seeds(args.seeds)
    except ValueError:
        raise CLIError(f"--seeds: {args.seeds!r} is not a seed list (e.g. 42-51 or 42,43)") from None
    traces = [t.strip() for t in args.trace.split(",") if t.strip()]
    if not traces or any(t not in TRACES for t in traces):
        raise CLIError(f"--trace: {args.trace!r}: known traces are {', '.join(TRACES)} (comma-separated)")
    if args.jobs < 1:
        raise CLIError(f"--jobs: {args.jobs} must be at least 1")
    out = Path(args.out or f"kemu-runs/openb-{'-'.join(traces)}")
    out.mkdir(parents=True, exist_ok=True)
    options: dict[str, Any] = {
        "nodes": args.nodes, "pods": args.pods, "dataset": Path(args.dataset) if args.dataset else None,
        "node_list": Path(args.node_list) if args.node_list else None,
        "pod_list": Path(args.pod_list) if args.pod_list else None, "popularity": args.popularity}
    matrix = [(trace, policy, seed) for trace in traces for policy in policies for seed in seeds]
    results: list[RunResult] = []

    def done(result: RunResult) -> None:
        write_run(result, out)
        append_run(result, out)
        results.append(result)
        print(f"{result.trace} {result.policy:>10} seed {result.seed}: {result.pods} pods on {result.nodes} nodes "
              f"in {result.seconds:.1f} s ({result.pods_per_s:.0f} pods/s; {result.cpu_seconds:.1f} s CPU), "
              f"failed {result.failed}, "
              f"alloc at 100% {result.alloc_at(100):.1f}%, at 130% {result.alloc_at(130):.1f}%", flush=True)

    start = time.perf_counter()
    if args.jobs == 1:
        for trace, policy, seed in matrix:
            done(run_one(trace, policy, seed, **options))
    else:
        # Runs are independent (each its own snapshot and framework): one process per core.
        from concurrent.futures import ProcessPoolExecutor, as_completed

        with ProcessPoolExecutor(max_workers=args.jobs) as pool:
            futures = [pool.submit(run_one, trace, policy, seed, **options) for trace, policy, seed in matrix]
            for future in as_completed(futures):
                done(future.result())
    print(f"{len(matrix)} runs in {time.perf_counter() - start:.1f} s wall ({args.jobs} job(s))")
    table = summarize(results)
    with (out / "summary.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(table[0]))
        writer.writeheader()
        writer.writerows(table)
    print(f"\n{'trace':<11} {'policy':<11} runs  alloc@100%      alloc@130%      pods/s  CPU s/run")
    for row in table:
        print(f"{row['trace']:<11} {row['policy']:<11} {row['runs']:>4}  {row['alloc_pct_at_100']:5.1f} ± "
              f"{row['alloc_std_at_100']:4.1f}    {row['alloc_pct_at_130']:5.1f} ± {row['alloc_std_at_130']:4.1f}"
              f"    {row['pods_per_s']:6.0f}  {row['cpu_seconds']:9.1f}")
    # The curves of every run in the directory (other traces written there too), as the paper's figures.
    print(f"\nreport: {write_openb_report(out)}")
    return 0


def add_parser(sub: Any) -> None:
    """``bench openb`` under the ``bench`` subcommand's parsers."""
    p = sub.add_parser("openb", help="the FGD paper's openb experiments (in process, no cluster)")
    p.add_argument("--trace", default="default", help=f"one or more of {', '.join(TRACES)}, comma-separated")
    p.add_argument("--policies", default=",".join(POLICIES), help=f"comma-separated: {', '.join(POLICIES)}")
    p.add_argument("--seeds", default="42", help="e.g. 42-51 or 42,43")
    p.add_argument("--nodes", type=int, default=0, help="use the first N nodes of the node list (0: all)")
    p.add_argument("--pods", type=int, default=0, help="N shuffled pods instead of the tuned 1.3x workload")
    p.add_argument("--dataset", help=f"the openb directory (default {dataset_dir()})")
    p.add_argument("--node-list", help="a node list CSV instead of the dataset's openb_node_list_gpu_node.csv")
    p.add_argument("--pod-list", help="a pod list CSV instead of the dataset's openb_pod_list_<trace>.csv")
    p.add_argument("--popularity", type=float, default=100.0,
                   help="FGD's target workload: the top task types covering this %% of the pods (simulator: 95)")
    p.add_argument("--out", help="output directory (default kemu-runs/openb-<trace>)")
    p.add_argument("--jobs", type=int, default=1,
                   help="runs in parallel, one process each (the matrix is embarrassingly parallel; 1: in process)")
    p.add_argument("--report-from", metavar="DIR",
                   help="run nothing: write DIR/report.html from the run CSVs already in DIR")
    p.set_defaults(fn=cmd_openb)
