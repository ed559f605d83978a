"""Authentication, impersonation and authorization of every request, as one pure-ASGI middleware.

Upstream's handler chain (``k8s.io/apiserver/pkg/server/config.go``
``DefaultBuildHandlerChain``) runs ``WithAuthentication`` → ``WithImpersonation``
→ ``WithAuthorization`` before any handler; kemu does the same here:

* **Authentication** (bearer tokens): kemu's admin token (``kemu up``'s
  kubeconfig) is user ``kemu-admin`` in ``system:masters``; every other token
  is looked up in the users table (:mod:`.users`, cached per process). A wrong
  token is 401 whatever else holds. When the server requires tokens
  (non-loopback binds, ``--api-require-token``) a request without one is 401
  (upstream's ``--anonymous-auth=false``), except the health and version
  paths, which it serves to ``system:anonymous`` as upstream's
  ``system:public-info-viewer`` allows; on a loopback server that does not
  require them it acts as ``kemu-admin``, as kemu always allowed (a
  documented simplification: loopback is trusted).
* **Impersonation** (``filters/impersonation.go``): ``Impersonate-User``,
  ``Impersonate-Group`` and ``Impersonate-Uid`` headers switch the user after
  the caller is authorized for the ``impersonate`` verb on ``users``,
  ``groups`` (core group), ``serviceaccounts`` or ``uids``
  (authentication.k8s.io); that is what ``kubectl auth can-i --as`` sends.
* **Authorization**: with ``authorization_mode`` ``RBAC`` every request's
  :class:`~emulator.auth.attributes.Attributes` go to the RBAC authorizer
  (:mod:`emulator.auth.rbac`); a denial is ``403 Forbidden`` with upstream's
  wording. ``AlwaysAllow`` skips it.

The user is left in ``scope["kemu.user"]`` for the review endpoints
(:mod:`.reviews`). A pure ASGI class rather than Starlette's
``BaseHTTPMiddleware``: a few header scans and dict lookups per request, and
streaming (watch) responses pass through unwrapped.
"""

from __future__ import annotations

import hmac
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import parse_qs

import orjson
import redis

from emulator.api import errors
from emulator.apiserver import users
from emulator.auth.attributes import Attributes, forbidden_message, request_attributes
from emulator.auth.rbac import RBACAuthorizer
from emulator.auth.user import ADMIN, ALL_AUTHENTICATED, ANONYMOUS, ANONYMOUS_USER, SERVICE_ACCOUNT_PREFIX, UserInfo

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

USER_KEY = "kemu.user"
PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version"})
_NEGATIVE_TTL = 1.0  # seconds an unknown token stays unknown before Redis is asked again


def _bearer(scope: Scope) -> bytes | None:
    for name, value in scope.get("headers") or ():
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else b""
    return None


def forbidden(a: Attributes) -> errors.StatusError:
    """Upstream ``responsewriters.Forbidden`` → ``apierrors.NewForbidden``."""
    why = forbidden_message(a)
    if not a.resource_request or not a.resource:
        return errors.StatusError(403, "Forbidden", f"forbidden: {why}")
    qualified = f"{a.resource}.{a.api_group}" if a.api_group else a.resource
    msg = f'{qualified} "{a.name}" is forbidden: {why}' if a.name else f"{qualified} is forbidden: {why}"
    return errors.StatusError(403, "Forbidden", msg, a.resource, a.name, a.api_group)


class Authenticator:
    """Bearer token → user: the admin token, then the users table in Redis (cached)."""

    def __init__(self, admin_token: str, r: redis.Redis | None, prefix: str) -> None:
        self.admin_token = admin_token.encode()
        self.redis = r
        self.prefix = prefix
        self._known: dict[bytes, UserInfo] = {}
        self._unknown: dict[bytes, float] = {}

    def user(self, token: bytes) -> UserInfo | None:
        if self.admin_token and hmac.compare_digest(token, self.admin_token):
            return ADMIN
        found = self._known.get(token)
        if found is not None or self.redis is None:
            return found
        now = time.monotonic()
        if now - self._unknown.get(token, -_NEGATIVE_TTL) < _NEGATIVE_TTL:
            return None
        found = users.lookup(self.redis, self.prefix, token)
        if found is None:
            if len(self._unknown) > 10_000:
                self._unknown.clear()
            self._unknown[token] = now
        else:
            if len(self._known) > 10_000:
                self._known.clear()
            self._known[token] = found
        return found


class AuthMiddleware:
    def __init__(self, app: ASGIApp, authenticator: Authenticator, authorizer: RBACAuthorizer | None,
                 required: bool) -> None:
        self.app = app
        self.authn = authenticator
        self.authz = authorizer  # None: AlwaysAllow
        # Without any credential configured the server serves everyone as the admin.
        self.required = required and bool(authenticator.admin_token)
        self.open = not authenticator.admin_token

    def authenticate(self, scope: Scope) -> UserInfo | None:
        presented = _bearer(scope)
        if not presented:
            if self.open or not self.required:
                return ADMIN
            # Health and version stay readable anonymously (system:public-info-viewer); the rest is 401.
            return ANONYMOUS_USER if scope.get("path") in PUBLIC_PATHS else None
        return self.authn.user(presented)

    def _allowed(self, a: Attributes) -> bool:
        return self.authz is None or self.authz.authorize(a)

    def impersonate(self, scope: Scope, user: UserInfo) -> UserInfo:
        """Upstream ``WithImpersonation``: authorize each requested identity, then act as it."""
        name = ""
        groups: list[str] = []
        uid = ""
        for key, value in scope.get("headers") or ():
            if key == b"impersonate-user":
                name = value.decode()
            elif key == b"impersonate-group":
                groups.append(value.decode())
            elif key == b"impersonate-uid":
                uid = value.decode()
        if not name and not groups and not uid:
            return user
        if not name:
            raise errors.bad_request("requested impersonation of groups or uid without impersonating a user")
        checks: list[Attributes] = []
        if name.startswith(SERVICE_ACCOUNT_PREFIX) and name.count(":") == 3:
            _, _, ns, sa = name.split(":")
            checks.append(Attributes(user, "impersonate", True, namespace=ns, resource="serviceaccounts", name=sa))
        else:
            checks.append(Attributes(user, "impersonate", True, resource="users", name=name))
        checks += [Attributes(user, "impersonate", True, resource="groups", name=g) for g in groups]
        if uid:
            checks.append(Attributes(user, "impersonate", True, api_group="authentication.k8s.io", resource="uids",
                                     name=uid))
        for a in checks:
            if not self._allowed(a):
                raise forbidden(a)
        if name.startswith(SERVICE_ACCOUNT_PREFIX) and name.count(":") == 3:
            ns = name.split(":")[2]
            groups += ["system:serviceaccounts", f"system:serviceaccounts:{ns}"]
        if name != ANONYMOUS:
            groups.append(ALL_AUTHENTICATED)
        return UserInfo(name, tuple(dict.fromkeys(groups)), uid)

    def authorize(self, scope: Scope, user: UserInfo) -> None:
        if self.authz is None or "system:masters" in user.groups:
            return
        method = scope.get("method") or "GET"
        watch = field_selector = None
        if method == "GET" and scope.get("query_string"):
            q = parse_qs(scope["query_string"].decode(), keep_blank_values=True)
            watch = (q.get("watch") or [None])[0]
            field_selector = (q.get("fieldSelector") or [None])[0]
        a = request_attributes(user, method, scope.get("path") or "/", watch, field_selector)
        if not self.authz.authorize(a):
            raise forbidden(a)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        user = self.authenticate(scope)
        if user is None:
            await _send_status(send, errors.unauthorized(), [(b"www-authenticate", b'Bearer realm="kemu"')])
            return
        try:
            user = self.impersonate(scope, user)
            self.authorize(scope, user)
        except errors.StatusError as e:
            await _send_status(send, e)
            return
        scope[USER_KEY] = user
        await self.app(scope, receive, send)


async def _send_status(send: Send, err: errors.StatusError, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    body = orjson.dumps(err.to_status())
    await send({"type": "http.response.start", "status": err.code,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                            *(headers or [])]})
    await send({"type": "http.response.body", "body": body})
