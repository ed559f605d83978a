"""Scheduler extenders: kube-scheduler's HTTP webhook protocol, so an existing extender can be pointed at kemu.

Upstream ``pkg/scheduler/extender.go`` (``HTTPExtender``), the wire types of
``staging/src/k8s.io/kube-scheduler/extender/v1/types.go``, the ``extenders``
field of ``KubeSchedulerConfiguration`` and how ``schedule_one.go``
(``findNodesThatPassExtenders``, ``prioritizeNodes``, ``extendersBinding``) and
``preemption.go`` (``callExtenders``) use them. Each call is ``POST
<urlPrefix>/<verb>`` (filter, prioritize, bind, preempt) with Go-named JSON
fields, decoded case-insensitively. :func:`with_extenders` turns each extender
into a framework plugin (:class:`ExtenderPlugin`: a last Filter -- which the
runtime calls after the other filters, on the feasible nodes only, as
``findNodesThatPassExtenders`` --, a weighted Score, a Bind before
DefaultBinder) and hands them to DefaultPreemption. The
protocol verb by verb, and the differences from upstream, are in
``docs/scheduler-plugins.md`` ("Extenders").

I/O. The scheduling framework is pure (an import contract keeps HTTP
libraries out of ``emulator.scheduler``), so the HTTP client is injected: a
:class:`Transport` posts bytes and returns (status, bytes).
``emulator.extender_http.HTTPTransport`` is the real one; tests may pass
any callable object.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter
from typing import Any, Protocol

import numpy as np
import orjson

from emulator.api.pods import is_extended_resource
from emulator.scheduler.framework.interface import (
    MAX_NODE_SCORE,
    Code,
    CycleState,
    FilterVerdict,
    Rejection,
    Status,
)
from emulator.scheduler.framework.profile import PluginRef, PluginSet, Profile
from emulator.scheduler.framework.registry import Registry
from emulator.scheduler.framework.snapshot import Snapshot
from emulator.scheduler.framework.types import NodeInfo, PodInfo
from emulator.scheduler.plugins import default_preemption
from emulator.scheduler.plugins.default_preemption import Victims

__all__ = [
    "DEFAULT_EXTENDER_TIMEOUT",
    "MAX_EXTENDER_PRIORITY",
    "ExtenderConfig",
    "ExtenderError",
    "ExtenderPlugin",
    "HTTPExtender",
    "ManagedResource",
    "Transport",
    "parse_duration",
    "validate_extenders",
    "with_extenders",
    "with_extenders_for_profiles",
]

MAX_EXTENDER_PRIORITY = 10  # extender/v1 MaxExtenderPriority
DEFAULT_EXTENDER_TIMEOUT = 5.0  # extender.go DefaultExtenderTimeout, seconds
DEFAULT_BINDER = "DefaultBinder"


class ExtenderError(Exception):
    """An extender call failed: transport error, non-200 answer, or an ``Error`` in the result."""


class Transport(Protocol):
    """Posts a JSON body; returns (HTTP status, response body). Raises on connection failures."""

    def post(self, url: str, body: bytes, timeout: float) -> tuple[int, bytes]: ...


_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(value: str | float | int | None) -> float:
    """A Go duration (``"5s"``, ``"1m30s"``, ``"250ms"``) or a number of seconds, in seconds."""
    if value is None or value == "":
        return 0.0
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    text = str(value).strip()
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    if body == "0":
        return 0.0
    pos, total = 0, 0.0
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        if match is None:
            raise ValueError(f'time: invalid duration "{text}"')
        total += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if not body:
        raise ValueError(f'time: invalid duration "{text}"')
    return sign * total


@dataclass(frozen=True)
class ManagedResource:
    name: str
    ignored_by_scheduler: bool = False


@dataclass(frozen=True)
class ExtenderConfig:
    """One entry of ``KubeSchedulerConfiguration.extenders`` (upstream ``Extender``)."""

    url_prefix: str
    filter_verb: str = ""
    preempt_verb: str = ""
    prioritize_verb: str = ""
    bind_verb: str = ""
    weight: int = 0
    enable_https: bool = False
    http_timeout: float = DEFAULT_EXTENDER_TIMEOUT
    node_cache_capable: bool = False
    managed_resources: tuple[ManagedResource, ...] = ()
    ignorable: bool = False

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ExtenderConfig:
        """From the configuration's camelCase shape; ``httpTimeout`` 0 or absent means 5s."""
        timeout = parse_duration(raw.get("httpTimeout"))
        return cls(
            url_prefix=str(raw.get("urlPrefix") or ""),
            filter_verb=str(raw.get("filterVerb") or ""),
            preempt_verb=str(raw.get("preemptVerb") or ""),
            prioritize_verb=str(raw.get("prioritizeVerb") or ""),
            bind_verb=str(raw.get("bindVerb") or ""),
            weight=int(raw.get("weight") or 0),
            enable_https=bool(raw.get("enableHTTPS")),
            http_timeout=timeout if timeout > 0 else DEFAULT_EXTENDER_TIMEOUT,
            node_cache_capable=bool(raw.get("nodeCacheCapable")),
            managed_resources=tuple(ManagedResource(str(r.get("name") or ""), bool(r.get("ignoredByScheduler")))
                                    for r in raw.get("managedResources") or ()),
            ignorable=bool(raw.get("ignorable")),
        )


def validate_extenders(configs: Sequence[ExtenderConfig]) -> None:
    """``validateExtenders``: positive weight with a prioritize verb, one binder, unique extended resources."""
    problems: list[str] = []
    binders = 0
    managed: set[str] = set()
    for i, c in enumerate(configs):
        path = f"extenders[{i}]"
        if c.prioritize_verb and c.weight <= 0:
            problems.append(f"{path}.weight: Invalid value: {c.weight}: must have a positive weight applied to it")
        if c.bind_verb:
            binders += 1
        for j, resource in enumerate(c.managed_resources):
            if not is_extended_resource(resource.name):
                problems.append(f"{path}.managedResources[{j}].name: Invalid value: {resource.name!r}: "
                                "must be an extended resource name")
            if resource.name in managed:
                problems.append(f"{path}.managedResources[{j}].name: Invalid value: {resource.name!r}: "
                                "duplicate extender managed resource name")
            managed.add(resource.name)
    if binders > 1:
        problems.append(f"extenders: Invalid value: {binders}: only one extender can implement bind, found {binders}")
    if problems:
        raise ValueError("; ".join(problems))


def _field(obj: Any, name: str) -> Any:
    """``obj[name]``, matching the key case-insensitively when there is no exact match (Go's json decoding)."""
    if not isinstance(obj, Mapping):
        return None
    if name in obj:
        return obj[name]
    lower = name.lower()
    for key, value in obj.items():
        if isinstance(key, str) and key.lower() == lower:
            return value
    return None


_HOST = itemgetter("Host")
_SCORE = itemgetter("Score")


def _str_map(raw: Any) -> dict[str, str]:
    """A ``FailedNodesMap`` as str -> str (a copy; checked, not converted, in the usual all-str case)."""
    if not raw:
        return {}
    if all(map(str.__instancecheck__, raw)) and all(map(str.__instancecheck__, raw.values())):
        return dict(raw)
    return {str(k): str(v) for k, v in raw.items()}


def _pod_json(pod: PodInfo) -> Any:
    return pod.pod


class HTTPExtender:
    """One configured extender (upstream ``HTTPExtender``); calls go through the injected transport."""

    def __init__(self, config: ExtenderConfig, transport: Transport) -> None:
        self.config = config
        self.transport = transport
        self._managed = frozenset(r.name for r in config.managed_resources)
        # The last decoded answer per verb: (node names sent, answer body, result). An answer is a function of
        # the names and the body alone, and an extender that does not look at the pod (a load-aware one) sends
        # the same bytes to every pod of a cycle's node list: comparing them is cheaper than decoding 5,000
        # names again. One tuple per verb, replaced whole (safe for several scheduling threads).
        self._memo: dict[str, tuple[list[str], bytes, Any]] = {}

    @property
    def name(self) -> str:
        return self.config.url_prefix

    def is_binder(self) -> bool:
        return bool(self.config.bind_verb)

    def supports_preemption(self) -> bool:
        return bool(self.config.preempt_verb)

    def is_ignorable(self) -> bool:
        return self.config.ignorable

    def is_interested(self, pod: PodInfo) -> bool:
        """Without managed resources every pod; else pods whose (init) containers request or limit one."""
        if not self._managed:
            return True
        spec = pod.pod.get("spec") or {}
        for kind in ("containers", "initContainers"):
            for container in spec.get(kind) or ():
                resources = container.get("resources") or {}
                if self._managed.intersection(resources.get("requests") or {}) or \
                        self._managed.intersection(resources.get("limits") or {}):
                    return True
        return False

    def _post(self, verb: str, args: Any) -> bytes:
        url = self.config.url_prefix.rstrip("/") + "/" + verb
        try:
            status, body = self.transport.post(url, orjson.dumps(args), self.config.http_timeout)
        except Exception as exc:
            raise ExtenderError(f"{verb} with extender at URL {url}: {exc}") from exc
        if status != 200:
            raise ExtenderError(f"failed {verb} with extender at URL {url}, code {status}")
        return body

    def _decode(self, verb: str, body: bytes) -> Any:
        try:
            return orjson.loads(body or b"null")
        except ValueError as exc:
            url = self.config.url_prefix.rstrip("/") + "/" + verb
            raise ExtenderError(f"{verb} with extender at URL {url}: invalid JSON answer: {exc}") from exc

    def _send(self, verb: str, args: Any) -> Any:
        return self._decode(verb, self._post(verb, args))

    def _remembered(self, verb: str, names: list[str], body: bytes) -> Any:
        """The result decoded last time for these names and this exact answer, or None."""
        memo = self._memo.get(verb)
        if memo is not None and memo[1] == body and memo[0] == names:
            return memo[2]
        return None

    def _node_args(self, pod: PodInfo, nodes: Callable[[], Sequence[Mapping[str, Any]]],
                   names: Sequence[str]) -> dict[str, Any]:
        if self.config.node_cache_capable:
            return {"Pod": _pod_json(pod), "NodeNames": list(names)}
        return {"Pod": _pod_json(pod), "Nodes": {"metadata": {}, "items": list(nodes())}}

    @staticmethod
    def _lazy(nodes: Sequence[Mapping[str, Any]] | Callable[[], Sequence[Mapping[str, Any]]],
              names: Sequence[str] | None) -> tuple[Callable[[], Sequence[Mapping[str, Any]]], Sequence[str]]:
        """(node objects on demand, names): a nodeCacheCapable call needs only the names."""
        get = nodes if callable(nodes) else (lambda: nodes)
        if names is None:
            names = [(n.get("metadata") or {}).get("name") or "" for n in get()]
        return get, names

    def filter(self, pod: PodInfo, nodes: Sequence[Mapping[str, Any]] | Callable[[], Sequence[Mapping[str, Any]]],
               names: Sequence[str] | None = None) -> tuple[list[str], dict[str, str], dict[str, str]]:
        """(names that pass, failed name -> message, failed-and-unresolvable name -> message).

        ``nodes`` may be a function returning them (called only when the extender wants whole
        nodes); ``names`` are their names when the caller has them already.
        """
        get, names = self._lazy(nodes, names)
        if not self.config.filter_verb:
            return list(names), {}, {}
        names = names if isinstance(names, list) else list(names)
        body = self._post(self.config.filter_verb, self._node_args(pod, get, names))
        remembered = self._remembered("filter", names, body)
        if remembered is not None:
            return remembered  # type: ignore[no-any-return]
        result = self._decode(self.config.filter_verb, body)
        error = _field(result, "Error")
        if error:
            raise ExtenderError(str(error))
        known = set(names)
        passed: list[str] = []
        returned_names = _field(result, "NodeNames")
        returned_nodes = _field(result, "Nodes")
        if self.config.node_cache_capable and returned_names is not None:
            passed = list(returned_names) if all(map(str.__instancecheck__, returned_names)) else \
                [str(n) for n in returned_names]
        elif returned_nodes is not None:
            passed = [str(((item or {}).get("metadata") or {}).get("name") or "")
                      for item in _field(returned_nodes, "items") or ()]
        if not known.issuperset(passed):
            name = next(n for n in passed if n not in known)
            raise ExtenderError(f'extender "{self.name}" claims a filtered node "{name}" which is not found '
                                "in the input node list")
        failed = _str_map(_field(result, "FailedNodes"))
        unresolvable = _str_map(_field(result, "FailedAndUnresolvableNodes"))
        out = (passed, failed, unresolvable)
        self._memo["filter"] = (list(names), body, out)
        return out

    def prioritize(self, pod: PodInfo,
                   nodes: Sequence[Mapping[str, Any]] | Callable[[], Sequence[Mapping[str, Any]]],
                   names: Sequence[str] | None = None) -> tuple[dict[str, int], int]:
        """(host -> score 0..10, weight); without a prioritize verb every node scores 0 with weight 0."""
        get, names = self._lazy(nodes, names)
        if not self.config.prioritize_verb:
            return dict.fromkeys(names, 0), 0
        names = names if isinstance(names, list) else list(names)
        body = self._post(self.config.prioritize_verb, self._node_args(pod, get, names))
        remembered = self._remembered("prioritize", names, body)
        if remembered is not None:
            return remembered, self.config.weight
        result = self._decode(self.config.prioritize_verb, body)
        scores = None
        try:  # the usual answer: Go's field names, str hosts and integer scores (checked without a loop in Python)
            hosts = list(map(_HOST, result))
            values = list(map(_SCORE, result))
            if all(map(str.__instancecheck__, hosts)) and all(map(int.__instancecheck__, values)) and \
                    not any(map(bool.__instancecheck__, values)):
                scores = dict(zip(hosts, values, strict=True))
        except (KeyError, TypeError):
            pass
        if scores is None:
            scores = self._scores(result)
        self._memo["prioritize"] = (list(names), body, scores)
        return scores, self.config.weight

    @staticmethod
    def _scores(result: Any) -> dict[str, int]:
        """A ``HostPriorityList`` decoded leniently: case-insensitive names, missing scores as 0."""
        scores: dict[str, int] = {}
        for entry in result or ():
            if not isinstance(entry, dict):
                continue
            # Go's field names first (what extenders send), then the case-insensitive match.
            host = entry.get("Host")
            if host is None:
                host = _field(entry, "Host")
            if host is not None:
                score = entry.get("Score")
                scores[str(host)] = int((score if score is not None else _field(entry, "Score")) or 0)
        return scores

    def bind(self, pod: PodInfo, node_name: str) -> None:
        """``ExtenderBindingArgs`` -> ``ExtenderBindingResult``; raises ExtenderError on failure."""
        if not self.is_binder():
            raise ExtenderError("unexpected empty bindVerb in extender")
        args = {"PodName": pod.name, "PodNamespace": pod.namespace, "PodUID": pod.uid, "Node": node_name}
        result = self._send(self.config.bind_verb, args)
        error = _field(result, "Error")
        if error:
            raise ExtenderError(str(error))

    def process_preemption(self, pod: PodInfo, victims: Mapping[str, Victims],
                           snapshot: Snapshot) -> dict[str, Victims]:
        """``ProcessPreemption``: the candidates (node -> victims) the extender keeps."""
        if not self.supports_preemption():
            raise ExtenderError(f"preempt verb is not defined for extender {self.name} but run into "
                                "ProcessPreemption")
        if self.config.node_cache_capable:
            args: dict[str, Any] = {"Pod": _pod_json(pod), "NodeNameToMetaVictims": {
                node: {"Pods": [{"UID": p.uid} for p in v.pods], "NumPDBViolations": v.num_pdb_violations}
                for node, v in victims.items()}}
        else:
            args = {"Pod": _pod_json(pod), "NodeNameToVictims": {
                node: {"Pods": [p.pod for p in v.pods], "NumPDBViolations": v.num_pdb_violations}
                for node, v in victims.items()}}
        result = self._send(self.config.preempt_verb, args)
        out: dict[str, Victims] = {}
        for node, meta in (_field(result, "NodeNameToMetaVictims") or {}).items():
            index = snapshot.index_of(str(node))
            if index is None:
                raise ExtenderError(f'node "{node}" not found')
            by_uid = {p.uid: p for p in snapshot.pods_on(index)}
            pods = []
            for meta_pod in _field(meta, "Pods") or ():
                uid = str(_field(meta_pod, "UID") or "")
                if uid not in by_uid:
                    raise ExtenderError(f"extender: {self.name} claims to preempt pod (UID: {uid}) on node: {node}, "
                                        "but the pod is not found on that node")
                pods.append(by_uid[uid])
            out[str(node)] = Victims(pods, int(_field(meta, "NumPDBViolations") or 0))
        return out


class ExtenderPlugin:
    """An extender as a framework plugin: Filter (over the nodes the plugins let through), Score and Bind."""

    def __init__(self, extender: HTTPExtender, name: str) -> None:
        self.extender = extender
        self.name = name
        self.filtered_out_reason = f"node(s) were filtered out by extender {extender.name}"
        # The last filter result (the extender's remembered answer, by identity) with the names it keeps and the
        # failures by name; the last prioritize result and the scores array built from it.
        self._verdict_memo: tuple[Any, list[tuple[Code, str, list[str]]]] | None = None
        self._scores_memo: tuple[Any, np.ndarray] | None = None

    # -- Filter -------------------------------------------------------------------------------------------------
    def _verdict(self, pod: PodInfo, names: Sequence[str],
                 nodes: Sequence[Mapping[str, Any]] | Callable[[], Sequence[Mapping[str, Any]]]
                 ) -> tuple[set[str], dict[str, tuple[Code, str]]] | Status:
        try:
            passed, failed, unresolvable = self.extender.filter(pod, nodes, names)
        except ExtenderError as exc:
            if self.extender.is_ignorable():
                return set(names), {}
            return Status.error(exc)
        statuses: dict[str, tuple[Code, str]] = {n: (Code.UNSCHEDULABLE, msg) for n, msg in failed.items()}
        statuses.update((n, (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg)) for n, msg in unresolvable.items())
        return set(passed), statuses

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status | None:
        if not self.extender.config.filter_verb or not self.extender.is_interested(pod):
            return None
        verdict = self._verdict(pod, [node.name], [node.node])
        if isinstance(verdict, Status):
            return verdict
        passed, statuses = verdict
        if node.name in passed and node.name not in statuses:
            return None
        code, reason = statuses.get(node.name, (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.filtered_out_reason))
        return Status(code, reason)

    def filter_feasible(self, state: CycleState, pod: PodInfo, snapshot: Snapshot,
                        nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray, FilterVerdict | None] | Status | None:
        """The extender on the nodes every plugin let through (``nodes``, snapshot indices; upstream's
        ``findNodesThatPassExtenders``): (the nodes it keeps, in their order; the others; a verdict over the
        snapshot that explains them -- recorded as a vectorised group, not a Status object per node).

        None when the extender is not interested in the pod or, being ignorable, failed. The request lists
        the names in snapshot order: the answer is a set, and an unchanged list lets the extender and
        :meth:`HTTPExtender.filter` reuse their work.
        """
        if not self.extender.config.filter_verb or not self.extender.is_interested(pod):
            return None
        all_names = snapshot.node_names
        order = np.sort(nodes).tolist()
        names = list(map(all_names.__getitem__, order))
        try:
            result = self.extender.filter(pod, lambda: [snapshot.node(i) for i in order], names)
        except ExtenderError as exc:
            return None if self.extender.is_ignorable() else Status.error(exc)
        memo = self._verdict_memo
        if memo is not None and memo[0] is result:
            groups = memo[1]
        else:
            groups = self._groups(result)
            self._verdict_memo = (result, groups)
        # Names back to snapshot indices through the names just sent (an answer may only name those), in C.
        position = dict(zip(names, order, strict=True))
        passed = result[0]
        num = snapshot.num_nodes
        keep_all = np.zeros(num, dtype=bool)
        keep_all[np.fromiter(map(position.__getitem__, passed), dtype=np.intp, count=len(passed))] = True
        group_all = np.zeros(num, dtype=np.intp)  # group 0: "filtered out" (absent from the answer)
        for g, (_, _, failing) in enumerate(groups):
            if failing:  # a failing node the request did not name is no node of ours: ignored
                index = np.fromiter(map(position.get, failing, repeat(-1)), dtype=np.intp, count=len(failing))
                index = index[index >= 0]
                keep_all[index] = False
                group_all[index] = g
        nodes = np.asarray(nodes, dtype=np.intp)
        keep = keep_all[nodes]
        if keep.all():
            return nodes, nodes[:0], None
        rejected = nodes[~keep]
        group = group_all[rejected]
        mask = np.ones(num, dtype=bool)
        mask[rejected] = False
        reasons = []
        for g in dict.fromkeys(group.tolist()):  # one Rejection per reason, in the order rejected nodes show them
            code, reason, _ = groups[g]
            hit = np.zeros(num, dtype=bool)
            hit[rejected[group == g]] = True
            reasons.append(Rejection(reason, hit, code))
        return nodes[keep], rejected, FilterVerdict(mask, tuple(reasons))

    def _groups(self, result: tuple[list[str], dict[str, str], dict[str, str]]) -> list[tuple[Code, str, list[str]]]:
        """A filter result's reasons: (code, message, the names failing with it); group 0 is "filtered out"
        (a node missing from the answer). A name in both failure maps is unresolvable (its group comes later)."""
        _, failed, unresolvable = result
        groups: list[tuple[Code, str, list[str]]] = [
            (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, self.filtered_out_reason, [])]
        for code, failures in ((Code.UNSCHEDULABLE, failed), (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, unresolvable)):
            by_message: dict[str, list[str]] = {}
            for name, message in failures.items():
                names = by_message.get(message)
                if names is None:
                    by_message[message] = [name]
                else:
                    names.append(name)
            groups.extend((code, message, names) for message, names in by_message.items())
        return groups

    # -- Score --------------------------------------------------------------------------------------------------
    def _scores(self, pod: PodInfo, names: Sequence[str],
                nodes: Sequence[Mapping[str, Any]] | Callable[[], Sequence[Mapping[str, Any]]]) -> np.ndarray:
        if not self.extender.config.prioritize_verb or not self.extender.is_interested(pod):
            return np.zeros(len(names), dtype=np.int64)
        try:
            scores, _ = self.extender.prioritize(pod, nodes, names)
        except ExtenderError:
            return np.zeros(len(names), dtype=np.int64)  # prioritization errors are ignored: the others decide
        memo = self._scores_memo
        if memo is not None and memo[0] is scores:
            return memo[1].copy()  # the same answer for the same names (NormalizeScore clips in place)
        scale = MAX_NODE_SCORE // MAX_EXTENDER_PRIORITY
        out = np.fromiter(map(scores.get, names, repeat(0, len(names))), dtype=np.int64, count=len(names)) * scale
        self._scores_memo = (scores, out)
        return out.copy()

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status | None]:
        return int(self._scores(pod, [node.name], [node.node])[0]), None

    def score_all(self, state: CycleState, pod: PodInfo, snapshot: Snapshot, nodes: np.ndarray) -> np.ndarray:
        indices = nodes.tolist()
        names = list(map(snapshot.node_names.__getitem__, indices))
        return self._scores(pod, names, lambda: [snapshot.node(i) for i in indices])

    def normalize_score(self, state: CycleState, pod: PodInfo, scores: np.ndarray) -> Status | None:
        np.clip(scores, 0, MAX_NODE_SCORE, out=scores)  # an extender answering outside 0..10
        return None

    # -- Bind ---------------------------------------------------------------------------------------------------
    def bind(self, state: CycleState, pod: PodInfo, node_name: str) -> Status | None:
        if not self.extender.is_binder() or not self.extender.is_interested(pod):
            return Status(Code.SKIP)
        try:
            self.extender.bind(pod, node_name)
        except ExtenderError as exc:
            return Status.error(exc)
        return None


def with_extenders(registry: Mapping[str, Any], profile: Profile,
                   extenders: Sequence[HTTPExtender]) -> tuple[Registry, Profile]:
    """A registry and a copy of ``profile`` with the extenders wired in (see the module docstring).

    The inputs are not modified. Each extender becomes plugin ``Extender(<urlPrefix>)``: a Filter after
    the profile's filters, a Score with the extender's weight, a Bind ahead of DefaultBinder; extenders
    that implement ``preemptVerb`` are given to DefaultPreemption; ``ignoredByScheduler`` managed
    resources are added to NodeResourcesFit's ``ignoredResources``.
    """
    new_registry, profiles = with_extenders_for_profiles(registry, [profile], extenders)
    return new_registry, profiles[0]


def with_extenders_for_profiles(registry: Mapping[str, Any], profiles: Sequence[Profile],
                                extenders: Sequence[HTTPExtender]) -> tuple[Registry, list[Profile]]:
    """:func:`with_extenders` for every profile of a configuration (upstream applies extenders to all)."""
    validate_extenders([e.config for e in extenders])
    new_registry = Registry(dict(registry))
    names = []
    for index, extender in enumerate(extenders):
        name = f"Extender({extender.name})"
        if name in new_registry:
            name = f"Extender({extender.name})#{index}"
        plugin = ExtenderPlugin(extender, name)
        new_registry.register(name, lambda args, handle, plugin=plugin: plugin)
        names.append(name)
    preempting = tuple(e for e in extenders if e.supports_preemption())
    if preempting and default_preemption.NAME in new_registry:
        original = new_registry[default_preemption.NAME]

        def preemption_factory(args: Mapping[str, Any] | None, handle: Any) -> Any:
            # DefaultPreemption takes its extenders from the handle, so whatever wraps its factory still works.
            return original(args, _HandleWithExtenders(handle, preempting))

        new_registry.unregister(default_preemption.NAME)
        new_registry.register(default_preemption.NAME, preemption_factory)
    return new_registry, [_wire(p, extenders, names) for p in profiles]


def _wire(profile: Profile, extenders: Sequence[HTTPExtender], names: Sequence[str]) -> Profile:
    new_profile = copy.deepcopy(profile)
    points = new_profile.points
    ignored: list[str] = []
    for extender, name in zip(extenders, names, strict=True):
        config = extender.config
        if config.filter_verb:
            points.setdefault("filter", PluginSet()).enabled.append(PluginRef(name))
        if config.prioritize_verb:
            points.setdefault("score", PluginSet()).enabled.append(PluginRef(name, config.weight))
        if config.bind_verb:
            bind = points.setdefault("bind", PluginSet())
            bind.enabled.insert(0, PluginRef(name))
            if any(ref.name == DEFAULT_BINDER for ref in new_profile.multi_point.enabled) and \
                    DEFAULT_BINDER not in bind.disabled:
                # Keep DefaultBinder, but after the extender: drop it from multiPoint here and re-add it last.
                bind.disabled.append(DEFAULT_BINDER)
                if all(ref.name != DEFAULT_BINDER for ref in bind.enabled):
                    bind.enabled.append(PluginRef(DEFAULT_BINDER))
        ignored.extend(r.name for r in config.managed_resources if r.ignored_by_scheduler)
    if ignored:
        fit_args = dict(new_profile.plugin_config.get("NodeResourcesFit") or {})
        fit_args["ignoredResources"] = [*(fit_args.get("ignoredResources") or ()), *ignored]
        new_profile.plugin_config["NodeResourcesFit"] = fit_args
    return new_profile


class _HandleWithExtenders:
    """The framework handle, plus the ``extenders`` attribute upstream's ``Handle.Extenders()`` provides."""

    def __init__(self, handle: Any, extenders: tuple[HTTPExtender, ...]) -> None:
        self._handle = handle
        self.extenders = (*(getattr(handle, "extenders", None) or ()), *extenders)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)
