"""``kemu up --descheduler-policy``: the policy is checked, and the controller manager gets the controller."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
import yaml

from emulator.cli import build_parser
from emulator.config import Config, ConfigError
from emulator.controllers.manager import ManagerConfig, enabled_controllers
from emulator.descheduler_cli import with_descheduler
from tests.unit.descheduler.helpers import policy, profile


def args_for(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["up", *argv])


def test_up_turns_the_descheduler_controller_on(tmp_path: Path) -> None:
    f = tmp_path / "policy.yaml"
    f.write_text(yaml.safe_dump(policy(profile("deschedule", "RemovePodsViolatingNodeTaints"))))
    cfg = with_descheduler(Config(), args_for("--descheduler-policy", str(f), "--descheduling-interval", "30"))
    manager = ManagerConfig.from_dict(cfg.controller_manager)
    assert "descheduler" in enabled_controllers(manager.controllers)
    assert "garbagecollector" in enabled_controllers(manager.controllers)  # '*' kept
    assert manager.options["descheduler_policy"] == str(f.resolve())
    assert manager.options["descheduling_interval"] == 30.0
    # Without the flag nothing changes, and '*' leaves the descheduler off.
    assert with_descheduler(Config(), args_for()) == Config()
    assert "descheduler" not in enabled_controllers(("*",))


def test_up_refuses_a_bad_policy_naming_the_field(tmp_path: Path) -> None:
    f = tmp_path / "policy.yaml"
    f.write_text(yaml.safe_dump(policy(profile("balance", "LowNodeUtilization", {
        "thresholds": {"cpu": 20}, "targetThresholds": {"cpu": 10}}))))
    with pytest.raises(ConfigError, match=r"profiles\[0\]\.pluginConfig\[0\]\.args\.thresholds\.cpu"):
        with_descheduler(Config(), args_for("--descheduler-policy", str(f)))
