"""Name and label formats, with upstream's exact error messages.

One home for the string formats every layer checks: DNS-1123 labels and
subdomains, qualified names (label and annotation keys), label values. The
server's object validation and the selector parser both use these, so a bad
label key reads the same whether it came in a manifest or a ``-l`` flag.
Lengths are in bytes, as Go's ``len``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable


def byte_len(s: str) -> int:
    # Upstream limits are in bytes (Go ``len``); only non-ASCII text makes it differ.
    return len(s) if s.isascii() else len(s.encode("utf-8"))


# --------------------------------------------------------------------------------------------
# Name formats: staging/src/k8s.io/apimachinery/pkg/util/validation/validation.go and
# staging/src/k8s.io/apimachinery/pkg/api/validate/content/kube.go. Messages are upstream's,
# including RegexError's "(e.g. 'a',  or 'b', regex used for validation is '...')" layout.
# --------------------------------------------------------------------------------------------


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """Upstream ``RegexError``, double spaces before ``or`` included."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len(n: int) -> str:
    """Upstream ``MaxLenError``."""
    return f"must be no more than {n} characters"


_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1123_LABEL_MSG = regex_error(
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character",
    _DNS1123_LABEL_FMT, "my-name", "123-abc")
_DNS1123_SUBDOMAIN_MSG = regex_error(
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character",
    _DNS1123_SUBDOMAIN_FMT, "example.com")

_LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_KEY_RE = re.compile(_LABEL_KEY_FMT)
_LABEL_KEY_ERR = ("must consist of alphanumeric characters, '-', '_' or '.', "
                  "and must start and end with an alphanumeric character")
_LABEL_NAME_PART_MSG = "name part " + regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
_LABEL_KEY_SLASHES_MSG = ("a qualified name "
                          + regex_error(_LABEL_KEY_ERR, _LABEL_KEY_FMT, "MyName", "my.name", "123-abc")
                          + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')")
_LABEL_VALUE_FMT = "(" + _LABEL_KEY_FMT + ")?"
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)
_LABEL_VALUE_MSG = regex_error(
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character",
    _LABEL_VALUE_FMT, "MyValue", "my_value", "12345")

# Strings already found well-formed, per format. A cluster reuses a small vocabulary of label
# keys, label values, container and resource names, so a set hit replaces the regex on the hot
# path. Bounded: cleared when full rather than tracking recency.
MEMO_LIMIT = 8192


def _remember(memo: set[str], value: str) -> None:
    if len(memo) >= MEMO_LIMIT:
        memo.clear()
    memo.add(value)


def _memoised(check: Callable[[str], list[str]]) -> Callable[[str], list[str]]:
    """``check`` answering at once for a string it found well-formed before (see above)."""
    ok: set[str] = set()

    @functools.wraps(check)
    def memoised(value: str) -> list[str]:
        if value in ok:
            return []
        errs = check(value)
        if not errs:
            _remember(ok, value)
        return errs
    return memoised


def _length_and_format_errors(value: str, limit: int, regex: re.Pattern[str], msg: str) -> list[str]:
    """At most ``limit`` bytes, and the whole of ``value`` matching ``regex`` (``msg`` when it does not)."""
    errs = [max_len(limit)] if byte_len(value) > limit else []
    if not regex.fullmatch(value):
        errs.append(msg)
    return errs


@_memoised
def dns1123_label_errors(value: str) -> list[str]:
    """Upstream ``IsDNS1123Label``: empty list when ``value`` is a valid label."""
    errs: list[str] = []
    if byte_len(value) > 63:
        errs.append(max_len(63))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        # A valid subdomain that is not a label can only be failing on its dots.
        errs.append("must not contain dots" if _DNS1123_SUBDOMAIN_RE.fullmatch(value) else _DNS1123_LABEL_MSG)
    return errs


@_memoised
def dns1123_subdomain_errors(value: str) -> list[str]:
    """Upstream ``IsDNS1123Subdomain``."""
    return _length_and_format_errors(value, 253, _DNS1123_SUBDOMAIN_RE, _DNS1123_SUBDOMAIN_MSG)


@_memoised
def qualified_name_errors(value: str) -> list[str]:
    """Upstream ``IsQualifiedName`` (= ``content.IsLabelKey``): ``[prefix/]name``."""
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in dns1123_subdomain_errors(prefix))
    else:
        return [_LABEL_KEY_SLASHES_MSG]
    if not name:
        errs.append("name part must be non-empty")
    elif byte_len(name) > 63:
        errs.append("name part " + max_len(63))
    if not _LABEL_KEY_RE.fullmatch(name):
        errs.append(_LABEL_NAME_PART_MSG)
    return errs


@_memoised
def label_value_errors(value: str) -> list[str]:
    """Upstream ``IsValidLabelValue``."""
    return _length_and_format_errors(value, 63, _LABEL_VALUE_RE, _LABEL_VALUE_MSG)
