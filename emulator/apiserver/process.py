"""Running the API server: uvicorn in this process, or as a child process of the cluster.

:func:`serve` runs uvicorn (uvloop + httptools) in the current process with
``workers`` worker processes sharing one listening socket, as uvicorn's own
multi-worker mode does, but with a :class:`uvicorn.Server` subclass whose
exit handler also sets :data:`emulator.apiserver.watch.DRAINING`: open watch
streams then end cleanly within a second instead of holding shutdown until
uvicorn's graceful timeout cancels them mid-chunk.

:class:`ApiServerProcess` is what :class:`~emulator.cluster.LocalCluster` uses:
``python -m emulator.apiserver`` as a child process (its own interpreter, so
its request handling never competes for the cluster process's GIL), settings
passed in the environment, readiness awaited on ``/readyz``, stopped with
SIGTERM (then SIGKILL if it hangs). Measured on the 2-core reference machine
it is ready about a second after spawning.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import FrameType

import uvicorn

from emulator.apiserver import watch
from emulator.apiserver.settings import ENV, ServerSettings

_APP = "emulator.apiserver.app:app_from_env"


class ApiServerError(RuntimeError):
    """The API server could not be started (busy port, crash while starting, not ready in time)."""


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_port_free(host: str, port: int) -> None:
    """One clear error for a busy port instead of a child process dying with a bind traceback."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            raise ApiServerError(f"port {port} on {host} is already in use; choose another with --api-port "
                                 "(0 picks a free one)") from None


class _Server(uvicorn.Server):
    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        watch.DRAINING.set()
        super().handle_exit(sig, frame)


def _config(settings: ServerSettings) -> uvicorn.Config:
    return uvicorn.Config(_APP, factory=True, host=settings.host, port=settings.port, loop="uvloop",
                          http="httptools", lifespan="on", log_level=settings.log_level, access_log=False,
                          timeout_graceful_shutdown=5, timeout_keep_alive=30, backlog=4096)


def serve(settings: ServerSettings) -> int:
    """Serve until SIGINT/SIGTERM; returns the exit code."""
    os.environ[ENV] = settings.to_env()
    config = _config(settings)
    if settings.workers <= 1:
        server = _Server(config)
        server.run()
        return 0 if server.started else 1
    return _serve_workers(config, settings.workers)


def _worker(config: uvicorn.Config, sock: socket.socket) -> None:
    _Server(config).run(sockets=[sock])


def _serve_workers(config: uvicorn.Config, workers: int) -> int:
    """``workers`` forked processes accept on one socket bound here; the parent only supervises."""
    sock = config.bind_socket()
    children: list[int] = []
    for _ in range(workers):
        pid = os.fork()
        if pid == 0:  # child: serve, never return into the parent's code
            code = 0
            try:
                _worker(config, sock)
            except BaseException:
                code = 1
            os._exit(code)
        children.append(pid)
    stopping = threading.Event()

    def stop(signum: int, _frame: FrameType | None) -> None:
        stopping.set()
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    code = 0
    remaining = set(children)
    while remaining:
        try:
            pid, _status = os.wait()
        except ChildProcessError:
            break
        remaining.discard(pid)
        if not stopping.is_set():
            # A worker died on its own: stop the others rather than serve at reduced capacity silently.
            code = 1
            stop(signal.SIGTERM, None)
    sock.close()
    return code


class ApiServerProcess:
    """``python -m emulator.apiserver`` as a child process."""

    def __init__(self, settings: ServerSettings, log_path: Path | None = None) -> None:
        self.settings = settings
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_file: object | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.settings.host in ("0.0.0.0", "") else self.settings.host
        return f"http://{host}:{self.settings.port}"

    def start(self, timeout: float = 30.0) -> str:
        check_port_free(self.settings.host, self.settings.port)
        env = {**os.environ, ENV: self.settings.to_env()}
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            out = self.log_path.open("ab")
        else:
            out = subprocess.DEVNULL  # type: ignore[assignment]
        self._log_file = out
        self.proc = subprocess.Popen([sys.executable, "-m", "emulator.apiserver", "--from-env"], env=env,
                                     stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        self.wait_ready(timeout)
        return self.url

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        headers = {"Authorization": f"Bearer {self.settings.token}"} if self.settings.token else {}
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise ApiServerError(f"the API server exited with code {self.proc.returncode} while starting"
                                   + (f"; see {self.log_path}" if self.log_path else ""))
            try:
                with urllib.request.urlopen(urllib.request.Request(self.url + "/readyz", headers=headers),
                                            timeout=1.0) as r:
                    if r.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.05)  # polling a child's readiness endpoint: there is nothing to block on
        self.stop()
        raise ApiServerError(f"the API server was not ready after {timeout:.0f} s"
                           + (f"; see {self.log_path}" if self.log_path else ""))

    def stop(self, timeout: float = 10.0) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        log_file, self._log_file = self._log_file, None
        close = getattr(log_file, "close", None)
        if close is not None:
            close()
