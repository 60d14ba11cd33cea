"""On the GPU: SGLang's own ``load_plugins()`` applies sgl-meta's hooks, and the
CUDA-graph decode and speculative metadata of the real backends the step child
builds (TRT-LLM MHA, DSA, FA3, Triton, TRT-LLM MLA, FlashMLA, FlashInfer, FlashInfer MLA; through
SGLang's attention test kit) equal SGLang's own path.

One fresh interpreter (HookRegistry's patches are process-global and cannot be
undone): plugin off first, then ``load_plugins()``, then the same points again.
The attention libraries are import stubs where absent (the metadata path never
calls them; see sgl_meta/bench/sglang_step/stubs.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import sglang_source
from gpu_step_child import BACKENDS
from sgl_meta.bench.sglang_step.points import MODES, NOT_MEASURED

CHILD = Path(__file__).with_name("gpu_step_child.py")


@pytest.fixture(scope="module")
def report():
    why = sglang_source.why_not_installed()
    if why:
        pytest.skip(why)
    if not any(ep.name == "sgl_meta" for ep in metadata.entry_points(group="sglang.srt.plugins")):
        pytest.skip("sgl-meta's entry point is not installed (pip install -e ., or a dist-info on the path)")
    env = {k: v for k, v in os.environ.items() if k not in ("SGLMETA_SGLANG_PLUGIN", "SGL_META_SGLANG_PLUGIN", "SGLANG_PLUGINS")}
    proc = subprocess.run([sys.executable, str(CHILD)], env=env, capture_output=True, text=True, timeout=1200)
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stderr[-6000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.mark.gpu
def test_load_plugins_hooks_the_backends(report):
    hooked = report[0]["hooked"]
    for target in ("update_trtllm_mha_graph_metadata", "fused_dsa_decode_metadata",
                   "TRTLLMHAAttnBackend.init_forward_metadata_out_graph",
                   "FlashAttentionBackend._apply_cuda_graph_metadata", "TRTLLMMLABackend._apply_cuda_graph_metadata"):
        assert any(t.endswith(target) for t in hooked), f"{target} not hooked by load_plugins(): {hooked}"


@pytest.mark.gpu
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", MODES)
def test_metadata_equals_sglang(report, backend, mode):
    if (backend, mode) in NOT_MEASURED:
        pytest.skip(NOT_MEASURED[(backend, mode)])
    rows = [p for p in report[0]["points"] if p["point"][:2] == [backend, mode]]
    assert rows
    for p in rows:
        assert not p["error"], f"{p['point']}: {p['error']}\n{report[1][-4000:]}"
        assert not p["diffs"], f"{p['point']}: {p['diffs']}"
