"""What a run with KEDA reports: queue depth vs replicas per ScaledObject, time to scale from zero, items left.

In Kubernetes terms: a scenario's ``objects`` may hold KEDA ScaledObjects and ScaledJobs
(``keda.sh/v1alpha1``) whose ``redis`` triggers read lists of the cluster's own Redis, and
``load`` phases of kind ``push`` fill those lists (:mod:`loadgen.queues`). While the run goes,
:class:`KedaSampler` reads every ``interval`` wall seconds what ``kubectl get so,sj`` and
``redis-cli llen`` would show: per ScaledObject the depth of its lists, its target's
``spec.replicas`` and Ready replicas and its ``Active`` condition; per ScaledJob the depth and
its Jobs (running, completed). The runner tells it when items were pushed (:meth:`KedaSampler.pushed`).

:func:`summarize` (pure, over the samples) is the summary's ``keda`` section:

* ``scaledObjects``: per object the depth and replicas (max, final), the activations seen
  (0 -> N), and ``scaleFromZero``: each *episode* starts at the first push onto one of its
  lists while its target is at zero replicas (spec and Ready both 0) and ends at the first
  sample with a Ready worker — "first item pushed -> first worker Ready", in wall and cluster
  seconds, measured to the sampling interval (``resolutionSeconds``); the next episode can
  only start once the target is back at zero;
* ``scaledJobs``: per object the depth and the Jobs seen (created, running at most, completed);
* ``queues``: per list the items pushed, consumed by queue workers and left at the end.

The series go to the report's "Queue depth vs replicas" plot (:func:`panel`).
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from emulator.api import errors
from emulator.api import keda as k
from emulator.api.kinds import JOB, SCALEDJOB, SCALEDOBJECT, by_api_version_kind
from emulator.kubelet import queueworker
from emulator.server.core import ServerCore
from loadgen.sampling import Sampler

if TYPE_CHECKING:
    import numpy as np
    from matplotlib.axes import Axes

__all__ = ["KEDA_KINDS", "KedaSampler", "panel", "scale_from_zero", "summarize", "summary_lines", "trigger_lists"]

KEDA_KINDS = ("ScaledObject", "ScaledJob")
Obj = dict[str, Any]
SO_SERIES = ("time", "clusterTime", "depth", "replicas", "ready", "active")
SJ_SERIES = ("time", "clusterTime", "depth", "running", "completed")


def trigger_lists(obj: Mapping[str, Any]) -> list[str]:
    """The Redis lists an object's ``redis`` triggers read on the cluster's own Redis (no address or host)."""
    out: list[str] = []
    for trigger in k.triggers(dict(obj)):
        meta = trigger.get("metadata") or {}
        if trigger.get("type") != "redis" or meta.get("address") or meta.get("host") or meta.get("addressFromEnv"):
            continue
        name = str(meta.get("listName") or "")
        if name and name not in out:
            out.append(name)
    return out


def _key(obj: Mapping[str, Any]) -> str:
    return f"{obj['metadata'].get('namespace')}/{obj['metadata']['name']}"


def _finished(job: Mapping[str, Any]) -> str:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Complete", "Failed") and c.get("status") == "True":
            return str(c["type"])
    return ""


class KedaSampler(Sampler):
    """Samples every ScaledObject and ScaledJob once per ``interval`` wall seconds on a thread."""

    def __init__(self, core: ServerCore, *, interval: float = 0.25) -> None:
        super().__init__(core, interval=interval, name="keda-sampler")
        self.objects: dict[str, Obj] = {}
        self.jobs: dict[str, Obj] = {}
        self.pushes: dict[str, list[tuple[float, float]]] = {}  # list -> (wall, cluster) of each push
        self.pushed_items: dict[str, int] = {}
        self._job_names: dict[str, set[str]] = {}

    def _times(self) -> tuple[float, float]:
        return round(time.perf_counter() - self.t0, 3), round(self.core.clock.now() - self.cluster_t0, 3)

    def pushed(self, queue: str, count: int) -> None:
        """The runner pushed ``count`` items onto ``queue`` just now."""
        if count > 0:
            self.pushes.setdefault(queue, []).append(self._times())
            self.pushed_items[queue] = self.pushed_items.get(queue, 0) + count

    def _depth(self, lists: Sequence[str]) -> int | None:
        if not lists:
            return None
        pipe = self.core.store.redis.pipeline(transaction=False)
        for name in lists:
            pipe.llen(name)
        return sum(int(n) for n in pipe.execute())

    def lists(self) -> list[str]:
        """Every list a ScaledObject or ScaledJob sampled so far reads."""
        return sorted({q for e in itertools.chain(self.objects.values(), self.jobs.values()) for q in e["lists"]})

    def sample(self) -> None:
        wall, cluster = self._times()
        for so in self.core.list(SCALEDOBJECT).items:
            self._sample_object(so, wall, cluster)
        jobs = self.core.list(JOB).items
        for sj in self.core.list(SCALEDJOB).items:
            self._sample_job(sj, jobs, wall, cluster)

    def _sample_object(self, so: Obj, wall: float, cluster: float) -> None:
        api_version, kind_name, name = k.target_ref(so)
        ns = so["metadata"].get("namespace") or "default"
        try:
            target: Obj | None = self.core.get(by_api_version_kind(api_version, kind_name), ns, name)
        except (errors.StatusError, KeyError):
            target = None
        lists = trigger_lists(so)
        entry = self.objects.setdefault(_key(so), {
            "target": f"{kind_name}/{name}", "lists": lists,
            "minReplicas": k.min_replica_count(so) or 0, "maxReplicas": k.hpa_max_replicas(so),
            "series": {s: [] for s in SO_SERIES}})
        active = next((c.get("status") == "True" for c in (so.get("status") or {}).get("conditions") or []
                       if c.get("type") == "Active"), False)
        s = entry["series"]
        s["time"].append(wall)
        s["clusterTime"].append(cluster)
        s["depth"].append(self._depth(lists))
        s["replicas"].append(int(((target or {}).get("spec") or {}).get("replicas") or 0) if target else None)
        s["ready"].append(int(((target or {}).get("status") or {}).get("readyReplicas") or 0) if target else None)
        s["active"].append(active)

    def _sample_job(self, sj: Obj, jobs: Iterable[Obj], wall: float, cluster: float) -> None:
        key = _key(sj)
        name, ns = sj["metadata"]["name"], sj["metadata"].get("namespace")
        mine = [j for j in jobs if j["metadata"].get("namespace") == ns
                and (j["metadata"].get("labels") or {}).get(k.SCALEDJOB_LABEL) == name]
        lists = trigger_lists(sj)
        spec = k.spec(sj)
        entry = self.jobs.setdefault(key, {
            "lists": lists, "maxReplicas": int(spec.get("maxReplicaCount") or k.DEFAULT_SCALEDJOB_MAX_REPLICAS),
            "strategy": (spec.get("scalingStrategy") or {}).get("strategy") or "default",
            "series": {s: [] for s in SJ_SERIES}})
        seen = self._job_names.setdefault(key, set())
        seen.update(j["metadata"]["name"] for j in mine)
        entry["jobsCreated"] = len(seen)
        s = entry["series"]
        s["time"].append(wall)
        s["clusterTime"].append(cluster)
        s["depth"].append(self._depth(lists))
        s["running"].append(sum(1 for j in mine if not _finished(j)))
        s["completed"].append(sum(1 for j in mine if _finished(j) == "Complete"))

    def settled(self) -> bool:
        """Every list drained and every ScaledObject's target back at its minimum (or idle) count."""
        with contextlib.suppress(Exception):
            depth = self._depth(self.lists())
            if depth:
                return False
            for so in self.core.list(SCALEDOBJECT).items:
                api_version, kind_name, name = k.target_ref(so)
                target = self.core.get(by_api_version_kind(api_version, kind_name),
                                       so["metadata"].get("namespace") or "default", name)
                floor = k.idle_replica_count(so)
                floor = floor if floor is not None else (k.min_replica_count(so) or 0)
                if int((target.get("spec") or {}).get("replicas") or 0) > floor:
                    return False
            return True
        return False

    def wait_settled(self, timeout: float) -> bool:
        deadline = time.perf_counter() + timeout
        while not self.settled():
            if time.perf_counter() >= deadline:
                return False
            self._stop.wait(min(self.interval, max(0.0, deadline - time.perf_counter())))
        return True

    def summary(self) -> dict[str, Any]:
        store = self.core.store
        left = {q: int(store.redis.llen(q)) for q in self.lists()}
        return summarize(self.objects, self.jobs, pushes=self.pushes, pushed=self.pushed_items,
                         consumed=queueworker.consumed(store.redis, store.config.prefix), left=left,
                         resolution=self.interval)


# -------------------------------------------------------------------------------------------- summary
def scale_from_zero(series: Mapping[str, Sequence[Any]], pushes: Sequence[tuple[float, float]]
                    ) -> list[dict[str, Any]]:
    """Scale-from-zero episodes (see the module docstring): push onto an idle target -> first Ready worker."""
    times, cluster = series["time"], series["clusterTime"]
    replicas, ready = series["replicas"], series["ready"]

    def idle(j: int) -> bool:
        return not (replicas[j] or 0) and not (ready[j] or 0)

    episodes: list[dict[str, Any]] = []
    after = float("-inf")  # pushes before the end of the last episode belong to it
    for wall, cl in sorted(pushes):
        if wall < after or not times:
            continue
        # The state at the push: the last sample at or before it (the first sample when none is).
        state = max(bisect.bisect_right(times, wall) - 1, 0)
        if not idle(state):
            continue
        end = next((j for j in range(state, len(times)) if times[j] >= wall and (ready[j] or 0) >= 1), None)
        if end is None:
            episodes.append({"pushedAt": wall, "readyAt": None, "wallSeconds": None, "clusterSeconds": None})
            break
        episodes.append({"pushedAt": wall, "readyAt": times[end], "wallSeconds": round(times[end] - wall, 3),
                         "clusterSeconds": round(cluster[end] - cl, 3)})
        after = times[end]
    return episodes


def _span(values: Iterable[Any]) -> dict[str, Any]:
    known = [v for v in values if v is not None]
    return {"max": max(known, default=None), "final": known[-1] if known else None}


def summarize(objects: Mapping[str, Obj], jobs: Mapping[str, Obj], *,
              pushes: Mapping[str, Sequence[tuple[float, float]]], pushed: Mapping[str, int],
              consumed: Mapping[str, int], left: Mapping[str, int], resolution: float) -> dict[str, Any]:
    """The summary's ``keda`` section from the sampler's entries, push times and the lists' counts."""
    scaled_objects = {}
    for key, entry in sorted(objects.items()):
        s = entry["series"]
        replicas = [r for r in s["replicas"] if r is not None]
        activations = sum(1 for a, b in itertools.pairwise(replicas) if a == 0 and b > 0)
        episodes = scale_from_zero(s, sorted(t for q in entry["lists"] for t in pushes.get(q, ())))
        done = [e for e in episodes if e["wallSeconds"] is not None]
        scaled_objects[key] = {x: v for x, v in entry.items() if x != "series"} | {
            "depth": _span(s["depth"]), "replicas": _span(s["replicas"]), "readyMax": _span(s["ready"])["max"],
            "activations": activations,
            "scaleFromZero": {
                "episodes": episodes, "resolutionSeconds": resolution,
                "firstWallSeconds": done[0]["wallSeconds"] if done else None,
                "firstClusterSeconds": done[0]["clusterSeconds"] if done else None,
                "maxWallSeconds": max((e["wallSeconds"] for e in done), default=None),
                "maxClusterSeconds": max((e["clusterSeconds"] for e in done), default=None)},
            "itemsLeft": sum(left.get(q, 0) for q in entry["lists"]),
            "samples": len(s["time"]), "series": s}
    scaled_jobs = {}
    for key, entry in sorted(jobs.items()):
        s = entry["series"]
        scaled_jobs[key] = {x: v for x, v in entry.items() if x != "series"} | {
            "depth": _span(s["depth"]), "runningMax": _span(s["running"])["max"],
            "completed": _span(s["completed"])["final"],
            "itemsLeft": sum(left.get(q, 0) for q in entry["lists"]), "samples": len(s["time"]), "series": s}
    queues = {q: {"pushed": pushed.get(q, 0), "consumed": consumed.get(q, 0), "left": left.get(q, 0)}
              for q in sorted(set(left) | set(pushed))}
    return {"scaledObjects": scaled_objects, "scaledJobs": scaled_jobs, "queues": queues,
            "drained": all(q["left"] == 0 for q in queues.values())}


def _seconds(wall: Any, cluster: Any) -> str:
    return "never" if wall is None else f"{wall:g} s ({cluster:g} s of cluster time)"


def summary_lines(section: Mapping[str, Any]) -> list[str]:
    """The run summary's KEDA lines: one per ScaledObject, ScaledJob and list."""
    lines = []
    for key, so in (section.get("scaledObjects") or {}).items():
        z = so["scaleFromZero"]
        lines.append(f"{key} → {so['target']} (lists {', '.join(so['lists']) or '-'}): depth up to "
                     f"{so['depth']['max']}, replicas {so['minReplicas']} .. {so['replicas']['max']} "
                     f"(final {so['replicas']['final']}), {so['activations']} activations; scale from zero "
                     f"{_seconds(z['firstWallSeconds'], z['firstClusterSeconds'])} first, "
                     f"{_seconds(z['maxWallSeconds'], z['maxClusterSeconds'])} max over "
                     f"{len(z['episodes'])} episode(s); {so['itemsLeft']} items left")
    for key, sj in (section.get("scaledJobs") or {}).items():
        lines.append(f"{key} (ScaledJob, {sj['strategy']}, lists {', '.join(sj['lists']) or '-'}): depth up to "
                     f"{sj['depth']['max']}, {sj.get('jobsCreated', 0)} Jobs created, up to {sj['runningMax']} "
                     f"running, {sj['completed']} completed in history; {sj['itemsLeft']} items left")
    for name, q in (section.get("queues") or {}).items():
        lines.append(f"list {name}: {q['pushed']} pushed, {q['consumed']} consumed, {q['left']} left")
    return lines


def panel(ax: Axes, kind: str, key: str, entry: dict[str, Any], t: np.ndarray) -> None:
    """The report's panel of one ScaledObject ("so": replicas and Ready) or ScaledJob ("sj": running Jobs)
    against the depth of its lists (:func:`loadgen.report.stacked_figure` draws one per entry)."""
    from loadgen.report import C_SCHEDULED, _legend_above, _series_array, replicas_and_ready, right_axis

    s = entry["series"]
    if kind == "so":
        replicas_and_ready(ax, t, s)
        ax.set_ylabel("pods")
        ax.set_title(f"ScaledObject {key} → {entry['target']}", fontsize=9, loc="right")
    else:
        ax.step(t, _series_array(s["running"]), where="post", color=C_SCHEDULED, linewidth=1.4, label="running Jobs")
        ax.set_ylabel("Jobs")
        ax.set_title(f"ScaledJob {key} ({entry['strategy']})", fontsize=9, loc="right")
    ax.set_ylim(bottom=0, top=max(float(entry.get("maxReplicas") or 1), 1.0) * 1.1)
    _legend_above(ax, handles=ax.get_legend_handles_labels()[0] + right_axis(
        ax, t, _series_array(s["depth"]), f"depth of {', '.join(entry['lists'])} (items)", "items"))
