"""Kubernetes-style API errors.

Every expected failure of the store, the admission chain and the HTTP façade is
a :class:`StatusError`. It carries exactly what a ``meta.k8s.io/v1 Status``
object carries (code, reason, message, details with causes naming the field),
so the HTTP layer only serialises it and internal callers can branch on
``reason`` the way client-go callers use ``apierrors.IsConflict``.

The constructors mirror the helpers of upstream
``k8s.io/apimachinery/pkg/api/errors`` (NewNotFound, NewConflict, NewInvalid,
...) in spirit, with our own wording where upstream's is not user-visible.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Protocol


def render_value(value: Any) -> str:
    """A bad value as ErrorBody prints it: strings quoted (Go %q), scalars bare, the rest as JSON."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    try:
        return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)
    except (TypeError, ValueError):
        return repr(value)


@dataclass(frozen=True)
class Cause:
    """One reason an object was rejected, tied to a field path (``spec.containers[0].name``)."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"

    def to_dict(self) -> dict[str, str]:
        # As upstream's StatusCause: the message is the error body, the field path stands apart.
        return {"reason": self.reason, "message": self.message, "field": self.field}

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


@dataclass
class StatusError(Exception):
    """An API error that becomes a ``Status`` object with HTTP code ``code``."""

    code: int
    reason: str
    message: str
    kind: str = ""
    name: str = ""
    group: str = ""
    causes: list[Cause] = field(default_factory=list)
    retry_after_seconds: int | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def __str__(self) -> str:
        return f"{self.code} {self.reason}: {self.message}"

    def to_status(self) -> dict[str, Any]:
        """Return the ``meta.k8s.io/v1 Status`` shape of this error."""
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [c.to_dict() for c in self.causes]
        if self.retry_after_seconds is not None:
            details["retryAfterSeconds"] = self.retry_after_seconds
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if details:
            status["details"] = details
        return status


def _qualified(kind_plural: str, group: str) -> str:
    return f"{kind_plural}.{group}" if group else kind_plural


def not_found(plural: str, name: str, group: str = "") -> StatusError:
    return StatusError(404, "NotFound", f'{_qualified(plural, group)} "{name}" not found', plural, name, group)


class Getter(Protocol):
    """Anything that reads one object by kind, namespace and name (the store, the server core)."""

    def get(self, kind: Any, namespace: str | None, name: str) -> dict[str, Any]: ...


def get_or_none(reader: Getter, kind: Any, namespace: str | None, name: str) -> dict[str, Any] | None:
    """``reader.get`` of one object, or None when it does not exist (client-go callers' ``IsNotFound`` branch)."""
    try:
        return reader.get(kind, namespace, name)
    except StatusError as e:
        if e.code == 404:
            return None
        raise


def already_exists(plural: str, name: str, group: str = "") -> StatusError:
    return StatusError(
        409, "AlreadyExists", f'{_qualified(plural, group)} "{name}" already exists', plural, name, group
    )


def conflict(plural: str, name: str, why: str, group: str = "") -> StatusError:
    msg = f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}'
    return StatusError(409, "Conflict", msg, plural, name, group)


class StaleResourceVersion(StatusError):
    """409 Conflict because the object changed since the caller read it: re-reading and retrying may succeed.

    Other 409s (AlreadyExists, a bind to a node without room, a field-manager conflict) are not
    cured by a retry; read-modify-write loops retry only this one.
    """


def stale_resource_version(plural: str, name: str, group: str = "") -> StatusError:
    why = "the object has been modified; please apply your changes to the latest version and try again"
    msg = f'Operation cannot be fulfilled on {_qualified(plural, group)} "{name}": {why}'
    return StaleResourceVersion(409, "Conflict", msg, plural, name, group)


def invalid(kind: str, name: str, causes: list[Cause], group: str = "") -> StatusError:
    """422 Invalid, with one cause per bad field (upstream ``NewInvalid``)."""
    parts = ", ".join(str(c) for c in causes)
    if len(causes) > 1:
        parts = f"[{parts}]"  # upstream ToAggregate().Error() brackets several errors
    msg = f'{kind} "{name}" is invalid: {parts}' if name else f"{kind} is invalid: {parts}"
    return StatusError(422, "Invalid", msg, kind, name, group, list(causes))


def bad_request(message: str) -> StatusError:
    return StatusError(400, "BadRequest", message)


def forbidden(plural: str, name: str, why: str, group: str = "") -> StatusError:
    msg = f'{_qualified(plural, group)} "{name}" is forbidden: {why}'
    return StatusError(403, "Forbidden", msg, plural, name, group)


def gone(message: str) -> StatusError:
    """410 Expired: the requested resourceVersion is older than the retained window."""
    return StatusError(410, "Expired", message)


def too_large(message: str) -> StatusError:
    return StatusError(413, "RequestEntityTooLarge", message)


def unsupported_media_type(content_type: str) -> StatusError:
    return StatusError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: {content_type}")


def too_many_requests(message: str, retry_after_seconds: int | None = None) -> StatusError:
    return StatusError(429, "TooManyRequests", message, retry_after_seconds=retry_after_seconds)


def method_not_allowed(message: str) -> StatusError:
    return StatusError(405, "MethodNotAllowed", message)


def unauthorized() -> StatusError:
    return StatusError(401, "Unauthorized", "Unauthorized")


def internal(message: str) -> StatusError:
    return StatusError(500, "InternalError", message)
