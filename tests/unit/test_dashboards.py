"""The Grafana dashboards: committed JSON equals the spec, and what ``kemu dashboards push`` sends.

Grafana is not kemu's: ``push`` is checked against a loopback HTTP server that
records the requests grafana-client makes and answers as Grafana's HTTP API
documents (folders list/create, ``POST /api/dashboards/db``), plus the one-line
errors for refused credentials and an unreachable URL.
"""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from emulator import dashboards
from emulator.cli import main


def test_committed_json_is_what_the_spec_generates() -> None:
    for dash in dashboards.DASHBOARDS:
        committed = (dashboards.DASHBOARDS_DIR / dash.file).read_text()
        assert committed == dashboards.render(dash), f"dashboards/{dash.file} is stale: python -m emulator.dashboards"


def test_every_panel_queries_the_datasource_variable() -> None:
    for dash in dashboards.load():
        names = [v["name"] for v in dash["templating"]["list"]]
        assert names[0] == "datasource"
        assert dash["templating"]["list"][0]["current"]["value"] == "prometheus"
        ids = [p["id"] for p in dash["panels"]]
        assert len(ids) == len(set(ids))
        for panel in dash["panels"]:
            assert panel["datasource"]["uid"] == "${datasource}"
            assert panel["targets"], panel["title"]
            for target in panel["targets"]:
                assert target["datasource"]["uid"] == "${datasource}"
                for var in ("$scheduler", "$profile", "$hpa", "$scaledobject"):
                    if var in target["expr"]:
                        assert var[1:] in names, f"{dash['title']}: {panel['title']} uses undefined {var}"


def test_scheduler_dashboard_has_its_filters() -> None:
    dash = dashboards.build(dashboards.SCHEDULER)
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["scheduler"]["definition"].startswith("label_values(")
    assert variables["profile"]["allValue"] == ".*"


class _Recorder(BaseHTTPRequestHandler):
    requests: list[dict[str, Any]]
    folders: list[dict[str, Any]]
    status: int = 200

    def _answer(self, body: Any, status: int | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(status or self.status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _record(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else None
        entry = {"method": self.command, "path": self.path, "body": body,
                 "authorization": self.headers.get("Authorization")}
        self.requests.append(entry)
        return entry

    def do_GET(self) -> None:
        self._record()
        if self.status != 200:
            self._answer({"message": "invalid API key"})
            return
        self._answer(self.folders if self.path.startswith("/api/folders") else {})

    def do_POST(self) -> None:
        entry = self._record()
        if self.path == "/api/folders":
            folder = {"id": 7, "uid": entry["body"]["uid"], "title": entry["body"]["title"]}
            self.folders.append(folder)
            self._answer(folder)
        elif self.path == "/api/dashboards/db":
            uid = entry["body"]["dashboard"]["uid"]
            self._answer({"id": 1, "uid": uid, "status": "success", "version": 1})
        else:
            self._answer({"message": "not found"}, 404)

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture
def grafana() -> Iterator[tuple[str, type[_Recorder]]]:
    handler = type("Handler", (_Recorder,), {"requests": [], "folders": [], "status": 200})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


def test_push_creates_the_folder_and_overwrites_every_dashboard(grafana: tuple[str, type[_Recorder]]) -> None:
    url, handler = grafana
    pushed = dashboards.push(url, token="glsa_secret", folder="kemu")
    assert pushed == ["kemu-scheduler", "kemu-cluster", "kemu-kubelets", "kemu-apiserver", "kemu-autoscaling",
                      "kemu-gpu"]
    reqs = handler.requests
    assert [(r["method"], r["path"].split("?")[0]) for r in reqs[:2]] == [("GET", "/api/folders"),
                                                                          ("POST", "/api/folders")]
    assert reqs[1]["body"] == {"title": "kemu", "uid": "kemu"}
    uploads = [r for r in reqs if r["path"] == "/api/dashboards/db"]
    assert len(uploads) == len(pushed)
    for r in uploads:
        assert r["authorization"] == "Bearer glsa_secret"
        assert r["body"]["overwrite"] is True and r["body"]["folderUid"] == "kemu"
        assert r["body"]["dashboard"]["id"] is None and r["body"]["dashboard"]["panels"]
    # A second push finds the folder and creates none.
    handler.requests.clear()
    dashboards.push(url, user="admin", password="pw", folder="kemu")
    assert not any(r["method"] == "POST" and r["path"] == "/api/folders" for r in handler.requests)
    assert handler.requests[0]["authorization"] == "Basic " + base64.b64encode(b"admin:pw").decode()


def test_push_reports_refused_credentials_in_one_line(grafana: tuple[str, type[_Recorder]],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    url, handler = grafana
    handler.status = 401
    assert main(["dashboards", "push", "--grafana-url", url, "--token", "wrong"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"kemu: error: Grafana at {url} refused the credentials (401)")
    assert "\n" not in err


def test_push_to_an_unreachable_grafana_is_one_line(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert main(["dashboards", "push", "--grafana-url", f"http://127.0.0.1:{port}"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == f"kemu: error: cannot reach Grafana at http://127.0.0.1:{port}: is it running, and is the URL right?"
