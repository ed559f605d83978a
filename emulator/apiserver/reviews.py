"""Access reviews and "who am I": the create-only, never-stored kinds of authorization/authentication.

Upstream: ``pkg/registry/authorization/{selfsubjectaccessreview,subjectaccessreview,
localsubjectaccessreview,selfsubjectrulesreview}/rest.go`` and
``pkg/registry/authentication/selfsubjectreview/rest.go``. Each POST answers
the posted object with its ``status`` filled in (201 Created) and stores nothing:

* SelfSubjectAccessReview — may *I* do this? (``kubectl auth can-i``);
* SubjectAccessReview / LocalSubjectAccessReview — may *this user* (``spec.user``,
  ``spec.groups``)? The local one only in the namespace of its URL;
* SelfSubjectRulesReview — every rule that applies to me in a namespace
  (``kubectl auth can-i --list``);
* SelfSubjectReview — my user info (``kubectl auth whoami``).

Also here: the answer for the pod subresources kemu cannot serve because it
runs no container processes (``exec``, ``attach``, ``portforward``, ``proxy``).
"""

from __future__ import annotations

from typing import Any

from emulator.api import errors
from emulator.api.errors import Cause
from emulator.api.types import Obj
from emulator.apiserver import content, openapi
from emulator.apiserver.calls import Call, Result
from emulator.apiserver.routing import RequestInfo
from emulator.auth.attributes import Attributes
from emulator.auth.rbac import RBACAuthorizer, Rule
from emulator.auth.user import UserInfo

NOT_EMULATED = frozenset({"exec", "attach", "portforward", "proxy"})
_COMMANDS = {"exec": "kubectl exec", "attach": "kubectl attach", "portforward": "kubectl port-forward",
             "proxy": "the API server proxy"}


def not_emulated(info: RequestInfo) -> errors.StatusError:
    what = f"{info.resource}/{info.subresource}"
    return errors.StatusError(
        400, "BadRequest",
        f"kemu does not emulate container processes: {what} ({_COMMANDS[info.subresource]}) is not available for "
        f'{info.kind.singular} "{info.name}"; kemu models pod lifecycle and resource usage, not running programs')


def _attributes(user: UserInfo, spec: Obj, kind: str, group: str) -> Attributes:
    res, non = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if (res is None) == (non is None):
        raise errors.invalid(kind, "", [Cause("spec.resourceAttributes", "Invalid value: \"null\": exactly one of "
                                              "nonResourceAttributes or resourceAttributes must be specified")],
                             group)
    if res is not None:
        r: dict[str, Any] = res if isinstance(res, dict) else {}
        return Attributes(user, str(r.get("verb") or ""), True, "", str(r.get("namespace") or ""),
                          str(r.get("group") or ""), str(r.get("version") or ""), str(r.get("resource") or ""),
                          str(r.get("subresource") or ""), str(r.get("name") or ""))
    n: dict[str, Any] = non if isinstance(non, dict) else {}
    return Attributes(user, str(n.get("verb") or ""), False, str(n.get("path") or ""))


def _decide(authorizer: RBACAuthorizer | None, a: Attributes) -> Obj:
    allowed = authorizer is None or authorizer.authorize(a)
    status: Obj = {"allowed": allowed}
    if allowed and "system:masters" in a.user.groups:
        status["reason"] = 'allowed by the privileged group "system:masters"'
    return status


def _rules_status(authorizer: RBACAuthorizer | None, user: UserInfo, namespace: str) -> Obj:
    if authorizer is None:  # AlwaysAllow
        return {"resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]}],
                "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}], "incomplete": False}
    resource_rules: list[Obj] = []
    non_resource: list[Obj] = []
    seen: set[Rule] = set()
    for rule in authorizer.rules_in(user, namespace):
        if rule in seen:
            continue
        seen.add(rule)
        if rule.non_resource_urls:
            non_resource.append({"verbs": sorted(rule.verbs), "nonResourceURLs": list(rule.non_resource_urls)})
        else:
            entry: Obj = {"verbs": sorted(rule.verbs), "apiGroups": sorted(rule.api_groups),
                          "resources": sorted(rule.resources)}
            if rule.resource_names:
                entry["resourceNames"] = sorted(rule.resource_names)
            resource_rules.append(entry)
    return {"resourceRules": resource_rules, "nonResourceRules": non_resource, "incomplete": False}


def handle(call: Call, user: UserInfo, authorizer: RBACAuthorizer | None) -> Result:
    info, kind = call.info, call.kind
    if info.verb != "create" or info.name:
        raise errors.method_not_allowed(f"the server does not allow this method on the requested resource: "
                                        f"{kind.plural} only accept POST")
    body = content.decode_object(call.body, call.headers.get("content-type"), kind.kind)
    if not isinstance(body, dict):
        raise errors.bad_request(f"the body of a {kind.kind} must be an object")
    openapi.check_types(kind, body)  # a review is decoded into its typed struct upstream, as any body
    spec: Obj = body.get("spec") if isinstance(body.get("spec"), dict) else {}  # type: ignore[assignment]
    out: Obj = {"kind": kind.kind, "apiVersion": kind.api_version,
                "metadata": {**(body.get("metadata") or {}), "creationTimestamp": None}}
    if kind.kind == "SelfSubjectReview":
        out["status"] = {"userInfo": user.to_json()}
        return Result(out, 201)
    out["spec"] = spec
    if kind.kind == "SelfSubjectRulesReview":
        out["status"] = _rules_status(authorizer, user, str(spec.get("namespace") or ""))
        return Result(out, 201)
    if kind.kind in ("SubjectAccessReview", "LocalSubjectAccessReview"):
        name, groups = str(spec.get("user") or ""), tuple(str(g) for g in spec.get("groups") or ())
        if not name and not groups:
            raise errors.invalid(kind.kind, "", [Cause("spec.user", 'Invalid value: "": at least one of user or '
                                                                    "group must be specified")], kind.group)
        user = UserInfo(name, groups, str(spec.get("uid") or ""))
    a = _attributes(user, spec, kind.kind, kind.group)
    if kind.kind == "LocalSubjectAccessReview" and a.namespace != (info.namespace or ""):
        raise errors.invalid(kind.kind, "", [Cause("spec.resourceAttributes.namespace",
                                                   f'Invalid value: "{a.namespace}": must match namespace: '
                                                   f"{info.namespace}")], kind.group)
    out["status"] = _decide(authorizer, a)
    return Result(out, 201)
