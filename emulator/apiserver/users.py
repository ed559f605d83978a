"""kemu's users: one bearer token per user, kept in Redis (upstream's static token file, shared by replicas).

Upstream kube-apiserver authenticates bearer tokens with ``--token-auth-file``
(``token,user,uid,"group1,group2"``, ``k8s.io/apiserver/pkg/authentication/token/tokenfile``).
kemu keeps the same table in Redis so every API server worker and replica
sees a user the moment ``kemu user add`` (or ``kemu up --users FILE``) creates
it: hash ``<prefix>auth:tokens`` maps the SHA-256 of a token to the user
(name, uid, groups) and ``<prefix>auth:users`` a user name to its token's hash,
so re-adding a user replaces (rotates) its token. Tokens themselves are never
stored: only the kubeconfig the command writes holds them.

A users file is YAML, either a list or ``{users: [...]}``, each entry
``{name: alice, groups: [team-a]}`` (``token:`` optional, to pin one).
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import redis
import yaml

from emulator.auth.user import UserInfo, authenticated


@dataclass(frozen=True)
class UserSpec:
    name: str
    groups: tuple[str, ...] = ()
    token: str = field(default="", repr=False)


def token_hash(token: str | bytes) -> str:
    return hashlib.sha256(token.encode() if isinstance(token, str) else token).hexdigest()


def _keys(prefix: str) -> tuple[str, str]:
    return f"{prefix}auth:tokens", f"{prefix}auth:users"


def add_user(r: redis.Redis, prefix: str, spec: UserSpec) -> str:
    """Create or replace ``spec.name``'s token; returns the token (``spec.token`` or a fresh one)."""
    if not spec.name or spec.name.startswith("system:"):
        raise ValueError(f"invalid user name {spec.name!r}: non-empty, and system: names are reserved")
    token = spec.token or secrets.token_urlsafe(32)
    tokens_key, users_key = _keys(prefix)
    old = r.hget(users_key, spec.name)
    digest = token_hash(token)
    pipe = r.pipeline(transaction=True)
    if old is not None and old.decode() != digest:
        pipe.hdel(tokens_key, old)
    pipe.hset(tokens_key, digest, orjson.dumps({"name": spec.name, "groups": list(spec.groups),
                                                "uid": f"kemu-user-{spec.name}"}))
    pipe.hset(users_key, spec.name, digest)
    pipe.execute()
    return token


def lookup(r: redis.Redis, prefix: str, token: bytes) -> UserInfo | None:
    raw = r.hget(_keys(prefix)[0], token_hash(token))
    if raw is None:
        return None
    data: dict[str, Any] = orjson.loads(raw)
    return authenticated(data["name"], tuple(data.get("groups") or ()), data.get("uid") or "")


def read_users_file(path: Path) -> list[UserSpec]:
    doc = yaml.safe_load(path.read_text()) or []
    entries = doc.get("users", []) if isinstance(doc, dict) else doc
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected a list of users or {{users: [...]}}")
    out = []
    for entry in entries:
        e = {"name": entry} if isinstance(entry, str) else entry
        if not isinstance(e, dict) or not isinstance(e.get("name"), str):
            raise ValueError(f"{path}: every user needs a name (got {e!r})")
        groups = e.get("groups") or []
        if isinstance(groups, str):
            groups = [groups]
        out.append(UserSpec(e["name"], tuple(str(g) for g in groups), str(e.get("token") or "")))
    return out
