#!/usr/bin/env bash
# Fresh virtualenv with torch, the build and dev dependencies, and sgl_meta
# built in place (no build isolation: the extension must compile against the
# torch that will run it). Source it or run it; it leaves the venv at $VENV.
#
#   SGL_META_VENV=path          where the venv goes (default .venv)
#   SGL_META_REUSE_VENV=1       keep an existing venv (skip the fresh install)
#   SGL_META_TORCH=spec         torch requirement (default torch==2.14.1)
#   TORCH_CUDA_ARCH_LIST=9.0    narrow the GPU targets for a faster build
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
VENV=${SGL_META_VENV:-.venv}
PY=${PYTHON:-python3}

if [[ "${SGL_META_REUSE_VENV:-0}" != 1 || ! -x "$VENV/bin/python" ]]; then
  rm -rf "$VENV"
  "$PY" -m venv "$VENV"
fi
# shellcheck disable=SC1091
source "$VENV/bin/activate"
python -m pip install -q --upgrade pip
python -m pip install -q "${SGL_META_TORCH:-torch==2.14.1}" "setuptools>=77" wheel ninja
MAX_JOBS=${MAX_JOBS:-$(nproc)} python -m pip install -q --no-build-isolation -e ".[dev]"
python -c "import torch, sgl_meta; print(f'sgl_meta {sgl_meta.__version__} built against torch {torch.__version__}')"
