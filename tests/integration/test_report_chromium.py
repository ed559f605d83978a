"""The run report opens in a real browser: Debian's headless chromium, driven by playwright.

No browser is downloaded: playwright launches the system chromium (``/usr/bin/chromium``, or
``$KEMU_CHROMIUM``). The page must load with no console error, no page error and no failed
request, make no request beyond its own file, and render every plot. A full-page screenshot is
kept as a test artefact, in ``$KEMU_TEST_ARTIFACTS`` (default ``<repo>/test-artifacts``), for a
human to look at. The README's main command (the quickstart scenario) runs here too, and its own
report is the one checked.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import struct
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import playwright.sync_api as playwright_sync  # a test dependency: its absence is a failure, not a skip
import pytest

from loadgen.report import write_report
from tests.unit.test_report import PLOT_SECTIONS, synthetic_run

REPO = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


def chromium() -> str:
    path = os.environ.get("KEMU_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        pytest.fail("no chromium: scripts/setup.sh installs Debian's chromium (or set KEMU_CHROMIUM)")
    return path


def artifacts_dir() -> Path:
    d = Path(os.environ.get("KEMU_TEST_ARTIFACTS") or REPO / "test-artifacts")
    d.mkdir(parents=True, exist_ok=True)
    return d


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])  # the IHDR chunk
    return width, height


@dataclass
class Opened:
    problems: list[str]  # console errors, page errors, failed requests
    foreign: list[str]  # requests for anything but the file itself (and data: URLs)
    images: list[dict[str, Any]]
    title: str
    screenshot: bytes


def open_in_chromium(report: Path, screenshot: Path) -> Opened:
    """Open ``report`` from a file:// URL in headless Chromium; a full-page screenshot goes to ``screenshot``."""
    url = report.as_uri()
    problems: list[str] = []
    requests: list[str] = []
    screenshot.unlink(missing_ok=True)
    with playwright_sync.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error"
                    else None)
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url} {r.failure}"))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(url, wait_until="load")
            images = page.evaluate("""() => Array.from(document.images).map(
                i => ({complete: i.complete, width: i.naturalWidth, section: i.closest('section').id}))""")
            title = page.title()
            page.screenshot(path=str(screenshot), full_page=True)
        finally:
            browser.close()
    return Opened(problems, [r for r in requests if r != url and not r.startswith("data:")], images, title,
                  screenshot.read_bytes())


@pytest.mark.timeout(60)
def test_report_opens_in_chromium_without_errors(tmp_path: Path) -> None:
    summary, series = synthetic_run(pods=20_000, nodes=500)
    report = write_report(summary, series, tmp_path / "report.html")
    opened = open_in_chromium(report, artifacts_dir() / "report-synthetic.png")

    assert opened.problems == []
    assert opened.foreign == []  # nothing beyond the file
    assert opened.title == "kemu run: steady"
    assert sorted(i["section"] for i in opened.images) == sorted(PLOT_SECTIONS)
    assert all(i["complete"] and i["width"] > 0 for i in opened.images), opened.images
    width, height = png_size(opened.screenshot)
    assert width == 1280 and height > 2_000  # the whole page, not just the first screen
    assert len(opened.screenshot) > 100_000  # plots, tables and text: not a blank page


@pytest.mark.integration
@pytest.mark.timeout(240)
def test_quickstart_runs_and_its_report_opens_in_chromium(tmp_path: Path) -> None:
    """The README's main command, as CI runs it: Ray-hosted kubelets and scheduler, the summary, the report."""
    out = tmp_path / "summary.json"
    env = {**os.environ, "KEMU_HOME": str(tmp_path / "home")}
    result = subprocess.run([sys.executable, "-m", "actors.cli", "run", str(REPO / "loadgen/scenarios/quickstart.yaml"),
                             "--output", str(out)], env=env, capture_output=True, text=True, timeout=220,
                            check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    summary = json.loads(out.read_text())
    assert summary["pods"]["scheduled"] > 0 and summary["scheduling"]["podsPerSecond"] > 0
    for q in ("p50", "p90", "p99"):
        assert math.isfinite(summary["scheduling"]["sliLatencyMs"][q])
    assert math.isfinite(summary["podStartupMs"]["p99"])
    assert summary["schedulers"] and summary["schedulers"][0]["attempt_p99_ms"] > 0

    opened = open_in_chromium(tmp_path / "report.html", artifacts_dir() / "report.png")
    assert opened.problems == [] and opened.foreign == []
    assert opened.title == "kemu run: quickstart"
    assert sorted(i["section"] for i in opened.images) == sorted(PLOT_SECTIONS)
    assert all(i["complete"] and i["width"] > 0 for i in opened.images), opened.images
    assert len(opened.screenshot) > 100_000
