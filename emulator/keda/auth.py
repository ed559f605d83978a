"""TriggerAuthentication resolution (kedacore/keda ``pkg/scaling/resolver/scale_resolvers.go``).

A trigger's ``authenticationRef`` names a TriggerAuthentication in the ScaledObject's
namespace (or, with ``kind: ClusterTriggerAuthentication``, a cluster-scoped one). Its
``secretTargetRef`` entries (``parameter``, ``name``, ``key``) read Secrets — of the
object's namespace for a TriggerAuthentication, of ``KEDA_CLUSTER_OBJECT_NAMESPACE``
(``keda``) for a ClusterTriggerAuthentication — and ``spec.secretTargetRef`` parameters
become the scaler's auth parameters (``password``, ``username`` ...). A missing object is
upstream's error text, ``triggerauthentications.keda.sh "<name>" not found``.
"""

from __future__ import annotations

import base64
from typing import Any

from emulator.api import errors, kinds
from emulator.api.kinds import CLUSTERTRIGGERAUTHENTICATION, TRIGGERAUTHENTICATION
from emulator.api.types import Obj
from emulator.keda.scalers.base import ScalerError

CLUSTER_OBJECT_NAMESPACE = "keda"


def _secret_value(store: Any, namespace: str, name: str, key: str) -> str:
    try:
        secret_kind = kinds.by_resource("secrets")
        secret = store.get(secret_kind, namespace, name)
    except errors.StatusError as e:
        raise ScalerError(f"error resolving secret {namespace}/{name}: {e.message}") from None
    data = secret.get("data") or {}
    if key in data:
        return base64.b64decode(data[key]).decode()
    string_data = secret.get("stringData") or {}
    if key in string_data:
        return str(string_data[key])
    raise ScalerError(f"error resolving secret {namespace}/{name}: no key {key!r}")


def resolve(store: Any, trigger: Obj, namespace: str, deps: set[tuple[str, str, str]] | None = None
            ) -> tuple[dict[str, str], str]:
    """The auth parameters of ``trigger`` and the ``<kind>/<name>`` it used ("" without a ref). ``deps``, when
    given, collects what was read as (resource, namespace, name): the (Cluster)TriggerAuthentication and its
    Secrets — so the operator can build the scalers again when one of them changes."""
    ref = trigger.get("authenticationRef")
    if not isinstance(ref, dict) or not ref.get("name"):
        return {}, ""
    kind_name = ref.get("kind") or "TriggerAuthentication"
    kind = CLUSTERTRIGGERAUTHENTICATION if kind_name == "ClusterTriggerAuthentication" else TRIGGERAUTHENTICATION
    secret_ns = namespace if kind.namespaced else CLUSTER_OBJECT_NAMESPACE
    if deps is not None:
        deps.add((kind.resource, namespace if kind.namespaced else "", str(ref["name"])))
    try:
        auth = store.get(kind, namespace if kind.namespaced else None, ref["name"])
    except errors.StatusError as e:
        if e.code == 404:
            raise ScalerError(f'error getting triggerAuth: {kind.resource} "{ref["name"]}" not found') from None
        raise ScalerError(f"error getting triggerAuth: {e.message}") from None
    spec = auth.get("spec") or {}
    params: dict[str, str] = {}
    for entry in spec.get("secretTargetRef") or []:
        if deps is not None:
            deps.add(("secrets", secret_ns, str(entry["name"])))
        params[str(entry["parameter"])] = _secret_value(store, secret_ns, str(entry["name"]), str(entry["key"]))
    return params, f"{kind_name}/{ref['name']}"
