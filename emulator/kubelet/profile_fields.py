"""The grammar of behaviour profile fields: text in, parsed (not yet resolved) specs out.

What ``kemu.io/<field>`` annotations and profile files may say, as the
module docstring of :mod:`emulator.kubelet.profiles` describes it: a small
call syntax (``sine(20%request, 90%request, 10m, random)``), quantities,
durations, rates and distributions. :func:`parse_field` turns one field's
text into a spec whose expressions are resolved per pod later (draws from
the pod's generator, shares of the container's request or limit); bad text
is a :class:`ProfileError` naming its source.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

import numpy as np

from emulator.api.quantity import QuantityError, parse_quantity
from emulator.kubelet.curves import CurveKind

CURVE_FIELDS: tuple[str, ...] = ("cpu", "memory", "ephemeral-storage", "pids")
# Load-driven behaviour (emulator.kubelet.load): the pod's load target, its request latency at no load,
# and each container's CPU cost of one request per second.
LOAD_FIELDS: tuple[str, ...] = ("load-target", "cost-per-request", "request-latency")
# Queue workers (emulator.kubelet.queueworker): the Redis list a pod consumes and its items per second.
QUEUE_FIELDS: tuple[str, ...] = ("queue", "items-per-second")
POD_FIELDS = frozenset({"load-target", "request-latency", *QUEUE_FIELDS})  # pod-wide only: no per-container form
FIELDS: tuple[str, ...] = ("startup-delay", "duration", "exit-code", *CURVE_FIELDS, *LOAD_FIELDS, *QUEUE_FIELDS)
_FIELD_SET = frozenset(FIELDS)

# The resource each curve field is measured against for %request / %limit.
_FIELD_RESOURCE = {"cpu": "cpu", "memory": "memory", "ephemeral-storage": "ephemeral-storage", "pids": None}
_DEFAULT_CURVE_TEXT = {"cpu": "0", "memory": "0", "ephemeral-storage": "0", "pids": "1"}



class ProfileError(ValueError):
    """A profile or behaviour annotation is invalid; the message names where (annotation key or file)."""

    def __init__(self, message: str, source: str | None = None) -> None:
        super().__init__(f"{source}: {message}" if source else message)
        self.source = source
        self.detail = message


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


def pod_rng(seed: int, uid: str) -> np.random.Generator:
    """The pod's generator: a stable hash of the uid (never Python's salted ``hash``) mixed with the run seed."""
    digest = hashlib.blake2b(uid.encode(), digest_size=16).digest()
    words = [int.from_bytes(digest[:8], "little"), int.from_bytes(digest[8:], "little")]
    return np.random.default_rng([seed & 0xFFFF_FFFF_FFFF_FFFF, *words])


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
class _ValueSpec:
    expr: _Expr  # cost-per-request: millicores per request/s


@dataclass(frozen=True)
class _NameSpec:
    name: str  # load-target


_TARGET_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?")


_QUEUE_NAME = re.compile(r"[A-Za-z0-9][-A-Za-z0-9._:]*")


@dataclass(frozen=True)
class _RateSpec:
    rate: float  # items-per-second


@dataclass(frozen=True)
class _ExitCodeSpec:
    code: int


FieldSpec = CurveSpec | _DurationSpec | _ExitCodeSpec | _ValueSpec | _NameSpec | _RateSpec

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
def _parse_field_cached(field_name: str, text: str) -> FieldSpec:
    if field_name in _FIELD_RESOURCE:
        return _curve(field_name, text)
    if field_name == "exit-code":
        if not re.fullmatch(r"\s*[0-9]+\s*", text) or not 0 <= int(text) <= 255:
            raise ValueError(f"{text!r} is not an exit code (an integer 0..255)")
        return _ExitCodeSpec(int(text))
    if field_name == "load-target":
        if not _TARGET_NAME.fullmatch(text.strip()):
            raise ValueError("a load target is a lowercase DNS subdomain, e.g. web")
        return _NameSpec(text.strip())
    if field_name == "queue":
        if not _QUEUE_NAME.fullmatch(text.strip()) or len(text.strip()) > 253:
            raise ValueError("a queue is a Redis key name of letters, digits, '-', '.', '_' and ':'")
        return _NameSpec(text.strip())
    if field_name == "items-per-second":
        rate = float(text)
        if not 0 <= rate < float("inf"):
            raise ValueError("items-per-second must be a finite number >= 0")
        return _RateSpec(rate)
    if field_name == "cost-per-request":
        return _ValueSpec(_value_expr("cpu", _parse_tree(text), field_name))
    if field_name == "duration" and text.strip() == "forever":
        return _DurationSpec(None)
    return _DurationSpec(_duration_expr(_parse_tree(text), field_name))


def parse_field(field_name: str, raw: Any, source: str) -> FieldSpec:
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

