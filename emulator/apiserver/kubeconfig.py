"""The kubeconfig ``kemu up`` writes, and the token in it.

One cluster, one user and one context, all named ``kemu`` (so it can be
merged into ``~/.kube/config`` with ``KUBECONFIG=~/.kube/config:$KEMU_HOME/kubeconfig``
without clashing), pointing at the API server's URL with the generated bearer
token. The file holds a credential, so it is written ``0600`` and replaced
atomically.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

import yaml

from emulator.config import kemu_home

NAME = "kemu"


def generate_token() -> str:
    return secrets.token_urlsafe(32)


def default_path() -> Path:
    return kemu_home() / "kubeconfig"


def client_url(host: str, port: int) -> str:
    """The URL a client on this machine uses: wildcard binds are reached through loopback."""
    if host in ("0.0.0.0", "", "::"):
        host = "127.0.0.1"
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"http://{host}:{port}"


def render(server: str, token: str, namespace: str = "default") -> str:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": NAME, "cluster": {"server": server}}],
        "users": [{"name": NAME, "user": {"token": token}}],
        "contexts": [{"name": NAME, "context": {"cluster": NAME, "user": NAME, "namespace": namespace}}],
        "current-context": NAME,
        "preferences": {},
    }
    return yaml.safe_dump(doc, sort_keys=False)


def write(path: Path, server: str, token: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(render(server, token))
    tmp.replace(path)
    return path
