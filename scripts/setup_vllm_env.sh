#!/usr/bin/env bash
# A venv for the vLLM plugin tests (tests/vllm_plugin/): vLLM 0.33.0 without its
# dependencies (GPU stacks, servers) plus only the pure-Python packages its
# imported modules need on a CPU machine (tests/vllm_plugin/requirements.txt).
#
# It is an overlay on the base interpreter's environment (the one with torch and
# sgl_meta, normally scripts/setup_env.sh's .venv): a .pth file adds the base
# site-packages after the overlay's own, so torch, pytest and sgl_meta come from
# there while vLLM's pins win over anything the base holds (SGLang's pins live
# in the base and differ: openai, fastapi). Nothing is installed into the base.
#
#   SGLMETA_VLLM_VENV=path   the overlay venv (default .venv-vllm)
#   PYTHON=path              the base interpreter (default .venv/bin/python)
#   SGLMETA_VLLM_WHEEL=spec  where vLLM comes from (default vllm==0.33.0 from the
#                            registry or a local wheel path: ~45-50 s either way)
#
# Then: $SGLMETA_VLLM_VENV/bin/python -m pytest tests/vllm_plugin
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
OVERLAY=${SGLMETA_VLLM_VENV:-.venv-vllm}
BASE=${PYTHON:-.venv/bin/python}
WHEEL=${SGLMETA_VLLM_WHEEL:-vllm==0.33.0}

BASE_SITE=$("$BASE" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
BASE_HOME=$("$BASE" -c "import sys; print(sys._base_executable)")
rm -rf "$OVERLAY"
"$BASE_HOME" -m venv "$OVERLAY"
SITE=$("$OVERLAY/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
# addsitedir (not a bare path line): the base's own .pth files (an editable
# sgl_meta) are processed too. The name sorts last, so this runs after the
# overlay's packages are on sys.path and the base's land behind them.
echo "import site; site.addsitedir('$BASE_SITE')" >"$SITE/zzz_sglmeta_base.pth"

start=$SECONDS
"$OVERLAY/bin/python" -m pip install -q --no-deps "$WHEEL" -r tests/vllm_plugin/requirements.txt
"$OVERLAY/bin/python" - <<'EOF'
import importlib
for name in ("vllm.plugins", "vllm.triton_utils.dispatcher", "vllm.platforms",
             "vllm.v1.worker.gpu.block_table", "vllm.v1.worker.gpu.input_batch",
             "vllm.v1.worker.gpu.model_runner", "torch", "sgl_meta"):
    importlib.import_module(name)
import vllm
print(f"vllm {vllm.__version__} importable in the overlay")
from sgl_meta import _plugin
if not _plugin.entry_point_visible("vllm.general_plugins"):
    # An sgl-meta install older than the vLLM plugin: vLLM's loader would not find it.
    print("warning: sgl-meta's metadata has no vllm.general_plugins entry point; reinstall sgl-meta "
          "(pip install --no-build-isolation -e . in the base venv) for vLLM to load the plugin")
EOF
echo "vLLM overlay at $OVERLAY in $((SECONDS - start)) s: $OVERLAY/bin/python -m pytest tests/vllm_plugin"
