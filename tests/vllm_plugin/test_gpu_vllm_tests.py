"""vLLM 0.33.0's own unit tests of the code the plugin replaces
(tests/v1/worker/test_gpu_block_table.py and test_gpu_input_batch_v2.py, read
from the unpacked sdist at ``$SGLMETA_VLLM_SDIST``, never copied here) pass
with the plugin installed by vLLM's loader, on a GPU (default switch: our CUDA
kernels), and reach our ops (vllm_pytest_plugin.py counts the calls)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import vllm_env

FILES = ("tests/v1/worker/test_gpu_block_table.py", "tests/v1/worker/test_gpu_input_batch_v2.py")


@pytest.mark.gpu
def test_vllms_own_unit_tests_pass_with_the_plugin(tmp_path):
    why = vllm_env.why_not_installed()
    if why:
        pytest.skip(why)
    sdist = vllm_env.sdist_tests()
    if sdist is None:
        pytest.skip("set $SGLMETA_VLLM_SDIST to vLLM 0.33.0's unpacked sdist (its tests/ are only there)")
    # vLLM's MoE routing test calls its compiled MoE ops (torch.ops._moe_C, from
    # vllm/_moe_C_stable_libtorch.abi3.so), which a carried vLLM without its .so
    # files lacks; everything the plugin touches is Triton.
    import importlib.util

    vllm_dir = Path(importlib.util.find_spec("vllm").submodule_search_locations[0])
    # (-k: the files lie outside the child's rootdir, where node ids lose their path)
    deselect = [] if any(vllm_dir.glob("_moe_C_stable_libtorch*.so")) else [
        "-k", "not test_make_dummy_padding_controls_moe_routing"]
    env = vllm_env.child_env()
    env["PYTHONPATH"] = str(Path(__file__).parent) + ":" + env["PYTHONPATH"]
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "vllm_pytest_plugin", "--noconftest", "-p", "no:cacheprovider",
           "-o", "addopts=", "--rootdir", str(tmp_path), *deselect, *(str(sdist / f) for f in FILES)]
    proc = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=1200)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-6000:]
    assert "vLLM plugin: replaces vLLM's" in out, out[-3000:]
    calls = json.loads(next(line for line in out.splitlines() if line.startswith("SGLMETA_OP_CALLS")).split(" ", 1)[1])
    assert calls.get("vllm_compute_slot_mappings", 0) > 0 and calls.get("vllm_gather_block_tables", 0) > 0, calls
    print(out[-2000:])
