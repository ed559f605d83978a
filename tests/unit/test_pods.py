"""Pod requests, limits and QoS class, table-driven against upstream's rules.

Rules: ``component-helpers/resource/helpers.go`` (PodRequests, PodLimits,
sidecar accounting), ``pkg/apis/core/v1/helper/qos/qos.go`` (ComputePodQOS)
and ``pkg/apis/core/v1/defaults.go`` (requests default to limits).
Units: cpu in millicores, everything else in base units.
"""

from __future__ import annotations

from typing import Any

import pytest

from emulator.api.pods import (
    BEST_EFFORT,
    BURSTABLE,
    GUARANTEED,
    STANDARD_RESOURCE_NAMES,
    container_limits,
    container_requests,
    is_extended_resource,
    pod_limits,
    pod_requests,
    qos_class,
)
from emulator.api.quantity import QuantityError

MI = 1024**2
GI = 1024**3
GPU = "nvidia.com/gpu"


def container(
    cpu: str | None = None,
    mem: str | None = None,
    lim_cpu: str | None = None,
    lim_mem: str | None = None,
    requests: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    sidecar: bool = False,
) -> dict[str, Any]:
    """A container dict in Kubernetes JSON shape; ``sidecar`` makes it a restartable init container."""
    req = dict(requests or {})
    lim = dict(limits or {})
    for target, name, value in (
        (req, "cpu", cpu),
        (req, "memory", mem),
        (lim, "cpu", lim_cpu),
        (lim, "memory", lim_mem),
    ):
        if value is not None:
            target[name] = value
    resources: dict[str, Any] = {}
    if req:
        resources["requests"] = req
    if lim:
        resources["limits"] = lim
    result: dict[str, Any] = {"name": "c", "image": "busybox", "resources": resources}
    if sidecar:
        result["restartPolicy"] = "Always"
    return result


def pod(
    containers: list[dict[str, Any]] | None = None,
    init: list[dict[str, Any]] | None = None,
    overhead: dict[str, Any] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": containers or []}
    if init:
        spec["initContainers"] = init
    if overhead:
        spec["overhead"] = overhead
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"}, "spec": spec}


def guaranteed(cpu: str = "1", mem: str = "1Gi") -> dict[str, Any]:
    return container(cpu=cpu, mem=mem, lim_cpu=cpu, lim_mem=mem)


# -- QoS class --------------------------------------------------------------------------------

QOS = [
    ("no-containers", pod(), BEST_EFFORT),
    ("no-resources", pod([container()]), BEST_EFFORT),
    ("only-extended-resources", pod([container(limits={GPU: "1"})]), BEST_EFFORT),
    ("zero-requests-ignored", pod([container(cpu="0", mem="0")]), BEST_EFFORT),
    ("requests-equal-limits", pod([guaranteed()]), GUARANTEED),
    ("only-limits-default-requests", pod([container(lim_cpu="500m", lim_mem="256Mi")]), GUARANTEED),
    ("equal-in-other-spellings", pod([container(cpu="1", mem="1Gi", lim_cpu="1000m", lim_mem="1024Mi")]), GUARANTEED),
    ("two-guaranteed-containers", pod([guaranteed(), guaranteed("250m", "64Mi")]), GUARANTEED),
    (
        "guaranteed-with-extended",
        pod([container(cpu="1", mem="1Gi", limits={"cpu": "1", "memory": "1Gi", GPU: "2"})]),
        GUARANTEED,
    ),
    ("guaranteed-init-and-app", pod([guaranteed()], init=[guaranteed("2", "2Gi")]), GUARANTEED),
    ("only-cpu-request", pod([container(cpu="100m")]), BURSTABLE),
    ("only-memory-limit", pod([container(lim_mem="1Gi")]), BURSTABLE),
    ("request-below-limit", pod([container(cpu="500m", mem="1Gi", lim_cpu="1", lim_mem="1Gi")]), BURSTABLE),
    ("guaranteed-plus-best-effort", pod([guaranteed(), container()]), BURSTABLE),
    ("init-container-without-limits", pod([guaranteed()], init=[container(cpu="100m")]), BURSTABLE),
    ("init-container-best-effort", pod([guaranteed()], init=[container()]), BURSTABLE),
    ("best-effort-app-burstable-init", pod([container()], init=[container(mem="64Mi")]), BURSTABLE),
    (
        "sidecar-without-memory-limit",
        pod([guaranteed()], init=[container(cpu="1", lim_cpu="1", sidecar=True)]),
        BURSTABLE,
    ),
    # qos.go compares pod-wide sums, so mismatches that cancel out still count
    # as Guaranteed: 1+2 requested == 2+1 limited.
    (
        "sums-match-though-containers-differ",
        pod(
            [
                container(cpu="1", mem="1Gi", lim_cpu="2", lim_mem="1Gi"),
                container(cpu="2", mem="1Gi", lim_cpu="1", lim_mem="1Gi"),
            ]
        ),
        GUARANTEED,
    ),
]


@pytest.mark.parametrize(("spec", "expected"), [row[1:] for row in QOS], ids=[row[0] for row in QOS])
def test_qos_class(spec: dict[str, Any], expected: str) -> None:
    assert qos_class(spec) == expected


# -- effective requests ---------------------------------------------------------------------------

REQUESTS = [
    ("empty-pod", pod(), {}),
    ("single-container", pod([container(cpu="250m", mem="64Mi")]), {"cpu": 250, "memory": 64 * MI}),
    (
        "app-containers-sum",
        pod([container(cpu="250m", mem="64Mi"), container(cpu="1", mem="1Gi")]),
        {"cpu": 1250, "memory": 64 * MI + GI},
    ),
    ("limits-default-requests", pod([container(lim_cpu="2", lim_mem="1Gi")]), {"cpu": 2000, "memory": GI}),
    ("explicit-zero-request-kept", pod([container(cpu="0", lim_cpu="1")]), {"cpu": 0}),
    (
        "init-larger-than-app-sum",
        pod(
            [container(cpu="100m", mem="64Mi"), container(cpu="100m", mem="64Mi")], init=[container(cpu="1", mem="1Gi")]
        ),
        {"cpu": 1000, "memory": GI},
    ),
    (
        "init-smaller-than-app-sum",
        pod([container(cpu="1", mem="1Gi"), container(cpu="1", mem="1Gi")], init=[container(cpu="500m", mem="128Mi")]),
        {"cpu": 2000, "memory": 2 * GI},
    ),
    (
        "init-max-is-per-resource",
        pod([container(cpu="100m", mem="2Gi")], init=[container(cpu="3", mem="64Mi")]),
        {"cpu": 3000, "memory": 2 * GI},
    ),
    (
        "init-containers-max-not-sum",
        pod([container(cpu="100m")], init=[container(cpu="1"), container(cpu="2"), container(cpu="500m")]),
        {"cpu": 2000},
    ),
    (
        "resource-only-in-init",
        pod([container(cpu="1")], init=[container(cpu="100m", mem="32Mi")]),
        {"cpu": 1000, "memory": 32 * MI},
    ),
    (
        "sidecar-adds-to-app",
        pod([container(cpu="100m", mem="64Mi")], init=[container(cpu="50m", mem="32Mi", sidecar=True)]),
        {"cpu": 150, "memory": 96 * MI},
    ),
    # An init container runs next to the sidecars started before it: 200m + 500m.
    (
        "init-after-sidecar",
        pod([container(cpu="100m")], init=[container(cpu="200m", sidecar=True), container(cpu="500m")]),
        {"cpu": 700},
    ),
    # ...but not next to those started after it: max(500m, 100m + 200m).
    (
        "init-before-sidecar",
        pod([container(cpu="100m")], init=[container(cpu="500m"), container(cpu="200m", sidecar=True)]),
        {"cpu": 500},
    ),
    (
        "sidecars-accumulate",
        pod(
            [container(cpu="100m")],
            init=[container(cpu="100m", sidecar=True), container(cpu="100m", sidecar=True), container(cpu="250m")],
        ),
        {"cpu": 450},
    ),
    (
        "overhead-added",
        pod([container(cpu="1", mem="1Gi")], overhead={"cpu": "250m", "memory": "120Mi"}),
        {"cpu": 1250, "memory": GI + 120 * MI},
    ),
    (
        "overhead-after-init-max",
        pod([container(cpu="1")], init=[container(cpu="2")], overhead={"cpu": "100m"}),
        {"cpu": 2100},
    ),
    (
        "overhead-only-resource",
        pod([container(cpu="1")], overhead={"memory": "64Mi"}),
        {"cpu": 1000, "memory": 64 * MI},
    ),
    ("extended-resource-from-limit", pod([container(cpu="1", limits={GPU: "2"})]), {"cpu": 1000, GPU: 2}),
    (
        "extended-and-storage",
        pod(
            [
                container(requests={"ephemeral-storage": "1Gi", "example.com/foo": "3"}),
                container(requests={"example.com/foo": "1"}),
            ]
        ),
        {"ephemeral-storage": GI, "example.com/foo": 4},
    ),
    (
        "hugepages",
        pod([container(requests={"hugepages-2Mi": "4Mi"}, limits={"hugepages-2Mi": "4Mi"})]),
        {"hugepages-2Mi": 4 * MI},
    ),
    # Summed exactly, rounded once: 0.5m + 0.5m is 1m, not 2m; 0.5 B + 0.5 B is 1 B.
    (
        "rounded-once-after-summing",
        pod([container(cpu="0.5m", mem="0.5"), container(cpu="0.5m", mem="0.5")]),
        {"cpu": 1, "memory": 1},
    ),
    ("sub-milli-rounds-up", pod([container(cpu="1n", mem="1n")]), {"cpu": 1, "memory": 1}),
    ("json-numbers", pod([container(requests={"cpu": 0.5, "memory": 1048576})]), {"cpu": 500, "memory": MI}),
]


@pytest.mark.parametrize(("spec", "expected"), [row[1:] for row in REQUESTS], ids=[row[0] for row in REQUESTS])
def test_pod_requests(spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert pod_requests(spec) == expected


# -- effective limits -------------------------------------------------------------------------------

LIMITS = [
    ("empty-pod", pod(), {}),
    ("no-limits-no-defaulting", pod([container(cpu="1", mem="1Gi")]), {}),
    (
        "app-limits-sum",
        pod([container(lim_cpu="1", lim_mem="1Gi"), container(lim_cpu="500m")]),
        {"cpu": 1500, "memory": GI},
    ),
    ("init-limit-wins", pod([container(lim_cpu="1")], init=[container(lim_cpu="4")]), {"cpu": 4000}),
    (
        "sidecar-limit-adds",
        pod([container(lim_mem="1Gi")], init=[container(lim_mem="256Mi", sidecar=True)]),
        {"memory": GI + 256 * MI},
    ),
    # Overhead raises only the non-zero limits that exist: memory has none here.
    (
        "overhead-on-set-limits-only",
        pod([container(lim_cpu="1")], overhead={"cpu": "100m", "memory": "64Mi"}),
        {"cpu": 1100},
    ),
    ("overhead-skips-zero-limit", pod([container(limits={"cpu": "0"})], overhead={"cpu": "100m"}), {"cpu": 0}),
    ("extended-limit", pod([container(limits={GPU: "1"}), container(limits={GPU: "1"})]), {GPU: 2}),
]


@pytest.mark.parametrize(("spec", "expected"), [row[1:] for row in LIMITS], ids=[row[0] for row in LIMITS])
def test_pod_limits(spec: dict[str, Any], expected: dict[str, int]) -> None:
    assert pod_limits(spec) == expected


# -- single containers -------------------------------------------------------------------------------

CONTAINERS = [
    ("no-resources", container(), {}, {}),
    ("requests-only", container(cpu="100m", mem="1Mi"), {"cpu": 100, "memory": MI}, {}),
    (
        "limits-fill-requests",
        container(cpu="100m", lim_cpu="1", lim_mem="1Gi"),
        {"cpu": 100, "memory": GI},
        {"cpu": 1000, "memory": GI},
    ),
    ("fractional-bytes-round-up", container(mem="1.5"), {"memory": 2}, {}),
    ("extended", container(limits={GPU: "1"}), {GPU: 1}, {GPU: 1}),
]


@pytest.mark.parametrize(
    ("spec", "requests", "limits"), [row[1:] for row in CONTAINERS], ids=[row[0] for row in CONTAINERS]
)
def test_container_requests_and_limits(spec: dict[str, Any], requests: dict[str, int], limits: dict[str, int]) -> None:
    assert container_requests(spec) == requests
    assert container_limits(spec) == limits


def test_invalid_quantity_is_reported() -> None:
    with pytest.raises(QuantityError, match="regular expression"):
        pod_requests(pod([container(cpu="1 core")]))


def test_pod_dict_is_not_modified() -> None:
    spec = pod([container(lim_cpu="1")], init=[container(cpu="1", sidecar=True)], overhead={"cpu": "1"})
    before = repr(spec)
    pod_requests(spec)
    pod_limits(spec)
    qos_class(spec)
    assert repr(spec) == before  # defaulting is computed, never written back


# -- resource names -----------------------------------------------------------------------------------

EXTENDED = [
    (GPU, True),
    ("example.com/foo", True),
    ("foo.bar/Baz_1", True),
    ("cpu", False),
    ("memory", False),
    ("ephemeral-storage", False),
    ("hugepages-2Mi", False),
    ("kubernetes.io/foo", False),  # native namespace
    ("requests.example.com/foo", False),  # quota's spelling
    ("Example.com/foo", False),  # prefix must be a lower-case DNS subdomain
    ("example.com/", False),
    ("example.com/foo/bar", False),
    ("example.com/" + "x" * 64, False),
]


@pytest.mark.parametrize(("name", "extended"), EXTENDED, ids=[row[0][:30] or "empty" for row in EXTENDED])
def test_is_extended_resource(name: str, extended: bool) -> None:
    assert is_extended_resource(name) is extended


def test_standard_resource_names() -> None:
    assert {"cpu", "memory", "ephemeral-storage", "pods", "storage"} == STANDARD_RESOURCE_NAMES
    assert not any(is_extended_resource(name) for name in STANDARD_RESOURCE_NAMES)
