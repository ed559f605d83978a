"""Label and field selectors: parsing, matching, canonical form and errors, against upstream behaviour.

Expected error texts are the ones upstream apimachinery produces for the same
input (labels/selector.go, fields/selector.go, util/validation), so a client
sees the message a real API server would send.
"""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from emulator.api import errors, kinds
from emulator.api.labels import (
    DOES_NOT_EXIST,
    DOUBLE_EQUALS,
    EQUALS,
    EXISTS,
    GREATER_THAN,
    IN,
    LESS_THAN,
    NOT_EQUALS,
    NOT_IN,
)
from emulator.api.selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector

WEB = {"app": "web", "tier": "frontend", "rank": "7"}
QNAME_RULE = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
    "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
VALUE_RULE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)

# ----------------------------------------------------------------------------- label selector: matching

MATCH_CASES: list[tuple[str, dict[str, str] | None, bool]] = [
    ("", WEB, True),
    ("", None, True),
    ("app=web", WEB, True),
    ("app=db", WEB, False),
    ("app=web", None, False),
    ("app==web", WEB, True),
    ("app==db", WEB, False),
    ("app!=db", WEB, True),
    ("app!=web", WEB, False),
    ("missing!=x", WEB, True),
    ("app in (db,web)", WEB, True),
    ("app in (db,cache)", WEB, False),
    ("missing in (db,web)", WEB, False),
    ("app in (web)", WEB, True),
    ("app notin (db,cache)", WEB, True),
    ("app notin (db,web)", WEB, False),
    ("missing notin (db,web)", WEB, True),
    ("app", WEB, True),
    ("missing", WEB, False),
    ("!missing", WEB, True),
    ("!app", WEB, False),
    ("rank>5", WEB, True),
    ("rank>7", WEB, False),
    ("rank<8", WEB, True),
    ("rank<7", WEB, False),
    ("missing>1", WEB, False),
    ("app>1", WEB, False),
    ("rank>6,rank<8", WEB, True),
    ("app=web,tier=frontend", WEB, True),
    ("app=web,tier=backend", WEB, False),
    ("app=web,app=db", WEB, False),
    ("app=web,tier in (frontend,backend),!canary,rank notin (1,2)", WEB, True),
    ("app=web,tier in (frontend,backend),!canary,rank notin (1,7)", WEB, False),
    ("  app = web ,\ttier\nin(frontend) ", WEB, True),
    ("empty=", {"empty": ""}, True),
    ("empty=", WEB, False),
    ("empty in ()", {"empty": ""}, True),
    ("empty notin ()", {"empty": ""}, False),
    ("in in (in)", {"in": "in"}, True),
    ("notin notin (notin)", {"notin": "x"}, True),
    ("example.com/role=db", {"example.com/role": "db"}, True),
    ("example.com/role=db", {"role": "db"}, False),
]


@pytest.mark.parametrize(("selector", "labels", "expected"), MATCH_CASES, ids=[
    f"{c[0] or 'empty'!r}-{'match' if c[2] else 'nomatch'}-{i}" for i, c in enumerate(MATCH_CASES)])
def test_label_selector_matches(selector: str, labels: dict[str, str] | None, expected: bool) -> None:
    assert LabelSelector.parse(selector).matches(labels) is expected


INT_LABEL_CASES = [
    ("n>5", "10", True),
    ("n>5", "1_0", False),  # Python's int() would accept this; Go's ParseInt does not
    ("n>5", " 10", False),
    ("n>5", "+10", True),  # ParseInt accepts a sign
    ("n<0", "-3", True),
    ("n>5", "99999999999999999999", False),  # overflows int64: not an integer for upstream
    ("n<5", "abc", False),
]


@pytest.mark.parametrize(("selector", "value", "expected"), INT_LABEL_CASES,
                         ids=["int", "underscore", "blank", "plus", "negative", "overflow", "text"])
def test_integer_comparison_parses_label_values_like_go(selector: str, value: str, expected: bool) -> None:
    assert LabelSelector.parse(selector).matches({"n": value}) is expected


# ----------------------------------------------------------------------------- label selector: canonical form

STR_CASES = [
    ("", ""),
    ("b=2,a=1", "a=1,b=2"),
    ("a==1", "a==1"),
    ("a != 1", "a!=1"),
    ("x in (foo,,baz),y,z notin ()", "x in (,baz,foo),y,z notin ()"),
    ("x in (b,a,b)", "x in (a,b)"),
    ("!z, y", "y,!z"),
    ("n > 5, m < 2", "m<2,n>5"),
    ("a=", "a="),
]


@pytest.mark.parametrize(("selector", "canonical"), STR_CASES,
                         ids=["empty", "sorted-by-key", "double-equals", "not-equals", "sets", "set-dedup",
                              "exists", "gt-lt", "empty-value"])
def test_label_selector_str_is_canonical(selector: str, canonical: str) -> None:
    parsed = LabelSelector.parse(selector)
    assert str(parsed) == canonical
    # The canonical form parses back to an equal selector.
    assert LabelSelector.parse(canonical) == parsed


def test_requirements_expose_operator_constants_sorted_by_key() -> None:
    sel = LabelSelector.parse("z notin (b,a),y in (q),x!=1,w==2,v=3,!u,t,s>1,r<9")
    assert sel.requirements == (
        ("r", LESS_THAN, ("9",)),
        ("s", GREATER_THAN, ("1",)),
        ("t", EXISTS, ()),
        ("u", DOES_NOT_EXIST, ()),
        ("v", EQUALS, ("3",)),
        ("w", DOUBLE_EQUALS, ("2",)),
        ("x", NOT_EQUALS, ("1",)),
        ("y", IN, ("q",)),
        ("z", NOT_IN, ("a", "b")),
    )


EXACT_CASES = [
    ("app=web,tier!=db", "app", "web"),
    ("app==web", "app", "web"),
    ("app in (web)", "app", "web"),
    ("app in (web,db)", "app", None),
    ("app!=web", "app", None),
    ("app", "app", None),
    ("tier=x", "app", None),
]


@pytest.mark.parametrize(("selector", "key", "expected"), EXACT_CASES,
                         ids=["equals", "double-equals", "in-one", "in-two", "not-equals", "exists", "other-key"])
def test_label_selector_exact(selector: str, key: str, expected: str | None) -> None:
    assert LabelSelector.parse(selector).exact(key) == expected


# ----------------------------------------------------------------------------- label selector: parse errors

PARSE_ERRORS = [
    ("a b", "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt"),
    ("a ~ b", "unable to parse requirement: found '~', expected: in, notin, =, ==, !=, gt, lt"),
    ("a,", "found '', expected: identifier after ','"),
    (",a", "found ',', expected: !, identifier, or 'end of string'"),
    ("(", "found '(', expected: !, identifier, or 'end of string'"),
    ("a in (x", "unable to parse requirement: found '', expected: ',' or ')'"),
    ("a in (x y)", "unable to parse requirement: found 'y', expected: ',' or ')'"),
    ("a in x", "unable to parse requirement: found 'x' expected: '('"),
    ("a in (x))", "found ')', expected: ',' or 'end of string'"),
    ("a notin (=)", "unable to parse requirement: found '=', expected: ',', ')' or identifier"),
    ("a=b=c", "found '=', expected: ',' or 'end of string'"),
    ("!a=b", "found '=', expected: ',' or 'end of string'"),
    ("!", "unable to parse requirement: found '', expected: identifier"),
    ("a=!b", "unable to parse requirement: found '!', expected: identifier"),
    ("x>=1", "unable to parse requirement: found '=', expected: identifier"),
    ("a~b", f'unable to parse requirement: <nil>: Invalid value: "a~b": name part {QNAME_RULE}'),
    ("-a=b", f'unable to parse requirement: <nil>: Invalid value: "-a": name part {QNAME_RULE}'),
    ("a" * 64, "unable to parse requirement: <nil>: Invalid value: \"" + "a" * 64
     + '": name part must be no more than 63 characters'),
    ("/a", 'unable to parse requirement: <nil>: Invalid value: "/a": prefix part must be non-empty'),
    ("Example.com/a", 'unable to parse requirement: <nil>: Invalid value: "Example.com/a": prefix part a lowercase '
     "RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end "
     "with an alphanumeric character (e.g. 'example.com', regex used for validation is "
     "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"),
    ("a/b/c", f'unable to parse requirement: <nil>: Invalid value: "a/b/c": a qualified name {QNAME_RULE} with an '
     "optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"),
    ("app=a_", f'unable to parse requirement: values[0][app]: Invalid value: "a_": {VALUE_RULE}'),
    ("app=" + "v" * 64, "unable to parse requirement: values[0][app]: Invalid value: \"" + "v" * 64
     + '": must be no more than 63 characters'),
    ("x>a", "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, "
     "the value must be an integer"),
    ("x>a_", "unable to parse requirement: [values[0]: Invalid value: \"a_\": for 'Gt', 'Lt' operators, the value "
     f'must be an integer, values[0][x]: Invalid value: "a_": {VALUE_RULE}]'),
]


@pytest.mark.parametrize(("selector", "message"), PARSE_ERRORS, ids=[
    "unknown-operator-word", "unknown-operator-symbol", "trailing-comma", "leading-comma", "open-paren-first",
    "unbalanced-paren", "missing-comma-in-set", "set-without-paren", "extra-close-paren", "operator-in-set",
    "chained-equals", "not-exists-with-value", "bang-alone", "missing-value", "greater-equal", "bad-key-char",
    "bad-key-start", "key-too-long", "empty-prefix", "uppercase-prefix", "two-slashes", "bad-value",
    "value-too-long", "gt-not-integer", "aggregated-errors"])
def test_label_selector_parse_errors(selector: str, message: str) -> None:
    with pytest.raises(errors.StatusError) as info:
        LabelSelector.parse(selector)
    assert (info.value.code, info.value.reason) == (400, "BadRequest")
    assert info.value.message == message


# ----------------------------------------------------------------------------- label selector: from_dict

FROM_DICT_CASES: list[tuple[dict[str, Any], dict[str, str] | None, bool]] = [
    ({}, WEB, True),
    ({}, None, True),
    ({"matchLabels": {}, "matchExpressions": []}, WEB, True),
    ({"matchLabels": None}, WEB, True),
    ({"matchLabels": {"app": "web"}}, WEB, True),
    ({"matchLabels": {"app": "db"}}, WEB, False),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["frontend", "x"]}]}, WEB, True),
    ({"matchExpressions": [{"key": "tier", "operator": "In", "values": ["x"]}]}, WEB, False),
    ({"matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["frontend"]}]}, WEB, False),
    ({"matchExpressions": [{"key": "gone", "operator": "NotIn", "values": ["frontend"]}]}, WEB, True),
    ({"matchExpressions": [{"key": "tier", "operator": "Exists"}]}, WEB, True),
    ({"matchExpressions": [{"key": "gone", "operator": "Exists"}]}, WEB, False),
    ({"matchExpressions": [{"key": "gone", "operator": "DoesNotExist"}]}, WEB, True),
    ({"matchExpressions": [{"key": "app", "operator": "DoesNotExist", "values": []}]}, WEB, False),
    ({"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "tier", "operator": "NotIn", "values": ["a"]}]},
     WEB, True),
]


@pytest.mark.parametrize(("sel", "labels", "expected"), FROM_DICT_CASES, ids=[
    "empty-dict-everything", "empty-dict-no-labels", "empty-lists", "null-match-labels", "match-labels",
    "match-labels-miss", "in", "in-miss", "notin", "notin-missing-key", "exists", "exists-miss",
    "does-not-exist", "does-not-exist-miss", "labels-and-expressions"])
def test_from_dict_matches(sel: dict[str, Any], labels: dict[str, str] | None, expected: bool) -> None:
    assert LabelSelector.from_dict(sel).matches(labels) is expected


def test_from_dict_none_matches_nothing_but_empty_dict_matches_everything() -> None:
    nothing, everything = LabelSelector.from_dict(None), LabelSelector.from_dict({})
    assert not nothing.matches(WEB) and not nothing.matches(None) and not nothing.matches({})
    assert everything.matches(WEB) and everything.matches(None)
    # Upstream: Nothing() is not Empty(), so a store must still filter with it.
    assert (nothing.empty, everything.empty) == (False, True)
    assert str(nothing) == str(everything) == ""
    assert nothing != everything
    assert nothing is LabelSelector.nothing() and everything is LabelSelector.everything()


def test_from_dict_str_matches_parsed_form() -> None:
    sel = LabelSelector.from_dict({
        "matchLabels": {"b": "2", "a": "1"},
        "matchExpressions": [{"key": "c", "operator": "NotIn", "values": ["y", "x"]},
                             {"key": "d", "operator": "DoesNotExist"}],
    })
    assert str(sel) == "a=1,b=2,c notin (x,y),!d"
    assert sel.exact("a") == "1"


FROM_DICT_ERRORS: list[tuple[Any, str, list[tuple[str, str, str]]]] = [
    ({"matchExpressions": [{"key": "a", "operator": "Equals", "values": ["x"]}]}, "spec.selector",
     [("spec.selector.matchExpressions[0].operator", 'Invalid value: "Equals": not a valid selector operator',
       "FieldValueInvalid")]),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": []}]}, "spec.selector",
     [("spec.selector.matchExpressions[0].values",
       "Required value: must be specified when `operator` is 'In' or 'NotIn'", "FieldValueRequired")]),
    ({"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}, "",
     [("matchExpressions[0].values",
       "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'", "FieldValueForbidden")]),
    ({"matchExpressions": [{"key": "a", "operator": "Exists"}, {"key": "b!", "operator": "Exists"}]}, "sel",
     [("sel.matchExpressions[1].key", f'Invalid value: "b!": name part {QNAME_RULE}', "FieldValueInvalid")]),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["ok", "bad value"]}]}, "sel",
     [("sel.matchExpressions[0].values[1]", f'Invalid value: "bad value": {VALUE_RULE}', "FieldValueInvalid")]),
    ({"matchLabels": {"a": "-x"}}, "spec.selector",
     [("spec.selector.matchLabels", f'Invalid value: "-x": {VALUE_RULE}', "FieldValueInvalid")]),
    ({"matchLabels": {"a b": "x"}}, "spec.selector",
     [("spec.selector.matchLabels", f'Invalid value: "a b": name part {QNAME_RULE}', "FieldValueInvalid")]),
    ({"matchLabels": {"a": "-"}, "matchExpressions": [{"key": "k", "operator": "Bogus"}]}, "p",
     [("p.matchLabels", f'Invalid value: "-": {VALUE_RULE}', "FieldValueInvalid"),
      ("p.matchExpressions[0].operator", 'Invalid value: "Bogus": not a valid selector operator',
       "FieldValueInvalid")]),
    ("app=web", "spec.selector",
     [("spec.selector", 'Invalid value: "app=web": must be an object', "FieldValueInvalid")]),
]


@pytest.mark.parametrize(("sel", "path", "causes"), FROM_DICT_ERRORS, ids=[
    "unknown-operator", "in-without-values", "exists-with-values", "bad-key", "bad-expression-value",
    "bad-match-label-value", "bad-match-label-key", "all-problems-reported", "not-an-object"])
def test_from_dict_errors_are_422_with_field_paths(sel: Any, path: str, causes: list[tuple[str, str, str]]) -> None:
    with pytest.raises(errors.StatusError) as info:
        LabelSelector.from_dict(sel, path)
    err = info.value
    assert (err.code, err.reason, err.kind) == (422, "Invalid", "LabelSelector")
    assert [(c.field, c.message, c.reason) for c in err.causes] == causes
    assert err.message.startswith("LabelSelector is invalid: ")
    assert f"{causes[0][0]}: {causes[0][1]}" in err.message


def test_from_set_matches_exactly_the_given_labels() -> None:
    sel = LabelSelector.from_set({"tier": "frontend", "app": "web"})
    assert str(sel) == "app=web,tier=frontend"
    assert sel.matches(WEB) and not sel.matches({"app": "web"})
    assert LabelSelector.from_set({}).empty and LabelSelector.from_set(None).matches(None)


# ----------------------------------------------------------------------------- field selectors

POD: dict[str, Any] = {
    "metadata": {"name": "web-1", "namespace": "default", "labels": {"app": "web"}},
    "spec": {"nodeName": "node-1", "schedulerName": "default-scheduler"},
    "status": {"phase": "Running"},
}
PENDING_POD: dict[str, Any] = {"metadata": {"name": "web-2", "namespace": "prod"}, "spec": {}, "status": {}}
POD_FIELDS = kinds.POD.selectable_fields

FIELD_MATCH_CASES: list[tuple[str, dict[str, Any], bool]] = [
    ("", POD, True),
    ("spec.nodeName=node-1", POD, True),
    ("spec.nodeName==node-1", POD, True),
    ("spec.nodeName=node-2", POD, False),
    ("spec.nodeName!=node-2", POD, True),
    ("spec.nodeName!=node-1", POD, False),
    ("spec.nodeName=", PENDING_POD, True),  # unscheduled: a missing field reads as ""
    ("spec.nodeName!=", PENDING_POD, False),
    ("spec.nodeName=", POD, False),
    ("status.phase=Running", POD, True),
    ("status.phase!=Succeeded,status.phase!=Failed", POD, True),
    ("status.phase=Pending", PENDING_POD, False),
    ("metadata.namespace=default", POD, True),
    ("metadata.namespace=default", PENDING_POD, False),
    ("metadata.name=web-1,metadata.namespace=default", POD, True),
    ("metadata.name=web-1,metadata.namespace=prod", POD, False),
    ("spec.nodeName=node-1,,", POD, True),
]


@pytest.mark.parametrize(("selector", "obj", "expected"), FIELD_MATCH_CASES, ids=[
    "empty", "equals", "double-equals", "equals-miss", "not-equals", "not-equals-miss", "missing-is-empty",
    "missing-not-empty", "present-not-empty", "phase", "phase-not-terminal", "phase-missing", "namespace",
    "namespace-miss", "name-and-namespace", "conjunction-miss", "empty-terms-ignored"])
def test_field_selector_matches(selector: str, obj: dict[str, Any], expected: bool) -> None:
    assert FieldSelector.parse(selector, POD_FIELDS).matches(obj) is expected


def test_field_selector_escaped_value_matches_literal_characters() -> None:
    sel = FieldSelector.parse(r"metadata.name=a\,b\=c\\d,metadata.namespace=ns")
    assert sel.exact("metadata.name") == "a,b=c\\d"
    assert sel.matches({"metadata": {"name": "a,b=c\\d", "namespace": "ns"}})
    assert not sel.matches({"metadata": {"name": "a", "namespace": "ns"}})
    # String() re-escapes, so the canonical form round-trips.
    assert str(sel) == r"metadata.name=a\,b\=c\\d,metadata.namespace=ns"
    assert FieldSelector.parse(str(sel)) == sel


BOOL_CASES = [
    ({"spec": {"unschedulable": True}}, "spec.unschedulable=true", True),
    ({"spec": {"unschedulable": True}}, "spec.unschedulable=false", False),
    ({"spec": {"unschedulable": False}}, "spec.unschedulable=false", True),
    ({"spec": {}}, "spec.unschedulable=false", True),  # Go's zero value: an absent bool is false
    ({"spec": {}}, "spec.unschedulable=", False),
]


@pytest.mark.parametrize(("node", "selector", "expected"), BOOL_CASES,
                         ids=["true", "true-vs-false", "false", "absent-is-false", "absent-not-empty"])
def test_field_selector_booleans_compare_as_go_strings(node: dict[str, Any], selector: str, expected: bool) -> None:
    assert FieldSelector.parse(selector, kinds.NODE.selectable_fields).matches(node) is expected


SOURCE_CASES = [
    ({"source": {"component": "kubelet"}, "reportingComponent": "other"}, "kubelet"),
    ({"source": {}, "reportingComponent": "kube-scheduler"}, "kube-scheduler"),
    ({}, ""),
]


@pytest.mark.parametrize(("event", "expected"), SOURCE_CASES, ids=["component", "reporting-fallback", "none"])
def test_event_source_field_follows_upstream_field_set(event: dict[str, Any], expected: str) -> None:
    sel = FieldSelector.parse(f"source={expected}", kinds.EVENT.selectable_fields)
    assert sel.matches(event)
    assert not FieldSelector.parse("source=nobody", kinds.EVENT.selectable_fields).matches(event)


def test_field_selector_non_scalar_and_non_object_paths_read_as_empty() -> None:
    sel = FieldSelector.parse("spec.nodeName=", POD_FIELDS)
    assert sel.matches({"spec": {"nodeName": {"nested": "x"}}})
    assert sel.matches({"spec": "not-an-object"})
    assert sel.matches({})
    assert FieldSelector.parse("status.podIP=7", POD_FIELDS).matches({"status": {"podIP": 7}})


FIELD_STR_CASES = [
    ("", ""),
    ("status.phase==Running", "status.phase=Running"),
    ("status.phase=Running,spec.nodeName!=n1", "spec.nodeName!=n1,status.phase=Running"),
    ("metadata.name=x\\,y", "metadata.name=x\\,y"),
]


@pytest.mark.parametrize(("selector", "canonical"), FIELD_STR_CASES,
                         ids=["empty", "double-equals-normalised", "sorted", "escaped"])
def test_field_selector_str(selector: str, canonical: str) -> None:
    assert str(FieldSelector.parse(selector, POD_FIELDS)) == canonical


def test_field_selector_exact_and_requirements() -> None:
    sel = FieldSelector.parse("spec.nodeName=node-1,status.phase!=Failed,metadata.namespace==ns", POD_FIELDS)
    assert sel.exact("spec.nodeName") == "node-1"
    assert sel.exact("metadata.namespace") == "ns"
    assert sel.exact("status.phase") is None  # != is not an exact match
    assert sel.exact("metadata.name") is None
    assert sel.requirements == (
        ("metadata.namespace", EQUALS, "ns"),
        ("spec.nodeName", EQUALS, "node-1"),
        ("status.phase", NOT_EQUALS, "Failed"),
    )
    assert not sel.empty
    assert FieldSelector.parse("").empty and FieldSelector.parse(",,").empty


FIELD_ERRORS = [
    ("spec.nodeName", (), "invalid selector: 'spec.nodeName'; can't understand 'spec.nodeName'"),
    ("metadata.name=a,oops", (), "invalid selector: 'metadata.name=a,oops'; can't understand 'oops'"),
    ("metadata.name=a\\x", (), "invalid field selector: invalid escape sequence: \\x"),
    ("metadata.name=a\\", (), "invalid field selector: invalid escape sequence: \\"),
    ("metadata.name=a=b", (), "invalid field selector: unescaped character in value: ="),
    ("metadata.name!==b", (), "invalid field selector: unescaped character in value: ="),
    ("spec.nodeName=n1", (), '"spec.nodeName" is not a known field selector: only "metadata.name", '
     '"metadata.namespace"'),
    ("spec.foo=x", ("spec.nodeName", "status.phase"), '"spec.foo" is not a known field selector: only '
     '"metadata.name", "metadata.namespace", "spec.nodeName", "status.phase"'),
    ("metadata.name =x", (), '"metadata.name " is not a known field selector: only "metadata.name", '
     '"metadata.namespace"'),
]


@pytest.mark.parametrize(("selector", "allowed", "message"), FIELD_ERRORS, ids=[
    "no-operator", "one-bad-term", "bad-escape", "trailing-backslash", "unescaped-equals",
    "unescaped-after-not-equals", "unknown-field", "unknown-field-lists-allowed", "whitespace-is-not-trimmed"])
def test_field_selector_errors(selector: str, allowed: tuple[str, ...], message: str) -> None:
    with pytest.raises(errors.StatusError) as info:
        FieldSelector.parse(selector, allowed)
    assert (info.value.code, info.value.reason, info.value.message) == (400, "BadRequest", message)


# ----------------------------------------------------------------------------- shared properties


def test_cached_parsers_share_instances_and_do_not_cache_errors() -> None:
    assert parse_label_selector("app=web,tier") is parse_label_selector("app=web,tier")
    assert parse_field_selector("spec.nodeName=n", POD_FIELDS) is parse_field_selector("spec.nodeName=n", POD_FIELDS)
    for _ in range(2):
        with pytest.raises(errors.StatusError):
            parse_label_selector("a in (")
        with pytest.raises(errors.StatusError):
            parse_field_selector("spec.nodeName=n", ())


SELECTORS = [
    LabelSelector.parse("a=b,c in (d,e),!f,g>1"),
    LabelSelector.nothing(),
    LabelSelector.everything(),
    FieldSelector.parse(r"metadata.name=x\,y,spec.nodeName!=n", POD_FIELDS),
]


@pytest.mark.parametrize("selector", SELECTORS, ids=["label", "label-nothing", "label-everything", "field"])
def test_selectors_are_immutable_hashable_and_picklable(selector: LabelSelector | FieldSelector) -> None:
    # Assign to the real storage slot: only the class's own guard can refuse it.
    slot = "_reqs" if isinstance(selector, LabelSelector) else "_terms"
    with pytest.raises(AttributeError, match="immutable"):
        setattr(selector, slot, ())
    copy = pickle.loads(pickle.dumps(selector))
    assert copy == selector and hash(copy) == hash(selector)
    assert str(copy) == str(selector) and copy.empty == selector.empty
    obj_labels = {"a": "b", "c": "d", "g": "2"}
    if isinstance(selector, LabelSelector):
        assert copy.matches(obj_labels) == selector.matches(obj_labels)
    else:
        assert copy.matches(POD) == selector.matches(POD)
