"""The ``kemu`` command: :mod:`emulator.cli` with the kubelet shards wired in.

``emulator`` holds all behaviour and never imports Ray or ``actors`` (an
import-linter contract enforces it), yet ``kemu up --nodes N`` must start
kubelet shard *actors*. So the program is composed here, in the one package
allowed to know both: this entry point runs :func:`emulator.cli.main` and
hands it kubelet and scheduler runner factories (dependency injection, no import trick in
``emulator``) and its own module name, so ``kemu up --detach`` re-runs this
entry point rather than the Ray-less one. Ray itself is imported only when a
cluster actually runs kubelets, so ``kemu status`` / ``kemu down`` stay fast.
It also adds the ``ray-node`` subcommand (:mod:`actors.ray_node`: a Ray head
or worker node, for the Ray containers of ``docker-compose.yml``) and ``run``
(:mod:`loadgen.cli`: the scenario runner, which ``emulator`` may not import).
"""

from __future__ import annotations

import argparse
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


def controller_runner(launch: Any) -> Any:
    """Lazy :func:`actors.controllers.controller_runner`: controller managers as Ray actors (--controllers-on-ray)."""
    from actors.controllers import controller_runner as runner

    return runner(launch)


def build_parser() -> argparse.ArgumentParser:
    """The ``kemu`` command's parser: :func:`emulator.cli.build_parser` plus the subcommands added here."""
    from emulator import cli

    return cli.build_parser(_commands())


def _commands() -> list[Any]:
    from actors import ray_node
    from loadgen import cli as loadgen_cli

    return [ray_node.register, loadgen_cli.register]


def main(argv: list[str] | None = None) -> int:
    from emulator import cli

    return cli.main(argv, kubelets=kubelet_runner, module="actors.cli", schedulers=scheduler_runner,
                    controllers=controller_runner, commands=_commands())


if __name__ == "__main__":
    sys.exit(main())
