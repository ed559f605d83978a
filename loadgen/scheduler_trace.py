"""Where benchmarked schedulers wait: their queue sizes, preemption holds and API writer timings over time, and
py-spy profiles of each scheduler process (``python -m loadgen.bench_scheduler --trace FILE --profile DIR``).

kemu's own benchmarking aid; what it samples is each scheduler's ``snapshot_stats()`` (upstream's
``scheduler_pending_pods{queue}`` gauges and the like, read every half second).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

__all__ = ["Tracer"]


class Tracer:
    """Where the schedulers wait, over the measured phase: every ``interval`` s each scheduler's queue sizes
    (activeQ / backoffQ / unschedulable), attempts, preemptions, preemption holds and API writer timings, as JSON
    lines (``--trace FILE``); and, with ``--profile DIR``, py-spy raw profiles of each scheduler process (one
    with ``--gil``: what holds the GIL; one with ``--idle``: where each thread waits)."""

    def __init__(self, runner: Any, path: str | None, profile_dir: str | None, seconds: float,
                 interval: float = 0.5) -> None:
        self.runner = runner
        self.path = path
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True) if path else None
        self._spies: list[Any] = []
        procs = getattr(runner, "procs", None)  # ProcessSchedulers: one process per scheduler
        if profile_dir and procs:
            spy = str(Path(sys.executable).with_name("py-spy"))
            if not Path(spy).exists():  # a profiling tool, not a dependency of kemu
                raise SystemExit(f"--profile needs py-spy next to {sys.executable}: "
                                 f"{Path(sys.executable).with_name('pip')} install py-spy")
            Path(profile_dir).mkdir(parents=True, exist_ok=True)
            for i, proc in enumerate(procs):
                for flavour, flags in (("gil", ["--gil"]), ("idle", ["--idle"])):
                    out = Path(profile_dir) / f"n{len(procs)}-s{i}-{flavour}.txt"
                    self._spies.append(subprocess.Popen(
                        [spy, "record", "-p", str(proc.pid), *flags, "-f", "raw", "-r", "50", "-d", str(int(seconds)),
                         "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        self.start = time.perf_counter()
        if self._thread is not None:
            self._thread.start()

    def _run(self) -> None:
        assert self.path is not None
        with open(self.path, "a") as out:
            while not self._stop.wait(self.interval):
                stats, _ = self.runner.stats()
                out.write(json.dumps({"t": round(time.perf_counter() - self.start, 2), "schedulers": [
                    {k: s.get(k) for k in ("name", "attempts", "scheduled", "preemptions", "held_preempting",
                                           "held_victims", "busy_seconds", "queue", "api_writer")}
                    for s in stats]}) + "\n")
                out.flush()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        for spy in self._spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes what it has on Ctrl-C
            spy.wait(30)
