"""Decode Kubernetes protobuf request bodies into the objects their JSON would be.

Why: client-go's typed clientsets send ``application/vnd.kubernetes.protobuf`` bodies for
built-in kinds since 1.31 (kubernetes#125314) and do not fall back to JSON, so ``kubectl
create namespace|configmap|deployment|priorityclass|poddisruptionbudget`` and client-go
programs (a scheduler's Binding, a controller's status update) reach kemu with protobuf.
kemu stores JSON-shaped objects, so this module turns such a body into exactly the dict the
same client would have sent as JSON; responses stay JSON (clients accept either).

The envelope (apimachinery ``pkg/runtime/serializer/protobuf/protobuf.go``): the 4 magic bytes
``k8s\\x00``, then a ``runtime.Unknown`` message (``pkg/runtime/generated.proto``):
``typeMeta`` = 1 (``apiVersion`` = 1, ``kind`` = 2), ``raw`` = 2 (the object's own message,
which carries no apiVersion/kind), ``contentEncoding`` = 3, ``contentType`` = 4. The kind
names the message ``raw`` holds; a missing kind defaults to the URL's, as upstream's
``copyKindDefaults`` does.

The schema is a table, :data:`emulator.apiserver.protobuf_schema.SCHEMA` (its docstring has the
notation); :data:`MESSAGES` is that table parsed once at import, with every type checked.

Messages whose JSON is not an object are converted after decoding (:data:`_CONVERTERS`):
``Time`` (seconds/nanos → RFC 3339 seconds, ``null`` when zero), ``MicroTime`` (RFC 3339
micro), ``Quantity`` (a message whose field 1 is the string form), ``IntOrString``,
``FieldsV1`` (raw JSON). Non-pointer sub-messages are always on the wire, so they come out
as ``{}`` (or ``null`` for a zero time) just as Go's JSON has them; empty repeated and map
fields come out absent (protobuf cannot tell nil from empty).

Errors instead of guesses: a field number a known message does not have is 415
``UnsupportedMediaType`` naming the message, the field and where it was. Upstream's generated
code skips unknown fields; kemu would then store an object missing data the client sent
(a field from a newer API version, or a message this table lacks) and say nothing, whereas
the same object as JSON keeps every field. A body that is not protobuf at all (no magic,
truncated, wrong wire type, bad UTF-8) is 400, like upstream's decode errors.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import orjson

from emulator.api import errors
from emulator.apiserver.protobuf_schema import SCHEMA, TOP_LEVEL

MAGIC = b"k8s\x00"
MEDIA_TYPE = "application/vnd.kubernetes.protobuf"

__all__ = ["MAGIC", "MEDIA_TYPE", "MESSAGES", "SCHEMA", "TOP_LEVEL", "Field", "Message", "decode"]

_VARINT = frozenset({"bool", "i32", "i64"})
SCALARS = _VARINT | {"str", "bytes", "raw"}
_U64 = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a message: what the schema line ``NUMBER JSONNAME TYPE`` says."""

    number: int
    json: str  # "" when the sub-message's fields are inlined into the parent's JSON
    type: str  # a scalar (SCALARS) or a message name
    repeated: bool = False
    map: bool = False  # map<string, type>: repeated entries {key = 1, value = 2}
    keep_zero: bool = False

    @property
    def wire_type(self) -> int:
        return 0 if self.type in _VARINT and not self.map else 2


@dataclass(frozen=True, slots=True)
class Message:
    name: str
    fields: dict[int, Field]  # in Go struct order, which is the order of the JSON keys


def _parse_field(token: str) -> Field:
    number, json_name, spec = token.split(" ")
    repeated = spec.startswith("[]")
    spec = spec.removeprefix("[]")
    is_map = spec.startswith("{") and spec.endswith("}")
    spec = spec.strip("{}")
    keep_zero = spec.endswith("!")
    return Field(int(number), "" if json_name == "..." else json_name, spec.rstrip("!"), repeated, is_map, keep_zero)


def _load(schema: dict[str, str]) -> dict[str, Message]:
    messages = {}
    for name, spec in schema.items():
        fields = [_parse_field(token) for token in spec.split(", ")]
        messages[name] = Message(name, {f.number: f for f in fields})
        if len(messages[name].fields) != len(fields):
            raise ValueError(f"protobuf schema: {name} repeats a field number")
    for message in messages.values():  # a typo in the table fails at import, not on some request
        for f in message.fields.values():
            if f.type not in SCALARS and f.type not in messages:
                raise ValueError(f"protobuf schema: {message.name}.{f.json} has unknown type {f.type}")
            if f.keep_zero and (f.type not in SCALARS or f.repeated or f.map):
                raise ValueError(f"protobuf schema: {message.name}.{f.json}: '!' is for singular scalars")
            if not f.json and (f.type in SCALARS or f.type in _CONVERTERS or f.repeated or f.map):
                raise ValueError(f"protobuf schema: {message.name} field {f.number}: only messages inline")
    return messages


class _Invalid(Exception):
    """The bytes are not a valid encoding (400)."""


class _Unsupported(Exception):
    """Valid protobuf that kemu's schema does not cover (415)."""


def decode(body: bytes, default_kind: str) -> dict[str, Any]:
    """The JSON-shaped object a protobuf request body holds.

    ``default_kind`` is the kind the URL expects: used when the envelope names none, and in
    400 messages. Raises 400 for bytes that are not protobuf, 415 for protobuf this schema
    does not cover.
    """
    try:
        if not body.startswith(MAGIC):
            # Upstream's wording (protobuf.go Decode).
            raise _Invalid(f"provided data does not appear to be a protobuf message, expected prefix {list(MAGIC)}")
        envelope = _message(MESSAGES["Unknown"], body[len(MAGIC):], "")
        type_meta = envelope.get("typeMeta") or {}
        api_version, kind = type_meta.get("apiVersion", ""), type_meta.get("kind", "") or default_kind
        if envelope.get("contentEncoding"):
            raise _Unsupported(f"content encoding {envelope['contentEncoding']!r} in the envelope")
        if envelope.get("contentType", MEDIA_TYPE) != MEDIA_TYPE:
            raise _Unsupported(f"content type {envelope['contentType']!r} in the envelope")
        expected = TOP_LEVEL.get(kind)
        if expected is None or (expected and api_version and api_version != expected):
            raise _Unsupported(f"kemu has no protobuf schema for {api_version or '?'} {kind}")
        obj = _message(MESSAGES[kind], envelope.get("raw", b""), "")
    except _Invalid as e:
        raise errors.bad_request(f"the object provided is unrecognized (must be of type {default_kind}): "
                                 f"invalid protobuf: {e}") from None
    except _Unsupported as e:
        raise errors.StatusError(415, "UnsupportedMediaType", f"the body of the request was in an unknown format: "
                                 f"{MEDIA_TYPE}: {e}; send this object as application/json") from None
    head = {"kind": kind, "apiVersion": api_version or expected} if api_version or expected else {"kind": kind}
    return {**head, **obj}


# ---------------------------------------------------------------------------- wire format
def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while pos < len(buf):
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & _U64, pos  # Go keeps the low 64 bits of a 10-byte varint
        shift += 7
        if shift >= 70:
            raise _Invalid("varint longer than 10 bytes")
    raise _Invalid("truncated varint")


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value) for each field: an int for varints, bytes otherwise."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise _Invalid("field number 0")
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 2:
            size, pos = _varint(buf, pos)
            if size > end - pos:
                raise _Invalid("truncated length-delimited field")
            value, pos = buf[pos:pos + size], pos + size
        elif wire in (1, 5):  # fixed64 / fixed32: no Kubernetes field uses them, but they are valid protobuf
            size = 8 if wire == 1 else 4
            if size > end - pos:
                raise _Invalid("truncated fixed-size field")
            value, pos = buf[pos:pos + size], pos + size
        else:  # 3/4 are proto2 groups (never generated for Kubernetes types), 6/7 do not exist
            raise _Invalid(f"wire type {wire}")
        yield number, wire, value


def _packed(buf: bytes) -> list[int]:
    values, pos = [], 0
    while pos < len(buf):
        value, pos = _varint(buf, pos)
        values.append(value)
    return values


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


# ---------------------------------------------------------------------------- messages
def _message(message: Message, buf: bytes, path: str) -> Any:
    """Decode one message; ``path`` (JSON path of the message) is for error messages."""
    seen: dict[int, list[Any]] = {}
    for number, wire, value in _fields(buf):
        field = message.fields.get(number)
        if field is None:
            raise _Unsupported(f"field {number} of {message.name} (at {path or 'the top level'}) is not in "
                               "kemu's protobuf schema")
        if wire == field.wire_type:
            seen.setdefault(number, []).append(value)
        elif wire == 2 and field.repeated and field.type in _VARINT:  # packed repeated numbers
            seen.setdefault(number, []).extend(_packed(value))
        else:
            raise _Invalid(f"{_join(path, field.json or field.type)} ({message.name} field {number}) has wire type "
                           f"{wire}, want {field.wire_type}")
    out: dict[str, Any] = {}
    for number, field in message.fields.items():
        values = seen.get(number)
        if values is None:
            continue
        where = _join(path, field.json)
        if field.map:
            out[field.json] = dict(_entry(message, field, v, where) for v in values)
        elif field.repeated:
            out[field.json] = [_value(field.type, v, f"{where}[{i}]") for i, v in enumerate(values)]
        elif field.type in MESSAGES:
            # A singular message sent more than once is merged, which protobuf defines as
            # decoding the concatenation.
            value = _value(field.type, b"".join(values), where)
            if field.json:
                out[field.json] = value
            else:
                out.update(value)
        else:
            value = _scalar(field.type, values[-1], where)  # the last of repeated singular scalars wins
            if value or field.keep_zero:
                out[field.json] = value
    convert = _CONVERTERS.get(message.name)
    return convert(out, path) if convert else out


def _entry(message: Message, field: Field, buf: bytes, path: str) -> tuple[str, Any]:
    """One map<string, T> entry: a message with key = 1 and value = 2."""
    key, value = "", None
    for number, wire, v in _fields(buf):
        if number not in (1, 2):
            raise _Unsupported(f"field {number} of a {message.name}.{field.json} map entry (at {path}) is not in "
                               "kemu's protobuf schema")
        if wire != (0 if number == 2 and field.type in _VARINT else 2):
            raise _Invalid(f"{path}: map entry field {number} has wire type {wire}")
        if number == 1:
            key = _scalar("str", v, path)
        else:
            value = v
    if value is None:  # an absent value is the zero value
        value = 0 if field.type in _VARINT else b""
    return key, _value(field.type, value, f"{path}[{key}]")


def _value(type_: str, raw: Any, path: str) -> Any:
    message = MESSAGES.get(type_)
    return _message(message, raw, path) if message else _scalar(type_, raw, path)


def _scalar(type_: str, raw: Any, path: str) -> Any:
    if type_ == "str":
        try:
            return raw.decode()
        except UnicodeDecodeError:
            raise _Invalid(f"{path}: string is not UTF-8") from None
    if type_ == "bytes":
        return base64.b64encode(raw).decode("ascii")  # Go's JSON form of []byte
    if type_ == "raw":
        return raw
    if type_ == "bool":
        return raw != 0
    if type_ == "i32":  # Go's int32(x): negatives arrive as 10-byte two's complement
        raw &= 0xFFFFFFFF
        return raw - (1 << 32) if raw >= 1 << 31 else raw
    return raw - (1 << 64) if raw >= 1 << 63 else raw  # i64


# ---------------------------------------------------------------------------- non-object JSON forms
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_GO_ZERO_TIME = -62135596800  # time.Time{} (0001-01-01T00:00:00Z) in Unix seconds: JSON null


def _instant(timestamp: dict[str, int], path: str) -> datetime | None:
    # meta/v1 time_proto.go: a zero time is written as an empty message; otherwise
    # time.Unix(seconds, nanos), which normalises nanos outside [0, 1e9).
    if not timestamp:
        return None
    seconds, nanos = divmod(timestamp.get("seconds", 0) * 1_000_000_000 + timestamp.get("nanos", 0), 1_000_000_000)
    if seconds == _GO_ZERO_TIME and nanos == 0:
        return None
    try:
        return _EPOCH + timedelta(seconds=seconds, microseconds=nanos // 1000)
    except OverflowError:
        raise _Invalid(f"{path}: time outside years 1-9999") from None


def _rfc3339(t: datetime) -> str:
    return f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}"


def _time(timestamp: dict[str, int], path: str) -> str | None:
    t = _instant(timestamp, path)  # meta/v1 time.go MarshalJSON: RFC 3339, whole seconds, UTC
    return None if t is None else _rfc3339(t) + "Z"


def _micro_time(timestamp: dict[str, int], path: str) -> str | None:
    t = _instant(timestamp, path)  # meta/v1 micro_time.go: RFC3339Micro, truncated to microseconds
    return None if t is None else f"{_rfc3339(t)}.{t.microsecond:06d}Z"


def _quantity(q: dict[str, str], path: str) -> str:
    # resource/quantity_proto.go: field 1 is the string form; an empty message is the zero Quantity.
    if "string" not in q:
        return "0"
    if not q["string"]:
        raise _Invalid(f"{path}: empty quantity")
    return q["string"]


def _int_or_string(v: dict[str, Any], path: str) -> int | str:
    kind = v.get("type", 0)  # intstr.go: Type 0 is Int, 1 is String
    if kind not in (0, 1):
        raise _Invalid(f"{path}: IntOrString type {kind}")
    return v.get("intVal", 0) if kind == 0 else v.get("strVal", "")


def _fields_v1(v: dict[str, bytes], path: str) -> Any:
    try:  # FieldsV1.Raw holds the JSON of the field set, and is its JSON form
        return orjson.loads(v.get("Raw", b""))
    except orjson.JSONDecodeError:
        raise _Invalid(f"{path}: FieldsV1 is not JSON") from None


_CONVERTERS: dict[str, Callable[[Any, str], Any]] = {
    "Time": _time, "MicroTime": _micro_time, "Quantity": _quantity, "IntOrString": _int_or_string,
    "FieldsV1": _fields_v1, "RawExtension": _fields_v1,  # both hold raw JSON, which is their JSON form
    # authentication/v1 ExtraValue: a repeated string in protobuf, a plain list in JSON.
    "ExtraValue": lambda v, path: v.get("items") or [],
}

MESSAGES: dict[str, Message] = _load(SCHEMA)
