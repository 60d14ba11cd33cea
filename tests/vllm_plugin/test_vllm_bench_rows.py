"""The vLLM rows of ``python -m sgl_meta.bench --upstream`` on CPU at small
shapes (vllm_bench_child.py, a fresh interpreter of the overlay venv with vLLM's
Triton kernels interpreted): vLLM 0.33's own BlockTables methods,
input-batch functions, FlashInfer page-index kernel (its module imported
through flashinfer's import stub) and speculator functions beside ours and the
reference, every element
upstream defines equal, a corrupted one caught; the cold-start calls over small
buckets equal too. In any environment: the rows are registered, and without vLLM
(or, for the FlashInfer rows, without flashinfer) the --upstream run lists them
as skipped, saying why.

Skips the CPU run where vLLM 0.33.0 is not importable (scripts/setup_vllm_env.sh).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import vllm_env

from sgl_meta.bench.upstream import loader, rows_vllm
from sgl_meta.bench.upstream.run import ROW_SPECS, why_skipped

CHILD = Path(__file__).with_name("vllm_bench_child.py")
CPU_TRITON = {"TRITON_INTERPRET": "1", "CUDA_VISIBLE_DEVICES": ""}


@pytest.fixture(scope="module")
def report():
    why = vllm_env.why_not_installed()
    if why:
        pytest.skip(why)
    proc = subprocess.run([sys.executable, str(CHILD)], env=vllm_env.child_env(flashinfer_stub=True, **CPU_TRITON),
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, f"child failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_rows_are_registered_with_every_op():
    assert all(spec in ROW_SPECS for spec in rows_vllm.ROWS)
    ours = {fn for spec in rows_vllm.ROWS for fn in spec.ours}
    assert ours == {"vllm_compute_slot_mappings", "vllm_gather_block_tables", "vllm_prepare_pos_seq_lens",
                    "vllm_combine_sampled_and_draft_tokens", "vllm_prepare_step", "vllm_copy_page_indices",
                    "vllm_prepare_decode_inputs", "vllm_update_draft_inputs"}
    assert len({spec.name for spec in rows_vllm.ROWS}) == len(rows_vllm.ROWS) == 21


def test_rows_skip_with_the_reason(monkeypatch):
    monkeypatch.setattr(rows_vllm.importlib.util, "find_spec", lambda name: None)
    reason = rows_vllm.why_unavailable()
    assert reason.startswith("no vllm") and "pack_vllm.sh" in reason
    probe = loader.Probe(location=None, gpu=True, missing={rows_vllm.FAMILY: [reason]})
    assert {why_skipped(spec, probe, None) for spec in rows_vllm.ROWS} == {reason}
    probe.missing[rows_vllm.FAMILY] = []
    assert {why_skipped(spec, probe, None) for spec in rows_vllm.ROWS} == {None}


def test_flashinfer_rows_skip_without_flashinfer(monkeypatch):
    def no_flashinfer():
        raise ModuleNotFoundError("No module named 'flashinfer'", name="flashinfer")

    monkeypatch.setattr(rows_vllm, "flashinfer_backend", no_flashinfer)
    reason = rows_vllm.why_no_flashinfer()
    assert reason == "no flashinfer: vLLM's FlashInfer backend (vllm.v1.attention.backends.flashinfer) imports it"
    probe = loader.Probe(location=None, gpu=True, missing={rows_vllm.FAMILY: [], rows_vllm.FLASHINFER: [reason]})
    skipped = {spec.name: why_skipped(spec, probe, None) for spec in rows_vllm.ROWS}
    assert {n for n, why in skipped.items() if why} == {"vLLM FlashInfer copy_page_indices decode bs64",
                                                        "vLLM FlashInfer copy_page_indices decode bs256"}
    assert {why for why in skipped.values() if why} == {reason}


def test_vllm_rows_equal_ours_on_cpu(report):
    assert report["unavailable"] is None and report["no_flashinfer"] is None
    assert set(report["rows"]) == {spec.name for spec in rows_vllm.ROWS}
    for name, r in report["rows"].items():
        assert r["problems"] == [], name
        assert r["impls"] == ["ours", "ref", "upstream"] and r["compared"] > 0, name
        assert r["caught"] == 1, f"{name}: a corrupted upstream element was not caught"
    fused = [r for n, r in report["rows"].items() if n.startswith("vLLM step")]
    assert len(fused) == 3 and all(r["calls"] == {"upstream": 3, "ours": 1, "ref": 1} for r in fused)


def test_cold_start_calls_equal_on_cpu(report):
    c = report["cold_start"]
    assert "skipped" not in c and c["calls_per_bucket"] == 4
    assert c["compared"] == 8 and c["equal"]
