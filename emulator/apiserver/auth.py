"""Bearer-token access control, as a tiny pure-ASGI middleware.

kemu has one credential: the token ``kemu up`` generates and writes into the
kubeconfig. Rules, after upstream's authentication chain with anonymous
requests enabled (``--anonymous-auth``, the default):

* a request that presents ``Authorization: Bearer <token>`` with the right
  token is in;
* a request that presents a wrong token is 401, whatever else holds (upstream
  rejects invalid credentials even when anonymous access would be allowed);
  a server started without a token serves everyone;
* a request without a token is in unless the server requires one
  (``require_token``, on for non-loopback binds), except the health and
  version endpoints, which upstream leaves readable to anonymous users.

A pure ASGI class rather than Starlette's ``BaseHTTPMiddleware``: it costs
one header scan per request and does not wrap streaming (watch) responses.
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson

from emulator.api import errors

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

PUBLIC_PATHS = frozenset({"/healthz", "/livez", "/readyz", "/version"})


def _bearer(scope: Scope) -> bytes | None:
    for name, value in scope.get("headers") or ():
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            return token.strip() if scheme.lower() == b"bearer" else b""
    return None


class TokenAuth:
    def __init__(self, app: ASGIApp, token: str, required: bool) -> None:
        self.app = app
        self.token = token.encode()
        self.required = required and bool(token)

    def allowed(self, scope: Scope) -> bool:
        if not self.token:
            return True  # a server without a credential serves everyone
        presented = _bearer(scope)
        if not presented:
            return not self.required or scope.get("path") in PUBLIC_PATHS
        return hmac.compare_digest(presented, self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self.allowed(scope):
            await self.app(scope, receive, send)
            return
        body = orjson.dumps(errors.unauthorized().to_status())
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"www-authenticate", b'Bearer realm="kemu"')]})
        await send({"type": "http.response.body", "body": body})
