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
3. the profile named by ``kemu.io/profile`` (or the caller's default, e.g. from
   config or the node), its ``containers.<name>`` section first;
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

Evaluation is vectorised: :class:`CurveSet` holds one curve per row in numpy
arrays (a kind code and five parameters), keeps an index of rows per kind,
and evaluates each kind with a few array operations over all its rows;
replays are grouped by their (shared, deduplicated) series.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from emulator.api.pods import container_limits, container_requests
from emulator.api.quantity import QuantityError, parse_quantity

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

CURVE_FIELDS: tuple[str, ...] = ("cpu", "memory", "ephemeral-storage", "pids")
FIELDS: tuple[str, ...] = ("startup-delay", "duration", "exit-code", *CURVE_FIELDS)
_FIELD_SET = frozenset(FIELDS)

# The resource each curve field is measured against for %request / %limit.
_FIELD_RESOURCE = {"cpu": "cpu", "memory": "memory", "ephemeral-storage": "ephemeral-storage", "pids": None}
_DEFAULT_CURVE_TEXT = {"cpu": "0", "memory": "0", "ephemeral-storage": "0", "pids": "1"}

_NPARAMS = 5


class ProfileError(ValueError):
    """A profile or behaviour annotation is invalid; the message names where (annotation key or file)."""

    def __init__(self, message: str, source: str | None = None) -> None:
        super().__init__(f"{source}: {message}" if source else message)
        self.source = source
        self.detail = message


class CurveKind:
    """Curve kind codes stored in :attr:`CurveSet.kind` (0 = no curve, evaluates to 0)."""

    NONE = 0
    CONSTANT = 1
    RAMP = 2
    SINE = 3
    SPIKE = 4
    LEAK = 5
    REPLAY = 6

    NAMES: dict[str, int] = {"constant": 1, "ramp": 2, "sine": 3, "spike": 4, "leak": 5, "replay": 6}


# -- syntax tree ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Atom:
    text: str


@dataclass(frozen=True)
class _Call:
    name: str
    args: tuple[_Atom | _Call, ...]


_Node = _Atom | _Call


def _parse_tree(text: str) -> _Node:
    """``name(arg, arg, ...)`` with nested calls, or a bare atom. Atoms are any run of
    characters other than ``(``, ``)`` and ``,``, whitespace-trimmed."""
    pos = 0

    def node() -> _Node:
        nonlocal pos
        start = pos
        while pos < len(text) and text[pos] not in "(),":
            pos += 1
        word = text[start:pos].strip()
        if pos < len(text) and text[pos] == "(":
            if "=" in word:
                raise ValueError("replay() points are literal t=value pairs (no distributions)")
            if not re.fullmatch(r"[a-z][a-z-]*", word):
                raise ValueError(f"expected a function name before '(' but found {word!r}")
            pos += 1
            args: list[_Node] = []
            if text[pos:].lstrip().startswith(")"):
                pos = text.index(")", pos) + 1
                return _Call(word, ())
            while True:
                args.append(node())
                if pos >= len(text):
                    raise ValueError(f"missing ')' after the arguments of {word}()")
                if text[pos] == ",":
                    pos += 1
                    continue
                if text[pos] == ")":
                    pos += 1
                    break
                raise ValueError(f"unexpected {text[pos]!r}")  # pragma: no cover - the scan stops only at ( ) ,
            return _Call(word, tuple(args))
        if not word:
            raise ValueError("empty value" if not text.strip() else "missing value")
        return _Atom(word)

    tree = node()
    if text[pos:].strip():
        raise ValueError(f"unexpected text after the value: {text[pos:].strip()!r}")
    return tree


# -- numbers -------------------------------------------------------------------------

_DURATION_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION_PART = re.compile(r"([0-9]*\.?[0-9]+)(ns|us|µs|ms|s|m|h)")
_PLAIN_NUMBER = re.compile(r"[+]?([0-9]*\.?[0-9]+)([eE][-+]?[0-9]+)?")


def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration (``500ms``, ``10s``, ``5m``, ``1h30m``) or a plain number of seconds."""
    text = text.strip()
    if _PLAIN_NUMBER.fullmatch(text):
        return float(text)
    pos = 0
    total = 0.0
    while pos < len(text):
        match = _DURATION_PART.match(text, pos)
        if match is None:
            raise ValueError(f"{text!r} is not a duration (examples: 500ms, 10s, 5m, 1h30m)")
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    if not text:
        raise ValueError("empty duration")
    return total


def _quantity_amount(text: str) -> Decimal:
    try:
        return parse_quantity(text).amount
    except QuantityError as e:
        raise ValueError(f"{text!r} is not a quantity ({e})") from None


def _value_unit(field_name: str, text: str) -> float:
    """A quantity in the field's unit: millicores for cpu, base units otherwise."""
    amount = _quantity_amount(text)
    if amount < 0:
        raise ValueError(f"{text!r} is negative")
    return float(amount * 1000) if field_name == "cpu" else float(amount)


_RATE_UNITS = {"s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def _rate_unit(field_name: str, text: str) -> float:
    """``1Mi/s``, ``10m/m`` (cpu millicores per minute), or a bare quantity per second."""
    amount_text, slash, per = text.partition("/")
    per_seconds = 1.0
    if slash:
        if per not in _RATE_UNITS:
            raise ValueError(f"{text!r}: a rate ends in /s, /m or /h")
        per_seconds = _RATE_UNITS[per]
    amount = _quantity_amount(amount_text)
    scale = 1000 if field_name == "cpu" else 1
    return float(amount * scale) / per_seconds  # a negative rate (shrinking usage) is allowed


# -- resolvable expressions ----------------------------------------------------------


class _PodRandom:
    """The pod's generator, created on first use: most profiles draw nothing, and creating a
    seeded ``Generator`` costs more than resolving the rest of a pod."""

    __slots__ = ("_generator", "seed", "uid")

    def __init__(self, seed: int, uid: str) -> None:
        self.seed = seed
        self.uid = uid
        self._generator: np.random.Generator | None = None

    @property
    def generator(self) -> np.random.Generator:
        if self._generator is None:
            self._generator = pod_rng(self.seed, self.uid)
        return self._generator


@dataclass(frozen=True)
class _Ctx:
    """What an expression resolves against: the pod's generator and the container's request/limit."""

    rng: _PodRandom
    request: float
    limit: float


@dataclass(frozen=True)
class _Num:
    value: float

    def resolve(self, ctx: _Ctx) -> float:
        return self.value


@dataclass(frozen=True)
class _Share:
    """``80%request`` / ``120%limit``: a share of the container's own amount (0 when unset)."""

    fraction: float
    of_limit: bool

    def resolve(self, ctx: _Ctx) -> float:
        return self.fraction * (ctx.limit if self.of_limit else ctx.request)


@dataclass(frozen=True)
class _Dist:
    kind: str  # uniform | normal | exponential
    args: tuple[_Expr, ...]

    def resolve(self, ctx: _Ctx) -> float:
        values = [a.resolve(ctx) for a in self.args]
        rng = ctx.rng.generator
        if self.kind == "uniform":
            low, high = values
            return float(rng.uniform(min(low, high), max(low, high)))
        if self.kind == "normal":
            mean, sd = values
            return max(0.0, float(rng.normal(mean, max(sd, 0.0))))
        (mean,) = values
        return float(rng.exponential(mean)) if mean > 0 else 0.0


@dataclass(frozen=True)
class _RandomPhase:
    """``random`` as a sine phase: uniform over one period."""

    def resolve(self, ctx: _Ctx) -> float:
        return float(ctx.rng.generator.uniform(0.0, 1.0))  # a fraction of the period, scaled by the caller


_Expr = _Num | _Share | _Dist | _RandomPhase

_DISTS = {"uniform": 2, "normal": 2, "exponential": 1}
_SHARE = re.compile(r"([0-9]*\.?[0-9]+)%(request|limit)")


def _expr(node: _Node, atom: Any, what: str) -> _Expr:
    """An argument: ``atom(text)`` for literals, or a distribution of such."""
    if isinstance(node, _Call):
        arity = _DISTS.get(node.name)
        if arity is None:
            raise ValueError(f"{what}: unknown function {node.name}() (distributions: uniform, normal, exponential)")
        if len(node.args) != arity:
            names = {"uniform": "low, high", "normal": "mean, sd", "exponential": "mean"}[node.name]
            raise ValueError(f"{node.name}() takes {arity} argument(s) ({names}), got {len(node.args)}")
        args = tuple(_expr(a, atom, what) for a in node.args)
        if node.name == "exponential" and isinstance(args[0], _Num) and args[0].value <= 0:
            raise ValueError("exponential() needs a positive mean")
        return _Dist(node.name, args)
    return atom(node.text)


def _value_expr(field_name: str, node: _Node, what: str) -> _Expr:
    def atom(text: str) -> _Expr:
        share = _SHARE.fullmatch(text)
        if share:
            return _Share(float(share.group(1)) / 100.0, share.group(2) == "limit")
        return _Num(_value_unit(field_name, text))

    return _expr(node, atom, what)


def _duration_expr(node: _Node, what: str) -> _Expr:
    def atom(text: str) -> _Expr:
        seconds = parse_duration(text)
        if seconds < 0:
            raise ValueError(f"{what}: {text!r} is negative")
        return _Num(seconds)

    return _expr(node, atom, what)


def _rate_expr(field_name: str, node: _Node, what: str) -> _Expr:
    return _expr(node, lambda text: _Num(_rate_unit(field_name, text)), what)


# -- parsed field values ------------------------------------------------------------------


@dataclass(frozen=True)
class CurveSpec:
    """A parsed curve, not yet resolved against a container (it may hold distributions and shares)."""

    kind: int
    args: tuple[_Expr, ...]
    text: str
    points: tuple[tuple[float, float], ...] = ()
    linear: bool = False
    loop: bool = False


@dataclass(frozen=True)
class _DurationSpec:
    expr: _Expr | None  # None: forever


@dataclass(frozen=True)
class _ExitCodeSpec:
    code: int


_CURVE_SIGNATURES: dict[str, tuple[tuple[str, ...], int]] = {
    # name: (argument kinds, number of required arguments)
    "constant": (("value",), 1),
    "ramp": (("value", "value", "duration"), 3),
    "sine": (("value", "value", "duration", "phase"), 3),
    "spike": (("value", "value", "duration", "duration", "duration"), 4),
    "leak": (("value", "rate", "value"), 2),
}
_CURVE_USAGE = {
    "constant": "constant(value)",
    "ramp": "ramp(from, to, over)",
    "sine": "sine(low, high, period[, phase])",
    "spike": "spike(base, peak, every, width[, offset])",
    "leak": "leak(start, rate[, max])",
    "replay": "replay(t=value, t=value, ...[, linear][, loop])",
}


def _curve(field_name: str, text: str) -> CurveSpec:
    tree = _parse_tree(text)
    if isinstance(tree, _Atom) or tree.name in _DISTS:
        # A bare value (or a distribution of one) is a constant.
        return CurveSpec(CurveKind.CONSTANT, (_value_expr(field_name, tree, "constant"),), text)
    name = tree.name
    if name == "replay":
        return _replay(field_name, tree, text)
    signature = _CURVE_SIGNATURES.get(name)
    if signature is None:
        raise ValueError(f"unknown curve {name}(); curves: {', '.join(_CURVE_USAGE.values())}")
    kinds, required = signature
    if not required <= len(tree.args) <= len(kinds):
        raise ValueError(f"{name}() takes {_arity_text(required, len(kinds))} ({_CURVE_USAGE[name]}), "
                         f"got {len(tree.args)}")
    args: list[_Expr] = []
    for arg_kind, node in zip(kinds, tree.args, strict=False):
        if arg_kind == "value":
            args.append(_value_expr(field_name, node, name))
        elif arg_kind == "duration":
            args.append(_duration_expr(node, name))
        elif arg_kind == "rate":
            args.append(_rate_expr(field_name, node, name))
        elif isinstance(node, _Atom) and node.text == "random":  # phase
            args.append(_RandomPhase())
        else:
            args.append(_duration_expr(node, name))
    if name == "sine" and isinstance(args[2], _Num) and args[2].value <= 0:
        raise ValueError("sine() needs a positive period")
    if name == "spike" and isinstance(args[2], _Num) and args[2].value <= 0:
        raise ValueError("spike() needs a positive 'every'")
    return CurveSpec(CurveKind.NAMES[name], tuple(args), text)


def _arity_text(required: int, most: int) -> str:
    return f"{required} argument(s)" if required == most else f"{required} to {most} arguments"


def _replay(field_name: str, tree: _Call, text: str) -> CurveSpec:
    points: list[tuple[float, float]] = []
    linear = loop = False
    for node in tree.args:
        if isinstance(node, _Call):
            raise ValueError("replay() points are literal t=value pairs (no distributions)")
        if node.text == "linear":
            linear = True
        elif node.text == "step":
            linear = False
        elif node.text == "loop":
            loop = True
        elif "=" in node.text:
            t_text, _, v_text = node.text.partition("=")
            points.append((parse_duration(t_text), _value_unit(field_name, v_text.strip())))
        else:
            raise ValueError(f"replay() expects t=value points and the flags linear, step, loop; got {node.text!r}")
    if not points:
        raise ValueError(f"replay() needs at least one t=value point ({_CURVE_USAGE['replay']})")
    times = [t for t, _ in points]
    if any(b <= a for a, b in itertools.pairwise(times)):
        raise ValueError("replay() times must increase strictly")
    if loop and times[-1] <= 0:
        raise ValueError("replay(..., loop) needs a last point after 0s: the loop length is its time")
    return CurveSpec(CurveKind.REPLAY, (), text, tuple(points), linear, loop)


@lru_cache(maxsize=4096)
def _parse_field_cached(field_name: str, text: str) -> CurveSpec | _DurationSpec | _ExitCodeSpec:
    if field_name in _FIELD_RESOURCE:
        return _curve(field_name, text)
    if field_name == "exit-code":
        if not re.fullmatch(r"\s*[0-9]+\s*", text) or not 0 <= int(text) <= 255:
            raise ValueError(f"{text!r} is not an exit code (an integer 0..255)")
        return _ExitCodeSpec(int(text))
    if field_name == "duration" and text.strip() == "forever":
        return _DurationSpec(None)
    return _DurationSpec(_duration_expr(_parse_tree(text), field_name))


def parse_field(field_name: str, raw: Any, source: str) -> CurveSpec | _DurationSpec | _ExitCodeSpec:
    """Parse one field's text; errors become :class:`ProfileError` naming ``source``."""
    if field_name not in _FIELD_SET:
        raise ProfileError(f"unknown field {field_name!r}; fields: {', '.join(FIELDS)}", source)
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        raise ProfileError(f"expected a string, got {type(raw).__name__}", source)
    text = str(raw)
    try:
        return _parse_field_cached(field_name, text)
    except ValueError as e:
        raise ProfileError(f"{text!r}: {e}", source) from None


# -- profiles --------------------------------------------------------------------------


@dataclass(frozen=True)
class Profile:
    """A named behaviour: field specs for every container, and per-container-name overrides."""

    name: str
    fields: Mapping[str, Any] = field(default_factory=dict)  # field name -> parsed spec
    containers: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    description: str = ""
    source: str = ""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], source: str) -> Profile:
        if not isinstance(data, Mapping):
            raise ProfileError(f"a profile is a mapping of fields, not {type(data).__name__}", source)
        name = data.get("name")
        if not isinstance(name, str) or not re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name):
            raise ProfileError(f"'name' must be a lowercase DNS label, got {name!r}", source)
        fields: dict[str, Any] = {}
        containers: dict[str, dict[str, Any]] = {}
        for key, value in data.items():
            if key in ("name", "description"):
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
        return cls(name, fields, containers, str(data.get("description") or ""), source)

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
class ResolvedCurve:
    """One container's curve with every parameter a number: what :class:`CurveSet` stores in a row."""

    kind: int
    params: tuple[float, ...]  # _NPARAMS numbers, meaning per kind (see CurveSet)
    series: tuple[tuple[float, float], ...] = ()
    linear: bool = False
    loop: bool = False

    def value_at(self, t: float) -> float:
        """Scalar evaluation (tests and debugging); the hot path is :meth:`CurveSet.evaluate`."""
        curves = CurveSet(1)
        curves.assign(0, self)
        return float(curves.evaluate(np.array([t]))[0])


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


@dataclass(frozen=True)
class PodBehaviour:
    uid: str
    profile: str
    containers: tuple[ContainerBehaviour, ...]


def pod_rng(seed: int, uid: str) -> np.random.Generator:
    """The pod's generator: a stable hash of the uid (never Python's salted ``hash``) mixed with the run seed."""
    digest = hashlib.blake2b(uid.encode(), digest_size=16).digest()
    words = [int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little")]
    return np.random.default_rng([seed & 0xFFFF_FFFF_FFFF_FFFF, *words])


def _resolve_curve(spec: CurveSpec, ctx: _Ctx) -> ResolvedCurve:
    if spec.kind == CurveKind.REPLAY:
        return ResolvedCurve(CurveKind.REPLAY, (0.0,) * _NPARAMS, spec.points, spec.linear, spec.loop)
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
    params = tuple(values) + (0.0,) * (_NPARAMS - len(values))
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

        profile_name = annotations.get(PROFILE_ANNOTATION) or default or self.default
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
        return PodBehaviour(uid, profile.name, tuple(result))


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
    return ContainerBehaviour(
        name=str(container.get("name")),
        startup_delay=max(0.0, startup_delay),
        duration=max(0.0, duration),
        exit_code=exit_spec.code if exit_spec is not None else 0,
        **curves,
    )


# -- vectorised evaluation --------------------------------------------------------------


class CurveSet:
    """One curve per row, evaluated for all rows at once.

    Parameters per kind (``params[:, 0..4]``):

    ======== ====================================================
    constant value
    ramp     from, to, over
    sine     low, high, period, phase
    spike    base, peak, every, width, offset
    leak     start, rate (per second), max (inf: none)
    replay   ``series[row]`` indexes a shared, deduplicated series
    ======== ====================================================

    Rows of kind ``NONE`` evaluate to 0. Indexes of rows per kind are rebuilt
    lazily after assignments, so a tick costs a few array operations per kind
    present, not per row.
    """

    def __init__(self, capacity: int = 1024) -> None:
        self.kind = np.zeros(capacity, dtype=np.int8)
        self.params = np.zeros((capacity, _NPARAMS), dtype=np.float64)
        self.series = np.full(capacity, -1, dtype=np.int32)
        self._series: list[tuple[np.ndarray, np.ndarray, bool, bool]] = []
        self._series_ids: dict[tuple[Any, ...], int] = {}
        self._groups: list[tuple[int, np.ndarray, tuple[np.ndarray, ...]]] | None = None
        self._replay_groups: list[tuple[int, np.ndarray]] = []

    @property
    def capacity(self) -> int:
        return len(self.kind)

    def grow(self, capacity: int) -> None:
        if capacity <= self.capacity:
            return
        extra = capacity - self.capacity
        self.kind = np.concatenate([self.kind, np.zeros(extra, dtype=np.int8)])
        self.params = np.concatenate([self.params, np.zeros((extra, _NPARAMS))])
        self.series = np.concatenate([self.series, np.full(extra, -1, dtype=np.int32)])
        self._groups = None

    def assign(self, row: int, curve: ResolvedCurve) -> None:
        self.kind[row] = curve.kind
        self.params[row] = curve.params
        if curve.kind == CurveKind.REPLAY:
            key = (curve.series, curve.linear, curve.loop)
            sid = self._series_ids.get(key)
            if sid is None:
                sid = len(self._series)
                times = np.array([t for t, _ in curve.series], dtype=np.float64)
                values = np.array([v for _, v in curve.series], dtype=np.float64)
                self._series.append((times, values, curve.linear, curve.loop))
                self._series_ids[key] = sid
            self.series[row] = sid
        else:
            self.series[row] = -1
        self._groups = None

    def clear(self, rows: np.ndarray | int) -> None:
        self.kind[rows] = CurveKind.NONE
        self.series[rows] = -1
        self._groups = None

    def _index(self) -> list[tuple[int, np.ndarray, tuple[np.ndarray, ...]]]:
        """Rows per kind, with each kind's parameters pre-gathered (and pre-combined) into
        contiguous columns, so a tick gathers only ``t`` and scatters the values."""
        if self._groups is None:
            groups = []
            for k in np.unique(self.kind):
                if k == CurveKind.NONE:
                    continue
                rows = np.flatnonzero(self.kind == k)
                p = self.params[rows]
                cols: tuple[np.ndarray, ...] = ()
                if k == CurveKind.CONSTANT:
                    cols = (p[:, 0].copy(),)
                elif k == CurveKind.RAMP:
                    # over == 0: already at "to".
                    start = np.where(p[:, 2] > 0, p[:, 0], p[:, 1])
                    inv_over = np.divide(1.0, p[:, 2], out=np.zeros(len(rows)), where=p[:, 2] > 0)
                    cols = (start, p[:, 1] - start, inv_over)
                elif k == CurveKind.SINE:
                    omega = (2.0 * np.pi) / p[:, 2]
                    cols = (p[:, 0], (p[:, 1] - p[:, 0]) * 0.5, omega, omega * p[:, 3])
                elif k == CurveKind.SPIKE:
                    cols = (p[:, 0].copy(), p[:, 1].copy(), p[:, 2].copy(), p[:, 3].copy(), p[:, 4].copy())
                elif k == CurveKind.LEAK:
                    cols = (p[:, 0].copy(), p[:, 1].copy(), p[:, 2].copy())
                groups.append((int(k), rows, cols))
            self._groups = groups
            replay_rows = np.flatnonzero(self.kind == CurveKind.REPLAY)
            sids = self.series[replay_rows]
            self._replay_groups = [(int(s), replay_rows[sids == s]) for s in np.unique(sids)]
        return self._groups

    def evaluate(self, t: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """Values at per-row local times ``t`` (seconds since each row's container started)."""
        values = np.zeros(self.capacity) if out is None else out
        if out is not None:
            values.fill(0.0)
        for kind, rows, cols in self._index():
            if kind == CurveKind.CONSTANT:
                values[rows] = cols[0]
                continue
            if kind == CurveKind.REPLAY:
                for sid, srows in self._replay_groups:
                    values[srows] = self._replay(sid, t[srows])
                continue
            tr = t[rows]
            if kind == CurveKind.RAMP:
                start, delta, inv_over = cols
                values[rows] = start + delta * np.clip(tr * inv_over, 0.0, 1.0)
            elif kind == CurveKind.SINE:
                low, half, omega, phase = cols
                values[rows] = low + half * (1.0 + np.sin(omega * tr + phase))
            elif kind == CurveKind.SPIKE:
                base, peak, every, width, offset = cols
                values[rows] = np.where(np.mod(tr - offset, every) < width, peak, base)
            elif kind == CurveKind.LEAK:
                start, rate, most = cols
                values[rows] = np.minimum(start + rate * tr, most)
        np.maximum(values, 0.0, out=values)  # usage is never negative (a shrinking leak stops at 0)
        return values

    def _replay(self, sid: int, t: np.ndarray) -> np.ndarray:
        times, values, linear, loop = self._series[sid]
        if loop:
            t = np.mod(t, times[-1])
        if linear:
            return np.interp(t, times, values)
        idx = np.searchsorted(times, t, side="right") - 1
        return values[np.clip(idx, 0, len(values) - 1)]
