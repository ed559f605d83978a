"""kemu's Kubernetes-compatible HTTP API server.

``kubectl``, the official Python client and any client-go program talk to
kemu through this package; kemu's own components skip HTTP and call the same
:class:`~emulator.server.core.ServerCore` directly, so both see one truth.

Layout (each module's docstring says more):

* :mod:`.routing` — turns a URL into a :class:`~.routing.RequestInfo` (verb,
  group, version, namespace, resource, name, subresource) the way upstream's
  ``RequestInfoFactory`` does. The route table is the kind registry: adding a
  kind to :mod:`emulator.api.kinds` serves it with no route code.
* :mod:`.handlers` — one function per verb (get, list, create, update, patch,
  delete, deletecollection) and per subresource (status, scale, binding,
  eviction, log) on top of the server core and :mod:`.patch`.
* :mod:`.watch` — HTTP watches streamed from the Redis watch streams with
  ``redis.asyncio``, so a watch holds no thread.
* :mod:`.tables` — ``meta.k8s.io/v1 Table`` output with upstream's printer
  columns, as data per kind.
* :mod:`.discovery` — ``/version``, ``/api``, ``/apis``, aggregated discovery
  and the OpenAPI v2/v3 documents, all generated from the kind registry;
  :mod:`.openapi` makes their schemas from the protobuf field table (and
  checks ``fieldValidation``), :mod:`.openapi_proto` encodes v2 as protobuf.
* :mod:`.content` — content negotiation: request bodies (JSON, YAML for
  apply), ``Accept`` headers (JSON, Table, PartialObjectMetadata, YAML).
* :mod:`.auth` — authentication (bearer tokens; users in :mod:`.users`),
  impersonation and RBAC authorization (:mod:`emulator.auth`) of every
  request; :mod:`.rbacsource` keeps the authorizer current with the store;
  :mod:`.reviews` answers access reviews and "who am I", and the
  exec/attach/port-forward/proxy "not emulated" Status.
* :mod:`.kubeconfig` / :mod:`.tls` — the kubeconfig ``kemu up`` writes (a
  context per user) and the generated CA and serving certificate.
* :mod:`.app` — the FastAPI application factory; :mod:`.process` runs it
  (uvicorn, one or several worker processes); ``python -m emulator.apiserver``.
"""
