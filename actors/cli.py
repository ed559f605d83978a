"""The ``kemu`` command: :mod:`emulator.cli` with the kubelet shards wired in.

``emulator`` holds all behaviour and never imports Ray or ``actors`` (an
import-linter contract enforces it), yet ``kemu up --nodes N`` must start
kubelet shard *actors*. So the program is composed here, in the one package
allowed to know both: this entry point runs :func:`emulator.cli.main` and
hands it kubelet and scheduler runner factories (dependency injection, no import trick in
``emulator``) and its own module name, so ``kemu up --detach`` re-runs this
entry point rather than the Ray-less one. Ray itself is imported only when a
cluster actually runs kubelets, so ``kemu status`` / ``kemu down`` stay fast.
"""

from __future__ import annotations

import sys
from typing import Any


def kubelet_runner(launch: Any) -> Any:
    """Lazy :func:`actors.launcher.kubelet_runner` (importing Ray costs about a second)."""
    from actors.launcher import kubelet_runner as runner

    return runner(launch)


def scheduler_runner(launch: Any) -> Any:
    """Lazy :func:`actors.scheduler.scheduler_runner`: the schedulers as Ray actors."""
    from actors.scheduler import scheduler_runner as runner

    return runner(launch)


def main(argv: list[str] | None = None) -> int:
    from emulator import cli

    return cli.main(argv, kubelets=kubelet_runner, module="actors.cli", schedulers=scheduler_runner)


if __name__ == "__main__":
    sys.exit(main())
