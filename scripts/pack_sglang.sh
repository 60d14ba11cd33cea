#!/usr/bin/env bash
# A carry folder for a GPU machine that reaches no package registry (torch 2.11+cu130,
# Python 3.12, triton there): SGLang 0.5.23's Python package without its *.so files,
# the pure-Python and cp312 wheels its imported modules need beyond that machine's
# image, this checkout's sgl_meta (with the built _C.abi3.so) and an entry point for
# it, and the tests the GPU run takes. Used by `python -m sgl_meta.bench --sglang`
# and tests/sglang_plugin/test_gpu_load_plugins.py there (see docs/sglang_step.md).
#
#   scripts/pack_sglang.sh [DEST]     default DEST: .carry (in this checkout)
#   PYTHON=...                        the interpreter whose site-packages hold sglang (default .venv/bin/python)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/pack_common.sh
DEST=$(realpath -m "${1:-.carry}")
PY=${PYTHON:-.venv/bin/python}
SITE=$("$PY" -c "import sglang, pathlib; print(pathlib.Path(sglang.__file__).parents[1])")

# Not in the GPU image (a torch + triton image, nothing from a registry); SGLang's
# pins where it pins. fastapi before 0.129: later ones import opentelemetry.
WHEELS=(
  orjson==3.13.0 pybase64==1.5.1 msgspec==0.23.0 pyzmq==27.3.0 starlette==1.10.0 sniffio==1.3.1
  pydantic==2.14.4 pydantic_core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5
  ipython==9.18.1 traitlets==5.16.1 jedi==0.19.2 parso==0.8.5 prompt_toolkit==3.0.52 wcwidth==0.2.14
  pexpect==4.9.0 ptyprocess==0.7.0 decorator==5.2.1 stack_data==0.6.3 executing==2.2.1 asttokens==3.0.0
  pure_eval==0.2.3 matplotlib-inline==0.2.1 ipython_pygments_lexers==1.1.1
  dill==0.4.1 apache-tvm-ffi==0.1.11 compressed-tensors==0.18.0 loguru==0.7.3 gguf==0.19.0
  openai==2.8.0 jiter==0.12.0 distro==1.9.0 partial-json-parser==0.2.1.1.post7
  fastapi==0.128.0 uvicorn==0.54.0
)

rm -rf "$DEST"
mkdir -p "$DEST/whl" "$DEST/src" "$DEST/tests/sglang_plugin"
pack_wheels "$PY" "$DEST" -- "${WHEELS[@]}"
pack_host "$SITE" "$DEST" sglang sglang-0.5.23.dist-info
pack_sgl_meta "$DEST" sglang.srt.plugins sgl_meta.sglang.plugin:register
cp tests/sglang_plugin/{sglang_source.py,gpu_step_child.py,test_gpu_load_plugins.py} "$DEST/tests/sglang_plugin/"

du -sh "$DEST"
