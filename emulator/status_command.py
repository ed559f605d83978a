"""``kemu status``: the detached cluster's parts as its supervisor keeps them, and as a client finds them.

One line per recorded process (:mod:`emulator.processes`: pid, state, restarts - the supervisor,
:mod:`emulator.supervisor`, rewrites a record when it starts a part again), whether Redis answers (one try, no
retries) and whether the API server's ``/readyz`` passes (with the kubeconfig's token), then the
resourceVersion and the objects per kind. Exit code 0 when every part is up; 1 when no cluster runs or a part
is down - killed and not yet restarted, or unreachable - with a line saying which. Never a traceback: an
unreachable Redis or API server is a line of the report.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from emulator.processes import ProcessTable

if TYPE_CHECKING:
    from emulator.cluster import ClusterState


def status(home: Path, running_state: Callable[[ProcessTable], ClusterState | None], output: str) -> int:
    """Print the cluster's status (``output`` "text" or "json"); the exit code (see the module docstring)."""
    table = ProcessTable(home)
    procs = [{"name": r.name, "pid": r.pid, "part": r.part, "state": r.state(), "restarts": r.restarts,
              "log": r.log} for r in table.records()]
    state = running_state(table)
    if state is None:
        left = [p for p in procs if p["state"] == "running"]
        if output == "json":
            print(json.dumps({"running": False, "processes": procs}, indent=2))
        else:
            print("no kemu cluster is running (start one with `kemu up --detach`)")
            if left:
                print(f"{len(left)} recorded process(es) of an earlier cluster are still running "
                      "(`kemu down` stops them):")
            _print_processes(procs)
        return 1
    counts, redis_error = _store_counts(state.redis_url)
    api_error = _api_not_ready(state) if state.api_url else None
    down = [p["name"] for p in procs if p["state"] != "running"]
    healthy = not down and redis_error is None and api_error is None
    info: dict[str, Any] = {"running": True, "healthy": healthy, "pid": state.pid, "redis": state.redis_url,
                            "redisError": redis_error, "api": state.api_url, "apiError": api_error,
                            "kubeconfig": state.kubeconfig, "uptimeSeconds": round(time.time() - state.started_at, 1),
                            **counts, "processes": procs}
    if output == "json":
        print(json.dumps(info, indent=2))
    else:
        print(f"kemu cluster running (pid {info['pid']}, up {info['uptimeSeconds']} s), redis {info['redis']}")
        if info["api"]:
            print(f"Kubernetes API at {info['api']}; kubeconfig: {info['kubeconfig']}")
        _print_processes(procs)
        print(f"  {'redis':<24} {'reachable' if redis_error is None else 'UNREACHABLE: ' + redis_error}")
        if info["api"]:
            print(f"  {'api /readyz':<24} {'ok' if api_error is None else 'NOT READY: ' + api_error}")
        if not healthy:
            print("kemu cluster is degraded: " + ", ".join(
                [*(f"{n} is down (the supervisor restarts it)" for n in down),
                 *(["Redis is unreachable"] if redis_error else []),
                 *(["the API server is not ready"] if api_error else [])]))
        if redis_error is None:
            print(f"resourceVersion {info['resourceVersion']}")
            for resource, n in sorted(info["objects"].items()):
                print(f"  {resource:<40} {n}")
    return 0 if healthy else 1


def _store_counts(redis_url: str) -> tuple[dict[str, Any], str | None]:
    """Objects per kind and the resourceVersion, or why Redis cannot be read (one try: no retries)."""
    from emulator.cluster import object_counts
    from emulator.store.store import UNAVAILABLE, Store, StoreConfig

    try:
        store = Store.connect(redis_url, StoreConfig(retries=0))
    except UNAVAILABLE as e:
        return {}, str(e) or type(e).__name__
    try:
        return object_counts(store), None
    except UNAVAILABLE as e:
        return {}, str(e) or type(e).__name__
    finally:
        store.close()


def _api_not_ready(state: ClusterState) -> str | None:
    """None when the API server's ``/readyz`` answers 200 (with the kubeconfig's token), else why not."""
    import base64
    import ssl
    import tempfile
    import urllib.error
    import urllib.request

    import yaml

    token, context = "", None
    try:
        doc = yaml.safe_load(Path(state.kubeconfig).read_text()) if state.kubeconfig else {}
        token = str(doc["users"][0]["user"].get("token") or "")
        ca = doc["clusters"][0]["cluster"].get("certificate-authority-data")
        if ca:
            with tempfile.NamedTemporaryFile("wb", suffix=".pem", delete=False) as f:
                f.write(base64.b64decode(ca))
            context = ssl.create_default_context(cafile=f.name)
            os.unlink(f.name)
    except (OSError, KeyError, IndexError, TypeError, AttributeError, yaml.YAMLError):
        pass  # no kubeconfig to read: ask without a token
    request = urllib.request.Request(f"{state.api_url}/readyz", headers={"Authorization": f"Bearer {token}"}
                                     if token else {})
    try:
        with urllib.request.urlopen(request, timeout=5.0, context=context) as r:
            return None if r.status == 200 else f"HTTP {r.status}"
    except urllib.error.HTTPError as e:
        failed = [line for line in e.read().decode(errors="replace").splitlines() if line.startswith("[-]")]
        return f"HTTP {e.code}" + (f" ({'; '.join(failed)})" if failed else "")
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        return str(reason) or type(e).__name__


def _print_processes(procs: list[dict[str, Any]]) -> None:
    if procs:
        print("processes:")
    for p in procs:
        print(f"  {p['name']:<24} pid {p['pid']:<8} {p['state']:<8} restarts {p.get('restarts', 0):<3} {p['part']}"
              + (f" (log {p['log']})" if p["log"] else ""))
