"""vLLM 0.33's own ``load_general_plugins()`` finds sgl-meta's entry point and
installs the plugin, in fresh interpreters of the overlay venv (the plugin
changes process-global classes and kernels); and, in the forced child, vLLM's
BlockTables and input-batch functions, its FlashInfer backend's page-index
copy and its speculator's decode-input and draft-step updates give the same
outputs and leave the same buffers with our replacements as with vLLM's own
Triton kernels (interpreted on CPU tensors), over random engines, steps and
batches (vllm_child.py). The overlay has no flashinfer: the
forced child imports vLLM's FlashInfer backend through an import stub
(import_stubs/), the others show the row left alone for want of it.

Skips, saying how to set it up, where vLLM 0.33.0 is not importable: run with
the overlay venv of scripts/setup_vllm_env.sh.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import vllm_env

BASE_SEED = int(os.environ["SGLMETA_TEST_SEED"])  # tests/conftest.py sets it


CHILD = Path(__file__).with_name("vllm_child.py")
SWITCH = "SGLMETA_VLLM_PLUGIN"
CPU_TRITON = {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}
RUNS = {  # name: (argv, environment, flashinfer's import stub on the path)
    "forced": ([str(CHILD), "before", "diff", str(BASE_SEED)], {SWITCH: "force", **CPU_TRITON}, True),
    "forced_without_flashinfer": ([str(CHILD), "after"], {SWITCH: "force", **CPU_TRITON}, False),
    "default": ([str(CHILD), "after"], {}, False),
    "ours_off": ([str(CHILD), "after"], {SWITCH: "off"}, True),
    "not_allowed": ([str(CHILD), "after"], {SWITCH: "force", "VLLM_PLUGINS": "someone_else"}, True),
    "cli": (["-m", "sgl_meta.vllm"], {SWITCH: "force", "VLLM_PLUGINS": "x,sgl_meta"}, False),
}
OURS = "sgl_meta.vllm.replacements."
REPLACED = ("replaces vLLM's BlockTables.compute_slot_mappings, BlockTables.gather_block_tables, "
            "_prepare_pos_seq_lens_kernel, _combine_sampled_and_draft_tokens_kernel")
NO_FLASHINFER = "vLLM's module needs flashinfer, which is not installed (docs/vllm.md)"


@pytest.fixture(scope="module")
def runs():
    why = vllm_env.why_not_installed()
    if why:
        pytest.skip(why)
    procs = {
        name: subprocess.Popen([sys.executable, *argv], env=vllm_env.child_env(flashinfer_stub=stub, **extra),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, (argv, extra, stub) in RUNS.items()
    }
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"{name}: child failed ({proc.returncode}):\n{stderr[-4000:]}"
        out[name] = (stdout if name == "cli" else json.loads(stdout.strip().splitlines()[-1]), stderr)
    return out


def our_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "sgl-meta" in line and "vLLM plugin" in line]


def test_forced_plugin_is_found_and_installed_everywhere(runs):
    report, stderr = runs["forced"]
    lines = our_lines(stderr)
    assert len(lines) == 1, stderr[-3000:]
    assert REPLACED + ", _copy_page_indices_kernel, _prepare_decode_inputs_kernel, _update_draft_inputs_kernel [" \
        in lines[0]
    assert "leaves alone" not in lines[0]
    for name, where in report["resolved"].items():
        assert where.startswith(OURS), (name, where)
    assert "model_runner.BlockTables.compute_slot_mappings" in report["resolved"]  # imported before loading
    assert "_copy_page_indices_kernel" in report["resolved"]


def test_without_flashinfer_its_row_is_left_alone_and_said_so(runs):
    if importlib.util.find_spec("flashinfer") is not None:
        pytest.skip("flashinfer is installed in this environment")
    report, stderr = runs["forced_without_flashinfer"]
    lines = our_lines(stderr)
    assert len(lines) == 1, stderr[-3000:]
    assert (f"{REPLACED}, _prepare_decode_inputs_kernel, _update_draft_inputs_kernel; leaves alone "
            f"_copy_page_indices_kernel ({NO_FLASHINFER}) [") in lines[0]
    assert "_copy_page_indices_kernel" not in report["resolved"]
    assert all(w.startswith(OURS) for w in report["resolved"].values()), report


def test_replacements_equal_vllms_triton_kernels(runs):
    diff = runs["forced"][0]["diff"]
    assert diff["skipped"] == [] and len(diff["installed"]) == 7
    # The comparison ran vLLM's own code first, ours second.
    assert not any(w.startswith(OURS) for w in diff["theirs_resolved"].values()), diff["theirs_resolved"]
    assert all(w.startswith(OURS) for w in diff["ours_resolved"].values()), diff["ours_resolved"]
    assert len(diff["theirs_resolved"]) == 8  # the FlashInfer backend's and the speculator's kernels among them
    assert diff["steps"] == 60
    pages = diff["page_index_batches"]  # pages written per batch: 0, 1 and 2-8 requests for each of 12 engines
    assert len(pages) == 36 and 0 in pages and max(pages) > 40
    assert diff["decode_input_batches"] == 36
    assert len(diff["draft_steps"]) == 12 and min(diff["draft_steps"]) >= 2  # 1 and 2-8 requests, 1-3 steps each
    assert diff["differences"] == [], "\n".join(diff["differences"])


@pytest.mark.parametrize("run,why", [
    ("default", "no CUDA device is visible"),  # (or no CUDA kernels in this build)
    ("ours_off", "SGLMETA_VLLM_PLUGIN=off"),
])
def test_inactive_plugin_leaves_vllm_alone(runs, run, why):
    report, stderr = runs[run]
    lines = our_lines(stderr)
    assert len(lines) == 1 and "inactive, vLLM keeps its own kernels" in lines[0], stderr[-3000:]
    if run == "ours_off" or "CUDA kernels" not in lines[0]:
        assert why in lines[0]
    assert not any(w.startswith(OURS) for w in report["resolved"].values()), report


def test_vllms_allow_list_without_us_never_calls_the_plugin(runs):
    report, stderr = runs["not_allowed"]
    assert our_lines(stderr) == []
    assert not any(w.startswith(OURS) for w in report["resolved"].values()), report


def test_cli_reports_every_row(runs):
    stdout, _ = runs["cli"]
    assert "vllm 0.33.0" in stdout
    without_flashinfer = importlib.util.find_spec("flashinfer") is None
    assert stdout.count("replaces vllm.") == (6 if without_flashinfer else 7), stdout
    if without_flashinfer:
        assert stdout.count("keeps") == 1, stdout
        assert f"keeps    vllm.v1.attention.backends.flashinfer._copy_page_indices_kernel: {NO_FLASHINFER}" in stdout
