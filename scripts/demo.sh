#!/usr/bin/env bash
# The main job (README): fresh venv, build, then the benchmark / demo. Uses the
# GPU when there is one, the CPU kernels otherwise. Extra args go to the bench.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/setup_env.sh
python -m sgl_meta.bench "$@"
