"""The outputs of ``kemu run``: the summary as JSON, and a self-contained HTML report with plots.

Design:

* **One file, nothing external.** The report must open from a CI artefact store, an e-mail
  attachment or an air-gapped machine, so it references nothing outside itself: no CDN, no
  web fonts, no scripts. CSS is inline; every plot is a PNG embedded as a ``data:`` URL.
  PNG rather than SVG because a 100k-pod scatter plot as SVG is megabytes of path data and
  slow to paint, while its raster is tens of kilobytes.
* **matplotlib without pyplot.** Figures are built from :class:`matplotlib.figure.Figure`
  and drawn by the Agg canvas directly: no GUI backend is ever chosen, and no process-wide
  state (``matplotlib.use``, pyplot's figure registry) is touched, so generating a report
  inside a process that also plots (or runs tests) changes nothing there.
* **numpy, not per-pod loops.** Per-pod times become float arrays once (``None`` -> NaN);
  histograms, 1 s throughput bins and per-bin latency quantiles are vectorised (the
  quantiles by one lexsort and index arithmetic), and the scatter plot draws a seeded sample
  of at most :data:`SCATTER_MAX` points, rasterised. 100k pods take well under 2 s.
* **The summary is rendered generically.** The summary dict grows as the runner does; its
  nested dicts become nested tables and lists of dicts become tables with the union of their
  keys, so a new key shows up in the report without a change here. Only the headline cards
  at the top name keys (:data:`HEADLINE`), and each card is skipped when its key is absent.
* **Empty is normal.** A scenario with no nodes, or a run that created nothing, still gets a
  report: each plot section then says "no data".
* **Escaped.** Every piece of text from the summary goes through :func:`html.escape`
  (scenario names and kubectl output are user-controlled).

JSON is written NaN-free (``None``, i.e. ``null``; NaN is not JSON) with numpy scalars
converted, so any strict parser reads it.
"""

from __future__ import annotations

import base64
import io
import json
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from loadgen.report_html import (  # the page's HTML: header, tables, value formatting
    CSS,
    escape,
    generic_tables,
    headline,
    html_section,
    nodata,
    page_header,
    schedulers_table,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

SCATTER_MAX = 20_000  # points in the latency-over-time scatter: enough to show the shape, cheap to draw
MAX_TIME_BINS = 1_500  # 1 s bins until the run is longer than this; then wider bins (the plot is ~1000 px wide)
DPI = 110

# Plot colours (matplotlib's tab10, so the report looks like other matplotlib output).
C_CREATED, C_SCHEDULED, C_READY, C_BACKLOG = "#1f77b4", "#ff7f0e", "#2ca02c", "#7f7f7f"
PHASE_COLOURS = ("#1f77b4", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


@dataclass
class RunSeries:
    """What the plots need, besides the summary dict (all times in seconds since the run's start)."""

    added: list[float]  # per pod: when its ADDED event arrived
    bound: list[float | None]  # per pod (same order): when it was seen bound (None: never)
    ready: list[float | None]  # per pod: when seen Running+Ready (None: never)
    node_cpu: dict[str, float]  # node name -> requested CPU / allocatable CPU at the end (0..1+)
    node_memory: dict[str, float]  # node name -> requested memory / allocatable memory at the end
    phases: list[tuple[str, float, float]] = field(default_factory=list)  # (name, start, end) to shade on time plots
    # Node utilization samples (loadgen.utilization): (t, cpu p50, p90, max, memory p50, p90, max).
    utilization: list[tuple[float, ...]] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------- JSON


def json_safe(value: Any) -> Any:
    """``value`` with NaN/inf as None, numpy scalars and arrays as Python ones, tuples as lists, paths as str."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return [json_safe(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Path):
        return str(value)
    return value


def write_json(summary: dict[str, Any], path: Path) -> Path:
    """Write ``summary`` as indented JSON (NaN-free: strict parsers reject NaN) and return the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    # allow_nan=False: should json_safe ever miss a NaN, fail here rather than write invalid JSON.
    path.write_text(json.dumps(json_safe(summary), indent=2, allow_nan=False) + "\n")
    return path


# ------------------------------------------------------------------------------------------- the page


def write_report(summary: dict[str, Any], series: RunSeries, path: Path) -> Path:
    """Write the self-contained HTML report of a run to ``path`` and return the path."""
    t0 = time.perf_counter()
    path = Path(path)
    summary = json_safe(summary)  # the page shows exactly what the JSON holds (no NaN, no numpy types)
    from loadgen import keda  # its panels draw with this module's helpers
    data = _Arrays.of(series)
    sections = [
        html_section("headline", "Headline", headline(summary)),
        html_section("schedulers", "Schedulers", schedulers_table(summary.get("schedulers"))),
        html_section("sli-histogram", "Latency distribution",
                 _figure_or_none(_latency_histogram(data), "Scheduling SLI latency (created → bound) and pod startup "
                                 "latency (created → Running and Ready), log scale.")),
        html_section("sli-over-time", "Scheduling latency over time",
                 _figure_or_none(_latency_over_time(data), "Each dot is a pod (a sample when there are many), at "
                                 "the time it was bound; the lines are the p50 and p99 of the pods bound in each "
                                 "bin.")),
        html_section("throughput", "Throughput over time",
                 _figure_or_none(_throughput(data), "Pods created, bound and Ready per second; the dashed line "
                                 "(right axis) is the backlog: pods created but not yet bound.")),
        html_section("node-utilization", "Node utilization",
                 _figure_or_none(utilization_figure([("", series.utilization)]),
                                 "Measured CPU utilization across nodes (kubelet usage / capacity), sampled every "
                                 "few seconds: the p50, p90 and max over the nodes.")),
        *([html_section("autoscaling", "Replicas vs load over time",
                    _figure_or_none(_autoscaling(summary["autoscaling"]), "Per HPA: its target's replicas "
                                    "(spec), Ready replicas and the HPA's desired count (left axis) against the "
                                    "offered load of the target's load target (right axis). Per VPA: the CPU "
                                    "target against the mean request of its pods."))]
          if summary.get("autoscaling") else []),
        *([html_section("keda", "Queue depth vs replicas over time (KEDA)", _figure_or_none(
            stacked_figure({"so": summary["keda"].get("scaledObjects"), "sj": summary["keda"].get("scaledJobs")},
                           keda.panel),
            "Per ScaledObject: its target's replicas (spec) and Ready replicas (left axis) against the depth of the "
            "Redis lists its triggers read (right axis). Per ScaledJob: its running Jobs against the depth."))]
          if summary.get("keda") else []),
        html_section("node-allocation", "Node allocation",
                 _figure_or_none(_allocation_heatmap(series), "One cell per node (in name order, row by row); "
                                 "colour: requests / allocatable at the end of the run. Red: over 100%.")
                 + _allocation_stats(series)),
        html_section("summary", "Summary", generic_tables(_without_series(summary))),
    ]
    title = f"kemu run: {summary.get('scenario', '?')}"
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    body = "\n".join(sections)
    footer = (f"<footer>Generated by kemu at {escape(generated)} in {time.perf_counter() - t0:.2f} s "
              f"from {len(data.added):,} pods and {len(series.node_cpu):,} nodes.</footer>")
    page = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            # An empty data: icon, so the browser never asks for /favicon.ico (nothing outside the file).
            f"<link rel=\"icon\" href=\"data:,\"><title>{escape(title)}</title><style>{CSS}</style></head>\n"
            f"<body><main>\n{page_header(summary, title)}\n{body}\n{footer}\n</main></body></html>\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(page, encoding="utf-8")
    return path


# ------------------------------------------------------------------------------------------ plots




@dataclass
class _Arrays:
    """The series as float arrays (NaN: never happened) and the quantities every plot shares."""

    added: np.ndarray
    bound: np.ndarray
    ready: np.ndarray
    phases: list[tuple[str, float, float]]
    t_end: float  # the last moment anything happened (or a phase ended)
    bin_s: float  # the width of the time bins

    @classmethod
    def of(cls, s: RunSeries) -> _Arrays:
        # dtype=float turns None into NaN in one C-level pass (no per-pod Python in our code).
        added = np.asarray(s.added, dtype=float)
        bound = np.asarray(s.bound, dtype=float)
        ready = np.asarray(s.ready, dtype=float)
        if not (len(added) == len(bound) == len(ready)):
            raise ValueError(f"RunSeries lists differ in length: added {len(added)}, bound {len(bound)}, "
                             f"ready {len(ready)}")
        ends = [np.nanmax(a) for a in (added, bound, ready) if a.size and not np.all(np.isnan(a))]
        ends += [end for _, _, end in s.phases]
        t_end = float(max(ends, default=0.0))
        bin_s = max(1.0, math.ceil(t_end / MAX_TIME_BINS)) if t_end > 0 else 1.0
        return cls(added, bound, ready, list(s.phases), t_end, bin_s)

    def sli(self) -> tuple[np.ndarray, np.ndarray]:
        """(bound time, created → bound latency in s) of every bound pod."""
        ok = ~np.isnan(self.bound) & ~np.isnan(self.added)
        return self.bound[ok], np.maximum(self.bound[ok] - self.added[ok], 0.0)

    def startup(self) -> np.ndarray:
        ok = ~np.isnan(self.ready) & ~np.isnan(self.added)
        return np.maximum(self.ready[ok] - self.added[ok], 0.0)


def _new_figure(width: float, height: float) -> Figure:
    # Figure + Agg canvas directly: no pyplot, no backend selection, no global state.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    encoded = base64.b64encode(buf.getvalue()).decode("ascii")
    width, height = (round(x) for x in fig.get_size_inches() * DPI)
    return (f'<img class="plot" width="{width}" height="{height}" alt="plot" '
            f'src="data:image/png;base64,{encoded}">')


def _figure_or_none(fig: Figure | None, caption: str) -> str:
    if fig is None:
        return nodata()
    return f'{_png(fig)}<p class="caption">{escape(caption)}</p>'


def _style(ax: Axes) -> None:
    ax.grid(True, which="major", color="#e5e7eb", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _legend_above(ax: Axes, handles: list[Any] | None = None, markerscale: float = 1.0) -> None:
    """The legend in a row above the plot: inside, it would hide the data it explains."""
    handles = handles if handles is not None else ax.get_legend_handles_labels()[0]
    ax.legend(handles, [str(h.get_label()) for h in handles], loc="lower left", bbox_to_anchor=(0.0, 1.06),
              ncol=len(handles), fontsize=8, frameon=False, markerscale=markerscale, borderaxespad=0.0)


def _shade_phases(ax: Axes, phases: list[tuple[str, float, float]]) -> None:
    """Shade each phase and name it at the top of the plot, so a change of rate lines up with its cause."""
    for i, (name, start, end) in enumerate(phases):
        colour = PHASE_COLOURS[i % len(PHASE_COLOURS)]
        ax.axvspan(start, end, color=colour, alpha=0.07, linewidth=0)
        ax.axvline(start, color=colour, alpha=0.5, linewidth=0.8, linestyle=":")
        ax.text(start, 1.0, f" {name}", transform=ax.get_xaxis_transform(), va="top", ha="left", fontsize=8,
                color=colour, clip_on=True)


def _latency_histogram(data: _Arrays) -> Figure | None:
    _, sli = data.sli()
    startup = data.startup()
    if not sli.size and not startup.size:
        return None
    both_ms = np.concatenate([sli, startup]) * 1000.0
    # Log-spaced bins over the observed range; zero latencies (clock granularity) are clamped to the floor.
    lo = max(float(np.min(both_ms[both_ms > 0], initial=np.inf)), 0.01) if np.any(both_ms > 0) else 0.1
    hi = max(float(np.max(both_ms)), lo * 10)
    edges = np.geomspace(lo / 1.05, hi * 1.05, 80)
    fig = _new_figure(10, 3.4)
    ax = fig.add_subplot()
    for values, colour, label in ((sli, C_SCHEDULED, "scheduling SLI (created → bound)"),
                                  (startup, C_READY, "pod startup (created → Ready)")):
        if not values.size:
            continue
        counts, _ = np.histogram(np.clip(values * 1000.0, edges[0], edges[-1]), bins=edges)
        ax.stairs(counts, edges, color=colour, fill=True, alpha=0.25)
        ax.stairs(counts, edges, color=colour, linewidth=1.4, label=f"{label}, n={values.size:,}")
        for q, style in ((0.5, "-"), (0.9, "--"), (0.99, ":")):
            x = float(np.quantile(values, q)) * 1000.0
            ax.axvline(max(x, edges[0]), color=colour, linestyle=style, linewidth=1)
            ax.text(max(x, edges[0]), 0.99, f"p{round(q * 100)}", transform=ax.get_xaxis_transform(), fontsize=7,
                    color=colour, ha="center", va="top", bbox={"facecolor": "white", "edgecolor": "none", "pad": 1})
    ax.set_xscale("log")
    ax.set_ylim(0, None if ax.get_ylim()[1] <= 0 else ax.get_ylim()[1] * 1.1)  # headroom for the pNN labels
    ax.set_xlabel("latency (ms)")
    ax.set_ylabel("pods")
    _legend_above(ax)
    _style(ax)
    return fig


def _binned_quantiles(x: np.ndarray, y: np.ndarray, bin_s: float, qs: Sequence[float]) -> tuple[np.ndarray, ...]:
    """Per time bin of ``x``: the bin's centre and the ``qs`` quantiles of ``y`` in it (bins with data only).

    Vectorised: sort by (bin, y) once; a bin is then a contiguous run, and its q-quantile is the
    element at offset floor(q * count) into the run (the runner's nearest-rank definition).
    """
    bins = np.floor(x / bin_s).astype(np.int64)
    order = np.lexsort((y, bins))
    bins, y = bins[order], y[order]
    ids, starts, counts = np.unique(bins, return_index=True, return_counts=True)
    centres = (ids + 0.5) * bin_s
    out = [y[starts + np.minimum((q * counts).astype(np.int64), counts - 1)] for q in qs]
    return (centres, *out)


def _latency_over_time(data: _Arrays) -> Figure | None:
    t, sli = data.sli()
    if not t.size:
        return None
    fig = _new_figure(10, 3.4)
    ax = fig.add_subplot()
    _shade_phases(ax, data.phases)
    sli_ms = np.maximum(sli * 1000.0, 0.01)  # log axis: a 0 ms latency (same watch batch) sits on the floor
    if t.size > SCATTER_MAX:
        pick = np.random.default_rng(0).choice(t.size, SCATTER_MAX, replace=False)  # seeded: reports repeat
        ts, ys = t[pick], sli_ms[pick]
    else:
        ts, ys = t, sli_ms
    ax.scatter(ts, ys, s=3, color=C_SCHEDULED, alpha=0.25, linewidths=0, rasterized=True,
               label="pods" if t.size <= SCATTER_MAX else f"pods (sample of {SCATTER_MAX:,})")
    centres, p50, p99 = _binned_quantiles(t, sli_ms, data.bin_s, (0.5, 0.99))
    ax.plot(centres, p50, color="#d62728", linewidth=1.3, label=f"p50 per {data.bin_s:g} s")
    ax.plot(centres, p99, color="#2b2b2b", linewidth=1.1, label=f"p99 per {data.bin_s:g} s")
    ax.set_yscale("log")
    ax.set_xlim(0, max(data.t_end, 1.0))
    ax.set_xlabel("time since start (s) — when the pod was bound")
    ax.set_ylabel("created → bound (ms)")
    _legend_above(ax, markerscale=4)
    _style(ax)
    return fig


def _throughput(data: _Arrays) -> Figure | None:
    if not data.added.size:
        return None
    n_bins = int(data.t_end // data.bin_s) + 1
    edges = np.arange(n_bins + 1) * data.bin_s

    def rate(times: np.ndarray) -> np.ndarray:
        times = times[~np.isnan(times)]
        idx = np.clip((times // data.bin_s).astype(np.int64), 0, n_bins - 1)
        return np.bincount(idx, minlength=n_bins) / data.bin_s

    created, scheduled, ready = rate(data.added), rate(data.bound), rate(data.ready)
    fig = _new_figure(10, 3.4)
    ax = fig.add_subplot()
    _shade_phases(ax, data.phases)
    ax.stairs(created, edges, color=C_CREATED, linewidth=1.2, label="created/s")
    ax.stairs(scheduled, edges, color=C_SCHEDULED, linewidth=1.2, label="scheduled/s")
    ax.stairs(ready, edges, color=C_READY, linewidth=1.2, label="Ready/s")
    ax.set_xlim(0, edges[-1])
    ax.set_ylim(bottom=0)
    ax.set_xlabel("time since start (s)")
    ax.set_ylabel(f"pods per second ({data.bin_s:g} s bins)")
    _style(ax)
    # Backlog: created minus bound by the end of each bin (cumulative counts, so no per-pod state).
    backlog = np.cumsum(created - scheduled) * data.bin_s
    ax2 = ax.twinx()
    ax2.plot(edges[1:], backlog, color=C_BACKLOG, linestyle="--", linewidth=1, label="backlog (created \u2212 bound)")
    ax2.set_ylim(bottom=0, top=max(float(backlog.max(initial=0)) * 1.1, 1.0))
    ax2.set_ylabel("unbound pods", color=C_BACKLOG)
    ax2.spines["top"].set_visible(False)
    lines = ax.get_legend_handles_labels()[0] + ax2.get_legend_handles_labels()[0]
    _legend_above(ax, handles=lines)
    return fig


def utilization_figure(runs: Sequence[tuple[str, Sequence[Sequence[float]]]]) -> Figure | None:
    """CPU utilization p50/p90/max across nodes over time, one colour per run (label "" for a single run)."""
    runs = [(label, np.asarray(rows, dtype=float)) for label, rows in runs if len(rows)]
    if not runs:
        return None
    fig = _new_figure(11, 3.6)
    ax = fig.add_subplot(1, 1, 1)
    for k, (label, a) in enumerate(runs):
        colour = PHASE_COLOURS[k % len(PHASE_COLOURS)]
        prefix = f"{label} " if label else ""
        for column, style, name in ((3, "-", "max"), (2, "--", "p90"), (1, ":", "p50")):
            ax.plot(a[:, 0], a[:, column] * 100, style, color=colour, lw=1.4, label=f"{prefix}{name}")
    ax.set_xlabel("seconds since the start")
    ax.set_ylabel("node CPU utilization (%)")
    _style(ax)
    _legend_above(ax)
    return fig


def _without_series(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary without the autoscalers' and KEDA's time series (plotted above; as table cells they would be
    walls)."""
    out = dict(summary)
    for name in ("autoscaling", "keda"):
        section = summary.get(name)
        if not section:
            continue
        out[name] = {group: {key: {k: v for k, v in entry.items() if k != "series"} if isinstance(entry, dict)
                             else entry for key, entry in items.items()} if isinstance(items, dict) else items
                     for group, items in section.items()}
    return out


def _series_array(values: list[Any]) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in values], dtype=float)


def right_axis(ax: Axes, t: np.ndarray, values: np.ndarray, label: str, unit: str) -> list[Any]:
    """``values`` as a dashed line on a right-hand axis of ``ax`` (from 0); its legend handles ([] if no data)."""
    if not np.isfinite(values).any():
        return []
    ax2 = ax.twinx()
    ax2.plot(t, values, color=C_BACKLOG, linestyle="--", linewidth=1, label=label)
    ax2.set_ylim(bottom=0, top=max(float(np.nanmax(values)) * 1.1, 1.0))
    ax2.set_ylabel(unit, color=C_BACKLOG)
    ax2.spines["top"].set_visible(False)
    return list(ax2.get_legend_handles_labels()[0])


def stacked_figure(groups: dict[str, Any], draw: Callable[[Axes, str, str, dict[str, Any], np.ndarray], None]
                   ) -> Figure | None:
    """One styled panel per entry with samples of each group ({kind: {key: entry with "series"}}), stacked on wall
    time; ``draw(ax, kind, key, entry, t)`` fills each. None when no entry has samples."""
    panels = [(kind, key, entry) for kind, entries in groups.items() for key, entry in (entries or {}).items()
              if entry["series"]["time"]]
    if not panels:
        return None
    fig = _new_figure(10, 2.6 * len(panels))
    axes = fig.subplots(len(panels), 1, squeeze=False)[:, 0]
    for ax, (kind, key, entry) in zip(axes, panels, strict=True):
        _style(ax)
        draw(ax, kind, key, entry, _series_array(entry["series"]["time"]))
    axes[-1].set_xlabel("time since start (s)")
    return fig


def replicas_and_ready(ax: Axes, t: np.ndarray, s: dict[str, Any]) -> None:
    """A workload's ``spec.replicas`` and Ready replicas as steps."""
    ax.step(t, _series_array(s["replicas"]), where="post", color=C_SCHEDULED, linewidth=1.4, label="replicas")
    ax.step(t, _series_array(s["ready"]), where="post", color=C_READY, linewidth=1.2, label="Ready")


def _autoscaling(section: dict[str, Any]) -> Figure | None:
    """One panel per HPA (replicas vs load) and per VPA (CPU target vs requests), stacked, on wall time."""
    return stacked_figure({"hpa": section.get("hpas"), "vpa": section.get("vpas")}, _autoscaler_panel)


def _autoscaler_panel(ax: Axes, kind: str, key: str, entry: dict[str, Any], t: np.ndarray) -> None:
    s = entry["series"]
    if kind == "hpa":
        replicas_and_ready(ax, t, s)
        ax.step(t, _series_array(s["desired"]), where="post", color=C_CREATED, linewidth=1, linestyle=":",
                label="HPA desired")
        ax.set_ylim(bottom=0, top=max(float(entry.get("maxReplicas") or 1), 1.0) * 1.1)
        ax.set_ylabel("pods")
        ax.set_title(f"{key} → {entry['target']} ({', '.join(entry['metrics'])})", fontsize=9, loc="right")
        unit = "items" if entry["loadTarget"].startswith("queue ") else "requests/s"
        _legend_above(ax, handles=ax.get_legend_handles_labels()[0] + right_axis(
            ax, t, _series_array(s["load"]), f"load on {entry['loadTarget']} ({unit})", unit))
        return
    ax.plot(t, _series_array(s["cpuTarget"]) * 1000, color=C_CREATED, linewidth=1.4, label="CPU target")
    ax.plot(t, _series_array(s["cpuRequest"]) * 1000, color=C_SCHEDULED, linewidth=1.2, label="mean CPU request")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("millicores")
    ax.set_title(f"{key} → {entry['target']} (VPA {entry['mode']})", fontsize=9, loc="right")
    _legend_above(ax)


def _natural_key(name: str) -> tuple[Any, ...]:
    """``node-2`` before ``node-10``: pool nodes are numbered, and the grid should follow their order."""
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _grid(values: dict[str, float]) -> np.ndarray:
    """The nodes' values row by row on a near-square grid; cells past the last node are NaN (masked)."""
    names = sorted(values, key=_natural_key)
    n = len(names)
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    flat = np.full(rows * cols, np.nan)
    flat[:n] = np.fromiter((values[k] for k in names), dtype=float, count=n)
    return flat.reshape(rows, cols)


def _allocation_heatmap(series: RunSeries) -> Figure | None:
    panels = [(title, values) for title, values in (("CPU requested / allocatable", series.node_cpu),
                                                    ("memory requested / allocatable", series.node_memory)) if values]
    if not panels:
        return None
    import matplotlib as mpl

    cmap = mpl.colormaps["viridis"].with_extremes(over="#d62728", bad="#f3f4f6")
    fig = _new_figure(10, 4.6)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    image = None
    for ax, (title, values) in zip(axes, panels, strict=True):
        grid = _grid(values)
        image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, vmin=0.0, vmax=1.0, interpolation="nearest",
                          aspect="equal")
        ax.set_title(f"{title} ({len(values):,} nodes)", fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
    assert image is not None
    bar = fig.colorbar(image, ax=list(axes), extend="max", shrink=0.85, format=lambda v, _: f"{v:.0%}")
    bar.set_label("requested fraction (red: over 100%)")
    return fig


def _allocation_stats(series: RunSeries) -> str:
    parts = []
    for label, values in (("CPU", series.node_cpu), ("memory", series.node_memory)):
        if not values:
            continue
        a = np.fromiter(values.values(), dtype=float, count=len(values))
        a = a[np.isfinite(a)]  # a node with no allocatable gives NaN or inf: no fraction to speak of
        if not a.size:
            continue
        parts.append(f"{label}: mean {a.mean():.0%}, p50 {np.median(a):.0%}, max {a.max():.0%}; "
                     f"{int((a <= 0).sum()):,} nodes empty, {int((a > 1).sum()):,} over 100%")
    return f'<div class="stats">{escape(" · ".join(parts))}</div>' if parts else ""
