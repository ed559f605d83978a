"""Behaviour profiles: curve timelines, annotation syntax and errors, precedence, seeded randomness.

Expected values come from each curve's definition (the module docstring of
``emulator.kubelet.profiles``), evaluated here by hand.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from emulator.kubelet.profiles import (
    BUILTIN_PROFILE_DIR,
    CurveKind,
    CurveSet,
    Profile,
    ProfileError,
    ProfileLibrary,
    parse_duration,
)

MI = 1024**2


def make_pod(annotations: dict[str, str] | None = None, containers: list[dict] | None = None,
             uid: str = "uid-1") -> dict:
    return {
        "metadata": {"name": "p", "namespace": "default", "uid": uid, "annotations": dict(annotations or {})},
        "spec": {"containers": containers or [{"name": "app", "resources": {
            "requests": {"cpu": "500m", "memory": "256Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}}}]},
    }


@pytest.fixture(scope="module")
def library() -> ProfileLibrary:
    return ProfileLibrary.load()


def curve_of(library: ProfileLibrary, field: str, text: str, pod: dict | None = None):
    pod = pod or make_pod({f"kemu.io/{field}": text})
    pod["metadata"]["annotations"][f"kemu.io/{field}"] = text
    behaviour = library.resolve(pod, seed=7).containers[0]
    return getattr(behaviour, field.replace("-", "_"))


def sine(low: float, high: float, period: float, t: float, phase: float = 0.0) -> float:
    return low + (high - low) * (1 + math.sin(2 * math.pi * (t + phase) / period)) / 2


# -- one timeline per curve kind ------------------------------------------------------------

TIMELINES = [
    ("cpu", "250m", [(0, 250), (100, 250)]),
    ("cpu", "constant(1.5)", [(0, 1500), (3600, 1500)]),
    ("cpu", "ramp(100m, 500m, 40s)", [(0, 100), (10, 100 + 400 * 10 / 40), (40, 500), (100, 500)]),
    ("cpu", "sine(200m, 800m, 60s)", [(t, sine(200, 800, 60, t)) for t in (0, 15, 30, 45, 50)]),
    ("cpu", "sine(200m, 800m, 1m, 15s)", [(t, sine(200, 800, 60, t, 15)) for t in (0, 15, 30)]),
    ("cpu", "spike(100m, 1, 60s, 10s, 30s)", [(0, 100), (29, 100), (30, 1000), (39, 1000), (40, 100), (90, 1000)]),
    ("cpu", "spike(100m, 1, 60s, 10s)", [(0, 1000), (9.5, 1000), (10, 100), (60, 1000)]),
    ("memory", "leak(64Mi, 1Mi/s)", [(0, 64 * MI), (10, 74 * MI), (192, 256 * MI)]),
    ("memory", "leak(64Mi, 60Mi/m, 128Mi)", [(0, 64 * MI), (10, 74 * MI), (64, 128 * MI), (1000, 128 * MI)]),
    ("memory", "leak(100Mi, -1Mi/s)", [(0, 100 * MI), (50, 50 * MI), (200, 0)]),
    ("pids", "replay(0s=1, 10s=5, 20s=2)", [(0, 1), (5, 1), (10, 5), (15, 5), (20, 2), (500, 2)]),
    ("pids", "replay(0s=1, 10s=5, 20s=2, linear)", [(0, 1), (5, 3), (10, 5), (15, 3.5), (30, 2)]),
    ("pids", "replay(0s=1, 10s=5, 20s=2, loop)", [(5, 1), (15, 5), (25, 1), (35, 5)]),
    ("ephemeral-storage", "leak(0, 10Mi/s)", [(0, 0), (3, 30 * MI)]),
    ("cpu", "80%request", [(0, 400), (99, 400)]),
    ("memory", "ramp(50%request, 100%limit, 10s)", [(0, 128 * MI), (5, 320 * MI), (10, 512 * MI)]),
]


@pytest.mark.parametrize(("field", "text", "timeline"), TIMELINES, ids=[f"{f}={t}" for f, t, _ in TIMELINES])
def test_curve_timeline(library: ProfileLibrary, field: str, text: str, timeline: list[tuple[float, float]]) -> None:
    curve = curve_of(library, field, text)
    for t, expected in timeline:
        assert curve.value_at(float(t)) == pytest.approx(expected), f"t={t}"


def test_share_of_an_unset_limit_is_zero(library: ProfileLibrary) -> None:
    pod = make_pod(containers=[{"name": "app"}])  # BestEffort: no requests, no limits
    assert curve_of(library, "cpu", "150%limit", pod).value_at(5.0) == 0.0


# -- vectorised evaluation equals the scalar definition ---------------------------------------


def test_curveset_evaluates_every_kind_at_once(library: ProfileLibrary) -> None:
    texts = [("cpu", t) for t in ("250m", "ramp(0, 1, 10s)", "sine(0, 1, 20s)", "spike(0, 1, 30s, 5s)",
                                  "leak(0, 10m/s)", "replay(0s=100m, 5s=300m)", "replay(0s=100m, 5s=300m)")]
    curves = [curve_of(library, f, t) for f, t in texts]
    rng = np.random.default_rng(3)
    n = 500
    rows = rng.integers(0, len(curves), n)
    cs = CurveSet(8)
    cs.grow(n)
    for row, which in enumerate(rows):
        cs.assign(row, curves[which])
    t = rng.uniform(0, 100, n)
    values = cs.evaluate(t)
    expected = [curves[w].value_at(float(tt)) for w, tt in zip(rows, t, strict=True)]
    np.testing.assert_allclose(values, expected)
    assert len(cs._series) == 1  # the two identical replays share one series
    cs.clear(np.arange(n))
    assert not cs.evaluate(t).any()


def test_kind_codes_are_stable() -> None:
    # Stored in arrays (and possibly snapshots): the codes are part of the format.
    assert CurveKind.NAMES == {"constant": 1, "ramp": 2, "sine": 3, "spike": 4, "leak": 5, "replay": 6}


# -- durations, exit codes, distributions ----------------------------------------------------

DURATIONS = [("500ms", 0.5), ("10s", 10.0), ("5m", 300.0), ("1h30m", 5400.0), ("1.5s", 1.5), ("42", 42.0),
             ("0", 0.0), ("2m3s", 123.0)]


@pytest.mark.parametrize(("text", "seconds"), DURATIONS, ids=[d for d, _ in DURATIONS])
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


def test_lifecycle_fields(library: ProfileLibrary) -> None:
    pod = make_pod({"kemu.io/startup-delay": "3s", "kemu.io/duration": "1m", "kemu.io/exit-code": "2"})
    c = library.resolve(pod, seed=1).containers[0]
    assert (c.startup_delay, c.duration, c.exit_code) == (3.0, 60.0, 2)
    forever = library.resolve(make_pod({"kemu.io/duration": "forever"}), seed=1).containers[0]
    assert forever.duration == math.inf


DISTRIBUTIONS = [
    ("uniform(1s, 5s)", lambda x: 1.0 <= x <= 5.0),
    ("normal(10s, 2s)", lambda x: x >= 0.0),
    ("exponential(30s)", lambda x: x >= 0.0),
]


@pytest.mark.parametrize(("text", "check"), DISTRIBUTIONS, ids=["uniform", "normal", "exponential"])
def test_distributions_are_seeded_per_pod(library: ProfileLibrary, text: str, check) -> None:
    def delay(seed: int, uid: str) -> float:
        pod = make_pod({"kemu.io/startup-delay": text}, uid=uid)
        return library.resolve(pod, seed=seed).containers[0].startup_delay

    draws = [delay(1, f"uid-{i}") for i in range(50)]
    assert all(check(x) for x in draws)
    assert draws == [delay(1, f"uid-{i}") for i in range(50)]  # same (seed, uid): same draw
    assert len(set(draws)) == 50  # different pods differ
    assert delay(2, "uid-0") != delay(1, "uid-0")  # the run seed matters


def test_random_values_inside_curves(library: ProfileLibrary) -> None:
    pod = make_pod({"kemu.io/cpu": "sine(uniform(100m, 200m), 800m, 60s, random)"})
    c = library.resolve(pod, seed=5).containers[0].cpu
    low, high, period, phase = c.params[:4]
    assert 100 <= low <= 200 and high == 800 and period == 60 and 0 <= phase < 60
    assert library.resolve(pod, seed=5).containers[0].cpu == c


# -- precedence -----------------------------------------------------------------------------


def test_precedence_container_annotation_over_pod_annotation_over_profile(library: ProfileLibrary) -> None:
    containers = [{"name": "app", "resources": {"requests": {"cpu": "1"}}}, {"name": "side"}]
    pod = make_pod({"kemu.io/profile": "crashloop", "kemu.io/cpu": "300m", "kemu.io/cpu.app": "700m"},
                   containers=containers)
    behaviour = library.resolve(pod, seed=0)
    app, side = behaviour.containers
    assert behaviour.profile == "crashloop"
    assert app.cpu.value_at(0) == 700 and side.cpu.value_at(0) == 300
    assert app.exit_code == 1 and app.memory.value_at(0) == 32 * MI  # the rest from the profile


def test_default_profile_and_sidecars(library: ProfileLibrary) -> None:
    pod = make_pod()
    pod["spec"]["initContainers"] = [{"name": "init"}, {"name": "proxy", "restartPolicy": "Always",
                                                        "resources": {"requests": {"cpu": "100m"}}}]
    behaviour = library.resolve(pod, seed=0)
    assert behaviour.profile == "default"
    assert [c.name for c in behaviour.containers] == ["proxy", "app"]  # plain init containers are not run
    assert behaviour.containers[1].cpu.value_at(10) == 250  # default: 50% of the 500m request
    assert library.resolve(pod, seed=0, default="idle").profile == "idle"


def test_every_builtin_profile_resolves(library: ProfileLibrary) -> None:
    names = sorted(p.stem for p in BUILTIN_PROFILE_DIR.glob("*.yaml"))
    assert names == library.names()
    for name in names:
        behaviour = library.resolve(make_pod({"kemu.io/profile": name}), seed=0)
        assert behaviour.profile == name and len(behaviour.containers) == 1


# -- errors ---------------------------------------------------------------------------------

ERRORS = [
    ("kemu.io/cpu", "sine(200m, 800m)", "sine() takes 3 to 4 arguments"),
    ("kemu.io/cpu", "wobble(1)", "unknown curve wobble()"),
    ("kemu.io/cpu", "sine(1, 2, 3s", "missing ')'"),
    ("kemu.io/cpu", "sine(1, 2, 0s)", "positive period"),
    ("kemu.io/cpu", "-100m", "negative"),
    ("kemu.io/cpu", "", "empty value"),
    ("kemu.io/memory", "lots", "'lots' is not a quantity"),
    ("kemu.io/memory", "leak(64Mi, 1Mi/day)", "a rate ends in /s, /m or /h"),
    ("kemu.io/memory", "ramp(1Mi, 2Mi, soon)", "'soon' is not a duration"),
    ("kemu.io/pids", "replay(10s=1, 5s=2)", "times must increase"),
    ("kemu.io/pids", "replay(0s=uniform(1, 2))", "literal t=value pairs"),
    ("kemu.io/pids", "replay(linear)", "at least one t=value point"),
    ("kemu.io/duration", "ten seconds", "is not a duration"),
    ("kemu.io/startup-delay", "uniform(1s)", "uniform() takes 2 argument(s)"),
    ("kemu.io/startup-delay", "poisson(3s)", "unknown function poisson()"),
    ("kemu.io/exit-code", "300", "not an exit code"),
    ("kemu.io/cpu.nosuch", "100m", "names no container of the pod"),
    ("kemu.io/profile", "nope", "unknown profile 'nope'"),
]


@pytest.mark.parametrize(("key", "value", "expected"), ERRORS, ids=[f"{k}={v}" for k, v, _ in ERRORS])
def test_bad_annotations_name_the_annotation(library: ProfileLibrary, key: str, value: str, expected: str) -> None:
    with pytest.raises(ProfileError) as info:
        library.resolve(make_pod({key: value}), seed=0)
    message = str(info.value)
    assert message.startswith(f"annotation {key}: "), message
    assert expected in message, message


def test_unrelated_kemu_annotations_are_ignored(library: ProfileLibrary) -> None:
    library.resolve(make_pod({"kemu.io/bench-sent-at": "123.4", "example.com/cpu": "nonsense"}), seed=0)


PROFILE_ERRORS = [
    ({"name": "x", "cpus": "1"}, "unknown field 'cpus'"),
    ({"name": "Bad_Name"}, "'name' must be a lowercase DNS label"),
    ({"name": "x", "containers": {"app": {"memory": "leak(1Mi)"}}}, "containers.app.memory"),
    ({"name": "x", "cpu": ["1"]}, "expected a string"),
]


@pytest.mark.parametrize(("data", "expected"), PROFILE_ERRORS, ids=["unknown-field", "name", "container", "type"])
def test_bad_profiles(data: dict, expected: str) -> None:
    with pytest.raises(ProfileError, match=expected.replace("(", r"\(")):
        Profile.from_mapping(data, "profile file x.yaml")


def test_profile_files_and_default(tmp_path: Path) -> None:
    (tmp_path / "mine.yaml").write_text("name: mine\ncpu: 42m\n")
    library = ProfileLibrary.load(tmp_path, default="mine")
    assert library.resolve(make_pod(), seed=0).containers[0].cpu.value_at(0) == 42
    (tmp_path / "other.yaml").write_text("name: different\n")
    with pytest.raises(ProfileError, match="differs from the file name"):
        ProfileLibrary.load(tmp_path)
    with pytest.raises(ProfileError, match="default profile 'missing'"):
        ProfileLibrary.load(default="missing")


# -- the built-in profiles, each against its documented behaviour ------------------------------
# A Burstable container with requests cpu 500m / memory 256Mi and limits cpu 1 / memory 512Mi.
REQ_CPU, LIM_CPU, REQ_MEM, LIM_MEM = 500, 1000, 256 * MI, 512 * MI

BUILTIN = {
    "default": [("cpu", [(0, 0.5 * REQ_CPU), (3600, 0.5 * REQ_CPU)]), ("memory", [(0, 0.5 * REQ_MEM)]),
                ("ephemeral_storage", [(0, 10 * MI)]), ("pids", [(0, 4)])],
    "idle": [("cpu", [(0, 1)]), ("memory", [(0, 2 * MI)]), ("pids", [(0, 1)])],
    "web": [("memory", [(0, 0.2 * REQ_MEM), (60, 0.45 * REQ_MEM), (120, 0.7 * REQ_MEM), (999, 0.7 * REQ_MEM)]),
            ("ephemeral_storage", [(0, 5 * MI), (100, 5 * MI + 400 * 1024)]), ("pids", [(0, 16)])],
    "batch": [("cpu", [(0, LIM_CPU), (100, LIM_CPU)]),
              ("memory", [(0, 0.1 * REQ_MEM), (15, 0.45 * REQ_MEM), (30, 0.8 * REQ_MEM)])],
    "crashloop": [("cpu", [(0, 50)]), ("memory", [(0, 32 * MI)])],
    "memory-leak": [("memory", [(0, 64 * MI), (192, 256 * MI), (448, 512 * MI)]), ("cpu", [(0, 100)])],
    "spiky": [("cpu", [(0, 0.1 * REQ_CPU), (30, 1.5 * REQ_CPU), (39, 1.5 * REQ_CPU), (40, 0.1 * REQ_CPU),
                       (90, 1.5 * REQ_CPU)]), ("memory", [(0, 0.6 * REQ_MEM)])],
    "fork-bomb": [("pids", [(0, 1), (10, 2001)]), ("cpu", [(0, 200)])],
    "disk-filler": [("ephemeral_storage", [(0, 0), (10, 100 * MI)])],
    "diurnal": [("cpu", [(0, 100), (600, 300), (1500, 700), (1800, 900), (3599, 200), (3600, 100), (4200, 300)]),
                ("memory", [(0, 128 * MI), (600, 192 * MI), (1200, 256 * MI), (3600, 128 * MI)])],
    "queue-worker": [("memory", [(0, 0.4 * REQ_MEM), (600, 0.4 * REQ_MEM)]), ("pids", [(0, 8)])],
}
LIFECYCLE = {  # startup delay range, duration range (inf: forever), exit code
    "default": ((0.5, 1.5), (math.inf, math.inf), 0), "idle": ((0, 0), (math.inf, math.inf), 0),
    "web": ((1, 4), (math.inf, math.inf), 0), "batch": ((2, 6), (60, 300), 0), "crashloop": ((1, 1), (5, 15), 1),
    "memory-leak": ((1, 1), (math.inf, math.inf), 0), "spiky": ((0, 0), (math.inf, math.inf), 0),
    "fork-bomb": ((0, 0), (math.inf, math.inf), 0), "disk-filler": ((0, 0), (math.inf, math.inf), 0),
    "diurnal": ((0, 0), (math.inf, math.inf), 0), "queue-worker": ((1, 3), (math.inf, math.inf), 0),
}


@pytest.mark.parametrize("name", sorted(BUILTIN), ids=sorted(BUILTIN))
def test_builtin_profile_timeline(library: ProfileLibrary, name: str) -> None:
    assert sorted(BUILTIN) == library.names()  # every profile file has a case here
    pods = [library.resolve(make_pod({"kemu.io/profile": name}, uid=f"u{i}"), seed=3).containers[0]
            for i in range(20)]
    for field, timeline in BUILTIN[name]:
        for t, expected in timeline:
            assert getattr(pods[0], field).value_at(float(t)) == pytest.approx(expected), (field, t)
    (delay_lo, delay_hi), (run_lo, run_hi), code = LIFECYCLE[name]
    for c in pods:
        assert delay_lo <= c.startup_delay <= delay_hi and run_lo <= c.duration <= run_hi and c.exit_code == code


def test_web_profile_sine_is_per_pod_phase_within_bounds(library: ProfileLibrary) -> None:
    curves = [library.resolve(make_pod({"kemu.io/profile": "web"}, uid=f"u{i}"), seed=3).containers[0].cpu
              for i in range(20)]
    for cpu in curves:
        values = [cpu.value_at(float(t)) for t in range(0, 600, 10)]
        assert min(values) >= 0.2 * REQ_CPU - 1e-6 and max(values) <= 0.9 * REQ_CPU + 1e-6
        assert cpu.value_at(17.0) == pytest.approx(cpu.value_at(617.0))  # 10-minute period
    assert len({round(c.value_at(0.0), 6) for c in curves}) == 20  # each pod at its own phase


@pytest.mark.parametrize(("annotations", "queue", "rate"), [
    ({"kemu.io/profile": "queue-worker", "kemu.io/queue": "jobs"}, "jobs", 2.0),
    ({"kemu.io/profile": "queue-worker", "kemu.io/queue": "app:jobs", "kemu.io/items-per-second": "0.5"},
     "app:jobs", 0.5),
    ({"kemu.io/profile": "web"}, "", 0.0),
], ids=["profile-rate", "annotation-rate", "no-queue"])
def test_queue_worker_fields(library: ProfileLibrary, annotations: dict[str, str], queue: str, rate: float) -> None:
    behaviour = library.resolve(make_pod(annotations), seed=0)
    assert (behaviour.queue, behaviour.queue_rate) == (queue, rate)
