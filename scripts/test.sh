#!/usr/bin/env bash
# Set up, then run every check CI runs: ruff, the import contracts, the test suite
# (unit tests, and integration tests against real Redis / kubectl / the kubernetes client).
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/lint-imports
# Two pytest-xdist workers, each with its own embedded Redis (tests/conftest.py); most tests wait on
# subprocesses and clocks, so two share the machine well. KEMU_TEST_WORKERS=0 runs the suite serially.
exec .venv/bin/pytest -n "${KEMU_TEST_WORKERS:-2}" "$@"
