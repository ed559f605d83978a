"""What the ``bench_*`` modules share: a throw-away Redis (with a bootstrapped server core on it) and the report.

A benchmark measures one emulated Kubernetes component against a real Redis: it
either gets ``--redis-url`` or starts an embedded ``redis-server`` in a temporary
directory for its run (:func:`redis_url`, :func:`server_core`), and ends by printing
its numbers and writing them as JSON to ``--json`` when asked (:func:`report`).
"""

from __future__ import annotations

import contextlib
import json
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from emulator.api.types import Obj
from emulator.clock import Clock
from emulator.server.core import ServerCore
from emulator.store.redis_server import EmbeddedRedis, RedisServerConfig
from emulator.store.store import Store


@contextlib.contextmanager
def redis_url(given: str | None = None, *, appendfsync: str = "everysec", data_dir: str | None = None) -> Iterator[str]:
    """``given``, or the URL of an embedded redis-server that lives (in a temporary directory under ``data_dir``,
    fsyncing its AOF as ``appendfsync`` says) for the block."""
    if given:
        yield given
        return
    with tempfile.TemporaryDirectory(prefix="kemu-bench-", dir=data_dir) as tmp:
        server = EmbeddedRedis(RedisServerConfig(data_dir=Path(tmp), appendfsync=appendfsync))
        url = server.start()
        try:
            yield url
        finally:
            server.stop()


@contextlib.contextmanager
def server_core(clock: Clock) -> Iterator[ServerCore]:
    """A bootstrapped :class:`ServerCore` on a Redis of its own (see :func:`redis_url`) for the block."""
    with redis_url() as url:
        core = ServerCore(Store.connect(url), clock)
        core.bootstrap()
        yield core


def paced(pods: Sequence[Obj], rate: float, start: float, sent_at: str, tick: float = 0.01) -> Iterator[list[Obj]]:
    """``pods`` in batches of ``rate * tick`` (at least one), each at its due time from ``start`` (an open-loop
    load of ``rate`` per second), every pod annotated ``sent_at`` with the wall time it was sent."""
    per_tick = max(1, int(rate * tick))
    for i in range(0, len(pods), per_tick):
        due = start + (i // per_tick) * tick
        while time.perf_counter() < due:
            time.sleep(min(0.001, max(0.0, due - time.perf_counter())))  # pacing the load, not a test wait
        batch = list(pods[i:i + per_tick])
        sent = repr(time.time())
        for p in batch:
            p["metadata"]["annotations"] = {sent_at: sent}
        yield batch


def report(result: Any, json_path: str | Path | None, *, key_width: int | None = None) -> None:
    """Print ``result`` and write it as JSON to ``json_path`` when one is given.

    Printed as indented JSON, or (``key_width``, for a flat mapping) one ``key value`` row a key.
    """
    if key_width is None:
        print(json.dumps(result, indent=2))
    else:
        assert isinstance(result, Mapping)
        for key, value in result.items():
            print(f"{key:{key_width}s} {value:.3f}" if isinstance(value, float) else f"{key:{key_width}s} {value}")
    save(result, json_path)


def save(result: Any, json_path: str | Path | None) -> None:
    """Write ``result`` as indented JSON to ``json_path`` (the ``--json`` option) when one is given."""
    if json_path:
        Path(json_path).write_text(json.dumps(result, indent=2))
