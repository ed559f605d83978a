"""bench_apipath's replay of the client watcher on a core of its own (a FIFO queue, one server)."""

from __future__ import annotations

import pytest

from loadgen.bench_apipath import _dedicated_core


@pytest.mark.parametrize(("arrivals", "ms", "want"), [
    # Idle server: each bound pod is seen one service time after its event arrived.
    ([(1.0, "a"), (2.0, "b")], 100.0, {"a": 1.1, "b": 2.1}),
    # A burst queues: the third event waits for the two before it (3 x 0.1 s after 1.0).
    ([(1.0, ""), (1.0, ""), (1.0, "a")], 100.0, {"a": 1.3}),
    # A pod's first bound event counts; later events of the same pod only take the server's time.
    ([(1.0, "a"), (1.0, "a"), (1.0, "b")], 100.0, {"a": 1.1, "b": 1.3}),
], ids=["idle", "burst-queues", "first-bound-counts"])
def test_dedicated_core(arrivals: list[tuple[float, str]], ms: float, want: dict[str, float]) -> None:
    got = _dedicated_core(arrivals, ms)
    assert got == pytest.approx(want)
