"""Content negotiation: what a request body is, and what the client wants back.

Request bodies (upstream ``runtime/serializer`` + ``handlers/rest.go``
``limitedReadBody``):

* at most 3 MiB (upstream ``maxRequestBodyBytes``), else 413;
* ``application/json`` (or no ``Content-Type``) and ``application/yaml`` decode
  to an object; so does ``application/vnd.kubernetes.protobuf``, through
  :mod:`emulator.apiserver.protobuf` (client-go's typed clientsets send it for
  built-in kinds since 1.31, kubernetes#125314: ``kubectl create namespace``,
  ``kubectl create deployment``...); anything else is 415;
* bodies are parsed from raw bytes with orjson, never through pydantic.

Responses: :func:`negotiate` reads ``Accept`` the way upstream's
``negotiation.NegotiateOutputMediaType`` does, in the client's order of
preference: ``as=Table`` (``meta.k8s.io`` v1 or v1beta1), ``as=PartialObjectMetadata``
/ ``PartialObjectMetadataList``, ``as=APIGroupDiscoveryList`` (aggregated
discovery, ``apidiscovery.k8s.io`` v2 or v2beta1), plain JSON, YAML. Responses are never
protobuf (clients that send it accept JSON back): asking only for protobuf (or
for nothing kemu knows) is 406.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson
import yaml

from emulator.api import errors
from emulator.apiserver import protobuf
from emulator.apiserver.patch.jsonvalue import check_depth

MAX_BODY_BYTES = 3 * 1024 * 1024
JSON = "application/json"
YAML = "application/yaml"
PROTOBUF = "application/vnd.kubernetes.protobuf"


@dataclass(frozen=True)
class Wanted:
    """The representation the client asked for."""

    media: str = JSON  # application/json | application/yaml
    as_kind: str = ""  # "" | Table | PartialObjectMetadata | PartialObjectMetadataList | APIGroupDiscoveryList
    version: str = ""  # v1 / v1beta1 for tables and metadata, v2 / v2beta1 for discovery

    @property
    def table(self) -> bool:
        return self.as_kind == "Table"

    @property
    def partial(self) -> bool:
        return self.as_kind.startswith("PartialObjectMetadata")


PLAIN_JSON = Wanted()


def _params(part: str) -> tuple[str, dict[str, str]]:
    media, *rest = (p.strip() for p in part.split(";"))
    params = {}
    for p in rest:
        k, _, v = p.partition("=")
        params[k.strip().lower()] = v.strip()
    return media.lower(), params


@lru_cache(maxsize=256)
def negotiate(accept: str, discovery: bool = False) -> Wanted:
    """Pick the first representation in ``accept`` that kemu can produce; 406 if none.

    ``discovery`` says whether the endpoint can answer aggregated discovery; elsewhere an
    ``as=APIGroupDiscoveryList`` entry is skipped like any other kind the endpoint cannot give.
    """
    if not accept:
        return PLAIN_JSON
    for part in accept.split(","):
        media, params = _params(part)
        if media in ("*/*", "application/*"):
            return PLAIN_JSON
        if media not in (JSON, YAML):
            continue
        as_kind, group, version = params.get("as", ""), params.get("g", ""), params.get("v", "")
        if not as_kind:
            return Wanted(media)
        if as_kind == "Table" and group == "meta.k8s.io" and version in ("v1", "v1beta1") and media == JSON:
            return Wanted(JSON, "Table", version)
        if (as_kind in ("PartialObjectMetadata", "PartialObjectMetadataList") and group == "meta.k8s.io"
                and version in ("v1", "v1beta1") and media == JSON):
            return Wanted(JSON, as_kind, version)
        if (discovery and as_kind == "APIGroupDiscoveryList" and group == "apidiscovery.k8s.io"
                and version in ("v2", "v2beta1") and media == JSON):
            return Wanted(JSON, as_kind, version)
    raise errors.StatusError(406, "NotAcceptable",
                             f"only the following media types are accepted: {JSON}, {YAML}")


def check_length(content_length: str | None) -> None:
    """413 before reading a body whose declared length is over the limit."""
    if content_length and content_length.isdigit() and int(content_length) > MAX_BODY_BYTES:
        raise too_large()


def too_large() -> errors.StatusError:
    # Upstream apierrors.NewRequestEntityTooLargeError("limit is 3145728").
    return errors.too_large(f"Request entity too large: limit is {MAX_BODY_BYTES}")


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def decode_object(body: bytes, content_type: str | None, kind_name: str) -> Any:
    """Decode a create/update body: JSON, YAML or protobuf; 415 for other media types, 400 when malformed."""
    media = media_type(content_type)
    if media in ("", JSON, "*/*"):
        try:
            doc = orjson.loads(body)
        except orjson.JSONDecodeError as e:
            # Upstream's wording for a create or update whose body is not JSON.
            raise errors.bad_request(f"the object provided is unrecognized (must be of type {kind_name}): "
                                     f"couldn't get version/kind; json parse error: {e}") from None
        check_depth(doc, f"the object provided is unrecognized (must be of type {kind_name})", body)
        return doc
    if media in (YAML, "application/x-yaml", "text/yaml"):
        try:
            doc = yaml.safe_load(body)
        except (yaml.YAMLError, RecursionError) as e:
            raise errors.bad_request(f"the object provided is unrecognized (must be of type {kind_name}): "
                                     f"error converting YAML to JSON: {e}") from None
        check_depth(doc, f"the object provided is unrecognized (must be of type {kind_name})")
        return doc
    if media == PROTOBUF:
        return protobuf.decode(body, kind_name)
    raise errors.unsupported_media_type(content_type or "")


def decode_options(body: bytes, content_type: str | None, what: str) -> dict[str, Any]:
    """Decode an optional options body (DeleteOptions); {} when empty."""
    if not body.strip():
        return {}
    media = media_type(content_type)
    if media == PROTOBUF:
        return protobuf.decode(body, what)
    if media not in ("", JSON, "*/*", YAML):
        raise errors.unsupported_media_type(content_type or "")
    try:
        value = orjson.loads(body) if media != YAML else yaml.safe_load(body)
    except (orjson.JSONDecodeError, yaml.YAMLError) as e:
        raise errors.bad_request(f"the body of the request could not be decoded as {what}: {e}") from None
    if not isinstance(value, dict):
        raise errors.bad_request(f"the body of the request must be a {what} object")
    return value


def encode(obj: Any, wanted: Wanted = PLAIN_JSON) -> tuple[bytes, str]:
    """Serialize a response body; returns (bytes, Content-Type)."""
    if wanted.media == YAML:
        return yaml.safe_dump(obj, sort_keys=False).encode(), YAML
    return orjson.dumps(obj), content_type_of(wanted)


def content_type_of(wanted: Wanted) -> str:
    if not wanted.as_kind:
        return JSON
    group = "apidiscovery.k8s.io" if wanted.as_kind == "APIGroupDiscoveryList" else "meta.k8s.io"
    return f"{JSON};g={group};v={wanted.version};as={wanted.as_kind}"
