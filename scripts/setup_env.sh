#!/usr/bin/env bash
# Fresh virtualenv with torch, the build and dev dependencies, and sgl_meta
# built in place (no build isolation: the extension must compile against the
# torch that will run it). Source it or run it; it leaves the venv at $VENV.
#
#   SGLMETA_VENV=path          where the venv goes (default .venv)
#   SGLMETA_REUSE_VENV=1       keep an existing venv (skip the fresh install)
#   SGLMETA_TORCH=spec         torch requirement (default torch==2.14.1)
#   TORCH_CUDA_ARCH_LIST=9.0    narrow the GPU targets for a faster build
#   SGLMETA_SGLANG=0           skip SGLang 0.5.23 (the plugin tests then skip)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${SGLMETA_VENV:-.venv}
PY=${PYTHON:-python3}

if [[ "${SGLMETA_REUSE_VENV:-0}" != 1 || ! -x "$VENV/bin/python" ]]; then
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
fi
# shellcheck disable=SC1091
source "$VENV/bin/activate"
python -m pip install -q --upgrade pip
# numpy (a runtime dependency) before the build: torch, imported by setup.py,
# warns twice without it.
python -m pip install -q "${SGLMETA_TORCH:-torch==2.14.1}" "setuptools>=77" wheel ninja "numpy>=1.26"
MAX_JOBS=${MAX_JOBS:-$(nproc)} python -m pip install -q --no-build-isolation -e ".[dev]"
python -c "import torch, sgl_meta; print(f'sgl_meta {sgl_meta.__version__} built against torch {torch.__version__}')"

# SGLang 0.5.23 for the plugin tests (tests/sglang_plugin/): its wheel without
# its dependencies (GPU stacks, servers), plus only the packages its imported
# modules need on a CPU machine (one file), and the torchvision made for this
# torch (0.X with X = torch's minor + 15). The line docs/sglang.md gives.
if [[ "${SGLMETA_SGLANG:-1}" == 1 ]]; then
  python -m pip install -q --no-deps "sglang==0.5.23" -r tests/sglang_plugin/requirements.txt \
    "torchvision==0.$(( $(python -c 'import torch; print(torch.__version__.split(".")[1])') + 15 )).*"
  python -c "import sglang.srt.plugins; print('sglang 0.5.23 installed for the plugin tests')"
fi
