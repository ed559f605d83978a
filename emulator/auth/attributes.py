"""What a request asks for, as the authorizer sees it: ``authorizer.Attributes``.

:func:`request_attributes` follows upstream's ``RequestInfoFactory.NewRequestInfo``
(``staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go``) on the
raw path, with no kind lookup, so every path (discovery, OpenAPI, health,
aggregated APIs, unknown resources) gets attributes the same way:

* fewer than three path segments, or a prefix other than ``api``/``apis``, or
  ``/apis/{group}/{version}`` itself: a *non-resource* request whose verb is
  the lower-cased HTTP method (HEAD is ``get``);
* otherwise a resource request: ``watch``/``proxy`` as the first segment are
  special verbs; ``namespaces/{ns}/`` scopes it (except the namespace
  subresources ``status`` and ``finalize``); then ``resource/name/subresource``;
* GET without a name is ``list`` (``watch`` with ``?watch=true``), and a list
  or watch with ``fieldSelector=metadata.name=X`` is authorized for that name;
  DELETE without a name is ``deletecollection``.
"""

from __future__ import annotations

from dataclasses import dataclass

from emulator.auth.user import UserInfo

_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_SPECIAL_VERBS = frozenset({"proxy", "watch"})
_TRUE = frozenset({"true", "1", "t", "True", "TRUE", "T"})
_METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch",
                 "DELETE": "delete"}


@dataclass(frozen=True, slots=True)
class Attributes:
    user: UserInfo
    verb: str
    resource_request: bool
    path: str = ""
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""


def _exact_name(field_selector: str) -> str:
    for term in field_selector.split(","):
        key, sep, value = term.partition("=")
        if sep and key.strip() == "metadata.name":
            value = value[1:] if value.startswith("=") else value  # "==" is "=" too
            value = value.strip()
            if value and value not in (".", "..") and "/" not in value and "%" not in value:
                return value
    return ""


def request_attributes(user: UserInfo, method: str, path: str, watch: str | None = None,
                       field_selector: str | None = None) -> Attributes:
    parts = [p for p in path.split("/") if p]
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return Attributes(user, "get" if method == "HEAD" else method.lower(), False, path)
    if parts[0] == "apis":
        if len(parts) < 4:  # /apis/{group}/{version}: discovery
            return Attributes(user, "get" if method == "HEAD" else method.lower(), False, path)
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        group, version, rest = "", parts[1], parts[2:]
    verb = ""
    if rest[0] in _SPECIAL_VERBS:
        if len(rest) < 2:
            return Attributes(user, method.lower(), False, path)
        verb, rest = rest[0], rest[1:]
    else:
        verb = _METHOD_VERBS.get(method, "")
    namespace = ""
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 and verb != "proxy" else ""
    if not name and verb == "get":
        verb = "watch" if watch in _TRUE else "list"
        if field_selector:
            name = _exact_name(field_selector)
    if not name and verb == "delete":
        verb = "deletecollection"
    return Attributes(user, verb, True, path, namespace, group, version, resource, subresource, name)


def forbidden_message(a: Attributes) -> str:
    """Upstream ``forbiddenMessage`` (``endpoints/handlers/responsewriters/errors.go``)."""
    if not a.resource_request:
        return f'User "{a.user.name}" cannot {a.verb} path "{a.path}"'
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    if a.namespace:
        return (f'User "{a.user.name}" cannot {a.verb} resource "{resource}" in API group "{a.api_group}" '
                f'in the namespace "{a.namespace}"')
    return (f'User "{a.user.name}" cannot {a.verb} resource "{resource}" in API group "{a.api_group}" '
            "at the cluster scope")
