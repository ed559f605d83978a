"""From a request path to what it asks for: :class:`RequestInfo`.

This follows upstream's ``RequestInfoFactory.NewRequestInfo``
(``staging/src/k8s.io/apiserver/pkg/endpoints/request/requestinfo.go``):

* ``/api/v1/...`` is the core group, ``/apis/{group}/{version}/...`` the others;
* ``namespaces/{ns}/`` before the resource scopes it to a namespace, except
  that ``namespaces/{name}/status`` and ``namespaces/{name}/finalize`` are
  subresources of the Namespace itself;
* the rest is ``resource[/name[/subresource]]``;
* the verb comes from the method: GET is ``get`` with a name, ``list`` without
  (``watch`` with ``?watch=true``, or under the legacy ``/watch/`` prefix),
  DELETE without a name is ``deletecollection``.

The route table is the kind registry itself: :func:`resolve` looks the
resource up with :func:`emulator.api.kinds.by_group_plural`, so every
registered kind is served and adding a kind needs no route code. A path this
module cannot parse, or an unknown resource, answers 404 as upstream does.
"""

from __future__ import annotations

from dataclasses import dataclass

from emulator.api import errors, kinds
from emulator.api.kinds import Kind

# Upstream namespaceSubresources: after /namespaces/{name}/ these are not resources.
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_TRUE = frozenset({"true", "1"})


@dataclass(frozen=True)
class RequestInfo:
    verb: str  # get | list | watch | create | update | patch | delete | deletecollection
    group: str
    version: str
    namespace: str | None
    resource: str
    name: str
    subresource: str
    kind: Kind


def _not_found(path: str) -> errors.StatusError:
    return errors.StatusError(404, "NotFound", "the server could not find the requested resource")


def parse(method: str, path: str, watch_param: str | None) -> RequestInfo:
    """Parse a resource request; 404 for paths that are not one, 405 for methods no verb uses."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise _not_found(path)
    watching = bool(watch_param) and watch_param.lower() in _TRUE
    if rest and rest[0] == "watch":  # legacy /api/v1/watch/pods: a watch whatever the query says
        watching, rest = True, rest[1:]
    if not rest:
        raise _not_found(path)
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    if len(rest) > 3:
        raise _not_found(path)
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    kind = kinds.served(group, version, resource)
    if kind is None:
        raise _not_found(path)
    if kind is kinds.NAMESPACE:
        namespace = None  # a Namespace is cluster-scoped even though its URL reads like a namespace
    elif not kind.namespaced and namespace is not None:
        raise _not_found(path)
    if subresource and subresource not in kind.subresources:
        raise _not_found(path)
    verb = _verb(method, bool(name), watching)
    return RequestInfo(verb, group, version, namespace, resource, name, subresource, kind)


def _verb(method: str, named: bool, watching: bool) -> str:
    if method in ("GET", "HEAD"):
        if watching:
            return "watch"
        return "get" if named else "list"
    if method == "POST":
        return "create"
    if method in ("PUT", "PATCH") and not named:
        # Upstream registers no PUT/PATCH on collections.
        raise errors.method_not_allowed(f"the server does not allow this method on the requested resource: {method}")
    if method == "PUT":
        return "update"
    if method == "PATCH":
        return "patch"
    if method == "DELETE":
        return "delete" if named else "deletecollection"
    raise errors.method_not_allowed(f"the server does not allow this method on the requested resource: {method}")
