"""The run report's HTML: the page style, its header, headline and summary tables, value formatting.

:mod:`loadgen.report` draws the plots and assembles the page; this module turns
the summary (plain JSON data) into escaped HTML: the headline numbers, the
schedulers' table, and every other section of the summary as generic tables
with humanised keys and units.
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

CSS = """
:root { --fg: #1d2330; --muted: #6b7280; --line: #e3e6eb; --bg: #f6f7f9; --card: #fff;
        --ok: #15803d; --bad: #b91c1c; --accent: #1f77b4; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--fg);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; }
main { max-width: 1180px; margin: 0 auto; padding: 24px 28px 40px; }
header h1 { margin: 0 0 4px; font-size: 24px; }
header .meta { color: var(--muted); }
.badge { display: inline-block; padding: 1px 10px; border-radius: 10px; color: #fff; font-weight: 600;
         font-size: 13px; margin-left: 8px; vertical-align: 3px; }
.badge.ok { background: var(--ok); } .badge.bad { background: var(--bad); }
section { background: var(--card); border: 1px solid var(--line); border-radius: 8px; padding: 16px 20px;
          margin-top: 18px; }
section h2 { margin: 0 0 10px; font-size: 17px; }
section h3 { margin: 0 0 6px; font-size: 14px; color: var(--accent); }
p.caption { color: var(--muted); margin: 4px 0 0; font-size: 13px; }
p.nodata { color: var(--muted); font-style: italic; margin: 0; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(150px, 1fr)); gap: 10px; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; }
.card .label { color: var(--muted); font-size: 12px; }
.card .value { font-size: 22px; font-weight: 600; font-variant-numeric: tabular-nums; }
.card .unit { font-size: 13px; color: var(--muted); font-weight: 400; margin-left: 3px; }
img.plot { display: block; max-width: 100%; height: auto; margin: 0 auto; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 3px 8px; border-bottom: 1px solid var(--line); vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: 12px; }
td.num { text-align: right; }
td.key { color: var(--muted); width: 45%; }
table.kv td.key { white-space: nowrap; }
table table { margin: 0; } table table td { border-bottom: none; padding: 1px 6px 1px 0; }
.tables { display: grid; grid-template-columns: repeat(auto-fill, minmax(340px, 1fr)); gap: 14px; }
.tables > div { border: 1px solid var(--line); border-radius: 6px; padding: 10px 12px; overflow-x: auto; }
.tables > div.wide { grid-column: 1 / -1; }
.tables > div.wide td.key { width: 18%; }
pre { margin: 0; font-size: 12px; white-space: pre; overflow-x: auto; }
.none { color: var(--muted); }
.stats { margin-top: 8px; color: var(--muted); font-size: 13px; }
footer { margin-top: 18px; color: var(--muted); font-size: 12px; text-align: center; }
"""


def escape(text: Any) -> str:
    return html.escape(str(text), quote=True)


def html_section(anchor: str, title: str, inner: str) -> str:
    return f'<section id="{anchor}"><h2>{escape(title)}</h2>\n{inner}\n</section>'


def nodata(what: str = "no data") -> str:
    return f'<p class="nodata">{escape(what)}</p>'


def page_header(summary: dict[str, Any], title: str) -> str:
    ok = summary.get("ok")
    badge = "" if ok is None else (f'<span class="badge {"ok" if ok else "bad"}">{"OK" if ok else "NOT OK"}</span>')
    meta = []
    if "seed" in summary:
        meta.append(f"seed {summary['seed']}")
    if isinstance(summary.get("wallSeconds"), int | float):
        meta.append(f"{summary['wallSeconds']:g} s wall time")
    cluster = summary.get("cluster")
    if isinstance(cluster, dict):
        meta.extend(f"{cluster[k]} {label}" for k, label in (("nodes", "nodes"), ("schedulers", "scheduler(s)"))
                    if k in cluster)
    return f'<header><h1>{escape(title)}{badge}</h1><div class="meta">{escape(" · ".join(meta))}</div></header>'


# ------------------------------------------------------------------------------------ headline cards

# (label, unit, candidate paths in the summary): the first path present gives the card's value;
# a card none of whose paths is present is left out (the summary's keys change as the runner grows).
HEADLINE: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("pods created", "", ("pods.created",)),
    ("scheduled", "", ("pods.scheduled",)),
    ("pending", "", ("pods.pending",)),
    ("failed", "", ("pods.failed",)),
    ("scheduling throughput", "pods/s", ("scheduling.podsPerSecond",)),
    ("SLI latency p50", "ms", ("scheduling.sliLatencyMs.p50",)),
    ("SLI latency p90", "ms", ("scheduling.sliLatencyMs.p90",)),
    ("SLI latency p99", "ms", ("scheduling.sliLatencyMs.p99",)),
    ("attempt latency p99", "ms", ("scheduling.attemptLatencyMs.p99",)),
    ("pod startup p50", "ms", ("podStartupMs.p50", "startup.latencyMs.p50")),
    ("pod startup p99", "ms", ("podStartupMs.p99", "startup.latencyMs.p99")),
    ("preemptions", "", ("preemptions", "scheduling.preemptions", "preemptions.victims")),
    ("OOM kills", "", ("oomKills.events", "oomKills")),
    ("evictions", "", ("evictions.events", "evictions")),
)


def _lookup(summary: dict[str, Any], dotted: str) -> tuple[bool, Any]:
    node: Any = summary
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def headline(summary: dict[str, Any]) -> str:
    cards = []
    for label, unit, paths in HEADLINE:
        for p in paths:
            found, value = _lookup(summary, p)
            if found and not isinstance(value, dict | list):
                break
        else:
            continue
        unit_html = f'<span class="unit">{escape(unit)}</span>' if unit and value is not None else ""
        cards.append(f'<div class="card"><div class="label">{escape(label)}</div>'
                     f'<div class="value">{_fmt_value(value)}{unit_html}</div></div>')
    if not cards:
        return nodata("the summary has none of the headline numbers")
    return f'<div class="cards">{"".join(cards)}</div>'


def schedulers_table(schedulers: Any) -> str:
    """Per scheduler: attempts, conflicts and the conflict fraction (the cost of optimistic concurrency)."""
    rows = _scheduler_rows(schedulers)
    if not rows:
        return nodata("no schedulers reported")
    keys = _union_keys(rows)
    derive = "conflictFraction" not in keys and "attempts" in keys and "conflicts" in keys
    if derive:
        rows = [{**r, "conflictFraction": _fraction(r.get("conflicts"), r.get("attempts"))} for r in rows]
        keys.append("conflictFraction")
    return _table_of_rows(rows, keys)


def _scheduler_rows(schedulers: Any) -> list[dict[str, Any]]:
    return [s for s in schedulers if isinstance(s, dict)] if isinstance(schedulers, list) else []


def _fraction(part: Any, whole: Any) -> float | None:
    if isinstance(part, int | float) and isinstance(whole, int | float) and whole > 0:
        return part / whole
    return None


# ---------------------------------------------------------------------------------- generic tables


def generic_tables(summary: dict[str, Any]) -> str:
    """The whole summary: top-level scalars in one table, every top-level dict or list in its own."""
    if not summary:
        return nodata()
    scalars = {k: v for k, v in summary.items() if not isinstance(v, dict | list)}
    shown_above = {"schedulers"} if _scheduler_rows(summary.get("schedulers")) else set()
    blocks = []
    if scalars:
        blocks.append(f"<div><h3>run</h3>{_kv_table(scalars)}</div>")
    for k, v in summary.items():
        if k in scalars or k in shown_above:
            continue
        wide = (isinstance(v, list) and any(isinstance(x, dict) for x in v)) or _has_long_text(v)
        blocks.append(f'<div{" class=wide" if wide else ""}><h3 title="{escape(k)}">{escape(_humanize(k))}</h3>'
                      f"{_render(v)}</div>")
    return f'<div class="tables">{"".join(blocks)}</div>'


def _render(value: Any, key: str = "") -> str:
    if isinstance(value, dict):
        return _kv_table(value) if value else '<span class="none">(empty)</span>'
    if isinstance(value, list):
        if not value:
            return '<span class="none">(none)</span>'
        if all(isinstance(v, dict) for v in value):
            return _table_of_rows(value, _union_keys(value))
        if all(isinstance(v, str) for v in value):
            return f"<pre>{escape(chr(10).join(value))}</pre>"  # e.g. kubectl output lines
        return ", ".join(_render(v) for v in value)
    if key.lower().endswith("fraction") and _is_number(value):
        return f"{value:.2%}"  # conflict fractions and the like: 0.0008 reads better as 0.08%
    return _fmt_value(value)


def _kv_table(d: dict[str, Any]) -> str:
    rows = []
    for k, v in d.items():
        num = ' class="num"' if _is_number(v) else ""
        rows.append(f'<tr><td class="key" title="{escape(k)}">{escape(_humanize(k))}</td>'
                    f'<td{num}>{_render(v, k)}</td></tr>')
    return f'<table class="kv">{"".join(rows)}</table>'


def _table_of_rows(rows: Sequence[dict[str, Any]], keys: list[str]) -> str:
    head = "".join(f'<th title="{escape(k)}">{escape(_humanize(k))}</th>' for k in keys)
    body = "".join(
        "<tr>" + "".join(f'<td{" class=num" if _is_number(r.get(k)) else ""}>{_render(r.get(k), k)}</td>' for k in keys)
        + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _union_keys(rows: Iterable[dict[str, Any]]) -> list[str]:
    keys: dict[str, None] = {}
    for r in rows:
        keys.update(dict.fromkeys(r))
    return list(keys)


def _has_long_text(value: Any) -> bool:
    return isinstance(value, dict) and any(isinstance(v, list) and v and all(isinstance(x, str) for x in v)
                                           for v in value.values())


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


# Word boundaries in camelCase, acronyms kept whole: containersOOMKilled -> containers OOM Killed.
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_UNITS = {"Ms": "(ms)", "Seconds": "(s)"}


def _humanize(key: str) -> str:
    """``sliLatencyMs`` -> ``sli latency (ms)``: readable labels; the JSON key stays in the tooltip."""
    words = _CAMEL.split(str(key))
    if len(words) > 1 and words[-1] in _UNITS:
        words[-1] = _UNITS[words[-1]]
    text = " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in words)
    return text.replace("sli ", "SLI ").replace("oom ", "OOM ")


_NONE_HTML = '<span class="none">&ndash;</span>'  # not measured (None / NaN in the summary)


def _fmt_value(v: Any) -> str:
    if v is None:
        return _NONE_HTML
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return _NONE_HTML
        if v.is_integer() and abs(v) >= 1:
            return f"{v:,.0f}"
        if abs(v) >= 100:
            return f"{v:,.1f}"
        return f"{v:.3g}"
    return escape(v)
