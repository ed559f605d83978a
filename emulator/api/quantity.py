"""Kubernetes ``resource.Quantity`` semantics, in pure Python.

Every CPU, memory and extended-resource amount kemu handles is a quantity
string (``100m``, ``1.5Gi``, ``1e3``), so this module is on the hot path of
scheduling and accounting. It follows upstream
``k8s.io/apimachinery/pkg/api/resource`` (``quantity.go``, ``suffix.go``,
``amount.go``) closely enough that any string the kube-apiserver accepts parses
here to the same value and format, and prints the same way.

Design:

* A :class:`Quantity` holds an exact :class:`decimal.Decimal` (never a float)
  and the :class:`Format` its suffix had, the way upstream remembers whether a
  value was written ``DecimalSI`` (``1G``), ``BinarySI`` (``1Gi``) or
  ``DecimalExponent`` (``1e9``) and re-emits it in that style. Decimal rather
  than an integer count of nanos because upstream accepts exponents up to the
  int32 range (``1e2147483647``): Decimal keeps those as a coefficient and an
  exponent instead of materialising a two-billion-digit integer. All arithmetic
  goes through :data:`_EXACT`, a context wide enough that nothing rounds.
* Parsing follows upstream's scanner and both of its paths, because the paths
  differ in observable ways: only the "fast" int64 path keeps the input string
  as the cached ``String()`` (so ``"1.441"`` prints back as ``1.441`` while
  ``"1.5"`` prints ``1500m``), and only the slow path rejects a number with no
  digits (``"Gi"`` parses as zero, ``"Pi"`` does not). Parsed values are
  rounded away from zero to a multiple of 1n and ``BinarySI`` values are capped
  at 2^63-1, as upstream does.
* ``str(q)`` is upstream ``String()``, which is what an apiserver writes back
  (including the cached input string); :meth:`Quantity.canonical` is what
  ``String()`` yields once that cache is gone (``CanonicalizeBytes``). They
  differ only for the inputs listed in upstream issue #138165 and for spellings
  such as ``+1`` or ``1E3``.
* Equality, ordering and hashing are by value only, so ``1Gi == 1024Mi ==
  1073741824`` and the hash agrees with ``int``/``Decimal``/``Fraction``.
* Parsing strings is memoised with a bounded :func:`functools.lru_cache`;
  quantities are immutable, so sharing them is safe.

Two deliberate differences, in inputs no real manifest contains (overflow, and
exponents that make upstream hang), are listed in ``docs/architecture.md``.
"""

from __future__ import annotations

import decimal
import math
import re
from dataclasses import dataclass, field
from decimal import Decimal
from enum import StrEnum
from fractions import Fraction
from functools import lru_cache

__all__ = [
    "Format",
    "Quantity",
    "QuantityError",
    "cpu_millis",
    "format_bytes",
    "format_millis",
    "parse_quantity",
    "to_int",
]


class Format(StrEnum):
    """How a quantity is written; the values are upstream's ``Format`` strings."""

    DECIMAL_EXPONENT = "DecimalExponent"  # 12e6
    BINARY_SI = "BinarySI"  # 12Mi
    DECIMAL_SI = "DecimalSI"  # 12M


class QuantityError(ValueError):
    """A string (or number) is not a valid quantity.

    ``str(error)`` is upstream's own error text, so it can be passed through to
    API clients unchanged; the offending input is kept in :attr:`value`.
    """

    def __init__(self, message: str, value: object = None) -> None:
        super().__init__(message)
        self.value = value


# Upstream's error texts (quantity.go ErrFormatWrong / ErrNumeric / ErrSuffix).
_SPLIT_RE_STRING = "^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$"
_ERR_FORMAT = f"quantities must match the regular expression '{_SPLIT_RE_STRING}'"
_ERR_NUMERIC = "unable to parse numeric part of quantity"
_ERR_SUFFIX = "unable to parse quantity's suffix"

# One regex equivalent to upstream's hand-written scanner (parseQuantityString):
# sign, leading zeros (stripped before counting digits), integer digits, an
# optional "." with fraction digits, then suffix letters, an optional sign and
# digits that must reach the end of the string. Greedy matching reproduces the
# scanner's decisions; what the suffix means is checked afterwards.
_SCANNER = re.compile(r"([+-]?)(0*)([0-9]*)(?:\.([0-9]*))?([eEinumkKMGTP]*[-+]?[0-9]*)")

# suffix -> (base, exponent, format); suffix.go newSuffixer / fastLookup.
_SUFFIXES: dict[str, tuple[int, int, Format]] = {
    "": (10, 0, Format.DECIMAL_SI),
    "n": (10, -9, Format.DECIMAL_SI),
    "u": (10, -6, Format.DECIMAL_SI),
    "m": (10, -3, Format.DECIMAL_SI),
    "k": (10, 3, Format.DECIMAL_SI),
    "M": (10, 6, Format.DECIMAL_SI),
    "G": (10, 9, Format.DECIMAL_SI),
    "T": (10, 12, Format.DECIMAL_SI),
    "P": (10, 15, Format.DECIMAL_SI),
    "E": (10, 18, Format.DECIMAL_SI),
    "Ki": (2, 10, Format.BINARY_SI),
    "Mi": (2, 20, Format.BINARY_SI),
    "Gi": (2, 30, Format.BINARY_SI),
    "Ti": (2, 40, Format.BINARY_SI),
    "Pi": (2, 50, Format.BINARY_SI),
    "Ei": (2, 60, Format.BINARY_SI),
}
# base-10 exponent -> DecimalSI suffix, for printing.
_DECIMAL_SI_SUFFIX: dict[int, str] = {exp: s for s, (base, exp, _) in _SUFFIXES.items() if base == 10}
_BINARY_SI_SUFFIX: tuple[str, ...] = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")

# Wide enough that +, -, *, scaleb and quantize are exact: results are only as
# long as they need to be, and nothing is ever rounded to a precision.
_EXACT = decimal.Context(
    prec=decimal.MAX_PREC,
    Emax=decimal.MAX_EMAX,
    Emin=decimal.MIN_EMIN,
    rounding=decimal.ROUND_UP,
)
_ZERO = Decimal(0)
_NANO = Decimal("1e-9")
_MAX_INT64 = Decimal(2**63 - 1)  # upstream maxAllowed: the BinarySI parse cap
_NANO_SCALE = -9  # upstream Scale Nano: the finest scale a parse keeps
_INT64_LIMIT = 2**63
# Refuse to turn a quantity into an int with more digits than this: upstream
# would overflow int64 long before, and 10**2147483647 would exhaust memory.
_MAX_INT_DIGITS = 1000


def _wrap_int32(value: int) -> int:
    """Two's-complement int32 wrap-around, as Go's ``int32(x)`` conversion does."""
    return (value + 2**31) % 2**32 - 2**31


@dataclass(frozen=True, slots=True, eq=False)
class Quantity:
    """An exact, immutable Kubernetes quantity.

    ``amount`` is the exact value in base units (cores, bytes, counts). Build
    quantities with :func:`parse_quantity` / :meth:`parse`; constructing one
    directly (``Quantity(Decimal("0.5"))``) is for computed values.
    """

    amount: Decimal
    format: Format = Format.DECIMAL_SI
    # Upstream's cached String(): the input string when upstream's parser deems
    # it canonical, else filled lazily with canonical(). Not part of the value.
    _string: str | None = field(default=None, repr=False)
    _canonical: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        # Accept ints (and str formats) for convenience; everything downstream
        # relies on amount being a Decimal and format a Format.
        if type(self.amount) is not Decimal:
            if isinstance(self.amount, bool) or not isinstance(self.amount, int | Decimal):
                raise TypeError(f"Quantity amount must be an int or Decimal, not {type(self.amount).__name__}")
            object.__setattr__(self, "amount", Decimal(self.amount))
        if type(self.format) is not Format:
            object.__setattr__(self, "format", Format(self.format))

    # -- construction -----------------------------------------------------

    @classmethod
    def parse(cls, value: str | int | float | Quantity) -> Quantity:
        """Parse ``value`` the way the kube-apiserver decodes a quantity; see :func:`parse_quantity`."""
        return parse_quantity(value)

    @classmethod
    def from_millis(cls, millis: int, fmt: Format = Format.DECIMAL_SI) -> Quantity:
        """``millis`` thousandths of a unit (upstream ``NewMilliQuantity``)."""
        return cls(Decimal(millis).scaleb(-3, _EXACT), fmt)

    # -- value accessors -----------------------------------------------------

    def is_zero(self) -> bool:
        return self.amount.is_zero()

    def sign(self) -> int:
        """-1, 0 or 1."""
        if self.amount.is_zero():
            return 0
        return -1 if self.amount.is_signed() else 1

    def scaled_value(self, scale: int) -> int:
        """``amount / 10**scale`` rounded away from zero (upstream ``ScaledValue``).

        For the non-negative values resources hold this is the ceiling: 1n of
        CPU is 1 millicore, 0.1 byte is 1 byte.
        """
        amount = self.amount
        if not amount.is_zero() and amount.adjusted() - scale > _MAX_INT_DIGITS:
            raise QuantityError(f"quantity {self.canonical()} is too large to convert to an integer", self)
        shifted = amount.scaleb(-scale, _EXACT)
        return int(shifted.to_integral_value(rounding=decimal.ROUND_UP, context=_EXACT))

    def value(self) -> int:
        """The value in base units, rounded up away from zero (upstream ``Value``)."""
        return self.scaled_value(0)

    def milli_value(self) -> int:
        """The value in thousandths, rounded up away from zero (upstream ``MilliValue``)."""
        return self.scaled_value(-3)

    # -- formatting ------------------------------------------------------------

    def canonical(self) -> str:
        """Upstream's canonical form (``CanonicalizeBytes``): ``0.5`` -> ``500m``, ``1.5Gi`` -> ``1536Mi``."""
        text = self._canonical
        if text is None:
            text = _canonicalize(self.amount, self.format)
            # The frozen dataclass only guards the value; this is a memo.
            object.__setattr__(self, "_canonical", text)
        return text

    def __str__(self) -> str:
        """Upstream ``String()``: the parsed input when upstream kept it, else :meth:`canonical`."""
        text = self._string
        if text is None:
            text = self.canonical()
            object.__setattr__(self, "_string", text)
        return text

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r}, {self.format.value})"

    # -- comparison and arithmetic ---------------------------------------------

    def __eq__(self, other: object) -> bool:
        other_amount = _amount_of(other)
        if other_amount is None:
            return NotImplemented
        return self.amount == other_amount

    def __hash__(self) -> int:
        # Decimal hashes agree with int and Fraction hashes of equal values, so
        # Quantity("1Gi"), Quantity("1024Mi") and 1073741824 are one dict key.
        return hash(self.amount)

    def __lt__(self, other: object) -> bool:
        other_amount = _amount_of(other)
        if other_amount is None:
            return NotImplemented
        return self.amount < other_amount

    def __le__(self, other: object) -> bool:
        other_amount = _amount_of(other)
        if other_amount is None:
            return NotImplemented
        return self.amount <= other_amount

    def __gt__(self, other: object) -> bool:
        other_amount = _amount_of(other)
        if other_amount is None:
            return NotImplemented
        return self.amount > other_amount

    def __ge__(self, other: object) -> bool:
        other_amount = _amount_of(other)
        if other_amount is None:
            return NotImplemented
        return self.amount >= other_amount

    def __add__(self, other: Quantity | int) -> Quantity:
        other_q = _as_operand(other)
        if other_q is None:
            return NotImplemented
        # quantity.go Add: the result keeps our format unless we are zero, in
        # which case it takes the other's (so 0 + 100m prints 100m).
        fmt = other_q.format if self.amount.is_zero() else self.format
        return Quantity(_EXACT.add(self.amount, other_q.amount), fmt)

    def __radd__(self, other: int) -> Quantity:
        # Makes sum(quantities) work: int + Quantity. Addition commutes in value;
        # the zero-format rule picks our format because the int side is DecimalSI.
        other_q = _as_operand(other)
        if other_q is None:
            return NotImplemented
        return other_q + self

    def __sub__(self, other: Quantity | int) -> Quantity:
        other_q = _as_operand(other)
        if other_q is None:
            return NotImplemented
        fmt = other_q.format if self.amount.is_zero() else self.format  # quantity.go Sub
        return Quantity(_EXACT.subtract(self.amount, other_q.amount), fmt)

    def __rsub__(self, other: int) -> Quantity:
        other_q = _as_operand(other)
        if other_q is None:
            return NotImplemented
        return other_q - self

    def __neg__(self) -> Quantity:
        return Quantity(_EXACT.minus(self.amount), self.format)  # upstream Neg keeps the format


def _amount_of(other: object) -> Decimal | int | Fraction | None:
    """The exact value to compare with, or None when ``other`` is not a number we compare with."""
    if isinstance(other, Quantity):
        return other.amount
    if isinstance(other, bool):  # True is an int, but not a quantity
        return None
    if isinstance(other, int | Decimal | Fraction):
        return other
    return None


def _as_operand(other: object) -> Quantity | None:
    if isinstance(other, Quantity):
        return other
    if isinstance(other, int) and not isinstance(other, bool):
        return Quantity(Decimal(other))
    return None


# -- parsing -------------------------------------------------------------------


def parse_quantity(value: str | int | float | Quantity) -> Quantity:
    """Parse a quantity as the kube-apiserver does (upstream ``ParseQuantity``).

    Strings are parsed exactly like upstream, including its leniencies (``5.``,
    ``.5``, ``+1``, and a bare suffix such as ``Gi`` meaning zero) and without
    trimming whitespace. Ints and floats are what a JSON/YAML decoder yields for
    an unquoted number: they are parsed from their literal text. A
    :class:`Quantity` is returned as is.

    Raises :class:`QuantityError` for anything else.
    """
    if type(value) is str:  # the common case first, without isinstance chains
        return _parse_text(value)
    if isinstance(value, Quantity):
        return value
    if isinstance(value, str):
        return _parse_text(str(value))
    if isinstance(value, bool):
        raise QuantityError(f"a quantity must be a string or a number, not {value!r}", value)
    if isinstance(value, int):
        try:
            text = str(value)
        except ValueError as exc:  # more digits than int->str conversion allows
            raise QuantityError(f"integer quantity is too large: {exc}", value) from None
        return _parse_text(text)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(_ERR_FORMAT, value)
        return _parse_text(repr(value))  # repr is the shortest literal that round-trips
    raise QuantityError(f"a quantity must be a string or a number, not {type(value).__name__}", value)


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Quantity:
    """ParseQuantity on a string. Memoised: quantities are immutable and a
    cluster's manifests use few distinct spellings. Errors are not cached."""
    if not text:
        raise QuantityError(_ERR_FORMAT, text)
    if text == "0":
        return Quantity(_ZERO, Format.DECIMAL_SI, "0")

    match = _SCANNER.fullmatch(text)
    if match is None:
        raise QuantityError(_ERR_FORMAT, text)
    sign, zeros, num, denom, suffix = match.groups()
    base, exponent, fmt = _interpret_suffix(suffix, text)
    negative = sign == "-"
    digits = num or "0"  # upstream: a numerator of only zeros (or none) reads as "0"
    frac = denom or ""

    # Upstream first tries an int64 "fast path"; only it may keep the input as
    # the cached String(), so it is reproduced exactly (quantity.go ParseQuantity).
    if fmt is Format.BINARY_SI:
        # Binary values with no fraction digits and few enough digits to fit int64.
        if not frac and 15 - len(digits) - exponent * 3 // 10 - 1 >= 0:
            mantissa = int(digits)
            amount = Decimal((-mantissa if negative else mantissa) << exponent)
            # Canonical iff the mantissa cannot be folded into a larger suffix.
            return Quantity(amount, fmt, text if mantissa & 7 else None)
    else:
        # Up to 18 digits at a scale no finer than nano. Go computes the scale
        # in int32, so absurd exponents wrap; upstream's decode corpus relies on it.
        scale = _wrap_int32(exponent - len(frac))
        if len(digits) + len(frac) <= 18 and scale >= _NANO_SCALE:
            shifted = digits + frac
            mantissa = int(shifted)
            amount = Decimal(f"{'-' if negative and mantissa else ''}{mantissa}E{scale}")
            canonical = scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0"
            return Quantity(amount, fmt, text if canonical else None)

    # Slow path: an arbitrary-precision decimal (upstream inf.Dec). It needs at
    # least one digit, which is why "Pi" fails while "Gi" (fast path) is zero.
    if not (zeros or num or frac):
        raise QuantityError(_ERR_NUMERIC, text)
    coefficient = (digits + frac).lstrip("0")
    if not coefficient:
        return Quantity(_ZERO, fmt)
    amount = Decimal(f"{'-' if negative else ''}{coefficient}E{-len(frac)}")
    amount = amount.scaleb(exponent, _EXACT) if base == 10 else _EXACT.multiply(amount, Decimal(1 << exponent))
    # Keep nothing finer than 1n, rounding away from zero: a tiny non-zero
    # request still gets some resource.
    if amount.as_tuple().exponent < _NANO_SCALE:
        amount = amount.quantize(_NANO, rounding=decimal.ROUND_UP, context=_EXACT)
    if fmt is Format.BINARY_SI:
        magnitude = amount.copy_abs()
        if magnitude > _MAX_INT64:
            amount = _MAX_INT64.copy_sign(amount)  # upstream silently caps binary values
        elif magnitude < 1:
            fmt = Format.DECIMAL_SI  # 0.5Ki is 512, but 0.0001Ki is not a whole byte
    return Quantity(amount, fmt)


def _interpret_suffix(suffix: str, text: str) -> tuple[int, int, Format]:
    """(base, exponent, format) of a suffix (suffix.go ``interpret``)."""
    known = _SUFFIXES.get(suffix)
    if known is not None:
        return known
    if len(suffix) > 1 and suffix[0] in "eE":
        body = suffix[1:]
        unsigned = body[1:] if body[0] in "+-" else body
        # strconv.ParseInt(body, 10, 64), then Go's int32() conversion.
        if unsigned.isdigit() and len(unsigned.lstrip("0")) <= 19:
            exponent = int(body)
            if -_INT64_LIMIT <= exponent < _INT64_LIMIT:
                return 10, _wrap_int32(exponent), Format.DECIMAL_EXPONENT
    raise QuantityError(_ERR_SUFFIX, text)


# -- formatting -------------------------------------------------------------------


def _canonicalize(amount: Decimal, fmt: Format) -> str:
    """Upstream ``CanonicalizeBytes``: the largest suffix that loses nothing, no fraction digits."""
    if amount.is_zero():
        return "0"
    if fmt is Format.BINARY_SI:
        if -1024 < amount < 1024 or amount != amount.to_integral_value(context=_EXACT):
            # Small or fractional binary values print in DecimalSI rather than
            # being rounded (upstream: "Don't lose precision").
            fmt = Format.DECIMAL_SI
        elif amount.adjusted() <= _MAX_INT_DIGITS:
            value = abs(int(amount))
            power = 0
            while value % 1024 == 0:
                value //= 1024
                power += 1
            # Beyond Ei there is no suffix; upstream (#140459) then prints the
            # exact decimal value instead, as below.
            if power < len(_BINARY_SI_SUFFIX):
                return f"{'-' if amount < 0 else ''}{value}{_BINARY_SI_SUFFIX[power]}"
            fmt = Format.DECIMAL_SI
        else:
            fmt = Format.DECIMAL_SI

    # DecimalSI / DecimalExponent: strip trailing zeros into the exponent, then
    # lower the exponent to a multiple of 3 (amount.go AsCanonicalBytes).
    sign, digit_tuple, exponent = amount.as_tuple()
    digits = "".join(map(str, digit_tuple))
    coefficient = digits.rstrip("0")
    exponent += len(digits) - len(coefficient)
    extra = exponent % 3
    if extra:
        coefficient += "0" * extra
        exponent -= extra
    suffix = _DECIMAL_SI_SUFFIX.get(exponent) if fmt is Format.DECIMAL_SI else None
    if suffix is None:
        # DecimalExponent, or DecimalSI past E (10^18), which upstream (#140459)
        # prints in exponent form rather than dropping the magnitude.
        suffix = f"e{exponent}" if exponent else ""
    return f"{'-' if sign else ''}{coefficient}{suffix}"


# -- helpers ------------------------------------------------------------------------


def cpu_millis(value: str | int | float | Quantity) -> int:
    """The quantity in thousandths, rounded up: ``cpu_millis("0.5") == 500``, ``cpu_millis(2) == 2000``."""
    return parse_quantity(value).milli_value()


def to_int(value: str | int | float | Quantity) -> int:
    """The quantity in base units, rounded up: ``to_int("1Ki") == 1024``, ``to_int("100m") == 1``."""
    return parse_quantity(value).value()


def format_millis(millis: int) -> str:
    """Canonical DecimalSI string of ``millis`` thousandths: 1500 -> ``1500m``, 2000 -> ``2``."""
    return Quantity(Decimal(millis).scaleb(-3, _EXACT), Format.DECIMAL_SI).canonical()


def format_bytes(count: int) -> str:
    """Canonical BinarySI string of a byte count, as kubelet reports memory: 2**30 -> ``1Gi``."""
    return Quantity(Decimal(count), Format.BINARY_SI).canonical()
