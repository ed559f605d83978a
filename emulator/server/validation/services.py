"""Validation of Secret, ServiceAccount, Service and Endpoints: ``pkg/apis/core/validation``.

``ValidateSecret``/``ValidateSecretUpdate`` (keys, size, per-type required keys, immutability),
``ValidateServiceAccount``, ``ValidateService``/``ValidateServiceUpdate`` (types, ports,
selector, ClusterIP immutability) and ``ValidateEndpoints``. Allocation of ClusterIPs and
NodePorts is the registry's (:mod:`emulator.server.services`), after validation.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from typing import Any

from emulator.api.errors import Cause
from emulator.api.names import dns1123_label_errors, dns1123_subdomain_errors
from emulator.api.types import Obj
from emulator.server.validation.core import _configmap_key_errors
from emulator.server.validation.field import (
    FIELD_IMMUTABLE,
    check_labels,
    dict_at,
    duplicate,
    forbidden,
    int_at,
    invalid,
    list_at,
    not_supported,
    required,
    too_long,
)
from emulator.server.validation.registry import register

MAX_SECRET_SIZE = 1024 * 1024  # core/validation MaxSecretSize
SECRET_REQUIRED_KEYS = {
    # pkg/apis/core/types.go: the data keys each built-in secret type must carry.
    "kubernetes.io/dockercfg": (".dockercfg",),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
    "kubernetes.io/ssh-auth": ("ssh-privatekey",),
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
}
SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
PROTOCOLS = ("SCTP", "TCP", "UDP")
_IANA_SVC_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_PORT_RANGE = "must be between 1 and 65535, inclusive"
_DNS1035_RE = re.compile(r"[a-z]([-a-z0-9]*[a-z0-9])?")
_DNS1035_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
                "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
                "regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


@register("secrets")
def _validate_secret(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    data = dict_at(causes, "data", obj.get("data"))
    total = 0
    for key, value in data.items():
        for msg in _configmap_key_errors(key):
            invalid(causes, "data", key, msg)
        if not isinstance(value, str):
            invalid(causes, f"data[{key}]", value, "must be a base64-encoded string")
            continue
        try:
            total += len(base64.b64decode(value, validate=True))
        except (binascii.Error, ValueError):
            invalid(causes, f"data[{key}]", "<value omitted>", "illegal base64 data")
    if total > MAX_SECRET_SIZE:
        too_long(causes, "data", MAX_SECRET_SIZE)
    stype = obj.get("type") or "Opaque"
    for key in SECRET_REQUIRED_KEYS.get(stype, ()):
        if key not in data:
            required(causes, f"data[{key}]")
    if stype == "kubernetes.io/service-account-token":
        if not ((obj.get("metadata") or {}).get("annotations") or {}).get("kubernetes.io/service-account.name"):
            required(causes, "metadata.annotations[kubernetes.io/service-account.name]")
    elif stype == "kubernetes.io/basic-auth" and "username" not in data and "password" not in data:
        required(causes, "data[username]")
    if old is not None:
        if stype != (old.get("type") or "Opaque"):
            invalid(causes, "type", stype, FIELD_IMMUTABLE)
        if old.get("immutable") is True:
            if obj.get("immutable") is not True:
                forbidden(causes, "immutable", "field is immutable when `immutable` is set")
            if data != (old.get("data") or {}):
                forbidden(causes, "data", "field is immutable when `immutable` is set")


@register("serviceaccounts")
def _validate_service_account(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    for i, ref in enumerate(list_at(causes, "secrets", obj.get("secrets"))):
        if not isinstance(ref, dict) or not ref.get("name"):
            required(causes, f"secrets[{i}].name")
    for i, ref in enumerate(list_at(causes, "imagePullSecrets", obj.get("imagePullSecrets"))):
        if not isinstance(ref, dict) or not ref.get("name"):
            required(causes, f"imagePullSecrets[{i}].name")


def _check_port_number(causes: list[Cause], path: str, value: Any) -> None:
    number = int_at(causes, path, value)
    if number is not None and not 1 <= number <= 65535:
        invalid(causes, path, number, _PORT_RANGE)


def _check_ip(causes: list[Cause], path: str, value: Any) -> bool:
    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        invalid(causes, path, value, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")
        return False
    return True


@register("services")
def _validate_service(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    name = (obj.get("metadata") or {}).get("name")
    if isinstance(name, str) and name and not (_DNS1035_RE.fullmatch(name) and len(name) <= 63):
        # ValidateServiceName: NameIsDNS1035Label (stricter than ObjectMeta's subdomain rule).
        invalid(causes, "metadata.name", name, _DNS1035_MSG)
    spec = dict_at(causes, "spec", obj.get("spec"))
    stype = spec.get("type", "ClusterIP")
    if stype not in SERVICE_TYPES:
        not_supported(causes, "spec.type", stype, SERVICE_TYPES)
    headless = spec.get("clusterIP") == "None"
    ports = list_at(causes, "spec.ports", spec.get("ports"))
    if stype == "ExternalName":
        name = spec.get("externalName")
        if not name:
            required(causes, "spec.externalName")
        else:
            for msg in dns1123_subdomain_errors(str(name).rstrip(".")):
                invalid(causes, "spec.externalName", name, msg)
    elif not ports and not headless:
        required(causes, "spec.ports")
    names: set[str] = set()
    seen: set[tuple[Any, Any]] = set()
    for i, raw_port in enumerate(ports):
        p = f"spec.ports[{i}]"
        port = dict_at(causes, p, raw_port)
        name = port.get("name") or ""
        if len(ports) > 1 and not name:
            required(causes, f"{p}.name")
        elif name:
            for msg in dns1123_label_errors(name):
                invalid(causes, f"{p}.name", name, msg)
            if name in names:
                duplicate(causes, f"{p}.name", name)
            names.add(name)
        _check_port_number(causes, f"{p}.port", port.get("port"))
        protocol = port.get("protocol", "TCP")
        if protocol not in PROTOCOLS:
            not_supported(causes, f"{p}.protocol", protocol, PROTOCOLS)
        key = (port.get("port"), protocol)
        if key in seen:
            duplicate(causes, p, {"port": key[0], "protocol": key[1]})
        seen.add(key)
        target = port.get("targetPort")
        if isinstance(target, str):
            if not _IANA_SVC_NAME.match(target) or len(target) > 15 or "--" in target:
                invalid(causes, f"{p}.targetPort", target, "must contain only lowercase alphanumerics and '-', "
                                                           "at most 15 characters")
        elif target is not None:
            _check_port_number(causes, f"{p}.targetPort", target)
        node_port = port.get("nodePort")
        if node_port:
            if stype not in ("NodePort", "LoadBalancer"):
                forbidden(causes, f"{p}.nodePort", "may not be used when `type` is 'ClusterIP'")
            else:
                _check_port_number(causes, f"{p}.nodePort", node_port)
    selector = dict_at(causes, "spec.selector", spec.get("selector"))
    if selector:
        check_labels(causes, "spec.selector", selector)
    affinity = spec.get("sessionAffinity", "None")
    if stype != "ExternalName" and affinity not in ("ClientIP", "None"):
        not_supported(causes, "spec.sessionAffinity", affinity, ("ClientIP", "None"))
    ip = spec.get("clusterIP")
    if ip and ip != "None":
        _check_ip(causes, "spec.clusterIPs[0]", ip)
    if headless and stype in ("NodePort", "LoadBalancer"):
        invalid(causes, "spec.clusterIPs[0]", "None", f"may not be set to 'None' for {stype} services")
    for i, ext in enumerate(list_at(causes, "spec.externalIPs", spec.get("externalIPs"))):
        _check_ip(causes, f"spec.externalIPs[{i}]", ext)
    if old is not None:
        ospec = old.get("spec") or {}
        # ValidateServiceUpdate: the ClusterIP may change only to or from ExternalName.
        if ospec.get("type") != "ExternalName" and stype != "ExternalName" and ospec.get("clusterIP") \
                and spec.get("clusterIP") != ospec.get("clusterIP"):
            invalid(causes, "spec.clusterIPs[0]", spec.get("clusterIP"), "may not change once set")


@register("endpoints")
def _validate_endpoints(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    for i, raw_subset in enumerate(list_at(causes, "subsets", obj.get("subsets"))):
        p = f"subsets[{i}]"
        subset = dict_at(causes, p, raw_subset)
        addresses = list_at(causes, f"{p}.addresses", subset.get("addresses"))
        not_ready = list_at(causes, f"{p}.notReadyAddresses", subset.get("notReadyAddresses"))
        if not addresses and not not_ready:
            required(causes, p, "must specify `addresses` or `notReadyAddresses`")
        for field_name, items in (("addresses", addresses), ("notReadyAddresses", not_ready)):
            for j, address in enumerate(items):
                ip = dict_at(causes, f"{p}.{field_name}[{j}]", address).get("ip")
                _check_ip(causes, f"{p}.{field_name}[{j}].ip", ip)
        for j, raw in enumerate(list_at(causes, f"{p}.ports", subset.get("ports"))):
            port = dict_at(causes, f"{p}.ports[{j}]", raw)
            _check_port_number(causes, f"{p}.ports[{j}].port", port.get("port"))
            protocol = port.get("protocol", "TCP")
            if protocol not in PROTOCOLS:
                not_supported(causes, f"{p}.ports[{j}].protocol", protocol, PROTOCOLS)
