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
SIGTERM (then SIGKILL if it hangs). The parent binds the listening socket
itself and hands the child its file descriptor: a busy port is a clear error
at once (or, when the caller allows it, a fall-back to a free port), and no
other process can take the port in the second the child needs to start.
Measured on the 2-core reference machine the child is ready about a second
after spawning.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from types import FrameType
from typing import IO

import uvicorn

from emulator.apiserver import watch
from emulator.apiserver.settings import ENV, ServerSettings

_APP = "emulator.apiserver.app:app_from_env"
# The KEMU_HOME whose process records the workers go into (set by ``kemu up`` for its API server).
RECORDS_ENV = "KEMU_APISERVER_RECORDS"
_BACKLOG = 4096


class ApiServerError(RuntimeError):
    """The API server could not be started (busy port, crash while starting, not ready in time)."""


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (0: a free port); ApiServerError if the port is taken."""
    sock = socket.socket(_family(host), socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ApiServerError(f"cannot listen on {host}:{port} for the API server: {e.strerror}; choose another "
                             "port with --api-port (0 picks a free one)") from None
    sock.listen(_BACKLOG)
    return sock


class _Server(uvicorn.Server):
    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        watch.DRAINING.set()
        super().handle_exit(sig, frame)


def _config(settings: ServerSettings) -> uvicorn.Config:
    return uvicorn.Config(_APP, factory=True, host=settings.host, port=settings.port, loop="uvloop",
                          http="httptools", lifespan="on", log_level=settings.log_level, access_log=False,
                          timeout_graceful_shutdown=5, timeout_keep_alive=30, backlog=_BACKLOG,
                          ssl_certfile=settings.tls_cert_file, ssl_keyfile=settings.tls_key_file)


def serve(settings: ServerSettings, sock: socket.socket | None = None) -> int:
    """Serve until SIGINT/SIGTERM on ``sock`` (default: bind ``settings.host:port``); returns the exit code."""
    os.environ[ENV] = settings.to_env()
    config = _config(settings)
    if sock is None:
        sock = listen(settings.host, settings.port)
    if settings.workers <= 1:
        server = _Server(config)
        server.run(sockets=[sock])
        return 0 if server.started else 1
    return _serve_workers(config, sock, settings.workers)


def _serve_workers(config: uvicorn.Config, sock: socket.socket, workers: int) -> int:
    """``workers`` forked processes accept on ``sock``; the parent only supervises them.

    A worker that dies (``kill -9``, a crash) is forked again with the kubelet's back-off
    (:class:`emulator.supervisor.CrashLoopBackOff`: the first time at once), while the others keep
    serving; the parent reaps every exit. With ``$KEMU_APISERVER_RECORDS`` (set by ``kemu up``) each
    worker has a process record ``apiserver-worker-N`` with its restart count (:mod:`emulator.processes`).
    """
    from emulator.processes import ProcessTable
    from emulator.supervisor import CrashLoopBackOff, describe_exit

    records_home = os.environ.get(RECORDS_ENV)
    records = ProcessTable(Path(records_home)) if records_home else None
    # Import the application's modules once, here, before forking (as gunicorn's --preload): each worker,
    # and each worker forked again after a crash, starts serving without a second or two of imports. The
    # application itself (its Redis connections) is still made in each worker, by the factory.
    importlib.import_module(_APP.partition(":")[0])

    def spawn(slot: int) -> int:
        pid = os.fork()
        if pid == 0:  # child: serve, never return into the parent's code
            code = 0
            try:
                _Server(config).run(sockets=[sock])
            except BaseException:
                code = 1
            os._exit(code)
        if records is not None:
            records.record(f"apiserver-worker-{slot}", pid, part="the API server")
        return pid

    children = {spawn(slot): slot for slot in range(workers)}  # pid -> worker slot
    backoffs = {slot: CrashLoopBackOff() for slot in range(workers)}
    pending: dict[int, float] = {}  # worker slot -> when to fork it again
    stopping = threading.Event()

    def stop(signum: int, _frame: FrameType | None) -> None:
        stopping.set()
        for pid in list(children):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while children or (pending and not stopping.is_set()):
        try:
            # Stopping: block until the next worker exits (nothing is forked any more).
            pid, status = os.waitpid(-1, 0 if stopping.is_set() else os.WNOHANG)
        except ChildProcessError:  # no worker alive: only those waiting out their back-off
            if stopping.is_set():
                break
            pid, status = 0, 0
        if pid:
            slot = children.pop(pid, None)
            if slot is not None and not stopping.is_set():
                now = time.monotonic()
                pending[slot] = now + backoffs[slot].delay(now)
                print(f"kemu apiserver: worker {slot} (pid {pid}) {describe_exit(_returncode(status))}; "
                      "forking it again", file=sys.stderr, flush=True)
            continue
        if not stopping.is_set():
            now = time.monotonic()
            for slot, at in sorted(pending.items()):
                if now >= at:
                    del pending[slot]
                    backoffs[slot].restarted(now)
                    children[spawn(slot)] = slot
                    if records is not None:
                        records.count_restart(f"apiserver-worker-{slot}")
        stopping.wait(0.05)  # waitpid cannot wait with a timeout: poll, 20 times a second
    sock.close()
    if records is not None:
        for slot in range(workers):
            records.forget(f"apiserver-worker-{slot}")
    return 0


def _returncode(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


class ApiServerProcess:
    """``python -m emulator.apiserver`` as a child process.

    ``fallback_to_free_port``: when ``settings.port`` is taken, listen on any free port instead
    of failing (``url`` tells where it ended up). The child leads a process group of its
    own, so one signal to the group reaches its workers, and a terminal's Ctrl-C reaches
    only its parent, which stops it in order. ``on_spawn`` is called with the child's pid
    as soon as it exists (``kemu up`` records it then, :mod:`emulator.processes`);
    ``records_home`` is where the workers record themselves and what ``/readyz`` reports on.
    """

    def __init__(self, settings: ServerSettings, log_path: Path | None = None, *,
                 fallback_to_free_port: bool = False, on_spawn: Callable[[int], None] | None = None,
                 records_home: Path | None = None) -> None:
        self.on_spawn = on_spawn
        self.records_home = records_home
        self.settings = settings
        self.log_path = log_path
        self.fallback = fallback_to_free_port
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_file: IO[bytes] | None = None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.settings.host in ("0.0.0.0", "") else self.settings.host
        scheme = "https" if self.settings.tls_cert_file else "http"
        return f"{scheme}://{host}:{self.settings.port}"

    def start(self, timeout: float = 30.0) -> str:
        try:
            sock = listen(self.settings.host, self.settings.port)
        except ApiServerError:
            if not self.fallback:
                raise
            sock = listen(self.settings.host, 0)
        try:
            self.settings = replace(self.settings, port=int(sock.getsockname()[1]))
            env = {**os.environ, ENV: self.settings.to_env()}
            if self.records_home is not None:
                env[RECORDS_ENV] = str(self.records_home)
            if self.log_path is not None:
                self.log_path.parent.mkdir(parents=True, exist_ok=True)
                self._log_file = self.log_path.open("ab")
            out = self._log_file if self._log_file is not None else subprocess.DEVNULL
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "emulator.apiserver", "--from-env", "--listen-fd", str(sock.fileno())],
                env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, pass_fds=[sock.fileno()],
                process_group=0)
        finally:
            sock.close()  # the child holds its own copy
        if self.on_spawn is not None:
            self.on_spawn(self.proc.pid)
        self.wait_ready(timeout)
        return self.url

    def exit_status(self) -> int | None:
        """None while the server process runs (or was never started); else its exit status, reaped."""
        proc = self.proc
        return proc.poll() if proc is not None else None

    def restart(self, timeout: float = 30.0) -> str:
        """Start the server again on the same port after its process died (``kemu up``'s supervisor).

        Workers it forked may outlive a ``kill -9`` of their parent, still holding the port: its
        process group is killed first, and the port is retried until they are gone.
        """
        proc, self.proc = self.proc, None
        if proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(5.0)
        log_file, self._log_file = self._log_file, None
        if log_file is not None:
            log_file.close()
        self.fallback = False  # clients know this port
        deadline = time.monotonic() + 5.0
        while True:
            try:
                return self.start(timeout)
            except ApiServerError as e:
                if self.proc is not None or time.monotonic() >= deadline or "cannot listen" not in str(e):
                    raise
            time.sleep(0.05)  # the dead server's workers are exiting: the port frees in a moment

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        headers = {"Authorization": f"Bearer {self.settings.token}"} if self.settings.token else {}
        context = ssl.create_default_context(cafile=self.settings.tls_ca_file) if self.settings.tls_cert_file else None
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise ApiServerError(f"the API server exited with code {self.proc.returncode} while starting"
                                     + (f"; see {self.log_path}" if self.log_path else ""))
            try:
                with urllib.request.urlopen(urllib.request.Request(self.url + "/readyz", headers=headers),
                                            timeout=1.0, context=context) as r:
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
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)  # its workers too
                proc.wait()
        log_file, self._log_file = self._log_file, None
        if log_file is not None:
            log_file.close()
