#!/usr/bin/env bash
# The test command (README, .ci/run): fresh venv, build, then every check that
# runs without a GPU: CI lint, the test suite, and the wheel check (build the
# release wheel, repair, inspect, install into a fresh venv, smoke-test; the
# wheel is left in dist/). GPU tests are marked `gpu` and skip here; run them
# on a GPU machine with scripts/device_check.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup_env.sh
bash scripts/lint_ci.sh
python -m pytest tests "$@"
python scripts/check_wheel.py
