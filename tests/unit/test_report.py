"""The run report (loadgen.report): self-contained HTML with every section, empty runs, NaN-free JSON."""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loadgen.report import RunSeries, _binned_quantiles, write_json, write_report

SECTIONS = ("headline", "schedulers", "sli-histogram", "sli-over-time", "throughput", "node-allocation", "summary")
PLOT_SECTIONS = ("sli-histogram", "sli-over-time", "throughput", "node-allocation")


def synthetic_run(pods: int = 5_000, nodes: int = 300, seed: int = 7) -> tuple[dict[str, Any], RunSeries]:
    """A plausible run: Poisson-ish arrivals at 500/s, log-normal SLI and startup latencies, 2% never bound."""
    rng = np.random.default_rng(seed)
    span = pods / 500
    added = np.sort(rng.uniform(0, span, pods))
    bound = added + rng.lognormal(math.log(0.02), 1.0, pods)
    ready = bound + rng.lognormal(math.log(1.5), 0.3, pods)
    never = rng.choice(pods, pods // 50, replace=False)
    bound_l: list[float | None] = bound.tolist()
    ready_l: list[float | None] = ready.tolist()
    for i in never:
        bound_l[i] = ready_l[i] = None
    cpu = {f"node-{i}": float(x) for i, x in enumerate(rng.beta(5, 2, nodes) * 1.1)}
    memory = {k: v * 0.7 for k, v in cpu.items()}
    summary: dict[str, Any] = {
        "scenario": "steady", "seed": seed, "ok": True, "wallSeconds": round(span + 5, 2),
        "cluster": {"nodes": nodes, "nodesReady": nodes, "schedulers": 2, "namespaces": 10},
        "pods": {"requested": pods, "created": pods, "scheduled": pods - len(never), "running": pods - len(never),
                 "pending": len(never), "failed": 0},
        "scheduling": {"podsPerSecond": 497.3, "sliLatencyMs": {"p50": 20.1, "p90": 71.2, "p99": 201.0}},
        "podStartupMs": {"p50": 1520.0, "p99": 2990.5},
        "oomKills": {"events": 3, "containersOOMKilled": 3},
        "evictions": {"events": 0, "podsEvicted": 0},
        "schedulers": [{"name": f"kemu-scheduler-{i}", "attempts": pods // 2 + 40 + i, "scheduled": pods // 2,
                        "conflicts": 40 + i} for i in range(2)],
        "kubectl": {"available": True, "server": "https://127.0.0.1:6443",  # text, not a resource to fetch
                    "sample": ["NAME         READY   STATUS", "pod-000000   1/1     Running"]},
    }
    phases = [("ramp", 0.0, span * 0.2), ("steady", span * 0.2, span), ("settle", span, span + 3)]
    return summary, RunSeries(added.tolist(), bound_l, ready_l, cpu, memory, phases)


def section(page: str, anchor: str) -> str:
    m = re.search(rf'<section id="{anchor}">(.*?)</section>', page, re.S)
    assert m, f"no section {anchor}"
    return m.group(1)


def test_report_is_self_contained_with_every_section(tmp_path: Path) -> None:
    summary, series = synthetic_run()
    path = write_report(summary, series, tmp_path / "out" / "report.html")
    assert path.is_file()
    page = path.read_text()
    # Nothing to fetch: every src/href is a data: URL (or an in-page anchor); no scripts, no CSS imports.
    refs = re.findall(r"""\b(?:src|href)\s*=\s*["']?([^"'\s>]*)""", page, re.I)
    assert refs and all(r.startswith(("data:", "#")) for r in refs), [r[:40] for r in refs]
    assert not re.search(r"url\(|@import|<script|<iframe|<object|<embed", page, re.I)
    assert "https://127.0.0.1:6443" in page  # the summary's text is shown, as text
    for anchor in SECTIONS:
        assert "no data" not in section(page, anchor)
    for anchor in PLOT_SECTIONS:
        assert 'src="data:image/png;base64,' in section(page, anchor)
    headline = section(page, "headline")
    for label in ("pods created", "SLI latency p99", "pod startup p50", "OOM kills"):
        assert label in headline
    assert "201" in headline and "1,520" in headline
    assert "1.57%" in section(page, "schedulers")  # conflict fraction 40 / 2540, derived per scheduler


def test_summary_is_rendered_generically_and_escaped(tmp_path: Path) -> None:
    summary, series = synthetic_run(pods=200, nodes=10)
    summary["scenario"] = "<script>alert(1)</script>"
    summary["futureSection"] = {"widgetCount": 12345, "nested": {"deepValue": "x&y"}, "rows": [{"a": 1}, {"b": 2}]}
    page = write_report(summary, series, tmp_path / "report.html").read_text()
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    tables = section(page, "summary")
    assert "future section" in tables and "widget count" in tables and "12,345" in tables
    assert "deep value" in tables and "x&amp;y" in tables


@pytest.mark.parametrize("summary", [{}, synthetic_run(pods=10, nodes=2)[0]], ids=["empty-summary", "summary"])
def test_empty_series_says_no_data(tmp_path: Path, summary: dict[str, Any]) -> None:
    page = write_report(summary, RunSeries([], [], [], {}, {}), tmp_path / "report.html").read_text()
    for anchor in PLOT_SECTIONS:
        assert "no data" in section(page, anchor)
    assert "<img" not in page


def test_pods_that_never_bind_still_plot_what_happened(tmp_path: Path) -> None:
    """A scenario without nodes: pods are created, none binds; the throughput plot still shows the creates."""
    series = RunSeries([0.1 * i for i in range(100)], [None] * 100, [None] * 100, {}, {}, [("load", 0.0, 10.0)])
    page = write_report({"scenario": "no-nodes", "schedulers": []}, series, tmp_path / "report.html").read_text()
    assert "<img" in section(page, "throughput")
    for anchor in ("sli-histogram", "sli-over-time", "node-allocation"):
        assert "no data" in section(page, anchor)
    assert "no schedulers reported" in section(page, "schedulers")


def test_series_of_different_lengths_are_rejected(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="differ in length"):
        write_report({}, RunSeries([0.0, 1.0], [None], [None, None], {}, {}), tmp_path / "report.html")


def test_100k_pods_in_a_few_seconds(tmp_path: Path) -> None:
    summary, series = synthetic_run(pods=100_000, nodes=5_000)
    t = time.perf_counter()
    page = write_report(summary, series, tmp_path / "report.html").read_text()
    # ~1.4 s on two cores; the bound is loose so a busy CI machine does not fail it, but a per-pod
    # plotting loop (minutes) would.
    assert time.perf_counter() - t < 10
    assert len(page) < 3_000_000  # the scatter is sampled and rasterised: no megabytes of points


def test_json_has_no_nan(tmp_path: Path) -> None:
    summary = {"a": float("nan"), "b": {"p99": float("inf"), "n": np.int64(3), "x": np.float64("nan")},
               "c": [float("-inf"), 1.5, (2, np.float32(0.5))], "path": Path("/tmp/x")}
    path = write_json(summary, tmp_path / "sub" / "summary.json")
    text = path.read_text()
    assert "NaN" not in text and "Infinity" not in text

    def reject(name: str) -> None:
        raise AssertionError(f"{name} in JSON")

    loaded = json.loads(text, parse_constant=reject)
    assert loaded == {"a": None, "b": {"p99": None, "n": 3, "x": None}, "c": [None, 1.5, [2, 0.5]], "path": "/tmp/x"}
    assert text.startswith('{\n  "a"')  # indent 2


def test_binned_quantiles_match_nearest_rank_per_bin() -> None:
    rng = np.random.default_rng(3)
    x, y = rng.uniform(0, 20, 2_000), rng.exponential(1.0, 2_000)
    centres, p50, p99 = _binned_quantiles(x, y, 2.0, (0.5, 0.99))
    assert len(centres) == 10
    for c, a, b in zip(centres, p50, p99, strict=True):
        in_bin = np.sort(y[(x >= c - 1.0) & (x < c + 1.0)])
        assert a == in_bin[int(0.5 * len(in_bin))]
        assert b == in_bin[min(len(in_bin) - 1, int(0.99 * len(in_bin)))]
