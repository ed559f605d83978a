"""An HTTP API server for tests that drive it with kubectl or the official client, and kubectl's environment.

:func:`serving_api` starts an :class:`ApiServerProcess` on the test's Redis with a bearer token, writes
a kubeconfig for it under the test's ``tmp_path`` and yields the server with the environment
(``HOME``, ``KUBECONFIG``) kubectl needs; the server stops when the block ends.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from emulator.apiserver import kubeconfig
from emulator.apiserver.process import ApiServerProcess
from emulator.apiserver.settings import ServerSettings


@contextlib.contextmanager
def serving_api(redis_url: str, tmp_path: Path, token: str,
                log_name: str = "apiserver.log") -> Iterator[tuple[ApiServerProcess, dict[str, str]]]:
    """The API server on ``redis_url`` and the environment for a kubectl that talks to it with ``token``."""
    server = ApiServerProcess(ServerSettings(redis_url=redis_url, port=0, token=token), log_path=tmp_path / log_name)
    server.start()
    try:
        yield server, {**os.environ, "HOME": str(tmp_path),
                       "KUBECONFIG": str(kubeconfig.write(tmp_path / "kubeconfig", server.url, token))}
    finally:
        server.stop()
