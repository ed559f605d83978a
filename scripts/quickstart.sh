#!/usr/bin/env bash
# The main job: set up, then run the quick-start scenario (an emulated cluster under load) and
# print its summary. Extra arguments go to `kemu run`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
exec .venv/bin/kemu run loadgen/scenarios/quickstart.yaml "$@"
