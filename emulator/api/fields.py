"""Field selectors: the ``fieldSelector`` query string, upstream semantics.

Upstream ``k8s.io/apimachinery/pkg/fields/selector.go`` (term splitting,
escaping, ``RequiresExactMatch``) and ``runtime/conversion.go`` (the unknown
field message); the per-kind field sets follow each kind's registry strategy
(``pkg/registry/<group>/<kind>/strategy.go``, ``ToSelectableFields``).

:class:`FieldSelector` is an immutable conjunction of ``field=value`` /
``field!=value`` terms (``spec.nodeName=node-1,status.phase!=Succeeded``);
each term compiles into a getter closure over a pre-split dotted path, and
:func:`parse_field_selector` memoises parsing for the HTTP layer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import lru_cache
from typing import Any, Final

from emulator.api import errors
from emulator.api.labels import EQUALS, NOT_EQUALS

__all__ = ["FieldSelector", "parse_field_selector"]


class _ParseError(Exception):
    """A field selector syntax error; :meth:`FieldSelector.parse` turns it into a 400."""


# --------------------------------------------------------------------------- FieldSelector
_ALWAYS_SELECTABLE: Final = ("metadata.name", "metadata.namespace")
# fields/selector.go: "!=" and "==" are tried before "=" at each position, so
# "a==b" is not read as field "a" with value "=b".
_TERM_OPERATORS: Final = ("!=", "==", "=")
_ESCAPABLE: Final = frozenset("\\,=")

# Fields whose upstream value is not a plain read of the JSON path. Go structs have
# no "missing" booleans: Node's field set reports FormatBool(spec.unschedulable),
# so an absent flag selects as "false" (pkg/registry/core/node/strategy.go).
_FIELD_DEFAULTS: Final = {"spec.unschedulable": "false"}
# Event "source" is source.component, falling back to reportingComponent
# (pkg/registry/core/event/strategy.go ToSelectableFields).
_FIELD_FALLBACKS: Final = {"source": ("source.component", "reportingComponent")}


def _split_terms(s: str) -> list[str]:
    """Split on commas not preceded by a backslash; escapes stay in the terms for unescaping later."""
    terms: list[str] = []
    start, escaped = 0, False
    for i, c in enumerate(s):
        if escaped:
            escaped = False
        elif c == "\\":
            escaped = True
        elif c == ",":
            terms.append(s[start:i])
            start = i + 1
    terms.append(s[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """``(field, operator, raw value)`` at the leftmost operator; fields cannot contain escapes."""
    for i in range(len(term)):
        for op in _TERM_OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op) :]
    return None


def _unescape(value: str) -> str:
    """Resolve ``\\\\``, ``\\,`` and ``\\=``; bare ``,``/``=`` or other escapes are errors (fields/selector.go)."""
    if not (_ESCAPABLE & set(value)):
        return value
    out: list[str] = []
    escaped = False
    for c in value:
        if escaped:
            if c not in _ESCAPABLE:
                raise _ParseError(f"invalid field selector: invalid escape sequence: \\{c}")
            out.append(c)
            escaped = False
        elif c == "\\":
            escaped = True
        elif c in ",=":
            # Upstream prints the rune's code point here (%v of a rune); the character is clearer.
            raise _ParseError(f"invalid field selector: unescaped character in value: {c}")
        else:
            out.append(c)
    if escaped:
        raise _ParseError("invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _field_string(value: Any, default: str) -> str:
    """A JSON value as a field-set string: booleans as Go's FormatBool, non-scalars as missing."""
    if isinstance(value, str):
        return value
    if value is None:
        return default
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return default


@lru_cache(maxsize=512)
def _field_getter(field: str) -> Callable[[Mapping[str, Any]], str]:
    """A function reading ``field`` (dotted path) from an object, compiled once per field name."""
    fallbacks = _FIELD_FALLBACKS.get(field)
    if fallbacks is not None:
        getters = [_field_getter(f) for f in fallbacks]

        def first_set(obj: Mapping[str, Any]) -> str:
            for get in getters:
                if value := get(obj):
                    return value
            return ""

        return first_set

    parts = tuple(field.split("."))
    default = _FIELD_DEFAULTS.get(field, "")

    def get(obj: Mapping[str, Any]) -> str:
        cur: Any = obj
        for part in parts:
            if type(cur) is not dict and not isinstance(cur, Mapping):
                return default
            cur = cur.get(part)
            if cur is None:
                return default
        if type(cur) is str:  # the common case, without a call
            return cur
        return _field_string(cur, default)

    return get


class FieldSelector:
    """An immutable conjunction of ``field=value`` / ``field!=value`` terms; see the module docstring."""

    __slots__ = ("_checks", "_terms")

    _terms: tuple[tuple[str, str, str], ...]
    _checks: tuple[tuple[Callable[[Mapping[str, Any]], str], str, bool], ...]

    def __init__(self, terms: Iterable[tuple[str, str, str]] = ()) -> None:
        """``terms`` are trusted ``(field, "=" or "!=", value)`` triples; use :meth:`parse` for user input."""
        terms = tuple(terms)
        for _, op, _ in terms:
            if op not in (EQUALS, NOT_EQUALS):
                raise ValueError(f"unknown field selector operator {op!r}")
        object.__setattr__(self, "_terms", terms)
        object.__setattr__(self, "_checks", tuple((_field_getter(f), v, op == EQUALS) for f, op, v in terms))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    @classmethod
    def everything(cls) -> FieldSelector:
        return _ALL_FIELDS

    @classmethod
    def parse(cls, s: str, allowed: Iterable[str] = ()) -> FieldSelector:
        """Parse ``s`` (upstream ``fields.ParseSelector``); 400 BadRequest on bad syntax or fields.

        ``metadata.name`` and ``metadata.namespace`` are always selectable; any
        other field must be listed in ``allowed`` (a kind's ``selectable_fields``).
        """
        # Upstream sorts the raw terms before parsing, which fixes String()'s order too.
        parts = sorted(_split_terms(s)) if s else []
        terms: list[tuple[str, str, str]] = []
        try:
            for part in parts:
                if not part:
                    continue
                split = _split_term(part)
                if split is None:
                    raise _ParseError(f"invalid selector: '{s}'; can't understand '{part}'")
                field, op, raw = split
                terms.append((field, NOT_EQUALS if op == NOT_EQUALS else EQUALS, _unescape(raw)))
        except _ParseError as e:
            raise errors.bad_request(str(e)) from None
        if terms:
            # The label conversion of runtime/conversion.go (DefaultMetaV1FieldSelectorConversion),
            # extended with the kind's selectable fields as CRD selectableFields are.
            known = dict.fromkeys((*_ALWAYS_SELECTABLE, *allowed))
            for field, _, _ in terms:
                if field not in known:
                    only = ", ".join(f'"{f}"' for f in known)
                    raise errors.bad_request(f'"{field}" is not a known field selector: only {only}')
        return cls(terms) if terms else _ALL_FIELDS

    def matches(self, obj: Mapping[str, Any]) -> bool:
        """True when every term holds for ``obj`` (Kubernetes JSON shape; a missing field reads as "")."""
        # A plain loop, not all(<generator>): this is the per-object hot path and the
        # generator frame costs more than the one or two checks it would run.
        for get, value, equal in self._checks:  # noqa: SIM110
            if (get(obj) == value) is not equal:
                return False
        return True

    @property
    def empty(self) -> bool:
        return not self._terms

    @property
    def requirements(self) -> tuple[tuple[str, str, str], ...]:
        """``(field, operator, value)`` in upstream order; operator is ``"="`` or ``"!="``."""
        return self._terms

    def exact(self, field: str) -> str | None:
        """The value ``field`` must equal (upstream ``RequiresExactMatch``), else None."""
        for f, op, value in self._terms:
            if f == field and op == EQUALS:
                return value
        return None

    def __str__(self) -> str:
        return ",".join(f"{f}{op}{_escape(v)}" for f, op, v in self._terms)

    def __repr__(self) -> str:
        return f"FieldSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldSelector):
            return NotImplemented
        return self._terms == other._terms

    def __hash__(self) -> int:
        return hash(self._terms)

    def __reduce__(self) -> tuple[Any, ...]:
        # Getter closures cannot be pickled; rebuild them from the terms instead.
        return (FieldSelector, (self._terms,))


_ALL_FIELDS: Final = FieldSelector()


@lru_cache(maxsize=1024)
def parse_field_selector(s: str, allowed: tuple[str, ...] = ()) -> FieldSelector:
    """Memoised :meth:`FieldSelector.parse`; ``allowed`` is a tuple so it can be a cache key."""
    return FieldSelector.parse(s, allowed)
