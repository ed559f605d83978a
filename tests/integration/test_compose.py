"""docker-compose.yml and the Dockerfile, checked without Docker.

Two halves. The static checks read the compose file the way Compose would
(PyYAML resolves the ``x-kemu`` anchor and ``<<`` merge keys) and hold it to
the rest of the repository: every kemu container's command is parsed by the
``kemu`` command's own parser and loaded as kemu configuration, published
ports match the ports the commands listen on, every ``service:port`` a
command or a mounted config names is a port that service listens on,
variables are defined, bind-mounted files and the Dockerfile's ``COPY``
sources exist, ``depends_on`` names real services with healthchecks.

The other half runs the same service commands as local processes (no Docker
daemon here): host names become 127.0.0.1 and free ports, container paths
(the shared volume, ``KEMU_HOME``) become directories under ``tmp_path``,
replicas become several processes, and every part is started in
``depends_on`` order once what it depends on is healthy, as Compose does.
Then the loadgen service's command runs the quickstart scenario against the
result. Every process group is killed in the fixture's teardown.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from actors.cli import build_parser
from actors.ray_node import ray_start_argv
from emulator import cli as emulator_cli
from emulator.apiserver.kubeconfig import write as write_kubeconfig
from emulator.store.redis_server import EmbeddedRedis, RedisServerConfig
from tests.prometheus import free_port

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yml"
DOCKERFILE = REPO / "Dockerfile"
KEMU_IMAGE = "kemu:local"
WORKDIR = "/opt/kemu"  # the Dockerfile's WORKDIR: relative paths in commands are relative to the repository
# Ports the third-party images listen on (their documented defaults; compose does not change them).
# Bind mounts that are outputs, not inputs: Docker creates the directory (loadgen writes kemu run's results there).
OUTPUT_MOUNTS = {"./kemu-runs"}
IMAGE_PORTS = {"redis": {6379}, "prom/prometheus": {9090}, "grafana/grafana": {3000}}


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def services() -> dict[str, dict[str, Any]]:
    return compose()["services"]


def kemu_services() -> dict[str, dict[str, Any]]:
    return {name: svc for name, svc in services().items() if svc.get("image") == KEMU_IMAGE}


def flag(argv: list[str], name: str) -> str | None:
    """The value of ``--name VALUE`` (or ``--name=VALUE``) in ``argv``."""
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


def listening_ports(svc: dict[str, Any]) -> set[int]:
    """The container ports a service listens on, from its kemu command line or its image."""
    image = str(svc.get("image", "")).split(":")[0]
    if image in IMAGE_PORTS:
        return IMAGE_PORTS[image]
    argv = [str(a) for a in svc["command"]]
    ports: set[int] = set()
    if argv[1] == "ray-node" and "--head" in argv:
        ports |= {int(flag(argv, "--port") or 6379), int(flag(argv, "--client-port") or 10001)}
    if argv[1] == "up" and "--no-api-server" not in argv:
        ports.add(int(flag(argv, "--api-port") or 6443))
    return ports


def replicas(svc: dict[str, Any]) -> int:
    return int((svc.get("deploy") or {}).get("replicas", 1))


def mounts(svc: dict[str, Any]) -> list[tuple[str, str]]:
    """``(source, container path)`` of every volume (short syntax: ``SRC:DST[:MODE]``)."""
    out = []
    for v in svc.get("volumes", []):
        src, dst = v.split(":")[:2]
        out.append((src, dst))
    return out


# ---------------------------------------------------------------------------------------------------------------
# The compose file on its own


def test_compose_file_parses_and_has_every_part() -> None:
    doc = compose()
    assert doc["name"] == "kemu"
    svcs = doc["services"]
    for name in ("redis", "ray-head", "ray-worker", "apiserver", "controller-manager", "kubelets", "schedulers",
                 "prometheus", "grafana", "loadgen"):
        assert name in svcs, name
    assert svcs["loadgen"]["profiles"] == ["loadgen"]
    assert replicas(svcs["apiserver"]) >= 2 and replicas(svcs["ray-worker"]) >= 1
    for name, svc in kemu_services().items():
        assert svc["build"] == ".", name
        assert svc["command"][0] == "kemu", name
    grafana_env = svcs["grafana"]["environment"]
    assert grafana_env["GF_AUTH_ANONYMOUS_ENABLED"] == "true" and grafana_env["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert "--appendonly" in svcs["redis"]["command"]


def test_every_kemu_command_is_a_valid_kemu_invocation(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parsed by the ``kemu`` command's own parser, and (for up/run) loaded as kemu configuration."""
    monkeypatch.chdir(REPO)  # the image's WORKDIR holds the repository's layout
    monkeypatch.delenv("KEMU_REDIS_URL", raising=False)
    parser = build_parser()
    for name, svc in kemu_services().items():
        argv = [str(a) for a in svc["command"]]
        args = parser.parse_args(argv[1:])
        if args.command in ("up", "run"):
            cfg = emulator_cli._config(args)  # what `kemu up` would run; ConfigError on a bad flag value
            assert cfg.redis_url == "redis://redis:6379/0", name  # every part meets the others in one Redis
        if args.command == "run":
            assert (REPO / args.scenario).is_file(), f"{name}: scenario {args.scenario} is not in the repository"
        health = (svc.get("healthcheck") or {}).get("test")
        if isinstance(health, list) and health[:2] == ["CMD", "kemu"]:
            parser.parse_args(health[2:])


def test_component_commands_run_what_their_service_is_for() -> None:
    parser = build_parser()
    parsed = {name: parser.parse_args([str(a) for a in svc["command"]][1:]) for name, svc in kemu_services().items()}
    assert parsed["ray-head"].head and parsed["ray-worker"].address == f"ray-head:{parsed['ray-head'].port}"
    api = parsed["apiserver"]
    assert api.api_enabled is not False and api.controller_managers == 0 and api.schedulers == 0
    assert api.api_host == "0.0.0.0" and api.api_token_file and api.api_advertise_url
    for name in ("controller-manager", "kubelets", "schedulers"):
        assert parsed[name].api_enabled is False, name
    assert parsed["controller-manager"].controller_managers >= 2 and parsed["controller-manager"].controllers_on_ray
    assert parsed["kubelets"].node_pools and parsed["kubelets"].controller_managers == 0
    assert parsed["schedulers"].schedulers >= 1 and parsed["schedulers"].controller_managers == 0
    for name in ("controller-manager", "kubelets", "schedulers"):  # Ray drivers: Ray Client, no raylet needed
        assert parsed[name].ray_address == f"ray://ray-head:{parsed['ray-head'].client_port}", name
    assert parsed["loadgen"].attach


def test_published_ports_match_what_the_commands_listen_on() -> None:
    for name, svc in services().items():
        listens = listening_ports(svc)
        for spec in svc.get("ports", []):
            host, target = str(spec).rsplit(":", 1)
            host = host.rsplit(":", 1)[-1]  # HOST_IP:PORTS → PORTS
            assert int(target) in listens, f"{name} publishes {spec} but listens on {sorted(listens)}"
            lo, _, hi = host.partition("-")
            width = int(hi or lo) - int(lo) + 1
            assert width >= replicas(svc), f"{name}: {replicas(svc)} replicas need {replicas(svc)} host ports ({spec})"


def _references(text: str, names: set[str]) -> list[tuple[str, int]]:
    """``service:port`` references (in URLs or addresses) to one of ``names``."""
    pattern = re.compile(r"(?<![\w.-])(" + "|".join(map(re.escape, sorted(names, key=len, reverse=True)))
                         + r"):(\d+)")
    return [(m.group(1), int(m.group(2))) for m in pattern.finditer(text)]


def test_every_service_address_names_a_port_that_service_listens_on() -> None:
    svcs = services()
    texts: dict[str, str] = {}
    for name, svc in svcs.items():
        texts[name] = " ".join(map(str, svc.get("command", []))) + " " + " ".join(
            str(v) for v in (svc.get("environment") or {}).values())
        health = (svc.get("healthcheck") or {}).get("test")
        if isinstance(health, list):
            texts[name] += " " + " ".join(health)
        for src, _ in mounts(svc):  # mounted configuration files (Prometheus's, Grafana's data source)
            path = REPO / src
            files = [path] if path.is_file() else sorted(path.rglob("*.yml")) if path.is_dir() else []
            texts[name] += " " + " ".join(f.read_text() for f in files)
    found = 0
    for name, text in texts.items():
        for target, port in _references(text, set(svcs)):
            found += 1
            assert port in listening_ports(svcs[target]), f"{name} reaches {target}:{port}, which does not listen there"
            if target != name:
                deps = svcs[name].get("depends_on") or {}
                assert target in deps or any(target in (svcs[d].get("depends_on") or {}) for d in deps), \
                    f"{name} reaches {target} without depending on it"
    assert found >= 10  # redis, ray-head, apiserver, prometheus from several services


def test_environment_is_defined_and_consistent() -> None:
    raw = COMPOSE_FILE.read_text()
    assert "${" not in raw, "the compose file interpolates variables nobody defines"  # it runs as is
    sources = "\n".join(p.read_text() for d in ("emulator", "actors", "loadgen") for p in (REPO / d).rglob("*.py"))
    for name, svc in services().items():
        env = svc.get("environment") or {}
        container_paths = [dst for _, dst in mounts(svc)] + list(svc.get("tmpfs", []))
        for var, value in env.items():
            if var.startswith("KEMU_"):
                assert var in sources, f"{name}: {var} is read by no kemu code"
            for src, dst in mounts(svc):  # a path into a bind-mounted directory names a file that exists
                if src.startswith(".") and str(value).startswith(dst + "/"):
                    assert (REPO / src / str(value)[len(dst) + 1:]).is_file(), f"{name}: {var}={value} is missing"
            if var in ("RAY_AUTH_TOKEN_PATH", "KUBECONFIG"):
                assert any(str(value).startswith(p + "/") for p in container_paths), \
                    f"{name}: {var}={value} is on no volume"
        argv = [str(a) for a in svc.get("command", [])]
        for opt in ("--api-token-file",):
            value = flag(argv, opt)
            if value:
                assert any(value.startswith(p + "/") for p in container_paths), f"{name}: {opt} {value} on no volume"
    # Everyone who reads the shared token files mounts the same volume.
    kemu_env = {name: svc.get("environment") or {} for name, svc in kemu_services().items()}
    assert {e.get("RAY_AUTH_TOKEN_PATH") for e in kemu_env.values()} == {"/var/lib/kemu/shared/ray-token"}
    assert all(e.get("KEMU_METRICS_HOST") == "0.0.0.0" for e in kemu_env.values())


def test_every_mounted_file_exists_and_every_volume_is_declared() -> None:
    doc = compose()
    declared = set(doc.get("volumes") or {})
    for name, svc in doc["services"].items():
        for src, _dst in mounts(svc):
            if src in OUTPUT_MOUNTS:
                continue
            if src.startswith((".", "/")):
                assert (REPO / src).exists(), f"{name} mounts {src}, which is not in the repository"
            else:
                assert src in declared, f"{name} mounts undeclared volume {src}"
    grafana = dict((dst, src) for src, dst in mounts(doc["services"]["grafana"]))
    provisioning = REPO / grafana["/etc/grafana/provisioning"]
    assert (provisioning / "datasources" / "prometheus.yml").is_file()
    provider = yaml.safe_load((provisioning / "dashboards" / "kemu.yml").read_text())
    path = provider["providers"][0]["options"]["path"]
    assert path in grafana and list((REPO / grafana[path]).glob("*.json")), "no dashboards where Grafana looks"


def test_depends_on_names_services_with_healthchecks() -> None:
    svcs = services()
    for name, svc in svcs.items():
        deps = svc.get("depends_on") or {}
        for dep in deps:
            assert dep in svcs, f"{name} depends on unknown service {dep}"
            cond = deps[dep].get("condition") if isinstance(deps, dict) else None
            if cond == "service_healthy":
                health = svcs[dep].get("healthcheck") or {}
                assert health.get("test") and not health.get("disable"), f"{name} waits for {dep}'s missing check"


def _dockerignored() -> list[str]:
    return [line.strip() for line in (REPO / ".dockerignore").read_text().splitlines()
            if line.strip() and not line.startswith("#")]


def test_dockerfile_copies_what_exists_and_what_the_commands_use() -> None:
    text = DOCKERFILE.read_text()
    assert re.search(r"^FROM python:3\.11-slim-bookworm$", text, re.M)
    assert re.search(rf"^WORKDIR {WORKDIR}$", text, re.M)
    copied: list[str] = []
    for line in re.findall(r"^COPY (.+)$", text, re.M):
        *sources, _dest = shlex.split(line)
        for src in sources:
            assert (REPO / src).exists(), f"Dockerfile copies {src}, which does not exist"
            assert src not in _dockerignored(), f"Dockerfile copies {src}, which .dockerignore excludes"
            copied.append(src)
    # Files the commands name relative to WORKDIR are in the image.
    for name, svc in kemu_services().items():
        for arg in map(str, svc["command"]):
            if (REPO / arg).is_file() and "/" in arg:
                assert any(arg == c or arg.startswith(c.rstrip("/") + "/") for c in copied), \
                    f"{name} uses {arg}, which the image does not contain"


def test_prometheus_config_is_valid_with_the_token_in_place(tmp_path: Path) -> None:
    """``promtool check config``."""
    promtool = shutil.which("promtool")
    # Part of Debian's prometheus package, which scripts/setup.sh installs: missing is a failure.
    assert promtool, "promtool not found: scripts/setup.sh installs Debian's prometheus package"
    prom = services()["prometheus"]
    config = next(REPO / src for src, dst in mounts(prom) if dst == "/etc/prometheus/prometheus.yml")
    text = config.read_text()
    (tmp_path / "prometheus.yml").write_text(text)
    out = subprocess.run([promtool, "check", "config", str(tmp_path / "prometheus.yml")], capture_output=True,
                         text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "http://apiserver:6443/kemu/v1/targets" in text


def test_ray_node_runs_ray_start_with_kemus_settings() -> None:
    parser = build_parser()
    head = ray_start_argv(parser.parse_args(["ray-node", "--head", "--port", "6379", "--client-port", "10001"]))
    assert head[:3] == ["ray", "start", "--block"] and "--head" in head
    assert {"--port=6379", "--ray-client-server-port=10001", "--include-dashboard=false"} <= set(head)
    worker = ray_start_argv(parser.parse_args(["ray-node", "--address", "ray-head:6379", "--num-cpus", "4"]))
    assert "--address=ray-head:6379" in worker and "--num-cpus=4" in worker and "--head" not in worker
    with pytest.raises(SystemExit):  # one role, exactly
        parser.parse_args(["ray-node", "--head", "--address", "x:1"])


def test_replicas_racing_for_the_token_file_all_get_the_first_token(tmp_path: Path) -> None:
    """Several processes start at once (API server replicas): one creates the file, all read the same token."""
    path = tmp_path / "shared" / "token"
    code = "import sys; from pathlib import Path; from emulator.apiserver.kubeconfig import shared_token; " \
           "print(shared_token(Path(sys.argv[1])))"
    procs = [subprocess.Popen([sys.executable, "-c", code, str(path)], stdout=subprocess.PIPE, text=True, cwd=REPO)
             for _ in range(6)]
    tokens = {p.communicate(timeout=60)[0].strip() for p in procs}
    assert len(tokens) == 1 and tokens == {path.read_text().strip()}
    assert path.stat().st_mode & 0o777 == 0o600
    assert sorted(x.name for x in path.parent.iterdir()) == ["token"]  # no temporary file left behind


# ---------------------------------------------------------------------------------------------------------------
# The same commands as local processes


class Part:
    """One replica of one compose service, as a local process."""

    service: str
    replica: int
    argv: list[str]
    env: dict[str, str]
    home: Path
    log: Path
    proc: subprocess.Popen[bytes] | None = None

    def tail(self, lines: int = 30) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- {self.service}-{self.replica} ({self.log}) ---\n" + "\n".join(text.splitlines()[-lines:])


@dataclass
class LocalCompose:
    """docker-compose.yml's kemu services as local processes (see the module docstring)."""

    tmp: Path
    redis_url: str
    parts: list[Part] = field(default_factory=list)
    ports: dict[tuple[str, int], list[int]] = field(default_factory=dict)  # (service, container port) → local ports
    paths: dict[str, Path] = field(default_factory=dict)  # container path → local directory

    def __post_init__(self) -> None:
        _host, port = self.redis_url.removeprefix("redis://").split("/")[0].split(":")
        self.ports[("redis", 6379)] = [int(port)]
        for name, svc in services().items():
            if svc.get("image") != KEMU_IMAGE or "profiles" in svc:
                continue
            for p in listening_ports(svc):
                self.ports[(name, p)] = [free_port() for _ in range(replicas(svc))]
            for src, dst in mounts(svc):
                if not src.startswith((".", "/")):
                    self.paths.setdefault(dst, self.tmp / src)
        for d in self.paths.values():
            d.mkdir(parents=True, exist_ok=True)

    def rewrite(self, text: str, service: str | None = None, replica: int = 0) -> str:
        """Compose addresses and container paths → this host's."""
        for (name, port), local in self.ports.items():
            text = re.sub(rf"(?<![\w.-]){re.escape(name)}:{port}\b", f"127.0.0.1:{local[0]}", text)
        for dst, local_dir in self.paths.items():
            text = text.replace(dst, str(local_dir))
        return text

    def argv(self, service: str, replica: int) -> list[str]:
        argv = [self.rewrite(str(a)) for a in services()[service]["command"]]
        # The service's own listening ports: each replica its own (containers each have their own network).
        for opt in ("--port", "--client-port", "--api-port"):
            for i, arg in enumerate(argv[:-1]):
                if arg == opt and (service, int(argv[i + 1])) in self.ports:
                    argv[i + 1] = str(self.ports[(service, int(argv[i + 1]))][replica])
        kemu = Path(sys.executable).with_name("kemu")
        return [str(kemu), *argv[1:]]

    def env(self, service: str, replica: int, home: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("KEMU_", "RAY_"))}
        for var, value in (services()[service].get("environment") or {}).items():
            env[var] = self.rewrite(str(value))
        env["KEMU_HOME"] = str(home)  # the container's own $KEMU_HOME (a tmpfs in compose)
        env["PYTHONUNBUFFERED"] = "1"
        return env

    def start(self, service: str) -> list[Part]:
        started = []
        for i in range(replicas(services()[service])):
            home = self.tmp / "home" / f"{service}-{i}"
            home.mkdir(parents=True)
            part = Part(service, i, self.argv(service, i), self.env(service, i, home), home,
                        self.tmp / "logs" / f"{service}-{i}.log")
            part.log.parent.mkdir(exist_ok=True)
            with part.log.open("wb") as out:
                part.proc = subprocess.Popen(part.argv, cwd=REPO, env=part.env, stdin=subprocess.DEVNULL, stdout=out,
                                             stderr=subprocess.STDOUT, start_new_session=True)
            self.parts.append(part)
            started.append(part)
        return started

    def wait_healthy(self, parts: list[Part], timeout: float = 120.0) -> None:
        """Compose's ``service_healthy``: each part is up, then its service's own healthcheck passes.

        Up: a Ray head's ports accept connections, a Ray worker is listed by the head, a ``kemu up`` wrote
        its state file. The healthchecks (``kemu status``) then run side by side, as Compose runs them.
        """
        deadline = time.monotonic() + timeout
        for part in parts:
            while not self._up(part):
                assert part.proc is not None
                if part.proc.poll() is not None:
                    pytest.fail(f"{part.service}-{part.replica} exited with {part.proc.returncode}\n{self.logs()}")
                if time.monotonic() > deadline:
                    pytest.fail(f"{part.service}-{part.replica} not up after {timeout} s\n{self.logs()}")
                time.sleep(0.2)  # another process's readiness: nothing to block on
        checks = []
        for part in parts:
            test = services()[part.service]["healthcheck"]["test"]
            if test[:2] == ["CMD", "kemu"]:
                checks.append((part, subprocess.Popen([str(Path(sys.executable).with_name("kemu")), *test[2:]],
                                                      env=part.env, cwd=REPO, stdout=subprocess.PIPE,
                                                      stderr=subprocess.STDOUT, text=True)))
        for part, check in checks:
            output, _ = check.communicate(timeout=60)
            assert check.returncode == 0, f"{part.service}-{part.replica}: healthcheck failed: {output}"

    def _up(self, part: Part) -> bool:
        if part.argv[1] == "ray-node":
            ports = [v[part.replica] for (n, _), v in self.ports.items() if n == part.service]
            if not ports:  # a worker: the head lists it once it has registered
                return self._ray_nodes() >= 2
            return all(_accepts(p) for p in ports)
        return (part.home / "cluster.json").exists()

    def _ray_nodes(self) -> int:
        head = next(p for p in self.parts if p.service == "ray-head")
        gcs = self.ports[("ray-head", int(flag(services()["ray-head"]["command"], "--port") or 6379))][0]
        code = (f"import ray; ray.init(address='127.0.0.1:{gcs}', log_to_driver=False, configure_logging=False); "
                "print(sum(n['Alive'] for n in ray.nodes()))")
        out = subprocess.run([sys.executable, "-c", code], env=head.env, capture_output=True, text=True, timeout=60,
                             check=False)
        return int(out.stdout.strip() or 0) if out.returncode == 0 else 0

    def logs(self) -> str:
        return "\n".join(p.tail() for p in self.parts)

    def stop(self) -> None:
        """SIGTERM every process group (dependents first, as ``docker compose down``), then SIGKILL stragglers."""
        for part in reversed(self.parts):
            if part.proc is not None and part.proc.poll() is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(part.proc.pid, signal.SIGTERM)
                # kemu up stops its parts within seconds; a Ray node's clean stop is slow, and the drivers
                # (stopped before it) have already removed their actors.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    part.proc.wait(timeout=5 if part.argv[1] == "ray-node" else 30)
            if part.proc is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(part.proc.pid, signal.SIGKILL)  # Ray's and uvicorn's children too
                part.proc.wait(timeout=10)


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _waves() -> list[list[str]]:
    """The kemu services in waves, as Compose starts them: each wave once everything it depends on is up."""
    svcs = services()
    depth: dict[str, int] = {}

    def level(name: str) -> int:
        if name not in depth:
            depth[name] = 1 + max((level(d) for d in svcs[name].get("depends_on") or {}), default=-1)
        return depth[name]

    waves: dict[int, list[str]] = {}
    for name, svc in svcs.items():
        if svc.get("image") == KEMU_IMAGE and "profiles" not in svc:
            waves.setdefault(level(name), []).append(name)
    return [waves[k] for k in sorted(waves)]


@pytest.fixture
def local_compose(tmp_path: Path) -> Iterator[LocalCompose]:
    redis = EmbeddedRedis(RedisServerConfig(data_dir=tmp_path / "redis"))  # the redis service (appendonly, too)
    cluster = LocalCompose(tmp_path, redis.start())
    try:
        yield cluster
    finally:
        cluster.stop()
        redis.stop()


@pytest.mark.timeout(240)
def test_compose_services_as_local_processes_run_the_quickstart(local_compose: LocalCompose) -> None:
    t0 = time.monotonic()
    for wave in _waves():
        parts = [part for name in wave for part in local_compose.start(name)]
        local_compose.wait_healthy(parts)
        print(f"{', '.join(wave)}: healthy at {time.monotonic() - t0:.1f} s")

    # The API server replicas share one token, and the kubeconfig beside it reaches every replica.
    shared = local_compose.paths["/var/lib/kemu/shared"]
    kubeconfig = shared / "kubeconfig"
    assert kubeconfig.exists() and (shared / "token").stat().st_mode & 0o777 == 0o600
    token = (shared / "token").read_text().strip()
    assert token in kubeconfig.read_text()
    configs = [kubeconfig]  # names the advertised address: "apiserver:6443", here the first replica
    for i, port in enumerate(local_compose.ports[("apiserver", 6443)]):  # each replica, with the shared token
        configs.append(write_kubeconfig(local_compose.tmp / f"kubeconfig-{i}", f"http://127.0.0.1:{port}", token))
    for config in configs:
        out = subprocess.run(["kubectl", "--kubeconfig", str(config), "get", "namespaces", "-o", "name"],
                             capture_output=True, text=True, timeout=60, check=False)
        assert out.returncode == 0 and "namespace/kube-system" in out.stdout, out.stderr

    # The loadgen service's command, against this cluster.
    loadgen = services()["loadgen"]
    argv = local_compose.argv("loadgen", 0)
    env = local_compose.env("loadgen", 0, local_compose.tmp / "home" / "loadgen")
    (local_compose.tmp / "home" / "loadgen").mkdir(parents=True)
    assert loadgen["environment"]["KUBECONFIG"].endswith("/kubeconfig")
    # Where the results go: the container's ./kemu-runs is a host directory; here, tmp_path.
    summary = local_compose.tmp / "summary.json"
    argv += ["--output", str(summary), "--report", str(local_compose.tmp / "report.html")]
    t0 = time.monotonic()
    out = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=180, check=False)
    elapsed = time.monotonic() - t0
    print(f"loadgen: {elapsed:.1f} s")
    assert out.returncode == 0, f"{out.stdout}\n{out.stderr}\n{local_compose.logs()}"
    result = json.loads(summary.read_text())
    assert result["ok"], out.stdout
    # ok: every pod the scenario expects (its own and its Deployments', which the controller-manager service
    # creates) was scheduled by the schedulers service's Ray actor onto the kubelets service's nodes.
    assert result["pods"]["scheduled"] > 0, result["pods"]
    assert elapsed < 120, elapsed
