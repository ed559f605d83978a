"""EndpointSlice validation: ``pkg/apis/discovery/validation`` (``ValidateEndpointSlice``)."""

from __future__ import annotations

import ipaddress

from emulator.api.errors import Cause
from emulator.api.names import dns1123_label_errors, dns1123_subdomain_errors
from emulator.api.types import Obj
from emulator.server.validation.field import (
    FIELD_IMMUTABLE,
    dict_at,
    invalid,
    list_at,
    not_supported,
    required,
)
from emulator.server.validation.registry import register

ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")
# pkg/apis/discovery/validation: maxEndpoints, maxAddresses, maxPorts.
MAX_ENDPOINTS, MAX_ADDRESSES, MAX_PORTS = 1000, 100, 20000


def too_many(causes: list[Cause], path: str, count: int, most: int) -> None:
    """apimachinery ``field.TooMany``."""
    causes.append(Cause(path, f"Too many: {count}: must have at most {most} items", "FieldValueTooMany"))


def _check_address(causes: list[Cause], path: str, address: object, address_type: str) -> None:
    if address_type == "FQDN":
        for msg in dns1123_subdomain_errors(str(address)):
            invalid(causes, path, address, msg)
        return
    try:
        ip = ipaddress.ip_address(str(address))
    except ValueError:
        invalid(causes, path, address, "must be a valid IP address")
        return
    if (ip.version == 4) != (address_type == "IPv4"):
        invalid(causes, path, address, f"must be an {address_type} address")


@register("endpointslices.discovery.k8s.io")
def _validate_endpoint_slice(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    address_type = obj.get("addressType")
    if not address_type:
        required(causes, "addressType")
    elif address_type not in ADDRESS_TYPES:
        not_supported(causes, "addressType", address_type, ADDRESS_TYPES)
    endpoints = list_at(causes, "endpoints", obj.get("endpoints"))
    if len(endpoints) > MAX_ENDPOINTS:
        too_many(causes, "endpoints", len(endpoints), MAX_ENDPOINTS)
    for i, raw_endpoint in enumerate(endpoints):
        p = f"endpoints[{i}]"
        endpoint = dict_at(causes, p, raw_endpoint)
        addresses = list_at(causes, f"{p}.addresses", endpoint.get("addresses"))
        if not addresses:
            required(causes, f"{p}.addresses", "must contain at least 1 address")
        elif len(addresses) > MAX_ADDRESSES:
            too_many(causes, f"{p}.addresses", len(addresses), MAX_ADDRESSES)
        if address_type in ADDRESS_TYPES:
            for j, address in enumerate(addresses):
                _check_address(causes, f"{p}.addresses[{j}]", address, address_type)
        if endpoint.get("hostname"):
            for msg in dns1123_label_errors(str(endpoint["hostname"])):
                invalid(causes, f"{p}.hostname", endpoint["hostname"], msg)
    ports = list_at(causes, "ports", obj.get("ports"))
    if len(ports) > MAX_PORTS:
        too_many(causes, "ports", len(ports), MAX_PORTS)
    for i, raw_port in enumerate(ports):
        port = dict_at(causes, f"ports[{i}]", raw_port)
        number = port.get("port")
        if number is not None and not (isinstance(number, int) and 1 <= number <= 65535):
            invalid(causes, f"ports[{i}].port", number, "must be between 1 and 65535, inclusive")
        protocol = port.get("protocol", "TCP")
        if protocol not in ("SCTP", "TCP", "UDP"):
            not_supported(causes, f"ports[{i}].protocol", protocol, ("SCTP", "TCP", "UDP"))
    if old is not None and address_type != old.get("addressType"):
        invalid(causes, "addressType", address_type, FIELD_IMMUTABLE)
