"""HTTP API server benchmark: creates/s, request latencies, ``kubectl get pods -A``, watch delivery.

    .venv/bin/python -m loadgen.bench_http [--pods 20000] [--workers 2] [--clients 4] [--json out.json]

Starts its own embedded Redis in a temporary directory (or uses ``--redis-url``;
the benchmark flushes it) and the API server as a child process
(:class:`emulator.apiserver.process.ApiServerProcess`), then reports:

* **pod creates/s over HTTP**, keep-alive connections from ``--clients`` client
  processes with ``--connections`` connections each, against an API server
  with 1 worker process and with ``--workers`` worker processes;
* **p50/p99 latency** of create, get and list (``limit=100``) at a paced
  ``--rate`` creates/s from one client process (the mutating p99 target is
  < 50 ms at 500 creates/s);
* **``kubectl get pods -A``** wall time on ``--pods`` pods (100,000 for the
  issue's target; kubectl pages with ``limit=500`` and prints every row);
* **RBAC** (``--only rbac``): creates/s with ``AlwaysAllow`` and with ``RBAC``
  for a user bound to ``edit`` (its token on every request), and the
  in-process cost of authentication + attributes + RBAC decision per request;
* **watch delivery latency over HTTP**: a watcher process holds
  ``GET /api/v1/pods?watch=1`` while pods are created at ``--watch-rate``/s
  through the server core; latency is "about to write" → "watcher parsed the
  event".

The load clients speak HTTP/1.1 with a minimal asyncio client rather than
httpx: on a 2-core machine the client shares the CPU with the server, and
httpx costs several times more CPU per request (and collapses past ~32
concurrent requests per client), which would measure the client, not kemu.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

from emulator.api import errors
from emulator.api.kinds import NAMESPACE, POD
from emulator.apiserver import kubeconfig
from emulator.apiserver.process import ApiServerProcess
from emulator.apiserver.settings import ServerSettings
from emulator.server.core import ServerCore
from emulator.store.store import Store
from loadgen.benchkit import paced, redis_url, save
from loadgen.plan import pod_manifest
from loadgen.runner import percentile

SENT_AT = "kemu.io/bench-sent-at"
NS = "bench"


# ----------------------------------------------------------------------------- a minimal HTTP/1.1 client
class Connection:
    """One keep-alive HTTP/1.1 connection; requests are sequential on it."""

    def __init__(self, host: str, port: int, token: str = "") -> None:
        self.host, self.port = host, port
        self.auth = f"Authorization: Bearer {token}\r\n" if token else ""
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def open(self) -> Connection:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        return self

    async def request(self, method: str, path: str, body: bytes = b"", content_type: str = "application/json",
                      accept: str = "application/json") -> tuple[int, bytes]:
        assert self.reader is not None and self.writer is not None
        head = (f"{method} {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\nAccept: {accept}\r\n{self.auth}"
                f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n")
        self.writer.write(head.encode() + body)
        status_line = await self.reader.readuntil(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        length, chunked = 0, False
        while True:
            line = await self.reader.readuntil(b"\r\n")
            if line == b"\r\n":
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding" and b"chunked" in value.lower():
                chunked = True
        if not chunked:
            return status, await self.reader.readexactly(length)
        parts = []
        while True:
            size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
            if size == 0:
                await self.reader.readuntil(b"\r\n")
                return status, b"".join(parts)
            parts.append(await self.reader.readexactly(size))
            await self.reader.readexactly(2)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _pod_body(name: str) -> bytes:
    return orjson.dumps(pod_manifest(name, NS, "100m", "128Mi"))


# ----------------------------------------------------------------------------- creates/s
def _create_client(port: int, prefix: str, n: int, connections: int, *, start: Any, out: Any,
                   token: str = "") -> None:
    async def run() -> tuple[int, int]:
        conns = [await Connection("127.0.0.1", port, token).open() for _ in range(connections)]
        bodies = [_pod_body(f"{prefix}-{i}") for i in range(n)]
        start.wait()
        ok = errors = 0
        path = f"/api/v1/namespaces/{NS}/pods"

        async def worker(c: Connection, mine: list[bytes]) -> None:
            nonlocal ok, errors
            for body in mine:
                status, _ = await c.request("POST", path, body)
                if status == 201:
                    ok += 1
                else:
                    errors += 1

        await asyncio.gather(*(worker(c, bodies[i::connections]) for i, c in enumerate(conns)))
        for c in conns:
            c.close()
        return ok, errors

    out.put(asyncio.run(run()))


def bench_creates(port: int, label: str, total: int, clients: int, connections: int, *,
                  token: str = "") -> dict[str, Any]:
    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    per = total // clients
    procs = [ctx.Process(target=_create_client, args=(port, f"{label}-c{i}", per, connections),
                         kwargs={"start": start, "out": out, "token": token}) for i in range(clients)]
    for p in procs:
        p.start()
    time.sleep(1.5)  # benchmark warm-up: let the client processes import and connect before the clock starts
    t = time.perf_counter()
    start.set()
    results = [out.get(timeout=600) for _ in procs]
    elapsed = time.perf_counter() - t
    for p in procs:
        p.join()
    ok = sum(r[0] for r in results)
    return {"creates": ok, "errors": sum(r[1] for r in results), "seconds": round(elapsed, 2),
            "createsPerSecond": round(ok / elapsed), "clients": clients, "connectionsPerClient": connections}


# ----------------------------------------------------------------------------- latency at a paced rate
def bench_latency(port: int, rate: int, seconds: float, prefix: str = "lat") -> dict[str, Any]:
    async def run() -> dict[str, list[float]]:
        conns = [await Connection("127.0.0.1", port).open() for _ in range(32)]
        free: asyncio.Queue[Connection] = asyncio.Queue()
        for c in conns:
            free.put_nowait(c)
        lat: dict[str, list[float]] = {"create": [], "get": [], "list": []}
        n = int(rate * seconds)
        tasks = []

        async def one(i: int) -> None:
            c = await free.get()
            try:
                name = f"{prefix}-{i}"
                t0 = time.perf_counter()
                status, _ = await c.request("POST", f"/api/v1/namespaces/{NS}/pods", _pod_body(name))
                lat["create"].append(time.perf_counter() - t0)
                assert status == 201, status
                if i % 5 == 0:
                    t0 = time.perf_counter()
                    status, _ = await c.request("GET", f"/api/v1/namespaces/{NS}/pods/{name}")
                    lat["get"].append(time.perf_counter() - t0)
                if i % 50 == 0:
                    t0 = time.perf_counter()
                    status, _ = await c.request("GET", f"/api/v1/namespaces/{NS}/pods?limit=100")
                    lat["list"].append(time.perf_counter() - t0)
            finally:
                free.put_nowait(c)

        start = time.perf_counter()
        for i in range(n):
            due = start + i / rate
            delay = due - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            tasks.append(asyncio.create_task(one(i)))
        await asyncio.gather(*tasks)
        for c in conns:
            c.close()
        return lat

    lat = asyncio.run(run())

    def summary(values: list[float]) -> dict[str, float]:
        ms = [v * 1000 for v in values]
        return {"n": len(ms), "p50ms": round(percentile(ms, 0.5), 2), "p99ms": round(percentile(ms, 0.99), 2)}

    return {"rate": rate, **{k: summary(v) for k, v in lat.items()}}


# ----------------------------------------------------------------------------- kubectl get pods -A
def bench_kubectl(url: str, server_url: str, pods: int, tmp: Path) -> dict[str, Any]:
    core = ServerCore(Store.connect(url))
    have = int(core.store.redis.hlen(core.store.objects_key(POD)))
    for i in range(have, pods, 1000):
        core.create_many(POD, [pod_manifest(f"kubectl-{j}", NS, "100m", "128Mi")
                               for j in range(i, min(pods, i + 1000))])
    total = core.store.redis.hlen(core.store.objects_key(POD))
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return {"skipped": "kubectl not found"}
    config = kubeconfig.write(tmp / "kubeconfig", server_url, "")
    env = {**os.environ, "KUBECONFIG": str(config), "HOME": str(tmp)}
    out: dict[str, Any] = {"pods": total}
    # kubectl pages with --chunk-size=500 and throttles itself to 5 requests/s after a burst of 10
    # (client-go's default QPS, which kubectl does not raise): 100,000 pods = 200 pages ≈ 38 s of
    # client-side waiting whatever the server does. --chunk-size=0 asks for everything at once.
    for label, extra in (("default", []), ("chunkSize0", ["--chunk-size=0"])):
        t = time.perf_counter()
        proc = subprocess.run([kubectl, "get", "pods", "-A", "--no-headers", *extra], env=env, capture_output=True,
                              check=True)
        out[label] = {"seconds": round(time.perf_counter() - t, 2), "rows": proc.stdout.count(b"\n")}
    out["serverPagesSeconds"] = round(_walk_pages(server_url), 2)
    return out


def _walk_pages(server_url: str) -> float:
    """What the server spends on kubectl's 500-row Table pages, requested back to back."""
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"

    async def run() -> float:
        host, port = server_url.rsplit("/", 1)[-1].split(":")
        conn = await Connection(host, int(port)).open()
        token, t = "", time.perf_counter()
        while True:
            path = "/api/v1/pods?limit=500" + (f"&continue={token}" if token else "")
            status, body = await conn.request("GET", path, accept=accept)
            assert status == 200, status
            token = orjson.loads(body)["metadata"].get("continue") or ""
            if not token:
                conn.close()
                return time.perf_counter() - t

    return asyncio.run(run())


# ----------------------------------------------------------------------------- watch delivery
def _watcher(port: int, since: int, n: int, ready: Any, out: Any) -> None:
    async def run() -> list[float]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(f"GET /api/v1/pods?watch=1&resourceVersion={since} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
        while (await reader.readuntil(b"\r\n")) != b"\r\n":
            pass
        ready.set()
        lat: list[float] = []
        buf = b""
        while len(lat) < n:
            size = int((await reader.readuntil(b"\r\n")).strip(), 16)
            buf += await reader.readexactly(size)
            await reader.readexactly(2)
            *lines, buf = buf.split(b"\n")
            now = time.time()
            for line in lines:
                ev = orjson.loads(line)
                sent = (ev["object"]["metadata"].get("annotations") or {}).get(SENT_AT)
                if ev["type"] == "ADDED" and sent:
                    lat.append(now - float(sent))
        writer.close()
        return lat

    out.put(asyncio.run(run()))


def bench_watch(url: str, port: int, rate: int, seconds: float) -> dict[str, Any]:
    core = ServerCore(Store.connect(url))
    n = int(rate * seconds)
    ctx = multiprocessing.get_context("spawn")
    ready, out = ctx.Event(), ctx.Queue()
    watcher = ctx.Process(target=_watcher, args=(port, core.store.current_rv(), n, ready, out))
    watcher.start()
    ready.wait(30)
    pods = [pod_manifest(f"w{rate}-{i}", NS, "100m", "128Mi") for i in range(n)]
    for batch in paced(pods, rate, time.perf_counter(), SENT_AT):
        core.create_many(POD, batch)
    lat = [x * 1000 for x in out.get(timeout=120)]
    watcher.join()
    return {"rate": rate, "events": len(lat), "p50ms": round(percentile(lat, 0.5), 2),
            "p99ms": round(percentile(lat, 0.99), 2), "maxms": round(max(lat), 2)}


# ----------------------------------------------------------------------------- RBAC
RBAC_USER, RBAC_TOKEN, ADMIN_TOKEN = "bench-user", "bench-user-token", "bench-admin-token"


def _bind_bench_user(url: str) -> None:
    """A user bound to ``edit`` in the bench namespace: every request takes the full RBAC path."""
    from emulator.api.kinds import ROLEBINDING
    from emulator.apiserver import users

    core = ServerCore(Store.connect(url))
    users.add_user(core.store.redis, "kemu:", users.UserSpec(RBAC_USER, (), RBAC_TOKEN))
    core.create(ROLEBINDING, {"metadata": {"name": "bench-edit", "namespace": NS},
                              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                          "name": "edit"},
                              "subjects": [{"kind": "User", "name": RBAC_USER}]})


def bench_authorize_cost(url: str, n: int = 200_000) -> dict[str, Any]:
    """Microseconds per request of authentication (cached token) + attributes + RBAC decision, in-process."""
    from emulator.apiserver.auth import Authenticator, AuthMiddleware
    from emulator.apiserver.rbacsource import load_index
    from emulator.auth.rbac import RBACAuthorizer

    core = ServerCore(Store.connect(url))
    index, _ = load_index(core)
    authorizer = RBACAuthorizer(index)
    mw = AuthMiddleware(lambda *a: None, Authenticator(ADMIN_TOKEN, core.store.redis, "kemu:"),  # type: ignore[arg-type]
                        authorizer, required=False)
    scopes = {
        "create pods (allowed, edit)": {"method": "POST", "path": f"/api/v1/namespaces/{NS}/pods",
                                        "query_string": b"",
                                        "headers": [(b"authorization", f"Bearer {RBAC_TOKEN}".encode())]},
        "list secrets elsewhere (denied)": {"method": "GET", "path": "/api/v1/namespaces/other/secrets",
                                            "query_string": b"limit=500",
                                            "headers": [(b"authorization", f"Bearer {RBAC_TOKEN}".encode())]},
    }
    out: dict[str, Any] = {}
    for label, scope in scopes.items():
        def one(scope: dict[str, Any] = scope) -> None:
            user = mw.authenticate(scope)
            assert user is not None
            with contextlib.suppress(errors.StatusError):  # the denied case: building the 403 is part of the cost
                mw.authorize(scope, mw.impersonate(scope, user))
        one()
        t = time.perf_counter()
        for _ in range(n):
            one()
        out[label] = round((time.perf_counter() - t) / n * 1e6, 2)
    return {"microsecondsPerRequest": out}


def bench_rbac(url: str, creates: int, clients: int, connections: int) -> dict[str, Any]:
    """HTTP pod creates/s with the authorizer off (AlwaysAllow) and on (RBAC, a user bound to edit)."""
    out: dict[str, Any] = {}
    for mode, token in (("AlwaysAllow", ""), ("RBAC", RBAC_TOKEN)):
        _reset(url)
        _bind_bench_user(url)
        server = ApiServerProcess(ServerSettings(redis_url=url, port=0, workers=1, token=ADMIN_TOKEN,
                                                 authorization_mode=mode))
        server.start()
        try:
            out[mode] = bench_creates(server.settings.port, f"rbac-{mode.lower()}", creates, clients, connections,
                                      token=token)
        finally:
            server.stop()
    out["authorization"] = bench_authorize_cost(url)
    return out


# ----------------------------------------------------------------------------- driver
def _reset(url: str) -> None:
    core = ServerCore(Store.connect(url))
    core.store.redis.flushall()
    core = ServerCore(Store.connect(url))
    core.bootstrap()
    core.create(NAMESPACE, {"metadata": {"name": NS}})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--redis-url")
    ap.add_argument("--creates", type=int, default=20_000, help="pods per creates/s run")
    ap.add_argument("--clients", type=int, default=4, help="client processes for creates/s")
    ap.add_argument("--connections", type=int, default=8, help="keep-alive connections per client process")
    ap.add_argument("--workers", type=int, default=2, help="API server worker processes for the multi-worker run")
    ap.add_argument("--rate", type=int, default=500, help="paced creates/s for the latency run")
    ap.add_argument("--latency-seconds", type=float, default=10.0)
    ap.add_argument("--pods", type=int, default=20_000, help="pods for kubectl get pods -A (100000 for the target)")
    ap.add_argument("--watch-rate", type=int, default=1000)
    ap.add_argument("--watch-seconds", type=float, default=5.0)
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--only", choices=("all", "rbac"), default="all",
                    help="rbac: only creates/s with RBAC off vs on and the per-request authorization cost")
    args = ap.parse_args(argv)

    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="kemu-bench-http-") as tmpdir, redis_url(args.redis_url) as url:
        tmp = Path(tmpdir)
        if args.only == "rbac":
            results["rbac"] = bench_rbac(url, args.creates, args.clients, args.connections)
            print(json.dumps({"rbac": results["rbac"]}, indent=2), flush=True)
            save(results, args.json)
            return 0
        creates: dict[str, Any] = {}
        for workers in (1, args.workers):
            _reset(url)
            server = ApiServerProcess(ServerSettings(redis_url=url, port=0, workers=workers))
            server.start()
            port = server.settings.port
            try:
                creates[f"workers={workers}"] = bench_creates(port, f"w{workers}", args.creates, args.clients,
                                                              args.connections)
                print(json.dumps({"createsOverHttp": creates}, indent=2), flush=True)
                if workers == 1:
                    _reset(url)
                    results["latency"] = bench_latency(port, args.rate, args.latency_seconds)
                    print(json.dumps({"latency": results["latency"]}, indent=2), flush=True)
            finally:
                server.stop()
        results["createsOverHttp"] = creates

        _reset(url)
        server = ApiServerProcess(ServerSettings(redis_url=url, port=0, workers=1))
        server.start()
        port = server.settings.port
        try:
            results["watchOverHttp"] = bench_watch(url, port, args.watch_rate, args.watch_seconds)
            print(json.dumps({"watchOverHttp": results["watchOverHttp"]}, indent=2), flush=True)
            _reset(url)
            results["kubectlGetPodsAll"] = bench_kubectl(url, server.url, args.pods, tmp)
            print(json.dumps({"kubectlGetPodsAll": results["kubectlGetPodsAll"]}, indent=2), flush=True)
        finally:
            server.stop()
    save(results, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
