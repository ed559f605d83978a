"""Sustained load with Prometheus watching: a long ``kemu run`` and what Prometheus saw of it.

    .venv/bin/python -m loadgen.bench_sustained loadgen/scenarios/sustained-5k.yaml [--out DIR]

Starts the real ``prometheus`` (Debian's package) with ``dashboards/prometheus.yml``
(5 s scrapes, the one ``http_sd`` job) pointed at the run's API server, runs
``kemu run SCENARIO`` (Ray-hosted kubelets and schedulers, as the README's
command does), and afterwards asks Prometheus, over the whole run:

* how many targets it scraped and whether every scrape succeeded;
* the scheduled-pods rate (``scheduler_schedule_attempts_total{result="scheduled"}``)
  every 15 s: min, median and max of the 1-minute rates;
* the scheduling SLI p99 from ``scheduler_pod_scheduling_sli_duration_seconds``
  (min, median and max of the 1-minute p99s);
* the load driver's created-pods rate the same way.

"Sustained" means the per-minute scheduled rate kept up with the target rate
(and the run's back-pressure time stayed small) for the whole phase. The
run's own summary (JSON + HTML) lands in ``--out``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import yaml

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def prometheus_config(api_port: int, path: Path) -> Path:
    """dashboards/prometheus.yml with its discovery URL on the run's API server port."""
    cfg = yaml.safe_load((ROOT / "dashboards" / "prometheus.yml").read_text())
    for job in cfg["scrape_configs"]:
        for sd in job.get("http_sd_configs", ()):
            sd["url"] = f"http://127.0.0.1:{api_port}/kemu/v1/targets"
    path.write_text(yaml.safe_dump(cfg))
    return path


def query_range(prom: str, expr: str, start: float, end: float, step: float = 15.0) -> list[float]:
    r = httpx.get(f"{prom}/api/v1/query_range", params={"query": expr, "start": start, "end": end, "step": step},
                  timeout=60)
    r.raise_for_status()
    out: list[float] = []
    for series in r.json()["data"]["result"]:
        out += [float(v) for _, v in series["values"] if v not in ("NaN", "+Inf", "-Inf")]
    return out


def spread(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"min": None, "median": None, "max": None}
    return {"min": round(min(values), 3), "median": round(statistics.median(values), 3),
            "max": round(max(values), 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("scenario")
    ap.add_argument("--out", default="kemu-runs/sustained")
    ap.add_argument("--prometheus", default=shutil.which("prometheus") or "/usr/bin/prometheus")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    api_port, prom_port = free_port(), free_port()
    prom = f"http://127.0.0.1:{prom_port}"
    with tempfile.TemporaryDirectory(prefix="kemu-prom-") as tmp:
        config = prometheus_config(api_port, Path(tmp) / "prometheus.yml")
        prom_proc = subprocess.Popen(
            [args.prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp}/data",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=subprocess.DEVNULL, stderr=(out / "prometheus.log").open("wb"))
        try:
            start = time.time()
            run = subprocess.run([sys.executable, "-m", "actors.cli", "run", args.scenario, "--api-port",
                                  str(api_port), "--output", str(out / "summary.json")], check=False)
            end = time.time()
            summary = json.loads((out / "summary.json").read_text())
            phase = summary["phases"][0] if summary.get("phases") else {"start": 0, "end": end - start}
            # The load phase's window in wall time: after the cluster came up, for the phase's length.
            t0 = start + summary["cluster"]["startupSeconds"]
            t1 = min(end, t0 + phase["end"] + summary["create"]["backPressureSeconds"])
            w0 = min(t0 + 60, t1 - 15)  # 1-minute rates: from the first full minute of load
            failed_scrapes = query_range(prom, "sum(up == 0) or vector(0)", start, end, 5.0)
            report: dict[str, Any] = {
                "scenario": summary["scenario"], "nodes": summary["cluster"]["nodes"],
                "exitCode": run.returncode, "wallSeconds": round(end - start, 1),
                "phaseSeconds": round(t1 - t0, 1),
                # Targets scraped during the load (they deregister when the run ends).
                "targets": int(max(query_range(prom, "count(up)", t0, t1, 5.0), default=0)),
                "targetsDownSamples": int(sum(failed_scrapes)),
                "scheduledPerSecond1m": spread(query_range(
                    prom, 'sum(rate(scheduler_schedule_attempts_total{result="scheduled"}[1m]))', w0, t1)),
                "createdPerSecond1m": spread(query_range(
                    prom, "sum(rate(kemu_loadgen_pods_created_total[1m]))", w0, t1)),
                "sliP99Seconds1m": spread(query_range(
                    prom, "histogram_quantile(0.99, sum(rate(scheduler_pod_scheduling_sli_duration_seconds_bucket"
                          "[1m])) by (le))", w0, t1)),
                "run": {"createdPodsPerSecond": summary["create"]["podsPerSecond"],
                        "backPressureSeconds": summary["create"]["backPressureSeconds"],
                        "scheduledPodsPerSecond": summary["scheduling"]["podsPerSecond"],
                        "sliLatencyMs": summary["scheduling"]["sliLatencyMs"],
                        "podStartupMs": summary["podStartupMs"], "ok": summary["ok"]},
            }
        finally:
            prom_proc.terminate()
            prom_proc.wait(30)
    (out / "sustained.json").write_text(json.dumps(report, indent=2))
    print(json.dumps(report, indent=2))
    return run.returncode


if __name__ == "__main__":
    sys.exit(main())
