"""Hypothesis strategies: valid calls of update_flash_attention_metadata,
flash_attention_swa_spec_page_table, flash_attention_verify_expand and
flash_attention_draft_decode_topk
(docs/operators/flash_attention_metadata.md), their bad-input rows and hostile
values.

Space: K = 1..3 destination sets with their own seq_len_delta (int32 extremes
included); bs 0 / 1 / odd / past one scan pass (128 rows); power-of-two page
sizes 1 .. 128; max_seq_pages 0 .. 12 and across the CUDA 128-column chunk;
req_to_token padded, row-aliased or with overlapping rows; slots with -1 and
other negative sentinels; full_v2p / swa_v2p tables (int32 or int64) with
unbound (-1) and other negative entries; a token-slot SWA mapping (int32 or
int64) with negative entries; decode (delta per set, zero_tail,
skip_page_table) and draft extend (cu_seqlens_q, swa_out_cache_loc with
negative out_cache_loc); lengths <= 0, past the table, int64 extremes;
outputs as views into poisoned buffers. The SWA concat: repeat 1..4, widths
across the 256-column CUDA chunk, dst narrower or wider than A + B, lengths
past the tables and hostile ones. The verify expand: bs 0 .. 9 and past a
128-row pass, 1 .. 9 / 33 / 64 draft tokens, lengths from 0 to the row's end,
mask entries all, none or half set, mask_rows below, at and past the rows,
a mask longer than read. The top-k draft decode: K = 1 .. 4 steps of any decode
lengths, bs 0 .. 9 and past a 128-row pass, top-k 1 .. 5, page sizes 1 .. 128,
prefix tables across the 128-column chunk, lengths from 0 past whole pages, draft
slots in runs (pages repeat) with jumps and negative sentinels, expand lengths
given or not.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

import sgl_meta
from sgl_meta import reference
from row_kit import Row, apply, at, both, hostile, set_, to_device
from st_trtllm_mha_metadata import I32_MAX, _index_input, _out_1d, _out_2d, _randint, _req_to_token, _sprinkle
from tensor_case import Case, garbage, strided

OP = "update_flash_attention_metadata"
SPEC = "flash_attention_swa_spec_page_table"
EXPAND = "flash_attention_verify_expand"
DRAFT = "flash_attention_draft_decode_topk"
DECODE, DRAFT_EXTEND = "normal_decode_set_metadata", "draft_extend_set_metadata"
NAME = "flash_attention_metadata"


def _table(draw, gen, n: int):
    """A virtual -> physical page table (int32 or int64) with negative entries."""
    values = _randint(gen, 0, draw(st.sampled_from([n + 5, 2**20, I32_MAX])), n, torch.int64)
    values = _sprinkle(gen, values, draw(st.sampled_from([0.0, 0.2])), lambda k: torch.full((k,), -1))
    values = _sprinkle(gen, values, draw(st.sampled_from([0.0, 0.1])), lambda k: _randint(gen, -(2**30), 0, k,
                                                                                           torch.int64))
    dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    return strided(values.to(dtype), gen, lead=draw(st.integers(0, 2)), tail=draw(st.integers(0, 2)))


@st.composite
def cases(draw) -> Case:
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1)))
    k_sets = draw(st.sampled_from([1, 1, 2, 3]))
    bs = draw(st.one_of(st.integers(0, 9), st.sampled_from([31, 33, 127, 129, 300])))
    page_size = draw(st.sampled_from([1, 2, 4, 16, 64, 128]))
    max_seq_pages = draw(st.integers(0, 12)) if bs > 9 else draw(
        st.one_of(st.integers(0, 12), st.sampled_from([127, 128, 129, 300])))
    ctx = max(max_seq_pages - 1, 0) * page_size + 1 + draw(st.integers(0, 2 * page_size))
    pool = draw(st.integers(1, 6))
    mode = draw(st.sampled_from(["decode", "decode", "draft_extend"]))
    swa = draw(st.sampled_from(["none", "mapping", "v2p"] if mode == "decode" else ["none", "mapping"]))
    full_v2p = mode == "decode" and draw(st.booleans())
    slot_hi = draw(st.sampled_from([pool * ctx + 1, 50_000]))
    neg_frac = draw(st.sampled_from([0.0, 0.1, 0.5]))

    def slots_fn(n):
        v = _randint(gen, 0, slot_hi, n, torch.int32)
        v = _sprinkle(gen, v, neg_frac / 2, lambda k: _randint(gen, -(2**31), 0, k, torch.int32))
        return _sprinkle(gen, v, neg_frac / 2, lambda k: torch.full((k,), -1))

    req_to_token, layout = _req_to_token(draw, gen, pool, ctx, slots_fn)
    idx_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    len_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    req_pool_indices = _index_input(draw, gen, _randint(gen, 0, pool, bs, torch.int64), idx_dtype)

    regime = draw(st.sampled_from(["live", "live", "live", "negative", "past", "extreme"]))
    live_hi = (max_seq_pages + 1) * page_size + 1
    if regime == "live":
        lens = _randint(gen, 0, live_hi, bs, torch.int64)
    elif regime == "negative":
        lens = _randint(gen, -20, 10, bs, torch.int64)
    elif regime == "past":
        lens = _randint(gen, live_hi, 3 * live_hi, bs, torch.int64)
    else:
        hi = 2**62 if len_dtype == torch.int64 else I32_MAX
        lens = _randint(gen, -hi, hi, bs, torch.int64)
    seq_lens = _index_input(draw, gen, lens, len_dtype)
    deltas = [0] * k_sets if mode == "draft_extend" else [
        draw(st.one_of(st.integers(-3, 8), st.sampled_from([-(2**31), I32_MAX]))) if draw(st.integers(0, 9)) == 0
        else draw(st.integers(0, 5)) for _ in range(k_sets)]

    skip = mode == "decode" and draw(st.integers(0, 4)) == 0
    zero_tail = mode == "decode" and draw(st.booleans())
    # Lengths-only sets past len(page_table) and calls without prefix sums (TRT-LLM MLA's forms).
    tables = k_sets if skip or draw(st.integers(0, 3)) else draw(st.integers(1, k_sets))
    sums = mode == "draft_extend" or draw(st.integers(0, 3)) > 0
    args = dict(
        cache_seqlens=[_out_1d(draw, gen, bs, torch.int32) for _ in range(k_sets)],
        cu_seqlens_k=[_out_1d(draw, gen, bs + 1, torch.int32) for _ in range(k_sets)] if sums else [],
        page_table=[] if skip and draw(st.booleans()) else [_out_2d(draw, gen, bs, max_seq_pages)
                                                            for _ in range(tables)],
        swa_page_table=[_out_2d(draw, gen, bs, max_seq_pages) for _ in range(tables)] if swa != "none" else None,
        cu_seqlens_q=None, swa_out_cache_loc=None,
        req_to_token=req_to_token, req_pool_indices=req_pool_indices, seq_lens=seq_lens, seq_len_delta=deltas,
        bs=bs, max_seq_pages=max_seq_pages, page_size=page_size, extend_seq_lens=None,
        full_to_swa_index_mapping=None, full_v2p=None, swa_v2p=None, out_cache_loc=None,
        skip_page_table=skip, zero_tail=zero_tail,
    )
    vpages = -(-slot_hi // page_size) + 1
    if full_v2p:
        args["full_v2p"] = _table(draw, gen, vpages)
    if swa == "v2p":
        args["swa_v2p"] = _table(draw, gen, vpages)
    if swa == "mapping":
        mapped = _randint(gen, 0, 4 * slot_hi, slot_hi, torch.int64)
        mapped = _sprinkle(gen, mapped, draw(st.sampled_from([0.0, 0.2])), lambda k: _randint(gen, -300, 0, k,
                                                                                             torch.int64))
        args["full_to_swa_index_mapping"] = strided(mapped.to(draw(st.sampled_from([torch.int32, torch.int64]))),
                                                    gen, lead=draw(st.integers(0, 2)))
    if mode == "draft_extend":
        ext = _randint(gen, 0, 6, bs, torch.int64) if regime != "extreme" else _randint(gen, -5, I32_MAX, bs,
                                                                                         torch.int64)
        args["extend_seq_lens"] = _index_input(draw, gen, ext, idx_dtype)
        args["cu_seqlens_q"] = _out_1d(draw, gen, bs + 1, torch.int32)
        if swa == "mapping" and draw(st.booleans()):
            n = draw(st.integers(0, 2 * bs + 3))
            loc = _sprinkle(gen, _randint(gen, 0, slot_hi, n + draw(st.integers(0, 2)), torch.int64), 0.1,
                            lambda k: torch.full((k,), -1))
            args["out_cache_loc"] = strided(loc, gen, lead=draw(st.integers(0, 2)))
            args["swa_out_cache_loc"] = _out_1d(draw, gen, n, torch.int64)
    extra = dict(k=k_sets, bs=bs, mode=mode, swa=swa, full_v2p=full_v2p, layout=layout, lens=regime,
                 zero_tail=zero_tail, skip=skip, wide=max_seq_pages > 100, tables=tables == k_sets, sums=sums)
    outputs = ("cache_seqlens", "cu_seqlens_k", "page_table", "swa_page_table", "cu_seqlens_q", "swa_out_cache_loc")
    return Case(args, outputs, note=OP, extra=extra)


def events(case: Case) -> list[str]:
    e = case.extra
    return [f"K={e['k']}", f"mode={e['mode']}", f"swa={e['swa']}", f"full_v2p={e['full_v2p']}",
            f"req_to_token={e['layout']}", f"lens={e['lens']}", f"zero_tail={e['zero_tail']}", f"skip={e['skip']}", f"all_tables={e['tables']}", f"sums={e['sums']}",
            "bs=" + ("0" if e["bs"] == 0 else "<=9" if e["bs"] <= 9 else ">9"), f"wide={e['wide']}"]


@st.composite
def spec_cases(draw) -> Case:
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1)))
    bs, repeat = draw(st.integers(0, 5)), draw(st.integers(1, 4))
    rows = bs * repeat
    a_width = draw(st.one_of(st.integers(0, 12), st.sampled_from([255, 256, 300])))
    b_width = draw(st.integers(0, 6))
    dst_width = draw(st.sampled_from([a_width + b_width, max(a_width + b_width - 3, 0), a_width + b_width + 260]))
    regime = draw(st.sampled_from(["inside", "inside", "past", "negative", "extreme"]))
    hi_a, hi_b = (a_width + 1, b_width + 1) if regime == "inside" else (a_width + 40, b_width + 40)
    la, lb = _randint(gen, 0, hi_a, bs, torch.int64), _randint(gen, 0, hi_b, rows, torch.int64)
    if regime == "negative":
        la = _sprinkle(gen, la, 0.3, lambda k: _randint(gen, -5, 0, k, torch.int64))
    if regime == "extreme":
        lb = _sprinkle(gen, lb, 0.3, lambda k: _randint(gen, I32_MAX - 3, 2**40, k, torch.int64))
    dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    args = dict(
        page_table_dst=_out_2d(draw, gen, rows, dst_width),
        page_table_a=strided(garbage(bs * a_width, torch.int32, gen).view(bs, a_width), gen,
                             row_pad=draw(st.integers(0, 2))),
        page_table_b=strided(garbage(rows * b_width, torch.int32, gen).view(rows, b_width), gen,
                             row_pad=draw(st.integers(0, 2))),
        seq_len_a=strided(la.to(dtype), gen, lead=draw(st.integers(0, 2))),
        seq_len_b=strided(lb.clamp(max=I32_MAX if dtype == torch.int32 else 2**62).to(dtype), gen),
        speculative_num_draft_tokens=repeat,
    )
    return Case(args, ("page_table_dst",), note=SPEC, extra=dict(regime=regime, wide=a_width > 200, bs=bs))


def spec_events(case: Case) -> list[str]:
    e = case.extra
    return [f"lens={e['regime']}", f"wide={e['wide']}", "bs=" + ("0" if e["bs"] == 0 else ">0")]


@st.composite
def expand_cases(draw) -> Case:
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1)))
    bs = draw(st.one_of(st.integers(0, 9), st.sampled_from([33, 129])))
    n = draw(st.one_of(st.integers(1, 9), st.sampled_from([33, 64])))
    ctx = n + draw(st.integers(0, 40))
    pool = draw(st.integers(1, 6))
    seq = _randint(gen, 0, ctx - n + 1, bs, torch.int64)
    rows = bs * n
    density = draw(st.sampled_from([0.0, 0.5, 1.0]))
    size = int((seq + n).sum()) * n + draw(st.integers(0, 3)) + (rows == 0)
    mask = torch.rand(size, generator=gen) < density
    dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    args = dict(
        page_table=_out_2d(draw, gen, rows, n + draw(st.integers(0, 2))),
        cache_seqlens=_out_1d(draw, gen, rows, torch.int32),
        cu_seqlens_k=_out_1d(draw, gen, rows + 1, torch.int32),
        custom_mask=strided(mask, gen, lead=draw(st.integers(0, 2)), tail=draw(st.integers(0, 2)),
                            filler=torch.tensor([True])),
        req_to_token=_req_to_token(draw, gen, pool, ctx, lambda k: _randint(gen, -1, 10**6, k, torch.int32))[0],
        req_pool_indices=_index_input(draw, gen, _randint(gen, 0, pool, bs, torch.int64), dtype),
        seq_lens=_index_input(draw, gen, seq, dtype),
        bs=bs, num_draft_tokens=n, mask_rows=draw(st.sampled_from([0, max(rows - 3, 0), rows, rows + 5])),
    )
    return Case(args, ("page_table", "cache_seqlens", "cu_seqlens_k"), note=EXPAND,
                extra=dict(bs=bs, n=n, density=density))


def expand_events(case: Case) -> list[str]:
    e = case.extra
    return ["bs=" + ("0" if e["bs"] == 0 else ">128 rows" if e["bs"] * e["n"] > 128 else ">0"),
            f"draft tokens {'>8' if e['n'] > 8 else '<=8'}", f"mask density={e['density']}"]


@st.composite
def draft_cases(draw) -> Case:
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1)))
    bs = draw(st.one_of(st.integers(0, 9), st.sampled_from([33, 129])))
    topk = draw(st.integers(1, 5))
    steps = draw(st.integers(1, 9))
    decode_length = draw(st.lists(st.integers(1, steps), min_size=1, max_size=4))
    page_size = draw(st.sampled_from([1, 2, 16, 64, 128]))
    max_seq_pages = draw(st.integers(0, 12)) if bs > 9 else draw(st.one_of(st.integers(0, 12),
                                                                          st.sampled_from([128, 129])))
    ctx = max(max_seq_pages - 1, 0) * page_size + 1 + draw(st.integers(0, 2 * page_size))
    pool = draw(st.integers(1, 6))
    seq = _randint(gen, 0, ctx + 2 * page_size, bs, torch.int64)
    rows = bs * topk
    start = _randint(gen, -1, 2**20, rows, torch.int64).view(rows, 1)
    jump = (torch.rand(rows, steps, generator=gen) < 0.3).long() * _randint(gen, 0, 300, rows * steps,
                                                                              torch.int64).view(rows, steps)
    loc = (start + torch.arange(steps) + jump.cumsum(1)).reshape(-1)
    dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    given = draw(st.booleans())
    args = dict(
        cache_seqlens=[_out_1d(draw, gen, bs, torch.int32) for _ in decode_length],
        page_table=[_out_2d(draw, gen, bs, max_seq_pages) for _ in decode_length],
        expand_cache_seqlens=[_out_1d(draw, gen, rows, torch.int32) for _ in decode_length] if given else [],
        expand_page_table=[_out_2d(draw, gen, rows, d + draw(st.integers(0, 2))) for d in decode_length],
        req_to_token=_req_to_token(draw, gen, pool, ctx, lambda k: _randint(gen, -1, 10**6, k, torch.int32))[0],
        req_pool_indices=_index_input(draw, gen, _randint(gen, 0, pool, bs, torch.int64), dtype),
        seq_lens=_index_input(draw, gen, seq, dtype),
        out_cache_loc=_index_input(draw, gen, loc, dtype),
        bs=bs, topk=topk, num_steps=steps, decode_length=decode_length, page_size=page_size,
        max_seq_pages=max_seq_pages,
    )
    return Case(args, ("cache_seqlens", "page_table", "expand_cache_seqlens", "expand_page_table"), note=DRAFT,
                extra=dict(bs=bs, topk=topk, page_size=page_size))


def draft_events(case: Case) -> list[str]:
    e = case.extra
    return ["bs=" + ("0" if e["bs"] == 0 else ">128 rows" if e["bs"] * e["topk"] > 128 else ">0"),
            "page_size=" + ("1" if e["page_size"] == 1 else ">1")]


ENTRIES = [
    dict(name=OP, op=sgl_meta.update_flash_attention_metadata, ref=reference.update_flash_attention_metadata,
         cases=cases, events=events, weight=0.3),
    dict(name=SPEC, op=sgl_meta.flash_attention_swa_spec_page_table,
         ref=reference.flash_attention_swa_spec_page_table, cases=spec_cases, events=spec_events, weight=0.15),
    dict(name=EXPAND, op=sgl_meta.flash_attention_verify_expand, ref=reference.flash_attention_verify_expand,
         cases=expand_cases, events=expand_events, weight=0.15),
    dict(name=DRAFT, op=sgl_meta.flash_attention_draft_decode_topk, ref=reference.flash_attention_draft_decode_topk,
         cases=draft_cases, events=draft_events, weight=0.15),
]


# ---- bad-input rows (bad_input_table.py) -----------------------------------------
def _decode_base(gen, device, page_size=8, max_seq_pages=5):
    from flash_attention_metadata_cases import FaCase, decode_call  # tests/ (the shared case maker)

    return decode_call(FaCase(bs=4, pool=6, page_size=page_size, max_seq_pages=max_seq_pages, swa="mapping", delta=2,
                              zero_tail=True), gen, device)


def _draft_extend_base(gen, device):
    from flash_attention_metadata_cases import FaCase, draft_extend_call

    return draft_extend_call(FaCase(bs=4, pool=6, page_size=8, max_seq_pages=5, swa="mapping"), gen, device)


def _op_base(gen, device, page_size=8, max_seq_pages=5):
    kw = _decode_base(gen, device, page_size, max_seq_pages)
    de = _draft_extend_base(gen, device)
    return dict(
        cache_seqlens=[kw["cache_seqlens_int32"], kw["cache_seqlens_int32"].clone()],
        cu_seqlens_k=[kw["cu_seqlens_k"], kw["cu_seqlens_k"].clone()],
        page_table=[kw["page_table"], kw["page_table"].clone()],
        swa_page_table=[kw["swa_page_table"], kw["swa_page_table"].clone()],
        cu_seqlens_q=de["cu_seqlens_q"], swa_out_cache_loc=de["swa_out_cache_loc"],
        req_to_token=kw["req_to_token"], req_pool_indices=kw["req_pool_indices"], seq_lens=kw["seq_lens"],
        seq_len_delta=[1, 2], bs=4, max_seq_pages=max_seq_pages, page_size=page_size,
        extend_seq_lens=de["extend_seq_lens"],
        full_to_swa_index_mapping=kw["full_to_swa_index_mapping"], out_cache_loc=de["out_cache_loc"],
        zero_tail=True,
    )


def _spec_base(gen, device):
    from flash_attention_metadata_cases import swa_spec_call

    return swa_spec_call(gen, device=device)


def _expand_base(gen, device):
    from flash_attention_metadata_cases import verify_expand_call

    return verify_expand_call(gen, device=device)


def _draft_base(gen, device, **shape):
    from flash_attention_metadata_cases import draft_topk_call

    return draft_topk_call(gen, device=device, **shape)


# The CUDA kernels' looping page blocks: past 4,096 blocks of 128 columns, here 4 rows
# (3 requests) at page size 1 over WIDE_PAGES columns, the base call rebuilt so.
WIDE_PAGES = 1400 * 128 + 1


def _wide_op(kw):
    kw.update(_op_base(torch.Generator().manual_seed(0), kw["seq_lens"].device, 1, WIDE_PAGES))


def _wide_draft(kw):
    kw.update(_draft_base(torch.Generator().manual_seed(0), kw["seq_lens"].device, page_size=1,
                          max_seq_pages=WIDE_PAGES))


BAD_INPUT_BASES = {OP: _op_base, SPEC: _spec_base, EXPAND: _expand_base, DRAFT: _draft_base, DECODE: _decode_base, DRAFT_EXTEND: _draft_extend_base,
                   "prepare_swa_spec_page_table_triton": _spec_base}


def _r(op, id, edit, *names, **kw):
    return Row(id=f"{op}/{id}", op=op, edit=edit, names=names, **kw)


BAD_INPUT_ROWS = [
    _r(OP, "page_size 24 (not a power of two)", set_(page_size=24), "page_size must be a power of two, got 24"),
    _r(OP, "page_size 0", set_(page_size=0), "page_size must be a power of two, got 0"),
    _r(OP, "seq_len_delta past int32", set_(seq_len_delta=[1, 2**31]), "seq_len_delta[1] = 2147483648 is outside"),
    _r(OP, "seq_len_delta one short", set_(seq_len_delta=[1]), "seq_len_delta must hold 2 values"),
    _r(OP, "cu_seqlens_k one short", apply("cu_seqlens_k", lambda l: l[:1]), "cu_seqlens_k must hold 2 tensors"),
    _r(OP, "page_table one past the sets", apply("page_table", lambda l: l + [l[0].clone()]),
       "page_table must hold at most 2 tensors"),
    _r(OP, "swa_page_table not one per page_table", apply("swa_page_table", lambda l: l[:1]),
       "swa_page_table must hold 2 tensors (one per page_table) or none, got 1"),
    _r(OP, "page_table[1] narrow", apply("page_table", lambda l: [l[0], l[1][:, :4]]),
       "page_table[1].size(1) must be >= max_seq_pages = 5, got 4"),
    _r(OP, "page_table[0] rows overlap", apply("page_table", lambda l: [l[0][:1].expand(4, -1), l[1]]),
       "page_table[0] rows overlap"),
    _r(OP, "page tables alias", apply("page_table", lambda l: [l[0], l[0]]), "page_table[0] and page_table[1] overlap"),
    _r(OP, "page_table aliases req_to_token", lambda kw: kw.update(page_table=[kw["req_to_token"][:4, :5],
                                                                              kw["page_table"][1]]),
       "overlap in memory"),
    _r(OP, "page_table empty without skip", set_(page_table=[]), "page_table is required unless skip_page_table"),
    _r(OP, "swa_page_table without a mapping", set_(full_to_swa_index_mapping=None, swa_out_cache_loc=None),
       "swa_page_table needs full_to_swa_index_mapping or swa_v2p"),
    _r(OP, "cu_seqlens_q without extend_seq_lens", set_(extend_seq_lens=None),
       "cu_seqlens_q and extend_seq_lens must be given together"),
    _r(OP, "swa_out_cache_loc without out_cache_loc", set_(out_cache_loc=None), "swa_out_cache_loc needs out_cache_loc"),
    _r(OP, "out_cache_loc shorter than swa_out_cache_loc", apply("out_cache_loc", lambda t: t[:3]),
       "out_cache_loc.size(0) must be >= swa_out_cache_loc.size(0) = 8, got 3"),
    _r(OP, "max_seq_pages past the req_to_token row", set_(max_seq_pages=6),
       "max_seq_pages = 6 pages of page_size = 8 need req_to_token.size(1) > (max_seq_pages - 1) * page_size"),
    _r(OP, "full_v2p empty", lambda kw: kw.update(full_v2p=kw["seq_lens"][:0].long()), "full_v2p.size(0) must be >= 1, got 0"),
    _r(OP, "negative bs", set_(bs=-1), "bs must be >= 0, got -1"),
    _r(OP, "seq_lens on meta", to_device("meta", "seq_lens"), "seq_lens", "meta"),
    _r(OP, "seq_lens on cuda, rest on cpu", to_device("cuda", "seq_lens"), "seq_lens is on cuda", needs="cuda"),
    _r(SPEC, "seq_len_b not bs * R", apply("seq_len_b", lambda t: t[:-1]),
       "seq_len_b.numel() = 11 must be seq_len_a.numel() * speculative_num_draft_tokens = 3 * 4"),
    _r(SPEC, "page_table_dst few rows", apply("page_table_dst", lambda t: t[:5]), "page_table_dst.size(0) must be >="),
    _r(SPEC, "page_table_b int64", apply("page_table_b", lambda t: t.long()), "page_table_b must have dtype int32"),
    _r(SPEC, "dst aliases page_table_b", lambda kw: kw.update(page_table_dst=kw["page_table_b"]),
       "overlap in memory"),
    _r(SPEC, "negative speculative_num_draft_tokens", set_(speculative_num_draft_tokens=-1),
       "speculative_num_draft_tokens must be >= 0"),
    _r(EXPAND, "num_draft_tokens 0", set_(num_draft_tokens=0), "num_draft_tokens = 0 is outside [1, 64]"),
    _r(EXPAND, "num_draft_tokens 65", set_(num_draft_tokens=65), "num_draft_tokens = 65 is outside [1, 64]"),
    _r(EXPAND, "negative mask_rows", set_(mask_rows=-1), "mask_rows must be >= 0, got -1"),
    _r(EXPAND, "custom_mask uint8", apply("custom_mask", lambda t: t.to(torch.uint8)),
       "custom_mask must have dtype bool"),
    _r(EXPAND, "custom_mask 2-D", apply("custom_mask", lambda t: t[:4].view(2, 2)), "custom_mask must be 1-D"),
    _r(EXPAND, "page_table narrower than the draft tokens", apply("page_table", lambda t: t[:, :3]),
       "page_table.size(1) must be >= num_draft_tokens = 4, got 3"),
    _r(EXPAND, "cu_seqlens_k without its leading 0", apply("cu_seqlens_k", lambda t: t[:-1]),
       "cu_seqlens_k.size(0) must be >= bs * num_draft_tokens + 1 = 13, got 12"),
    _r(EXPAND, "seq_lens shorter than bs", apply("seq_lens", lambda t: t[:2]), "seq_lens.size(0) must be >= bs = 3"),
    _r(EXPAND, "page_table aliases req_to_token",
       lambda kw: kw.update(page_table=kw["req_to_token"].view(-1)[:48].view(12, 4)), "overlap in memory"),
    _r(EXPAND, "page_table rows overlap", apply("page_table", lambda t: t[:1].expand(12, -1)), "page_table rows overlap"),
    _r(DRAFT, "no steps", lambda kw: kw.update(decode_length=[], cache_seqlens=[], page_table=[],
                                               expand_cache_seqlens=[], expand_page_table=[]),
       "decode_length must hold 1 to 16 values"),
    _r(DRAFT, "page_table one short", apply("page_table", lambda l: l[:1]), "page_table must hold 2 tensors"),
    _r(DRAFT, "expand_cache_seqlens one short", apply("expand_cache_seqlens", lambda l: l[:1]),
       "expand_cache_seqlens must hold 2 tensors (one per decode_length) or none"),
    _r(DRAFT, "decode_length 0", set_(decode_length=[0, 2]), "decode_length[0] = 0 is outside [1, num_steps = 3]"),
    _r(DRAFT, "decode_length past num_steps", set_(decode_length=[1, 4]),
       "decode_length[1] = 4 is outside [1, num_steps = 3]"),
    _r(DRAFT, "topk 0", set_(topk=0), "topk = 0 is outside [1, 1024]"),
    _r(DRAFT, "num_steps 65", set_(num_steps=65), "num_steps = 65 is outside [1, 64]"),
    _r(DRAFT, "page_size 48", set_(page_size=48), "page_size must be a power of two, got 48"),
    _r(DRAFT, "out_cache_loc short", apply("out_cache_loc", lambda t: t[:-1]),
       "out_cache_loc.size(0) must be >= bs * topk * num_steps = 36, got 35"),
    _r(DRAFT, "expand_page_table narrower than its step", apply("expand_page_table", lambda l: [l[0], l[1][:, :1]]),
       "expand_page_table[1].size(1) must be >= decode_length = 2, got 1"),
    _r(DRAFT, "page_table int64", apply("page_table", lambda l: [l[0], l[1].long()]),
       "page_table[1] must have dtype int32"),
    _r(DRAFT, "max_seq_pages past req_to_token", set_(max_seq_pages=7),
       "max_seq_pages = 7 pages of page_size = 16 need req_to_token.size(1) > (max_seq_pages - 1) * page_size"),
    _r(DRAFT, "two steps share a table", lambda kw: kw["page_table"].__setitem__(1, kw["page_table"][0]),
       "overlap in memory"),
    _r(DRAFT, "expand table aliases out_cache_loc",
       lambda kw: kw.update(out_cache_loc=kw["expand_page_table"][1].view(-1)[:36]), "overlap in memory"),
    _r(DRAFT, "expand_page_table rows overlap", apply("expand_page_table", lambda l: [l[0][:1].expand(12, -1), l[1]]),
       "expand_page_table[0] rows overlap"),
    _r(DECODE, "page_size 48", set_(page_size=48), "normal_decode_set_metadata: page_size must be a power of two"),
    _r(DECODE, "cache_seqlens_int32 int64", apply("cache_seqlens_int32", lambda t: t.long()),
       "cache_seqlens_int32 must have dtype int32"),
    _r(DECODE, "seq_lens shorter than the batch", apply("seq_lens", lambda t: t[:2]),
       "seq_lens.size(0) must be >= cache_seqlens_int32.size(0) = 4, got 2"),
    _r(DECODE, "both SWA mappings", lambda kw: kw.update(swa_v2p=kw["full_to_swa_index_mapping"]),
       "exactly one of full_to_swa_index_mapping", raises=(ValueError,)),
    _r(DECODE, "seq_len_delta float", set_(seq_len_delta=1.0), "seq_len_delta must be an int, got float",
       raises=(TypeError,)),
    _r(DECODE, "seq_len_delta a bool tensor", set_(seq_len_delta=torch.tensor(True)),
       "seq_len_delta must be an int, got a torch.bool Tensor of shape ()", raises=(TypeError,)),
    _r(DECODE, "page_size a bool tensor", set_(page_size=torch.tensor(True)),
       "page_size must be an int, got a torch.bool Tensor of shape ()", raises=(TypeError,)),
    _r(DECODE, "cache_seqlens_int32 None", set_(cache_seqlens_int32=None), "cache_seqlens_int32 must be a Tensor",
       raises=(TypeError,)),
    _r(DECODE, "cu_seqlens_k None: named as the drop-in's argument", set_(cu_seqlens_k=None),
       "normal_decode_set_metadata: cu_seqlens_k must be a Tensor, got NoneType", raises=(TypeError,)),
    _r(DRAFT_EXTEND, "swa_out_cache_loc short", apply("swa_out_cache_loc", lambda t: t[:-1]),
       "swa_out_cache_loc.size(0) = 7 must equal out_cache_loc.size(0) = 8", raises=(ValueError,)),
    _r(DRAFT_EXTEND, "page_table 1-D", apply("page_table", lambda t: t[0]), "page_table must have at least 2",
       raises=(ValueError,)),
    _r(DRAFT_EXTEND, "cu_seqlens_q short", apply("cu_seqlens_q", lambda t: t[:3]),
       "cu_seqlens_q.size(0) must be >= cache_seqlens_int32.size(0) + 1 = 5, got 3"),
]


# ---- hostile rows (hostile_table.py); bases as above ------------------------------
# The ops themselves (not the drop-ins): on CUDA the device message names the op.
HOSTILE_ROWS = [
    hostile(OP, "request index == pool size", at("req_pool_indices", 1, 6), "req_pool_indices[1] = 6 is outside [0, 6)"),
    hostile(OP, "request index -1", at("req_pool_indices", 3, -1), "req_pool_indices[3] = -1 is outside"),
    hostile(OP, "slot past the SWA mapping", lambda kw: kw["req_to_token"].fill_(2**31 - 1),
       "= 2147483647 is outside", "full_to_swa_index_mapping"),
    hostile(OP, "negative slots are sentinels", lambda kw: kw["req_to_token"].fill_(-1), raises=()),
    hostile(OP, "length past int32", at("seq_lens", 2, 2**31 - 1), "seq_lens[2] + seq_len_delta[0] = 2147483648",
       "does not fit int32 cache_seqlens[0]"),
    hostile(OP, "request indices past bs", lambda kw: kw.update(
        req_pool_indices=torch.cat([kw["req_pool_indices"], kw["req_pool_indices"].new_tensor([10**6])])), raises=()),
    hostile(OP, "out_cache_loc past the mapping", lambda kw: kw["out_cache_loc"].__setitem__(
        5, kw["full_to_swa_index_mapping"].numel()), "out_cache_loc[5] =", "is outside"),
    hostile(OP, "negative out_cache_loc is a sentinel", at("out_cache_loc", 2, -1), raises=()),
    hostile(OP, "negative extend length", at("extend_seq_lens", 1, -1), "extend_seq_lens[1] = -1 is negative"),
    hostile(OP, "virtual page past full_v2p", lambda kw: kw.update(full_v2p=kw["seq_lens"].new_zeros(1).long()),
       "outside [0, 1) (full_v2p.numel())"),
    hostile(SPEC, "negative length", at("seq_len_b", 4, -2), "seq_len_b[4] = -2 is negative"),
    hostile(EXPAND, "request index == pool size", at("req_pool_indices", 2, 5), "req_pool_indices[2] = 5 is outside"),
    hostile(EXPAND, "negative length", at("seq_lens", 1, -3), "seq_lens[1] = -3 is negative"),
    hostile(EXPAND, "draft tokens past the req_to_token row", at("seq_lens", 0, 30),
            "seq_lens[0] + num_draft_tokens = 34 is past the req_to_token row"),
    hostile(EXPAND, "mask shorter than its rows", lambda kw: kw.update(custom_mask=kw["custom_mask"][:10]),
            "custom_mask index", "is outside custom_mask [0, 10)"),
    hostile(DRAFT, "request index == pool size", at("req_pool_indices", 2, 5), "req_pool_indices[2] = 5 is outside"),
    hostile(DRAFT, "negative length", at("seq_lens", 1, -3), "seq_lens[1] = -3 is negative"),
    hostile(DRAFT, "length past int32", at("seq_lens", 0, 2**31), "seq_lens[0] = 2147483648 does not fit int32"),
    hostile(DRAFT, "draft page past int32", at("out_cache_loc", 4, 2**40), "out_cache_loc[4] = 1099511627776",
            "expand_page_table entry outside int32"),
    hostile(DRAFT, "negative draft slots divide by floor", at("out_cache_loc", 4, -1), raises=()),
    hostile(DRAFT, "negative prefix slots divide by floor", lambda kw: kw["req_to_token"].fill_(-1), raises=()),
    hostile(EXPAND, "padding rows read entry 0 only", lambda kw: kw.update(custom_mask=kw["custom_mask"][:1],
                                                                         mask_rows=0), raises=()),
    hostile(OP, "wide grid: request index == pool size", both(_wide_op, at("req_pool_indices", 1, 6)),
            "req_pool_indices[1] = 6 is outside [0, 6)"),
    hostile(OP, "wide grid: length past int32", both(_wide_op, at("seq_lens", 2, 2**31 - 1)),
            "seq_lens[2] + seq_len_delta[0] = 2147483648", "does not fit int32 cache_seqlens[0]"),
    hostile(OP, "wide grid: slot past the SWA mapping", both(_wide_op, lambda kw: kw["req_to_token"].fill_(2**31 - 1)),
            "= 2147483647 is outside", "full_to_swa_index_mapping"),
    hostile(OP, "wide grid: virtual page past full_v2p", both(
        _wide_op, lambda kw: kw.update(full_v2p=kw["seq_lens"].new_zeros(1).long())),
        "outside [0, 1) (full_v2p.numel())"),
    hostile(OP, "wide grid: negative slots are sentinels", both(_wide_op, lambda kw: kw["req_to_token"].fill_(-1)),
            raises=()),
    hostile(DRAFT, "wide grid: request index == pool size", both(_wide_draft, at("req_pool_indices", 2, 5)),
            "req_pool_indices[2] = 5 is outside"),
    hostile(DRAFT, "wide grid: negative length", both(_wide_draft, at("seq_lens", 1, -3)),
            "seq_lens[1] = -3 is negative"),
    hostile(DRAFT, "wide grid: negative prefix slots divide by floor",
            both(_wide_draft, lambda kw: kw["req_to_token"].fill_(-1)), raises=()),
]
