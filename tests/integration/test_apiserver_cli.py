"""``kemu up`` brings the API server up and hands kubectl a kubeconfig; ``--api-host`` beyond loopback
requires its token."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

pytestmark = pytest.mark.integration

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


@pytest.fixture
def kemu_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    env = {**os.environ, "KEMU_HOME": str(tmp_path / "home"), "HOME": str(tmp_path)}
    env.pop("KEMU_REDIS_URL", None)
    env.pop("KUBECONFIG", None)
    yield env
    subprocess.run([sys.executable, "-m", "emulator.cli", "down"], env=env, capture_output=True, timeout=60,
                   check=False)


def kemu(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "emulator.cli", *args], env=env, capture_output=True, text=True,
                          check=False, timeout=90)


def test_kemu_up_prints_the_api_url_and_kubectl_uses_the_kubeconfig(kemu_env: dict[str, str]) -> None:
    up = kemu(kemu_env, "up", "--detach", "--api-port", "0")
    assert up.returncode == 0, up.stderr
    url = re.search(r"Kubernetes API at (http://127\.0\.0\.1:\d+)", up.stdout)
    assert url, up.stdout
    path = kemu(kemu_env, "kubeconfig").stdout.strip()
    assert path == str(Path(kemu_env["KEMU_HOME"]) / "kubeconfig")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600  # it holds the token
    doc = yaml.safe_load(Path(path).read_text())
    assert doc["current-context"] == "kemu"
    assert doc["clusters"][0] == {"name": "kemu", "cluster": {"server": url.group(1)}}
    assert doc["users"][0]["name"] == "kemu" and doc["users"][0]["user"]["token"]

    got = subprocess.run([KUBECTL, "get", "namespaces", "-o", "name"], env={**kemu_env, "KUBECONFIG": path},
                         capture_output=True, text=True, timeout=60, check=False)
    assert got.returncode == 0, got.stderr
    assert got.stdout.split() == ["namespace/default", "namespace/kube-node-lease", "namespace/kube-public",
                                  "namespace/kube-system"]
    # On loopback the token is accepted but not required.
    assert httpx.get(url.group(1) + "/api/v1/namespaces").status_code == 200

    assert kemu(kemu_env, "down").returncode == 0
    with pytest.raises(httpx.ConnectError):
        httpx.get(url.group(1) + "/healthz")


def test_kemu_up_beyond_loopback_requires_the_token(kemu_env: dict[str, str]) -> None:
    up = kemu(kemu_env, "up", "--detach", "--api-host", "0.0.0.0", "--api-port", "0")
    assert up.returncode == 0, up.stderr
    doc = yaml.safe_load(Path(kemu(kemu_env, "kubeconfig").stdout.strip()).read_text())
    server, token = doc["clusters"][0]["cluster"]["server"], doc["users"][0]["user"]["token"]
    anonymous = httpx.get(server + "/api/v1/namespaces")
    assert anonymous.status_code == 401 and anonymous.json()["reason"] == "Unauthorized"
    assert httpx.get(server + "/api/v1/namespaces", headers={"Authorization": f"Bearer {token}"}).status_code == 200


def test_kubeconfig_without_a_cluster_is_a_clear_error(kemu_env: dict[str, str]) -> None:
    result = kemu(kemu_env, "kubeconfig")
    assert result.returncode == 1 and "no kubeconfig" in result.stderr and "Traceback" not in result.stderr


def test_kemu_up_tls_users_and_user_add(kemu_env: dict[str, str], tmp_path: Path) -> None:
    """``--tls --users``: HTTPS with the CA in the kubeconfig, one context per user, RBAC decides;
    ``kemu user add`` adds a user to the running cluster."""
    users_file = tmp_path / "users.yaml"
    users_file.write_text("users:\n- {name: alice, groups: [team-a]}\n")
    up = kemu(kemu_env, "up", "--detach", "--api-port", "0", "--tls", "--users", str(users_file))
    assert up.returncode == 0, up.stderr
    assert re.search(r"Kubernetes API at https://127\.0\.0\.1:\d+", up.stdout), up.stdout
    path = kemu(kemu_env, "kubeconfig").stdout.strip()
    doc = yaml.safe_load(Path(path).read_text())
    assert doc["clusters"][0]["cluster"]["certificate-authority-data"]
    assert [c["name"] for c in doc["contexts"]] == ["kemu", "alice"]
    env = {**kemu_env, "KUBECONFIG": path}

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([KUBECTL, *args], env=env, capture_output=True, text=True, timeout=60, check=False)

    assert kubectl("create", "namespace", "team-a").returncode == 0
    assert kubectl("create", "rolebinding", "v", "-n", "team-a", "--clusterrole=view", "--group=team-a").returncode == 0
    assert kubectl("--context", "alice", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}").stdout == \
        "alice"
    denied = kubectl("--context", "alice", "get", "pods", "-n", "default")
    assert ('pods is forbidden: User "alice" cannot list resource "pods" in API group "" in the namespace '
            '"default"') in denied.stderr
    added = kemu(kemu_env, "user", "add", "bob", "--group", "team-a")
    assert added.returncode == 0, added.stderr
    assert kubectl("--context", "bob", "auth", "whoami", "-o", "jsonpath={.status.userInfo.groups}").stdout == \
        '["team-a","system:authenticated"]'
    assert kubectl("--context", "bob", "auth", "can-i", "list", "pods", "-n", "team-a").stdout.strip() == "yes"
