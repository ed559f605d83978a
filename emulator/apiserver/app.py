"""The FastAPI application: HTTP in, :mod:`.handlers` / :mod:`.watch` / :mod:`.discovery` out.

Routes are few and generic: ``/api/{path}`` and ``/apis/{path}`` take every
resource request and :mod:`.routing` resolves the path against the kind
registry, so adding a kind adds no route. Discovery, OpenAPI, version and
health endpoints are the only fixed paths.

Speed matters here (the target is over a thousand pod creates per second per
worker), so the endpoints are plain Starlette endpoints registered on the
FastAPI app: no pydantic models, no dependency injection, bodies read as raw
bytes and parsed with orjson, responses written with orjson. Single-object
operations call the synchronous core directly on the event loop (one or two
Redis round trips of ~0.1 ms: cheaper than a thread hop); lists and
deletecollection, which can take seconds on 100,000 objects, run in
Starlette's thread pool; watches are async all the way (:mod:`.watch`).

Every error is a ``meta.k8s.io/v1 Status`` with the matching HTTP code,
including 404 for unknown paths, 405 for methods a resource does not take and
500 for bugs (logged with their traceback).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import FastAPI
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from emulator.api import errors
from emulator.api.kinds import REVIEW_GROUPS
from emulator.api.selectors import parse_field_selector, parse_label_selector
from emulator.apiserver import aggregated, content, discovery, listrv, reviews, routing
from emulator.apiserver import metrics as apimetrics
from emulator.apiserver.auth import USER_KEY, Authenticator, AuthMiddleware
from emulator.apiserver.calls import Call, Result, query_bool, query_int
from emulator.apiserver.handlers import Handlers
from emulator.apiserver.rbacsource import RBACSource
from emulator.apiserver.settings import ServerSettings, is_loopback
from emulator.apiserver.unavailable import StoreUnavailableMiddleware, part_checks, store_unavailable
from emulator.apiserver.watch import WatchRequest, WatchSource, stream_events
from emulator.auth.rbac import RBACAuthorizer
from emulator.auth.user import ADMIN
from emulator.metrics import SD_PATH, discover, process_instance, serve_and_register
from emulator.server.core import ServerCore
from emulator.server.services import ensure_kubernetes_service
from emulator.store.store import UNAVAILABLE, Store, StoreConfig, parse_resource_version

log = logging.getLogger("kemu.apiserver")

_METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
# Verbs whose handlers may take long (whole collections): run them off the event loop.
_THREADED_VERBS = frozenset({"list", "deletecollection"})


def status_response(err: errors.StatusError) -> Response:
    headers = {}
    if err.retry_after_seconds is not None:
        headers["Retry-After"] = str(err.retry_after_seconds)
    return Response(orjson.dumps(err.to_status()), err.code, headers, "application/json")


def _json(obj: Any, status: int = 200, content_type: str = "application/json",
          headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(obj), status, headers, content_type)


class ApiServer:
    """The state one worker process serves requests with."""

    def __init__(self, settings: ServerSettings, core: ServerCore | None = None) -> None:
        self.settings = settings
        if core is None:
            store_config = StoreConfig(prefix=settings.prefix, stream_cap=settings.stream_cap,
                                       node_shards=settings.node_shards, retries=settings.store_retries)
            store = Store.connect(settings.redis_url, store_config)
            core = ServerCore(store, settings.clock())
        self.core = core
        self.handlers = Handlers(core)
        self.watches = WatchSource(core.store, settings.redis_url, bookmark_interval=settings.bookmark_interval)
        self.authorizer = RBACAuthorizer() if settings.authorization_mode == "RBAC" else None
        self.rbac = RBACSource(core, self.watches, self.authorizer) if self.authorizer is not None else None

    # ------------------------------------------------------------------ bodies
    @staticmethod
    async def read_body(request: Request) -> bytes:
        """The request body, refusing more than 3 MiB (413) before and while reading it."""
        content.check_length(request.headers.get("content-length"))
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > content.MAX_BODY_BYTES:
                raise content.too_large()
            chunks.append(chunk)
        return b"".join(chunks)

    def respond(self, call: Call, result: Result) -> Response:
        if result.encoded is not None:
            response = Response(result.encoded, result.status, media_type=result.content_type or "application/json")
        else:
            body, ctype = content.encode(result.body, call.wanted)
            response = Response(body, result.status, media_type=result.content_type or ctype)
        for text in result.warnings:
            response.headers.append("Warning", f"299 - {orjson.dumps(text).decode()}")
        return response

    # ------------------------------------------------------------------ resources
    async def resource(self, request: Request) -> Response:
        """Serve one resource request and count it (:mod:`.metrics`: one dict lookup and two updates)."""
        start = time.perf_counter()
        response, info = await self._resource(request)
        if info is not None:
            verb = apimetrics.reported_verb(info.verb, request.headers.get("content-type"))
            apimetrics.observe(verb, info, response.status_code,
                               None if info.verb == "watch" else time.perf_counter() - start)
        return response

    async def _resource(self, request: Request) -> tuple[Response, routing.RequestInfo | None]:
        """The response, and what the request asked for once its path parsed (None: not a resource request)."""
        info: routing.RequestInfo | None = None
        try:
            path = request.url.path
            parts = [p for p in path.split("/") if p]
            api = aggregated.find(parts)
            if api is not None and len(parts) >= 4:  # a group served by a provider, not the store
                answer = await run_in_threadpool(aggregated.serve, api, self.core.store, request.method, parts,
                                                 request.query_params)
                return _json(answer), None
            # /api/v1, /apis/{group}, /apis/{group}/{version}: discovery, not resources.
            if request.method == "GET" and ((len(parts) == 2 and parts[0] == "api") or
                                            (len(parts) in (2, 3) and parts[0] == "apis")):
                return self.group_discovery(request, parts), None
            query = request.query_params
            info = routing.parse(request.method, path, query.get("watch"))
            wanted = content.negotiate(request.headers.get("accept") or "")
            if info.subresource in reviews.NOT_EMULATED:
                raise reviews.not_emulated(info)
            body = b"" if request.method == "GET" else await self.read_body(request)
            call = Call(info, query, request.headers, body, wanted)
            if info.group in REVIEW_GROUPS:
                user = request.scope.get(USER_KEY) or ADMIN
                return self.respond(call, reviews.handle(call, user, self.authorizer)), info
            if info.verb == "watch":
                return await self.watch(call), info
            if info.verb in _THREADED_VERBS:
                result = await run_in_threadpool(self.handlers.handle, call)
            else:
                result = self.handlers.handle(call)
            return self.respond(call, result), info
        except errors.StatusError as e:
            return status_response(e), info
        except UNAVAILABLE as e:  # Redis restarting: 503 + Retry-After, never a 500
            log.warning("store unavailable serving %s %s: %s", request.method, request.url.path, e)
            return status_response(store_unavailable(e)), info
        except Exception:
            log.exception("internal error serving %s %s", request.method, request.url.path)
            return status_response(errors.internal("an internal error occurred; see the API server log")), info

    # ------------------------------------------------------------------ watch
    async def watch(self, call: Call) -> Response:
        info, kind, q = call.info, call.kind, call.query
        listrv.validate_watch(q)  # handlers/get.go: ValidateListOptions before the watch is served
        ls = parse_label_selector(q.get("labelSelector") or "") if q.get("labelSelector") else None
        fs_text = q.get("fieldSelector") or ""
        if info.name:  # GET .../pods/NAME?watch=true: a watch of one object
            fs_text = ",".join(s for s in (fs_text, f"metadata.name={info.name}") if s)
        fs = parse_field_selector(fs_text, kind.selectable_fields) if fs_text else None
        namespace = info.namespace
        if namespace is None and fs is not None and kind.namespaced:
            namespace = fs.exact("metadata.namespace") or None
        rv_param = q.get("resourceVersion")
        since = parse_resource_version(rv_param)
        send_initial_param = q.get("sendInitialEvents")
        send_initial = since == 0 if send_initial_param is None else query_bool(call, "sendInitialEvents")
        bookmarks = query_bool(call, "allowWatchBookmarks")
        timeout = query_int(call, "timeoutSeconds")
        if timeout is not None and timeout < 0:
            raise errors.bad_request("timeoutSeconds must not be negative")
        if call.wanted.partial:
            raise errors.StatusError(406, "NotAcceptable", "watches of PartialObjectMetadata are not supported")
        req = WatchRequest(kind, namespace, ls, fs, since, send_initial,
                           initial_end_bookmark=bool(send_initial_param) and send_initial and bookmarks,
                           allow_bookmarks=bookmarks, timeout_seconds=None if timeout is None else float(timeout),
                           table_version=call.wanted.version if call.wanted.table else "",
                           include_object=q.get("includeObject") or "Metadata")
        initial: list[dict[str, Any]] | None = None
        start = since
        if send_initial:
            listed = await run_in_threadpool(self.core.list, kind, namespace, label_selector=ls, field_selector=fs)
            initial, start = listed.items, max(listed.resource_version, since)
        else:
            await self.watches.check(kind, since)
        ctype = content.content_type_of(call.wanted)
        return StreamingResponse(stream_events(req, self.watches, initial, start, self.core.clock.now),
                                 media_type=ctype, headers={"Cache-Control": "no-cache, private"})

    # ------------------------------------------------------------------ discovery
    @staticmethod
    def _cached(request: Request, body: bytes, content_type: str) -> Response:
        tag = discovery.etag(body)
        if request.headers.get("if-none-match") == tag:
            return Response(status_code=304, headers={"ETag": tag})
        return Response(body, 200, {"ETag": tag}, content_type)

    def root_discovery(self, request: Request, legacy: bool) -> Response:
        try:
            wanted = content.negotiate(request.headers.get("accept") or "", discovery=True)
        except errors.StatusError as e:
            return status_response(e)
        if wanted.as_kind == "APIGroupDiscoveryList":
            body = _aggregated_bytes(legacy, wanted.version)
            return self._cached(request, body, content.content_type_of(wanted))
        if legacy:
            host = request.headers.get("host") or f"{self.settings.host}:{self.settings.port}"
            return _json(discovery.api_versions(host))
        return _json(discovery.api_group_list())

    def group_discovery(self, request: Request, parts: list[str]) -> Response:
        if parts[0] == "api":
            doc = discovery.api_resource_list("", parts[1])
        elif len(parts) == 2:
            doc = discovery.api_group(parts[1])
        else:
            doc = discovery.api_resource_list(parts[1], parts[2])
        if doc is None:
            return status_response(errors.StatusError(404, "NotFound",
                                                      "the server could not find the requested resource"))
        return _json(doc)


_AGGREGATED: dict[tuple[bool, str], bytes] = {}


def _aggregated_bytes(legacy: bool, version: str) -> bytes:
    key = (legacy, version)
    if key not in _AGGREGATED:
        _AGGREGATED[key] = orjson.dumps(discovery.aggregated(legacy, version))
    return _AGGREGATED[key]


def create_app(settings: ServerSettings, core: ServerCore | None = None) -> Any:
    """Build the ASGI application (the FastAPI app inside the authentication/authorization middleware)."""
    server = ApiServer(settings, core)
    aggregated.configure_metrics(settings.metrics_rules, settings.prometheus_url, server.core.clock.now)

    apimetrics.preinitialise()
    # Several worker processes share one port, and several replicas (compose) share one service name:
    # a scrape of the shared address would reach one of them at random. Then every process serves its
    # own /metrics on its own port and is a target of its own (found through the discovery document).
    own_target = settings.workers > 1 or not is_loopback(settings.host)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        endpoint = None
        if own_target:
            endpoint = await run_in_threadpool(serve_and_register, server.core.store.redis,
                                               process_instance("apiserver"), "apiserver", prefix=settings.prefix)
        if server.rbac is not None:
            await run_in_threadpool(server.core.bootstrap_rbac)
            await server.rbac.start()
        try:
            await run_in_threadpool(ensure_kubernetes_service, server.core, settings.host, settings.port)
        except errors.StatusError as e:  # the API still serves; `kubectl cluster-info` lacks its Service
            log.warning("could not reconcile the default kubernetes Service: %s", e.message)
        yield
        if server.rbac is not None:
            await server.rbac.stop()
        if endpoint is not None:
            endpoint.stop()
        await server.watches.close()

    # FastAPI's own OpenAPI and docs would shadow Kubernetes' /openapi paths and describe nothing useful.
    app = FastAPI(title="kemu", openapi_url=None, docs_url=None, redoc_url=None, lifespan=lifespan)
    app.state.server = server

    async def resource(request: Request) -> Response:
        return await server.resource(request)

    async def api_root(request: Request) -> Response:
        return server.root_discovery(request, legacy=True)

    async def apis_root(request: Request) -> Response:
        return server.root_discovery(request, legacy=False)

    async def version(_: Request) -> Response:
        return _json(discovery.version_info())

    async def healthz(_: Request) -> Response:
        return Response(b"ok", 200, media_type="text/plain")

    async def readyz(request: Request) -> Response:
        # Upstream's shape: one "[+]name ok" / "[-]name failed: why" line per check (listed with ?verbose or
        # when one fails). Under `kemu up` the cluster's supervised processes are checks too (state, restarts).
        checks: list[tuple[str, str | None]] = []
        try:
            # One second, not the store client's retries: readiness answers now, whatever Redis is doing.
            await asyncio.wait_for(server.watches.client.ping(), 1.0)
            checks.append(("redis", None))
        except Exception as e:  # Redis unreachable: not ready, say why
            checks.append(("redis", str(e) or type(e).__name__))
        checks += part_checks()
        failed = any(why is not None for _, why in checks)
        if not failed and "verbose" not in request.query_params:
            return Response(b"ok", 200, media_type="text/plain")
        lines = [f"[+]{name} ok" if why is None else f"[-]{name} failed: {why}" for name, why in checks]
        lines.append(f"readyz check {'failed' if failed else 'passed'}")
        return Response("\n".join(lines).encode(), 500 if failed else 200, media_type="text/plain")

    async def openapi_v2(request: Request) -> Response:
        accept = request.headers.get("accept") or "*/*"
        if "protobuf" in accept and "json" not in accept:  # client-go's discovery.OpenAPISchema
            # Served as octet-stream like kube-openapi: Go cannot parse the "@" of the media type it asked for.
            return server._cached(request, discovery.openapi_v2_protobuf(), "application/octet-stream")
        return server._cached(request, discovery.openapi_v2_bytes(), "application/json")

    async def openapi_v3_index(request: Request) -> Response:
        return server._cached(request, discovery.openapi_v3_index(), "application/json")

    async def openapi_v3_doc(request: Request) -> Response:
        parts = [p for p in request.path_params["path"].split("/") if p]
        body = None
        if len(parts) == 2 and parts[0] == "api":
            body = discovery.openapi_v3_bytes("", parts[1])
        elif len(parts) == 3 and parts[0] == "apis":
            body = discovery.openapi_v3_bytes(parts[1], parts[2])
        if body is None:
            return status_response(errors.StatusError(404, "NotFound", "the server could not find the requested "
                                                                       "resource"))
        return server._cached(request, body, "application/json")

    app.add_route("/api", api_root, methods=["GET"])
    app.add_route("/apis", apis_root, methods=["GET"])
    app.add_route("/api/{path:path}", resource, methods=_METHODS)
    app.add_route("/apis/{path:path}", resource, methods=_METHODS)
    app.add_route("/version", version, methods=["GET"])
    for path in ("/healthz", "/livez"):
        app.add_route(path, healthz, methods=["GET"])
    app.add_route("/readyz", readyz, methods=["GET"])
    app.add_route("/openapi/v2", openapi_v2, methods=["GET"])
    app.add_route("/openapi/v3", openapi_v3_index, methods=["GET"])
    app.add_route("/openapi/v3/{path:path}", openapi_v3_doc, methods=["GET"])

    async def metrics(_: Request) -> Response:
        return Response(generate_latest(REGISTRY), 200, media_type=CONTENT_TYPE_LATEST)

    async def scrape_targets(request: Request) -> Response:
        # Prometheus http_sd: every kemu process that registered its /metrics in Redis, plus this
        # API server itself (as the address the scraper reached it on).
        found = await run_in_threadpool(discover, server.core.store.redis, server.settings.prefix)
        if own_target:
            return _json(found)  # every API server process registered itself (see lifespan)
        host = request.headers.get("host") or f"{server.settings.host}:{server.settings.port}"
        return _json([{"targets": [host], "labels": {"instance": "apiserver", "component": "apiserver"}}, *found])

    app.add_route("/metrics", metrics, methods=["GET"])
    app.add_route(SD_PATH, scrape_targets, methods=["GET"])

    @app.exception_handler(404)
    async def not_found(_: Request, __: Exception) -> Response:
        return status_response(errors.StatusError(404, "NotFound", "the server could not find the requested resource"))

    @app.exception_handler(405)
    async def not_allowed(request: Request, __: Exception) -> Response:
        return status_response(errors.method_not_allowed(
            f"the server does not allow this method on the requested resource: {request.method}"))

    authn = Authenticator(settings.token, server.core.store.redis, settings.prefix)
    return StoreUnavailableMiddleware(AuthMiddleware(app, authn, server.authorizer, settings.require_token))


def app_from_env() -> Any:
    """The uvicorn application factory for worker processes (settings from the environment)."""
    settings = ServerSettings.from_env()
    logging.basicConfig(level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return create_app(settings)
