"""The node annotator's short usage history, in Redis, and the six utilization windows computed from it.

crane-scheduler gets its windows from Prometheus recording rules
(``cpu_usage_avg_5m = avg_over_time(cpu_usage_active[5m])``,
``cpu_usage_max_avg_1h = max_over_time(cpu_usage_avg_5m[1h])``,
``cpu_usage_max_avg_1d = max_over_time(cpu_usage_avg_5m[1d])``, the same for
memory). kemu keeps the history itself so no Prometheus is needed
(:class:`RedisHistory`), or asks a real one (:class:`PrometheusSource`, when
``--prometheus-url`` / the ``prometheus_url`` option is set).

Redis layout (``P`` the store's prefix), three capped lists of *frames* -- one
frame is every node's value at once, so a pass is a handful of commands
whatever the node count::

    P la:raw     utilization samples of the last 5 minutes        [ts, digest, cpu f32[], mem f32[]]
    P la:b5m     per 5-minute bucket: max of avg_5m (13 buckets)  [bucket start, digest, cpu, mem]
    P la:b1h     per hour bucket: max of avg_5m (25 buckets)      [bucket start, digest, cpu, mem]
    P la:names   hash digest -> the node names a frame's columns belong to

``avg_5m`` is the mean of the samples of the last 5 minutes (NaN samples --
a node without fresh usage -- skipped); ``max_avg_1h`` the maximum of the
``avg_5m`` values seen in the 5-minute buckets that started within the last
hour (so the window is aligned to 5 minutes, not sliding to the second);
``max_avg_1d`` likewise over hour buckets within the last day. The newest
bucket is the head of its list and is rewritten (``LSET``) while it is
current. Frames name their node set by digest; a frame from before a node
was added or removed is realigned by name.
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Sequence
from typing import Any

import msgpack
import numpy as np

from emulator.loadaware.policy import METRICS

log = logging.getLogger(__name__)

__all__ = ["PrometheusSource", "RedisHistory", "Windows"]

RAW, B5M, B1H, NAMES = "la:raw", "la:b5m", "la:b1h", "la:names"
WINDOW_5M, HOUR, DAY = 300.0, 3600.0, 86400.0
_KEEP_B5M = int(HOUR // WINDOW_5M) + 1
_KEEP_B1H = int(DAY // HOUR) + 1

# metric name -> (nodes,) float64 utilization (NaN: unknown), aligned with the names passed in.
Windows = dict[str, np.ndarray]


def _digest(names: Sequence[str]) -> str:
    return hashlib.blake2b("\0".join(names).encode(), digest_size=12).hexdigest()


def _frame(stamp: float, digest: str, cpu: np.ndarray, mem: np.ndarray) -> bytes:
    return msgpack.packb([stamp, digest, cpu.astype(np.float32).tobytes(), mem.astype(np.float32).tobytes()],
                         use_bin_type=True)


class RedisHistory:
    """Per-pass samples kept in Redis; :meth:`record` adds one pass and returns the six windows."""

    def __init__(self, client: Any, prefix: str = "kemu:") -> None:
        self.client = client
        self.prefix = prefix
        self._names: dict[str, tuple[str, ...]] = {}
        self._align: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {}

    def _key(self, name: str) -> str:
        return self.prefix + name

    # ------------------------------------------------------------------ frames
    def _decode(self, raw: bytes, digest: str, n: int) -> tuple[float, np.ndarray, np.ndarray]:
        """(stamp, cpu, mem) of a frame, realigned to the current node set ``digest`` (NaN for nodes it lacks)."""
        stamp, their, cpu_b, mem_b = msgpack.unpackb(raw, raw=False)
        cpu = np.frombuffer(cpu_b, dtype=np.float32).astype(np.float64)
        mem = np.frombuffer(mem_b, dtype=np.float32).astype(np.float64)
        if their == digest:
            return float(stamp), cpu, mem
        old = self._names.get(their)
        if old is None:
            got = self.client.hget(self._key(NAMES), their)
            old = self._names[their] = tuple(msgpack.unpackb(got, raw=False)) if got else ()
        new_cpu, new_mem = np.full(n, np.nan), np.full(n, np.nan)
        if len(old) != len(cpu):
            return float(stamp), new_cpu, new_mem  # its node set is unknown: nothing to realign
        mapping = self._align.get((their, digest))
        if mapping is None:
            position = {name: i for i, name in enumerate(self._names[digest])}
            pairs = [(position[name], i) for i, name in enumerate(old) if name in position]
            mapping = self._align[(their, digest)] = (np.array([p[0] for p in pairs], dtype=np.intp),
                                                       np.array([p[1] for p in pairs], dtype=np.intp))
        dst, src = mapping
        new_cpu[dst], new_mem[dst] = cpu[src], mem[src]
        return float(stamp), new_cpu, new_mem

    def record(self, now: float, names: Sequence[str], cpu: np.ndarray, mem: np.ndarray) -> Windows:
        """Add one sample per node (utilization fractions, NaN: unknown) at cluster time ``now``; the windows."""
        names = tuple(names)
        n = len(names)
        digest = _digest(names)
        self._names[digest] = names
        pipe = self.client.pipeline(transaction=False)
        pipe.lrange(self._key(RAW), 0, -1)
        pipe.lrange(self._key(B5M), 0, -1)
        pipe.lrange(self._key(B1H), 0, -1)
        pipe.hexists(self._key(NAMES), digest)
        raw_frames, b5m_frames, b1h_frames, known = pipe.execute()

        # avg_5m: the mean of this sample and the earlier ones of the last 5 minutes.
        raws = [self._decode(f, digest, n) for f in raw_frames]
        recent = [r for r in raws if now - WINDOW_5M < r[0] < now]
        cpu_stack = np.vstack([cpu, *(r[1] for r in recent)])
        mem_stack = np.vstack([mem, *(r[2] for r in recent)])
        with np.errstate(invalid="ignore"), _quiet():
            avg_cpu, avg_mem = np.nanmean(cpu_stack, axis=0), np.nanmean(mem_stack, axis=0)

        out: Windows = {"cpu_usage_avg_5m": avg_cpu, "mem_usage_avg_5m": avg_mem}
        write = self.client.pipeline(transaction=False)
        write.lpush(self._key(RAW), _frame(now, digest, cpu, mem))
        write.ltrim(self._key(RAW), 0, len(recent))
        for key, frames, bucket, horizon, keep, suffix in (
                (B5M, b5m_frames, WINDOW_5M, HOUR, _KEEP_B5M, "1h"),
                (B1H, b1h_frames, HOUR, DAY, _KEEP_B1H, "1d")):
            start = math.floor(now / bucket) * bucket
            decoded = [self._decode(f, digest, n) for f in frames]
            head_cpu, head_mem = avg_cpu, avg_mem
            same = bool(decoded) and decoded[0][0] == start
            with np.errstate(invalid="ignore"), _quiet():
                if same:
                    head_cpu = np.fmax(decoded[0][1], avg_cpu)
                    head_mem = np.fmax(decoded[0][2], avg_mem)
                older = [d for d in (decoded[1:] if same else decoded) if d[0] > now - horizon]
                out[f"cpu_usage_max_avg_{suffix}"] = np.nanmax(np.vstack([head_cpu, *(d[1] for d in older)]), axis=0)
                out[f"mem_usage_max_avg_{suffix}"] = np.nanmax(np.vstack([head_mem, *(d[2] for d in older)]), axis=0)
            frame = _frame(start, digest, head_cpu, head_mem)
            if same:
                write.lset(self._key(key), 0, frame)
            else:
                write.lpush(self._key(key), frame)
                write.ltrim(self._key(key), 0, keep - 1)
        if not known:
            write.hset(self._key(NAMES), digest, msgpack.packb(list(names), use_bin_type=True))
        write.execute()
        if not known:
            self._drop_unused_names(digest)
        return {m: out[m] for m in METRICS}

    def _drop_unused_names(self, current: str) -> None:
        """Node sets no frame refers to any more are deleted (the names hash stays small under node churn)."""
        pipe = self.client.pipeline(transaction=False)
        for key in (RAW, B5M, B1H):
            pipe.lrange(self._key(key), 0, -1)
        pipe.hkeys(self._key(NAMES))
        *lists, stored = pipe.execute()
        used = {current} | {msgpack.unpackb(f, raw=False)[1] for frames in lists for f in frames}
        unused = [d for d in (s.decode() if isinstance(s, bytes) else s for s in stored) if d not in used]
        if unused:
            self.client.hdel(self._key(NAMES), *unused)
            for d in unused:
                self._names.pop(d, None)


class _quiet:
    """Silence numpy's "mean of empty slice" / "all-NaN slice" warnings: NaN is the answer we want there."""

    def __enter__(self) -> None:
        import warnings

        self._ctx = warnings.catch_warnings()
        self._ctx.__enter__()
        warnings.simplefilter("ignore", RuntimeWarning)

    def __exit__(self, *exc: object) -> None:
        self._ctx.__exit__(*exc)


# ----------------------------------------------------------------------------- a real Prometheus

# Per node utilization from the series kemu's kubelets export (container_* summed per node, allocatable
# from kube_node_status_allocatable), as crane's recording rules build them from node-exporter's.
_CPU = ('sum by (node) (rate(container_cpu_usage_seconds_total[1m])) / on (node) '
        'sum by (node) (kube_node_status_allocatable{resource="cpu"})')
_MEM = ('sum by (node) (container_memory_working_set_bytes) / on (node) '
        'sum by (node) (kube_node_status_allocatable{resource="memory"})')
PROMQL: dict[str, str] = {
    "cpu_usage_avg_5m": f"avg_over_time(({_CPU})[5m:30s])",
    "cpu_usage_max_avg_1h": f"max_over_time(avg_over_time(({_CPU})[5m:30s])[1h:5m])",
    "cpu_usage_max_avg_1d": f"max_over_time(avg_over_time(({_CPU})[5m:30s])[1d:5m])",
    "mem_usage_avg_5m": f"avg_over_time(({_MEM})[5m:30s])",
    "mem_usage_max_avg_1h": f"max_over_time(avg_over_time(({_MEM})[5m:30s])[1h:5m])",
    "mem_usage_max_avg_1d": f"max_over_time(avg_over_time(({_MEM})[5m:30s])[1d:5m])",
}


class PrometheusSource:
    """The six windows from a real Prometheus over PromQL (``/api/v1/query``, one query per window).

    Prometheus evaluates ranges in wall time, so with a sped-up cluster clock its
    windows are wall-clock windows; the Redis history uses cluster time.
    """

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        import httpx

        self.url = url.rstrip("/")
        self._client = httpx.Client(timeout=timeout)

    def windows(self, names: Sequence[str]) -> Windows:
        position = {name: i for i, name in enumerate(names)}
        out: Windows = {}
        for metric, query in PROMQL.items():
            values = np.full(len(names), np.nan)
            response = self._client.get(f"{self.url}/api/v1/query", params={"query": query})
            response.raise_for_status()
            for sample in response.json().get("data", {}).get("result", []):
                i = position.get(sample.get("metric", {}).get("node", ""))
                if i is not None:
                    values[i] = float(sample["value"][1])
            out[metric] = values
        return out

    def close(self) -> None:
        self._client.close()
