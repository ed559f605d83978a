"""The real Prometheus (Debian's package) for tests: started on a free loopback port, stopped after.

Tests that put metrics under test scrape with the real server, never a fake
(see the brief). Prometheus's HTTP API offers nothing to block on, so
readiness is polled with a deadline through :func:`tests.waiting.wait_for`.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml

from tests.waiting import wait_for

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def running_prometheus(config: dict[str, Any], workdir: Path) -> Iterator[str]:
    """Prometheus with ``config`` (written to ``workdir``), its TSDB in ``workdir``; yields its base URL."""
    path = workdir / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    port = free_port()
    log_path = workdir / "prometheus.log"
    log = log_path.open("wb")
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={path}", f"--storage.tsdb.path={workdir / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                            stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        assert proc.poll() is None, f"prometheus exited: {log_path.read_text()[-2000:]}"
        try:
            return httpx.get(f"{url}/-/ready", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_for(ready, 30, "Prometheus ready", interval=0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()
