"""Request bodies decoded as upstream's typed JSON decoder would: wrong JSON types and over-deep nesting are 400.

``openapi.check_types`` walks a body against the kind's schema (Go ``encoding/json``'s
``UnmarshalTypeError``: "json: cannot unmarshal <value> into Go struct field <Struct>.<path> of
type <type>"); ``check_depth`` bounds the nesting of any request document.
"""

from __future__ import annotations

from typing import Any

import pytest

from emulator.api import kinds
from emulator.api.errors import StatusError
from emulator.apiserver import content
from emulator.apiserver.openapi import check_types
from emulator.apiserver.patch.jsonvalue import MAX_DEPTH, check_depth


@pytest.mark.parametrize(("kind", "body", "message"), [
    (kinds.ROLEBINDING, {"subjects": [{"kind": "User", "name": 1.5}]},
     "json: cannot unmarshal number 1.5 into Go struct field Subject.subjects.name of type string"),
    (kinds.POD, {"spec": {"containers": "app"}},
     "json: cannot unmarshal string into Go struct field PodSpec.spec.containers of type []v1.Container"),
    (kinds.POD, {"spec": {"containers": [{"name": "a", "ports": [{"containerPort": 2**31}]}]}},
     "json: cannot unmarshal number 2147483648 into Go struct field ContainerPort.spec.containers.ports.containerPort "
     "of type int32"),
    (kinds.POD, {"metadata": {"labels": {"app": True}}},
     "json: cannot unmarshal bool into Go struct field ObjectMeta.metadata.labels of type string"),
    (kinds.DEPLOYMENT, {"spec": {"replicas": 2.5}},
     "json: cannot unmarshal number 2.5 into Go struct field DeploymentSpec.spec.replicas of type int32"),
    (kinds.DEPLOYMENT, {"spec": {"template": []}},
     "json: cannot unmarshal array into Go struct field DeploymentSpec.spec.template of type v1.PodTemplateSpec"),
    (kinds.NODE, {"spec": {"unschedulable": "yes"}},
     "json: cannot unmarshal string into Go struct field NodeSpec.spec.unschedulable of type bool"),
    (kinds.POD, {"metadata": {"creationTimestamp": "yesterday"}},
     'parsing time "yesterday" as "2006-01-02T15:04:05Z07:00"'),
    (kinds.POD, {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": ["1"]}}}]}},
     "json: cannot unmarshal array into Go struct field ResourceRequirements.spec.containers.resources.requests of "
     "type resource.Quantity"),
], ids=["float-into-string", "string-into-list", "int32-overflow", "bool-into-map-value", "fraction-into-int32",
        "array-into-struct", "string-into-bool", "bad-time", "array-into-quantity"])
def test_wrong_json_types_are_400_naming_the_field(kind: kinds.Kind, body: dict[str, Any], message: str) -> None:
    with pytest.raises(StatusError) as exc:
        check_types(kind, body)
    assert exc.value.code == 400
    assert exc.value.message.startswith(f'{kind.kind} in version "v1" cannot be handled as a {kind.kind}: ')
    assert message in exc.value.message


@pytest.mark.parametrize(("kind", "body"), [
    (kinds.POD, {"spec": {"containers": [{"name": "a", "resources": {"requests": {"cpu": "1e1000", "memory": 5}}}]}}),
    (kinds.POD, {"spec": {"containers": None, "nodeName": None}, "metadata": {"labels": None}}),
    (kinds.DEPLOYMENT, {"spec": {"strategy": {"rollingUpdate": {"maxSurge": "25%", "maxUnavailable": 1}}}}),
    (kinds.POD, {"spec": {"unknownField": [1, 2, {"x": 1}]}}),
    (kinds.VERTICALPODAUTOSCALER, {"spec": {"targetRef": "anything"}}),
], ids=["quantities-are-strings-or-numbers", "null-is-the-zero-value", "int-or-string", "unknown-fields-left-to-"
        "fieldValidation", "custom-resources-have-no-schema"])
def test_values_go_would_decode_pass(kind: kinds.Kind, body: dict[str, Any]) -> None:
    check_types(kind, body)


def nested(depth: int) -> Any:
    doc: Any = "leaf"
    for _ in range(depth):
        doc = {"a": [doc]} if depth % 2 else {"a": doc}
    return doc


@pytest.mark.parametrize(("depth", "refused"), [(MAX_DEPTH - 1, False), (MAX_DEPTH, False), (MAX_DEPTH + 1, True),
                                                (5000, True)], ids=["under", "at-bound", "over", "far-over"])
def test_nesting_is_bounded(depth: int, refused: bool) -> None:
    doc = {"a": "x"}
    node = doc
    for _ in range(depth - 1):
        node["a"] = {"a": "x"}
        node = node["a"]
    if refused:
        with pytest.raises(StatusError) as exc:
            check_depth(doc, "the body")
        assert exc.value.code == 400 and f"exceeded max depth of {MAX_DEPTH}" in exc.value.message
    else:
        check_depth(doc, "the body")


@pytest.mark.parametrize("body", [b"[" * 200 + b"]" * 200, b'{"a":' * 150 + b"1" + b"}" * 150],
                         ids=["arrays", "objects"])
def test_a_deep_body_is_400_before_anything_reads_it(body: bytes) -> None:
    with pytest.raises(StatusError) as exc:
        content.decode_object(body, "application/json", "ConfigMap")
    assert exc.value.code == 400 and "must be of type ConfigMap" in exc.value.message


def test_a_scalar_document_has_no_depth() -> None:
    check_depth(None, "the body")
    check_depth("text", "the body", b'"text"')
