"""The run report (loadgen.report): self-contained HTML with every section, empty runs, NaN-free JSON."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loadgen.bench_report import synthetic_run
from loadgen.report import RunSeries, _binned_quantiles, write_json, write_report

SECTIONS = ("headline", "schedulers", "sli-histogram", "sli-over-time", "throughput", "node-allocation", "summary")
PLOT_SECTIONS = ("sli-histogram", "sli-over-time", "throughput", "node-utilization", "node-allocation")


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


def test_100k_pods_give_a_page_of_bounded_size(tmp_path: Path) -> None:
    # How long this takes is measured by `python -m loadgen.bench_report`, not asserted here.
    summary, series = synthetic_run(pods=100_000, nodes=5_000)
    page = write_report(summary, series, tmp_path / "report.html").read_text()
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


def test_autoscalers_get_a_replicas_vs_load_section(tmp_path: Path) -> None:
    summary, series = synthetic_run(pods=50, nodes=4)
    page = write_report(summary, series, tmp_path / "plain.html").read_text()
    assert 'id="autoscaling"' not in page  # no autoscalers, no section
    t = [float(i) for i in range(10)]
    hpa_series = {"time": t, "clusterTime": [10 * x for x in t], "load": [300.0] * 5 + [1000.0] * 5,
                  "desired": [3] * 6 + [10] * 4, "current": [3] * 7 + [10] * 3, "replicas": [3] * 6 + [10] * 4,
                  "ready": [3] * 8 + [10] * 2}
    vpa_series = {"time": t, "clusterTime": t, "cpuTarget": [None] * 3 + [0.35] * 7, "cpuRequest": [0.1] * 10,
                  "memoryTarget": [None] * 10, "memoryRequest": [1e8] * 10, "pods": [3] * 10}
    summary["autoscaling"] = {
        "hpas": {"default/web": {"target": "Deployment/web", "loadTarget": "web", "metrics": ["Pods"],
                                 "minReplicas": 3, "maxReplicas": 10, "replicas": {"min": 3, "max": 10},
                                 "series": hpa_series}},
        "vpas": {"default/api": {"target": "Deployment/api", "mode": "Auto", "cpuTarget": 0.35,
                                 "series": vpa_series}}}
    page = write_report(summary, series, tmp_path / "report.html").read_text()
    assert 'src="data:image/png;base64,' in section(page, "autoscaling")
    assert "Replicas vs load over time" in page
    tables = section(page, "summary")
    assert "Deployment/web" in tables and "cluster time" not in tables  # the series are plotted, not tabled
