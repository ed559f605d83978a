"""``advanced.scalingModifiers.formula``: the expr-lang subset KEDA formulas use, over trigger values.

Expected values are worked out by hand from expr-lang's rules (``github.com/expr-lang/expr``):
``/`` divides as floats, ``**`` / ``^`` is right-associative, ``??`` takes the right side when the
left is nil, ``c ? a : b``; the result is read as a float (``castToFloatIfNecessary``). Names must be
the ScaledObject's trigger names (``scaledobject_webhook.go validateScalingModifiersFormula``).
"""

from __future__ import annotations

import math

import pytest

from emulator.keda.formula import FormulaError, compile_formula

NAMES = ("queue", "rps", "lag", "spare")
VALUES = {"queue": 40.0, "rps": 10.0, "lag": 3.0, "spare": None}


@pytest.mark.parametrize(("formula", "expected"), [
    ("queue + rps", 40 + 10),
    ("(queue + rps) / 2", (40 + 10) / 2),
    ("queue / rps * lag", 40 / 10 * 3),
    ("queue - rps - lag", (40 - 10) - 3),
    ("2 ** 3 ** 2", 2 ** (3 ** 2)),
    ("lag ^ 2", 3 ** 2),
    ("-lag + 1", -3 + 1),
    ("queue % 7", 40 % 7),
    ("rps > 5 ? queue : 0", 40),
    ("rps > 50 ? queue : lag", 3),
    ("rps > 5 && lag < 2 ? 1 : 2", 2),
    ("rps > 5 || lag < 2 ? 1 : 2", 1),
    ("not (rps == 10) ? 1 : 0", 0),
    ("spare ?? queue", 40),
    ("queue ?? rps", 40),
    ("max(queue, rps, lag)", 40),
    ("min(queue, rps) + abs(-lag)", 10 + 3),
    ("ceil(queue / 3) + floor(2.7) + round(2.5)", math.ceil(40 / 3) + 2 + 3),
    ("int(7.9) + float(1)", 7 + 1),
    ("1.5e2 + .5", 150.5),
    ("true ? 1 : 0", 1),
], ids=["sum", "average", "left-assoc-mul-div", "left-assoc-sub", "power-right-assoc", "caret-power",
        "unary-minus", "modulo", "ternary-then", "ternary-else", "and", "or", "not", "coalesce-nil",
        "coalesce-value", "max", "min-abs", "ceil-floor-round", "int-float", "exponent-literal", "bool-literal"])
def test_formula_values(formula: str, expected: float) -> None:
    assert compile_formula(formula, NAMES).evaluate(VALUES) == pytest.approx(expected)


@pytest.mark.parametrize(("formula", "message"), [
    ("queue + other", "unknown name other"),
    ("queue +", "expected more, got 'end of formula'"),
    ("(queue + rps", "expected ), got 'end of formula'"),
    ("queue rps", "unexpected token 'rps'"),
    ("queue; rps", "unexpected character ';'"),
    ("__import__(queue)", "unknown func __import__"),
    ("open('x')", "unexpected character \"'\""),
    ("queue.real", "unexpected character '.'"),
    ("abs(queue, rps)", "invalid number of arguments for abs (got 2)"),
    ("   ", "error ScalingModifiers.Formula is mandatory"),
], ids=["unknown-trigger", "dangling-operator", "open-paren", "two-operands", "statement", "no-python-calls",
        "no-strings", "no-attributes", "arity", "empty"])
def test_formula_compile_errors(formula: str, message: str) -> None:
    with pytest.raises(FormulaError, match="^" + message.replace("(", r"\(").replace(")", r"\)")):
        compile_formula(formula, NAMES)


@pytest.mark.parametrize(("formula", "values", "expected"), [
    ("spare + 1", VALUES, FormulaError),  # arithmetic on a failed trigger's nil
    ("spare ?? nil", VALUES, None),  # nil: the composite metric falls back (fallback.replicas * target)
    ("queue / 0", VALUES, math.inf),  # Go float division
], ids=["nil-arithmetic", "nil-result", "divide-by-zero"])
def test_formula_nil_and_division(formula: str, values: dict[str, float | None], expected: object) -> None:
    compiled = compile_formula(formula, NAMES)
    if expected is FormulaError:
        with pytest.raises(FormulaError):
            compiled.evaluate(values)
    else:
        assert compiled.evaluate(values) == expected


def test_formula_records_the_names_it_uses() -> None:
    assert compile_formula("queue > 0 ? rps : lag", NAMES).names == {"queue", "rps", "lag"}
