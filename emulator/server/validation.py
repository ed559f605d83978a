"""Object validation with Kubernetes field paths.

Before the server core stores an object it calls :func:`validate`. An invalid
object is rejected with ``422 Invalid`` whose ``details.causes`` name every bad
field, the way kube-apiserver reports ``field.ErrorList`` through
``apierrors.NewInvalid``.

Design
------
* **Causes accumulate.** Every check appends :class:`~emulator.api.errors.Cause`
  objects to one list; nothing stops at the first problem, so a client sees all
  of them at once (upstream's ``allErrs = append(allErrs, ...)``).
* **Validators are a table keyed by resource** (``Kind.resource``). Adding a kind
  is one function and one :data:`VALIDATORS` entry; ObjectMeta is validated
  generically for every kind, with the name rule chosen per resource:

  ==================================  ===========================================================
  resource                            checks (beyond ObjectMeta)
  ==================================  ===========================================================
  ``pods``                            pod spec; on update, upstream's few mutable spec fields
  ``nodes``                           taints, capacity/allocatable quantities, providerID once set
  ``namespaces``                      name is a DNS-1123 label; spec.finalizers
  ``priorityclasses.scheduling...``   value, system- prefix, preemptionPolicy; value immutable
  ``limitranges``                     types, resource names, quantity ordering
  ``runtimeclasses.node.k8s.io``      handler, overhead.podFixed, scheduling; handler immutable
  ``poddisruptionbudgets.policy``     minAvailable xor maxUnavailable, selector
  ``deployments/replicasets/          selector vs template labels, template pod spec,
  daemonsets.apps``                   strategies; selector immutable
  ``configmaps``                      data/binaryData keys, total size
  ``persistentvolumes``,              access modes, capacity, reclaim policy, volume mode,
  ``persistentvolumeclaims``          node affinity; a claim's spec is frozen once created
  ``storageclasses.storage.k8s.io``   provisioner, policies, allowed topologies; mostly immutable
  ``events``, ``leases...``           ObjectMeta only
  ==================================  ===========================================================

* **Field paths** are plain strings in upstream's ``field.Path`` notation:
  ``.child`` for struct fields, ``[i]`` for list indexes and ``[key]`` for map
  keys (``spec.containers[0].resources.limits[cpu]``). Paths are built only when
  a cause is recorded, so a valid object pays for almost no string formatting.
* **Messages** mirror upstream ``field.Error.ErrorBody()`` (``Invalid value:
  "x": detail``, ``Required value``, ``Unsupported value: ...``), and the
  reasons are the upstream ``CauseType`` strings.
* **Speed.** This runs on every create (10,000 pods/s target). Regexes are
  precompiled, parsed quantities and well-formed names are memoised in bounded
  dicts, and no object is copied: the update checks compare the stored and
  the new dicts field by field.

Where upstream decodes into typed structs, kemu sees raw JSON; a value of the
wrong JSON type is reported as ``FieldValueTypeInvalid`` instead of the decode
error (400) upstream would return. Absent optional fields are left to
:mod:`emulator.server.defaults`; explicit bad values are rejected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any

from emulator.api import errors
from emulator.api.errors import Cause, render_value
from emulator.api.kinds import Kind
from emulator.api.names import (  # name formats, shared with the selector parser
    MEMO_LIMIT as _MEMO_LIMIT,
)
from emulator.api.names import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_value_errors,
    qualified_name_errors,
)
from emulator.api.names import max_len as _max_len
from emulator.api.names import regex_error as _regex_error
from emulator.api.quantity import Quantity, QuantityError, parse_quantity
from emulator.server.validation_autoscaling import validate_horizontal_pod_autoscaler

Obj = dict[str, Any]
Validator = Callable[[Obj, Obj | None, list[Cause]], None]

# --------------------------------------------------------------------------------------------
# Cause constructors: the ErrorBody() shapes of k8s.io/apimachinery/pkg/util/validation/field.
# --------------------------------------------------------------------------------------------

INVALID = "FieldValueInvalid"
REQUIRED = "FieldValueRequired"
FORBIDDEN = "FieldValueForbidden"
NOT_SUPPORTED = "FieldValueNotSupported"
DUPLICATE = "FieldValueDuplicate"
TOO_LONG = "FieldValueTooLong"
TYPE_INVALID = "FieldValueTypeInvalid"

FIELD_IMMUTABLE = "field is immutable"  # apimachinery api/validation FieldImmutableErrorMsg
IS_NEGATIVE = "must be greater than or equal to 0"  # api/validation IsNegativeErrorMsg
NOT_POSITIVE = "must be greater than zero"  # core/validation isNotPositiveErrorMsg
NOT_INTEGER = "must be an integer"  # core/validation isNotIntegerErrorMsg


def _invalid(causes: list[Cause], path: str, value: Any, detail: str) -> None:
    msg = f"Invalid value: {render_value(value)}: {detail}" if detail else f"Invalid value: {render_value(value)}"
    causes.append(Cause(path, msg, INVALID))


def _required(causes: list[Cause], path: str, detail: str = "") -> None:
    causes.append(Cause(path, f"Required value: {detail}" if detail else "Required value", REQUIRED))


def _forbidden(causes: list[Cause], path: str, detail: str) -> None:
    causes.append(Cause(path, f"Forbidden: {detail}" if detail else "Forbidden", FORBIDDEN))


def _not_supported(causes: list[Cause], path: str, value: Any, supported: Iterable[str]) -> None:
    allowed = ", ".join(json.dumps(s) for s in supported)
    causes.append(Cause(path, f"Unsupported value: {render_value(value)}: supported values: {allowed}", NOT_SUPPORTED))


def _duplicate(causes: list[Cause], path: str, value: Any, detail: str = "") -> None:
    msg = f"Duplicate value: {render_value(value)}"
    causes.append(Cause(path, f"{msg}: {detail}" if detail else msg, DUPLICATE))


def _too_long(causes: list[Cause], path: str, max_bytes: int) -> None:
    causes.append(Cause(path, f"Too long: must have at most {max_bytes} bytes", TOO_LONG))


def _wrong_type(causes: list[Cause], path: str, value: Any, expected: str) -> None:
    # Upstream rejects these while decoding; kemu holds raw JSON, so it reports them here.
    causes.append(Cause(path, f"Invalid value: {render_value(value)}: must be {expected}", TYPE_INVALID))


def _dict_at(causes: list[Cause], path: str, value: Any) -> Obj:
    """``value`` if it is a JSON object (or absent: ``{}``); otherwise record a type cause."""
    if isinstance(value, dict):
        return value
    if value is not None:
        _wrong_type(causes, path, value, "an object")
    return {}


def _list_at(causes: list[Cause], path: str, value: Any) -> list[Any]:
    if isinstance(value, list):
        return value
    if value is not None:
        _wrong_type(causes, path, value, "an array")
    return []


def _int_at(causes: list[Cause], path: str, value: Any) -> int | None:
    """``value`` if it is a JSON integer; ``None`` (with a type cause unless absent) otherwise."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if value is not None:
        _wrong_type(causes, path, value, "an integer")
    return None



_PERCENT_FMT = "[0-9]+%"
_PERCENT_RE = re.compile(_PERCENT_FMT)
_PERCENT_MSG = _regex_error("a valid percent string must be a numeric string followed by an ending '%'",
                            _PERCENT_FMT, "1%", "93%")

_CONFIGMAP_KEY_FMT = "[-._a-zA-Z0-9]+"
_CONFIGMAP_KEY_RE = re.compile(_CONFIGMAP_KEY_FMT)
_CONFIGMAP_KEY_MSG = _regex_error("a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                                  _CONFIGMAP_KEY_FMT, "key.name", "KEY_NAME", "key-name")

_PORT_NAME_CHARSET_RE = re.compile("[-a-z0-9]+")
_PORT_NAME_LETTER_RE = re.compile("[a-z]")

def _mask_trailing_dash(name: str) -> str:
    # api/validation/generic.go maskTrailingDash: a generateName may end in '-' (the random
    # suffix follows it). Upstream replaces the last two characters, which we copy.
    return name[:-2] + "a" if name.endswith("-") else name


def _port_name_errors(port: str) -> list[str]:
    """Upstream ``IsValidPortName`` (IANA service name)."""
    errs: list[str] = []
    if len(port) > 15:
        errs.append(_max_len(15))
    if not _PORT_NAME_CHARSET_RE.fullmatch(port):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not _PORT_NAME_LETTER_RE.search(port):
        errs.append("must contain at least one letter (a-z)")
    if "--" in port:
        errs.append("must not contain consecutive hyphens")
    if port and (port[0] == "-" or port[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def _configmap_key_errors(key: str) -> list[str]:
    """Upstream ``IsConfigMapKey``."""
    errs: list[str] = []
    if len(key) > 253:
        errs.append(_max_len(253))
    if not _CONFIGMAP_KEY_RE.fullmatch(key):
        errs.append(_CONFIGMAP_KEY_MSG)
    if key == ".":
        errs.append("must not be '.'")
    elif key == "..":
        errs.append("must not be '..'")
    elif key.startswith(".."):
        errs.append("must not start with '..'")
    return errs


def _port_num_error(port: int) -> str | None:
    return None if 1 <= port <= 65535 else "must be between 1 and 65535, inclusive"


# --------------------------------------------------------------------------------------------
# Generic field helpers (labels, selectors, int-or-percent).
# --------------------------------------------------------------------------------------------


def _check_label_name(causes: list[Cause], path: str, key: Any) -> None:
    """meta/v1/validation ``ValidateLabelName``: a qualified name."""
    if not isinstance(key, str):
        _wrong_type(causes, path, key, "a string")
        return
    for msg in qualified_name_errors(key):
        _invalid(causes, path, key, msg)


def _check_labels(causes: list[Cause], path: str, labels: Any) -> None:
    """meta/v1/validation ``ValidateLabels``: upstream reports every problem at the map's path."""
    for key, value in _dict_at(causes, path, labels).items():
        _check_label_name(causes, path, key)
        if not isinstance(value, str):
            _wrong_type(causes, path, value, "a string")
            continue
        for msg in label_value_errors(value):
            _invalid(causes, path, value, msg)



def _check_label_selector(causes: list[Cause], path: str, selector: Any) -> bool:
    """meta/v1/validation ``ValidateLabelSelector`` (strict label values). True if it can be evaluated."""
    n = len(causes)
    sel = _dict_at(causes, path, selector)
    _check_labels(causes, path + ".matchLabels", sel.get("matchLabels"))
    exprs_path = path + ".matchExpressions"
    for i, expr in enumerate(_list_at(causes, exprs_path, sel.get("matchExpressions"))):
        p = f"{exprs_path}[{i}]"
        if not isinstance(expr, dict):
            _wrong_type(causes, p, expr, "an object")
            continue
        op = expr.get("operator")
        values = _list_at(causes, p + ".values", expr.get("values"))
        if op in ("In", "NotIn"):
            if not values:
                _required(causes, p + ".values", "must be specified when `operator` is 'In' or 'NotIn'")
        elif op in ("Exists", "DoesNotExist"):
            if values:
                _forbidden(causes, p + ".values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        else:
            _invalid(causes, p + ".operator", op, "not a valid selector operator")
        _check_label_name(causes, p + ".key", expr.get("key", ""))
        for j, value in enumerate(values):
            if not isinstance(value, str):
                _wrong_type(causes, f"{p}.values[{j}]", value, "a string")
                continue
            for msg in label_value_errors(value):
                _invalid(causes, f"{p}.values[{j}]", value, msg)
    return len(causes) == n


def _selector_is_empty(selector: Obj) -> bool:
    return not selector.get("matchLabels") and not selector.get("matchExpressions")


def _selector_matches(selector: Obj, labels: Obj) -> bool:
    """``LabelSelectorAsSelector(sel).Matches(labels)`` for an already validated selector."""
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op = expr.get("key"), expr.get("operator")
        present = key in labels
        if op == "In":
            if not present or labels[key] not in (expr.get("values") or ()):
                return False
        elif op == "NotIn":
            if present and labels[key] in (expr.get("values") or ()):
                return False
        elif op == "Exists":
            if not present:
                return False
        elif op == "DoesNotExist" and present:
            return False
    return True


def _int_or_percent(value: Any) -> tuple[int | None, bool]:
    """(number, is_percent) for a well-formed IntOrString; (None, _) when malformed."""
    if isinstance(value, bool):
        return None, False
    if isinstance(value, int):
        return value, False
    if isinstance(value, str) and _PERCENT_RE.fullmatch(value):
        return int(value[:-1]), True
    return None, isinstance(value, str)


def _check_positive_int_or_percent(causes: list[Cause], path: str, value: Any) -> int | None:
    """apps/validation ``ValidatePositiveIntOrPercent`` plus ``IsNotMoreThan100Percent``."""
    number, is_percent = _int_or_percent(value)
    if number is None:
        if isinstance(value, str):
            _invalid(causes, path, value, _PERCENT_MSG)
        else:
            _invalid(causes, path, value, "must be an integer or percentage (e.g '5%%')")
        return None
    if not is_percent and number < 0:
        _invalid(causes, path, number, IS_NEGATIVE)
    if is_percent and number > 100:
        _invalid(causes, path, value, "must not be greater than 100%")
    return number


def _check_nonnegative(causes: list[Cause], path: str, value: Any) -> None:
    number = _int_at(causes, path, value)
    if number is not None and number < 0:
        _invalid(causes, path, number, IS_NEGATIVE)


# --------------------------------------------------------------------------------------------
# Quantities and resource names (core/validation ValidateResourceQuantityValue and
# pkg/apis/core/helper resource-name predicates).
# --------------------------------------------------------------------------------------------

# raw JSON value -> (parsed Quantity, its sign), or the parse error message. Clusters reuse few
# spellings ("100m", "128Mi"), so after warm-up validation does no parsing at all.
_QUANTITY_MEMO: dict[Any, tuple[Quantity, int] | str] = {}


def _quantity(raw: Any) -> tuple[Quantity, int] | str:
    if isinstance(raw, bool) or not isinstance(raw, str | int | float):
        return f"a quantity must be a string or a number, not {type(raw).__name__}"
    key = (type(raw), raw)
    hit = _QUANTITY_MEMO.get(key)
    if hit is None:
        try:
            q = parse_quantity(raw)
            hit = (q, q.sign())
        except QuantityError as exc:
            hit = str(exc)
        if len(_QUANTITY_MEMO) >= _MEMO_LIMIT:
            _QUANTITY_MEMO.clear()
        _QUANTITY_MEMO[key] = hit
    return hit


def validate_quantity(value: Any, path: str, causes: list[Cause], non_negative: bool = True) -> Quantity | None:
    """Parse ``value`` as a resource quantity; record a cause at ``path`` if it is malformed
    (or negative when ``non_negative``). Returns the quantity, or ``None`` when malformed."""
    hit = _quantity(value)
    if isinstance(hit, str):
        _invalid(causes, path, value, hit)
        return None
    q, sign = hit
    if non_negative and sign < 0:
        _invalid(causes, path, str(q), IS_NEGATIVE)
    return q


def _is_integral(q: Quantity) -> bool:
    """Whether a quantity is a whole number (upstream ``MilliValue() % 1000 == 0``)."""
    try:
        return q.milli_value() % 1000 == 0
    except QuantityError:  # too large to express in millis: certainly not a resource count
        return False


_HUGEPAGES_PREFIX = "hugepages-"
_STANDARD_CONTAINER_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})
# pkg/apis/core/helper: standardResources (names usable without a domain prefix).
_STANDARD_RESOURCES = frozenset({
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory", "requests.ephemeral-storage",
    "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods", "services", "replicationcontrollers",
    "resourcequotas", "secrets", "persistentvolumeclaims", "storage", "requests.storage",
    "services.nodeports", "services.loadbalancers", "configmaps",
})
# pkg/apis/core/helper: integerResources (counts, never fractional).
_INTEGER_RESOURCES = frozenset({
    "pods", "services", "replicationcontrollers", "resourcequotas", "secrets", "configmaps",
    "persistentvolumeclaims", "services.nodeports", "services.loadbalancers",
})


def _is_native_resource(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def _is_extended_resource(name: str) -> bool:
    """helper.IsExtendedResourceName: a domain-prefixed name outside kubernetes.io."""
    if _is_native_resource(name) or name.startswith("requests."):
        return False
    return not qualified_name_errors("requests." + name)


def _is_integer_resource(name: str) -> bool:
    return name in _INTEGER_RESOURCES or _is_extended_resource(name)


# resource name -> upstream detail messages from validateContainerResourceName (empty = valid).
_CONTAINER_RESOURCE_NAME_MEMO: dict[str, list[str]] = {}


def _resource_name_errors(name: str) -> list[str]:
    """core/validation ``validateResourceName``."""
    errs = qualified_name_errors(name)
    if errs:
        return list(errs)
    if "/" not in name and name not in _STANDARD_RESOURCES and not name.startswith(_HUGEPAGES_PREFIX):
        return ["must be a standard resource type or fully qualified"]
    return []


def _container_resource_name_errors(name: str) -> list[str]:
    """core/validation ``validateContainerResourceName``."""
    hit = _CONTAINER_RESOURCE_NAME_MEMO.get(name)
    if hit is not None:
        return hit
    errs = _resource_name_errors(name)
    if "/" not in name:
        if name not in _STANDARD_CONTAINER_RESOURCES and not name.startswith(_HUGEPAGES_PREFIX):
            errs.append("must be a standard resource for containers")
    elif not _is_native_resource(name) and not _is_extended_resource(name):
        errs.append("doesn't follow extended resource name standard")
    if len(_CONTAINER_RESOURCE_NAME_MEMO) >= _MEMO_LIMIT:
        _CONTAINER_RESOURCE_NAME_MEMO.clear()
    _CONTAINER_RESOURCE_NAME_MEMO[name] = errs
    return errs


def _check_resource_list(causes: list[Cause], path: str, resources: Any,
                         name_errors: Callable[[str], list[str]] | None,
                         non_negative: bool = True) -> dict[str, Quantity]:
    """Validate a ResourceList (``{name: quantity}``) keyed at ``path[name]``; return the parsed ones."""
    parsed: dict[str, Quantity] = {}
    for name, raw in _dict_at(causes, path, resources).items():
        if name_errors is not None:
            for msg in name_errors(name):
                _invalid(causes, f"{path}[{name}]", name, msg)
        hit = _quantity(raw)
        if isinstance(hit, str):
            _invalid(causes, f"{path}[{name}]", raw, hit)
            continue
        q, sign = hit
        if non_negative and sign < 0:
            _invalid(causes, f"{path}[{name}]", str(q), IS_NEGATIVE)
        elif "/" in name and _is_integer_resource(name) and not _is_integral(q):
            _invalid(causes, f"{path}[{name}]", str(q), NOT_INTEGER)
        parsed[name] = q
    return parsed


def _check_resource_requirements(causes: list[Cause], path: str, res: Obj) -> None:
    """core/validation ``validateResourceRequirements`` for a container.

    Names must be container resources, quantities non-negative (integers for extended
    resources), every request at most its limit, and extended resources (not overcommittable)
    must have request == limit. Hugepages' divisibility and cpu/memory pairing are not checked.
    """
    limits = _check_resource_list(causes, path + ".limits", res.get("limits"), _container_resource_name_errors)
    requests = res.get("requests")
    if not requests:
        if requests is not None and not isinstance(requests, dict):
            _wrong_type(causes, path + ".requests", requests, "an object")
        return
    req = _check_resource_list(causes, path + ".requests", requests, _container_resource_name_errors)
    for name, q in req.items():
        extended = "/" in name and _is_extended_resource(name)
        limit = limits.get(name)
        if limit is not None:
            # Upstream reports these at ".requests" itself, not at ".requests[name]".
            if extended and q != limit:
                _invalid(causes, path + ".requests", str(q), f"must be equal to {name} limit of {limit}")
            elif q > limit:
                _invalid(causes, path + ".requests", str(q), f"must be less than or equal to {name} limit of {limit}")
        elif extended and name not in (res.get("limits") or {}):
            _required(causes, path + ".limits", "Limit must be set for non overcommitable resources")


# --------------------------------------------------------------------------------------------
# ObjectMeta: staging/src/k8s.io/apimachinery/pkg/api/validation/objectmeta.go plus the kube
# finalizer-name rule of pkg/apis/core/validation ValidateObjectMeta.
# --------------------------------------------------------------------------------------------

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024  # TotalAnnotationSizeLimitB
_STANDARD_FINALIZERS = frozenset({"kubernetes", "orphan", "foregroundDeletion"})

# Resources whose names are DNS-1123 labels; every other kind here uses DNS-1123 subdomains.
_LABEL_NAMED = frozenset({"namespaces"})


def _check_finalizers(causes: list[Cause], path: str, finalizers: Any) -> None:
    items = _list_at(causes, path, finalizers)
    for i, fin in enumerate(items):
        if not isinstance(fin, str):
            _wrong_type(causes, f"{path}[{i}]", fin, "a string")
            continue
        # Upstream reports the format at the list and the kube-standard rule at the item.
        for msg in qualified_name_errors(fin):
            _invalid(causes, path, fin, msg)
        if "/" not in fin and fin not in _STANDARD_FINALIZERS:
            _invalid(causes, f"{path}[{i}]", fin, "name is neither a standard finalizer name nor is it fully qualified")
    if "orphan" in items and "foregroundDeletion" in items:
        _invalid(causes, path, items, "finalizer orphan and foregroundDeletion cannot be both set")


def _check_owner_references(causes: list[Cause], path: str, refs: Any) -> None:
    controller = ""
    for ref in _list_at(causes, path, refs):
        if not isinstance(ref, dict):
            _wrong_type(causes, path, ref, "an object")
            continue
        api_version, kind = ref.get("apiVersion") or "", ref.get("kind") or ""
        if not str(api_version).rpartition("/")[2]:
            _invalid(causes, path + ".apiVersion", api_version, "version must not be empty")
        if not kind:
            _invalid(causes, path + ".kind", kind, "must not be empty")
        if not ref.get("name"):
            _invalid(causes, path + ".name", ref.get("name") or "", "must not be empty")
        if not ref.get("uid"):
            _invalid(causes, path + ".uid", ref.get("uid") or "", "must not be empty")
        if api_version == "v1" and kind == "Event":
            _invalid(causes, path, ref, "/v1, Kind=Event is disallowed from being an owner")
        if ref.get("controller") is True:
            this = f"{kind}/{ref.get('name')}"
            if controller:
                _invalid(causes, path, refs, "Only one reference can have Controller set to true. "
                         f'Found "true" in references for {controller} and {this}')
            else:
                controller = this


def _check_object_meta(kind: Kind, meta: Obj, causes: list[Cause]) -> None:
    name_errors = dns1123_label_errors if kind.resource in _LABEL_NAMED else dns1123_subdomain_errors
    name = meta.get("name") or ""
    generate = meta.get("generateName") or ""
    if generate:
        if isinstance(generate, str):
            for msg in name_errors(_mask_trailing_dash(generate)):
                _invalid(causes, "metadata.generateName", generate, msg)
        else:
            _wrong_type(causes, "metadata.generateName", generate, "a string")
    if not name:
        if not generate:
            # The server generates a name from generateName after validation when needed.
            _required(causes, "metadata.name", "name or generateName is required")
    elif not isinstance(name, str):
        _wrong_type(causes, "metadata.name", name, "a string")
    else:
        for msg in name_errors(name):
            _invalid(causes, "metadata.name", name, msg)

    namespace = meta.get("namespace") or ""
    if kind.namespaced:
        if not namespace:
            _required(causes, "metadata.namespace")
        elif not isinstance(namespace, str):
            _wrong_type(causes, "metadata.namespace", namespace, "a string")
        else:
            for msg in dns1123_label_errors(namespace):
                _invalid(causes, "metadata.namespace", namespace, msg)
    elif namespace:
        # Upstream's BeforeCreate clears it silently; kemu rejects it so the mistake is visible.
        _forbidden(causes, "metadata.namespace", "not allowed on this type")

    generation = meta.get("generation")
    if generation is not None:
        _check_nonnegative(causes, "metadata.generation", generation)

    labels = meta.get("labels")
    if labels:
        _check_labels(causes, "metadata.labels", labels)

    annotations = meta.get("annotations")
    if annotations:
        total = 0
        for key, value in _dict_at(causes, "metadata.annotations", annotations).items():
            # QualifiedName except that case does not matter (objectmeta.go ValidateAnnotations).
            for msg in qualified_name_errors(key.lower()):
                _invalid(causes, "metadata.annotations", key, msg)
            if not isinstance(value, str):
                _wrong_type(causes, f"metadata.annotations[{key}]", value, "a string")
                continue
            total += len(key) + len(value)
        if total > TOTAL_ANNOTATION_SIZE_LIMIT:
            _too_long(causes, "metadata.annotations", TOTAL_ANNOTATION_SIZE_LIMIT)

    refs = meta.get("ownerReferences")
    if refs:
        _check_owner_references(causes, "metadata.ownerReferences", refs)
    finalizers = meta.get("finalizers")
    if finalizers:
        _check_finalizers(causes, "metadata.finalizers", finalizers)


def _check_object_meta_update(meta: Obj, old_meta: Obj, causes: list[Cause]) -> None:
    """ValidateObjectMetaAccessorUpdate: identity fields never change.

    A missing uid is not an error (the server copies the stored one, as upstream's
    BeforeUpdate does); resourceVersion is the store's precondition, not checked here.
    """
    for fld in ("name", "namespace"):
        new, old = meta.get(fld) or "", old_meta.get(fld) or ""
        if new != old:
            _invalid(causes, "metadata." + fld, new, FIELD_IMMUTABLE)
    uid = meta.get("uid")
    if uid and uid != old_meta.get("uid"):
        _invalid(causes, "metadata.uid", uid, FIELD_IMMUTABLE)


# --------------------------------------------------------------------------------------------
# Pod spec: pkg/apis/core/validation/validation.go ValidatePodSpec and friends.
# --------------------------------------------------------------------------------------------

_RESTART_POLICIES = ("Always", "OnFailure", "Never")
_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")  # sets.List order
_TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
_PROTOCOLS = ("SCTP", "TCP", "UDP")  # sets.List order
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_TOLERATION_OPERATORS = ("Equal", "Exists")
_PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
_WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")  # sets.List order
_NODE_INCLUSION_POLICIES = ("Honor", "Ignore")  # sets.List order
_MAX_INT32 = 2**31 - 1
_PROBES = ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe")


def _check_enum(causes: list[Cause], path: str, value: Any, allowed: tuple[str, ...]) -> None:
    """An optional enum: absent is defaulted elsewhere, "" is Required, others must be listed."""
    if value is None or value in allowed:
        return
    if value == "":
        _required(causes, path)
    else:
        _not_supported(causes, path, value, allowed)


def _check_container_ports(causes: list[Cause], path: str, ports: Any) -> None:
    """core/validation ``validateContainerPorts``."""
    names: set[str] = set()
    for i, port in enumerate(_list_at(causes, path, ports)):
        p = f"{path}[{i}]"
        if not isinstance(port, dict):
            _wrong_type(causes, p, port, "an object")
            continue
        name = port.get("name")
        if name:
            msgs = _port_name_errors(name) if isinstance(name, str) else ["must be a string"]
            if msgs:
                for msg in msgs:
                    _invalid(causes, p + ".name", name, msg)
            elif name in names:
                _duplicate(causes, p + ".name", name)
            else:
                names.add(name)
        cport = port.get("containerPort")
        if not cport:
            _required(causes, p + ".containerPort")
        else:
            number = _int_at(causes, p + ".containerPort", cport)
            if number is not None and (err := _port_num_error(number)):
                _invalid(causes, p + ".containerPort", number, err)
        hport = port.get("hostPort")
        if hport:
            number = _int_at(causes, p + ".hostPort", hport)
            if number is not None and (err := _port_num_error(number)):
                _invalid(causes, p + ".hostPort", number, err)
        _check_enum(causes, p + ".protocol", port.get("protocol"), _PROTOCOLS)


def _check_host_port_conflicts(causes: list[Cause], path: str, containers: list[Any], first_index: int = 0) -> None:
    """core/validation ``AccumulateUniqueHostPorts``: a host port is claimed once per protocol and IP.

    ``first_index`` is the list index of ``containers[0]`` (for checking one init container alone).
    """
    seen: set[str] = set()
    for ci, ctr in enumerate(containers, first_index):
        if not isinstance(ctr, dict) or not ctr.get("ports"):
            continue
        for pi, port in enumerate(ctr["ports"] if isinstance(ctr["ports"], list) else ()):
            if not isinstance(port, dict) or not port.get("hostPort"):
                continue
            key = f"{port.get('protocol') or 'TCP'}/{port.get('hostIP') or ''}/{port['hostPort']}"
            if key in seen:
                _duplicate(causes, f"{path}[{ci}].ports[{pi}].hostPort", key)
            else:
                seen.add(key)


def _check_container_common(causes: list[Cause], p: str, ctr: Obj, is_pod: bool) -> None:
    """core/validation ``validateContainerCommon`` (+ ``validateContainerOnlyForPod``)."""
    name = ctr.get("name")
    if not name:
        _required(causes, p + ".name")
    elif not isinstance(name, str):
        _wrong_type(causes, p + ".name", name, "a string")
    else:
        for msg in dns1123_label_errors(name):
            _invalid(causes, p + ".name", name, msg)
    image = ctr.get("image")
    if not image:
        _required(causes, p + ".image")
    elif not isinstance(image, str):
        _wrong_type(causes, p + ".image", image, "a string")
    elif is_pod and image != image.strip():
        _invalid(causes, p + ".image", image, "must not have leading or trailing whitespace")
    policy = ctr.get("terminationMessagePolicy")
    if policy is not None:
        _check_enum(causes, p + ".terminationMessagePolicy", policy, _TERMINATION_MESSAGE_POLICIES)
    pull = ctr.get("imagePullPolicy")
    if pull is not None:
        _check_enum(causes, p + ".imagePullPolicy", pull, _PULL_POLICIES)
    ports = ctr.get("ports")
    if ports:
        _check_container_ports(causes, p + ".ports", ports)
    resources = ctr.get("resources")
    if resources:
        if isinstance(resources, dict):
            _check_resource_requirements(causes, p + ".resources", resources)
        else:
            _wrong_type(causes, p + ".resources", resources, "an object")


def _check_containers(causes: list[Cause], path: str, containers: Any, is_pod: bool) -> set[str]:
    """core/validation ``validateContainers``; returns the container names seen."""
    names: set[str] = set()
    if not containers:
        _required(causes, path)
        return names
    for i, ctr in enumerate(_list_at(causes, path, containers)):
        p = f"{path}[{i}]"
        if not isinstance(ctr, dict):
            _wrong_type(causes, p, ctr, "an object")
            continue
        _check_container_common(causes, p, ctr, is_pod)
        name = ctr.get("name")
        if isinstance(name, str):
            if name in names:
                _duplicate(causes, p + ".name", name)
            else:
                names.add(name)
        if ctr.get("restartPolicy") is not None:
            _forbidden(causes, p + ".restartPolicy", "may not be set for non-init containers")
    if isinstance(containers, list):
        _check_host_port_conflicts(causes, path, containers)
    return names


def _check_init_containers(causes: list[Cause], path: str, containers: Any, names: set[str], is_pod: bool) -> None:
    """core/validation ``validateInitContainers``: names unique across init and app containers,
    and only restartable (sidecar) init containers may carry probes or lifecycle hooks."""
    for i, ctr in enumerate(_list_at(causes, path, containers)):
        p = f"{path}[{i}]"
        if not isinstance(ctr, dict):
            _wrong_type(causes, p, ctr, "an object")
            continue
        _check_container_common(causes, p, ctr, is_pod)
        restart = ctr.get("restartPolicy")
        if restart is not None and restart != "Always":
            _not_supported(causes, p + ".restartPolicy", restart, ("Always",))
        name = ctr.get("name")
        if isinstance(name, str):
            if name in names:
                _duplicate(causes, p + ".name", name)
            elif name:
                names.add(name)
        if restart != "Always":
            for fld in _PROBES:
                if ctr.get(fld) is not None:
                    _forbidden(causes, f"{p}.{fld}", "may not be set for init containers without restartPolicy=Always")
        if ctr.get("ports"):
            # Init containers run one at a time, so only conflicts within one container count.
            _check_host_port_conflicts(causes, path, [ctr], first_index=i)


def _check_tolerations(causes: list[Cause], path: str, tolerations: Any) -> None:
    """core/validation ``ValidateTolerations``."""
    for i, tol in enumerate(_list_at(causes, path, tolerations)):
        p = f"{path}[{i}]"
        if not isinstance(tol, dict):
            _wrong_type(causes, p, tol, "an object")
            continue
        key = tol.get("key") or ""
        if key:
            _check_label_name(causes, p + ".key", key)
        op = tol.get("operator") or ""
        effect = tol.get("effect") or ""
        if not key and op != "Exists":
            _invalid(causes, p + ".operator", op,
                     'operator must be Exists when `key` is empty, which means "match all values and all keys"')
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            _invalid(causes, p + ".effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set")
        value = tol.get("value") or ""
        if op in ("Equal", ""):
            # Upstream joins the label-value messages and reports them at .operator.
            errs = label_value_errors(value) if isinstance(value, str) else ["must be a string"]
            if errs:
                _invalid(causes, p + ".operator", value, ";".join(errs))
        elif op == "Exists":
            if value:
                _invalid(causes, p + ".operator", value, "value must be empty when `operator` is 'Exists'")
        else:
            _not_supported(causes, p + ".operator", op, _TOLERATION_OPERATORS)
        if effect and effect not in _TAINT_EFFECTS:
            _not_supported(causes, p + ".effect", effect, _TAINT_EFFECTS)


def _check_node_selector_term(causes: list[Cause], path: str, term: Any, strict_values: bool) -> None:
    """core/validation ``ValidateNodeSelectorTerm``."""
    term = _dict_at(causes, path, term)
    exprs_path = path + ".matchExpressions"
    for j, req in enumerate(_list_at(causes, exprs_path, term.get("matchExpressions"))):
        p = f"{exprs_path}[{j}]"
        if not isinstance(req, dict):
            _wrong_type(causes, p, req, "an object")
            continue
        op, values = req.get("operator"), _list_at(causes, p + ".values", req.get("values"))
        if op in ("In", "NotIn"):
            if not values:
                _required(causes, p + ".values", "must be specified when `operator` is 'In' or 'NotIn'")
        elif op in ("Exists", "DoesNotExist"):
            if values:
                _forbidden(causes, p + ".values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'")
        elif op in ("Gt", "Lt"):
            if len(values) != 1:
                _required(causes, p + ".values", "must be specified single value when `operator` is 'Lt' or 'Gt'")
        else:
            _invalid(causes, p + ".operator", op, "not a valid selector operator")
        _check_label_name(causes, p + ".key", req.get("key", ""))
        if strict_values:
            for k, value in enumerate(values):
                for msg in label_value_errors(value) if isinstance(value, str) else ["must be a string"]:
                    _invalid(causes, f"{p}.values[{k}]", value, msg)
    fields_path = path + ".matchFields"
    for j, req in enumerate(_list_at(causes, fields_path, term.get("matchFields"))):
        p = f"{fields_path}[{j}]"
        if not isinstance(req, dict):
            _wrong_type(causes, p, req, "an object")
            continue
        values = _list_at(causes, p + ".values", req.get("values"))
        if req.get("operator") in ("In", "NotIn"):
            if len(values) != 1:
                _required(causes, p + ".values",
                          "must be only one value when `operator` is 'In' or 'NotIn' for node field selector")
        else:
            _invalid(causes, p + ".operator", req.get("operator"), "not a valid selector operator")
        if req.get("key") != "metadata.name":
            _invalid(causes, p + ".key", req.get("key"), "not a valid field selector key")
        else:
            for k, value in enumerate(values):
                for msg in dns1123_subdomain_errors(value) if isinstance(value, str) else ["must be a string"]:
                    _invalid(causes, f"{p}.values[{k}]", value, msg)


def _check_pod_affinity_terms(causes: list[Cause], path: str, terms: Any, weighted: bool) -> None:
    for i, term in enumerate(_list_at(causes, path, terms)):
        p = f"{path}[{i}]"
        if not isinstance(term, dict):
            _wrong_type(causes, p, term, "an object")
            continue
        if weighted:
            weight = term.get("weight")
            if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
                _invalid(causes, p + ".weight", weight, "must be in the range 1-100")
            p += ".podAffinityTerm"
            body = _dict_at(causes, p, term.get("podAffinityTerm"))
        else:
            body = term
        if body.get("labelSelector") is not None:
            _check_label_selector(causes, p + ".labelSelector", body["labelSelector"])
        if body.get("namespaceSelector") is not None:
            _check_label_selector(causes, p + ".namespaceSelector", body["namespaceSelector"])
        for ns in _list_at(causes, p + ".namespaces", body.get("namespaces")):
            for msg in dns1123_label_errors(ns) if isinstance(ns, str) else ["must be a string"]:
                _invalid(causes, p + ".namespace", ns, msg)  # sic: upstream says ".namespace"
        topology_key = body.get("topologyKey") or ""
        if not topology_key:
            _required(causes, p + ".topologyKey", "can not be empty")
        _check_label_name(causes, p + ".topologyKey", topology_key)


def _check_affinity(causes: list[Cause], path: str, affinity: Any) -> None:
    """core/validation ``validateAffinity``."""
    affinity = _dict_at(causes, path, affinity)
    node = affinity.get("nodeAffinity")
    if node:
        node = _dict_at(causes, path + ".nodeAffinity", node)
        required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if required is not None:
            rp = path + ".nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
            terms = _list_at(causes, rp, _dict_at(causes, rp, required).get("nodeSelectorTerms"))
            if not terms:
                _required(causes, rp, "must have at least one node selector term")
            for i, term in enumerate(terms):
                _check_node_selector_term(causes, f"{rp}[{i}]", term, strict_values=True)
        pp = path + ".nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        for i, item in enumerate(_list_at(causes, pp, node.get("preferredDuringSchedulingIgnoredDuringExecution"))):
            pref = _dict_at(causes, f"{pp}[{i}]", item)
            weight = pref.get("weight")
            if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
                _invalid(causes, f"{pp}[{i}].weight", weight, "must be in the range 1-100")
            # Preferred terms tolerate invalid label values (they may match a single node).
            _check_node_selector_term(causes, f"{pp}[{i}].preference", pref.get("preference"), strict_values=False)
    for fld in ("podAffinity", "podAntiAffinity"):
        pod = affinity.get(fld)
        if not pod:
            continue
        pod = _dict_at(causes, f"{path}.{fld}", pod)
        base = f"{path}.{fld}"
        _check_pod_affinity_terms(causes, base + ".requiredDuringSchedulingIgnoredDuringExecution",
                                  pod.get("requiredDuringSchedulingIgnoredDuringExecution"), weighted=False)
        _check_pod_affinity_terms(causes, base + ".preferredDuringSchedulingIgnoredDuringExecution",
                                  pod.get("preferredDuringSchedulingIgnoredDuringExecution"), weighted=True)


def _check_topology_spread(causes: list[Cause], path: str, constraints: Any) -> None:
    """core/validation ``validateTopologySpreadConstraints``."""
    items = _list_at(causes, path, constraints)
    for i, tsc in enumerate(items):
        p = f"{path}[{i}]"
        if not isinstance(tsc, dict):
            _wrong_type(causes, p, tsc, "an object")
            continue
        skew = tsc.get("maxSkew")
        if not isinstance(skew, int) or isinstance(skew, bool) or skew <= 0:
            _invalid(causes, p + ".maxSkew", skew if skew is not None else 0, NOT_POSITIVE)
        key = tsc.get("topologyKey") or ""
        if not key:
            _required(causes, p + ".topologyKey", "can not be empty")
        action = tsc.get("whenUnsatisfiable") or ""
        if action not in _WHEN_UNSATISFIABLE:
            _not_supported(causes, p + ".whenUnsatisfiable", action, _WHEN_UNSATISFIABLE)
        for later in items[i + 1:]:
            if isinstance(later, dict) and later.get("topologyKey") == tsc.get("topologyKey") \
                    and later.get("whenUnsatisfiable") == tsc.get("whenUnsatisfiable"):
                _duplicate(causes, p + ".{topologyKey, whenUnsatisfiable}", f"{{{key}, {action}}}")
                break
        min_domains = tsc.get("minDomains")
        if min_domains is not None:
            if not isinstance(min_domains, int) or isinstance(min_domains, bool) or min_domains <= 0:
                _invalid(causes, p + ".minDomains", min_domains, NOT_POSITIVE)
            if action != "DoNotSchedule":
                _invalid(causes, p + ".minDomains", min_domains,
                         f"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}")
        for fld in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            policy = tsc.get(fld)
            if policy is not None and policy not in _NODE_INCLUSION_POLICIES:
                _not_supported(causes, f"{p}.{fld}", policy, _NODE_INCLUSION_POLICIES)
        if tsc.get("labelSelector") is not None:
            _check_label_selector(causes, p + ".labelSelector", tsc["labelSelector"])


def _check_volumes(causes: list[Cause], path: str, volumes: Any) -> None:
    """The name part of core/validation ``ValidateVolumes`` (volume sources are not checked)."""
    names: set[str] = set()
    for i, vol in enumerate(_list_at(causes, path, volumes)):
        p = f"{path}[{i}].name"
        name = vol.get("name") if isinstance(vol, dict) else None
        if not name:
            _required(causes, p)
        elif not isinstance(name, str):
            _wrong_type(causes, p, name, "a string")
        else:
            for msg in dns1123_label_errors(name):
                _invalid(causes, p, name, msg)
            if name in names:
                _duplicate(causes, p, name)
            names.add(name)


def _check_pod_spec(causes: list[Cause], path: str, spec: Obj, is_pod: bool, creating: bool = True) -> None:
    """core/validation ``ValidatePodSpec`` for the fields an emulated cluster acts on.

    ``is_pod`` adds the checks upstream applies to Pods but not to templates
    (image whitespace, hostNetwork hostPort == containerPort); ``creating`` adds
    ``ValidatePodCreate``'s (no ephemeral containers, no nodeName while gated).
    """
    names = _check_containers(causes, path + ".containers", spec.get("containers"), is_pod)
    init = spec.get("initContainers")
    if init:
        _check_init_containers(causes, path + ".initContainers", init, names, is_pod)
    if spec.get("ephemeralContainers"):
        if is_pod:
            if creating:  # added later through the ephemeralcontainers subresource only
                _forbidden(causes, path + ".ephemeralContainers", "cannot be set on create")
        else:
            _forbidden(causes, path + ".ephemeralContainers", "ephemeral containers not allowed in pod template")
    volumes = spec.get("volumes")
    if volumes:
        _check_volumes(causes, path + ".volumes", volumes)

    _check_enum(causes, path + ".restartPolicy", spec.get("restartPolicy"), _RESTART_POLICIES)
    _check_enum(causes, path + ".dnsPolicy", spec.get("dnsPolicy"), _DNS_POLICIES)
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is not None:
        _check_nonnegative(causes, path + ".terminationGracePeriodSeconds", grace)
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None:
        number = _int_at(causes, path + ".activeDeadlineSeconds", deadline)
        if number is not None and not 1 <= number <= _MAX_INT32:
            _invalid(causes, path + ".activeDeadlineSeconds", number, f"must be between 1 and {_MAX_INT32}, inclusive")

    node_selector = spec.get("nodeSelector")
    if node_selector:
        _check_labels(causes, path + ".nodeSelector", node_selector)
    node_name = spec.get("nodeName")
    if node_name:
        for msg in dns1123_subdomain_errors(node_name) if isinstance(node_name, str) else ["must be a string"]:
            _invalid(causes, path + ".nodeName", node_name, msg)
        if is_pod and creating and spec.get("schedulingGates"):
            _forbidden(causes, path + ".nodeName", "cannot be set until all schedulingGates have been cleared")
    for fld in ("serviceAccountName", "priorityClassName", "runtimeClassName"):
        value = spec.get(fld)
        if value:
            for msg in dns1123_subdomain_errors(value) if isinstance(value, str) else ["must be a string"]:
                _invalid(causes, f"{path}.{fld}", value, msg)
    for fld in ("hostname", "subdomain"):
        value = spec.get(fld)
        if value:
            for msg in dns1123_label_errors(value) if isinstance(value, str) else ["must be a string"]:
                _invalid(causes, f"{path}.{fld}", value, msg)
    preemption = spec.get("preemptionPolicy")
    if preemption is not None:
        _check_enum(causes, path + ".preemptionPolicy", preemption, _PREEMPTION_POLICIES)

    tolerations = spec.get("tolerations")
    if tolerations:
        _check_tolerations(causes, path + ".tolerations", tolerations)
    affinity = spec.get("affinity")
    if affinity:
        _check_affinity(causes, path + ".affinity", affinity)
    spread = spec.get("topologySpreadConstraints")
    if spread:
        _check_topology_spread(causes, path + ".topologySpreadConstraints", spread)
    gates = spec.get("schedulingGates")
    if gates:
        seen: set[str] = set()
        for i, gate in enumerate(_list_at(causes, path + ".schedulingGates", gates)):
            gname = gate.get("name", "") if isinstance(gate, dict) else gate
            _check_label_name(causes, f"{path}.schedulingGates[{i}]", gname)
            if isinstance(gname, str):
                if gname in seen:
                    _duplicate(causes, f"{path}.schedulingGates[{i}]", gname)
                seen.add(gname)
    overhead = spec.get("overhead")
    if overhead:
        # Upstream validates overhead as the limits of a ResourceRequirements rooted at
        # "overhead", hence "spec.overhead.limits[cpu]".
        _check_resource_list(causes, path + ".overhead.limits", overhead, _container_resource_name_errors)
    if is_pod and spec.get("hostNetwork") and isinstance(spec.get("containers"), list):
        # validatePodHostNetworkDeps: with the host's network a pod's ports are the host's ports.
        for i, ctr in enumerate(spec["containers"]):
            ports = ctr.get("ports") if isinstance(ctr, dict) else None
            for j, port in enumerate(ports if isinstance(ports, list) else ()):
                if isinstance(port, dict) and port.get("hostPort") != port.get("containerPort"):
                    _invalid(causes, f"{path}.containers[{i}].ports[{j}].hostPort", port.get("hostPort"),
                             "must match `containerPort` when `hostNetwork` is true")


# Pod spec fields users may change on update (upstream updatablePodSpecFields).
_UPDATABLE_POD_SPEC_FIELDS = (
    "`spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,"
    "`spec.tolerations` (only additions to existing tolerations),"
    "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)"
)


def _containers_differ_beyond_image(new: Any, old: Any) -> bool:
    if not isinstance(new, list) or not isinstance(old, list) or len(new) != len(old):
        return True
    for n, o in zip(new, old, strict=True):
        if n == o:
            continue
        if not isinstance(n, dict) or not isinstance(o, dict):
            return True
        if n.keys() - {"image"} != o.keys() - {"image"}:
            return True
        if any(n[k] != o[k] for k in n if k != "image"):
            return True
    return False


def _check_pod_update(causes: list[Cause], spec: Obj, old_spec: Obj) -> None:
    """core/validation ``ValidatePodUpdate``: the spec is immutable except a few fields.

    Instead of upstream's munge-a-deep-copy-and-compare, changed top-level fields are found by
    comparing the two dicts key by key, and each changed field is checked against its own rule.
    ``spec.nodeName`` may go from unset to set (kemu's binding path writes it); afterwards it is
    as immutable as the rest of the spec.
    """
    if spec == old_spec:
        return
    for fld in ("containers", "initContainers"):
        new, old = spec.get(fld) or [], old_spec.get(fld) or []
        if isinstance(new, list) and isinstance(old, list) and len(new) != len(old):
            _forbidden(causes, "spec." + fld, "pod updates may not add or remove containers")
            return

    changed: list[str] = []
    for key in spec.keys() | old_spec.keys():
        new, old = spec.get(key), old_spec.get(key)
        if new == old:
            continue
        if key in ("containers", "initContainers"):
            if _containers_differ_beyond_image(new or [], old or []):
                changed.append(key)
        elif key == "activeDeadlineSeconds":
            if new is None:
                _invalid(causes, "spec.activeDeadlineSeconds", None,
                         "must not update from a positive integer to nil value")
            elif not isinstance(new, int) or isinstance(new, bool) or not 0 <= new <= _MAX_INT32:
                _invalid(causes, "spec.activeDeadlineSeconds", new, f"must be between 0 and {_MAX_INT32}, inclusive")
            elif isinstance(old, int) and old < new:
                _invalid(causes, "spec.activeDeadlineSeconds", new, "must be less than or equal to previous value")
        elif key == "tolerations":
            if not _only_added_tolerations(new or [], old or []):
                _forbidden(causes, "spec.tolerations",
                           "existing toleration can not be modified except its tolerationSeconds")
        elif key == "schedulingGates":
            old_names = {g.get("name") for g in old or () if isinstance(g, dict)}
            for i, gate in enumerate(new or ()):
                gname = gate.get("name") if isinstance(gate, dict) else gate
                if gname not in old_names:
                    _forbidden(causes, f"spec.schedulingGates[{i}].name",
                               f"only deletion is allowed, but found new scheduling gate '{gname}'")
        elif key == "nodeName":
            if old:
                changed.append(key)
        elif key == "nodeSelector" and old_spec.get("schedulingGates") and isinstance(new or {}, dict) \
                and isinstance(old or {}, dict):
            # A gated pod may gain node selector entries but not lose or change them.
            for k, v in (old or {}).items():
                if (new or {}).get(k) != v:
                    _invalid(causes, "spec.nodeSelector", new,
                             "only additions to spec.nodeSelector are allowed (no mutations or deletions)")
                    break
        elif key == "terminationGracePeriodSeconds" and isinstance(old, int) and old < 0 and new == 1:
            pass
        else:
            changed.append(key)
    if changed:
        fields = ", ".join(sorted(f"spec.{k}" for k in changed))
        _forbidden(causes, "spec",
                   f"pod updates may not change fields other than {_UPDATABLE_POD_SPEC_FIELDS}\n(changed: {fields})")


def _only_added_tolerations(new: list[Any], old: list[Any]) -> bool:
    """validateOnlyAddedTolerations: each old toleration survives, tolerationSeconds aside."""
    def strip(t: Any) -> Any:
        return {k: v for k, v in t.items() if k != "tolerationSeconds"} if isinstance(t, dict) else t
    remaining = [strip(t) for t in new]
    return all(strip(t) in remaining for t in old)


def _validate_pod(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = _dict_at(causes, "spec", obj.get("spec"))
    _check_pod_spec(causes, "spec", spec, is_pod=True, creating=old is None)
    if old is not None:
        _check_pod_update(causes, spec, old.get("spec") or {})


# --------------------------------------------------------------------------------------------
# Node, Namespace: core/validation ValidateNode / ValidateNodeUpdate / ValidateNamespace.
# --------------------------------------------------------------------------------------------


def _validate_node(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = _dict_at(causes, "spec", obj.get("spec"))
    taints = spec.get("taints")
    if taints:
        # Upstream roots taint paths at "metadata" (ValidateNode's fldPath), hence
        # "metadata.taints[0].effect" rather than "spec.taints[0].effect".
        path = "metadata.taints"
        seen: set[tuple[str, str]] = set()
        for i, taint in enumerate(_list_at(causes, path, taints)):
            p = f"{path}[{i}]"
            if not isinstance(taint, dict):
                _wrong_type(causes, p, taint, "an object")
                continue
            key = taint.get("key", "")
            _check_label_name(causes, p + ".key", key)
            value = taint.get("value") or ""
            errs = label_value_errors(value) if isinstance(value, str) else ["must be a string"]
            if errs:
                _invalid(causes, p + ".value", value, ";".join(errs))
            effect = taint.get("effect") or ""
            if not effect:
                _required(causes, p + ".effect")
            elif effect not in _TAINT_EFFECTS:
                _not_supported(causes, p + ".effect", effect, _TAINT_EFFECTS)
            if isinstance(key, str) and isinstance(effect, str):
                if (key, effect) in seen:
                    _duplicate(causes, p, taint, "taints must be unique by key and effect pair")
                else:
                    seen.add((key, effect))
    status = obj.get("status")
    if status:
        status = _dict_at(causes, "status", status)
        for fld in ("capacity", "allocatable"):
            values = status.get(fld)
            if values:
                # ValidateNodeResources builds these with Child(name): "status.capacity.cpu".
                for name, raw in _dict_at(causes, "status." + fld, values).items():
                    q = validate_quantity(raw, f"status.{fld}.{name}", causes)
                    if q is not None and q.sign() >= 0 and _is_integer_resource(name) and not _is_integral(q):
                        _invalid(causes, f"status.{fld}.{name}", str(q), NOT_INTEGER)
    if old is not None:
        old_provider = (old.get("spec") or {}).get("providerID") or ""
        if old_provider and spec.get("providerID") != old_provider:
            _forbidden(causes, "spec.providerID", 'node updates may not change providerID except from "" to valid')


def _validate_namespace(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = obj.get("spec")
    if spec:
        finalizers = _dict_at(causes, "spec", spec).get("finalizers")
        if finalizers:
            # ValidateNamespace reports every finalizer at the list's path.
            for fin in _list_at(causes, "spec.finalizers", finalizers):
                if not isinstance(fin, str):
                    _wrong_type(causes, "spec.finalizers", fin, "a string")
                    continue
                for msg in qualified_name_errors(fin):
                    _invalid(causes, "spec.finalizers", fin, msg)
                if "/" not in fin and fin not in _STANDARD_FINALIZERS:
                    _invalid(causes, "spec.finalizers", fin,
                             "name is neither a standard finalizer name nor is it fully qualified")


# --------------------------------------------------------------------------------------------
# PriorityClass: pkg/apis/scheduling/validation, pkg/apis/scheduling/v1/helpers.go.
# --------------------------------------------------------------------------------------------

HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_CRITICAL_PRIORITY = 2 * HIGHEST_USER_DEFINABLE_PRIORITY
SYSTEM_PRIORITY_CLASSES = {
    "system-node-critical": SYSTEM_CRITICAL_PRIORITY + 1000,
    "system-cluster-critical": SYSTEM_CRITICAL_PRIORITY,
}


def _validate_priority_class(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    name = (obj.get("metadata") or {}).get("name") or ""
    raw = obj.get("value")
    value: int | None = None
    if raw is None:
        _required(causes, "value")
    else:
        value = _int_at(causes, "value", raw)
        if value is not None and not -(2**31) <= value <= _MAX_INT32:
            _invalid(causes, "value", value, f"must be between {-(2**31)} and {_MAX_INT32}, inclusive")
    if isinstance(name, str) and name.startswith("system-"):
        # IsKnownSystemPriorityClass: reserved names must match a built-in exactly.
        if name not in SYSTEM_PRIORITY_CLASSES:
            why = f"{name} is not a known system priority class"
        elif value != SYSTEM_PRIORITY_CLASSES[name]:
            why = f"value of {name} PriorityClass must be {SYSTEM_PRIORITY_CLASSES[name]}"
        elif obj.get("globalDefault"):
            why = f"globalDefault of {name} PriorityClass must be false"
        else:
            why = ""
        if why:
            _forbidden(causes, "metadata.name",
                       f"priority class names with 'system-' prefix are reserved for system use only. error: {why}")
    elif value is not None and value > HIGHEST_USER_DEFINABLE_PRIORITY:
        _forbidden(causes, "value",
                   f"maximum allowed value of a user defined priority is {HIGHEST_USER_DEFINABLE_PRIORITY}")
    _check_enum(causes, "preemptionPolicy", obj.get("preemptionPolicy"), _PREEMPTION_POLICIES)
    if old is not None:
        if obj.get("value") != old.get("value"):
            _forbidden(causes, "value", "may not be changed in an update.")
        if obj.get("preemptionPolicy") != old.get("preemptionPolicy"):
            _invalid(causes, "preemptionPolicy", obj.get("preemptionPolicy"), FIELD_IMMUTABLE)


# --------------------------------------------------------------------------------------------
# LimitRange: core/validation ValidateLimitRange.
# --------------------------------------------------------------------------------------------

_LIMIT_TYPES = frozenset({"Pod", "Container", "PersistentVolumeClaim"})


def _validate_limit_range(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = _dict_at(causes, "spec", obj.get("spec"))
    types_seen: set[str] = set()
    for i, item in enumerate(_list_at(causes, "spec.limits", spec.get("limits"))):
        p = f"spec.limits[{i}]"
        if not isinstance(item, dict):
            _wrong_type(causes, p, item, "an object")
            continue
        ltype = item.get("type") or ""
        if not isinstance(ltype, str):
            _wrong_type(causes, p + ".type", ltype, "a string")
            ltype = ""
        errs = qualified_name_errors(ltype)
        for msg in errs:
            _invalid(causes, p + ".type", ltype, msg)
        if not errs and "/" not in ltype and ltype not in _LIMIT_TYPES:
            _invalid(causes, p + ".type", ltype, "must be a standard limit type or fully qualified")
        if ltype in types_seen:
            _duplicate(causes, p + ".type", ltype)
        types_seen.add(ltype)

        # Pod and Container limits name container resources; other types (PVC) any resource.
        names = _container_resource_name_errors if ltype in ("Pod", "Container") else _resource_name_errors
        # Upstream does not require LimitRange quantities to be non-negative, only well-formed.
        q_max = _check_resource_list(causes, p + ".max", item.get("max"), names, non_negative=False)
        q_min = _check_resource_list(causes, p + ".min", item.get("min"), names, non_negative=False)
        q_def: dict[str, Quantity] = {}
        q_req: dict[str, Quantity] = {}
        if ltype == "Pod":
            if item.get("default"):
                _forbidden(causes, p + ".default", "may not be specified when `type` is 'Pod'")
            if item.get("defaultRequest"):
                _forbidden(causes, p + ".defaultRequest", "may not be specified when `type` is 'Pod'")
        else:
            q_def = _check_resource_list(causes, p + ".default", item.get("default"), names, non_negative=False)
            q_req = _check_resource_list(causes, p + ".defaultRequest", item.get("defaultRequest"), names,
                                         non_negative=False)
        if ltype == "PersistentVolumeClaim" and "storage" not in q_min and "storage" not in q_max:
            _required(causes, p + ".limits",
                      "either minimum or maximum storage value is required, but neither was provided")
        q_ratio = _check_resource_list(causes, p + ".maxLimitRequestRatio", item.get("maxLimitRequestRatio"), names,
                                       non_negative=False)
        for k in q_max.keys() | q_min.keys() | q_def.keys() | q_req.keys() | q_ratio.keys():
            mn, mx, df, rq, ratio = q_min.get(k), q_max.get(k), q_def.get(k), q_req.get(k), q_ratio.get(k)
            if mn is not None and mx is not None and mn > mx:
                _invalid(causes, f"{p}.min[{k}]", str(mn), f"min value {mn} is greater than max value {mx}")
            if rq is not None and mn is not None and mn > rq:
                _invalid(causes, f"{p}.defaultRequest[{k}]", str(rq),
                         f"min value {mn} is greater than default request value {rq}")
            if rq is not None and mx is not None and rq > mx:
                _invalid(causes, f"{p}.defaultRequest[{k}]", str(rq),
                         f"default request value {rq} is greater than max value {mx}")
            if rq is not None and df is not None and rq > df:
                _invalid(causes, f"{p}.defaultRequest[{k}]", str(rq),
                         f"default request value {rq} is greater than default limit value {df}")
            if df is not None and mn is not None and mn > df:
                _invalid(causes, f"{p}.default[{k}]", str(mn), f"min value {mn} is greater than default value {df}")
            if df is not None and mx is not None and df > mx:
                _invalid(causes, f"{p}.default[{k}]", str(mx), f"default value {df} is greater than max value {mx}")
            if ratio is not None:
                if ratio < 1:
                    _invalid(causes, f"{p}.maxLimitRequestRatio[{k}]", str(ratio), f"ratio {ratio} is less than 1")
                elif mn is not None and mx is not None and mn.sign() > 0 and ratio.amount > mx.amount / mn.amount:
                    _invalid(causes, f"{p}.maxLimitRequestRatio[{k}]", str(ratio),
                             f"ratio {ratio} is greater than max/min = {float(mx.amount / mn.amount):f}")
            # Extended resources cannot be overcommitted, so their default limit and request agree.
            if "/" in k and _is_extended_resource(k) and df is not None and rq is not None and df != rq:
                _invalid(causes, f"{p}.defaultRequest[{k}]", str(rq),
                         f"default value {df} must equal to defaultRequest value {rq} in {k}")


# --------------------------------------------------------------------------------------------
# RuntimeClass (pkg/apis/node/validation), PodDisruptionBudget (pkg/apis/policy/validation).
# --------------------------------------------------------------------------------------------


def _validate_runtime_class(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    handler = obj.get("handler") or ""
    if not isinstance(handler, str):
        _wrong_type(causes, "handler", handler, "a string")
    else:
        # NameIsDNSLabel: an empty handler fails the label regex (upstream has no separate Required).
        for msg in dns1123_label_errors(handler):
            _invalid(causes, "handler", handler, msg)
    overhead = obj.get("overhead")
    if overhead:
        # validateOverhead wraps podFixed as the limits of ResourceRequirements rooted at "overhead".
        pod_fixed = _dict_at(causes, "overhead", overhead).get("podFixed")
        if pod_fixed:
            _check_resource_list(causes, "overhead.limits", pod_fixed, _container_resource_name_errors)
    scheduling = obj.get("scheduling")
    if scheduling:
        scheduling = _dict_at(causes, "scheduling", scheduling)
        if scheduling.get("nodeSelector"):
            _check_labels(causes, "scheduling.nodeSelector", scheduling["nodeSelector"])
        if scheduling.get("tolerations"):
            _check_tolerations(causes, "scheduling.tolerations", scheduling["tolerations"])
    if old is not None and (obj.get("handler") or "") != (old.get("handler") or ""):
        _invalid(causes, "handler", obj.get("handler"), FIELD_IMMUTABLE)


def _validate_pdb(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = _dict_at(causes, "spec", obj.get("spec"))
    min_available, max_unavailable = spec.get("minAvailable"), spec.get("maxUnavailable")
    if min_available is not None and max_unavailable is not None:
        _invalid(causes, "spec", spec, "minAvailable and maxUnavailable cannot be both set")
    elif min_available is None and max_unavailable is None:
        # Stricter than upstream, which accepts a budget with neither (kemu's brief: exactly one).
        _required(causes, "spec.minAvailable", "one of minAvailable or maxUnavailable must be set")
    if min_available is not None:
        _check_positive_int_or_percent(causes, "spec.minAvailable", min_available)
    if max_unavailable is not None:
        _check_positive_int_or_percent(causes, "spec.maxUnavailable", max_unavailable)
    if spec.get("selector") is not None:
        _check_label_selector(causes, "spec.selector", spec["selector"])
    # Since policy/v1 a PDB's spec may be updated freely.


# --------------------------------------------------------------------------------------------
# Workloads: pkg/apis/apps/validation (Deployment, ReplicaSet, DaemonSet) and the apps/v1
# selector immutability of pkg/registry/apps/*/strategy.go.
# --------------------------------------------------------------------------------------------


def _check_workload(causes: list[Cause], spec: Obj, old: Obj | None, noun: str) -> None:
    """Selector, template and the counters shared by the three workload kinds."""
    if "replicas" in spec:
        _check_nonnegative(causes, "spec.replicas", spec["replicas"])
    if "minReadySeconds" in spec:
        _check_nonnegative(causes, "spec.minReadySeconds", spec["minReadySeconds"])
    if spec.get("revisionHistoryLimit") is not None:
        _check_nonnegative(causes, "spec.revisionHistoryLimit", spec["revisionHistoryLimit"])

    template = _dict_at(causes, "spec.template", spec.get("template"))
    tmeta = _dict_at(causes, "spec.template.metadata", template.get("metadata"))
    tlabels = tmeta.get("labels") or {}
    selector = spec.get("selector")
    if selector is None:
        _required(causes, "spec.selector")
    else:
        usable = _check_label_selector(causes, "spec.selector", selector)
        if isinstance(selector, dict) and _selector_is_empty(selector):
            _invalid(causes, "spec.selector", selector, f"empty selector is invalid for {noun}")
        elif usable and isinstance(tlabels, dict) and not _selector_matches(selector, tlabels):
            _invalid(causes, "spec.template.metadata.labels", tlabels, "`selector` does not match template `labels`")
    if old is not None:
        old_selector = (old.get("spec") or {}).get("selector")
        if selector != old_selector:
            _invalid(causes, "spec.selector", selector, FIELD_IMMUTABLE)

    # ValidatePodTemplateSpec: template metadata is reported at "spec.template.labels" (sic).
    if tmeta.get("labels"):
        _check_labels(causes, "spec.template.labels", tmeta["labels"])
    if tmeta.get("annotations"):
        for key in _dict_at(causes, "spec.template.annotations", tmeta["annotations"]):
            for msg in qualified_name_errors(key.lower()):
                _invalid(causes, "spec.template.annotations", key, msg)
    tspec = _dict_at(causes, "spec.template.spec", template.get("spec"))
    _check_pod_spec(causes, "spec.template.spec", tspec, is_pod=False)
    restart = tspec.get("restartPolicy")
    if restart is not None and restart != "Always" and restart in _RESTART_POLICIES:
        _not_supported(causes, "spec.template.spec.restartPolicy", restart, ("Always",))
    if tspec.get("activeDeadlineSeconds") is not None:
        _forbidden(causes, "spec.template.spec.activeDeadlineSeconds",
                   f"activeDeadlineSeconds in {'DaemonSet' if noun == 'daemonset' else 'ReplicaSet'} is not Supported")


def _validate_deployment(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = _dict_at(causes, "spec", obj.get("spec"))
    _check_workload(causes, spec, old, "deployment")
    strategy = spec.get("strategy")
    if strategy:
        strategy = _dict_at(causes, "spec.strategy", strategy)
        stype = strategy.get("type")
        rolling = strategy.get("rollingUpdate")
        if stype == "Recreate":
            if rolling is not None:
                _forbidden(causes, "spec.strategy.rollingUpdate",
                           "may not be specified when strategy `type` is 'Recreate'")
        elif stype == "RollingUpdate" or stype is None:
            if rolling is not None:
                ru = _dict_at(causes, "spec.strategy.rollingUpdate", rolling)
                path = "spec.strategy.rollingUpdate"
                # Absent fields default to 25% (pkg/apis/apps/v1/defaults.go).
                unavailable = ru.get("maxUnavailable", "25%")
                surge = ru.get("maxSurge", "25%")
                n_unavailable = _check_positive_int_or_percent(causes, path + ".maxUnavailable", unavailable)
                n_surge = _check_positive_int_or_percent(causes, path + ".maxSurge", surge)
                if n_unavailable == 0 and n_surge == 0:
                    _invalid(causes, path + ".maxUnavailable", unavailable, "may not be 0 when `maxSurge` is 0")
        else:
            _not_supported(causes, "spec.strategy", stype, ("Recreate", "RollingUpdate"))
    deadline = spec.get("progressDeadlineSeconds")
    if deadline is not None:
        number = _int_at(causes, "spec.progressDeadlineSeconds", deadline)
        if number is not None:
            if number < 0:
                _invalid(causes, "spec.progressDeadlineSeconds", number, IS_NEGATIVE)
            min_ready = spec.get("minReadySeconds") or 0
            if isinstance(min_ready, int) and number <= min_ready:
                _invalid(causes, "spec.progressDeadlineSeconds", number, "must be greater than minReadySeconds")


def _validate_replica_set(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    # Upstream's ReplicaSet message says "deployment" too (ValidateReplicaSetSpec).
    _check_workload(causes, _dict_at(causes, "spec", obj.get("spec")), old, "deployment")


def _validate_daemon_set(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = _dict_at(causes, "spec", obj.get("spec"))
    _check_workload(causes, spec, old, "daemonset")
    strategy = spec.get("updateStrategy")
    if strategy:
        strategy = _dict_at(causes, "spec.updateStrategy", strategy)
        stype = strategy.get("type")
        if stype == "RollingUpdate" or stype is None:
            rolling = strategy.get("rollingUpdate")
            if rolling is not None:
                ru = _dict_at(causes, "spec.updateStrategy.rollingUpdate", rolling)
                path = "spec.updateStrategy.rollingUpdate"
                # Defaults: maxUnavailable 1, maxSurge 0 (pkg/apis/apps/v1/defaults.go).
                unavailable, surge = ru.get("maxUnavailable", 1), ru.get("maxSurge", 0)
                n_unavailable = _check_positive_int_or_percent(causes, path + ".maxUnavailable", unavailable)
                n_surge = _check_positive_int_or_percent(causes, path + ".maxSurge", surge)
                if n_unavailable and n_surge:
                    _invalid(causes, path + ".maxSurge", surge, "may not be set when maxUnavailable is non-zero")
                elif n_unavailable == 0 and n_surge == 0:
                    _required(causes, path + ".maxUnavailable", "cannot be 0 when maxSurge is 0")
        elif stype != "OnDelete":
            _not_supported(causes, "spec.updateStrategy", stype, ("RollingUpdate", "OnDelete"))


def _validate_job(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    """A minimal ``ValidateJob`` (pkg/apis/batch/validation): counters, restartPolicy, pod template."""
    spec = _dict_at(causes, "spec", obj.get("spec"))
    for name in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds", "ttlSecondsAfterFinished"):
        if spec.get(name) is not None:
            _check_nonnegative(causes, f"spec.{name}", spec[name])
    if spec.get("activeDeadlineSeconds") == 0:
        _invalid(causes, "spec.activeDeadlineSeconds", 0, "must be greater than 0")
    mode = spec.get("completionMode", "NonIndexed")
    if mode not in ("NonIndexed", "Indexed"):
        _not_supported(causes, "spec.completionMode", mode, ("NonIndexed", "Indexed"))
    elif mode == "Indexed" and spec.get("completions") is None:
        _required(causes, "spec.completions", "when completion mode is Indexed")
    template = _dict_at(causes, "spec.template", spec.get("template"))
    tspec = _dict_at(causes, "spec.template.spec", template.get("spec"))
    _check_pod_spec(causes, "spec.template.spec", tspec, is_pod=False)
    restart = tspec.get("restartPolicy")
    if restart not in ("Never", "OnFailure"):
        _not_supported(causes, "spec.template.spec.restartPolicy", restart, ("OnFailure", "Never"))
    if spec.get("selector") is None:
        _required(causes, "spec.selector")
    if old is not None:
        ospec = old.get("spec") or {}
        for name in ("selector", "completionMode"):
            if spec.get(name) != ospec.get(name):
                _invalid(causes, f"spec.{name}", spec.get(name), FIELD_IMMUTABLE)


def _validate_resource_quota(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    """``ValidateResourceQuota``: every hard amount a valid, non-negative quantity; known scopes."""
    spec = _dict_at(causes, "spec", obj.get("spec"))
    for rname, raw in (_dict_at(causes, "spec.hard", spec.get("hard") or {})).items():
        parsed = _quantity(raw)
        if isinstance(parsed, str):
            _invalid(causes, f"spec.hard[{rname}]", raw, parsed)
        elif parsed[0].sign() < 0:
            _invalid(causes, f"spec.hard[{rname}]", raw, "must be greater than or equal to 0")
    scopes = ("Terminating", "NotTerminating", "BestEffort", "NotBestEffort", "PriorityClass",
              "CrossNamespacePodAffinity")
    for i, scope in enumerate(spec.get("scopes") or []):
        if scope not in scopes:
            _not_supported(causes, f"spec.scopes[{i}]", scope, scopes)


# --------------------------------------------------------------------------------------------
# ConfigMap: core/validation ValidateConfigMap. Event and Lease: ObjectMeta only.
# --------------------------------------------------------------------------------------------

MAX_CONFIGMAP_SIZE = 1024 * 1024  # core.MaxSecretSize, shared by ConfigMaps


def _validate_configmap(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    total = 0
    data = _dict_at(causes, "data", obj.get("data"))
    binary = _dict_at(causes, "binaryData", obj.get("binaryData"))
    for key, value in data.items():
        for msg in _configmap_key_errors(key):
            _invalid(causes, f"data[{key}]", key, msg)
        if key in binary:
            _invalid(causes, f"data[{key}]", key, "duplicate of key present in binaryData")
        if isinstance(value, str):
            total += len(value.encode())
        else:
            _wrong_type(causes, f"data[{key}]", value, "a string")
    for key, value in binary.items():
        for msg in _configmap_key_errors(key):
            _invalid(causes, f"binaryData[{key}]", key, msg)
        if isinstance(value, str):
            total += len(value) * 3 // 4  # base64 text: count the decoded bytes
    if total > MAX_CONFIGMAP_SIZE:
        # Upstream reports the whole object here (field.NewPath("")), so the field is empty.
        _too_long(causes, "", MAX_CONFIGMAP_SIZE)
    if old is not None and old.get("immutable"):
        if not obj.get("immutable"):
            _forbidden(causes, "immutable", "field is immutable when `immutable` is set")
        if obj.get("data") != old.get("data"):
            _forbidden(causes, "data", "field is immutable when `immutable` is set")
        if obj.get("binaryData") != old.get("binaryData"):
            _forbidden(causes, "binaryData", "field is immutable when `immutable` is set")


# --------------------------------------------------------------------------------------------
# Storage: core/validation ValidatePersistentVolume(Claim)(Update) and storage/validation
# ValidateStorageClass(Update), for the fields the scheduler's volume plugins read. Volume
# sources (hostPath, csi, ...) are not checked: kemu attaches no volumes.
# --------------------------------------------------------------------------------------------

_ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
_VOLUME_MODES = ("Block", "Filesystem")
_PV_RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
_SC_RECLAIM_POLICIES = ("Delete", "Retain")
_BINDING_MODES = ("Immediate", "WaitForFirstConsumer")


def _check_access_modes(causes: list[Cause], path: str, modes: Any) -> None:
    items = _list_at(causes, path, modes)
    if not items:
        _required(causes, path, "at least 1 access mode is required")
        return
    for mode in items:
        if mode not in _ACCESS_MODES:
            _not_supported(causes, path, mode, _ACCESS_MODES)
    if "ReadWriteOncePod" in items and len(items) > 1:
        _forbidden(causes, path, "may not use ReadWriteOncePod with other access modes")


def _check_positive_quantity(causes: list[Cause], path: str, value: Any) -> None:
    q = validate_quantity(value, path, causes)
    if q is not None and q.sign() <= 0:
        _invalid(causes, path, str(q), NOT_POSITIVE)


def _check_storage_class_name(causes: list[Cause], path: str, name: Any) -> None:
    if name:
        for msg in dns1123_subdomain_errors(name) if isinstance(name, str) else ["must be a string"]:
            _invalid(causes, path, name, msg)


def _validate_persistent_volume(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = _dict_at(causes, "spec", obj.get("spec"))
    _check_access_modes(causes, "spec.accessModes", spec.get("accessModes"))
    capacity = _dict_at(causes, "spec.capacity", spec.get("capacity"))
    if not capacity:
        _required(causes, "spec.capacity")
    elif "storage" not in capacity or len(capacity) > 1:
        _not_supported(causes, "spec.capacity", ", ".join(sorted(capacity)), ("storage",))
    else:
        _check_positive_quantity(causes, "spec.capacity[storage]", capacity["storage"])
    _check_enum(causes, "spec.persistentVolumeReclaimPolicy", spec.get("persistentVolumeReclaimPolicy"),
                _PV_RECLAIM_POLICIES)
    _check_enum(causes, "spec.volumeMode", spec.get("volumeMode"), _VOLUME_MODES)
    _check_storage_class_name(causes, "spec.storageClassName", spec.get("storageClassName"))
    affinity = spec.get("nodeAffinity")
    if affinity is not None:
        required = _dict_at(causes, "spec.nodeAffinity", affinity).get("required")
        if required is None:
            _required(causes, "spec.nodeAffinity.required", "must specify required node constraints")
        else:
            path = "spec.nodeAffinity.required.nodeSelectorTerms"
            terms = _list_at(causes, path, _dict_at(causes, path, required).get("nodeSelectorTerms"))
            if not terms:
                _required(causes, path, "must have at least one node selector term")
            for i, term in enumerate(terms):
                _check_node_selector_term(causes, f"{path}[{i}]", term, strict_values=True)


def _validate_persistent_volume_claim(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = _dict_at(causes, "spec", obj.get("spec"))
    _check_access_modes(causes, "spec.accessModes", spec.get("accessModes"))
    if spec.get("selector") is not None:
        _check_label_selector(causes, "spec.selector", spec["selector"])
    requests = _dict_at(causes, "spec.resources.requests",
                        _dict_at(causes, "spec.resources", spec.get("resources")).get("requests"))
    if "storage" not in requests:
        _required(causes, "spec.resources[storage]")
    else:
        _check_positive_quantity(causes, "spec.resources[storage]", requests["storage"])
    _check_storage_class_name(causes, "spec.storageClassName", spec.get("storageClassName"))
    _check_enum(causes, "spec.volumeMode", spec.get("volumeMode"), _VOLUME_MODES)
    if old is None:
        return
    # ValidatePersistentVolumeClaimUpdate: the spec is frozen, except the binder setting volumeName once
    # and a bound claim's storage request (expansion).
    old_spec = dict(old.get("spec") or {})
    new_spec = dict(spec)
    if not old_spec.get("volumeName"):
        old_spec["volumeName"] = new_spec.get("volumeName")
    if ((obj.get("status") or {}).get("phase") or "") == "Bound":
        for fixed in (old_spec, new_spec):
            resources = dict(fixed.get("resources") or {})
            resources["requests"] = {k: v for k, v in (resources.get("requests") or {}).items() if k != "storage"}
            fixed["resources"] = resources
    if old_spec != new_spec:
        _forbidden(causes, "spec", "spec is immutable after creation except resources.requests and "
                                   "volumeAttributesClassName for bound claims")


def _validate_storage_class(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    provisioner = obj.get("provisioner")
    if not provisioner:
        _required(causes, "provisioner")
    elif isinstance(provisioner, str):
        for msg in qualified_name_errors(provisioner):
            _invalid(causes, "provisioner", provisioner, msg)
    else:
        _wrong_type(causes, "provisioner", provisioner, "a string")
    _check_enum(causes, "reclaimPolicy", obj.get("reclaimPolicy"), _SC_RECLAIM_POLICIES)
    _check_enum(causes, "volumeBindingMode", obj.get("volumeBindingMode"), _BINDING_MODES)
    for i, term in enumerate(_list_at(causes, "allowedTopologies", obj.get("allowedTopologies"))):
        path = f"allowedTopologies[{i}].matchLabelExpressions"
        expressions = _list_at(causes, path, _dict_at(causes, f"allowedTopologies[{i}]", term).get(
            "matchLabelExpressions"))
        if not expressions:
            _required(causes, path, "must have at least one label expression")
        for j, raw_expr in enumerate(expressions):
            expr = _dict_at(causes, f"{path}[{j}]", raw_expr)
            _check_label_name(causes, f"{path}[{j}].key", expr.get("key", ""))
            if not _list_at(causes, f"{path}[{j}].values", expr.get("values")):
                _required(causes, f"{path}[{j}].values", "must specify as least one value")
    if old is None:
        return
    for fld, detail in (("parameters", "updates to parameters are forbidden."),
                        ("provisioner", "updates to provisioner are forbidden."),
                        ("reclaimPolicy", "updates to reclaimPolicy are forbidden.")):
        if obj.get(fld) != old.get(fld):
            _forbidden(causes, fld, detail)
    if obj.get("volumeBindingMode") != old.get("volumeBindingMode"):
        _invalid(causes, "volumeBindingMode", obj.get("volumeBindingMode"), FIELD_IMMUTABLE)


def _metadata_only(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    """Kinds whose bodies kemu does not constrain beyond ObjectMeta (Event, Lease)."""


VALIDATORS: dict[str, Validator] = {
    "pods": _validate_pod,
    "nodes": _validate_node,
    "namespaces": _validate_namespace,
    "priorityclasses.scheduling.k8s.io": _validate_priority_class,
    "limitranges": _validate_limit_range,
    "runtimeclasses.node.k8s.io": _validate_runtime_class,
    "poddisruptionbudgets.policy": _validate_pdb,
    "deployments.apps": _validate_deployment,
    "replicasets.apps": _validate_replica_set,
    "daemonsets.apps": _validate_daemon_set,
    "jobs.batch": _validate_job,
    "resourcequotas": _validate_resource_quota,
    "configmaps": _validate_configmap,
    "persistentvolumes": _validate_persistent_volume,
    "persistentvolumeclaims": _validate_persistent_volume_claim,
    "storageclasses.storage.k8s.io": _validate_storage_class,
    "events": _metadata_only,
    "leases.coordination.k8s.io": _metadata_only,
    "horizontalpodautoscalers.autoscaling": validate_horizontal_pod_autoscaler,
}


def validate(kind: Kind, obj: Obj, old: Obj | None = None) -> None:
    """Validate ``obj`` (and, on update, its change from the stored ``old``).

    Raises a 422 ``Invalid`` :class:`~emulator.api.errors.StatusError` listing every cause;
    returns ``None`` when the object may be stored. Kinds without an entry in
    :data:`VALIDATORS` get ObjectMeta validation only.
    """
    causes: list[Cause] = []
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        if meta is not None:
            _wrong_type(causes, "metadata", meta, "an object")
        meta = {}
    _check_object_meta(kind, meta, causes)
    if old is not None:
        _check_object_meta_update(meta, old.get("metadata") or {}, causes)
    fn = VALIDATORS.get(kind.resource)
    if fn is not None:
        fn(obj, old, causes)
    if causes:
        name = meta.get("name")
        raise errors.invalid(kind.kind, name if isinstance(name, str) else "", causes, kind.group)
