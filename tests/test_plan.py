"""Bound calls (sgl_meta.bind / Plan): same results as the op, checks at bind
time, nothing written at bind time, memory kept alive, re-pointing detected."""

from __future__ import annotations

import gc

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from dsa_metadata_copy_cases import EDGE_CASES as DSA_CASES
from dsa_metadata_copy_cases import clone_sets, make_case as make_dsa_case, multi_lists
from helpers import TEST_CUDA, assert_same, capture_cuda_graph, poison_
from trtllm_mha_page_table_cases import EDGE_CASES as PT_CASES
from trtllm_mha_page_table_cases import make_case as make_pt_case
from trtllm_mha_metadata_cases import EDGE_CASES as MHA_CASES
from trtllm_mha_metadata_cases import MetaCase, make_case as make_mha_case


def _clone(d):
    return {k: (None if v is None else v.clone()) for k, v in d.items()}


def _new_values_(inputs, gen):
    """New in-range values written into the bound input buffers (in place)."""
    seq = inputs["seq_lens"]
    seq.copy_(seq[torch.randperm(seq.numel(), generator=gen).to(seq.device)])
    req = inputs["req_pool_indices"]
    req.copy_(req[torch.randperm(req.numel(), generator=gen).to(req.device)])


@pytest.mark.parametrize("name", sorted(MHA_CASES))
def test_update_plan_matches_op_over_steps(name, gen, device):
    inputs, outputs, scalars = make_mha_case(MHA_CASES[name], gen, device)
    want = _clone(outputs)
    plan = sgl_meta.bind(sgl_meta.update_trtllm_mha_graph_metadata, **inputs, **outputs, **scalars)
    assert_same(outputs, _clone(want), "bind() must not write")  # poisoned values survive
    for _ in range(3):
        plan()
        reference.update_trtllm_mha_graph_metadata(**inputs, **want, **scalars)
        assert_same(outputs, want, f"plan step ({name})")
        _new_values_(inputs, gen)


def test_page_table_plan_positional(gen, device):
    data = make_pt_case(PT_CASES["odd_sizes"], gen, device)
    bufs = _clone(data.buffers)
    views = data.views(bufs)
    i = data.inputs
    plan = sgl_meta.bind(sgl_meta.build_trtllm_mha_page_table, i["req_to_token"], i["req_pool_indices"],
                         i["cache_seqlens"], views["page_table"], data.case.page_size,
                         views["swa_page_table"], i["full_to_swa"])
    plan()
    want = data.run(reference.build_trtllm_mha_page_table)
    assert_same(bufs, want, "page-table plan")


@pytest.mark.parametrize("name", ["decode", "verify", "draft_extend", "decode_odd"])
def test_dsa_multi_plan(name, gen, device):
    sources, dests, scalars = make_dsa_case(DSA_CASES[name], gen, device)
    want = clone_sets(dests)
    plan = sgl_meta.bind(sgl_meta.fused_metadata_copy_multi, **sources, **multi_lists(dests), **scalars)
    assert plan.num_launches == 1
    plan()
    reference.fused_metadata_copy_multi(**sources, **multi_lists(want), **scalars)
    for got, exp in zip(dests, want):
        assert_same(got, exp, f"dsa multi plan ({name})")


@pytest.mark.parametrize("form", ["table", "stream"])
def test_kv_read_plans_follow_new_values(form, gen, device):
    """Bound read tables (general op and drop-in) re-translate each call: new
    lengths and rows, and a v2p changed in place (a compaction)."""
    from kv_read_table_cases import KvCase, make_case as make_kv_case

    case = KvCase(form=form, bs=6, kv_start="none", max_pages=12, ctx=12 * 16, row_pad=0)
    data = make_kv_case(case, gen, device)
    op = sgl_meta.kv_read_page_table if form == "table" else sgl_meta.kv_read_token_stream
    ref = reference.kv_read_page_table if form == "table" else reference.kv_read_token_stream
    buf = data.buffer.clone()
    kw = data.kwargs(buf)
    plans = [sgl_meta.bind(op, **kw)]
    dropin = {k: v for k, v in kw.items() if k not in ("kv_start_idx", "seq_len_delta" if form == "stream" else "")}
    if form == "table":
        plans.append(sgl_meta.bind(sgl_meta.build_kv_read_table, **dropin))
    else:
        plans.append(sgl_meta.bind(sgl_meta.build_kv_read_table_packed, **dropin, max_tokens=buf.numel()))
    assert torch.equal(buf, data.buffer), "bind() must not write"
    for plan in plans:
        assert plan.num_launches == 1
        for step in range(3):
            plan()
            want = data.buffer.clone() if step == 0 else want
            ref(**data.kwargs(want))
            assert torch.equal(buf.cpu(), want.cpu()), f"{form} plan, step {step}"
            v2p = data.inputs["v2p"]
            v2p.copy_(v2p[torch.randperm(v2p.numel(), generator=gen).to(v2p.device)])
        buf.copy_(data.buffer)


def test_bs0_plan_is_a_noop(gen, device):
    inputs, outputs, scalars = make_mha_case(MetaCase(bs=0), gen, device)
    before = _clone(outputs)
    plan = sgl_meta.bind(sgl_meta.update_trtllm_mha_graph_metadata, **inputs, **outputs, **scalars)
    assert plan.num_launches == 0
    plan()
    assert_same(outputs, before, "bs=0 plan")


def test_bind_checks_like_the_op(gen):
    inputs, outputs, scalars = make_mha_case(MetaCase(), gen, "cpu")
    with pytest.raises(RuntimeError, match=r"sgl_meta.update_trtllm_mha_graph_metadata: page_size must be >= 1"):
        sgl_meta.bind(sgl_meta.update_trtllm_mha_graph_metadata, **inputs, **outputs, **{**scalars, "page_size": 0})
    with pytest.raises(TypeError, match="sgl_meta.bind: update_trtllm_mha_graph_metadata"):
        sgl_meta.bind(sgl_meta.update_trtllm_mha_graph_metadata, **inputs, **outputs, **scalars, bogus=1)
    with pytest.raises(TypeError, match="op must be one of sgl_meta's op wrappers"):
        sgl_meta.bind(torch.add, inputs["seq_lens"], 1)
    # A failed bind leaves no recording behind: the next plain call launches.
    sgl_meta.update_trtllm_mha_graph_metadata(**inputs, **outputs, **scalars)
    want = _clone(outputs)
    poison_(outputs["cache_seqlens"], torch.Generator().manual_seed(1))
    sgl_meta.update_trtllm_mha_graph_metadata(**inputs, **outputs, **scalars)
    bs = scalars["bs"]
    assert torch.equal(outputs["cache_seqlens"][:bs], want["cache_seqlens"][:bs])


def test_hostile_value_raises_at_call_cpu(gen):
    inputs, outputs, scalars = make_mha_case(MetaCase(), gen, "cpu")
    plan = sgl_meta.bind(sgl_meta.update_trtllm_mha_graph_metadata, **inputs, **outputs, **scalars)
    inputs["req_pool_indices"][0] = 10**6
    with pytest.raises(RuntimeError, match=r"sgl_meta.update_trtllm_mha_graph_metadata: req_pool_indices\[0\]"):
        plan()


def test_plan_keeps_memory_alive(gen):
    """Dropping every reference to the bound tensors frees nothing: the plan
    still reads the old inputs and writes the old outputs."""
    inputs, outputs, scalars = make_mha_case(MetaCase(bs=7, max_seq_pages=30), gen, "cpu")
    want = _clone(outputs)
    reference.update_trtllm_mha_graph_metadata(**inputs, **want, **scalars)
    table = outputs["page_table"]
    plan = sgl_meta.bind(sgl_meta.update_trtllm_mha_graph_metadata, **inputs, **outputs, **scalars)
    del inputs, outputs
    gc.collect()
    garbage = [torch.randint(0, 2**30, (4096,), dtype=torch.int32) for _ in range(64)]  # reuse freed memory
    plan()
    assert torch.equal(table, want["page_table"])
    del garbage


def test_repointed_tensor_is_detected(gen, monkeypatch):
    inputs, outputs, scalars = make_mha_case(MetaCase(), gen, "cpu")
    plan = sgl_meta.bind(sgl_meta.update_trtllm_mha_graph_metadata, **inputs, **outputs, **scalars)
    plan.check()  # nothing moved yet
    outputs["page_table"].set_(outputs["page_table"].clone())
    with pytest.raises(RuntimeError, match=r"page_table was re-pointed"):
        plan.check()
    monkeypatch.setenv("SGL_META_CHECK_PLANS", "1")
    checked = sgl_meta.bind(sgl_meta.update_trtllm_mha_graph_metadata, **inputs, **outputs, **scalars)
    inputs["seq_lens"].set_(inputs["seq_lens"].clone())
    with pytest.raises(RuntimeError, match=r"seq_lens was re-pointed"):
        checked()


@pytest.mark.gpu
def test_plan_in_cuda_graph_replays_new_values(gen):
    inputs, outputs, scalars = make_mha_case(MetaCase(bs=9, live_pages_only=True), gen, TEST_CUDA)
    plan = sgl_meta.bind(sgl_meta.update_trtllm_mha_graph_metadata, **inputs, **outputs, **scalars)
    graph = capture_cuda_graph(plan)
    for _ in range(3):
        _new_values_(inputs, gen)
        want = _clone(outputs)
        reference.update_trtllm_mha_graph_metadata(**inputs, **want, **scalars)
        graph.replay()
        torch.cuda.synchronize()
        assert_same(outputs, want, "plan replayed in a CUDA graph")


@pytest.mark.gpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_plan_runs_on_its_device_not_the_current_one(gen):
    inputs, outputs, scalars = make_mha_case(MetaCase(bs=5), gen, "cuda:1")
    want = _clone(outputs)
    reference.update_trtllm_mha_graph_metadata(**inputs, **want, **scalars)
    plan = sgl_meta.bind(sgl_meta.update_trtllm_mha_graph_metadata, **inputs, **outputs, **scalars)
    with torch.cuda.device(0):
        plan()
    torch.cuda.synchronize(1)
    assert_same(outputs, want, "plan on cuda:1 with cuda:0 current")


@pytest.mark.parametrize("what", ["reference", "adapter", "bind", "plan_class", "plan_object"])
def test_bind_refuses_what_it_cannot_replay(what, gen):
    """Only op wrappers and drop-ins can be bound: the eager reference and the
    SGLang adapters (which may copy a source first) would be replayed wrongly,
    and bind/Plan themselves used to reach a null handle (segfault)."""
    inputs, outputs, scalars = make_mha_case(MetaCase(), gen, "cpu")
    kw = {**inputs, **outputs, **scalars}
    op = sgl_meta.update_trtllm_mha_graph_metadata
    if what == "reference":
        call = lambda: sgl_meta.bind(reference.update_trtllm_mha_graph_metadata, **kw)  # noqa: E731
    elif what == "adapter":
        from sgl_meta.sglang import adapters

        call = lambda: sgl_meta.bind(adapters.update_trtllm_mha_graph_metadata, **kw)  # noqa: E731
    elif what == "bind":
        call = lambda: sgl_meta.bind(sgl_meta.bind, op, **kw)  # noqa: E731
    elif what == "plan_class":
        call = lambda: sgl_meta.bind(sgl_meta.Plan, "x", 0, [])  # noqa: E731
    else:
        plan = sgl_meta.bind(op, **kw)
        call = lambda: sgl_meta.bind(plan)  # noqa: E731
    before = _clone(outputs)
    with pytest.raises(TypeError, match="sgl_meta.bind: op must be one of sgl_meta's op wrappers"):
        call()
    assert_same(outputs, before, "a refused bind writes nothing")


def test_plan_is_not_constructed_directly():
    with pytest.raises(TypeError, match="plans are made by sgl_meta.bind"):
        sgl_meta.Plan("x", 0, [])
