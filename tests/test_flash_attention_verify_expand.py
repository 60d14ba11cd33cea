"""flash_attention_verify_expand (FA3 target verify, top-k > 1: the draft half of the
metadata): op vs eager reference vs the documented formula written out per element,
on CPU; CUDA vs CPU and CUDA-graph replays. Against SGLang 0.5.23's own method:
tests/sglang_plugin/test_flash_attention_verify.py."""

from __future__ import annotations

import re

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from flash_attention_metadata_cases import POISON, clone_call, verify_expand_call
from helpers import TEST_CUDA, capture_cuda_graph, on_cuda

OUTPUTS = ("page_table", "cache_seqlens", "cu_seqlens_k")


def formula(kw: dict) -> dict:
    """The docstring's formula, one element at a time, into poisoned copies of the outputs."""
    out = {k: kw[k].clone() for k in OUTPUTS}
    n, bs = kw["num_draft_tokens"], kw["bs"]
    seq = [int(v) for v in kw["seq_lens"][:bs]]
    mask = kw["custom_mask"].tolist()
    base, total = 0, 0
    for r in range(bs * n):
        s = seq[r // n]
        m = [mask[base + s + j] if r < kw["mask_rows"] else mask[0] for j in range(n)]
        order = [j for j in range(n) if m[j]] + [j for j in range(n) if not m[j]]
        req = int(kw["req_pool_indices"][r // n])
        for k, j in enumerate(order):
            out["page_table"][r, k] = kw["req_to_token"][req, s + j]
        out["cache_seqlens"][r] = sum(m)
        total += sum(m)
        out["cu_seqlens_k"][r + 1] = total
        base += s + n
    if bs * n:
        out["cu_seqlens_k"][0] = 0
    return out


def run(fn, kw: dict) -> dict:
    kw = clone_call(kw)
    fn(**kw)
    return {k: kw[k].cpu() for k in OUTPUTS}


def assert_equal(got: dict, want: dict, context: str) -> None:
    for k in OUTPUTS:
        assert torch.equal(got[k], want[k]), f"{k} differs ({context})"


CASES = [dict(), dict(bs=1, n=1), dict(bs=1, n=8, ctx=64), dict(bs=7, n=3), dict(bs=40, n=4, ctx=200),
         dict(bs=3, n=64, ctx=100), dict(bs=0)]


def _call(gen, shape: dict, mask_rows=None, density=None, int32=False) -> dict:
    kw = verify_expand_call(gen, **shape)
    if mask_rows is not None:
        kw["mask_rows"] = mask_rows
    if density is not None:
        kw["custom_mask"] = torch.rand(kw["custom_mask"].shape, generator=gen) < density
    if int32:
        kw["seq_lens"], kw["req_pool_indices"] = kw["seq_lens"].int(), kw["req_pool_indices"].int()
    return kw


@pytest.mark.parametrize("shape", CASES, ids=str)
@pytest.mark.parametrize("mask_rows, density, int32", [(None, None, False), (None, 0.0, True), (None, 1.0, False),
                                                        (0, None, True), (5, None, False)])
def test_matches_reference_and_formula(shape, mask_rows, density, int32, gen):
    kw = _call(gen, shape, mask_rows, density, int32)
    want = formula(kw)
    assert_equal(run(reference.flash_attention_verify_expand, kw), want, "reference")
    assert_equal(run(sgl_meta.flash_attention_verify_expand, kw), want, "op")


def test_rows_past_the_batch_keep_their_values(gen):
    kw = verify_expand_call(gen)
    kw["page_table"] = torch.full((20, 6), POISON, dtype=torch.int32)
    got = run(sgl_meta.flash_attention_verify_expand, kw)
    assert (got["page_table"][12:] == POISON).all() and (got["page_table"][:, 4:] == POISON).all()


@pytest.mark.parametrize("edit, message", [
    (lambda kw: kw["seq_lens"].__setitem__(1, -3), "seq_lens[1] = -3 is negative"),
    (lambda kw: kw["req_pool_indices"].__setitem__(2, 5), "req_pool_indices[2] = 5 is outside"),
    (lambda kw: kw["seq_lens"].__setitem__(0, 29), "seq_lens[0] + num_draft_tokens = 33 is past the req_to_token row"),
    (lambda kw: kw.update(custom_mask=kw["custom_mask"][:7]), "is outside custom_mask [0, 7)"),
])
def test_hostile_values_raise_before_anything_is_written(edit, message, gen):
    kw = verify_expand_call(gen)
    edit(kw)
    with pytest.raises(RuntimeError, match=r"sgl_meta\.flash_attention_verify_expand: .*" + re.escape(message)):
        sgl_meta.flash_attention_verify_expand(**kw)
    for k in OUTPUTS:
        assert (kw[k] == POISON).all(), k


def test_opcheck_and_compile(gen):
    kw = verify_expand_call(gen)
    args = [kw[a.name] for a in sgl_meta.flash_attention_verify_expand.op.args]
    torch.library.opcheck(torch.ops.sgl_meta.flash_attention_verify_expand.default, args)

    @torch.compile(fullgraph=True, backend="eager")
    def step(k):
        sgl_meta.flash_attention_verify_expand(**k)

    got = clone_call(kw)
    step(got)
    assert_equal({k: got[k] for k in OUTPUTS}, formula(kw), "compiled")


# --- GPU --------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("shape", CASES + [dict(bs=300, n=4, ctx=64), dict(bs=40, n=33, ctx=90)], ids=str)
@pytest.mark.parametrize("mask_rows", [None, 0, 7])
def test_cuda_equals_cpu(shape, mask_rows, gen):
    kw = _call(gen, shape, mask_rows)
    assert_equal(run(sgl_meta.flash_attention_verify_expand, on_cuda(kw)), formula(kw), str(shape))


@pytest.mark.gpu
def test_graph_replay_sees_new_values(gen):
    """Capture once, then replay after rewriting the lengths, rows, slots and mask."""
    shape = dict(bs=16, n=4, ctx=64)
    static = on_cuda(verify_expand_call(gen, **shape))
    static["custom_mask"] = torch.zeros(16 * 4 * 68, dtype=torch.bool, device=TEST_CUDA)
    graph = capture_cuda_graph(lambda: sgl_meta.flash_attention_verify_expand(**static))
    for _ in range(3):
        fresh = verify_expand_call(gen, **shape)
        for k in ("seq_lens", "req_pool_indices", "req_to_token"):
            static[k].copy_(fresh[k])
        static["custom_mask"].zero_()
        static["custom_mask"][: fresh["custom_mask"].numel()] = fresh["custom_mask"].to(TEST_CUDA)
        fresh["custom_mask"] = static["custom_mask"].cpu()
        graph.replay()
        torch.cuda.synchronize()
        assert_equal({k: static[k].cpu() for k in OUTPUTS}, formula(fresh), "replay")
