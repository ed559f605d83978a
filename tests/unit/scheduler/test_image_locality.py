"""ImageLocality against upstream's scaled-image-score and threshold formula."""

from __future__ import annotations

import pytest

from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.plugins import image_locality
from tests.builders import pod, res_container, sched_node
from tests.unit.scheduler.util import run_score

MB = 1024 * 1024


def expected(images_on_node: dict[str, int], spread: dict[str, int], total: int, wanted: list[str]) -> int:
    """image_locality.go: sum(size * nodes_with_image/total) over containers, clamped to [23MB, 1000MB*n], to 0..100."""
    total_score = 0
    for image in wanted:
        name = image if image.rfind(":") > image.rfind("/") else image + ":latest"
        if name in images_on_node:
            total_score += int(images_on_node[name] * (spread[name] / total))
    low, high = 23 * MB, 1000 * MB * len(wanted)
    clamped = min(max(total_score, low), high)
    return 100 * (clamped - low) // (high - low)


NODE_IMAGES = [
    {"big:1": 800 * MB, "small:latest": 30 * MB},
    {"big:1": 800 * MB},
    {"small:latest": 30 * MB, "huge:2": 3000 * MB},
    {},
]


@pytest.mark.parametrize("wanted", [
    ["big:1"], ["small"], ["huge:2"], ["big:1", "small"], ["big:1", "big:1"], ["missing:1"], ["big:1", "huge:2"],
], ids=["spread-half", "latest-tag", "clamped-high", "two-containers", "same-image-twice", "absent", "mixed"])
def test_scores(wanted):
    snapshot = Snapshot.build([sched_node(f"n{i}", images=imgs) for i, imgs in enumerate(NODE_IMAGES)])
    spread: dict[str, int] = {}
    for imgs in NODE_IMAGES:
        for name in imgs:
            spread[name] = spread.get(name, 0) + 1
    p = pod("p", containers=[res_container(f"c{i}", image=image) for i, image in enumerate(wanted)])
    _, scores = run_score(image_locality.new(), p, snapshot)
    assert scores == [expected(imgs, spread, len(NODE_IMAGES), wanted) for imgs in NODE_IMAGES]


def test_init_containers_count():
    snapshot = Snapshot.build([sched_node("a", images={"big:1": 900 * MB}), sched_node("b")])
    p = pod("p", containers=[res_container("c", image="other:1")], init=[res_container("i", image="big:1")])
    _, scores = run_score(image_locality.new(), p, snapshot)
    # (900MB * 1/2 - 23MB) * 100 / (2 * 1000MB - 23MB)
    assert scores == [(100 * (450 * MB - 23 * MB)) // (2000 * MB - 23 * MB), 0]
