"""``kemu run --compare``: one scenario, several variants on the same seed, and their results side by side.

A scenario's ``compare`` section names variants, each overriding the
``schedulers`` section (e.g. a KubeSchedulerConfiguration with ``LoadAware``)
and/or ``controller_manager`` (e.g. the descheduler switched on). The runs
go one after another, each in a fresh cluster, each with its own JSON
summary and HTML report (``<dir>/<variant>/``); then a table compares them
-- the load-aware effectiveness metrics (:mod:`emulator.scheduler.effectiveness`),
the node utilization spread (:mod:`loadgen.utilization`), evictions, OOM
kills and CPU-throttled pods, scheduling latency -- printed and written as ``compare.json`` and
``compare.html`` (with the utilization of every variant on one plot).
"""

from __future__ import annotations

import html
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loadgen import plan as planning
from loadgen.scenario import Scenario, ScenarioError

if TYPE_CHECKING:
    from emulator.config import Config
    from loadgen.runner import RunOptions

__all__ = ["comparison_rows", "merge_effectiveness", "run_compare"]


def merge_effectiveness(stats: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per profile across scheduler replicas: counts summed, utilization averages weighted by binds."""
    merged: dict[str, dict[str, Any]] = {}
    for row in stats:
        for profile, e in (row.get("effectiveness") or {}).items():
            m = merged.setdefault(profile, {"total": 0, "effective": 0.0, "cpu": [0.0, 0], "mem": [0.0, 0]})
            total = e.get("total_schedule_count") or 0
            m["total"] += total
            m["effective"] += e.get("effective_dynamic_schedule_count") or 0.0
            for key, name in (("cpu", "cpu_utilization_total_avg"), ("mem", "memory_utilization_total_avg")):
                if e.get(name) is not None:
                    m[key][0] += e[name] * total
                    m[key][1] += total
    return {profile: {
        "cpu_utilization_total_avg": m["cpu"][0] / m["cpu"][1] if m["cpu"][1] else None,
        "memory_utilization_total_avg": m["mem"][0] / m["mem"][1] if m["mem"][1] else None,
        "effective_dynamic_schedule_count": m["effective"],
        "total_schedule_count": m["total"],
        "effective_schedule_ratio": m["effective"] / m["total"] if m["total"] else None,
    } for profile, m in merged.items() if m["total"]}


def _sum_profiles(summary: dict[str, Any]) -> dict[str, Any]:
    """The effectiveness over every profile of a run (its pods may use several scheduler names)."""
    effectiveness = summary.get("effectiveness") or {}
    return merge_effectiveness([{"effectiveness": {"all": v}} for v in effectiveness.values()]).get("all", {})


def _pct(v: Any) -> str:
    return "-" if v is None else f"{v:.1%}"


def _num(v: Any) -> str:
    return "-" if v is None else f"{v:g}"


ROWS: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
    ("effective_schedule_ratio", lambda s: _pct(_sum_profiles(s).get("effective_schedule_ratio"))),
    ("effective_dynamic_schedule_count", lambda s: _num(_sum_profiles(s).get("effective_dynamic_schedule_count"))),
    ("total_schedule_count", lambda s: _num(_sum_profiles(s).get("total_schedule_count"))),
    ("cpu_utilization_total_avg", lambda s: _pct(_sum_profiles(s).get("cpu_utilization_total_avg"))),
    ("memory_utilization_total_avg", lambda s: _pct(_sum_profiles(s).get("memory_utilization_total_avg"))),
    ("node cpu p50 (mean over time)", lambda s: _pct(((s.get("nodeUtilization") or {}).get("cpu") or {}).get("p50"))),
    ("node cpu p90", lambda s: _pct(((s.get("nodeUtilization") or {}).get("cpu") or {}).get("p90"))),
    ("node cpu max", lambda s: _pct(((s.get("nodeUtilization") or {}).get("cpu") or {}).get("max"))),
    ("node cpu worst max", lambda s: _pct(((s.get("nodeUtilization") or {}).get("cpu") or {}).get("worstMax"))),
    ("node memory p50", lambda s: _pct(((s.get("nodeUtilization") or {}).get("memory") or {}).get("p50"))),
    ("node memory p90", lambda s: _pct(((s.get("nodeUtilization") or {}).get("memory") or {}).get("p90"))),
    ("node memory max", lambda s: _pct(((s.get("nodeUtilization") or {}).get("memory") or {}).get("max"))),
    ("pods evicted", lambda s: _num((s.get("evictions") or {}).get("podsEvicted"))),
    ("eviction events", lambda s: _num((s.get("evictions") or {}).get("events"))),
    ("containers OOMKilled", lambda s: _num((s.get("oomKills") or {}).get("containersOOMKilled"))),
    ("OOM kill events", lambda s: _num((s.get("oomKills") or {}).get("events"))),
    ("pods CPU-throttled", lambda s: _num((s.get("cpuThrottling") or {}).get("podsThrottled"))),
    ("throttled CFS periods", lambda s: _num((s.get("cpuThrottling") or {}).get("throttledPeriods"))),
    ("pods scheduled", lambda s: _num((s.get("pods") or {}).get("scheduled"))),
    ("pods unscheduled", lambda s: _num((s.get("pods") or {}).get("unscheduled"))),
    ("SLI latency p50 ms", lambda s: _num(((s.get("scheduling") or {}).get("sliLatencyMs") or {}).get("p50"))),
    ("SLI latency p99 ms", lambda s: _num(((s.get("scheduling") or {}).get("sliLatencyMs") or {}).get("p99"))),
]


def comparison_rows(summaries: dict[str, dict[str, Any]]) -> list[list[str]]:
    """The side-by-side table: a header row (metric, variant...), then one row per metric and per node pool."""
    pools = sorted({pool for s in summaries.values() for pool in s.get("podsPerPool") or {}})
    per_pool = [(f"pods on pool {pool or '-'}", lambda s, pool=pool: _num((s.get("podsPerPool") or {}).get(pool, 0)))
                for pool in pools]
    return [["metric", *summaries], *([name, *(fn(s) for s in summaries.values())] for name, fn in [*ROWS, *per_pool])]


def format_table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in
                               enumerate(zip(row, widths, strict=True))) for row in rows)


def write_compare_html(rows: list[list[str]], series: dict[str, Any], title: str, path: Path) -> Path:
    from loadgen.report import CSS, _figure_or_none, utilization_figure

    head = "".join(f"<th>{html.escape(c)}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows[1:])
    plot = _figure_or_none(utilization_figure([(name, s.utilization) for name, s in series.items()]),
                           "Measured node CPU utilization across nodes: max (solid), p90 (dashed), p50 (dotted), "
                           "one colour per variant.")
    page = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><link rel=\"icon\" href=\"data:,\">"
            f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body><main>"
            f"<header><h1>{html.escape(title)}</h1></header>"
            f"<section><h2>Side by side</h2><table><tr>{head}</tr>{body}</table></section>"
            f"<section><h2>Node utilization</h2>{plot}</section></main></body></html>\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


def run_compare(path: Path, cfg: Config, options: RunOptions, *, kubelets: Any = None,
                schedulers: Any = None, controllers: Any = None) -> int:
    """Run every ``compare`` variant of the scenario at ``path``; print and write the comparison."""
    import tempfile
    import time

    from loadgen import runner
    from loadgen.report import json_safe, write_json

    try:
        base = Scenario.load(path)
        if options.seed is not None:
            base = replace(base, seed=options.seed)
        if not base.compare:
            raise ScenarioError("--compare needs a `compare` section naming the variants to run")
    except (ScenarioError, ValueError, OSError) as e:
        print(f"kemu: error: {e}", file=sys.stderr)
        return 1
    out_dir = Path(options.output).parent if options.output else Path("kemu-runs") / f"{base.name}-{base.seed}-compare"
    summaries: dict[str, dict[str, Any]] = {}
    series: dict[str, Any] = {}
    ok = True
    for variant in base.compare:
        scenario = base.variant(variant)
        plan = planning.build(scenario)
        t0 = time.perf_counter()
        print(f"\nkemu run --compare: variant {variant!r}", flush=True)
        with tempfile.TemporaryDirectory(prefix="kemu-run-") as tmp:
            summary, s = runner._run_local(cfg, scenario, plan, Path(tmp), t0, kubelets=kubelets,
                                           schedulers=schedulers, controllers=controllers)
        summary["wallSeconds"] = round(time.perf_counter() - t0, 2)
        summary["variant"] = variant
        runner._print_summary(summary)
        vdir = out_dir / variant
        runner._write_outputs(summary, s, scenario, replace(options, output=str(vdir / "summary.json"),
                                                            report=str(vdir / "report.html")))
        summaries[variant], series[variant] = summary, s
        ok = ok and bool(summary["ok"])
    rows = comparison_rows(summaries)
    print(f"\nkemu run --compare: {base.name} (seed {base.seed})\n{format_table(rows)}")
    write_json(json_safe({"scenario": base.name, "seed": base.seed, "table": rows,
                          "runs": summaries}), out_dir / "compare.json")
    report = write_compare_html(rows, series, f"kemu run --compare: {base.name} (seed {base.seed})",
                                out_dir / "compare.html")
    print(f"  comparison    {out_dir / 'compare.json'}, {report}")
    return 0 if ok else 2
