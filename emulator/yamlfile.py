"""Reading kemu's own YAML files (configuration, node pools, metrics rules, scenarios) with one error wording.

Like a kubectl ``-f`` file, each is read whole and parsed; a file that cannot be read or is not
YAML becomes the caller's error naming what the file was and where it is.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml


def read_yaml_file(path: str | Path, what: str, error: Callable[[str], Exception]) -> Any:
    """The YAML document in ``path``; ``error(message)`` naming ``what`` (and the file) when it cannot be read or
    parsed (``error`` is usually the caller's exception class)."""
    try:
        return yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise error(f"{what} {path} is not valid YAML: {e}") from None
