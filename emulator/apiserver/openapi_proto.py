"""``/openapi/v2`` in protobuf: the Swagger 2.0 document as gnostic's ``openapi.v2.Document``.

client-go fetches OpenAPI v2 only as protobuf
(``Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf``,
``discovery.OpenAPISchema``) and kubectl's field-validation verifier falls back
to it for any group version ``/openapi/v3`` does not list, so a kind kemu does
not serve must get this document (and then upstream's ``no matches for kind``),
not a download error. The encoder writes the parts of the JSON document kemu
builds (:func:`emulator.apiserver.discovery.openapi_v2_document`) that clients
read, with the field numbers of gnostic's ``openapiv2/OpenAPIv2.proto``:
``Document`` (swagger, info, paths, definitions), ``PathItem`` operations,
their parameters and responses, and ``Schema`` ($ref, format, description,
type, items, properties, additionalProperties, vendor extensions as YAML).
"""

from __future__ import annotations

from typing import Any

import orjson

MEDIA_TYPE = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _str(number: int, value: str) -> bytes:
    return _bytes(number, value.encode()) if value else b""


def _bool(number: int, value: bool) -> bytes:
    return _varint(number << 3) + b"\x01" if value else b""


def _extensions(number: int, obj: dict[str, Any]) -> bytes:
    # NamedAny {name = 1, value = Any {yaml = 2}}: JSON is YAML.
    return b"".join(_bytes(number, _str(1, k) + _bytes(2, _str(2, orjson.dumps(v).decode())))
                    for k, v in obj.items() if k.startswith("x-"))


def schema(s: dict[str, Any]) -> bytes:
    out = [_str(1, s.get("$ref", "")), _str(2, s.get("format", "")), _str(4, s.get("description", ""))]
    extra = s.get("additionalProperties")
    if isinstance(extra, dict):
        out.append(_bytes(21, _bytes(1, schema(extra))))
    if "type" in s:
        out.append(_bytes(22, _str(1, s["type"])))
    if isinstance(s.get("items"), dict):
        out.append(_bytes(23, _bytes(1, schema(s["items"]))))
    props = s.get("properties")
    if props:
        out.append(_bytes(25, b"".join(_bytes(1, _str(1, k) + _bytes(2, schema(v))) for k, v in props.items())))
    out.append(_extensions(31, s))
    return b"".join(out)


def _parameter(p: dict[str, Any]) -> bytes:
    if p.get("in") == "body":
        body = _str(2, p["name"]) + _str(3, "body") + _bool(4, bool(p.get("required"))) + _bytes(5, schema(p["schema"]))
        return _bytes(1, _bytes(1, body))  # ParametersItem.parameter → Parameter.body_parameter
    query = _str(2, p.get("in", "query")) + _str(4, p["name"]) + _str(6, p.get("type", "string")) + \
        _bool(20, bool(p.get("uniqueItems")))
    # ParametersItem.parameter → Parameter.non_body_parameter → query_parameter_sub_schema
    return _bytes(1, _bytes(2, _bytes(3, query)))


def _operation(op: dict[str, Any]) -> bytes:
    out = [b"".join(_str(1, t) for t in op.get("tags", [])), _str(5, op.get("operationId", "")),
           b"".join(_str(6, t) for t in op.get("produces", [])), b"".join(_str(7, t) for t in op.get("consumes", [])),
           b"".join(_bytes(8, _parameter(p)) for p in op.get("parameters", []))]
    responses = b""
    for code, r in op.get("responses", {}).items():
        response = _str(1, r.get("description", ""))
        if "schema" in r:
            response += _bytes(2, _bytes(1, schema(r["schema"])))
        responses += _bytes(1, _str(1, code) + _bytes(2, _bytes(1, response)))
    out.append(_bytes(9, responses))
    out.append(_extensions(13, op))
    return b"".join(out)


_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}


def document(doc: dict[str, Any]) -> bytes:
    info = doc.get("info", {})
    out = [_str(1, doc.get("swagger", "2.0")), _bytes(2, _str(1, info.get("title", "")) +
                                                     _str(2, info.get("version", "")))]
    paths = b""
    for path, item in doc.get("paths", {}).items():
        ops = b"".join(_bytes(_METHODS[m], _operation(op)) for m, op in item.items() if m in _METHODS)
        paths += _bytes(2, _str(1, path) + _bytes(2, ops))
    out.append(_bytes(8, paths))
    out.append(_bytes(9, b"".join(_bytes(1, _str(1, name) + _bytes(2, schema(s)))
                                  for name, s in doc.get("definitions", {}).items())))
    return b"".join(out)
