"""The HTML report of ``kemu bench openb``: the FGD paper's curves from the bench's per-run CSVs.

The paper (Weng et al., USENIX ATC '23, figures 7-9) plots, per trace, the GPU
allocation ratio against the arrived workload (both as % of the cluster's GPU
capacity) with one curve per policy: the higher a curve stays past 100 %, the
less the policy strands. This page draws those curves from the files
``kemu bench openb`` writes (``<trace>-<policy>-<seed>.csv``, one row per
pod), so runs of several traces written into one ``--out`` directory land in
one report:

* per trace, allocation % vs arrived workload %: the mean over seeds on a
  common grid (every 0.5 % of arrived workload; a run's value at x is its
  allocation when the arrived workload first reached x) with the min-max
  band over seeds, and the ideal ``min(x, 100)`` dashed;
* per trace, the fragmentation (% of the cluster's GPUs) the bench samples
  every 2 % of arrived workload, mean over seeds;
* the table of allocation at 100 % and 130 % arrived (mean ± population std
  over seeds) and the runs' speed when ``runs.csv`` has it.

Built as :mod:`loadgen.report` builds the run report: one self-contained
file (inline CSS, PNGs as ``data:`` URLs), matplotlib without pyplot.
"""

from __future__ import annotations

import csv
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from loadgen.report import CSS, _figure_or_none, _legend_above, _new_figure, _style
from loadgen.report_html import escape, html_section, nodata

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

__all__ = ["OpenbRun", "allocation_grid", "read_runs", "write_openb_report"]

RUN_FILE = re.compile(r"^(?P<trace>[a-z0-9]+)-(?P<policy>[a-z]+)-(?P<seed>\d+)\.csv$")
GRID = np.arange(0.0, 130.0 + 1e-9, 0.5)  # arrived workload (%) at which the curves are sampled
POLICY_ORDER = ("random", "dotprod", "clustering", "packing", "bestfit", "fgd")
COLOURS = {"random": "#7f7f7f", "dotprod": "#9467bd", "clustering": "#8c564b", "packing": "#17becf",
           "bestfit": "#1f77b4", "fgd": "#d62728"}
POLICY_LABELS = {"random": "Random", "dotprod": "DotProduct", "clustering": "GPU Clustering",
                 "packing": "GPU Packing", "bestfit": "Best-Fit", "fgd": "FGD"}


@dataclass(frozen=True)
class OpenbRun:
    """One run's curve, as its CSV holds it: per pod, arrived and allocated GPU (% of capacity)."""

    trace: str
    policy: str
    seed: int
    arrived: np.ndarray
    alloc: np.ndarray
    frag_total: np.ndarray  # NaN between the 2 % samples


def read_runs(out: Path) -> list[OpenbRun]:
    """Every ``<trace>-<policy>-<seed>.csv`` of a bench output directory, in trace, policy, seed order."""
    runs = []
    for path in sorted(out.glob("*.csv")):
        m = RUN_FILE.match(path.name)
        if m is None:
            continue
        with path.open(newline="") as f:
            rows = list(csv.DictReader(f))
        if not rows or "alloc_pct" not in rows[0]:
            continue

        def column(key: str, rows: list[dict[str, str]] = rows) -> np.ndarray:
            return np.asarray([float(r[key]) if r.get(key) else np.nan for r in rows], dtype=float)

        runs.append(OpenbRun(m["trace"], m["policy"], int(m["seed"]), column("arrived_pct"), column("alloc_pct"),
                             column("frag_pct_total")))
    order = {p: i for i, p in enumerate(POLICY_ORDER)}
    return sorted(runs, key=lambda r: (r.trace, order.get(r.policy, len(order)), r.policy, r.seed))


def allocation_grid(run: OpenbRun, grid: np.ndarray = GRID) -> np.ndarray:
    """The run's allocation when its arrived workload first reached each grid point (NaN: never reached)."""
    i = np.searchsorted(run.arrived, grid - 1e-9, side="left")  # arrived only grows
    out = np.full(len(grid), np.nan)
    reached = i < len(run.arrived)
    out[reached] = run.alloc[i[reached]]
    return out


def _colour(policy: str) -> str:
    return COLOURS.get(policy, "#bcbd22")


def _by_policy(runs: Sequence[OpenbRun]) -> dict[str, list[OpenbRun]]:
    out: dict[str, list[OpenbRun]] = {}
    for r in runs:
        out.setdefault(r.policy, []).append(r)
    return out


def _axes(fig: Figure, ax: Axes, xlabel: str, ylabel: str) -> Figure:
    """The arrived-workload axis (0-130 %), labels, the report's style and the legend above."""
    ax.set_xlim(0, 130)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    _style(ax)
    _legend_above(ax)
    return fig


def allocation_figure(trace: str, runs: Sequence[OpenbRun]) -> Figure | None:
    """Allocation % vs arrived workload %, one curve (mean, min-max band) per policy."""
    if not runs:
        return None
    fig = _new_figure(11, 4.2)
    ax = fig.add_subplot(1, 1, 1)
    ax.plot(GRID, np.minimum(GRID, 100.0), "--", color="#9ca3af", lw=1.0, label="ideal")
    for policy, group in _by_policy(runs).items():
        curves = np.vstack([allocation_grid(r) for r in group])
        ok = ~np.all(np.isnan(curves), axis=0)
        mean = np.nanmean(curves[:, ok], axis=0)
        colour = _colour(policy)
        label = f"{POLICY_LABELS.get(policy, policy)} ({len(group)} seed{'s' if len(group) > 1 else ''})"
        ax.plot(GRID[ok], mean, color=colour, lw=1.6, label=label)
        if len(group) > 1:
            ax.fill_between(GRID[ok], np.nanmin(curves[:, ok], axis=0), np.nanmax(curves[:, ok], axis=0),
                            color=colour, alpha=0.15, linewidth=0)
    ax.set_ylim(0, 105)
    return _axes(fig, ax, f"arrived GPU workload (% of the cluster's GPU capacity) - trace {trace}",
                 "GPU allocation (%)")


def fragmentation_figure(trace: str, runs: Sequence[OpenbRun]) -> Figure | None:
    """Fragmented GPUs (% of the cluster's) vs arrived workload %, mean over seeds per policy."""
    sampled = [r for r in runs if np.any(~np.isnan(r.frag_total))]
    if not sampled:
        return None
    fig = _new_figure(11, 3.4)
    ax = fig.add_subplot(1, 1, 1)
    bins = np.arange(0.0, 132.0, 2.0)
    for policy, group in _by_policy(sampled).items():
        per_run = []
        for r in group:
            ok = ~np.isnan(r.frag_total)
            # Each 2 % sample into its bin, so seeds (sampled at slightly different pods) line up.
            idx = np.clip(np.floor(r.arrived[ok] / 2.0).astype(int), 0, len(bins) - 1)
            row = np.full(len(bins), np.nan)
            row[idx] = r.frag_total[ok]
            per_run.append(row)
        curves = np.vstack(per_run)
        ok = ~np.all(np.isnan(curves), axis=0)
        ax.plot(bins[ok], np.nanmean(curves[:, ok], axis=0), color=_colour(policy), lw=1.4,
                label=POLICY_LABELS.get(policy, policy))
    return _axes(fig, ax, f"arrived GPU workload (%) - trace {trace}", "fragmented GPUs (% of cluster)")


def _alloc_at(run: OpenbRun, at: float) -> float:
    value = allocation_grid(run, np.asarray([at]))[0]
    return float(run.alloc[-1]) if np.isnan(value) and len(run.alloc) else float(value)


def _speeds(out: Path) -> dict[tuple[str, str, int], tuple[float, float]]:
    """(trace, policy, seed) -> (seconds, pods/s) from runs.csv (the last line of a key wins)."""
    path = out / "runs.csv"
    if not path.is_file():
        return {}
    speeds = {}
    with path.open(newline="") as f:
        for row in csv.DictReader(f):
            try:
                speeds[(row["trace"], row["policy"], int(row["seed"]))] = (float(row["seconds"]),
                                                                          float(row["pods_per_s"]))
            except (KeyError, ValueError):
                continue
    return speeds


def summary_table(runs: Sequence[OpenbRun], out: Path) -> str:
    if not runs:
        return nodata("no runs")
    speeds = _speeds(out)
    head = ("trace", "policy", "seeds", "alloc % at 100 % arrived", "alloc % at 130 % arrived", "s per run",
            "pods/s")
    body = []
    for trace in sorted({r.trace for r in runs}):
        for policy, group in _by_policy([r for r in runs if r.trace == trace]).items():
            cells = [trace, POLICY_LABELS.get(policy, policy), str(len(group))]
            for at in (100.0, 130.0):
                values = [_alloc_at(r, at) for r in group]
                spread = statistics.pstdev(values) if len(values) > 1 else 0.0
                cells.append(f"{statistics.fmean(values):.1f} ± {spread:.1f}")
            known = [speeds[(r.trace, r.policy, r.seed)] for r in group if (r.trace, r.policy, r.seed) in speeds]
            cells.append(f"{statistics.fmean(s for s, _ in known):.1f}" if known else "")
            cells.append(f"{statistics.fmean(p for _, p in known):.0f}" if known else "")
            body.append(cells)
    header = "".join(f"<th>{escape(h)}</th>" for h in head)
    numeric = ' class="num"'
    rows = "".join("<tr>" + "".join(f"<td{numeric if i > 1 else ''}>{escape(c)}</td>" for i, c in enumerate(r))
                   + "</tr>" for r in body)
    return f"<table><tr>{header}</tr>{rows}</table>"


def write_openb_report(out: Path, path: Path | None = None) -> Path:
    """Write ``report.html`` (or ``path``) for every run CSV in ``out``; return its path."""
    runs = read_runs(out)
    sections = [html_section("table", "Allocation at 100 % and 130 % arrived workload", summary_table(runs, out))]
    for trace in sorted({r.trace for r in runs}):
        of_trace = [r for r in runs if r.trace == trace]
        sections.append(html_section(
            f"alloc-{trace}", f"GPU allocation vs arrived workload: {trace}",
            _figure_or_none(allocation_figure(trace, of_trace),
                            "Per policy: the GPU allocation ratio when the arrived workload (GPU requested by the "
                            "pods seen so far) reached each point, mean over seeds, the band min to max; dashed: "
                            "every arrived GPU allocated (up to the capacity).")
            + _figure_or_none(fragmentation_figure(trace, of_trace),
                              "Fragmented GPUs against the target workload (the paper's F(M) summed over nodes), "
                              "sampled every 2 % of arrived workload, mean over seeds.")))
    if not runs:
        sections.append(html_section("none", "Curves", nodata(f"no <trace>-<policy>-<seed>.csv files in {out}")))
    title = "kemu bench openb"
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    page = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<link rel=\"icon\" href=\"data:,\"><title>{escape(title)}</title><style>{CSS}</style></head>\n"
            f"<body><main>\n<header><h1>{escape(title)}</h1><div class=\"meta\">{len(runs)} runs from "
            f"{escape(out)}</div></header>\n" + "\n".join(sections)
            + f"\n<footer>Generated by kemu at {escape(generated)}.</footer>\n</main></body></html>\n")
    target = path or out / "report.html"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(page, encoding="utf-8")
    return target
