"""Hypothesis strategies: valid calls of fused_dsa_metadata (docs/operators/dsa_metadata.md) and its
three drop-ins with upstream's signatures.

Space: every forward mode; bs 0 / 1 / small / across the CUDA tile (1024
requests or rows); K 1..5 destination sets; column bounds across the CUDA unit
(2048 columns) and the real-only unit (1024 pages); page size 1 (the real
table ignored), small, non-powers of two, huge; dsa_index_topk 0 .. int32 max;
lengths live, zero, negative, past the width, and at the int32 / int64
extremes (wrap-around of cache lengths and sums); draft-extend with extend
lengths 0 .. next_n + 1, padded rows (seq below the extend length), total_len
equal to / below / above the extend lengths' sum or 0, static extend length;
int32 / int64 index tensors each on its own, with hostile garbage past bs;
req_to_token padded, offset, with aliased or overlapping rows, negative slots;
every output a view into a poisoned buffer; optional page tables and the 2-D
verify lengths present or not.
"""

from __future__ import annotations

import torch
from hypothesis import assume, strategies as st

import sgl_meta
from sgl_meta import reference
from row_kit import Row, apply, at, set_, to_device
from st_trtllm_mha_metadata import I32_MAX, I32_MIN, _index_input, _out_1d, _out_2d, _randint, _req_to_token
from tensor_case import Case, length_contract_error, outside_views_unchanged

NAME = "fused_dsa_metadata"
LISTS = ("cache_seqlens", "cu_seqlens_k", "seqlens_expanded", "dsa_cache_seqlens", "dsa_cu_seqlens_k",
         "page_table_1", "real_page_table", "paged_mqa_ctx_lens_2d")
I32 = torch.int32


def _lens(draw, gen, n, width, next_n, dtype):
    regime = draw(st.sampled_from(["live", "live", "live", "zero_or_negative", "past", "extreme"]))
    if regime == "live":
        v = _randint(gen, 0, width + next_n + 3, n, torch.int64)
    elif regime == "zero_or_negative":
        v = _randint(gen, -40, 1, n, torch.int64)
    elif regime == "past":
        v = _randint(gen, width, 3 * width + 50, n, torch.int64)
    else:  # int32 wrap-around (and int64 values past int32, truncated like upstream)
        hi = 2**62 if dtype == torch.int64 else I32_MAX
        v = _randint(gen, -hi, hi, n, torch.int64)
        if n:
            v[0] = I32_MAX if dtype == I32 else 2**32 + 5
    return v, regime


@st.composite
def _call(draw, mode=None, k=None, min_bs=0, pages=False):
    """(args of the general op with Strided tensors and lists, facts)."""
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1)))
    mode = draw(st.sampled_from([0, 1, 2])) if mode is None else mode
    k = draw(st.integers(1, 5)) if k is None else k
    bs = max(min_bs, draw(st.one_of(st.integers(0, 9), st.integers(10, 40), st.sampled_from([129, 1025]))))
    wide = draw(st.integers(0, 7)) == 0
    width = draw(st.sampled_from([2047, 2048, 2049, 4100]) if wide else st.integers(0, 14))
    if wide or bs > 40:
        bs, k = min(bs, 3) if wide else bs, min(k, 2)
    if bs > 40:
        width = min(width, 6)
    ps_bucket = draw(st.integers(0, 9))
    page_size = draw(st.sampled_from([1, 2, 4, 64]) if ps_bucket < 5 else st.integers(1, 20) if ps_bucket < 9
                     else st.sampled_from([1000, I32_MAX]))
    topk = draw(st.sampled_from([0, 1, 3, 7, 2048, I32_MAX]))
    next_n = draw(st.integers(1, 5)) if bs <= 40 else draw(st.integers(1, 2))
    pool = draw(st.integers(1, 6))
    ctx = width + draw(st.sampled_from([0, 0, 1, 3]))
    neg = draw(st.sampled_from([0.0, 0.2]))

    def slots_fn(count):
        v = _randint(gen, 0, 1 << 24, count, I32)
        if neg:
            v = torch.where(torch.rand(count, generator=gen) < neg, _randint(gen, I32_MIN, 0, count, I32), v)
        return v

    req_to_token, r2t_layout = _req_to_token(draw, gen, pool, ctx, slots_fn)
    seq_dtype, idx_dtype, ext_dtype = (draw(st.sampled_from([torch.int32, torch.int64])) for _ in range(3))
    seq, regime = _lens(draw, gen, bs, width, next_n, seq_dtype)

    ext = None
    total_len = None
    static = False
    if mode == 2:
        static = draw(st.integers(0, 3)) == 0
        if static:
            e0 = draw(st.integers(0, next_n))
            ext = torch.full((bs,), e0, dtype=torch.int64)
        else:
            ext = _randint(gen, 0, next_n + 2, bs, torch.int64)
            if bs and draw(st.booleans()):  # padded rows: seq below their extend length
                seq = torch.where(torch.rand(bs, generator=gen) < 0.3, _randint(gen, 0, 2, bs, torch.int64), seq)
        s = int(ext.sum())
        total_len = draw(st.sampled_from([s, s, max(s - 2, 0), s + 3, 0]))
        if bs > 40:
            total_len = min(total_len, 60)
    n = bs if mode == 0 else bs * next_n if mode == 1 else (total_len if bs else 0)
    real_cols = -(-width // page_size)

    pt1 = draw(st.booleans()) or pages
    real = draw(st.booleans()) and (page_size > 1 or pt1)
    if pages and page_size == 1:
        pt1 = True
    paged = mode == 1 and draw(st.booleans())

    def per_set(make):
        return [make() for _ in range(k)]

    def out1(size):
        return _out_1d(draw, gen, size, I32)

    args = dict(
        seq_lens=_index_input(draw, gen, seq, seq_dtype),
        req_pool_indices=_index_input(draw, gen, _randint(gen, 0, pool, bs, torch.int64), idx_dtype),
        req_to_token=req_to_token,
        extend_seq_lens=None if ext is None else _index_input(draw, gen, ext, ext_dtype),
        cache_seqlens=per_set(lambda: out1(bs + draw(st.integers(0, 2)))),
        cu_seqlens_k=per_set(lambda: out1(bs + 1 + draw(st.integers(0, 2)))),
        seqlens_expanded=per_set(lambda: out1(n + draw(st.integers(0, 2)))) if mode else None,
        dsa_cache_seqlens=per_set(lambda: out1(n + draw(st.integers(0, 2)))),
        dsa_cu_seqlens_k=per_set(lambda: out1(n + 1 + draw(st.integers(0, 2)))),
        page_table_1=per_set(lambda: _out_2d(draw, gen, n + draw(st.integers(0, 2)), width + draw(st.integers(0, 3))))
        if pt1 else None,
        real_page_table=per_set(lambda: _out_2d(draw, gen, n + draw(st.integers(0, 2)),
                                                real_cols + draw(st.integers(0, 3)))) if real else None,
        paged_mqa_ctx_lens_2d=per_set(lambda: _out_2d(draw, gen, bs + draw(st.integers(0, 2)),
                                                      next_n + draw(st.integers(0, 2)))) if paged else None,
        forward_mode=mode, bs=bs, max_seqlen_k=width, dsa_index_topk=topk, page_size=page_size,
        next_n=next_n if mode == 1 else draw(st.sampled_from([None, 3])),
        total_len=total_len, static_extend_len=static,
    )
    facts = dict(mode=mode, bs=bs, k=k, wide=wide, page_size=page_size, regime=regime, r2t=r2t_layout,
                 pt1=pt1, real=real, paged=paged, static=static,
                 total=("-" if mode != 2 else "0" if not total_len else
                        "sum" if total_len == int(ext.sum()) else "<sum" if total_len < int(ext.sum()) else ">sum"))
    return args, facts


@st.composite
def cases(draw) -> Case:
    args, facts = draw(_call())
    return Case(args, LISTS, note=NAME, extra=facts)


def events(case: Case) -> list[str]:
    e = case.extra
    bs = e["bs"]
    return [f"mode={e['mode']}", f"K={e['k']}", f"lens={e['regime']}", f"req_to_token={e['r2t']}",
            f"page_table_1={e['pt1']}", f"real={e['real']}", f"paged_2d={e['paged']}", f"total={e['total']}",
            f"static={e['static']}", "page_size=" + ("1" if e["page_size"] == 1 else ">1"),
            "bs=" + ("0" if bs == 0 else "1" if bs == 1 else "<=40" if bs <= 40 else ">1024" if bs > 1024 else ">40"),
            f"wide={e['wide']}"]


# ---- the drop-ins: the same calls in upstream's signatures (K = 1) ----------------------
DROPINS = {
    "fused_dsa_decode_metadata": 0,
    "fused_dsa_target_verify_metadata": 1,
    "fused_dsa_draft_extend_metadata": 2,
}


def _dropin_args(name: str, a: dict) -> dict:
    one = {f: (a[f][0] if a[f] else None) for f in LISTS}
    kw = dict(seq_lens=a["seq_lens"], req_pool_indices=a["req_pool_indices"], req_to_token=a["req_to_token"],
              cache_seqlens=one["cache_seqlens"], cu_seqlens_k=one["cu_seqlens_k"], page_table_1=one["page_table_1"],
              dsa_cache_seqlens=one["dsa_cache_seqlens"], dsa_cu_seqlens_k=one["dsa_cu_seqlens_k"],
              real_page_table=one["real_page_table"], bs=a["bs"], dsa_index_topk=a["dsa_index_topk"],
              physical_page_size=a["page_size"])
    if name == "fused_dsa_decode_metadata":
        kw["max_len"] = a["max_seqlen_k"]
        return kw
    kw.update(seqlens_expanded=one["seqlens_expanded"], max_seqlen_k=a["max_seqlen_k"])
    if name == "fused_dsa_target_verify_metadata":
        kw.update(next_n=a["next_n"], paged_mqa_ctx_lens_2d=one["paged_mqa_ctx_lens_2d"])
        return kw
    ext = a["extend_seq_lens"]
    bs, total = a["bs"], a["total_len"]
    live = ext.view(ext.base)[:bs]  # (the tail past bs is hostile garbage)
    max_extend = max(1, int(live.max()) if bs else 1)  # host facts of the case
    kw.update(extend_seq_lens=ext, total_len=total, static_extend_len=a["static_extend_len"],
              max_extend_len=max(max_extend, -(-total // max(bs, 1))), max_total_len=max(total, 1))
    return kw


@st.composite
def dropin_cases(draw, name: str) -> Case:
    args, facts = draw(_call(mode=DROPINS[name], k=1))
    kw = _dropin_args(name, args)
    outs = tuple(f for f in LISTS if f in kw)
    return Case(kw, outs, note=name, extra=facts)


def _entry(name, weight):
    return dict(name=name, op=getattr(sgl_meta, name), ref=getattr(reference, name),
                cases=lambda: dropin_cases(name), events=events, weight=weight)


ENTRIES = [
    dict(name=NAME, op=sgl_meta.fused_dsa_metadata, ref=reference.fused_dsa_metadata, cases=cases, events=events,
         weight=0.3),
    *[_entry(name, 0.05) for name in DROPINS],
]


# ---- hostile values (CPU property; CUDA rows in HOSTILE_ROWS) ---------------------------
@st.composite
def hostile_cases(draw):
    """A valid call writing a page table, with one request index outside
    req_to_token in a row < bs, or (draft-extend) one negative extend length
    the call reads: CPU must raise naming it, with nothing written outside the
    output views (checks run before writing)."""
    kind = draw(st.sampled_from(["request_index", "request_index", "extend_len"]))
    args, facts = draw(_call(mode=2 if kind == "extend_len" else None, min_bs=1, pages=kind == "request_index"))
    if kind == "extend_len" and not args["total_len"]:
        kind = "request_index" if (args["page_table_1"] or args["real_page_table"]) else "none"
    case = Case(args, LISTS, note=NAME, extra=facts)
    # lengths inside the contract: the injected value must be the call's only error
    assume(length_contract_error(case, lambda **kw: reference.fused_dsa_metadata(**kw)) is None)
    if kind == "none":
        return case, kind, None, None
    if kind == "request_index":
        s = args["req_pool_indices"]
        pool = args["req_to_token"].size[0]
        value = draw(st.sampled_from([pool, pool + 7, -1, I32_MIN]))
    else:
        s = args["extend_seq_lens"]
        value = draw(st.sampled_from([-1, -5, I32_MIN]))
    i = 0 if (kind == "extend_len" and args["static_extend_len"]) else draw(st.integers(0, args["bs"] - 1))
    s.view(s.base)[i] = value
    return case, kind, i, value


def check_hostile(hostile) -> str:
    case, kind, i, value = hostile
    kwargs, bases = case.materialize("cpu")
    before = {k: (v.clone() if isinstance(v, torch.Tensor) else [t.clone() for t in v]) for k, v in bases.items()}
    if kind == "none":
        sgl_meta.fused_dsa_metadata(**kwargs)
        return "none"
    arg = "req_pool_indices" if kind == "request_index" else "extend_seq_lens"
    try:
        sgl_meta.fused_dsa_metadata(**kwargs)
    except RuntimeError as err:
        msg = str(err)
        assert msg.startswith(f"sgl_meta.{NAME}: ") and f"{arg}[" in msg and str(value) in msg, msg
    else:
        raise AssertionError(f"no error for {arg}[{i}] = {value}\ncase: {case.describe()}")
    outside_views_unchanged(case, bases, before, f"hostile {arg}")
    # Checks run before writing: the outputs' views are untouched too.
    for name in LISTS:
        for got, want in zip(bases.get(name) or [], before.get(name) or []):
            assert torch.equal(got, want), f"{name} written before the hostile {arg} was rejected"
    return kind


# ---- bad-input rows (bad_input_table.py) ----------------------------------------------
def _base(gen, device):
    """A valid TARGET_VERIFY call, K = 2, every optional output: bs 3, next_n 2,
    width 10, page size 4, pool 4."""
    def v(n):
        return torch.randint(-9, 9, (n,), generator=gen, dtype=I32).to(device)

    def m(r, c):
        return torch.randint(-9, 9, (r, c), generator=gen, dtype=I32).to(device)

    return dict(
        seq_lens=torch.tensor([3, 9, 0], device=device), req_pool_indices=torch.tensor([1, 3, 0], device=device),
        req_to_token=torch.randint(0, 500, (4, 12), generator=gen, dtype=I32).to(device), extend_seq_lens=None,
        cache_seqlens=[v(3), v(3)], cu_seqlens_k=[v(4), v(4)], seqlens_expanded=[v(6), v(6)],
        dsa_cache_seqlens=[v(6), v(6)], dsa_cu_seqlens_k=[v(7), v(7)], page_table_1=[m(6, 10), m(6, 10)],
        real_page_table=[m(6, 3), m(6, 3)], paged_mqa_ctx_lens_2d=[m(3, 2), m(3, 2)],
        forward_mode=1, bs=3, max_seqlen_k=10, dsa_index_topk=5, page_size=4, next_n=2, total_len=None,
        static_extend_len=False,
    )


def _decode_dropin_base(gen, device):
    b = _base(gen, device)
    return dict(seq_lens=b["seq_lens"], req_pool_indices=b["req_pool_indices"], req_to_token=b["req_to_token"],
                cache_seqlens=b["cache_seqlens"][0], cu_seqlens_k=b["cu_seqlens_k"][0],
                page_table_1=b["page_table_1"][0], dsa_cache_seqlens=b["dsa_cache_seqlens"][0],
                dsa_cu_seqlens_k=b["dsa_cu_seqlens_k"][0], real_page_table=b["real_page_table"][0], bs=3,
                max_len=10, dsa_index_topk=5, physical_page_size=4)


DECODE_DROPIN = "fused_dsa_decode_metadata"
BAD_INPUT_BASES = {NAME: _base, DECODE_DROPIN: _decode_dropin_base}


def _r(id, edit, *names, op=NAME, **kw):
    return Row(id=f"{op}/{id}", op=op, edit=edit, names=names, **kw)


def _elem(name, i, fn):
    return apply(name, lambda ts: [fn(t) if j == i else t for j, t in enumerate(ts)])


BAD_INPUT_ROWS = [
    _r("seq_lens float", apply("seq_lens", lambda t: t.float()), "seq_lens", "torch.float32"),
    _r("req_to_token int64", apply("req_to_token", lambda t: t.long()), "req_to_token", "torch.int32"),
    _r("page_table_1[1] int64", _elem("page_table_1", 1, lambda t: t.long()), "page_table_1[1]", "torch.int32"),
    _r("req_to_token 1-D", apply("req_to_token", lambda t: t[0]), "req_to_token", "2-D"),
    _r("seq_lens shorter than bs", apply("seq_lens", lambda t: t[:2]), "seq_lens.size(0) must be >= bs = 3"),
    _r("req_to_token narrower than max_seqlen_k", apply("req_to_token", lambda t: t[:, :9]), "req_to_token.size(1)",
       "max_seqlen_k = 10"),
    _r("dsa_cu_seqlens_k[0] short", _elem("dsa_cu_seqlens_k", 0, lambda t: t[:6]), "dsa_cu_seqlens_k[0]",
       "bs * next_n + 1 = 7"),
    _r("real_page_table[1] narrow", _elem("real_page_table", 1, lambda t: t[:, :2]), "real_page_table[1]",
       "ceil(max_seqlen_k / page_size) = 3"),
    _r("paged_mqa_ctx_lens_2d[0] narrow", _elem("paged_mqa_ctx_lens_2d", 0, lambda t: t[:, :1]),
       "paged_mqa_ctx_lens_2d[0]", "next_n = 2"),
    _r("page_table_1[0] transposed", _elem("page_table_1", 0, lambda t: t.t().contiguous().t()), "page_table_1[0]",
       "inner stride 1"),
    _r("cu_seqlens_k list short", apply("cu_seqlens_k", lambda ts: ts[:1]), "cu_seqlens_k must hold 2 tensors"),
    _r("seqlens_expanded missing in verify", set_(seqlens_expanded=None), "seqlens_expanded must hold 2 tensors"),
    _r("paged_mqa_ctx_lens_2d in decode", set_(forward_mode=0, seqlens_expanded=None), "paged_mqa_ctx_lens_2d",
       "TARGET_VERIFY mode only"),
    _r("two sets share page_table_1", apply("page_table_1", lambda ts: [ts[0], ts[0]]), "page_table_1[0]",
       "page_table_1[1]", "overlap in memory"),
    _r("page_table_1[0] rows overlap", _elem("page_table_1", 0, lambda t: t[:1].expand(6, -1)), "page_table_1[0]",
       "rows overlap"),
    _r("forward_mode 5", set_(forward_mode=5), "forward_mode must be 0"),
    _r("negative bs", set_(bs=-2), "bs must be >= 0"),
    _r("negative dsa_index_topk", set_(dsa_index_topk=-1), "dsa_index_topk"),
    _r("page_size 0", set_(page_size=0), "page_size must be >= 1"),
    _r("next_n 0 in verify", set_(next_n=0), "next_n must be >= 1"),
    _r("max_seqlen_k past int32", set_(max_seqlen_k=2**31), "max_seqlen_k = 2147483648 is outside"),
    _r("draft extend without extend_seq_lens", set_(forward_mode=2, total_len=6, paged_mqa_ctx_lens_2d=None),
       "extend_seq_lens is required"),
    _r("page_table_1 on meta", _elem("page_table_1", 0, lambda t: t.to("meta")), "page_table_1", "meta"),
    _r("seq_lens on cuda, rest on cpu", to_device("cuda", "seq_lens"), "seq_lens is on cuda", needs="cuda"),
    # the decode drop-in (upstream's signature)
    _r("real_page_table narrow", apply("real_page_table", lambda t: t[:, :2]),
       "real_page_table.size(1) must be >= ceil(max_len / physical_page_size) = 3", op=DECODE_DROPIN,
       base=DECODE_DROPIN),
    _r("max_len past req_to_token", set_(max_len=13), "req_to_token.size(1) must be >= max_len = 13",
       op=DECODE_DROPIN, base=DECODE_DROPIN),
    _r("physical_page_size 0", set_(physical_page_size=0), "physical_page_size must be >= 1", op=DECODE_DROPIN,
       base=DECODE_DROPIN),
    _r("cache_seqlens None", set_(cache_seqlens=None), "cache_seqlens must be a Tensor", raises=(TypeError,),
       op=DECODE_DROPIN, base=DECODE_DROPIN),
]

# ---- hostile rows (hostile_table.py; CUDA: a device assert naming the op) -----------------
HOSTILE_ROWS = [
    Row(f"{NAME}/request index == pool size", NAME, at("req_pool_indices", 1, 4),
        ("req_pool_indices[1] = 4 is outside [0, req_to_token.size(0) = 4)",)),
    Row(f"{NAME}/request index -1 in the last row", NAME, at("req_pool_indices", 2, -1),
        ("req_pool_indices[2] = -1 is outside",)),
    Row(f"{NAME}/negative extend length", NAME,
        lambda kw: kw.update(forward_mode=2, total_len=5, paged_mqa_ctx_lens_2d=None,
                             extend_seq_lens=torch.tensor([2, -1, 2], device=kw["seq_lens"].device)),
        ("extend_seq_lens[1] = -1 is negative",)),
    Row(f"{NAME}/request indices past bs", NAME,
        lambda kw: kw.update(req_pool_indices=torch.cat([kw["req_pool_indices"],
                                                          kw["req_pool_indices"].new_tensor([10**6])])),
        (), raises=()),
    # (cache lengths summed to 2**31 - 14: inside the length contract)
    Row(f"{NAME}/lengths far past the width", NAME,
        lambda kw: kw["seq_lens"].copy_(kw["seq_lens"].new_tensor([2**30, 2**30 - 20, 0])), (), raises=()),
    Row(f"{NAME}/negative slots are floored, not errors", NAME, lambda kw: kw["req_to_token"].fill_(-(2**31)),
        (), raises=()),
    Row(f"{NAME}/hostile indices without page tables", NAME,
        lambda kw: kw.update(page_table_1=None, real_page_table=None, req_pool_indices=kw["req_pool_indices"] - 99),
        (), raises=()),
]
