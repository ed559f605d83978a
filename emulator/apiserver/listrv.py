"""What a LIST's ``resourceVersion`` and ``resourceVersionMatch`` ask for, and whether kemu can serve it.

Upstream (the API concepts page, "Resource versions"; apiserver ``storage/cacher/delegator.go``
``shouldDelegateList`` and ``storage/etcd3/store.go`` ``GetList``):

=====================  =====================  =============================================================
resourceVersion        resourceVersionMatch   served
=====================  =====================  =============================================================
unset                  unset                  the most recent state (a quorum read)
``"0"``                unset / NotOlderThan   any state (the watch cache may answer with an older one)
N                      unset / NotOlderThan   a state at least as new as N (504 "Too large resource
                                              version" when the store has not reached N)
N, with ``limit``      unset                  exactly N (the legacy exact match of paginated lists)
N                      Exact                  exactly N (410 Expired once etcd compacted N away)
=====================  =====================  =============================================================

``ValidateListOptions`` (apimachinery ``apis/meta/internalversion/validation``) refuses, with 422
``ListOptions.meta.k8s.io``, a match without a resourceVersion, a match with ``continue``, an unknown
match and Exact of ``"0"``; a resourceVersion that ``ParseUint`` cannot read is a 400, and so is a
resourceVersion beside a ``continue`` token.

kemu's store keeps the current state and, per kind, a stream of changes whose ids are resourceVersions;
it keeps no older states. So "most recent", "any" and "not older than N" are answered from the current
state (always at least as new as any resourceVersion the store handed out). "Exactly N" is answered
when the kind has not changed since N — the newest event in its stream is at or before N, so the
current objects *are* the state at N — and otherwise with upstream's 410 for a compacted revision.
There is no cache that lags behind the store, so a resourceVersion the store has not reached is
answered at once (upstream's cacher first waits up to 3 s for its cache to catch up).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from emulator.api import errors
from emulator.store.store import ListResult, Store, _decode_continue, _encode_continue

CONSISTENT, NOT_OLDER_THAN, EXACT = "Consistent", "NotOlderThan", "Exact"
_MATCHES = (EXACT, NOT_OLDER_THAN)
_UINT64_MAX = 2**64 - 1
_DIGITS = re.compile(r"[0-9]+")
# etcd3 store.go: the message of errors.NewResourceExpired for a list at a compacted revision.
EXPIRED = "The resourceVersion for the provided list is too old."


@dataclass(frozen=True)
class ListVersion:
    """The read a LIST asked for: ``consistency`` and, for NotOlderThan / Exact, the resourceVersion."""

    consistency: str
    rv: int = 0


def _parse_uint(text: str) -> int:
    """storage ``APIObjectVersioner.ParseResourceVersion``: strconv.ParseUint, 400 when it fails."""
    if not _DIGITS.fullmatch(text):
        why = f'strconv.ParseUint: parsing "{text}": invalid syntax'
    elif int(text) > _UINT64_MAX:
        why = f'strconv.ParseUint: parsing "{text}": value out of range'
    else:
        return int(text)
    raise errors.bad_request(f'invalid resource version: resourceVersion: Invalid value: "{text}": {why}')


def _invalid(causes: list[errors.Cause]) -> errors.StatusError:
    """handlers/get.go: ``errors.NewInvalid(ListOptions.meta.k8s.io, "", errs)``."""
    body = ", ".join(str(c) for c in causes)
    if len(causes) > 1:
        body = f"[{body}]"
    return errors.StatusError(422, "Invalid", f'ListOptions.meta.k8s.io "" is invalid: {body}', "ListOptions", "",
                              "meta.k8s.io", causes)


def parse(query: Mapping[str, str], limit: int) -> ListVersion:
    """The read ``query`` asks for; 422 / 400 for options upstream refuses."""
    rv_text = query.get("resourceVersion") or ""
    match = query.get("resourceVersionMatch") or ""
    continue_token = query.get("continue") or ""
    causes: list[errors.Cause] = []
    if match:
        if not rv_text:
            causes.append(errors.Cause("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden unless "
                                       "resourceVersion is provided", "FieldValueForbidden"))
        if continue_token:
            causes.append(errors.Cause("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden when "
                                       "continue is provided", "FieldValueForbidden"))
        if match not in _MATCHES:
            causes.append(errors.Cause("resourceVersionMatch", f'Unsupported value: "{match}": supported values: '
                                       '"Exact", "NotOlderThan", ""', "FieldValueNotSupported"))
        if match == EXACT and rv_text == "0":
            causes.append(errors.Cause("resourceVersionMatch", 'Forbidden: resourceVersionMatch "exact" is forbidden '
                                       'for resourceVersion "0"', "FieldValueForbidden"))
    if query.get("sendInitialEvents") not in (None, ""):
        causes.append(errors.Cause("sendInitialEvents", "Forbidden: sendInitialEvents is forbidden for list",
                                   "FieldValueForbidden"))
    if causes:
        raise _invalid(causes)
    if not rv_text:
        return ListVersion(CONSISTENT)
    rv = _parse_uint(rv_text)
    if continue_token and rv_text != "0":
        raise errors.bad_request("specifying resource version is not allowed when using continue")
    if match == EXACT or (not match and limit > 0 and rv_text != "0"):
        return ListVersion(EXACT, rv)
    return ListVersion(NOT_OLDER_THAN, rv)


def validate_watch(query: Mapping[str, str]) -> None:
    """422 for the options a watch may not take: apimachinery ``validateWatchOptions``.

    kemu serves the WatchList protocol (``sendInitialEvents``), as a server with the WatchList
    feature enabled: ``resourceVersionMatch`` on a watch is allowed only as ``NotOlderThan`` beside
    ``sendInitialEvents``, which in turn requires it; never with ``continue``.
    """
    match = query.get("resourceVersionMatch") or ""
    send_initial = query.get("sendInitialEvents") not in (None, "")
    causes: list[errors.Cause] = []
    if send_initial and match != NOT_OLDER_THAN:
        causes.append(errors.Cause("resourceVersionMatch", "Forbidden: sendInitialEvents requires setting "
                                   f"resourceVersionMatch to {NOT_OLDER_THAN}", "FieldValueForbidden"))
    if match:
        if not send_initial:
            causes.append(errors.Cause("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden for "
                                       "watch unless sendInitialEvents is provided", "FieldValueForbidden"))
        if match != NOT_OLDER_THAN:
            causes.append(errors.Cause("resourceVersionMatch", f'Unsupported value: "{match}": supported values: '
                                       f'"{NOT_OLDER_THAN}"', "FieldValueNotSupported"))
        if query.get("continue"):
            causes.append(errors.Cause("resourceVersionMatch", "Forbidden: resourceVersionMatch is forbidden when "
                                       "continue is provided", "FieldValueForbidden"))
    if causes:
        raise _invalid(causes)


def too_large(wanted: int, current: int) -> errors.StatusError:
    """storage ``NewTooLargeResourceVersionError``: 504 Timeout, cause ResourceVersionTooLarge, retry in 1 s."""
    return errors.StatusError(504, "Timeout", f"Timeout: Too large resource version: {wanted}, current: {current}",
                              causes=[errors.Cause("", "Too large resource version", "ResourceVersionTooLarge")],
                              retry_after_seconds=1)


def last_change(store: Store, resource_stream: str) -> int:
    """The resourceVersion of the newest change in a kind's stream (0: none)."""
    newest = store.redis.xrevrange(resource_stream, count=1)
    if not newest:
        return 0
    entry_id = newest[0][0]
    return int((entry_id.decode() if isinstance(entry_id, bytes) else entry_id).split("-", 1)[0])


def serve(store: Store, stream: str, version: ListVersion, result: ListResult) -> ListResult:
    """Check a list read from the current state against what was asked; the result to send.

    Called after the read: for Exact, no change newer than N after the read means none before it
    either, so the objects read are the state at N.
    """
    if version.consistency == CONSISTENT or (version.consistency == NOT_OLDER_THAN and version.rv == 0):
        return result
    if result.resource_version < version.rv:
        raise too_large(version.rv, result.resource_version)
    if version.consistency == NOT_OLDER_THAN:
        return result
    if last_change(store, stream) > version.rv:
        raise errors.gone(EXPIRED)
    token = result.continue_token
    if token:
        token = _encode_continue(version.rv, _decode_continue(token)[1])
    return ListResult(result.items, version.rv, token)
