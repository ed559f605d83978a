"""The RBAC authorizer: roles, bindings and the rule matching of ``rbac.authorization.k8s.io/v1``.

Upstream: ``plugin/pkg/auth/authorizer/rbac/rbac.go`` (``RBACAuthorizer.Authorize``,
``VisitRulesFor``, ``appliesTo``) and ``pkg/apis/rbac/v1/evaluation_helpers.go``
(``VerbMatches``, ``APIGroupMatches``, ``ResourceMatches``, ``ResourceNameMatches``,
``NonResourceURLMatches``). A request is allowed when any rule of any role bound
to the user allows it:

* ClusterRoleBindings apply everywhere; RoleBindings only in their namespace
  (referring to a Role of that namespace or to a ClusterRole);
* a subject applies to a user by ``User`` name, by one of the user's
  ``Group`` names, or as ``ServiceAccount`` (user
  ``system:serviceaccount:<ns>:<name>``, namespace defaulting to the binding's);
* a resource rule matches verb, API group, ``resource`` or
  ``resource/subresource`` (``*/subresource`` too), and resourceNames when it
  lists any; a non-resource rule matches verb and URL (``*`` suffix = prefix).
  ``*`` matches anything in each list;
* an aggregated ClusterRole (``aggregationRule``) also holds the rules of every
  ClusterRole its selectors match (upstream's clusterrole-aggregation
  controller writes them into the role; kemu unions them when indexing).

Speed: :class:`RBACIndex` indexes bindings by subject once per change of any
RBAC object, and :class:`RBACAuthorizer` caches each user's rule list (cluster
rules, and per namespace) and each decision until the next change, so a
repeated request costs one dict lookup and a new one a scan of that user's
compiled rules. Members of ``system:masters``
are allowed before any rule is read (kube-apiserver's privileged-groups
authorizer).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from emulator.api import errors
from emulator.api.labels import LabelSelector
from emulator.api.types import Obj
from emulator.auth.attributes import Attributes
from emulator.auth.user import SERVICE_ACCOUNT_PREFIX, SYSTEM_PRIVILEGED_GROUP, UserInfo

GROUP = "rbac.authorization.k8s.io"


@dataclass(frozen=True, slots=True)
class Rule:
    verbs: frozenset[str]
    api_groups: frozenset[str]
    resources: frozenset[str]
    resource_names: frozenset[str]
    non_resource_urls: tuple[str, ...]

    @classmethod
    def of(cls, rule: Obj) -> Rule:
        return cls(frozenset(rule.get("verbs") or ()), frozenset(rule.get("apiGroups") or ()),
                   frozenset(rule.get("resources") or ()), frozenset(rule.get("resourceNames") or ()),
                   tuple(rule.get("nonResourceURLs") or ()))

    def allows(self, a: Attributes) -> bool:
        """Upstream ``RuleAllows``."""
        if "*" not in self.verbs and a.verb not in self.verbs:
            return False
        if not a.resource_request:
            return _url_matches(self.non_resource_urls, a.path)
        if "*" not in self.api_groups and a.api_group not in self.api_groups:
            return False
        if "*" not in self.resources:
            if a.subresource:
                if (f"{a.resource}/{a.subresource}" not in self.resources
                        and f"*/{a.subresource}" not in self.resources):
                    return False
            elif a.resource not in self.resources:
                return False
        return not self.resource_names or a.name in self.resource_names


def _url_matches(urls: tuple[str, ...], path: str) -> bool:
    return any(url in ("*", path) or (url.endswith("*") and path.startswith(url[:-1])) for url in urls)


def _rules(role: Obj | None) -> list[Rule]:
    return [Rule.of(r) for r in (role or {}).get("rules") or () if isinstance(r, dict)]


def _selects(selector: Any, labels: Obj) -> bool:
    if not isinstance(selector, dict):
        return False
    try:
        return LabelSelector.from_dict(selector).matches(labels)
    except errors.StatusError:  # validation rejects such a selector; an old stored one selects nothing
        return False


def _subject_keys(subject: Obj, binding_namespace: str) -> str | None:
    kind = subject.get("kind")
    name = subject.get("name") or ""
    if kind == "User":
        return f"u:{name}"
    if kind == "Group":
        return f"g:{name}"
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_namespace
        return f"u:{SERVICE_ACCOUNT_PREFIX}{ns}:{name}" if ns and name else None
    return None


def _user_keys(user: UserInfo) -> list[str]:
    return [f"u:{user.name}", *(f"g:{g}" for g in user.groups)]


def aggregated_rules(cluster_roles: list[Obj]) -> dict[str, list[Obj]]:
    """What upstream's clusterrole-aggregation controller writes into each aggregated ClusterRole.

    ``pkg/controller/clusterroleaggregation``: the rules of every ClusterRole (in name order) that one
    of the role's ``clusterRoleSelectors`` selects, each rule once. Only roles whose stored rules
    differ are returned. Chains (``view`` → ``edit`` → ``admin``) settle over successive passes, as
    upstream's do, since each write is itself a change that triggers the next pass.
    """
    out: dict[str, list[Obj]] = {}
    by_name = sorted(cluster_roles, key=lambda o: (o.get("metadata") or {}).get("name", ""))
    for role in by_name:
        selectors = (role.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
        if not selectors:
            continue
        name = (role.get("metadata") or {}).get("name", "")
        rules: list[Obj] = []
        for other in by_name:
            other_name = (other.get("metadata") or {}).get("name", "")
            labels = (other.get("metadata") or {}).get("labels") or {}
            if other_name == name or not any(_selects(s, labels) for s in selectors):
                continue
            for r in other.get("rules") or ():
                if isinstance(r, dict) and r not in rules:
                    rules.append(r)
        if rules != (role.get("rules") or []):
            out[name] = rules
    return out


class RBACIndex:
    """One consistent view of every RBAC object, indexed by subject."""

    def __init__(self, roles: Iterable[Obj] = (), cluster_roles: Iterable[Obj] = (),
                 role_bindings: Iterable[Obj] = (), cluster_role_bindings: Iterable[Obj] = ()) -> None:
        cr_objs = {(o.get("metadata") or {}).get("name", ""): o for o in cluster_roles}
        self.cluster_roles: dict[str, list[Rule]] = {}
        for name in cr_objs:
            self._aggregate(name, cr_objs, set())
        self.roles: dict[tuple[str, str], list[Rule]] = {}
        for o in roles:
            meta = o.get("metadata") or {}
            self.roles[(meta.get("namespace") or "", meta.get("name") or "")] = _rules(o)
        # subject key -> role refs; cluster bindings hold ClusterRole names, namespaced ones (ns, kind, name)
        self.cluster_bindings: dict[str, list[str]] = {}
        for o in cluster_role_bindings:
            ref = o.get("roleRef") or {}
            if ref.get("kind") != "ClusterRole":
                continue
            for s in o.get("subjects") or ():
                key = _subject_keys(s, "") if isinstance(s, dict) else None
                if key is not None:
                    self.cluster_bindings.setdefault(key, []).append(ref.get("name") or "")
        self.bindings: dict[str, list[tuple[str, str, str]]] = {}
        for o in role_bindings:
            ns = (o.get("metadata") or {}).get("namespace") or ""
            ref = o.get("roleRef") or {}
            for s in o.get("subjects") or ():
                key = _subject_keys(s, ns) if isinstance(s, dict) else None
                if key is not None:
                    self.bindings.setdefault(key, []).append((ns, ref.get("kind") or "", ref.get("name") or ""))

    def _aggregate(self, name: str, objs: dict[str, Obj], visiting: set[str]) -> list[Rule]:
        """A ClusterRole's rules plus, through its aggregationRule, those of every role it selects (transitively:
        upstream's controller fills ``edit`` from ``view``'s labels and ``admin`` from ``edit``'s)."""
        done = self.cluster_roles.get(name)
        if done is not None:
            return done
        o = objs[name]
        rules = _rules(o)
        selectors = (o.get("aggregationRule") or {}).get("clusterRoleSelectors") or []
        if selectors:
            visiting.add(name)
            for other_name, other in objs.items():
                if other_name in visiting:
                    continue
                labels = (other.get("metadata") or {}).get("labels") or {}
                if any(_selects(s, labels) for s in selectors):
                    rules.extend(r for r in self._aggregate(other_name, objs, visiting) if r not in rules)
            visiting.discard(name)
        self.cluster_roles[name] = rules
        return rules

    def cluster_rules(self, user: UserInfo) -> list[Rule]:
        out: list[Rule] = []
        for key in _user_keys(user):
            for name in self.cluster_bindings.get(key, ()):
                out.extend(self.cluster_roles.get(name, ()))
        return out

    def namespace_rules(self, user: UserInfo) -> dict[str, list[Rule]]:
        out: dict[str, list[Rule]] = {}
        for key in _user_keys(user):
            for ns, kind, name in self.bindings.get(key, ()):
                rules = self.cluster_roles.get(name) if kind == "ClusterRole" else self.roles.get((ns, name))
                if rules:
                    out.setdefault(ns, []).extend(rules)
        return out


class RBACAuthorizer:
    """Decides :class:`Attributes` against an :class:`RBACIndex`, caching each user's rules."""

    def __init__(self, index: RBACIndex | None = None) -> None:
        self.index = index or RBACIndex()
        self._cache: dict[UserInfo, tuple[list[Rule], dict[str, list[Rule]]]] = {}
        # Decisions by attributes: a client repeating one kind of request (creates in a namespace,
        # lists, watches) is answered by one dict lookup until the next RBAC change.
        self._decisions: dict[Attributes, bool] = {}

    def replace(self, index: RBACIndex) -> None:
        self.index = index
        self._cache = {}
        self._decisions = {}

    def rules_for(self, user: UserInfo) -> tuple[list[Rule], dict[str, list[Rule]]]:
        cached = self._cache.get(user)
        if cached is None:
            if len(self._cache) > 10_000:
                self._cache.clear()
            cached = self._cache[user] = (self.index.cluster_rules(user), self.index.namespace_rules(user))
        return cached

    def authorize(self, a: Attributes) -> bool:
        if SYSTEM_PRIVILEGED_GROUP in a.user.groups:
            return True
        decided = self._decisions.get(a)
        if decided is None:
            if len(self._decisions) > 100_000:
                self._decisions.clear()
            decided = self._decisions[a] = self._decide(a)
        return decided

    def _decide(self, a: Attributes) -> bool:
        cluster, by_ns = self.rules_for(a.user)
        for rule in cluster:
            if rule.allows(a):
                return True
        if a.resource_request and a.namespace:
            for rule in by_ns.get(a.namespace, ()):
                if rule.allows(a):
                    return True
        return False

    def rules_in(self, user: UserInfo, namespace: str) -> list[Rule]:
        """Every rule that applies to ``user`` in ``namespace`` (SelfSubjectRulesReview)."""
        cluster, by_ns = self.rules_for(user)
        return [*cluster, *by_ns.get(namespace, ())]
