"""flash_attention_draft_decode_topk (FA3 EAGLE draft decode, top-k > 1: every step's
prefix and draft halves): op vs eager reference vs the documented formula written out per
element, on CPU; CUDA vs CPU and CUDA-graph replays. Against SGLang 0.5.23's own method:
tests/sglang_plugin/test_flash_attention_draft_topk.py."""

from __future__ import annotations

import re

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from flash_attention_metadata_cases import POISON, clone_call, draft_topk_call, skew_lengths
from helpers import capture_cuda_graph, on_cuda

OUTPUTS = ("cache_seqlens", "page_table", "expand_cache_seqlens", "expand_page_table")


def formula(kw: dict) -> dict:
    """The docstring's formula, one element at a time, into copies of the outputs."""
    out = {k: [t.clone().cpu() for t in kw[k]] for k in OUTPUTS}
    p, bs, topk, steps = kw["page_size"], kw["bs"], kw["topk"], kw["num_steps"]
    loc = [int(v) for v in kw["out_cache_loc"].cpu()]
    for s, d in enumerate(kw["decode_length"]):
        for b in range(bs):
            seq = int(kw["seq_lens"][b])
            last = seq % p
            out["cache_seqlens"][s][b] = seq - last
            req = int(kw["req_pool_indices"][b])
            for c in range(min((seq - last) // p, kw["max_seq_pages"])):
                out["page_table"][s][b, c] = int(kw["req_to_token"][req, c * p]) // p
        for r in range(bs * topk):
            x = [loc[r * steps + j] for j in range(d)]
            pos = 0
            for j in range(d):
                if p == 1:
                    out["expand_page_table"][s][r, j] = x[j]
                    continue
                if j > 0 and x[j] // p != x[j - 1] // p:
                    pos += 1
                out["expand_page_table"][s][r, pos] = x[j] // p
            if out["expand_cache_seqlens"]:
                out["expand_cache_seqlens"][s][r] = d + int(kw["seq_lens"][r // topk]) % p
    return out


def run(fn, kw: dict) -> dict:
    kw = clone_call(kw)
    fn(**kw)
    return {k: [t.cpu() for t in kw[k]] for k in OUTPUTS}


def assert_equal(got: dict, want: dict, context: str) -> None:
    for k in OUTPUTS:
        assert len(got[k]) == len(want[k]), k
        for s, (g, w) in enumerate(zip(got[k], want[k])):
            assert torch.equal(g, w), f"{k}[{s}] differs ({context})"


CASES = [dict(), dict(bs=1, topk=2, num_steps=2, sets=1, page_size=64, max_seq_pages=4),
         dict(bs=7, topk=4, num_steps=5, sets=4, page_size=1, max_seq_pages=20),
         dict(bs=40, topk=8, num_steps=3, sets=2, page_size=4, max_seq_pages=9),
         dict(bs=5, topk=3, num_steps=16, sets=16, page_size=2, max_seq_pages=3),
         dict(bs=2, topk=2, num_steps=64, sets=3, page_size=128, max_seq_pages=300),
         dict(bs=3, max_seq_pages=0), dict(bs=0)]


def _call(gen, shape: dict, int32=False, expand_lens=True, full=False) -> dict:
    kw = draft_topk_call(gen, expand_lens=expand_lens, **shape)
    if int32:
        for k in ("seq_lens", "req_pool_indices", "out_cache_loc"):
            kw[k] = kw[k].int()
    if full:  # every prefix a whole number of pages, or none at all
        kw["seq_lens"] = kw["seq_lens"] - kw["seq_lens"] % kw["page_size"]
    if kw["bs"]:
        kw["seq_lens"][0] = 0
    return kw


@pytest.mark.parametrize("shape", CASES, ids=str)
@pytest.mark.parametrize("int32, expand_lens, full", [(False, True, False), (True, False, False),
                                                      (False, True, True)])
def test_matches_reference_and_formula(shape, int32, expand_lens, full, gen):
    kw = _call(gen, shape, int32, expand_lens, full)
    want = formula(kw)
    assert_equal(run(reference.flash_attention_draft_decode_topk, kw), want, "reference")
    assert_equal(run(sgl_meta.flash_attention_draft_decode_topk, kw), want, "op")


def test_what_is_not_written_keeps_its_value(gen):
    kw = draft_topk_call(gen, bs=2, topk=2, num_steps=3, sets=2, page_size=16, max_seq_pages=4)
    kw["seq_lens"] = torch.tensor([40, 15])  # 2 whole pages + 8; no whole page
    kw["out_cache_loc"] = torch.tensor([32, 33, 34] * 4)  # one page per row
    got = run(sgl_meta.flash_attention_draft_decode_topk, kw)
    for s in range(2):
        assert got["cache_seqlens"][s].tolist() == [32, 0]
        assert (got["page_table"][s][0, 2:] == POISON).all() and (got["page_table"][s][1] == POISON).all()
        assert (got["expand_page_table"][s][:, 0] == 2).all() and (got["expand_page_table"][s][:, 1:] == POISON).all()
        assert got["expand_cache_seqlens"][s].tolist() == [s + 1 + 8] * 2 + [s + 1 + 15] * 2


@pytest.mark.parametrize("edit, message", [
    (lambda kw: kw["seq_lens"].__setitem__(1, -3), "seq_lens[1] = -3 is negative"),
    (lambda kw: kw["seq_lens"].__setitem__(2, 2**31), "seq_lens[2] = 2147483648 does not fit int32"),
    (lambda kw: kw["req_pool_indices"].__setitem__(2, 5), "req_pool_indices[2] = 5 is outside"),
    (lambda kw: kw["out_cache_loc"].__setitem__(7, 2**40), "out_cache_loc[7] = 1099511627776 gives an "
                                                            "expand_page_table entry outside int32"),
])
def test_hostile_values_raise_before_anything_is_written(edit, message, gen):
    kw = draft_topk_call(gen)
    edit(kw)
    with pytest.raises(RuntimeError, match=r"sgl_meta\.flash_attention_draft_decode_topk: .*" + re.escape(message)):
        sgl_meta.flash_attention_draft_decode_topk(**kw)
    for k in OUTPUTS:
        for t in kw[k]:
            assert (t == POISON).all(), k


def test_opcheck_and_compile(gen):
    kw = draft_topk_call(gen)
    args = [kw[a.name] for a in sgl_meta.flash_attention_draft_decode_topk.op.args]
    torch.library.opcheck(torch.ops.sgl_meta.flash_attention_draft_decode_topk.default, args)

    @torch.compile(fullgraph=True, backend="eager")
    def step(k):
        sgl_meta.flash_attention_draft_decode_topk(**k)

    got = clone_call(kw)
    step(got)
    assert_equal({k: got[k] for k in OUTPUTS}, formula(kw), "compiled")


# --- GPU --------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("shape", CASES + [dict(bs=300, topk=4, num_steps=4, sets=3, page_size=64, max_seq_pages=130),
                                           dict(bs=1, topk=10, num_steps=9, sets=8, page_size=64, max_seq_pages=2048)],
                         ids=str)
@pytest.mark.parametrize("int32, expand_lens, full", [(False, True, False), (True, False, True)])
def test_cuda_equals_cpu(shape, int32, expand_lens, full, gen):
    kw = _call(gen, shape, int32, expand_lens, full)
    assert_equal(run(sgl_meta.flash_attention_draft_decode_topk, on_cuda(kw)), formula(kw), str(shape))


# Past 4,096 prefix blocks (bs x 128-column chunks) each request gets
# min(4096 // bs, ceil(chunks / 4)) blocks (at least 1) that loop over its chunks, four at a time (page size 1 at the backend's static
# width): both sides of that bound, pages of 2, one block per request, and blocks with
# more than four chunks.
WIDE = [dict(bs=32, topk=2, num_steps=3, sets=2, page_size=1, max_seq_pages=16384),
        dict(bs=33, topk=2, num_steps=3, sets=2, page_size=1, max_seq_pages=16384),
        dict(bs=131, topk=3, num_steps=4, sets=3, page_size=2, max_seq_pages=16384),
        dict(bs=8200, topk=2, num_steps=2, sets=1, page_size=1, max_seq_pages=129),
        dict(bs=2000, topk=2, num_steps=2, sets=2, page_size=1, max_seq_pages=1500)]


@pytest.mark.gpu
@pytest.mark.parametrize("skewed", [False, True], ids=["uniform", "skewed"])
@pytest.mark.parametrize("shape", WIDE, ids=str)
def test_cuda_equals_cpu_wide_grids(shape, skewed, gen):
    kw = _call(gen, shape)
    if skewed:
        kw = skew_lengths(kw, gen)
    cpu = run(sgl_meta.flash_attention_draft_decode_topk, kw)
    assert_equal(run(sgl_meta.flash_attention_draft_decode_topk, on_cuda(kw)), cpu, f"{shape}, skewed={skewed}")
    assert_equal(cpu, run(reference.flash_attention_draft_decode_topk, kw), "cpu vs reference")


@pytest.mark.gpu
def test_graph_replay_sees_new_values(gen):
    """Capture once, then replay after rewriting the lengths, rows, slots and draft slots."""
    shape = dict(bs=16, topk=4, num_steps=3, sets=2, page_size=16, max_seq_pages=8)
    static = on_cuda(draft_topk_call(gen, **shape))
    graph = capture_cuda_graph(lambda: sgl_meta.flash_attention_draft_decode_topk(**static))
    for _ in range(3):
        fresh = draft_topk_call(gen, **shape)
        for k in ("seq_lens", "req_pool_indices", "req_to_token", "out_cache_loc"):
            static[k].copy_(fresh[k])
        for k in OUTPUTS:
            for t, f in zip(static[k], fresh[k]):
                t.copy_(f)
        graph.replay()
        torch.cuda.synchronize()
        assert_equal({k: [t.cpu() for t in static[k]] for k in OUTPUTS}, formula(fresh), "replay")
