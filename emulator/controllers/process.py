"""A controller manager in a process of its own, as kube-controller-manager is one on a control-plane node.

``kemu up`` runs each of its ``--controller-managers`` as ``python -m
emulator.controllers.process`` (settings as JSON in ``$KEMU_CONTROLLER_MANAGER``),
so a crash or a ``kill -9`` of one is a process exit its supervisor sees and
repairs (:mod:`emulator.supervisor`), as the kubelet restarts the static pod.
The child connects to Redis, starts a :class:`~emulator.controllers.manager.ControllerManager`
(leader election, informers, controllers), serves its ``/metrics`` when asked,
writes ``ready`` to the pipe its parent passed (``--ready-fd``) and runs until
SIGTERM, when it releases its Lease and stops.

**Identity.** Each manager slot keeps one leader-election identity across
restarts (upstream's is ``hostname_<uuid>``, new per process): a restarted
leader finds the Lease still naming it and renews it at once
(``tryAcquireOrRenew``: the observed holder is itself) instead of waiting
``lease_duration`` for its own lease to expire.

The cluster clock crosses the process boundary as (speed, cluster time at a
wall instant), as for the API server process.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

ENV = "KEMU_CONTROLLER_MANAGER"


class ControllerManagerError(RuntimeError):
    """A controller manager process did not start."""


@dataclass(frozen=True)
class ManagerProcessSettings:
    redis_url: str
    manager: dict[str, Any] = field(default_factory=dict)  # a ManagerConfig as a dict (identity included)
    prefix: str = "kemu:"
    stream_cap: int = 200_000
    node_shards: int = 16
    clock_speed: float = 1.0
    clock_start: float | None = None
    clock_wall: float | None = None
    serve_metrics: bool = False

    def to_env(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_env(cls) -> ManagerProcessSettings:
        return cls(**json.loads(os.environ[ENV]))


def run(settings: ManagerProcessSettings, ready_fd: int | None) -> int:
    """The child: run one controller manager until SIGTERM / SIGINT."""
    import logging

    from emulator.clock import SystemClock
    from emulator.controllers.manager import ControllerManager, ManagerConfig
    from emulator.server.core import ServerCore
    from emulator.store.store import Store, StoreConfig

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    start = settings.clock_start
    if start is not None and settings.clock_wall is not None:
        start += (time.time() - settings.clock_wall) * settings.clock_speed
    store = Store.connect(settings.redis_url, StoreConfig(prefix=settings.prefix, stream_cap=settings.stream_cap,
                                                          node_shards=settings.node_shards))
    manager = ControllerManager(ServerCore(store, SystemClock(settings.clock_speed, start=start)),
                                ManagerConfig.from_dict(settings.manager), tune_gc=True).start()
    metrics = None
    if settings.serve_metrics:
        from emulator.metrics import serve_and_register

        metrics = serve_and_register(store.redis, f"controller-manager-{socket.gethostname()}-{os.getpid()}",
                                     "controller-manager", prefix=settings.prefix)
    if ready_fd is not None:
        os.write(ready_fd, b"ready")
        os.close(ready_fd)
    stop.wait()
    started = time.monotonic()
    manager.stop()
    if metrics is not None:
        metrics.stop()
    store.close()
    logging.getLogger(__name__).info("controller manager %s stopped in %.2f s", manager.identity,
                                     time.monotonic() - started)
    return 0


class ControllerManagerProcess:
    """One ``python -m emulator.controllers.process`` child (its own process group), ready once it says so.

    ``on_spawn`` is called with each child's pid as soon as it exists (``kemu up`` records it).
    """

    def __init__(self, settings: ManagerProcessSettings, *, name: str, log_path: Path | None = None,
                 on_spawn: Callable[[int], None] | None = None) -> None:
        self.settings = settings
        self.name = name
        self.part = "the controller managers"
        self.log_path = log_path
        self.on_spawn = on_spawn
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None
        self._ready_fd: int | None = None

    def pid(self) -> int | None:
        proc = self.proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def exit_status(self) -> int | None:
        proc = self.proc
        return proc.poll() if proc is not None else None

    def start(self, timeout: float = 60.0) -> int:
        self.spawn()
        return self.wait_ready(timeout)

    def spawn(self) -> None:
        """Start the child; :meth:`wait_ready` waits for it (other parts may start meanwhile)."""
        read_end, write_end = os.pipe()
        try:
            env = {**os.environ, ENV: self.settings.to_env()}
            if self.log_path is not None and self._log_file is None:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                self._log_file = self.log_path.open("ab")
            out = self._log_file if self._log_file is not None else subprocess.DEVNULL
            self.proc = subprocess.Popen([sys.executable, "-m", "emulator.controllers.process", "--ready-fd",
                                          str(write_end)], env=env, stdin=subprocess.DEVNULL, stdout=out,
                                         stderr=subprocess.STDOUT, pass_fds=[write_end], process_group=0)
        except BaseException:
            os.close(read_end)
            raise
        finally:
            os.close(write_end)  # the child holds its own copy: EOF here when it exits
        self._ready_fd = read_end
        if self.on_spawn is not None:
            self.on_spawn(self.proc.pid)

    def wait_ready(self, timeout: float = 60.0) -> int:
        """Wait until the child spawned last says it is ready; its pid."""
        read_end, self._ready_fd = self._ready_fd, None
        assert self.proc is not None and read_end is not None, "spawn() first"
        try:
            ready, _, _ = select.select([read_end], [], [], timeout)
            said = os.read(read_end, 16) if ready else b""
        finally:
            os.close(read_end)
        if said == b"ready":
            return self.proc.pid
        code = self.proc.poll()
        self.stop()
        where = f"; see {self.log_path}" if self.log_path else ""
        if code is not None:
            raise ControllerManagerError(f"controller manager {self.name} exited with code {code} while starting"
                                         + where)
        raise ControllerManagerError(f"controller manager {self.name} was not ready after {timeout:.0f} s" + where)

    def restart(self) -> int:
        self._reap()
        return self.start()

    def _reap(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)  # whatever it left behind
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5.0)

    def stop(self, timeout: float = 10.0) -> None:
        if self._ready_fd is not None:
            os.close(self._ready_fd)
            self._ready_fd = None
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout)
        self._reap()
        log_file, self._log_file = self._log_file, None
        if log_file is not None:
            log_file.close()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m emulator.controllers.process")
    ap.add_argument("--ready-fd", type=int)
    args = ap.parse_args(argv)
    return run(ManagerProcessSettings.from_env(), args.ready_fd)


if __name__ == "__main__":
    sys.exit(main())
