"""The ``--sglang`` bench's FlashInfer points on CPU tensors (SGLang's Triton kernels
through the interpreter): the backend builds with the planner left out, and with
the FlashInfer hooks on every buffer the planner receives equals SGLang's, step
for step, the hooks taking every point (our launch on, none off)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import sgl_meta

MODES = ("decode", "target_verify", "draft_extend")


@pytest.fixture(scope="module")
def report():
    try:
        import sglang  # noqa: F401
        import triton  # noqa: F401
    except ImportError as err:
        pytest.skip(f"sglang / triton not installed ({err})")
    here = Path(__file__).resolve().parent
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_PLUGINS" and not k.endswith("_SGLANG_PLUGIN")}
    env.update(SGLMETA_SGLANG_PLUGIN="0", TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="",
               PYTHONPATH=os.pathsep.join([str(Path(sgl_meta.__file__).resolve().parents[1]), str(here),
                                           env.get("PYTHONPATH", "")]))
    done = subprocess.run([sys.executable, str(here / "flashinfer_step_child.py")], env=env, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("point", [f"{m}-bs{bs}" for m in MODES for bs in (1, 3)])
def test_buffers_equal_and_the_hooks_take_the_point(report, point):
    r = report[point]
    assert r["diffs"] == [] and r["compared"] == 3 and r["indices"] > 0, r
    assert {"kv_indptr", "kv_indices"} <= set(r["keys"]) and ("qo_indptr" in r["keys"]) == (not point.startswith("decode"))
    assert r["ours_off"] == 0 and r["ours_on"] >= 3, r
