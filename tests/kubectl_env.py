"""kubectl against a test's API server: the server process, kubectl's environment, a kubectl runner.

:func:`running_api` starts an :class:`ApiServerProcess` on the test's Redis for a block;
:func:`serving_api` does so with a bearer token and yields the environment (``HOME``,
``KUBECONFIG`` written under the test's ``tmp_path``) a kubectl needs to reach it;
:class:`Kubectl` runs kubectl with such an environment.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from emulator.apiserver import kubeconfig
from emulator.apiserver.process import ApiServerProcess
from emulator.apiserver.settings import ServerSettings

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


def kubectl_environment(home: Path, config: Path) -> dict[str, str]:
    """This process's environment with kubectl's ``HOME`` and ``KUBECONFIG`` pointed into the test's directory."""
    return {**os.environ, "HOME": str(home), "KUBECONFIG": str(config)}


@contextlib.contextmanager
def running_api(redis_url: str, log_path: Path | None = None, **settings: Any) -> Iterator[ApiServerProcess]:
    """An API server process on ``redis_url`` (any port, ``settings`` as :class:`ServerSettings`) for the block."""
    server = ApiServerProcess(ServerSettings(redis_url=redis_url, port=0, **settings), log_path=log_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def serving_api(redis_url: str, tmp_path: Path, token: str,
                log_name: str = "apiserver.log") -> Iterator[tuple[ApiServerProcess, dict[str, str]]]:
    """The API server on ``redis_url`` and the environment for a kubectl that talks to it with ``token``."""
    with running_api(redis_url, tmp_path / log_name, token=token) as server:
        yield server, kubectl_environment(tmp_path, kubeconfig.write(tmp_path / "kubeconfig", server.url, token))


class Kubectl:
    """kubectl with its own ``HOME`` and ``KUBECONFIG``; a call returns the completed process (``ok``: asserts 0)."""

    def __init__(self, home: Path, config: Path) -> None:
        self.env = kubectl_environment(home, config)

    def __call__(self, *args: str, ok: bool = True, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([KUBECTL, *args], env=self.env, input=stdin, capture_output=True, text=True, timeout=60,
                           check=False)
        if ok:
            assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stderr}"
        return r

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen([KUBECTL, *args], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True)
