"""``advanced.scalingModifiers.formula``: KEDA's composite-metric expressions (kedacore/keda ``pkg/scaling/modifiers``).

Upstream compiles the formula with expr-lang (``github.com/expr-lang/expr``) against the
ScaledObject's named triggers (``apis/keda/v1alpha1/scaledobject_webhook.go``
``validateScalingModifiersFormula``: every name must be a trigger's ``name``; cpu/memory
triggers are left out) and evaluates it each poll over the trigger values
(``modifiers/formula.go calculateScalingModifiersFormula``), the result read as a float.

This is a small, safe evaluator of the subset of expr-lang such formulas use — nothing is
passed to Python's ``eval``: numbers, ``true`` / ``false`` / ``nil``, trigger names,
parentheses, unary ``-`` ``+`` ``!`` ``not``, ``**`` / ``^`` (right-associative), ``*`` ``/``
``%``, ``+`` ``-``, comparisons ``== != < <= > >=``, ``&&`` / ``and``, ``||`` / ``or``, ``??``
(the right side when the left is nil: a failed trigger reads nil) and the ternary ``c ? a : b``,
plus the functions ``min``, ``max``, ``abs``, ``ceil``, ``floor``, ``round``, ``float``, ``int``.
:func:`compile_formula` parses once and checks the names (an unknown name is an error, as
expr's ``unknown name x``); the returned :class:`Formula` evaluates over a name -> value map.
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Formula", "FormulaError", "compile_formula"]

Value = float | bool | None
Node = Callable[[Mapping[str, Value]], Value]


class FormulaError(ValueError):
    """The formula does not parse, names an unknown trigger, or cannot be evaluated."""


_TOKEN = re.compile(r"\s*(?:(\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|([A-Za-z_][A-Za-z0-9_]*)|"
                    r"(\*\*|\?\?|&&|\|\||==|!=|<=|>=|[-+*/%^()<>!?:,]))")
_KEYWORDS = {"true": True, "false": False, "nil": None}


def _num(value: Value, what: str) -> float:
    if value is None or isinstance(value, bool):
        raise FormulaError(f"invalid operation: {what} on {'nil' if value is None else 'bool'}")
    return float(value)


def _div(a: float, b: float) -> float:
    if b == 0:
        return math.copysign(math.inf, a) if a else math.nan  # expr divides as Go floats: ±Inf / NaN
    return a / b


_ARITH: dict[str, Callable[[float, float], float]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": _div, "%": math.fmod,
    "**": operator.pow, "^": operator.pow}
_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_FUNCTIONS: dict[str, tuple[int, Callable[..., float]]] = {  # name -> (min arguments, function)
    "min": (1, min), "max": (1, max), "abs": (1, abs), "ceil": (1, math.ceil), "floor": (1, math.floor),
    "round": (1, lambda x: math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)),  # Go's math.Round
    "float": (1, float), "int": (1, lambda x: float(math.trunc(x)))}
_ONE_ARG = {"abs", "ceil", "floor", "round", "float", "int"}


# Node builders: each closes over its operands (the compiled tree is closures, evaluated per poll).
def _coalesce(a: Node, b: Node) -> Node:
    return lambda env: v if (v := a(env)) is not None else b(env)


def _or(a: Node, b: Node) -> Node:
    return lambda env: bool(a(env)) or bool(b(env))


def _and(a: Node, b: Node) -> Node:
    return lambda env: bool(a(env)) and bool(b(env))


def _compare(op: Callable[[Any, Any], bool], a: Node, b: Node) -> Node:
    return lambda env: op(a(env), b(env))


def _arith(symbol: str, a: Node, b: Node) -> Node:
    fn = _ARITH[symbol]
    return lambda env: fn(_num(a(env), symbol), _num(b(env), symbol))


def _tokens(text: str) -> list[str]:
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            raise FormulaError(f"unexpected character {text[pos:].lstrip()[:1]!r} at {pos + 1}")
        out.append(m.group(0).strip())
        pos = m.end()
    return out


class _Parser:
    """Recursive descent, lowest precedence first: ternary, ??, or, and, comparison, + -, * / %, unary, power."""

    def __init__(self, text: str, names: Collection[str]) -> None:
        self.tokens = _tokens(text)
        self.i = 0
        self.names = names
        self.used: set[str] = set()

    def peek(self) -> str:
        return self.tokens[self.i] if self.i < len(self.tokens) else ""

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if not token or (expected is not None and token != expected):
            raise FormulaError(f"expected {expected or 'more'}, got {token or 'end of formula'!r}")
        self.i += 1
        return token

    def parse(self) -> Node:
        node = self.ternary()
        if self.peek():
            raise FormulaError(f"unexpected token {self.peek()!r}")
        return node

    def ternary(self) -> Node:
        cond = self.coalesce()
        if self.peek() != "?":
            return cond
        self.take("?")
        then = self.ternary()
        self.take(":")
        other = self.ternary()
        return lambda env: then(env) if cond(env) else other(env)

    def _left(self, ops: Collection[str], operand: Callable[[], Node], make: Callable[[str, Node, Node], Node]
              ) -> Node:
        """A left-associative chain of ``operand`` s joined by ``ops``."""
        left = operand()
        while self.peek() in ops:
            symbol = self.take()
            left = make(symbol, left, operand())
        return left

    def coalesce(self) -> Node:
        return self._left(("??",), self.logical_or, lambda _s, a, b: _coalesce(a, b))

    def logical_or(self) -> Node:
        return self._left(("||", "or"), self.logical_and, lambda _s, a, b: _or(a, b))

    def logical_and(self) -> Node:
        return self._left(("&&", "and"), self.comparison, lambda _s, a, b: _and(a, b))

    def comparison(self) -> Node:
        return self._left(_COMPARE, self.additive, lambda s, a, b: _compare(_COMPARE[s], a, b))

    def additive(self) -> Node:
        return self._left(("+", "-"), self.multiplicative, _arith)

    def multiplicative(self) -> Node:
        return self._left(("*", "/", "%"), self.unary, _arith)

    def unary(self) -> Node:
        token = self.peek()
        if token in ("-", "+"):
            self.take()
            inner = self.unary()
            sign = -1.0 if token == "-" else 1.0
            return lambda env: sign * _num(inner(env), token)
        if token in ("!", "not"):
            self.take()
            inner = self.unary()
            return lambda env: not inner(env)
        return self.power()

    def power(self) -> Node:
        base = self.primary()
        if self.peek() in ("**", "^"):
            symbol = self.take()
            return _arith(symbol, base, self.unary())  # right-associative
        return base

    def primary(self) -> Node:
        token = self.take()
        if token == "(":
            node = self.ternary()
            self.take(")")
            return node
        if token[0].isdigit() or token[0] == ".":
            number = float(token)
            return lambda _env: number
        if token in _KEYWORDS:
            constant = _KEYWORDS[token]
            return lambda _env: constant
        if re.fullmatch(r"[A-Za-z_]\w*", token):
            if self.peek() == "(":
                return self.call(token)
            if token not in self.names:
                raise FormulaError(f"unknown name {token}")
            self.used.add(token)
            return lambda env: env.get(token)
        raise FormulaError(f"unexpected token {token!r}")

    def call(self, name: str) -> Node:
        if name not in _FUNCTIONS:
            raise FormulaError(f"unknown func {name}")
        self.take("(")
        args: list[Node] = []
        while self.peek() != ")":
            args.append(self.ternary())
            if self.peek() != ")":
                self.take(",")
        self.take(")")
        least, fn = _FUNCTIONS[name]
        if len(args) < least or (name in _ONE_ARG and len(args) != 1):
            raise FormulaError(f"invalid number of arguments for {name} (got {len(args)})")
        return lambda env: float(fn(*(_num(a(env), name) for a in args)))


@dataclass(frozen=True)
class Formula:
    """A compiled formula: :meth:`evaluate` over trigger values (None: the trigger has no value)."""

    text: str
    names: frozenset[str]
    _root: Node

    def evaluate(self, values: Mapping[str, Value]) -> float | None:
        """The formula's value as a float (``castToFloatIfNecessary``), None when it evaluates to nil."""
        try:
            result = self._root(values)
        except (ArithmeticError, TypeError) as e:
            raise FormulaError(f"error trying to run custom formula: {e}") from None
        if result is None:
            return None
        return float(result)


def compile_formula(text: str, names: Collection[str]) -> Formula:
    """Parse ``text`` against the trigger ``names`` it may use; a :class:`FormulaError` says what is wrong."""
    if not text.strip():
        raise FormulaError("error ScalingModifiers.Formula is mandatory")
    parser = _Parser(text, names)
    root = parser.parse()
    return Formula(text, frozenset(parser.used), root)
