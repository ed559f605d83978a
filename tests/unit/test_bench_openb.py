"""The openb bench on a small slice (100 nodes, 1,000 pods) through the real framework: the curve is sane.

The slice is the repository's excerpt of the trace (``loadgen/traces``): its 100 GPU nodes and
1,000 pods drawn from its pod list (sampled copies where it is shorter), as the bench's
``--pods`` mode does. Checked from the definitions: arrived and allocated GPU only grow, the
allocation never exceeds what arrived nor the cluster's capacity, and the run is reproducible.
"""

from __future__ import annotations

import argparse
import csv
import itertools
import math
import re
from pathlib import Path

import numpy as np
import pytest

from emulator.cli import CLIError
from loadgen import bench_openb, report_openb

TRACES = Path(bench_openb.__file__).resolve().parent / "traces"


def run(policy: str, seed: int = 42) -> bench_openb.RunResult:
    return bench_openb.run_one("default", policy, seed, nodes=100, pods=1000,
                               node_list=TRACES / "openb_node_list_sample.csv",
                               pod_list=TRACES / "openb_pod_list_sample.csv")


@pytest.mark.parametrize("policy", list(bench_openb.POLICIES), ids=list(bench_openb.POLICIES))
def test_allocation_curve_is_monotone_and_bounded_by_capacity(policy: str) -> None:
    result = run(policy)
    assert (result.nodes, result.pods) == (100, 1000)
    assert result.scheduled + result.failed == 1000
    arrived = [r["arrived_pct"] for r in result.rows]
    alloc = [r["alloc_pct"] for r in result.rows]
    assert all(b >= a for a, b in itertools.pairwise(arrived))
    assert all(b >= a for a, b in itertools.pairwise(alloc))
    assert all(y <= x + 1e-9 for x, y in zip(arrived, alloc, strict=True))  # never more than arrived
    assert alloc[-1] <= 100.0 + 1e-9  # never more than the cluster has
    assert arrived[-1] > 100.0 and result.failed > 0  # the slice overfills the cluster: some pods cannot fit
    frag = [r["frag_pct_total"] for r in result.rows if not math.isnan(r["frag_pct_total"])]
    assert frag and all(0.0 <= f <= 100.0 for f in frag)


def test_a_run_is_reproducible_from_its_seed(tmp_path: Path) -> None:
    first, second = run("random", 7), run("random", 7)
    assert first.rows == second.rows
    path = bench_openb.write_run(first, tmp_path)
    assert path.name == "default-random-7.csv" and len(path.read_text().splitlines()) == 1001


def test_tuning_reaches_1_3_times_capacity_with_sampled_copies() -> None:
    pods = bench_openb.trace_pods(TRACES / "openb_pod_list_sample.csv")
    capacity = 400_000  # milli-GPU: more than the excerpt's total request, so copies are needed
    tuned = bench_openb.tuned_workload(pods, capacity, seed=3)
    total = sum(int(p["spec"]["containers"][0]["resources"]["requests"].get("alibabacloud.com/gpu-milli", 0))
                for p in tuned)
    largest = max(p.gpu_milli for p in pods)
    assert 1.3 * capacity <= total < 1.3 * capacity + largest
    assert any(p["metadata"]["name"].endswith("-copy1") for p in tuned)


def test_seeds_parse_ranges_and_lists() -> None:
    assert bench_openb.parse_seeds("42-44,50") == [42, 43, 44, 50]


def test_allocation_grid_takes_the_first_pod_at_or_past_each_point() -> None:
    run_ = report_openb.OpenbRun("default", "fgd", 1, np.asarray([10.0, 40.0, 100.0, 120.0]),
                                 np.asarray([10.0, 40.0, 90.0, 95.0]), np.full(4, np.nan))
    got = report_openb.allocation_grid(run_, np.asarray([0.0, 10.0, 50.0, 100.0, 110.0, 130.0]))
    # 0 and 10 -> the first pod (arrived 10); 50 and 100 -> the pod that reached 100; 110 -> 120's; 130: never.
    assert got[:5].tolist() == [10.0, 10.0, 90.0, 90.0, 95.0] and math.isnan(got[5])


def test_report_draws_a_curve_per_trace_and_the_table_from_the_run_csvs(tmp_path: Path) -> None:
    results = [bench_openb.run_one("default", policy, seed, nodes=100, pods=400,
                                   node_list=TRACES / "openb_node_list_sample.csv",
                                   pod_list=TRACES / "openb_pod_list_sample.csv")
               for policy, seed in (("random", 1), ("random", 2), ("bestfit", 1))]
    for r in results:
        bench_openb.write_run(r, tmp_path)
        bench_openb.append_run(r, tmp_path)
    page = report_openb.write_openb_report(tmp_path).read_text()
    assert page.count("<img class=\"plot\"") == 2  # one trace: its allocation and its fragmentation curves
    assert "GPU allocation vs arrived workload: default" in page
    # The table's cells from the definition: allocation when the arrived workload first reached 100 %.
    randoms = [r.alloc_at(100) for r in results[:2]]
    mean, spread = sum(randoms) / 2, abs(randoms[0] - randoms[1]) / 2  # population std of two values
    assert f"<td class=\"num\">{mean:.1f} ± {spread:.1f}</td>" in page
    assert f"<td class=\"num\">{results[2].alloc_at(100):.1f} ± 0.0</td>" in page
    assert f"<td class=\"num\">{results[2].pods_per_s:.0f}</td>" in page  # speed from runs.csv


def openb_args(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    bench_openb.add_parser(parser.add_subparsers())
    return parser.parse_args(["openb", *argv])


@pytest.mark.parametrize(("argv", "message"), [
    (["--trace", "default,nope"], "--trace: 'default,nope': known traces are default, gpushare40, gpuspec33"),
    (["--jobs", "0"], "--jobs: 0 must be at least 1"),
    (["--policies", "fgd,tetris"], "--policies: unknown policy tetris"),
], ids=["unknown-trace", "zero-jobs", "unknown-policy"])
def test_bad_arguments_name_the_flag(argv: list[str], message: str, tmp_path: Path) -> None:
    with pytest.raises(CLIError, match=re.escape(message)):
        bench_openb.cmd_openb(openb_args(*argv, "--out", str(tmp_path)))


def test_several_traces_in_one_invocation_write_every_run_and_one_report(tmp_path: Path) -> None:
    args = openb_args("--trace", "default,gpushare40", "--policies", "bestfit", "--seeds", "3", "--nodes", "100",
                      "--pods", "150", "--node-list", str(TRACES / "openb_node_list_sample.csv"),
                      "--pod-list", str(TRACES / "openb_pod_list_sample.csv"), "--out", str(tmp_path))
    assert bench_openb.cmd_openb(args) == 0
    assert sorted(p.name for p in tmp_path.glob("*-bestfit-3.csv")) == ["default-bestfit-3.csv",
                                                                        "gpushare40-bestfit-3.csv"]
    with (tmp_path / "runs.csv").open(newline="") as f:
        runs = list(csv.DictReader(f))
    assert [(r["trace"], r["pods"]) for r in runs] == [("default", "150"), ("gpushare40", "150")]
    assert all(float(r["cpu_seconds"]) > 0 for r in runs)
    page = (tmp_path / "report.html").read_text()
    assert "GPU allocation vs arrived workload: default" in page and "vs arrived workload: gpushare40" in page
