"""The read a LIST's options ask for (emulator.apiserver.listrv.parse), row by row of upstream's rules.

Rows: the API concepts page's "Resource versions" table, apiserver cacher ``shouldDelegateList``
(the legacy exact match of a paginated list) and ``ValidateListOptions``.
"""

from __future__ import annotations

import pytest

from emulator.api.errors import StatusError
from emulator.apiserver.listrv import CONSISTENT, EXACT, NOT_OLDER_THAN, ListVersion, parse


@pytest.mark.parametrize(("query", "limit", "expected"), [
    ({}, 0, ListVersion(CONSISTENT)),
    ({"resourceVersion": ""}, 500, ListVersion(CONSISTENT)),
    ({"resourceVersion": "0"}, 0, ListVersion(NOT_OLDER_THAN, 0)),
    ({"resourceVersion": "0"}, 500, ListVersion(NOT_OLDER_THAN, 0)),  # "any", also when paginated
    ({"resourceVersion": "0", "resourceVersionMatch": "NotOlderThan"}, 0, ListVersion(NOT_OLDER_THAN, 0)),
    ({"resourceVersion": "42"}, 0, ListVersion(NOT_OLDER_THAN, 42)),  # NotOlderThan is the default
    ({"resourceVersion": "42", "resourceVersionMatch": "NotOlderThan"}, 500, ListVersion(NOT_OLDER_THAN, 42)),
    ({"resourceVersion": "42"}, 500, ListVersion(EXACT, 42)),  # legacy exact match of a paginated list
    ({"resourceVersion": "42", "resourceVersionMatch": "Exact"}, 0, ListVersion(EXACT, 42)),
    ({"resourceVersion": "007"}, 0, ListVersion(NOT_OLDER_THAN, 7)),  # strconv.ParseUint reads leading zeros
    ({"continue": "token"}, 1, ListVersion(CONSISTENT)),
    ({"continue": "token", "resourceVersion": "0"}, 1, ListVersion(NOT_OLDER_THAN, 0)),
], ids=["unset", "empty-paginated", "zero", "zero-paginated", "zero-not-older", "n", "n-not-older-paginated",
        "n-paginated-legacy-exact", "n-exact", "leading-zeros", "continue", "continue-zero"])
def test_what_a_list_asks_for(query: dict[str, str], limit: int, expected: ListVersion) -> None:
    assert parse(query, limit) == expected


@pytest.mark.parametrize(("query", "code", "fragment"), [
    ({"resourceVersionMatch": "Exact"}, 422, "resourceVersionMatch is forbidden unless resourceVersion is provided"),
    ({"resourceVersion": "1", "resourceVersionMatch": "Exact", "continue": "t"}, 422,
     "resourceVersionMatch is forbidden when continue is provided"),
    ({"resourceVersion": "1", "resourceVersionMatch": "exact"}, 422, 'Unsupported value: "exact"'),
    ({"resourceVersion": "0", "resourceVersionMatch": "Exact"}, 422,
     'resourceVersionMatch "exact" is forbidden for resourceVersion "0"'),
    ({"sendInitialEvents": "false"}, 422, "sendInitialEvents is forbidden for list"),
    ({"resourceVersion": "1", "continue": "t"}, 400, "specifying resource version is not allowed when using continue"),
    ({"resourceVersion": "+1"}, 400, 'parsing "+1": invalid syntax'),
    ({"resourceVersion": "1e3"}, 400, 'parsing "1e3": invalid syntax'),
    ({"resourceVersion": str(2**64)}, 400, "value out of range"),
], ids=["match-alone", "match-with-continue", "match-lowercase", "exact-zero", "send-initial-events",
        "rv-with-continue", "plus-sign", "exponent", "past-uint64"])
def test_refused(query: dict[str, str], code: int, fragment: str) -> None:
    with pytest.raises(StatusError) as exc:
        parse(query, 0)
    assert exc.value.code == code and fragment in exc.value.message


def test_every_option_error_is_reported_at_once() -> None:
    with pytest.raises(StatusError) as exc:
        parse({"resourceVersionMatch": "Sometimes", "continue": "t"}, 0)
    assert len(exc.value.causes) == 3 and exc.value.message.startswith('ListOptions.meta.k8s.io "" is invalid: [')
