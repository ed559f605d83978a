"""Pod behaviour profiles: what an emulated container does, as data.

A real kubelet runs images; kemu's kubelet runs *profiles* (in the spirit of
kwok's stage configuration): for every container, a startup delay, a run
duration and exit code (or "run forever"), and four usage curves over the
container's own run time — CPU demand, memory working set, ephemeral-storage
usage and pid count. The cgroup model (:mod:`emulator.kubelet.cgroups`) turns
demand into usage, throttling and OOM kills; this module only says what each
container *wants*.

Where a profile comes from, highest precedence first:

1. a per-container annotation ``kemu.io/<field>.<container-name>``
   (``kemu.io/memory.app: "leak(64Mi, 1Mi/s)"``);
2. a pod-wide annotation ``kemu.io/<field>`` (``kemu.io/cpu: "sine(200m, 800m, 60s)"``);
3. the profile named by ``kemu.io/profile``, else the profile whose ``default-for``
   lists the kind of the pod's controller (``batch`` for Job pods, so a Job's pods
   finish), else the caller's default (config or the node); its
   ``containers.<name>`` section first;
4. built-in defaults: no startup delay, run forever, exit code 0, zero CPU,
   memory and storage, one pid.

Fields (the same names in annotations and in profile files):

================== ==========================================================
``startup-delay``  a duration or distribution: ``2s``, ``uniform(1s, 5s)``
``duration``       ``forever`` or a duration/distribution; then the container
                   exits with ``exit-code``
``exit-code``      integer 0..255
``cpu``            curve of CPU demand (millicores: ``250m``, ``1.5``)
``memory``         curve of memory working set (bytes: ``64Mi``)
``ephemeral-storage`` curve of writable-layer + log usage (bytes)
``pids``           curve of the number of pids (tasks)
``load-target``    pod-wide: the load target whose requests the pod serves
                   (:mod:`emulator.loadtargets`); usually the annotation
                   ``kemu.io/load-target: web`` on a pod template
``cost-per-request`` CPU (millicores) one request/s costs the container: its
                   CPU demand is the ``cpu`` curve (the base, with its noise)
                   plus the pod's share of the target's rate times this
``request-latency`` pod-wide: the latency of one request on an idle pod
                   (default 20ms); it grows as CPU nears its limit
                   (:mod:`emulator.kubelet.load`)
``queue``          pod-wide: the Redis list the pod consumes while ready
                   (:mod:`emulator.kubelet.queueworker`)
``items-per-second`` pod-wide: how many items of ``queue`` it consumes per second
================== ==========================================================

Curve syntax (``t`` is seconds since the container (re)started; a restart
replays the curve from its beginning, as a restarted process does):

=============================================== ==============================
``constant(v)`` or just ``v``                    ``v``
``ramp(from, to, over)``                         linear from→to over ``over``, then ``to``
``sine(low, high, period[, phase])``             ``low + (high-low)·(1+sin(2π(t+phase)/period))/2``;
                                                 ``phase`` a duration or ``random``
``spike(base, peak, every, width[, offset])``    ``peak`` while ``(t-offset) mod every < width``, else ``base``
``leak(start, rate[, max])``                     ``min(start + rate·t, max)``; rate ``1Mi/s``, ``/m``, ``/h``
``replay(t=v, t=v, ...[, linear][, loop])``      the series, held step-wise (or linearly
                                                 interpolated) and after its end held at the
                                                 last value (or repeated with ``loop``)
=============================================== ==============================

A value is a quantity in the field's unit, or a share of the container's
own request or limit of that resource (``80%request``, ``120%limit``; zero
when the container sets none), or a distribution of either. Distributions —
``uniform(a, b)``, ``normal(mean, sd)`` (clipped at 0), ``exponential(mean)``
— are drawn once per pod from ``numpy.random.Generator`` seeded with
``(run seed, pod uid)``, in a fixed order, so a run repeats exactly and one
pod's draws never depend on which other pods exist. A restarted container
replays the same draws. Bad text is a :class:`ProfileError` naming the
annotation (or profile file) and what is wrong.

The module is in three parts: the field grammar
(:mod:`emulator.kubelet.profile_fields`: text to parsed specs), profiles and
per-pod resolution (here: specs to numbers, all draws made), and vectorised
evaluation (:mod:`emulator.kubelet.curves`: :class:`CurveSet` holds one curve
per row in numpy arrays and evaluates each kind with a few array operations).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from emulator.api.pods import container_limits, container_requests
from emulator.kubelet.curves import NPARAMS, CurveKind, CurveSet, ResolvedCurve
from emulator.kubelet.profile_fields import (
    _DEFAULT_CURVE_TEXT,
    _FIELD_RESOURCE,
    _FIELD_SET,
    CURVE_FIELDS,
    FIELDS,
    POD_FIELDS,
    CurveSpec,
    ProfileError,
    _Ctx,
    _parse_field_cached,
    _PodRandom,
    _RandomPhase,
    parse_duration,
    parse_field,
    pod_rng,
)

__all__ = [
    "ANNOTATION_PREFIX",
    "BUILTIN_PROFILE_DIR",
    "CURVE_FIELDS",
    "FIELDS",
    "PROFILE_ANNOTATION",
    "ContainerBehaviour",
    "CurveKind",
    "CurveSet",
    "PodBehaviour",
    "Profile",
    "ProfileError",
    "ProfileLibrary",
    "ResolvedCurve",
    "parse_duration",
    "parse_field",
    "pod_rng",
]

ANNOTATION_PREFIX = "kemu.io/"
PROFILE_ANNOTATION = "kemu.io/profile"
BUILTIN_PROFILE_DIR = Path(__file__).with_name("profiles")


# -- profiles --------------------------------------------------------------------------


@dataclass(frozen=True)
class Profile:
    """A named behaviour: field specs for every container, and per-container-name overrides."""

    name: str
    fields: Mapping[str, Any] = field(default_factory=dict)  # field name -> parsed spec
    containers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    description: str = ""
    source: str = ""
    # Owner kinds (a pod's controller reference: "Job") whose pods follow this profile unless told otherwise.
    default_for: tuple[str, ...] = ()

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str) -> Profile:
        if not isinstance(data, Mapping):
            raise ProfileError(f"a profile is a mapping of fields, not {type(data).__name__}", source)
        name = data.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name):
            raise ProfileError(f"'name' must be a lowercase DNS label, got {name!r}", source)
        fields: dict[str, Any] = {}
        containers: dict[str, dict[str, Any]] = {}
        default_for = data.get("default-for") or []
        if not isinstance(default_for, list) or not all(isinstance(k, str) for k in default_for):
            raise ProfileError("'default-for' is a list of owner kinds (Job, ...)", source)
        for key, value in data.items():
            if key in ("name", "description", "default-for"):
                continue
            if key == "containers":
                if not isinstance(value, Mapping):
                    raise ProfileError("'containers' maps container names to fields", source)
                for cname, cfields in value.items():
                    if not isinstance(cfields, Mapping):
                        raise ProfileError(f"containers.{cname} must be a mapping of fields", source)
                    containers[str(cname)] = {
                        k: parse_field(k, v, f"{source}: containers.{cname}.{k}") for k, v in cfields.items()
                    }
                continue
            fields[key] = parse_field(key, value, f"{source}: {key}")
        return cls(name, fields, containers, str(data.get("description") or ""), source, tuple(default_for))

    @classmethod
    def from_file(cls, path: Path) -> Profile:
        try:
            data = yaml.safe_load(path.read_text())
        except OSError as e:
            raise ProfileError(f"cannot read profile file: {e.strerror}", str(path)) from None
        except yaml.YAMLError as e:
            raise ProfileError(f"not valid YAML: {e}", str(path)) from None
        profile = cls.from_mapping(data, f"profile file {path.name}")
        if profile.name != path.stem:
            raise ProfileError(f"profile name {profile.name!r} differs from the file name", str(path))
        return profile


# -- resolved behaviour ------------------------------------------------------------------


@dataclass(frozen=True)
class ContainerBehaviour:
    name: str
    startup_delay: float  # seconds from pod admission to first start
    duration: float  # seconds a run lasts before the container exits; math.inf = forever
    exit_code: int
    cpu: ResolvedCurve  # millicores
    memory: ResolvedCurve  # bytes
    ephemeral_storage: ResolvedCurve  # bytes
    pids: ResolvedCurve  # count
    cost_per_request: float = 0.0  # millicores of CPU per request/s of the pod's share


# A request's latency on an idle pod when the profile names none.
DEFAULT_REQUEST_LATENCY = 0.02


@dataclass(frozen=True)
class PodBehaviour:
    uid: str
    profile: str
    containers: tuple[ContainerBehaviour, ...]
    load_target: str = ""  # "": the pod serves no load target
    request_latency: float = DEFAULT_REQUEST_LATENCY  # seconds, at no load
    queue: str = ""  # "": the pod consumes no queue
    queue_rate: float = 0.0  # items per second


def _resolve_curve(spec: CurveSpec, ctx: _Ctx) -> ResolvedCurve:
    if spec.kind == CurveKind.REPLAY:
        return ResolvedCurve(CurveKind.REPLAY, (0.0,) * NPARAMS, spec.points, spec.linear, spec.loop)
    values = [a.resolve(ctx) for a in spec.args]
    kind = spec.kind
    if kind == CurveKind.SINE:
        period = values[2]
        phase = 0.0 if len(values) < 4 else values[3]
        if len(spec.args) >= 4 and isinstance(spec.args[3], _RandomPhase):
            phase *= period
        values = [values[0], values[1], period, phase]
    elif kind == CurveKind.SPIKE and len(values) < 5:
        values.append(0.0)
    elif kind == CurveKind.LEAK and len(values) < 3:
        values.append(math.inf)
    params = tuple(values) + (0.0,) * (NPARAMS - len(values))
    return ResolvedCurve(kind, params)


_FIELD_ATTR = {"cpu": "cpu", "memory": "memory", "ephemeral-storage": "ephemeral_storage", "pids": "pids"}


class ProfileLibrary:
    """Named profiles (the built-in ones plus any directories given) and per-pod resolution.

    ``default`` names the profile used when a pod has no ``kemu.io/profile``
    annotation (config can change it; a shard may pass a node's own default to
    :meth:`resolve`).
    """

    def __init__(self, profiles: Iterable[Profile] = (), default: str = "default") -> None:
        self._profiles: dict[str, Profile] = {}
        self._by_owner: dict[str, str] = {}
        for profile in profiles:
            self.add(profile)
        self.default = default

    @classmethod
    def load(cls, *paths: str | Path, builtin: bool = True, default: str = "default") -> ProfileLibrary:
        """Profiles from ``*.yaml`` files (or directories of them); later files override earlier names."""
        library = cls(default=default)
        sources = [BUILTIN_PROFILE_DIR] if builtin else []
        sources.extend(Path(p) for p in paths)
        for source in sources:
            files = sorted(source.glob("*.yaml")) if source.is_dir() else [source]
            for path in files:
                library.add(Profile.from_file(path))
        if default not in library._profiles:
            raise ProfileError(f"default profile {default!r} is not defined; known: {', '.join(library.names())}")
        return library

    def add(self, profile: Profile) -> None:
        self._profiles[profile.name] = profile
        self._by_owner = {kind: p.name for p in self._profiles.values() for kind in p.default_for}

    def names(self) -> list[str]:
        return sorted(self._profiles)

    def get(self, name: str, source: str | None = None) -> Profile:
        profile = self._profiles.get(name)
        if profile is None:
            raise ProfileError(f"unknown profile {name!r}; known profiles: {', '.join(self.names())}", source)
        return profile

    def resolve(self, pod: Mapping[str, Any], *, seed: int, default: str | None = None) -> PodBehaviour:
        """Every modelled container's behaviour, all random draws made (deterministic in ``(seed, uid)``).

        Modelled containers are the app containers and the restartable init
        containers (sidecars), which run alongside them; ordinary init
        containers are not modelled (see the kubelet model's docs).
        """
        metadata = pod.get("metadata") or {}
        spec = pod.get("spec") or {}
        annotations: Mapping[str, str] = metadata.get("annotations") or {}
        uid = str(metadata.get("uid") or f"{metadata.get('namespace', '')}/{metadata.get('name', '')}")

        owner = next((ref.get("kind") for ref in metadata.get("ownerReferences") or () if ref.get("controller")), None)
        profile_name = (annotations.get(PROFILE_ANNOTATION) or (self._by_owner.get(owner) if owner else None)
                        or default or self.default)
        profile = self.get(profile_name, f"annotation {PROFILE_ANNOTATION}")

        containers = [c for c in spec.get("initContainers") or () if c.get("restartPolicy") == "Always"]
        containers += list(spec.get("containers") or ())
        names = {str(c.get("name")) for c in containers}
        pod_fields, per_container = _annotation_fields(annotations, names)

        rng = _PodRandom(seed, uid)
        result = []
        for container in containers:
            name = str(container.get("name"))
            merged: dict[str, Any] = dict(profile.fields)
            merged.update(profile.containers.get(name, {}))
            merged.update(pod_fields)
            merged.update(per_container.get(name, {}))
            result.append(_resolve_container(container, merged, rng))
        # Pod-wide fields, drawn after every container's (a fixed order: repeatable).
        pod_wide: dict[str, Any] = {k: v for k, v in profile.fields.items() if k in POD_FIELDS}
        pod_wide.update({k: v for k, v in pod_fields.items() if k in POD_FIELDS})
        target = pod_wide.get("load-target")
        latency = pod_wide.get("request-latency")
        queue, rate = pod_wide.get("queue"), pod_wide.get("items-per-second")
        return PodBehaviour(uid, profile.name, tuple(result), target.name if target is not None else "",
                            latency.expr.resolve(_Ctx(rng, 0.0, 0.0)) if latency is not None and latency.expr
                            is not None else DEFAULT_REQUEST_LATENCY,
                            queue.name if queue is not None else "", rate.rate if rate is not None else 0.0)


def _annotation_fields(annotations: Mapping[str, str], names: set[str]) -> tuple[dict[str, Any], dict[str, dict]]:
    pod_fields: dict[str, Any] = {}
    per_container: dict[str, dict[str, Any]] = {}
    for key, value in annotations.items():
        if not key.startswith(ANNOTATION_PREFIX) or key == PROFILE_ANNOTATION:
            continue
        rest = key[len(ANNOTATION_PREFIX):]
        field_name, dot, container = rest.partition(".")
        if field_name not in _FIELD_SET:
            continue  # other kemu.io/ annotations belong to other components
        source = f"annotation {key}"
        if dot and field_name in POD_FIELDS:
            raise ProfileError(f"{field_name} is pod-wide: use kemu.io/{field_name} without a container name", source)
        parsed = parse_field(field_name, value, source)
        if not dot:
            pod_fields[field_name] = parsed
        elif container not in names:
            raise ProfileError(f"names no container of the pod (containers: {', '.join(sorted(names))})", source)
        else:
            per_container.setdefault(container, {})[field_name] = parsed
    return pod_fields, per_container


def _resolve_container(container: Mapping[str, Any], specs: Mapping[str, Any], rng: _PodRandom) -> ContainerBehaviour:
    requests = container_requests(container)
    limits = container_limits(container)
    # Draws happen in FIELDS order, one container after another: fixed, so repeatable.
    zero = _Ctx(rng, 0.0, 0.0)
    delay_spec = specs.get("startup-delay")
    startup_delay = delay_spec.expr.resolve(zero) if delay_spec is not None else 0.0
    duration_spec = specs.get("duration")
    duration = math.inf
    if duration_spec is not None and duration_spec.expr is not None:
        duration = duration_spec.expr.resolve(zero)
    exit_spec = specs.get("exit-code")
    curves: dict[str, ResolvedCurve] = {}
    for field_name in CURVE_FIELDS:
        spec = specs.get(field_name) or _parse_field_cached(field_name, _DEFAULT_CURVE_TEXT[field_name])
        resource = _FIELD_RESOURCE[field_name]
        request = float(requests.get(resource, 0)) if resource else 0.0
        limit = float(limits.get(resource, 0)) if resource else 0.0
        curves[_FIELD_ATTR[field_name]] = _resolve_curve(spec, _Ctx(rng, request, limit))
    cost_spec = specs.get("cost-per-request")
    cpu_request, cpu_limit = float(requests.get("cpu", 0)), float(limits.get("cpu", 0))
    return ContainerBehaviour(
        name=str(container.get("name")),
        startup_delay=max(0.0, startup_delay),
        duration=max(0.0, duration),
        exit_code=exit_spec.code if exit_spec is not None else 0,
        **curves,
        cost_per_request=max(0.0, cost_spec.expr.resolve(_Ctx(rng, cpu_request, cpu_limit)))
        if cost_spec is not None else 0.0,
    )
