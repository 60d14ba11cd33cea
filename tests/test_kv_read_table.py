"""kv_read_page_table / kv_read_token_stream and the upstream drop-ins: fused
kernels vs the eager reference vs the contract recomputed element by element."""

from __future__ import annotations

import dataclasses
import inspect
import random
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

import sgl_meta
from sgl_meta import reference
from helpers import TEST_CUDA, capture_cuda_graph, poison_
from kv_read_table_cases import EDGE_CASES, PAGE_SIZES, STREAM_EDGE_CASES, KvCase, KvData, formula, make_case

OPS = {
    "table": (sgl_meta.kv_read_page_table, reference.kv_read_page_table),
    "stream": (sgl_meta.kv_read_token_stream, reference.kv_read_token_stream),
}
FORMULA_LIMIT = 60_000  # elements the pure-Python contract check walks at most


def assert_buffers_equal(got: torch.Tensor, want: torch.Tensor, context: str) -> None:
    got, want = got.cpu(), want.cpu()
    if torch.equal(got, want):
        return
    diff = (got != want).nonzero()
    first = tuple(diff[0].tolist())
    raise AssertionError(f"{context}: {diff.shape[0]} of {want.numel()} elements differ; "
                         f"first at {first}: got {got[first].item()}, want {want[first].item()}")


def check(case: KvCase, gen, device) -> tuple[KvData, torch.Tensor]:
    data = make_case(case, gen, device)
    fused, ref = OPS[case.form]
    inputs_before = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in data.inputs.items()}
    got = data.run(fused)
    want = data.run(ref)
    assert_buffers_equal(got, want, f"op vs reference, {case}")
    if sum(data.live()) + case.bs * (case.max_pages if case.zero_tail else 0) <= FORMULA_LIMIT:
        assert_buffers_equal(got, formula(data), f"op vs the contract, {case}")
    for k, v in inputs_before.items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(data.inputs[k], v), f"input {k} changed"
    return data, got


@pytest.mark.parametrize("form", ["table", "stream"])
@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases(name, form, gen, device):
    check(dataclasses.replace(EDGE_CASES[name], form=form), gen, device)


# Past 65535 rows (a CUDA grid's y and z limit): both kernels put the row on
# grid x, which holds 2^31 - 1.
@pytest.mark.parametrize("form,zero_tail", [("table", False), ("table", True), ("stream", False)],
                         ids=["table", "table_zero_tail", "stream"])
def test_more_rows_than_grid_rows(form, zero_tail, gen, device):
    check(KvCase(form=form, bs=70_000, pool=50, ctx=40, page_size=16, max_pages=3, zero_tail=zero_tail,
                 pad_rows=1, pad_cols=1, lead=1, gap=1, tail=1), gen, device)


@pytest.mark.parametrize("name", sorted(STREAM_EDGE_CASES))
def test_stream_edge_cases(name, gen, device):
    check(STREAM_EDGE_CASES[name], gen, device)


@pytest.mark.parametrize("form", ["table", "stream"])
@pytest.mark.parametrize("page_size", PAGE_SIZES)
def test_page_sizes(page_size, form, gen, device):
    case = KvCase(form=form, bs=7, page_size=page_size, ctx=40 * page_size + 3, max_pages=37,
                  vpages=80, kv_start="any" if page_size > 2 else "none", delta=2)
    check(case, gen, device)


def random_case(rng: random.Random) -> KvCase:
    page_size = rng.choice([1, 2, 3, 16, 32, 64, 100, 128, 256])
    ctx = rng.choice([0, 1, 17, 200, 1100])
    return KvCase(
        form=rng.choice(["table", "stream"]),
        bs=rng.choice([0, 1, 2, 3, 7, 16, 33, 129]),
        page_size=page_size,
        ctx=ctx,
        row_pad=rng.choice([0, 5]),
        pool=rng.choice([1, 4, 33]),
        vpages=rng.choice([1, 7, 300]),
        v2p=rng.random() < 0.8,
        v2p_extra=rng.choice([0, 3]),
        freed_frac=rng.choice([0.0, 0.1, 0.5]),
        neg_frac=rng.choice([0.0, 0.1, 0.5]),
        min_len=rng.choice([-10, 0, 1]),
        max_len=rng.choice([None, 1, 60, 2000]),
        delta=rng.choice([0, 0, 1, 4, -3]),
        kv_start=rng.choice(["none", "none", "zero", "aligned", "any", "past_row"]),
        index_dtype=rng.choice([torch.int32, torch.int64]),
        len_dtype=rng.choice([torch.int32, torch.int64]),
        max_pages=rng.choice([0, 1, 5, 70, 600]),
        zero_tail=rng.random() < 0.4,
        offset=rng.choice([0, 2]),
        pad_rows=rng.choice([0, 3]),
        pad_cols=rng.choice([0, 2]),
        out_dtype=rng.choice([torch.int32, torch.int64]),
        lead=rng.choice([0, 1, 2, 3]),
        gap=rng.choice([0, 3]),
        tail=rng.choice([0, 4]),
    )


@pytest.mark.parametrize("i", range(60))
def test_random(i, gen, device):
    rng = random.Random(int(torch.randint(0, 2**31, (1,), generator=gen)))
    check(random_case(rng), gen, device)


def test_bs0_writes_nothing(gen, device):
    for form in ("table", "stream"):
        data = make_case(KvCase(form=form, bs=0, zero_tail=True), gen, device)
        data.inputs["req_pool_indices"] = data.inputs["req_pool_indices"][:0]
        got = data.run(OPS[form][0])
        assert_buffers_equal(got, data.buffer, f"{form}: bs=0 must leave the buffer untouched")


def test_tail_untouched_without_zero_tail(gen, device):
    """Independently of the reference: without zero_tail only [b, :n_b] of each
    row < bs changes; with it [b, :max_pages] is all written, zeros past n_b."""
    for zero_tail in (False, True):
        case = KvCase(bs=9, max_pages=20, zero_tail=zero_tail, min_len=0, max_len=400, freed_frac=0.0)
        data, got = check(case, gen, device)
        before, after = data.buffer.cpu(), got.cpu()
        o = case.offset
        for b, n in enumerate(data.live()):
            row_after, row_before = after[o + b], before[o + b]
            end = o + (case.max_pages if zero_tail else n)
            assert torch.equal(row_after[:o], row_before[:o]) and torch.equal(row_after[end:], row_before[end:])
            if zero_tail:
                assert bool((row_after[o + n : end] == 0).all())
        assert torch.equal(after[o + case.bs :], before[o + case.bs :]), "rows past bs written"
        assert torch.equal(after[:o], before[:o])


@pytest.mark.parametrize("idx_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("len_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("delta", [-(2**31) + 1, -3, 0, 5, 2**31 - 1])
def test_table_lengths_at_the_dtype_limits(idx_dtype, len_dtype, delta, device):
    """Page table, every dtype pair (the CUDA launcher picks a kernel per pair):
    lengths and seq_len_delta at the ends of the length contract (seq_lens and
    seq_lens + seq_len_delta in [0, 2**31 - 1]; outside it they are errors:
    tests/test_hostile_lengths.py), or windows just inside, at, or past the
    row's end."""
    ps, cols = 16, 9
    ctx = ps * cols - 5  # the row's last page is partly outside it
    gen = torch.Generator().manual_seed(7)
    r2t = torch.randint(0, 50 * ps, (4, ctx), generator=gen, dtype=torch.int32)
    info = torch.iinfo(len_dtype)
    lens = [info.min, info.max, info.min + 1, info.max - 1, -delta, 1 - delta, ctx - delta - 1, ctx - delta,
            ctx - delta + 1, 0, 1, 17, 2**31 - 1, 2**31 - 1 - max(delta, 0)]
    lens = [v for v in lens if 0 <= v <= min(info.max, 2**31 - 1) and 0 <= v + delta <= 2**31 - 1]
    bs = len(lens)
    idx = torch.randint(0, 4, (bs,), generator=gen)
    out = torch.full((bs, cols + 2), -7, dtype=torch.int32)
    want = out.clone()
    for b, n in enumerate(lens):
        tokens = min(max(n + delta, 0), ctx)
        live = min(-(-tokens // ps), cols + 2)
        want[b, :live] = r2t[idx[b], torch.arange(live) * ps] // ps
    kw = dict(req_to_token=r2t.to(device), req_pool_indices=idx.to(idx_dtype).to(device),
              seq_lens=torch.tensor(lens, dtype=len_dtype, device=device), page_size=ps, max_pages=cols + 2,
              seq_len_delta=delta)
    for fn in OPS["table"]:  # the op and the eager reference (which once wrapped seq + delta around)
        got = torch.full_like(want, -7, device=device)  # -7: unwritten, as in want
        fn(**kw, out=got)
        assert_buffers_equal(got, want, f"{fn.__module__}: lengths {lens}, delta {delta}")


def test_negative_slots_and_freed_pages_read_the_sink(device):
    """A negative slot is not divided: it reads virtual page 0 (not page -1, as
    floor division would, nor a page before v2p). A -1 v2p row reads page 0."""
    t = lambda x, dt=torch.int32: torch.tensor(x, dtype=dt, device=device)  # noqa: E731
    r2t = t([[-1, 5, -64, 7, 9, 9, 11, 1, -3, 2]])
    v2p = t([40, -1, 7, 21, 13, 8], torch.int64)
    out = t([[99] * 7])
    sgl_meta.kv_read_page_table(req_to_token=r2t, req_pool_indices=t([0], torch.int64), seq_lens=t([10]),
                                out=out, page_size=2, max_pages=6, v2p=v2p)
    # page starts: -1, -64, 9, 11, -3 -> vpages 0, 0, 4, 5, 0 -> v2p 40, 40, 13, 8, 40
    assert out.tolist() == [[40, 40, 13, 8, 40, 99, 99]]
    stream = t([99] * 12)
    sgl_meta.kv_read_token_stream(req_to_token=r2t[:, :4], req_pool_indices=t([0]), seq_lens=t([4]),
                                  indptr=t([1, 5]), out=stream, page_size=2, v2p=v2p)
    # pages: slot -1 -> entry 40 -> ids 80, 81; slot -64 -> 40 -> 80, 81 (offset kept)
    assert stream.tolist() == [99, 80, 81, 80, 81] + [99] * 7


def test_v2p_shorter_than_pages_read(device):
    if device != "cpu":
        pytest.skip("the CUDA side trips a device assert: test_hostile_values_trip_device_assert")
    r2t = torch.tensor([[0, 1, 2, 3, 4, 5, 6, 7]], dtype=torch.int32)
    idx, lens = torch.tensor([0]), torch.tensor([8])
    out = torch.full((1, 8), 7, dtype=torch.int32)
    with pytest.raises(RuntimeError, match=r"^sgl_meta.kv_read_page_table: req_to_token\[0, 6\] = 6 .*"
                                           r"virtual page 3, outside v2p \(v2p.numel\(\) = 3\)"):
        sgl_meta.kv_read_page_table(req_to_token=r2t, req_pool_indices=idx, seq_lens=lens, out=out,
                                    page_size=2, max_pages=4, v2p=torch.arange(3))
    assert bool((out == 7).all()), "nothing may be written before the error"
    stream = torch.full((8,), 7, dtype=torch.int64)
    with pytest.raises(RuntimeError, match=r"^sgl_meta.kv_read_token_stream: .*outside v2p"):
        sgl_meta.kv_read_token_stream(req_to_token=r2t, req_pool_indices=idx, seq_lens=lens,
                                      indptr=torch.tensor([0, 8]), out=stream, page_size=2, v2p=torch.arange(3))
    assert bool((stream == 7).all())
    # An empty v2p still translates (an empty tensor has no data pointer: it
    # once read as "no v2p"); with nothing live it is not an error.
    with pytest.raises(RuntimeError, match=r"outside v2p \(v2p.numel\(\) = 0\)"):
        sgl_meta.kv_read_page_table(req_to_token=r2t, req_pool_indices=idx, seq_lens=lens, out=out,
                                    page_size=2, max_pages=4, v2p=torch.arange(0))
    sgl_meta.kv_read_page_table(req_to_token=r2t, req_pool_indices=idx, seq_lens=lens * 0, out=out,
                                page_size=2, max_pages=4, v2p=torch.arange(0))
    assert bool((out == 7).all())


def test_flashmla_block_table(gen, device):
    """No v2p + per-row kv_start_idx = the FlashMLA / TRT-LLM MLA block table
    (create_flashmla_kv_indices_triton on physical ids): slot // page_size."""
    ps, ctx = 64, 64 * 40
    r2t = (torch.randperm(5 * 40, generator=gen).view(5, 40).repeat_interleave(ps, 1) * ps
           + torch.arange(ctx) % ps).to(torch.int32).to(device)
    idx = torch.tensor([3, 0, 4], device=device)
    start = torch.tensor([0, 128, 640], device=device)
    lens = torch.tensor([1000, 64, 1], device=device)
    out = torch.full((3, 16), -1, dtype=torch.int32, device=device)
    sgl_meta.kv_read_page_table(req_to_token=r2t, req_pool_indices=idx, seq_lens=lens, out=out,
                                page_size=ps, max_pages=16, kv_start_idx=start)
    for b in range(3):
        n = -(-int(lens[b]) // ps)
        want = r2t[idx[b], int(start[b]) :: ps][:n].long() // ps
        assert out[b, :n].tolist() == want.tolist()
        assert bool((out[b, n:] == -1).all())


# ---- drop-ins -----------------------------------------------------------------

DROPIN_PARAMS = {
    "build_kv_read_table": ["req_to_token", "req_pool_indices", "seq_lens", "v2p", "page_size", "max_pages",
                            "out", "seq_len_delta", "zero_tail"],
    "build_kv_read_table_packed": ["req_to_token", "req_pool_indices", "seq_lens", "v2p", "indptr",
                                   "page_size", "max_tokens", "out", "kv_start_idx"],
}


@pytest.mark.parametrize("name", sorted(DROPIN_PARAMS))
def test_dropin_signatures_are_upstreams(name):
    sig = inspect.signature(getattr(sgl_meta, name))
    assert list(sig.parameters) == DROPIN_PARAMS[name]
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in sig.parameters.values())


def test_dropin_table_matches_general_op(gen, device):
    case = KvCase(bs=6, max_pages=12, delta=3, zero_tail=True, row_pad=0, ctx=12 * 16)
    data = make_case(case, gen, device)
    want = data.run(reference.kv_read_page_table)
    buf = data.buffer.clone()
    kw = data.kwargs(buf)
    kw.pop("kv_start_idx")
    ret = sgl_meta.build_kv_read_table(**kw)
    assert ret is kw["out"]
    assert_buffers_equal(buf, want, "build_kv_read_table")
    ref_buf = data.buffer.clone()
    assert reference.build_kv_read_table(**{**kw, "out": data.out_view(ref_buf)}) is not None
    assert_buffers_equal(ref_buf, want, "reference.build_kv_read_table")


def test_dropin_packed_matches_general_op(gen, device):
    case = KvCase(form="stream", bs=6, kv_start="any", tail=9)
    data = make_case(case, gen, device)
    want = data.run(reference.kv_read_token_stream)
    buf = data.buffer.clone()
    kw = data.kwargs(buf)
    kw.pop("seq_len_delta")
    ret = sgl_meta.build_kv_read_table_packed(**kw, max_tokens=buf.numel() - 2)
    assert ret is buf
    assert_buffers_equal(buf, want, "build_kv_read_table_packed")
    ref_buf = data.buffer.clone()
    reference.build_kv_read_table_packed(**{**kw, "out": ref_buf}, max_tokens=buf.numel() - 2)
    assert_buffers_equal(ref_buf, want, "reference.build_kv_read_table_packed")


def test_dropin_early_returns_and_upstream_checks(gen, device):
    data = make_case(KvCase(bs=3, max_pages=5, ctx=5 * 16), gen, device)
    buf = data.buffer.clone()
    kw = {k: v for k, v in data.kwargs(buf).items() if k != "kv_start_idx"}
    sgl_meta.build_kv_read_table(**{**kw, "max_pages": 0})
    assert torch.equal(buf, data.buffer), "max_pages == 0 writes nothing (as upstream)"
    with pytest.raises(ValueError, match="sgl_meta.build_kv_read_table: max_pages = 6 x page_size = 16 exceeds"):
        sgl_meta.build_kv_read_table(**{**kw, "max_pages": 6})
    with pytest.raises(RuntimeError, match=r"^sgl_meta.build_kv_read_table: out must have dtype int32 \(torch.int32\)"):
        sgl_meta.build_kv_read_table(**{**kw, "out": kw["out"].long()})
    with pytest.raises(TypeError, match=r"^sgl_meta.build_kv_read_table: seq_lens must be a Tensor, got None"):
        sgl_meta.build_kv_read_table(**{**kw, "seq_lens": None})
    sdata = make_case(KvCase(form="stream", bs=3), gen, device)
    sbuf = sdata.buffer.clone()
    skw = {k: v for k, v in sdata.kwargs(sbuf).items() if k != "seq_len_delta"}
    sgl_meta.build_kv_read_table_packed(**skw, max_tokens=0)
    assert torch.equal(sbuf, sdata.buffer), "max_tokens == 0 writes nothing (as upstream)"
    with pytest.raises(ValueError, match="sgl_meta.build_kv_read_table_packed: out .* cannot hold max_tokens"):
        sgl_meta.build_kv_read_table_packed(**skw, max_tokens=sbuf.numel() + 1)


@pytest.mark.parametrize("as_int", [np.int64, np.int32, torch.tensor], ids=["np.int64", "np.int32", "0-dim tensor"])
def test_dropins_take_integers_as_upstream_does(as_int, gen, device):
    """Integer arguments with __index__ (numpy integers, one-element tensors:
    upstream's Python code takes them) work like ints, host checks included;
    bools and floats are TypeErrors (the bad-input matrix)."""
    data = make_case(KvCase(bs=3, max_pages=5, ctx=5 * 16, delta=2), gen, device)
    want, buf = data.buffer.clone(), data.buffer.clone()
    kw = {k: v for k, v in data.kwargs(buf).items() if k != "kv_start_idx"}
    sgl_meta.build_kv_read_table(**{**kw, "out": data.out_view(want)})
    ints = dict(page_size=as_int(16), max_pages=as_int(5), seq_len_delta=as_int(2))
    assert sgl_meta.build_kv_read_table(**{**kw, **ints}) is kw["out"]
    assert_buffers_equal(buf, want, "build_kv_read_table, integer-like arguments")
    with pytest.raises(ValueError, match="max_pages = 6 x page_size = 16 exceeds"):
        sgl_meta.build_kv_read_table(**{**kw, **ints, "max_pages": as_int(6)})
    sdata = make_case(KvCase(form="stream", bs=3), gen, device)
    swant, sbuf = sdata.buffer.clone(), sdata.buffer.clone()
    skw = {k: v for k, v in sdata.kwargs(sbuf).items() if k != "seq_len_delta"}
    sgl_meta.build_kv_read_table_packed(**{**skw, "out": swant}, max_tokens=swant.numel())
    sgl_meta.build_kv_read_table_packed(**{**skw, "page_size": as_int(16)}, max_tokens=as_int(sbuf.numel()))
    assert_buffers_equal(sbuf, swant, "build_kv_read_table_packed, integer-like arguments")


# ---- graph capture, compile, opcheck ----------------------------------------------


def _compaction(v2p: torch.Tensor, gen) -> torch.Tensor:
    """Pages move: live virtual pages get other physical pages (a permutation of
    the values, -1 rows stay freed); req_to_token is not touched."""
    live = (v2p >= 0).nonzero().flatten()
    moved = v2p.clone()
    moved[live] = v2p[live][torch.randperm(live.numel(), generator=gen).to(v2p.device)]
    return moved


@pytest.mark.gpu
@pytest.mark.parametrize("form", ["table", "stream"])
@pytest.mark.parametrize("zero_tail", [False, True], ids=["live", "zero_tail"])
def test_cuda_graph_capture_and_replay_with_compaction(form, zero_tail, gen):
    if form == "stream" and zero_tail:
        pytest.skip("zero_tail is a page-table option")
    case = KvCase(form=form, bs=17, page_size=16, ctx=70 * 16, max_pages=70, pool=23, vpages=300,
                  kv_start="any" if form == "stream" else "none", delta=4, zero_tail=zero_tail, gap=0,
                  max_len=60 * 16)
    data = make_case(case, gen, TEST_CUDA)
    static = {k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in data.inputs.items()}
    if form == "stream":  # room for any row (the capacity a server sizes once)
        static["indptr"] = torch.arange(case.bs + 2, device=TEST_CUDA) * case.ctx
    if form == "stream":
        buf = torch.empty(case.bs * case.ctx + 8, dtype=data.buffer.dtype, device=TEST_CUDA)
    else:
        buf = torch.empty_like(data.buffer)
    fused, ref = OPS[form]
    replayed = KvData(case, static, buf)

    graph = capture_cuda_graph(lambda: fused(**replayed.kwargs(buf)))
    for step in range(4):
        if step % 2 == 1:  # a compaction step: only v2p changes
            static["v2p"].copy_(_compaction(static["v2p"], gen))
        else:  # new lengths, request rows and windows
            fresh = make_case(case, gen, TEST_CUDA)
            for k in ("req_pool_indices", "seq_lens", "kv_start_idx"):
                if static[k] is not None:
                    static[k].copy_(fresh.inputs[k])
        poison_(buf, gen)
        before = buf.clone()
        graph.replay()
        torch.cuda.synchronize()
        want = before.clone()
        ref(**replayed.kwargs(want))
        assert_buffers_equal(buf, want, f"graph replay {step}")


@pytest.mark.parametrize("form", ["table", "stream"])
@pytest.mark.parametrize("optional", [False, True], ids=["plain", "all_optional"])
def test_opcheck(form, optional, gen, device):
    case = KvCase(form=form, bs=5, offset=0, pad_rows=0, pad_cols=0, v2p=optional,
                  kv_start="any" if optional else "none", zero_tail=optional, delta=2 if optional else 0)
    data = make_case(case, gen, device)
    op = getattr(torch.ops.sgl_meta, "kv_read_page_table" if form == "table" else "kv_read_token_stream").default
    kwargs = data.kwargs(data.buffer.clone())
    names = [a.name for a in op._schema.arguments]
    torch.library.opcheck(op, tuple(kwargs[n] for n in names))


@pytest.mark.parametrize("form", ["table", "stream"])
def test_torch_compile_fullgraph(form, gen, device):
    """General op and drop-in, compiled; the output view is taken inside the graph."""
    case = KvCase(form=form, bs=6, max_pages=10, ctx=10 * 16, kv_start="any" if form == "stream" else "none",
                  zero_tail=True)
    data = make_case(case, gen, device)
    want = data.run(OPS[form][1])
    o = case.offset

    if form == "table":
        @torch.compile(fullgraph=True, dynamic=False)
        def refresh(buf, req_to_token, req_pool_indices, seq_lens, v2p, kv_start_idx):
            view = buf[o : o + case.bs, o : o + case.max_pages]
            sgl_meta.kv_read_page_table(req_to_token=req_to_token, req_pool_indices=req_pool_indices,
                                        seq_lens=seq_lens, out=view, page_size=case.page_size,
                                        max_pages=case.max_pages, v2p=v2p, zero_tail=True)
            return sgl_meta.build_kv_read_table(req_to_token=req_to_token, req_pool_indices=req_pool_indices,
                                                seq_lens=seq_lens, v2p=v2p, page_size=case.page_size,
                                                max_pages=case.max_pages, out=view, zero_tail=True)
    else:
        @torch.compile(fullgraph=True, dynamic=False)
        def refresh(buf, req_to_token, req_pool_indices, seq_lens, v2p, kv_start_idx, indptr):
            sgl_meta.kv_read_token_stream(req_to_token=req_to_token, req_pool_indices=req_pool_indices,
                                          seq_lens=seq_lens, indptr=indptr, out=buf, page_size=case.page_size,
                                          v2p=v2p, kv_start_idx=kv_start_idx)
            return sgl_meta.build_kv_read_table_packed(req_to_token=req_to_token, req_pool_indices=req_pool_indices,
                                                       seq_lens=seq_lens, v2p=v2p, indptr=indptr,
                                                       page_size=case.page_size, max_tokens=buf.numel(), out=buf,
                                                       kv_start_idx=kv_start_idx)

    torch._dynamo.reset()
    buf = data.buffer.clone()
    refresh(buf, **data.inputs)
    assert_buffers_equal(buf, want, "torch.compile")


def test_fake_cuda_tracing_without_gpu(gen):
    """The CUDA schema path traces with fake CUDA tensors (no GPU needed)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    for form, name in (("table", "kv_read_page_table"), ("stream", "kv_read_token_stream")):
        data = make_case(KvCase(form=form, offset=0, pad_rows=0, pad_cols=0, kv_start="any"), gen, "cpu")
        kw = data.kwargs(data.buffer)
        tensors = {k: v for k, v in kw.items() if isinstance(v, torch.Tensor)}
        with FakeTensorMode(allow_non_fake_inputs=False) as mode:
            fake = {k: mode.from_tensor(v).to("cuda") for k, v in tensors.items()}

            def fn(*args):
                OPS[form][0](**{**kw, **dict(zip(fake.keys(), args))})
                return args

            gm = make_fx(fn, tracing_mode="fake")(*fake.values())
        targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
        assert getattr(torch.ops.sgl_meta, name).default in targets


@pytest.mark.gpu
def test_runs_on_the_tensors_device_not_the_current_one(gen):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    for form in ("table", "stream"):
        data = make_case(KvCase(form=form), gen, "cuda:1")
        want = data.run(OPS[form][1])
        with torch.cuda.device(0):
            got = data.run(OPS[form][0])
        assert_buffers_equal(got, want, "cuda:1")


@pytest.mark.gpu
@pytest.mark.parametrize("what", ["req_pool_indices", "v2p", "indptr"])
def test_hostile_values_trip_device_assert(what):
    """In a child process: a device assert poisons the CUDA context."""
    script = textwrap.dedent(
        f"""
        import torch, sgl_meta
        r2t = torch.arange(4 * 64, dtype=torch.int32, device="cuda").view(4, 64)
        idx = torch.tensor([1, 4 if "{what}" == "req_pool_indices" else 2], device="cuda")
        lens = torch.tensor([0, 33], dtype=torch.int32, device="cuda")
        v2p = torch.arange(1000 if "{what}" != "v2p" else 10, device="cuda")
        if "{what}" == "indptr":
            out = torch.zeros(100, dtype=torch.int32, device="cuda")
            indptr = torch.tensor([0, 0, 20], device="cuda")  # row 1 needs 33
            sgl_meta.kv_read_token_stream(req_to_token=r2t, req_pool_indices=idx, seq_lens=lens,
                                          indptr=indptr, out=out, page_size=16, v2p=v2p)
        else:
            out = torch.zeros(2, 4, dtype=torch.int32, device="cuda")
            sgl_meta.kv_read_page_table(req_to_token=r2t, req_pool_indices=idx, seq_lens=lens, out=out,
                                        page_size=16, max_pages=4, v2p=v2p)
        torch.cuda.synchronize()
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "sgl_meta: kv_read_" in out and what in out, out
