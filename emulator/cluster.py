"""A local kemu cluster's lifecycle: start the parts, report on them, stop them.

:class:`LocalCluster` brings up, in order, Redis (embedded unless a URL is
given) and the store with its bootstrap objects; later components (API server,
kubelet shards, schedulers, controllers) are added to :meth:`LocalCluster.start`
and stopped in reverse order by :meth:`LocalCluster.stop`.

A detached cluster is the foreground ``kemu up`` running in a background
process; it writes a state file (``$KEMU_HOME/cluster.json``) once it is
ready, which ``kemu status`` and ``kemu down`` read.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from emulator.clock import SystemClock
from emulator.config import Config, kemu_home
from emulator.server.core import ServerCore
from emulator.store.redis_server import EmbeddedRedis, RedisServerConfig, wait_for_redis
from emulator.store.store import Store, StoreConfig


@dataclass
class ClusterState:
    """What ``kemu status`` / ``kemu down`` need to find a detached cluster."""

    pid: int
    redis_url: str
    embedded_redis: bool
    data_dir: str
    started_at: float
    api_url: str | None = None

    @staticmethod
    def path() -> Path:
        return kemu_home() / "cluster.json"

    def write(self) -> None:
        p = self.path()
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2))
        tmp.replace(p)

    @classmethod
    def read(cls) -> ClusterState | None:
        try:
            return cls(**json.loads(cls.path().read_text()))
        except (OSError, ValueError, TypeError):
            return None

    @classmethod
    def clear(cls) -> None:
        cls.path().unlink(missing_ok=True)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class LocalCluster:
    def __init__(self, config: Config) -> None:
        self.config = config
        self.redis: EmbeddedRedis | None = None
        self.redis_url: str | None = None
        self.store: Store | None = None
        self.core: ServerCore | None = None

    def start(self) -> ServerCore:
        cfg = self.config
        if cfg.redis_url:
            wait_for_redis(cfg.redis_url, timeout=cfg.redis_timeout)
            self.redis_url = cfg.redis_url
        else:
            self.redis = EmbeddedRedis(RedisServerConfig(data_dir=Path(cfg.data_dir), port=cfg.redis_port))
            self.redis_url = self.redis.start()
        self.store = Store.connect(self.redis_url, StoreConfig(prefix=cfg.prefix, stream_cap=cfg.stream_cap,
                                                               node_shards=cfg.node_shards))
        self.core = ServerCore(self.store, SystemClock(cfg.clock_speed))
        self.core.bootstrap()
        return self.core

    def stop(self) -> None:
        if self.store is not None:
            self.store.close()
            self.store = None
        if self.redis is not None:
            self.redis.stop()
            self.redis = None

    def __enter__(self) -> LocalCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def state(self) -> ClusterState:
        assert self.redis_url is not None
        return ClusterState(os.getpid(), self.redis_url, self.redis is not None, str(self.config.data_dir),
                            time.time())


def object_counts(store: Store) -> dict[str, Any]:
    """Objects per kind and the current resourceVersion, for ``kemu status``."""
    from emulator.api.kinds import all_kinds

    pipe = store.redis.pipeline(transaction=False)
    kinds = all_kinds()
    for kind in kinds:
        pipe.hlen(store.objects_key(kind))
    counts = dict(zip((k.resource for k in kinds), pipe.execute(), strict=True))
    return {"resourceVersion": store.current_rv(), "objects": {k: n for k, n in counts.items() if n}}


def stop_detached(state: ClusterState, timeout: float = 30.0) -> bool:
    """SIGTERM the detached cluster process and wait for it to exit; True if it did."""
    try:
        os.kill(state.pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(state.pid):
            return True
        time.sleep(0.05)  # polling another process's exit: there is no handle to wait on
    return False
