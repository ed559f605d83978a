"""Pod spec validation: ``pkg/apis/core/validation`` ``ValidatePodSpec`` and ``ValidatePodUpdate``.

Containers and init containers (names, images, ports, resources, probes),
tolerations, node and pod affinity, topology spread constraints, volumes, and
the few spec fields a pod update may change. Workload validators (apps, batch)
check their pod templates with :func:`check_pod_spec`.
"""

from __future__ import annotations

import re
from typing import Any

from emulator.api.errors import Cause
from emulator.api.names import (
    dns1123_label_errors,
    dns1123_subdomain_errors,
    label_value_errors,
)
from emulator.api.names import max_len as _max_len
from emulator.api.types import Obj
from emulator.server.validation.field import (
    NOT_POSITIVE,
    check_enum,
    check_label_name,
    check_label_selector,
    check_labels,
    check_nonnegative,
    check_operator_values,
    dict_at,
    duplicate,
    forbidden,
    int_at,
    invalid,
    list_at,
    not_supported,
    objects_at,
    required,
    wrong_type,
)
from emulator.server.validation.registry import register
from emulator.server.validation.resources import (
    check_resource_list,
    check_resource_requirements,
    container_resource_name_errors,
)

_PORT_NAME_CHARSET_RE = re.compile("[-a-z0-9]+")


_PORT_NAME_CHARSET_RE = re.compile("[-a-z0-9]+")
_PORT_NAME_LETTER_RE = re.compile("[a-z]")


def mask_trailing_dash(name: str) -> str:
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


def _port_num_error(port: int) -> str | None:
    return None if 1 <= port <= 65535 else "must be between 1 and 65535, inclusive"


RESTART_POLICIES = ("Always", "OnFailure", "Never")


RESTART_POLICIES = ("Always", "OnFailure", "Never")
_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")


_DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
_PULL_POLICIES = ("Always", "IfNotPresent", "Never")  # sets.List order


_PULL_POLICIES = ("Always", "IfNotPresent", "Never")  # sets.List order
_TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")


_TERMINATION_MESSAGE_POLICIES = ("File", "FallbackToLogsOnError")
_PROTOCOLS = ("SCTP", "TCP", "UDP")  # sets.List order


_PROTOCOLS = ("SCTP", "TCP", "UDP")  # sets.List order
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_TOLERATION_OPERATORS = ("Equal", "Exists")


_TOLERATION_OPERATORS = ("Equal", "Exists")
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")


PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")
_WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")  # sets.List order


_WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")  # sets.List order
_NODE_INCLUSION_POLICIES = ("Honor", "Ignore")  # sets.List order


_NODE_INCLUSION_POLICIES = ("Honor", "Ignore")  # sets.List order
MAX_INT32 = 2**31 - 1


MAX_INT32 = 2**31 - 1
_PROBES = ("lifecycle", "livenessProbe", "readinessProbe", "startupProbe")


def _check_container_ports(causes: list[Cause], path: str, ports: Any) -> None:
    """core/validation ``validateContainerPorts``."""
    names: set[str] = set()
    for p, port in objects_at(causes, path, ports):
        name = port.get("name")
        if name:
            msgs = _port_name_errors(name) if isinstance(name, str) else ["must be a string"]
            if msgs:
                for msg in msgs:
                    invalid(causes, p + ".name", name, msg)
            elif name in names:
                duplicate(causes, p + ".name", name)
            else:
                names.add(name)
        cport = port.get("containerPort")
        if not cport:
            required(causes, p + ".containerPort")
        else:
            number = int_at(causes, p + ".containerPort", cport)
            if number is not None and (err := _port_num_error(number)):
                invalid(causes, p + ".containerPort", number, err)
        hport = port.get("hostPort")
        if hport:
            number = int_at(causes, p + ".hostPort", hport)
            if number is not None and (err := _port_num_error(number)):
                invalid(causes, p + ".hostPort", number, err)
        check_enum(causes, p + ".protocol", port.get("protocol"), _PROTOCOLS)


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
                duplicate(causes, f"{path}[{ci}].ports[{pi}].hostPort", key)
            else:
                seen.add(key)


def _check_container_common(causes: list[Cause], p: str, ctr: Obj, is_pod: bool) -> None:
    """core/validation ``validateContainerCommon`` (+ ``validateContainerOnlyForPod``)."""
    name = ctr.get("name")
    if not name:
        required(causes, p + ".name")
    elif not isinstance(name, str):
        wrong_type(causes, p + ".name", name, "a string")
    else:
        for msg in dns1123_label_errors(name):
            invalid(causes, p + ".name", name, msg)
    image = ctr.get("image")
    if not image:
        required(causes, p + ".image")
    elif not isinstance(image, str):
        wrong_type(causes, p + ".image", image, "a string")
    elif is_pod and image != image.strip():
        invalid(causes, p + ".image", image, "must not have leading or trailing whitespace")
    check_enum(causes, p + ".terminationMessagePolicy", ctr.get("terminationMessagePolicy"),
               _TERMINATION_MESSAGE_POLICIES)
    check_enum(causes, p + ".imagePullPolicy", ctr.get("imagePullPolicy"), _PULL_POLICIES)
    ports = ctr.get("ports")
    if ports:
        _check_container_ports(causes, p + ".ports", ports)
    resources = ctr.get("resources")
    if resources:
        if isinstance(resources, dict):
            check_resource_requirements(causes, p + ".resources", resources)
        else:
            wrong_type(causes, p + ".resources", resources, "an object")


def _check_containers(causes: list[Cause], path: str, containers: Any, is_pod: bool) -> set[str]:
    """core/validation ``validateContainers``; returns the container names seen."""
    names: set[str] = set()
    if not containers:
        required(causes, path)
        return names
    for p, ctr in objects_at(causes, path, containers):
        _check_container_common(causes, p, ctr, is_pod)
        name = ctr.get("name")
        if isinstance(name, str):
            if name in names:
                duplicate(causes, p + ".name", name)
            else:
                names.add(name)
        if ctr.get("restartPolicy") is not None:
            forbidden(causes, p + ".restartPolicy", "may not be set for non-init containers")
    if isinstance(containers, list):
        _check_host_port_conflicts(causes, path, containers)
    return names


def _check_init_containers(causes: list[Cause], path: str, containers: Any, names: set[str], is_pod: bool) -> None:
    """core/validation ``validateInitContainers``: names unique across init and app containers,
    and only restartable (sidecar) init containers may carry probes or lifecycle hooks."""
    for i, ctr in enumerate(list_at(causes, path, containers)):
        p = f"{path}[{i}]"
        if not isinstance(ctr, dict):
            wrong_type(causes, p, ctr, "an object")
            continue
        _check_container_common(causes, p, ctr, is_pod)
        restart = ctr.get("restartPolicy")
        if restart is not None and restart != "Always":
            not_supported(causes, p + ".restartPolicy", restart, ("Always",))
        name = ctr.get("name")
        if isinstance(name, str):
            if name in names:
                duplicate(causes, p + ".name", name)
            elif name:
                names.add(name)
        if restart != "Always":
            for fld in _PROBES:
                if ctr.get(fld) is not None:
                    forbidden(causes, f"{p}.{fld}", "may not be set for init containers without restartPolicy=Always")
        if ctr.get("ports"):
            # Init containers run one at a time, so only conflicts within one container count.
            _check_host_port_conflicts(causes, path, [ctr], first_index=i)


def check_tolerations(causes: list[Cause], path: str, tolerations: Any) -> None:
    """core/validation ``ValidateTolerations``."""
    for p, tol in objects_at(causes, path, tolerations):
        key = tol.get("key") or ""
        if key:
            check_label_name(causes, p + ".key", key)
        op = tol.get("operator") or ""
        effect = tol.get("effect") or ""
        if not key and op != "Exists":
            invalid(causes, p + ".operator", op,
                    'operator must be Exists when `key` is empty, which means "match all values and all keys"')
        if tol.get("tolerationSeconds") is not None and effect != "NoExecute":
            invalid(causes, p + ".effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set")
        value = tol.get("value") or ""
        if op in ("Equal", ""):
            # Upstream joins the label-value messages and reports them at .operator.
            errs = label_value_errors(value) if isinstance(value, str) else ["must be a string"]
            if errs:
                invalid(causes, p + ".operator", value, ";".join(errs))
        elif op == "Exists":
            if value:
                invalid(causes, p + ".operator", value, "value must be empty when `operator` is 'Exists'")
        else:
            not_supported(causes, p + ".operator", op, _TOLERATION_OPERATORS)
        if effect and effect not in TAINT_EFFECTS:
            not_supported(causes, p + ".effect", effect, TAINT_EFFECTS)


def check_node_selector_term(causes: list[Cause], path: str, term: Any, strict_values: bool) -> None:
    """core/validation ``ValidateNodeSelectorTerm``."""
    term = dict_at(causes, path, term)
    exprs_path = path + ".matchExpressions"
    for p, req in objects_at(causes, exprs_path, term.get("matchExpressions")):
        values = list_at(causes, p + ".values", req.get("values"))
        check_operator_values(causes, p, req.get("operator"), values, numeric=True)
        check_label_name(causes, p + ".key", req.get("key", ""))
        if strict_values:
            for k, value in enumerate(values):
                for msg in label_value_errors(value) if isinstance(value, str) else ["must be a string"]:
                    invalid(causes, f"{p}.values[{k}]", value, msg)
    fields_path = path + ".matchFields"
    for p, req in objects_at(causes, fields_path, term.get("matchFields")):
        values = list_at(causes, p + ".values", req.get("values"))
        if req.get("operator") in ("In", "NotIn"):
            if len(values) != 1:
                required(causes, p + ".values",
                         "must be only one value when `operator` is 'In' or 'NotIn' for node field selector")
        else:
            invalid(causes, p + ".operator", req.get("operator"), "not a valid selector operator")
        if req.get("key") != "metadata.name":
            invalid(causes, p + ".key", req.get("key"), "not a valid field selector key")
        else:
            for k, value in enumerate(values):
                for msg in dns1123_subdomain_errors(value) if isinstance(value, str) else ["must be a string"]:
                    invalid(causes, f"{p}.values[{k}]", value, msg)


def _check_pod_affinity_terms(causes: list[Cause], path: str, terms: Any, weighted: bool) -> None:
    for i, term in enumerate(list_at(causes, path, terms)):
        p = f"{path}[{i}]"
        if not isinstance(term, dict):
            wrong_type(causes, p, term, "an object")
            continue
        if weighted:
            weight = term.get("weight")
            if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
                invalid(causes, p + ".weight", weight, "must be in the range 1-100")
            p += ".podAffinityTerm"
            body = dict_at(causes, p, term.get("podAffinityTerm"))
        else:
            body = term
        if body.get("labelSelector") is not None:
            check_label_selector(causes, p + ".labelSelector", body["labelSelector"])
        if body.get("namespaceSelector") is not None:
            check_label_selector(causes, p + ".namespaceSelector", body["namespaceSelector"])
        for ns in list_at(causes, p + ".namespaces", body.get("namespaces")):
            for msg in dns1123_label_errors(ns) if isinstance(ns, str) else ["must be a string"]:
                invalid(causes, p + ".namespace", ns, msg)  # sic: upstream says ".namespace"
        topology_key = body.get("topologyKey") or ""
        if not topology_key:
            required(causes, p + ".topologyKey", "can not be empty")
        check_label_name(causes, p + ".topologyKey", topology_key)


def _check_affinity(causes: list[Cause], path: str, affinity: Any) -> None:
    """core/validation ``validateAffinity``."""
    affinity = dict_at(causes, path, affinity)
    node = affinity.get("nodeAffinity")
    if node:
        node = dict_at(causes, path + ".nodeAffinity", node)
        required_terms = node.get("requiredDuringSchedulingIgnoredDuringExecution")
        if required_terms is not None:
            rp = path + ".nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
            terms = list_at(causes, rp, dict_at(causes, rp, required_terms).get("nodeSelectorTerms"))
            if not terms:
                required(causes, rp, "must have at least one node selector term")
            for i, term in enumerate(terms):
                check_node_selector_term(causes, f"{rp}[{i}]", term, strict_values=True)
        pp = path + ".nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
        for i, item in enumerate(list_at(causes, pp, node.get("preferredDuringSchedulingIgnoredDuringExecution"))):
            pref = dict_at(causes, f"{pp}[{i}]", item)
            weight = pref.get("weight")
            if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
                invalid(causes, f"{pp}[{i}].weight", weight, "must be in the range 1-100")
            # Preferred terms tolerate invalid label values (they may match a single node).
            check_node_selector_term(causes, f"{pp}[{i}].preference", pref.get("preference"), strict_values=False)
    for fld in ("podAffinity", "podAntiAffinity"):
        pod = affinity.get(fld)
        if not pod:
            continue
        pod = dict_at(causes, f"{path}.{fld}", pod)
        base = f"{path}.{fld}"
        _check_pod_affinity_terms(causes, base + ".requiredDuringSchedulingIgnoredDuringExecution",
                                  pod.get("requiredDuringSchedulingIgnoredDuringExecution"), weighted=False)
        _check_pod_affinity_terms(causes, base + ".preferredDuringSchedulingIgnoredDuringExecution",
                                  pod.get("preferredDuringSchedulingIgnoredDuringExecution"), weighted=True)


def _check_topology_spread(causes: list[Cause], path: str, constraints: Any) -> None:
    """core/validation ``validateTopologySpreadConstraints``."""
    items = list_at(causes, path, constraints)
    for i, tsc in enumerate(items):
        p = f"{path}[{i}]"
        if not isinstance(tsc, dict):
            wrong_type(causes, p, tsc, "an object")
            continue
        skew = tsc.get("maxSkew")
        if not isinstance(skew, int) or isinstance(skew, bool) or skew <= 0:
            invalid(causes, p + ".maxSkew", skew if skew is not None else 0, NOT_POSITIVE)
        key = tsc.get("topologyKey") or ""
        if not key:
            required(causes, p + ".topologyKey", "can not be empty")
        action = tsc.get("whenUnsatisfiable") or ""
        if action not in _WHEN_UNSATISFIABLE:
            not_supported(causes, p + ".whenUnsatisfiable", action, _WHEN_UNSATISFIABLE)
        for later in items[i + 1:]:
            if isinstance(later, dict) and later.get("topologyKey") == tsc.get("topologyKey") \
                    and later.get("whenUnsatisfiable") == tsc.get("whenUnsatisfiable"):
                duplicate(causes, p + ".{topologyKey, whenUnsatisfiable}", f"{{{key}, {action}}}")
                break
        min_domains = tsc.get("minDomains")
        if min_domains is not None:
            if not isinstance(min_domains, int) or isinstance(min_domains, bool) or min_domains <= 0:
                invalid(causes, p + ".minDomains", min_domains, NOT_POSITIVE)
            if action != "DoNotSchedule":
                invalid(causes, p + ".minDomains", min_domains,
                        f"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}")
        for fld in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            policy = tsc.get(fld)
            if policy is not None and policy not in _NODE_INCLUSION_POLICIES:
                not_supported(causes, f"{p}.{fld}", policy, _NODE_INCLUSION_POLICIES)
        if tsc.get("labelSelector") is not None:
            check_label_selector(causes, p + ".labelSelector", tsc["labelSelector"])


def _check_volumes(causes: list[Cause], path: str, volumes: Any) -> None:
    """The name part of core/validation ``ValidateVolumes`` (volume sources are not checked)."""
    names: set[str] = set()
    for i, vol in enumerate(list_at(causes, path, volumes)):
        p = f"{path}[{i}].name"
        name = vol.get("name") if isinstance(vol, dict) else None
        if not name:
            required(causes, p)
        elif not isinstance(name, str):
            wrong_type(causes, p, name, "a string")
        else:
            for msg in dns1123_label_errors(name):
                invalid(causes, p, name, msg)
            if name in names:
                duplicate(causes, p, name)
            names.add(name)


def check_pod_spec(causes: list[Cause], path: str, spec: Obj, is_pod: bool, creating: bool = True) -> None:
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
                forbidden(causes, path + ".ephemeralContainers", "cannot be set on create")
        else:
            forbidden(causes, path + ".ephemeralContainers", "ephemeral containers not allowed in pod template")
    volumes = spec.get("volumes")
    if volumes:
        _check_volumes(causes, path + ".volumes", volumes)

    check_enum(causes, path + ".restartPolicy", spec.get("restartPolicy"), RESTART_POLICIES)
    check_enum(causes, path + ".dnsPolicy", spec.get("dnsPolicy"), _DNS_POLICIES)
    grace = spec.get("terminationGracePeriodSeconds")
    if grace is not None:
        check_nonnegative(causes, path + ".terminationGracePeriodSeconds", grace)
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None:
        number = int_at(causes, path + ".activeDeadlineSeconds", deadline)
        if number is not None and not 1 <= number <= MAX_INT32:
            invalid(causes, path + ".activeDeadlineSeconds", number, f"must be between 1 and {MAX_INT32}, inclusive")

    node_selector = spec.get("nodeSelector")
    if node_selector:
        check_labels(causes, path + ".nodeSelector", node_selector)
    node_name = spec.get("nodeName")
    if node_name:
        for msg in dns1123_subdomain_errors(node_name) if isinstance(node_name, str) else ["must be a string"]:
            invalid(causes, path + ".nodeName", node_name, msg)
        if is_pod and creating and spec.get("schedulingGates"):
            forbidden(causes, path + ".nodeName", "cannot be set until all schedulingGates have been cleared")
    for fld in ("serviceAccountName", "priorityClassName", "runtimeClassName"):
        value = spec.get(fld)
        if value:
            for msg in dns1123_subdomain_errors(value) if isinstance(value, str) else ["must be a string"]:
                invalid(causes, f"{path}.{fld}", value, msg)
    for fld in ("hostname", "subdomain"):
        value = spec.get(fld)
        if value:
            for msg in dns1123_label_errors(value) if isinstance(value, str) else ["must be a string"]:
                invalid(causes, f"{path}.{fld}", value, msg)
    check_enum(causes, path + ".preemptionPolicy", spec.get("preemptionPolicy"), PREEMPTION_POLICIES)

    for field, check in (("tolerations", check_tolerations), ("affinity", _check_affinity),
                         ("topologySpreadConstraints", _check_topology_spread)):
        if spec.get(field):
            check(causes, f"{path}.{field}", spec[field])
    gates = spec.get("schedulingGates")
    if gates:
        seen: set[str] = set()
        for i, gate in enumerate(list_at(causes, path + ".schedulingGates", gates)):
            gname = gate.get("name", "") if isinstance(gate, dict) else gate
            check_label_name(causes, f"{path}.schedulingGates[{i}]", gname)
            if isinstance(gname, str):
                if gname in seen:
                    duplicate(causes, f"{path}.schedulingGates[{i}]", gname)
                seen.add(gname)
    overhead = spec.get("overhead")
    if overhead:
        # Upstream validates overhead as the limits of a ResourceRequirements rooted at
        # "overhead", hence "spec.overhead.limits[cpu]".
        check_resource_list(causes, path + ".overhead.limits", overhead, container_resource_name_errors)
    if is_pod and spec.get("hostNetwork") and isinstance(spec.get("containers"), list):
        # validatePodHostNetworkDeps: with the host's network a pod's ports are the host's ports.
        for i, ctr in enumerate(spec["containers"]):
            ports = ctr.get("ports") if isinstance(ctr, dict) else None
            for j, port in enumerate(ports if isinstance(ports, list) else ()):
                if isinstance(port, dict) and port.get("hostPort") != port.get("containerPort"):
                    invalid(causes, f"{path}.containers[{i}].ports[{j}].hostPort", port.get("hostPort"),
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
            forbidden(causes, "spec." + fld, "pod updates may not add or remove containers")
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
                invalid(causes, "spec.activeDeadlineSeconds", None,
                        "must not update from a positive integer to nil value")
            elif not isinstance(new, int) or isinstance(new, bool) or not 0 <= new <= MAX_INT32:
                invalid(causes, "spec.activeDeadlineSeconds", new, f"must be between 0 and {MAX_INT32}, inclusive")
            elif isinstance(old, int) and old < new:
                invalid(causes, "spec.activeDeadlineSeconds", new, "must be less than or equal to previous value")
        elif key == "tolerations":
            if not _only_added_tolerations(new or [], old or []):
                forbidden(causes, "spec.tolerations",
                          "existing toleration can not be modified except its tolerationSeconds")
        elif key == "schedulingGates":
            old_names = {g.get("name") for g in old or () if isinstance(g, dict)}
            for i, gate in enumerate(new or ()):
                gname = gate.get("name") if isinstance(gate, dict) else gate
                if gname not in old_names:
                    forbidden(causes, f"spec.schedulingGates[{i}].name",
                              f"only deletion is allowed, but found new scheduling gate '{gname}'")
        elif key == "nodeName":
            if old:
                changed.append(key)
        elif key == "nodeSelector" and old_spec.get("schedulingGates") and isinstance(new or {}, dict) \
                and isinstance(old or {}, dict):
            # A gated pod may gain node selector entries but not lose or change them.
            for k, v in (old or {}).items():
                if (new or {}).get(k) != v:
                    invalid(causes, "spec.nodeSelector", new,
                            "only additions to spec.nodeSelector are allowed (no mutations or deletions)")
                    break
        elif key == "terminationGracePeriodSeconds" and isinstance(old, int) and old < 0 and new == 1:
            pass
        else:
            changed.append(key)
    if changed:
        fields = ", ".join(sorted(f"spec.{k}" for k in changed))
        forbidden(causes, "spec",
                  f"pod updates may not change fields other than {_UPDATABLE_POD_SPEC_FIELDS}\n(changed: {fields})")


def _only_added_tolerations(new: list[Any], old: list[Any]) -> bool:
    """validateOnlyAddedTolerations: each old toleration survives, tolerationSeconds aside."""
    def strip(t: Any) -> Any:
        return {k: v for k, v in t.items() if k != "tolerationSeconds"} if isinstance(t, dict) else t
    remaining = [strip(t) for t in new]
    return all(strip(t) in remaining for t in old)


@register("pods")
def _validate_pod(obj: Obj, old: Obj | None, causes: list[Cause]) -> None:
    spec = dict_at(causes, "spec", obj.get("spec"))
    check_pod_spec(causes, "spec", spec, is_pod=True, creating=old is None)
    if old is not None:
        _check_pod_update(causes, spec, old.get("spec") or {})
