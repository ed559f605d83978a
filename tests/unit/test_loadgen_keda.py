"""The ``kemu run`` summary's ``keda`` section (loadgen/keda.py) on hand-built samples.

A scale-from-zero episode is "first item pushed onto an idle target -> first sample with a Ready worker":
the target is idle when its last sample at or before the push has 0 replicas and 0 Ready; pushes before
the episode's end belong to it; a push while the target runs starts nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from loadgen.keda import scale_from_zero, summarize, summary_lines, trigger_lists


def series(rows: list[tuple[float, int | None, int | None, int | None]], speed: float = 10.0) -> dict[str, list[Any]]:
    """(wall time, depth, replicas, ready) rows -> the sampler's series at clock ``speed``."""
    return {"time": [r[0] for r in rows], "clusterTime": [r[0] * speed for r in rows],
            "depth": [r[1] for r in rows], "replicas": [r[2] for r in rows], "ready": [r[3] for r in rows],
            "active": [bool(r[2]) for r in rows]}


def pushes(*walls: float, speed: float = 10.0) -> list[tuple[float, float]]:
    return [(w, w * speed) for w in walls]


@pytest.mark.parametrize(("rows", "pushed", "expected"), [
    # Pushed at 1.0; replicas 1 at 2.0, Ready at 3.0: 2 s (20 s of cluster time at 10x).
    ([(0, 0, 0, 0), (1.5, 50, 0, 0), (2, 40, 1, 0), (3, 30, 1, 1), (4, 0, 1, 1)], [1.0], [(1.0, 3, 2.0, 20.0)]),
    # Later pushes of the same burst (before the first Ready) are part of the episode.
    ([(0, 0, 0, 0), (2, 40, 1, 0), (3, 30, 1, 1)], [1.0, 1.5, 2.5], [(1.0, 3, 2.0, 20.0)]),
    # A push while workers run starts nothing; back at zero, the next push starts a second episode.
    ([(0, 0, 0, 0), (2, 9, 1, 1), (3, 0, 1, 1), (6, 0, 0, 0), (8, 5, 1, 0), (9, 5, 1, 1)], [1.0, 2.5, 7.0],
     [(1.0, 2, 1.0, 10.0), (7.0, 9, 2.0, 20.0)]),
    # Scaled to 0 but a pod still Ready: not idle, no episode.
    ([(0, 0, 1, 1), (2, 5, 0, 1), (3, 5, 1, 1)], [2.5], []),
    # Never Ready before the run ended: an unfinished episode.
    ([(0, 0, 0, 0), (2, 40, 1, 0)], [1.0], [(1.0, None, None, None)]),
    # Pushed before the first sample: the first sample's state counts.
    ([(0.5, 10, 0, 0), (1.0, 10, 1, 1)], [0.0], [(0.0, 1.0, 1.0, 10.0)]),
    # No pushes: no episodes.
    ([(0, 0, 0, 0), (1, 0, 0, 0)], [], []),
], ids=["one-episode", "burst-is-one-episode", "two-episodes", "ready-pod-left", "unfinished", "push-first",
        "no-pushes"])
def test_scale_from_zero_episodes(rows: list[tuple[float, int | None, int | None, int | None]], pushed: list[float],
                                  expected: list[tuple[float, float | None, float | None, float | None]]) -> None:
    episodes = scale_from_zero(series(rows), pushes(*pushed))
    assert [(e["pushedAt"], e["readyAt"], e["wallSeconds"], e["clusterSeconds"]) for e in episodes] == expected


def test_summary_section_counts_depth_replicas_and_items_left() -> None:
    orders = series([(0, 0, 0, 0), (1, 120, 1, 0), (2, 90, 6, 1), (3, 10, 6, 6), (4, 0, 6, 6), (10, 0, 0, 0)])
    jobs = {"time": [0, 1, 2, 3], "clusterTime": [0, 10, 20, 30], "depth": [0, 80, 40, 5],
            "running": [0, 2, 3, 1], "completed": [0, 0, 1, 3]}
    section = summarize(
        {"q/orders": {"target": "Deployment/orders-worker", "lists": ["orders"], "minReplicas": 0, "maxReplicas": 10,
                      "series": orders}},
        {"q/reports": {"lists": ["reports"], "maxReplicas": 6, "strategy": "default", "jobsCreated": 4,
                       "series": jobs}},
        pushes={"orders": pushes(0.5, 0.8), "reports": pushes(0.2)}, pushed={"orders": 120, "reports": 85},
        consumed={"orders": 120, "reports": 80}, left={"orders": 0, "reports": 5}, resolution=0.25)
    so = section["scaledObjects"]["q/orders"]
    assert so["depth"] == {"max": 120, "final": 0} and so["replicas"] == {"max": 6, "final": 0}
    assert so["activations"] == 1 and so["itemsLeft"] == 0 and so["samples"] == 6
    # First item at 0.5, first Ready sample at 2.0: 1.5 s, 15 s of cluster time.
    z = so["scaleFromZero"]
    assert (z["firstWallSeconds"], z["firstClusterSeconds"], z["maxWallSeconds"]) == (1.5, 15.0, 1.5)
    sj = section["scaledJobs"]["q/reports"]
    assert (sj["depth"]["max"], sj["runningMax"], sj["completed"], sj["itemsLeft"]) == (80, 3, 3, 5)
    assert section["queues"] == {"orders": {"pushed": 120, "consumed": 120, "left": 0},
                                 "reports": {"pushed": 85, "consumed": 80, "left": 5}}
    assert section["drained"] is False
    lines = summary_lines(section)
    assert lines[0].startswith("q/orders → Deployment/orders-worker (lists orders): depth up to 120, replicas 0 .. 6")
    assert "scale from zero 1.5 s (15 s of cluster time) first" in lines[0]
    assert lines[-1] == "list reports: 85 pushed, 80 consumed, 5 left"


@pytest.mark.parametrize(("triggers", "expected"), [
    ([{"type": "redis", "metadata": {"listName": "a"}}], ["a"]),
    ([{"type": "redis", "metadata": {"listName": "a", "address": "redis:6379"}}], []),  # another Redis
    ([{"type": "redis", "metadata": {"listName": "a"}}, {"type": "redis", "metadata": {"listName": "a"}},
      {"type": "redis-streams", "metadata": {"stream": "s"}}, {"type": "redis", "metadata": {"listName": "b"}}],
     ["a", "b"]),
], ids=["embedded", "other-address", "dedup-and-lists-only"])
def test_trigger_lists(triggers: list[dict[str, Any]], expected: list[str]) -> None:
    assert trigger_lists({"spec": {"triggers": triggers}}) == expected
