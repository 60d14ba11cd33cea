#!/usr/bin/env bash
# A carry folder for a GPU machine that reaches no package registry (torch 2.11+cu130, glibc 2.39,
# Python 3.12, triton 3.6 there): vLLM 0.33.0's Python package without its *.so files
# (the plugin's targets are Triton and Python), the cp312 / pure-Python wheels its
# imported modules need beyond that machine's image (tests/vllm_plugin/requirements.txt
# less what the image has), this checkout's sgl_meta
# (with the built _C.abi3.so) and its vLLM entry point, the plugin tests, and the two
# test files of vLLM's sdist that the GPU test runs.
# The same folder runs `python -m sgl_meta.bench --upstream --preset none` there (the vLLM
# rows; docs/vllm.md): it needs nothing more. SGLang's carry does not fit beside it (60 MB).
#
#   scripts/pack_vllm.sh [DEST]     default DEST: .carry-vllm (in this checkout)
#   PYTHON=...                      an interpreter whose site-packages hold vllm 0.33.0
#   SGLMETA_VLLM_SDIST=...          vLLM 0.33.0's unpacked sdist (required: pip download --no-deps
#                                   --no-binary :all: vllm==0.33.0, then unpack it)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/pack_common.sh
DEST=$(realpath -m "${1:-.carry-vllm}")
PY=${PYTHON:-.venv-vllm/bin/python}
SDIST=${SGLMETA_VLLM_SDIST:?set SGLMETA_VLLM_SDIST to the unpacked vllm-0.33.0 sdist}
SITE=$("$PY" -c "import importlib.util, pathlib; print(pathlib.Path(importlib.util.find_spec('vllm').origin).parents[1])")

# Not in the GPU image; versions as tests/vllm_plugin/requirements.txt pins them.
WHEELS=(
  annotated-types==0.8.0 apache-tvm-ffi==0.1.15.post2 cachetools==8.0.2 cbor2==6.3.0 distro==1.9.0
  fastapi==0.136.3 starlette==1.10.0 llguidance==1.7.6 msgspec==0.23.0 openai==2.36.0 openai-harmony==0.0.8
  partial-json-parser==0.2.1.1.post7 pybase64==1.5.1 pydantic==2.14.4 pydantic_core==2.50.5 pyzmq==27.3.0
  sniffio==1.3.1 typing-inspection==0.4.5 xgrammar==0.2.8
)

rm -rf "$DEST"
mkdir -p "$DEST/whl" "$DEST/src" "$DEST/tests/vllm_plugin" "$DEST/vllm-sdist/tests/v1/worker"
pack_wheels "$PY" "$DEST" manylinux_2_39_x86_64 manylinux_2_34_x86_64 manylinux_2_31_x86_64 -- "${WHEELS[@]}"
pack_host "$SITE" "$DEST" vllm vllm-0.33.0.dist-info
# vLLM's compiled ops module does not fit a carry: scripts/vllm_import_stubs says what stands in.
cp -r scripts/vllm_import_stubs "$DEST/import_stubs"
pack_sgl_meta "$DEST" vllm.general_plugins sgl_meta.vllm.plugin:register
cp -r tests/vllm_plugin/. "$DEST/tests/vllm_plugin/"
find "$DEST/tests" -name __pycache__ -prune -exec rm -rf {} +
cp "$SDIST"/tests/v1/worker/{test_gpu_block_table.py,test_gpu_input_batch_v2.py} "$DEST/vllm-sdist/tests/v1/worker/"

du -sh "$DEST"
