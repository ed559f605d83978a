"""``user.Info`` and the well-known users and groups (``k8s.io/apiserver/pkg/authentication/user``)."""

from __future__ import annotations

from dataclasses import dataclass

ALL_AUTHENTICATED = "system:authenticated"
ALL_UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
# The group every authorizer lets do everything (kube-apiserver's privileged-groups authorizer).
SYSTEM_PRIVILEGED_GROUP = "system:masters"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"

# The user of kemu's own admin token (kubeadm calls its admin user kubernetes-admin).
ADMIN_USER = "kemu-admin"


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def to_json(self) -> dict[str, object]:
        """The ``UserInfo`` of authentication.k8s.io/v1 (SelfSubjectReview, TokenReview)."""
        out: dict[str, object] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra}
        return out


def authenticated(name: str, groups: tuple[str, ...] | list[str] = (), uid: str = "") -> UserInfo:
    """A user that presented a credential: its groups plus ``system:authenticated``, as upstream adds it."""
    gs = tuple(dict.fromkeys((*groups, ALL_AUTHENTICATED)))
    return UserInfo(name, gs, uid)


ADMIN = authenticated(ADMIN_USER, (SYSTEM_PRIVILEGED_GROUP,))
ANONYMOUS_USER = UserInfo(ANONYMOUS, (ALL_UNAUTHENTICATED,))


def service_account_user(namespace: str, name: str) -> str:
    return f"{SERVICE_ACCOUNT_PREFIX}{namespace}:{name}"


def service_account_groups(namespace: str) -> tuple[str, ...]:
    return ("system:serviceaccounts", f"system:serviceaccounts:{namespace}")
