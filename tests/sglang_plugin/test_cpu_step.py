"""Points of the ``--sglang`` bench on CPU tensors (SGLang's Triton kernels through the
interpreter), through the bench's own builder and step loop: FlashInfer's decode,
verify, draft extend and multi-step draft decode with the planner left out, FlashInfer
MLA's decode, verify and multi-step draft decode likewise, FlashMLA
in every mode with its planner left out, the Triton backend in every mode (its multi-step draft decode, as
TRT-LLM MLA's, builds once the scheduler's page size is published), FA3 in every mode through its
function drop-ins (at page sizes 64 and 1, and at page size 1 with requests far shorter than the
backend's width, as ``--max-len`` draws them), FA3's target verify and draft decode with top-k 4 (both halves of their metadata),
and DSA's multi-step draft decode, also with the ``flashmla_kv`` decode (SGLang's own eager
fallbacks off, one launch of ours on).
With the hooks on, every buffer compared equals SGLang's, step for step, and the
hooks take the points they cover (our launches on, none off)."""

from __future__ import annotations

import pytest

from child_report import HERE, child_report
from cpu_step_child import HOOKED, POINTS


@pytest.fixture(scope="module")
def report():
    try:
        import sglang  # noqa: F401
        import triton  # noqa: F401
    except ImportError as err:
        pytest.skip(f"sglang / triton not installed ({err})")
    return child_report([str(HERE / "cpu_step_child.py")], timeout=1200, TRITON_INTERPRET="1", CUDA_VISIBLE_DEVICES="")


@pytest.mark.parametrize("point", [f"{b}-{m}-bs{bs}" for b, m in POINTS for bs in (1, 3)]
                         + [f"fa3_page1-{m}-bs3-short" for m in ("decode", "target_verify")])
def test_buffers_equal_and_the_hooks_take_the_point(report, point):
    r = report[point]
    assert r["diffs"] == [] and r["compared"] == 3 and r["keys"], r
    if point.startswith("fa3_topk4"):
        keys = {k.split(".", 1)[1] if k.startswith("step") else k for k in r["keys"]}  # draft decode: per step
        assert {"expand.page_table", "expand.cache_seqlens", "page_table"} <= keys, r
    if point.startswith(("flashinfer-draft_decode", "flashinfer_mla-draft_decode")):  # each draft step's planner's
        assert {"step0.kv_indptr", "step0.kv_indices", "step1.kv_indptr", "step1.kv_indices"} <= set(r["keys"])
    elif point.startswith("flashinfer_mla"):  # its planner takes both index arrays and the lengths in every mode
        assert {"qo_indptr", "kv_indptr", "kv_indices", "kv_len_arr"} <= set(r["keys"])
        assert ("device_kv_indptr" in r["keys"]) == ("-decode-" in point)
    elif point.startswith("flashinfer"):
        assert {"kv_indptr", "kv_indices"} <= set(r["keys"])
        assert ("qo_indptr" in r["keys"]) == ("-decode-" not in point)
    if point.startswith("flashmla"):
        assert any(k.endswith("block_kv_indices") for k in r["keys"]), r
    if point.startswith("triton-decode"):  # the split counts in the same launch
        assert {"kv_indptr", "kv_indices", "num_kv_splits"} <= set(r["keys"]), r
    if point.startswith(("fa3-", "fa3_page1-")):
        keys = {k.split(".", 1)[1] if k.startswith("step") else k for k in r["keys"]}
        assert {"cache_seqlens", "cu_seqlens_k", "page_table"} <= keys, r
    if point.startswith(("dsa-draft_decode", "dsa_fp8-draft_decode")):  # every draft step's lengths and tables
        assert {f"step{i}.{k}" for i in (0, 1) for k in ("cache_seqlens", "cu_seqlens_k", "dsa_cache_seqlens",
                                                          "dsa_cu_seqlens_k", "page_table_1", "real_page_table")
                } <= set(r["keys"]), r
        planned = {f"step{i}.{k}" for i in (0, 1) for k in ("flashmla_num_splits", "flashmla_metadata")}
        assert (planned <= set(r["keys"])) == point.startswith("dsa_fp8"), r  # flashmla_kv: the planner's tensors
    if point.startswith("triton-target_verify"):
        assert {"qo_indptr", "kv_indptr", "kv_indices", "mask_indptr"} <= set(r["keys"]), r
    if point.startswith(("triton-draft_extend", "triton-target_verify")):  # the method's hook, not only the fill's
        assert {"qo_indptr", "kv_indptr", "kv_indices"} <= set(r["keys"]) and r["ours_on_qo"] >= 3, r
    assert r["ours_off"] == 0 and (r["ours_on"] >= 3) == (point.split("-")[0] in HOOKED), r
