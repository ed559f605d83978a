"""Label selectors: the ``labelSelector`` query string and ``metav1.LabelSelector``, upstream semantics.

Upstream ``k8s.io/apimachinery/pkg/labels`` (``selector.go``: lexer, parser,
Requirement, Matches, String), ``pkg/selection/operator.go`` (operator
spellings), ``apis/meta/v1/helpers.go`` (LabelSelectorAsSelector) and
``apis/meta/v1/validation/validation.go`` (ValidateLabelSelector), with label
key/value checks from ``util/validation/validation.go``.

:class:`LabelSelector` covers the query string of list/watch
(``app=web,tier in (a,b),!canary``) and the object shape (``matchLabels`` /
``matchExpressions``) of workload specs, affinity terms and
PodDisruptionBudgets. Parsing reproduces upstream's error texts (a client sees
the same 400 a real API server gives); matching is the hot path, so a selector
is compiled at construction: every exact ``key=value`` requirement collapses
into one ``frozenset`` tested with a single ``dict.items() >= set``, the other
operators become ``(opcode, key, arg)`` triples walked by one loop. Instances
are immutable and shared freely; :func:`parse_label_selector` memoises parsing.
``requirements`` and ``exact()`` expose the terms so the store can serve
``app=web`` from an index.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any, Final

from emulator.api import errors
from emulator.api.errors import render_value

__all__ = [
    "DOES_NOT_EXIST",
    "DOUBLE_EQUALS",
    "EQUALS",
    "EXISTS",
    "GREATER_THAN",
    "IN",
    "LESS_THAN",
    "NOT_EQUALS",
    "NOT_IN",
    "LabelSelector",
    "Requirement",
    "parse_int64",
    "parse_label_selector",
]

# --------------------------------------------------------------------------- operators
# The spellings of upstream ``selection.Operator`` (pkg/selection/operator.go), so
# ``requirements`` reads the same as ``Requirement.Operator()`` does in Go.
IN: Final = "in"
NOT_IN: Final = "notin"
EQUALS: Final = "="
DOUBLE_EQUALS: Final = "=="
NOT_EQUALS: Final = "!="
EXISTS: Final = "exists"
DOES_NOT_EXIST: Final = "!"
GREATER_THAN: Final = "gt"
LESS_THAN: Final = "lt"

# Listed in upstream's order: it is part of the "expected: ..." parse error text.
_BINARY_OPERATORS: Final = (IN, NOT_IN, EQUALS, DOUBLE_EQUALS, NOT_EQUALS, GREATER_THAN, LESS_THAN)

Requirement = tuple[str, str, tuple[str, ...]]
"""One label requirement: ``(key, operator, values)``; ``values`` is empty for exists/!."""

# Label key/value formats (IsQualifiedName, IsValidLabelValue) with upstream's messages.
from emulator.api.names import label_value_errors as _label_value_errors  # noqa: E402
from emulator.api.names import qualified_name_errors as _label_key_errors  # noqa: E402

# strconv.ParseInt(s, 10, 64) accepts an optional sign and ASCII digits only; Python's
# int() would also take "1_000" and surrounding blanks, which upstream rejects.
_INT_RE: Final = re.compile(r"[+-]?[0-9]+")
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1


def _field_invalid(path: str, value: Any, detail: str) -> str:
    """The text of an upstream ``field.Invalid`` error (util/validation/field/errors.go)."""
    return f"{path}: Invalid value: {render_value(value)}: {detail}"


def _aggregate(messages: list[str]) -> str:
    """Upstream ``utilerrors.NewAggregate(...).Error()``: one message bare, several bracketed, deduplicated."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


def parse_int64(s: str) -> int | None:
    """``strconv.ParseInt(s, 10, 64)``: the integer, or None when upstream would return an error."""
    if not _INT_RE.fullmatch(s):
        return None
    n = int(s)
    return n if _INT64_MIN <= n <= _INT64_MAX else None


# --------------------------------------------------------------------------- lexer
# Token kinds of labels/selector.go. ``in``/``notin`` are keywords only where an
# operator is expected; anywhere else they are ordinary identifiers (upstream's
# "Values" parser context), so ``in in (in)`` is a valid selector.
_T_EOS, _T_IDENT, _T_IN, _T_NOTIN, _T_BANG, _T_EQ, _T_DEQ, _T_NEQ, _T_GT, _T_LT, _T_LPAREN, _T_RPAREN, _T_COMMA = (
    range(13)
)
_WHITESPACE: Final = frozenset(" \t\r\n")
_SPECIAL: Final = frozenset("=!(),><")
_SYMBOLS: Final = {
    "==": _T_DEQ, "!=": _T_NEQ, "=": _T_EQ, "!": _T_BANG, ">": _T_GT, "<": _T_LT,
    "(": _T_LPAREN, ")": _T_RPAREN, ",": _T_COMMA,
}
_STOP: Final = _WHITESPACE | _SPECIAL


def _tokenize(s: str) -> list[tuple[int, str]]:
    """Split ``s`` into ``(kind, literal)`` tokens ending with an end-of-string token.

    Operators are matched greedily but never longer than two characters, as
    upstream's ``scanSpecialSymbol`` does: ``!==`` is ``!=`` then ``=``.
    """
    out: list[tuple[int, str]] = []
    i, n = 0, len(s)
    while True:
        while i < n and s[i] in _WHITESPACE:
            i += 1
        if i >= n:
            out.append((_T_EOS, ""))
            return out
        c = s[i]
        if c in _SPECIAL:
            two = s[i : i + 2]
            if two in ("==", "!="):
                out.append((_SYMBOLS[two], two))
                i += 2
            else:
                out.append((_SYMBOLS[c], c))
                i += 1
            continue
        j = i + 1
        while j < n and s[j] not in _STOP:
            j += 1
        word = s[i:j]
        out.append((_T_IN if word == "in" else _T_NOTIN if word == "notin" else _T_IDENT, word))
        i = j


class _ParseError(Exception):
    """Internal: carries upstream's message up to the public ``parse`` methods, which turn it into a 400."""


class _Parser:
    """Recursive descent over the grammar documented at upstream ``labels.Parse``."""

    __slots__ = ("pos", "tokens")

    def __init__(self, text: str) -> None:
        self.tokens = _tokenize(text)
        self.pos = 0

    def _at(self, pos: int, keywords: bool) -> tuple[int, str]:
        kind, lit = self.tokens[min(pos, len(self.tokens) - 1)]
        if not keywords and kind in (_T_IN, _T_NOTIN):
            kind = _T_IDENT
        return kind, lit

    def peek(self) -> tuple[int, str]:
        return self._at(self.pos, keywords=False)

    def take(self, keywords: bool = False) -> tuple[int, str]:
        tok = self._at(self.pos, keywords)
        self.pos += 1
        return tok

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            kind, lit = self.peek()
            if kind == _T_EOS:
                return reqs
            if kind not in (_T_IDENT, _T_BANG):
                raise _ParseError(f"found '{lit}', expected: !, identifier, or 'end of string'")
            try:
                reqs.append(self.requirement())
            except _ParseError as e:
                raise _ParseError(f"unable to parse requirement: {e}") from None
            kind, lit = self.take()
            if kind == _T_EOS:
                return reqs
            if kind != _T_COMMA:
                raise _ParseError(f"found '{lit}', expected: ',' or 'end of string'")
            kind, lit = self.peek()
            if kind not in (_T_IDENT, _T_BANG):
                raise _ParseError(f"found '{lit}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        kind, key = self.take()
        op = ""
        if kind == _T_BANG:
            op = DOES_NOT_EXIST
            kind, key = self.take()
        if kind != _T_IDENT:
            raise _ParseError(f"found '{key}', expected: identifier")
        if errs := _label_key_errors(key):
            # Upstream validates with a nil field path here, hence the literal "<nil>".
            raise _ParseError(_field_invalid("<nil>", key, "; ".join(errs)))
        if op == DOES_NOT_EXIST:
            # "!key" is complete; anything after it is the caller's "expected ','" error.
            return _checked(key, op, ())
        if self.peek()[0] in (_T_EOS, _T_COMMA):
            return _checked(key, EXISTS, ())
        kind, lit = self.take(keywords=True)
        op = {_T_IN: IN, _T_NOTIN: NOT_IN, _T_EQ: EQUALS, _T_DEQ: DOUBLE_EQUALS, _T_NEQ: NOT_EQUALS,
              _T_GT: GREATER_THAN, _T_LT: LESS_THAN}.get(kind, "")
        if not op:
            raise _ParseError(f"found '{lit}', expected: {', '.join(_BINARY_OPERATORS)}")
        values = self.value_set() if op in (IN, NOT_IN) else self.exact_value()
        # Upstream collects values in a string set: deduplicated and sorted.
        return _checked(key, op, tuple(sorted(values)))

    def value_set(self) -> set[str]:
        kind, lit = self.take()
        if kind != _T_LPAREN:
            raise _ParseError(f"found '{lit}' expected: '('")
        kind, lit = self.peek()
        if kind == _T_RPAREN:  # "()" is the set holding only the empty value
            self.take()
            return {""}
        if kind not in (_T_IDENT, _T_COMMA):
            raise _ParseError(f"found '{lit}', expected: ',', ')' or identifier")
        values: set[str] = set()
        while True:
            kind, lit = self.take()
            if kind == _T_IDENT:
                values.add(lit)
                nxt, nlit = self.peek()
                if nxt == _T_RPAREN:
                    break
                if nxt != _T_COMMA:
                    raise _ParseError(f"found '{nlit}', expected: ',' or ')'")
            elif kind == _T_COMMA:
                # Empty slots around commas ("(,a", "a,,b", "a,)") stand for the empty value.
                if not values:
                    values.add("")
                nxt = self.peek()[0]
                if nxt == _T_RPAREN:
                    values.add("")
                    break
                if nxt == _T_COMMA:
                    self.take()
                    values.add("")
            else:
                raise _ParseError(f"found '{lit}', expected: ',', or identifier")
        self.take()  # the ")" seen above
        return values

    def exact_value(self) -> set[str]:
        if self.peek()[0] in (_T_EOS, _T_COMMA):  # "a=" selects the empty value
            return {""}
        kind, lit = self.take()
        if kind != _T_IDENT:
            raise _ParseError(f"found '{lit}', expected: identifier")
        return {lit}


def _checked(key: str, op: str, values: tuple[str, ...]) -> Requirement:
    """Upstream ``NewRequirement`` checks of a parsed requirement (field paths as with a nil root)."""
    problems = []
    if errs := _label_key_errors(key):
        problems.append(_field_invalid("key", key, "; ".join(errs)))
    if op in (GREATER_THAN, LESS_THAN):
        for i, v in enumerate(values):
            if parse_int64(v) is None:
                detail = "for 'Gt', 'Lt' operators, the value must be an integer"
                problems.append(_field_invalid(f"values[{i}]", v, detail))
    for i, v in enumerate(values):
        if errs := _label_value_errors(v):
            problems.append(_field_invalid(f"values[{i}][{key}]", v, "; ".join(errs)))
    if problems:
        raise _ParseError(_aggregate(problems))
    return (key, op, values)


# --------------------------------------------------------------------------- LabelSelector
# Opcodes of the compiled non-equality checks; checks run in this order (plain
# membership tests first, integer parsing last).
_OP_EXISTS, _OP_ABSENT, _OP_IN, _OP_NOT_EQ, _OP_NOT_IN, _OP_GT, _OP_LT = range(7)
_NO_LABELS: Final[Mapping[str, str]] = {}

# metav1.LabelSelectorOperator -> selection.Operator (apis/meta/v1/helpers.go).
_EXPRESSION_OPERATORS: Final = {"In": IN, "NotIn": NOT_IN, "Exists": EXISTS, "DoesNotExist": DOES_NOT_EXIST}


def _requirement_str(key: str, op: str, values: tuple[str, ...]) -> str:
    """One requirement in upstream ``Requirement.String`` form; set values print sorted."""
    if op == EXISTS:
        return key
    if op == DOES_NOT_EXIST:
        return "!" + key
    if op in (IN, NOT_IN):
        return f"{key} {op} ({','.join(sorted(values))})"
    symbol = {GREATER_THAN: ">", LESS_THAN: "<"}.get(op, op)
    return f"{key}{symbol}{values[0] if values else ''}"


def _join_path(path: str, child: str) -> str:
    return f"{path}.{child}" if path else child


class LabelSelector:
    """An immutable conjunction of label requirements; see the module docstring.

    Build one with :meth:`parse` (query-string syntax), :meth:`from_dict`
    (``metav1.LabelSelector`` shape), :meth:`from_set` (a plain ``key: value``
    map such as a Service's ``spec.selector``), :meth:`everything` or
    :meth:`nothing`. The constructor trusts its input and does not validate it.
    """

    __slots__ = ("_eq", "_nothing", "_reqs", "_rest", "_str")

    _eq: frozenset[tuple[str, str]]
    _nothing: bool
    _reqs: tuple[Requirement, ...]
    _rest: tuple[tuple[int, str, Any], ...]
    _str: str | None

    def __init__(self, requirements: Iterable[Requirement] = (), *, nothing: bool = False) -> None:
        # Sorted by key for a deterministic String() (upstream sorts ByKey); stable, so
        # several requirements on one key keep their given order.
        reqs = tuple(sorted(((k, op, tuple(v)) for k, op, v in requirements), key=lambda r: r[0]))
        eq: set[tuple[str, str]] = set()
        rest: list[tuple[int, str, Any]] = []
        for key, op, values in reqs:
            if op in (EQUALS, DOUBLE_EQUALS) or (op == IN and len(values) == 1):
                eq.add((key, values[0]))
            elif op == IN:
                rest.append((_OP_IN, key, frozenset(values)))
            elif op == EXISTS:
                rest.append((_OP_EXISTS, key, None))
            elif op == DOES_NOT_EXIST:
                rest.append((_OP_ABSENT, key, None))
            elif op == NOT_EQUALS:
                rest.append((_OP_NOT_EQ, key, values[0]))
            elif op == NOT_IN:
                rest.append((_OP_NOT_IN, key, frozenset(values)))
            elif op in (GREATER_THAN, LESS_THAN):
                # A malformed bound (only reachable through this trusted constructor)
                # stays None and never matches, as in upstream Requirement.Matches.
                bound = parse_int64(values[0]) if len(values) == 1 else None
                rest.append((_OP_GT if op == GREATER_THAN else _OP_LT, key, bound))
            else:
                raise ValueError(f"unknown label selector operator {op!r}")
        rest.sort(key=lambda c: c[0])  # stable: key order within one opcode
        setter = object.__setattr__
        setter(self, "_reqs", reqs)
        setter(self, "_eq", frozenset(eq))
        setter(self, "_rest", tuple(rest))
        setter(self, "_nothing", nothing)
        setter(self, "_str", None)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    # ---------------------------------------------------------------- constructors
    @classmethod
    def everything(cls) -> LabelSelector:
        """Match every label set (upstream ``labels.Everything``)."""
        return _EVERYTHING

    @classmethod
    def nothing(cls) -> LabelSelector:
        """Match no label set (upstream ``labels.Nothing``); it is not ``empty``."""
        return _NOTHING

    @classmethod
    def parse(cls, s: str) -> LabelSelector:
        """Parse the query-string syntax (upstream ``labels.Parse``); 400 BadRequest on bad input."""
        try:
            reqs = _Parser(s).parse()
        except _ParseError as e:
            raise errors.bad_request(str(e)) from None
        return cls(reqs) if reqs else _EVERYTHING

    @classmethod
    def from_set(cls, labels: Mapping[str, str] | None) -> LabelSelector:
        """Exactly these labels, unvalidated (upstream ``SelectorFromValidatedSet``); None/{} = everything."""
        if not labels:
            return _EVERYTHING
        return cls((k, EQUALS, (v,)) for k, v in labels.items())

    @classmethod
    def from_dict(cls, sel: Mapping[str, Any] | None, path: str = "") -> LabelSelector:
        """Convert a ``metav1.LabelSelector`` (upstream ``LabelSelectorAsSelector``).

        ``None`` matches nothing and ``{}`` (no matchLabels, no matchExpressions)
        matches everything, exactly as upstream. Problems are collected the way
        upstream ``ValidateLabelSelector`` reports them, with field paths under
        ``path`` (e.g. ``spec.selector``), and raised together as one 422 Invalid.
        """
        if sel is None:
            return _NOTHING
        causes: list[errors.Cause] = []

        def invalid(field: str, value: Any, detail: str) -> None:
            causes.append(errors.Cause(field, f"Invalid value: {render_value(value)}: {detail}"))

        if not isinstance(sel, Mapping):
            invalid(path, sel, "must be an object")
            raise errors.invalid("LabelSelector", "", causes)
        match_labels = sel.get("matchLabels") or {}
        expressions = sel.get("matchExpressions") or []
        reqs: list[Requirement] = []

        labels_path = _join_path(path, "matchLabels")
        if not isinstance(match_labels, Mapping):
            invalid(labels_path, match_labels, "must be an object")
            match_labels = {}
        for key, value in match_labels.items():
            # validation.go ValidateLabels reports key and value problems on the map's own path.
            for msg in _label_key_errors(key):
                invalid(labels_path, key, msg)
            if not isinstance(value, str):
                invalid(labels_path, value, "must be a string")
                continue
            for msg in _label_value_errors(value):
                invalid(labels_path, value, msg)
            reqs.append((key, EQUALS, (value,)))

        exprs_path = _join_path(path, "matchExpressions")
        if not isinstance(expressions, list):
            invalid(exprs_path, expressions, "must be a list")
            expressions = []
        for i, expr in enumerate(expressions):
            expr_path = f"{exprs_path}[{i}]"
            if not isinstance(expr, Mapping):
                invalid(expr_path, expr, "must be an object")
                continue
            req = _expression_requirement(expr, expr_path, causes)
            if req is not None:
                reqs.append(req)

        if causes:
            raise errors.invalid("LabelSelector", "", causes)
        return cls(reqs) if reqs else _EVERYTHING

    # ---------------------------------------------------------------- queries
    def matches(self, labels: Mapping[str, str] | None) -> bool:
        """True when every requirement holds for ``labels`` (None is the empty label set)."""
        if self._nothing:
            return False
        if labels is None:
            labels = _NO_LABELS
        # One C-level subset test covers every exact requirement.
        if self._eq and not labels.items() >= self._eq:
            return False
        for op, key, arg in self._rest:
            if op == _OP_IN:
                if labels.get(key) not in arg:
                    return False
            elif op == _OP_EXISTS:
                if key not in labels:
                    return False
            elif op == _OP_ABSENT:
                if key in labels:
                    return False
            elif op == _OP_NOT_EQ:
                # A missing key satisfies != and notin (upstream Requirement.Matches):
                # get() gives None, which equals no string.
                if labels.get(key) == arg:
                    return False
            elif op == _OP_NOT_IN:
                if labels.get(key) in arg:
                    return False
            else:
                value = labels.get(key)
                n = parse_int64(value) if value is not None else None
                if n is None or arg is None or not (n > arg if op == _OP_GT else n < arg):
                    return False
        return True

    @property
    def empty(self) -> bool:
        """True when the selector does not restrict anything (``nothing()`` is not empty)."""
        return not self._reqs and not self._nothing

    @property
    def requirements(self) -> tuple[Requirement, ...]:
        """``(key, operator, values)`` sorted by key; operators are this module's constants."""
        return self._reqs

    def exact(self, key: str) -> str | None:
        """The one value ``key`` must have (``key=v``, ``key==v`` or ``key in (v)``), else None.

        Lets a store answer the selector from a ``key=value`` index.
        """
        for k, op, values in self._reqs:
            if k == key and len(values) == 1 and op in (EQUALS, DOUBLE_EQUALS, IN):
                return values[0]
        return None

    def __str__(self) -> str:
        s = self._str
        if s is None:
            s = ",".join(_requirement_str(*r) for r in self._reqs)
            object.__setattr__(self, "_str", s)
        return s

    def __repr__(self) -> str:
        return "LabelSelector.nothing()" if self._nothing else f"LabelSelector({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, LabelSelector):
            return NotImplemented
        return self._nothing == other._nothing and self._reqs == other._reqs

    def __hash__(self) -> int:
        return hash((self._nothing, self._reqs))

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuild from the requirements: the default slot-state protocol would go
        # through the blocked __setattr__, and compiled checks need not travel.
        return (_rebuild_label_selector, (self._reqs, self._nothing))


def _rebuild_label_selector(reqs: tuple[Requirement, ...], nothing: bool) -> LabelSelector:
    return LabelSelector(reqs, nothing=nothing)


def _expression_requirement(expr: Mapping[str, Any], path: str, causes: list[errors.Cause]) -> Requirement | None:
    """Validate one ``matchExpressions`` entry (upstream ValidateLabelSelectorRequirement)."""
    before = len(causes)
    key = expr.get("key") or ""
    operator = expr.get("operator") or ""
    values = expr.get("values") or []
    op = _EXPRESSION_OPERATORS.get(operator) if isinstance(operator, str) else None
    if not isinstance(values, list):
        causes.append(errors.Cause(f"{path}.values", f"Invalid value: {render_value(values)}: must be a list"))
        values = []
    if op in (IN, NOT_IN):
        if not values:
            causes.append(errors.Cause(f"{path}.values", "Required value: must be specified when `operator` is "
                                       "'In' or 'NotIn'", "FieldValueRequired"))
    elif op in (EXISTS, DOES_NOT_EXIST):
        if values:
            causes.append(errors.Cause(f"{path}.values", "Forbidden: may not be specified when `operator` is "
                                       "'Exists' or 'DoesNotExist'", "FieldValueForbidden"))
    else:
        causes.append(errors.Cause(f"{path}.operator",
                                   f"Invalid value: {render_value(operator)}: not a valid selector operator"))
    if not isinstance(key, str):
        causes.append(errors.Cause(f"{path}.key", f"Invalid value: {render_value(key)}: must be a string"))
    else:
        for msg in _label_key_errors(key):
            causes.append(errors.Cause(f"{path}.key", f"Invalid value: {render_value(key)}: {msg}"))
    # Values must be label values too (NewRequirement, called by LabelSelectorAsSelector).
    for j, v in enumerate(values):
        if not isinstance(v, str):
            causes.append(errors.Cause(f"{path}.values[{j}]", f"Invalid value: {render_value(v)}: must be a string"))
            continue
        for msg in _label_value_errors(v):
            causes.append(errors.Cause(f"{path}.values[{j}]", f"Invalid value: {render_value(v)}: {msg}"))
    if len(causes) != before or op is None:
        return None
    return (key, op, tuple(values))


_EVERYTHING: Final = LabelSelector()
_NOTHING: Final = LabelSelector(nothing=True)


@lru_cache(maxsize=1024)
def parse_label_selector(s: str) -> LabelSelector:
    """Memoised :meth:`LabelSelector.parse` (selectors are immutable, so sharing is safe)."""
    return LabelSelector.parse(s)
