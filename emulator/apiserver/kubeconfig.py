"""The kubeconfig ``kemu up`` writes, and the token in it.

With ``kemu up --users FILE`` / ``kemu user add`` each user also gets a user
entry and a context named after it (``kubectl --context alice``), and with
``--tls`` the cluster entry carries the generated CA
(``certificate-authority-data``) and an ``https://`` server.

The admin's cluster, user and context are all named ``kemu`` (so it can be
merged into ``~/.kube/config`` with ``KUBECONFIG=~/.kube/config:$KEMU_HOME/kubeconfig``
without clashing), pointing at the API server's URL with the generated bearer
token. The file holds a credential, so it is written ``0600`` and replaced
atomically (under a temporary name unique to the writer: several API server
replicas may write the same shared kubeconfig at once).

:func:`shared_token` is how replicas agree on one token without talking to
each other: the first process to start creates the token file (``0600``,
published with ``link``, which fails if the file exists, so exactly one writer
wins and nobody ever reads a half-written token); the others read it. ``kemu
up --api-token-file`` and ``kemu ray-node`` (Ray's cluster token) use it.
"""

from __future__ import annotations

import base64
import contextlib
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from emulator.config import kemu_home

NAME = "kemu"


def generate_token() -> str:
    return secrets.token_urlsafe(32)


def shared_token(path: Path, generate: Callable[[], str] = generate_token) -> str:
    """The token in ``path``, created with ``generate()`` by whichever process gets there first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError):
        token = path.read_text().strip()
        if token:
            return token
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(generate() + "\n")
    try:
        os.link(tmp, path)  # atomic, and refuses to replace a token another process published first
    except FileExistsError:
        pass
    finally:
        tmp.unlink()
    token = path.read_text().strip()
    if not token:
        raise ValueError(f"token file {path} is empty; delete it or write a token into it")
    return token


def default_path() -> Path:
    return kemu_home() / "kubeconfig"


def client_url(host: str, port: int, tls: bool = False) -> str:
    """The URL a client on this machine uses: wildcard binds are reached through loopback."""
    if host in ("0.0.0.0", "", "::"):
        host = "127.0.0.1"
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{'https' if tls else 'http'}://{host}:{port}"


def _cluster(server: str, ca_pem: bytes | None) -> dict[str, Any]:
    cluster: dict[str, Any] = {"server": server}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return cluster


def render(server: str, token: str, namespace: str = "default", *, ca_pem: bytes | None = None,
           users: dict[str, str] | None = None) -> str:
    """The admin context ``kemu`` plus one context per user (named as the user) of ``users`` (name → token)."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": NAME, "cluster": _cluster(server, ca_pem)}],
        "users": [{"name": NAME, "user": {"token": token}},
                  *({"name": n, "user": {"token": t}} for n, t in (users or {}).items())],
        "contexts": [{"name": NAME, "context": {"cluster": NAME, "user": NAME, "namespace": namespace}},
                     *({"name": n, "context": {"cluster": NAME, "user": n, "namespace": namespace}}
                       for n in (users or {}))],
        "current-context": NAME,
        "preferences": {},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def _replace(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)
    tmp.replace(path)
    return path


def write(path: Path, server: str, token: str, *, ca_pem: bytes | None = None,
          users: dict[str, str] | None = None) -> Path:
    return _replace(path, render(server, token, ca_pem=ca_pem, users=users))


def add_user(path: Path, name: str, token: str) -> Path:
    """Add (or replace) user ``name`` and its context in the kubeconfig at ``path``."""
    doc = yaml.safe_load(path.read_text())
    doc["users"] = [u for u in doc.get("users") or [] if u.get("name") != name] + [
        {"name": name, "user": {"token": token}}]
    namespace = next((c["context"].get("namespace", "default") for c in doc.get("contexts") or []
                      if c.get("name") == NAME), "default")
    doc["contexts"] = [c for c in doc.get("contexts") or [] if c.get("name") != name] + [
        {"name": name, "context": {"cluster": NAME, "user": name, "namespace": namespace}}]
    return _replace(path, yaml.safe_dump(doc, sort_keys=False))
