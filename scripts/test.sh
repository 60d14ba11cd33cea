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
# The vLLM plugin's tests against vLLM 0.33.0 itself (about 2.5 min: the wheel is
# 336 MB, downloads in seconds and installs in ~45 s), in an overlay venv so that
# vLLM's pins never meet SGLang's (docs/vllm.md), and the vLLM ops' files again
# there: their comparisons with vLLM's own kernels read vLLM's installed sources
# (skipped above, where vLLM is not installed). SGLMETA_VLLM=0 skips it.
if [[ "${SGLMETA_VLLM:-1}" == 1 ]]; then
  PYTHON="$VENV/bin/python" bash scripts/setup_vllm_env.sh
  "${SGLMETA_VLLM_VENV:-.venv-vllm}/bin/python" -m pytest tests/vllm_plugin tests/test_vllm_*.py
fi
python scripts/check_wheel.py
