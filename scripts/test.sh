#!/usr/bin/env bash
# The test command (README, .ci/run): fresh venv, build, then every check that
# runs without a GPU. GPU tests are marked `gpu` and skip here; run them on a
# GPU machine with scripts/device_check.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup_env.sh
python -m pytest tests "$@"
