"""fused_dsa_metadata and its drop-ins: kernels vs the eager reference and vs a
model of SGLang 0.5.23's generators; live prefixes only; torch.library,
torch.compile and CUDA-graph replay."""

from __future__ import annotations

import os

import dataclasses
import inspect
import random

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from dsa_metadata_cases import (
    DECODE,
    DRAFT_EXTEND,
    EDGE_CASES,
    LISTS,
    MODES,
    TARGET_VERIFY,
    GenCase,
    clone_sets,
    lists_of,
    make_case,
    random_case,
)
from dsa_metadata_upstream_model import upstream_writes
from helpers import TEST_CUDA, assert_same, assert_sets, capture_cuda_graph, poison_

OP = torch.ops.sgl_meta.fused_dsa_metadata.default


def run(fn, inputs, sets, scalars):
    out = clone_sets(sets)
    fn(**inputs, **lists_of(out), **scalars)
    return out


def check(case: GenCase, gen, device):
    inputs, sets, scalars = make_case(case, gen, device)
    want = run(reference.fused_dsa_metadata, inputs, sets, scalars)
    got = run(sgl_meta.fused_dsa_metadata, inputs, sets, scalars)
    assert_sets(got, want, str(case))
    return inputs, sets, scalars, got


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases(name, k, gen, device):
    check(dataclasses.replace(EDGE_CASES[name], sets=k), gen, device)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_k_sets(k, mode, gen, device):
    check(GenCase(mode=mode, sets=k, bs=9, width=300, layout=None), gen, device)


@pytest.mark.parametrize("k", [16, 17])
def test_more_sets_than_one_launch(k, gen, device):
    check(GenCase(mode=TARGET_VERIFY, sets=k, bs=3, width=40, layout=None), gen, device)


def test_one_misaligned_set_among_aligned(gen, device):
    """One misaligned page_table_1 puts every set on the 4-byte store path."""
    case = GenCase(sets=4, bs=9, width=2100, lens="full", layout="vec")
    inputs, sets, scalars = make_case(case, gen, device)
    sets[2] = make_case(dataclasses.replace(case, sets=1, layout="offset"), gen, device)[1][0]
    want = run(reference.fused_dsa_metadata, inputs, sets, scalars)
    got = run(sgl_meta.fused_dsa_metadata, inputs, sets, scalars)
    assert_sets(got, want, "mixed alignment")


@pytest.mark.parametrize("i", range(40))
def test_random(i, gen, device):
    rng = random.Random(int(torch.randint(0, 2**31, (1,), generator=gen)))
    check(random_case(rng), gen, device)


# --- against a model of what upstream writes (independent of the reference) ---


def _as_lists(inputs, scalars, case):
    r2t = inputs["req_to_token"].cpu()
    ext = inputs["extend_seq_lens"]
    return dict(
        mode=case.mode,
        seq_lens=inputs["seq_lens"].cpu().tolist(),
        req_pool_indices=inputs["req_pool_indices"].cpu().tolist(),
        r2t=r2t.tolist(),
        bs=case.bs,
        max_len=case.width,
        topk=case.topk,
        ps=case.page_size,
        next_n=case.next_n,
        extend=None if ext is None else ext.cpu().tolist(),
        total_len=scalars["total_len"] or 0,
        max_extend_len=case.next_n,
        static=scalars["static_extend_len"],
        has_pt1=case.page_table_1,
        has_paged=case.paged_mqa and case.mode == TARGET_VERIFY,
    )


UPSTREAM_CASES = [
    GenCase(mode=m, bs=bs, width=w, page_size=ps, next_n=nn, total=t, lens=lens, topk=topk, page_table_1=pt1)
    for m in MODES
    for (bs, w, ps, nn, t, lens, topk, pt1) in [
        (5, 300, 4, 3, "sum", "mixed", 16, True),
        (4, 257, 64, 4, "static", "near_width", 2048, True),
        (7, 130, 1, 2, "more", "mixed", 5, True),
        (3, 200, 3, 1, "less", "past", 100, False),
        (6, 129, 128, 4, "zero", "short", 7, True),
    ]
]


@pytest.mark.parametrize("case", UPSTREAM_CASES, ids=lambda c: f"m{c.mode}-bs{c.bs}-w{c.width}-ps{c.page_size}-{c.total}")
def test_matches_upstream_where_upstream_writes(case, gen, device):
    """Every element the op writes equals what 0.5.23's generators write there;
    the only elements upstream writes and the op leaves alone are page-table
    columns past a row's live prefix (the rest of upstream's 128-column block).
    Slots are non-negative here (upstream truncates negative ones; we floor)."""
    inputs, sets, scalars = make_case(case, gen, "cpu")
    inputs["req_to_token"].clamp_(min=0)
    model = upstream_writes(**_as_lists(inputs, scalars, case))
    inputs = {k: (None if v is None else v.to(device)) for k, v in inputs.items()}
    sets = [{k: (None if v is None else v.to(device)) for k, v in d.items()} for d in sets]
    (got,) = run(sgl_meta.fused_dsa_metadata, inputs, sets, scalars)
    (before,) = sets
    width, ps = case.width, case.page_size
    for field in LISTS:
        if got[field] is None or (field == "real_page_table" and ps == 1):
            continue
        g, b = got[field].cpu(), before[field].cpu()
        want = b.clone()
        for idx, v in model[field].items():
            want[idx] = v
        tail = torch.zeros_like(g, dtype=torch.bool)  # upstream's block tails past the live prefix
        if field in ("page_table_1", "real_page_table"):
            step = 1 if field == "page_table_1" else ps
            cols = torch.arange(g.shape[1]) * step
            for row, kv in model["kv_len"].items():
                tail[row] = cols >= min(max(kv, 0), width)
        assert torch.equal(g[~tail], want[~tail]), f"{field}: differs from upstream"
        assert torch.equal(g[tail], b[tail]), f"{field}: written past the live prefix"
    if case.mode == DRAFT_EXTEND and scalars["total_len"] == 0:
        assert torch.equal(got["dsa_cache_seqlens"].cpu(), before["dsa_cache_seqlens"].cpu())


# --- direct statements of the contract (no reference involved) ---


@pytest.mark.parametrize("mode", MODES)
def test_rows_written_over_live_prefix_only(mode, gen, device):
    case = GenCase(mode=mode, bs=6, width=200, page_size=8, lens="mixed", layout=None, padded_rows=False)
    inputs, sets, scalars, got = check(case, gen, device)
    seq = inputs["seq_lens"][: case.bs].cpu().tolist()
    rpi = inputs["req_pool_indices"][: case.bs].cpu().tolist()
    r2t = inputs["req_to_token"].cpu()
    nn = case.next_n
    rows = {DECODE: lambda r: [r], TARGET_VERIFY: lambda r: range(r * nn, (r + 1) * nn)}
    if mode == DRAFT_EXTEND:
        ext = inputs["extend_seq_lens"][: case.bs].cpu().tolist()
        if scalars["static_extend_len"]:
            ext = [ext[0]] * case.bs
        starts = [sum(ext[:r]) for r in range(case.bs)]
        rows[DRAFT_EXTEND] = lambda r: [x for x in range(starts[r], starts[r] + ext[r]) if x < scalars["total_len"]]
    for before, after in zip(sets, got):
        pt, b = after["page_table_1"].cpu(), before["page_table_1"].cpu()
        real, rb = after["real_page_table"].cpu(), before["real_page_table"].cpu()
        written = set()
        for r in range(case.bs):
            live = min(max(seq[r] + (nn if mode == TARGET_VERIFY else 0), 0), case.width)
            pages = -(-live // 8)
            for row in rows[mode](r):
                written.add(row)
                assert torch.equal(pt[row, :live], r2t[rpi[r], :live])
                assert torch.equal(pt[row, live:], b[row, live:]), "columns past the live prefix were written"
                assert torch.equal(real[row, :pages], torch.floor_divide(r2t[rpi[r], : live : 8], 8))
                assert torch.equal(real[row, pages:], rb[row, pages:])
        for row in set(range(pt.shape[0])) - written:
            assert torch.equal(pt[row], b[row]) and torch.equal(real[row], rb[row])


@pytest.mark.parametrize("mode", MODES)
def test_bs0_writes_only_the_zero_entries(mode, gen, device):
    case = GenCase(mode=mode, bs=0, sets=3)
    inputs, sets, scalars, got = check(case, gen, device)
    for before, after in zip(sets, got):
        for name in LISTS:
            if before[name] is None:
                continue
            a, b = after[name].cpu(), before[name].cpu()
            if name in ("cu_seqlens_k", "dsa_cu_seqlens_k"):
                assert a[0] == 0 and torch.equal(a[1:], b[1:])
            else:
                assert torch.equal(a, b), name


def test_draft_extend_total_len_zero_writes_cache_and_cu_only(gen, device):
    inputs, sets, scalars, got = check(GenCase(mode=DRAFT_EXTEND, total="zero", sets=2), gen, device)
    seq = inputs["seq_lens"][:5].to(torch.int32).cpu()
    for before, after in zip(sets, got):
        assert torch.equal(after["cache_seqlens"][:5].cpu(), seq)
        assert torch.equal(after["cu_seqlens_k"][:6].cpu(), torch.cat([seq.new_zeros(1), seq.cumsum(0).int()]))
        assert after["dsa_cu_seqlens_k"][0] == 0
        for name in ("seqlens_expanded", "dsa_cache_seqlens", "page_table_1", "real_page_table"):
            assert torch.equal(after[name].cpu(), before[name].cpu()), name
        assert torch.equal(after["dsa_cu_seqlens_k"][1:].cpu(), before["dsa_cu_seqlens_k"][1:].cpu())


def test_page_size_1_ignores_real_page_table(gen, device):
    """SGLang passes page_table_1 as real_page_table too at page size 1: accepted
    (no overlap error), real_page_table itself is not written."""
    case = GenCase(page_size=1, sets=2, width=50)
    inputs, sets, scalars = make_case(case, gen, device)
    out = clone_sets(sets)
    lists = lists_of(out)
    lists["real_page_table"] = list(lists["page_table_1"])  # the same tensors
    sgl_meta.fused_dsa_metadata(**inputs, **lists, **scalars)
    want = run(reference.fused_dsa_metadata, inputs, [dict(d, real_page_table=None) for d in sets], scalars)
    assert_sets([dict(d, real_page_table=None) for d in out], want, "page size 1")


def test_verify_every_draft_row_gets_the_full_page_row(gen, device):
    """TARGET_VERIFY: rows r*next_n .. r*next_n+next_n-1 all get seq + next_n
    columns, while seqlens_expanded = seq + d + 1 and the 2-D ctx lens seq + next_n."""
    seq = torch.tensor([10, 0, 37], dtype=torch.int64, device=device)
    rpi = torch.tensor([2, 0, 1], dtype=torch.int64, device=device)
    r2t = torch.arange(4 * 64, dtype=torch.int32, device=device).view(4, 64)
    nn, n = 4, 12
    i32 = dict(dtype=torch.int32, device=device)
    cache, cu, exp, dsa, dsa_cu = (torch.full((s,), -9, **i32) for s in (3, 4, n, n, n + 1))
    pt1, real, paged = torch.full((n, 64), -9, **i32), torch.full((n, 16), -9, **i32), torch.full((3, nn), -9, **i32)
    sgl_meta.fused_dsa_target_verify_metadata(seq, rpi, r2t, cache, cu, pt1, exp, dsa, dsa_cu, real, 3, 64, 40, 4, nn,
                                              paged)
    assert cache.tolist() == [14, 4, 41] and cu.tolist() == [0, 14, 18, 59]
    assert exp.tolist() == [11, 12, 13, 14, 1, 2, 3, 4, 38, 39, 40, 41]
    assert dsa.tolist() == [11, 12, 13, 14, 1, 2, 3, 4, 38, 39, 40, 40]
    assert paged.tolist() == [[14] * 4, [4] * 4, [41] * 4]
    for r, (live, req) in enumerate([(14, 2), (4, 0), (41, 1)]):
        for row in range(r * nn, (r + 1) * nn):
            assert pt1[row, :live].tolist() == r2t[req, :live].tolist()
            assert (pt1[row, live:] == -9).all()
            pages = -(-live // 4)
            assert real[row, :pages].tolist() == (r2t[req, : live : 4] // 4).tolist()
            assert (real[row, pages:] == -9).all()


def test_draft_extend_padded_rows_clamp_at_zero(gen, device):
    """Rows whose length is below their extend length get 0, a request with seq 0
    writes no page row, rows past every request take request 0's length."""
    i32 = dict(dtype=torch.int32, device=device)
    seq = torch.tensor([5, 1, 0, 9], device=device)
    ext = torch.tensor([2, 3, 1, 2], device=device)
    rpi = torch.tensor([2, 0, 1, 1], device=device)
    r2t = torch.arange(60, **i32).view(3, 20)
    n = 10
    cache, cu, exp, dsa, dsa_cu = (torch.full((s,), -7, **i32) for s in (4, 5, n, n, n + 1))
    pt1, real = torch.full((n, 12), -7, **i32), torch.full((n, 3), -7, **i32)
    sgl_meta.fused_dsa_draft_extend_metadata(seq, ext, rpi, r2t, cache, cu, pt1, exp, dsa, dsa_cu, real, 4, n, 12, 4,
                                             4, 3, 12)
    assert exp.tolist() == [4, 5, 0, 0, 1, 0, 8, 9, 5, 5]
    assert dsa.tolist() == [4, 4, 0, 0, 1, 0, 4, 4, 4, 4]
    assert dsa_cu.tolist() == [0, 4, 8, 8, 8, 9, 9, 13, 17, 21, 25]
    assert (pt1[5] == -7).all() and (pt1[8:] == -7).all() and (real[5] == -7).all()
    assert pt1[2, :1].tolist() == [0] and (pt1[2, 1:] == -7).all()
    assert pt1[6, :9].tolist() == list(range(20, 29)) and real[6].tolist() == [5, 6, 7]


# --- drop-ins: upstream's exact signatures ---

UPSTREAM_PARAMS = {
    "fused_dsa_decode_metadata": [
        "seq_lens", "req_pool_indices", "req_to_token", "cache_seqlens", "cu_seqlens_k", "page_table_1",
        "dsa_cache_seqlens", "dsa_cu_seqlens_k", "real_page_table", "bs", "max_len", "dsa_index_topk",
        "physical_page_size"],
    "fused_dsa_target_verify_metadata": [
        "seq_lens", "req_pool_indices", "req_to_token", "cache_seqlens", "cu_seqlens_k", "page_table_1",
        "seqlens_expanded", "dsa_cache_seqlens", "dsa_cu_seqlens_k", "real_page_table", "bs", "max_seqlen_k",
        "dsa_index_topk", "physical_page_size", "next_n", "paged_mqa_ctx_lens_2d"],
    "fused_dsa_draft_extend_metadata": [
        "seq_lens", "extend_seq_lens", "req_pool_indices", "req_to_token", "cache_seqlens", "cu_seqlens_k",
        "page_table_1", "seqlens_expanded", "dsa_cache_seqlens", "dsa_cu_seqlens_k", "real_page_table", "bs",
        "total_len", "max_seqlen_k", "dsa_index_topk", "physical_page_size", "max_extend_len", "max_total_len",
        "static_extend_len"],
}
DEFAULTS = {"paged_mqa_ctx_lens_2d": None, "static_extend_len": False}
DROPIN_MODE = {"fused_dsa_decode_metadata": DECODE, "fused_dsa_target_verify_metadata": TARGET_VERIFY,
               "fused_dsa_draft_extend_metadata": DRAFT_EXTEND}


@pytest.mark.parametrize("name", sorted(UPSTREAM_PARAMS))
def test_dropin_signatures_match_upstream(name):
    for fn in (getattr(sgl_meta, name), getattr(reference, name)):
        params = inspect.signature(fn).parameters
        assert list(params) == UPSTREAM_PARAMS[name]
        for p in params.values():
            assert p.kind is p.POSITIONAL_OR_KEYWORD
            assert p.default is (DEFAULTS[p.name] if p.name in DEFAULTS else p.empty)


def dropin_args(name, inputs, d, scalars, case):
    kw = dict(inputs, **d, bs=case.bs, max_len=case.width, max_seqlen_k=case.width, dsa_index_topk=case.topk,
              physical_page_size=case.page_size, next_n=case.next_n, total_len=scalars["total_len"],
              max_extend_len=case.next_n, max_total_len=max(scalars["total_len"] or 0, 1),
              static_extend_len=scalars["static_extend_len"])
    return [kw[p] for p in UPSTREAM_PARAMS[name]]


@pytest.mark.parametrize("opts", ["all", "no_page_table_1", "page_size_1"])
@pytest.mark.parametrize("name", sorted(UPSTREAM_PARAMS))
def test_dropin_matches_reference(name, opts, gen, device):
    mode = DROPIN_MODE[name]
    case = GenCase(mode=mode, bs=6, width=90, layout=None, page_table_1=opts != "no_page_table_1",
                   page_size=1 if opts == "page_size_1" else 4, total="static" if mode == DRAFT_EXTEND else "sum")
    inputs, sets, scalars = make_case(case, gen, device)
    (out,) = clone_sets(sets)
    if opts == "page_size_1":  # SGLang's convention: the same tensor for both tables
        out["real_page_table"] = out["page_table_1"]
    getattr(sgl_meta, name)(*dropin_args(name, inputs, out, scalars, case))
    (want,) = clone_sets(sets)
    if opts == "page_size_1":
        want["real_page_table"] = want["page_table_1"]
    getattr(reference, name)(*dropin_args(name, inputs, want, scalars, case))
    assert_same(out, want, name)
    ref_general = run(reference.fused_dsa_metadata, inputs, sets, scalars)[0]
    if opts != "page_size_1":
        assert_same(out, ref_general, f"{name} vs the general reference")


@pytest.mark.parametrize(
    "change, message",
    [
        (dict(total_len=13, max_total_len=12), "total_len = 13 must be <= max_total_len = 12"),
        (dict(max_extend_len=0), "max_extend_len must be >= 1, got 0"),
        (dict(total_len=12, max_total_len=40, max_extend_len=1), "must be <= bs * max_extend_len = 6"),
    ],
)
def test_dropin_draft_extend_keeps_upstream_asserts(change, message, gen):
    case = GenCase(mode=DRAFT_EXTEND, bs=6, total="static")
    inputs, (d,), scalars = make_case(case, gen, "cpu")
    args = dict(zip(UPSTREAM_PARAMS["fused_dsa_draft_extend_metadata"],
                    dropin_args("fused_dsa_draft_extend_metadata", inputs, d, scalars, case)))
    args.update(change)
    with pytest.raises(ValueError, match="sgl_meta.fused_dsa_draft_extend_metadata: ") as err:
        sgl_meta.fused_dsa_draft_extend_metadata(**args)
    assert message in str(err.value)


# --- torch.library / torch.compile / CUDA graphs ---


def positional(inputs, lists, scalars):
    kw = {**inputs, **{k: ([] if v is None else v) for k, v in lists.items()}, **scalars}
    kw["next_n"] = -1 if kw["next_n"] is None else kw["next_n"]
    kw["total_len"] = -1 if kw["total_len"] is None else kw["total_len"]
    return tuple(kw[a.name] for a in OP._schema.arguments)


@pytest.mark.parametrize("optionals", ["all", "none"])
@pytest.mark.parametrize("mode", MODES)
def test_opcheck(mode, optionals, gen, device):
    on = optionals == "all"
    case = GenCase(mode=mode, sets=2, layout=None, page_table_1=on, real_page_table=on, paged_mqa=on)
    inputs, sets, scalars = make_case(case, gen, device)
    torch.library.opcheck(OP, positional(inputs, lists_of(sets), scalars))


@pytest.mark.parametrize("mode", MODES)
def test_torch_compile_fullgraph(mode, gen, device):
    inputs, sets, scalars = make_case(GenCase(mode=mode, sets=3), gen, device)
    want = run(reference.fused_dsa_metadata, inputs, sets, scalars)

    @torch.compile(fullgraph=True, dynamic=False)
    def refresh(**kw):
        sgl_meta.fused_dsa_metadata(**kw)

    torch._dynamo.reset()
    got = run(refresh, inputs, sets, scalars)
    assert_sets(got, want, "torch.compile")


def test_torch_compile_fullgraph_dropin(gen, device):
    name = "fused_dsa_target_verify_metadata"
    case = GenCase(mode=TARGET_VERIFY)
    inputs, sets, scalars = make_case(case, gen, device)
    want = run(reference.fused_dsa_metadata, inputs, sets, scalars)
    (out,) = clone_sets(sets)
    torch._dynamo.reset()
    torch.compile(getattr(sgl_meta, name), fullgraph=True, dynamic=False)(*dropin_args(name, inputs, out, scalars, case))
    assert_sets([out], want, "torch.compile drop-in")


def test_fake_cuda_tracing_without_gpu(gen):
    """The CUDA schema path traces with fake CUDA tensors (no GPU needed)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    inputs, sets, scalars = make_case(GenCase(mode=DRAFT_EXTEND, sets=2), gen, "cpu")
    flat = {**inputs, **{f"{k}#{i}": v for i, d in enumerate(sets) for k, v in d.items()}}
    names = [k for k, v in flat.items() if v is not None]
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fake = [mode.from_tensor(flat[k]).to("cuda") for k in names]

        def fn(*tensors):
            got = dict.fromkeys(flat)
            got.update(zip(names, tensors))
            ins = {k: got[k] for k in inputs}
            dsets = [{k: got[f"{k}#{i}"] for k in LISTS} for i in range(2)]
            sgl_meta.fused_dsa_metadata(**ins, **lists_of(dsets), **scalars)
            return tensors

        gm = make_fx(fn, tracing_mode="fake")(*fake)
    assert OP in [n.target for n in gm.graph.nodes if n.op == "call_function"]


def _refill_inputs(inputs, case, gen):
    """New device values in the captured input buffers (same shapes)."""
    fresh, _, _ = make_case(case, gen, "cpu")
    for k, v in inputs.items():
        if v is not None:
            v.copy_(fresh[k].to(v.device) if fresh[k].shape == v.shape else v)


@pytest.mark.gpu
@pytest.mark.parametrize("impl", ["fused", "reference"])
@pytest.mark.parametrize("mode", MODES)
def test_cuda_graph_capture_and_replay(mode, impl, gen):
    if impl == "reference" and os.environ.get("PYTORCH_NO_CUDA_MEMORY_CACHING") == "1":
        # The eager reference allocates; without the caching allocator (as under
        # scripts/sanitize.sh) every allocation is a cudaMalloc, which a capturing
        # stream does not permit. The fused op allocates nothing and still runs.
        pytest.skip("the eager reference allocates: not capturable with PYTORCH_NO_CUDA_MEMORY_CACHING=1")
    case = GenCase(mode=mode, bs=16, sets=3, width=4096, page_size=64, topk=2048, next_n=4, pool=40,
                   total="static" if mode == DRAFT_EXTEND else "sum")
    inputs, sets, scalars = make_case(case, gen, TEST_CUDA)
    static_out = clone_sets(sets)
    fn = sgl_meta.fused_dsa_metadata if impl == "fused" else reference.fused_dsa_metadata
    graph = capture_cuda_graph(lambda: fn(**inputs, **lists_of(static_out), **scalars))
    for _ in range(3):  # new lengths, indices and slots; new poison in the outputs
        _refill_inputs(inputs, case, gen)
        for d in static_out:
            for v in d.values():
                if v is not None:
                    poison_(v, gen)
        before = clone_sets(static_out)
        graph.replay()
        torch.cuda.synchronize()
        want = run(reference.fused_dsa_metadata, inputs, before, scalars)
        assert_sets(static_out, want, f"CUDA graph replay ({impl})")


@pytest.mark.gpu
def test_runs_on_the_tensors_device_not_the_current_one(gen):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    case = GenCase(mode=TARGET_VERIFY, sets=2)
    inputs, sets, scalars = make_case(case, gen, "cuda:1")
    want = run(reference.fused_dsa_metadata, inputs, sets, scalars)
    with torch.cuda.device(0):
        got = run(sgl_meta.fused_dsa_metadata, inputs, sets, scalars)
    assert_sets(got, want, "cuda:1")


# --- the drop-ins at SGLang's own test shapes: a 16K-request batch one column wide, and
# --- rows a million columns wide (expected values written out here, not the reference) ---


def _dsa_call(mode, seq, ext, rpi, r2t, width, topk, ps, next_n, gen, device):
    """One drop-in call on poisoned outputs; returns (outputs, their poisoned copies,
    the per-row kv lengths, the expanded lengths written, the rows' requests)."""
    bs = len(seq)
    i64 = dict(dtype=torch.int64, device=device)
    seq_t, rpi_t = torch.tensor(seq, **i64), torch.tensor(rpi, **i64)
    if mode == DECODE:
        n, kv, req, expanded = bs, list(seq), list(rpi), None
    elif mode == TARGET_VERIFY:
        n = bs * next_n
        kv = [s + next_n for s in seq for _ in range(next_n)]
        req = [r for r in rpi for _ in range(next_n)]
        expanded = [s + d + 1 for s in seq for d in range(next_n)]
    else:
        n = sum(ext)
        kv = [s for s, e in zip(seq, ext) for _ in range(e)]
        req = [r for r, e in zip(rpi, ext) for _ in range(e)]
        expanded = [max(s - e + d + 1, 0) for s, e in zip(seq, ext) for d in range(e)]
    real_cols = -(-width // ps)

    def out(*shape):
        return poison_(torch.empty(shape, dtype=torch.int32, device=device), gen)

    o = dict(cache_seqlens=out(bs), cu_seqlens_k=out(bs + 1), dsa_cache_seqlens=out(n), dsa_cu_seqlens_k=out(n + 1),
             page_table_1=out(n, width))
    o["real_page_table"] = o["page_table_1"] if ps == 1 else out(n, real_cols)
    if mode != DECODE:
        o["seqlens_expanded"] = out(n)
    if mode == TARGET_VERIFY:
        o["paged_mqa_ctx_lens_2d"] = out(bs, next_n)
    before = {k: v.clone() for k, v in o.items()}
    common = dict(seq_lens=seq_t, req_pool_indices=rpi_t, req_to_token=r2t, dsa_index_topk=topk,
                  physical_page_size=ps, bs=bs)
    if mode == DECODE:
        sgl_meta.fused_dsa_decode_metadata(**common, **{k: o[k] for k in (
            "cache_seqlens", "cu_seqlens_k", "page_table_1", "dsa_cache_seqlens", "dsa_cu_seqlens_k",
            "real_page_table")}, max_len=width)
    elif mode == TARGET_VERIFY:
        sgl_meta.fused_dsa_target_verify_metadata(**common, **o, max_seqlen_k=width, next_n=next_n)
    else:
        sgl_meta.fused_dsa_draft_extend_metadata(
            **common, **{k: o[k] for k in o}, extend_seq_lens=torch.tensor(ext, dtype=torch.int32, device=device),
            total_len=n, max_seqlen_k=width, max_extend_len=max(ext, default=1), max_total_len=n,
            static_extend_len=len(set(ext)) <= 1)
    return o, before, kv, expanded, req


def _check_dsa(o, before, kv, expanded, req, seq, r2t, width, topk, ps, next_n, mode):
    cache = [s + next_n for s in seq] if mode == TARGET_VERIFY else list(seq)
    lens = expanded if mode != DECODE else cache
    dsa = [min(v, topk) for v in lens]
    cpu = {k: v.cpu() for k, v in o.items()}
    assert cpu["cache_seqlens"].tolist() == cache
    assert cpu["cu_seqlens_k"].tolist() == [0] + torch.tensor(cache).cumsum(0).tolist()
    assert cpu["dsa_cache_seqlens"].tolist() == dsa
    assert cpu["dsa_cu_seqlens_k"].tolist() == [0] + torch.tensor(dsa, dtype=torch.int64).cumsum(0).tolist()
    if mode != DECODE:
        assert cpu["seqlens_expanded"].tolist() == expanded
    if mode == TARGET_VERIFY:
        assert cpu["paged_mqa_ctx_lens_2d"].tolist() == [[c] * next_n for c in cache]
    r2t = r2t.cpu()
    pt1, pt1_before = cpu["page_table_1"], before["page_table_1"].cpu()
    live = torch.tensor([min(k, width) for k in kv], dtype=torch.int64)
    cols = torch.arange(width)
    mask = cols[None, :] < live[:, None]
    want = r2t[torch.tensor(req, dtype=torch.int64)][:, :width]
    assert torch.equal(pt1[mask], want[mask]), "page_table_1: live prefix"
    assert torch.equal(pt1[~mask], pt1_before[~mask]), "page_table_1: written past the live prefix"
    if ps > 1:
        real, real_before = cpu["real_page_table"], before["real_page_table"].cpu()
        rmask = (torch.arange(real.shape[1]) * ps)[None, :] < live[:, None]
        rwant = torch.div(want[:, ::ps], ps, rounding_mode="floor")
        assert torch.equal(real[rmask], rwant[rmask]), "real_page_table: live pages"
        assert torch.equal(real[~rmask], real_before[~rmask]), "real_page_table: written past the live pages"


@pytest.mark.parametrize("mode", MODES)
def test_dropins_sixteen_thousand_requests_one_column_wide(mode, gen, device):
    """16384 requests (lengths 1 .. 257) over a req_to_token one column wide, page size 1
    (real_page_table is page_table_1), one draft token / one extend token per request:
    every row writes column 0 only, the lengths and both prefix sums run past one scan tile."""
    bs, topk, next_n = 16 * 1024, 64, 1
    seq = [i % 257 + 1 for i in range(bs)]
    first = {DECODE: 0, TARGET_VERIFY: 1, DRAFT_EXTEND: 2}[mode]
    step = 2 if mode == DECODE else 1
    rpi = [first + step * i for i in range(bs)]
    pool = 2 * (bs + 4)
    r2t = (torch.arange(pool, dtype=torch.int32) * 18).view(pool, 1).to(device)
    ext = [1] * bs if mode == DRAFT_EXTEND else None
    o, before, kv, expanded, req = _dsa_call(mode, seq, ext, rpi, r2t, 1, topk, 1, next_n, gen, device)
    _check_dsa(o, before, kv, expanded, req, seq, r2t, 1, topk, 1, next_n, mode)


@pytest.mark.parametrize("mode", MODES)
def test_dropins_rows_a_million_columns_wide(mode, gen, device):
    """max_seqlen_k 1_000_003, lengths near a million, top-k 4096, physical page 64."""
    width, topk, ps = 1_000_003, 4096, 64
    seq = [1_000_000, 999_983] if mode == DECODE else [1_000_000]
    next_n = 2
    ext = [4] if mode == DRAFT_EXTEND else None
    rpi = [1, 0] if mode == DECODE else [1]
    r2t = torch.arange(2 * width, dtype=torch.int32).view(2, width)
    r2t[1] += 17
    o, before, kv, expanded, req = _dsa_call(mode, seq, ext, rpi, r2t.to(device), width, topk, ps, next_n, gen,
                                             device)
    _check_dsa(o, before, kv, expanded, req, seq, r2t, width, topk, ps, next_n, mode)
