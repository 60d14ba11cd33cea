"""Hypothesis strategy: valid calls of update_trtllm_mha_graph_metadata (docs/operators/trtllm_mha_metadata.md).

Hypothesis draws the structure (sizes, dtypes, layouts, modes, which optional
tensors are given, value regimes) and one seed; the tensor values come from a
torch.Generator with that seed (fast, and the structure still shrinks). The
space covered: bs 0 / 1 / odd / across the CUDA scan tile (128); page sizes
1 .. 300, powers of two and huge ones (2**31 .. 2**63-1); page-table widths
across the CUDA column chunk (256); int32/int64 index tensors, each on its
own; req_to_token padded, offset, row-aliased (stride(0) = 0) or with
overlapping rows; outputs as views into poisoned buffers (lead, row padding,
padding columns, rows past bs); negative and -1 slots; -1 and other negative
SWA mappings; int32 wrap-around of lengths and sums; live_pages_only; every
q_mode; cu_seqlens_q given in Q_MODE_NONE (must stay untouched); index
tensors longer than bs with hostile garbage past bs (must not be read).
"""

from __future__ import annotations

import torch
from hypothesis import assume, strategies as st

import sgl_meta
from sgl_meta import reference
from tensor_case import Case, Strided, garbage, length_contract_error, strided

NAME = "update_trtllm_mha_graph_metadata"
I32_MIN, I32_MAX = -(2**31), 2**31 - 1


op = sgl_meta.update_trtllm_mha_graph_metadata
ref = reference.update_trtllm_mha_graph_metadata


def _randint(gen, lo, hi, n, dtype):
    hi = max(hi, lo + 1)
    return torch.randint(lo, hi, (n,), generator=gen, dtype=torch.int64).to(dtype)


def _sprinkle(gen, t, frac, value_fn):
    """Replaces a random `frac` of t's (1-D) elements with values of value_fn(n)."""
    if frac <= 0 or t.numel() == 0:
        return t
    mask = torch.rand(t.shape, generator=gen) < frac
    return torch.where(mask, value_fn(t.numel()).to(t.dtype), t)


def _index_input(draw, gen, values, dtype, *, hostile_tail=True):
    """A 1-D index input: `values` then a garbage tail (never read), at an offset."""
    tail = draw(st.integers(0, 3)) if hostile_tail else 0
    lead = draw(st.integers(0, 2))
    full = torch.cat([values.to(dtype), garbage(tail, dtype, gen)])
    return strided(full, gen, lead=lead, tail=draw(st.integers(0, 2)))


def _out_1d(draw, gen, n, dtype):
    return strided(garbage(n, dtype, gen), gen, lead=draw(st.integers(0, 2)), tail=draw(st.integers(0, 2)))


def _out_2d(draw, gen, rows, cols):
    vals = garbage(rows * cols, torch.int32, gen).view(rows, cols)
    return strided(vals, gen, lead=draw(st.integers(0, 3)), row_pad=draw(st.integers(0, 3)),
                   tail=draw(st.integers(0, 3)))


def _req_to_token(draw, gen, pool, ctx, slots_fn, padded=False):
    layout = "padded" if padded else draw(
        st.sampled_from(["padded", "padded", "padded", "aliased_rows", "overlapping_rows"]))
    if layout == "aliased_rows" or pool <= 1 or ctx <= 1:
        if layout == "aliased_rows":  # every row is the same memory (stride(0) == 0)
            lead = draw(st.integers(0, 3))
            base = garbage(lead + ctx + 2, torch.int32, gen)
            base[lead:lead + ctx] = slots_fn(ctx)
            return Strided(base, (pool, ctx), (0, 1), lead), layout
        layout = "padded"
    if layout == "overlapping_rows":  # row r+1 starts inside row r (read-only aliasing)
        row_stride = draw(st.integers(1, ctx - 1))
        lead = draw(st.integers(0, 3))
        span = (pool - 1) * row_stride + ctx
        base = garbage(lead + span + 2, torch.int32, gen)
        base[lead:lead + span] = slots_fn(span)
        return Strided(base, (pool, ctx), (row_stride, 1), lead), layout
    vals = slots_fn(pool * ctx).view(pool, ctx)
    return strided(vals, gen, lead=draw(st.integers(0, 3)), row_pad=draw(st.integers(0, 4)),
                   tail=draw(st.integers(0, 2))), layout


@st.composite
def cases(draw, min_bs: int = 0, need: str | None = None, in_contract: bool = False) -> Case:
    """A valid call. `need` forces what a hostile injection needs: "swa_slot"
    (an SWA table and a column), "out_loc" (translated out_cache_loc entries),
    "dead_slot" (live_pages_only on an un-aliased req_to_token). `in_contract`
    draws lengths, offsets and query lengths inside the length contract, for a
    call whose only error is an injected value (most draws of the negative and
    extreme regimes break it)."""
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1)))
    bs = draw(st.one_of(st.integers(0, 9), st.integers(10, 40), st.sampled_from([127, 128, 129, 200, 257])))
    bs = max(bs, min_bs)
    bucket = draw(st.integers(0, 9))  # 40% common powers of two, 40% any small, 20% huge
    page_size = draw(st.sampled_from([1, 2, 16, 64, 128]) if bucket < 4 else st.integers(1, 300) if bucket < 8
                     else st.sampled_from([4096, I32_MAX, 2**31, 2**62, 2**63 - 1]))
    if page_size >= 4096:
        max_seq_pages = draw(st.integers(0, 1))
    elif page_size <= 2:
        max_seq_pages = draw(st.one_of(st.integers(0, 12), st.sampled_from([127, 128, 129, 255, 256, 257, 513, 1023, 1024, 1025, 2049])))
    elif page_size <= 64:
        max_seq_pages = draw(st.integers(0, 12))
    else:
        max_seq_pages = draw(st.integers(0, 4))
    if need in ("swa_slot", "dead_slot"):
        max_seq_pages = max(max_seq_pages, 1)
    if max_seq_pages > 12:
        bs = min(bs, 3)  # keep wide tables small
    pool = draw(st.one_of(st.integers(1, 6), st.just(33)))
    if max_seq_pages * min(page_size, 4096) > 512:
        pool = min(pool, 3)  # keep req_to_token small
    if max_seq_pages == 0:
        ctx = draw(st.integers(0, 4))
    else:
        ctx = (max_seq_pages - 1) * page_size + 1 + draw(st.sampled_from([0, 0, 1, 3, min(page_size, 64)]))

    swa_table = draw(st.booleans()) or need == "swa_slot"
    swa_out = draw(st.booleans()) or need == "out_loc"
    give_out_loc = draw(st.booleans()) or need == "out_loc"
    swa = swa_table or swa_out
    swa_size = draw(st.one_of(st.integers(1, 64), st.integers(65, 5000)))

    # Slots in req_to_token: with an SWA table every non-negative slot must be
    # inside swa_mapping; without one, anything int32 is valid.
    neg_frac = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    wide_slots = (not swa_table) and draw(st.booleans())
    lo_neg = -3 * min(page_size, 2**20)

    def slots_fn(n):
        if wide_slots:
            return _randint(gen, I32_MIN, I32_MAX + 1, n, torch.int32)
        v = _randint(gen, 0, swa_size, n, torch.int32)
        v = _sprinkle(gen, v, neg_frac, lambda k: _randint(gen, max(lo_neg, I32_MIN), 0, k, torch.int32))
        return _sprinkle(gen, v, neg_frac / 2, lambda k: torch.full((k,), -1))

    req_to_token, r2t_layout = _req_to_token(draw, gen, pool, ctx, slots_fn, padded=need == "dead_slot")

    idx_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    len_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    req_pool_indices = _index_input(draw, gen, _randint(gen, 0, pool, bs, torch.int64), idx_dtype)

    len_regime = "live" if in_contract else draw(st.sampled_from(["live", "live", "negative", "extreme"]))
    live_lo, live_hi = 0, min((max_seq_pages + 1) * page_size + 1, I32_MAX)
    if in_contract:
        # A negative offset as well, over lengths it leaves >= 0 (some exactly 0: no live
        # column); each row with both offsets (at most 2**20 + 4 here) fits, and so does the sum.
        seqlen_offset = draw(st.integers(-4, 4))
        live_lo = max(0, -seqlen_offset)
        live_hi = max(live_lo + 1, min(live_hi, I32_MAX // max(bs, 1) - 2**20 - 8))
    if len_regime == "live":
        lens = _randint(gen, live_lo, live_hi, bs, torch.int64)
    elif len_regime == "negative":
        lens = _randint(gen, -min(3 * page_size, 2**30), live_hi, bs, torch.int64)
    else:  # wraps around int32 in cache_seqlens and the sums
        hi = draw(st.sampled_from([2**40, 2**63 - 1])) if len_dtype == torch.int64 else I32_MAX
        lens = _randint(gen, -hi, hi, bs, torch.int64)
    seq_lens = _index_input(draw, gen, lens, len_dtype)
    if not in_contract:  # any int32 offset (outside int32 is a bad-input row: the op raises)
        seqlen_offset = draw(st.one_of(st.integers(-4, 4), st.sampled_from([I32_MIN, I32_MAX])))

    q_mode = draw(st.sampled_from([0, 1, 2]))
    # bs * q_stride must fit int32 (larger is a bad-input row).
    q_stride = draw(st.one_of(st.integers(0, 8), st.sampled_from([2**20 // max(bs, 1), I32_MAX // max(bs, 1)])))
    qlens = None
    if q_mode == 1 or draw(st.booleans()):
        q_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
        q_hi = draw(st.sampled_from([9, 2**20, I32_MAX // (bs + 1) if in_contract else I32_MAX]))
        qlens = _index_input(draw, gen, _randint(gen, 0, q_hi, bs, torch.int64), q_dtype)

    # docs/operators/trtllm_mha_metadata.md ragged verify: per-row offsets (added, never indexed: any value),
    # often with q_mode=CUMSUM over the same lengths as SGLang passes them.
    offs_regime = draw(st.sampled_from(["none", "none", "none", "verify", "any"]))
    seqlen_offsets = None
    if offs_regime != "none":
        o_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
        hi = 9 if offs_regime == "verify" else 2**20 if in_contract else I32_MAX if o_dtype == torch.int32 else 2**62
        lo = 1 if offs_regime == "verify" else 0 if in_contract else -hi
        values = _randint(gen, lo, hi, bs, torch.int64)
        seqlen_offsets = _index_input(draw, gen, values, o_dtype)
        if offs_regime == "verify" and draw(st.booleans()):
            q_mode, qlens = 1, _index_input(draw, gen, values, o_dtype)

    swa_mapping = None
    # SGLang 0.5.23 passes its mapping on every call, SWA outputs or not (a lone
    # mapping is accepted and unused), as int32 or int64.
    lone_mapping = not swa and draw(st.booleans())
    mapping_dtype = draw(st.sampled_from([torch.int64, torch.int64, torch.int32]))
    if swa or lone_mapping:
        mapped = _randint(gen, 0, 2 * swa_size + 7, swa_size, torch.int64)
        if draw(st.booleans()):  # values past int32 after the page division wrap
            mapped = _randint(gen, -(2**62), 2**62, swa_size, torch.int64)
        mapped = _sprinkle(gen, mapped, draw(st.sampled_from([0.0, 0.1, 0.5])), lambda k: torch.full((k,), -1))
        mapped = _sprinkle(gen, mapped, 0.05, lambda k: _randint(gen, -(2**40), 0, k, torch.int64))
        if mapping_dtype == torch.int32:
            mapped = mapped.clamp(I32_MIN, I32_MAX).to(torch.int32)
        swa_mapping = strided(mapped, gen, lead=draw(st.integers(0, 2)), tail=draw(st.integers(0, 2)))

    out_len = draw(st.one_of(st.integers(int(need == "out_loc"), 20), st.sampled_from([511, 512, 513, 1025])))
    out_cache_loc = None
    if give_out_loc:
        n = draw(st.one_of(st.integers(int(need == "out_loc"), 20), st.sampled_from([511, 512, 513])))
        locs = _randint(gen, 0, swa_size, n, torch.int64)
        locs = _sprinkle(gen, locs, 0.2, lambda k: _randint(gen, -(2**40), 0, k, torch.int64))
        locs = _sprinkle(gen, locs, 0.2, lambda k: torch.full((k,), -1))
        # Entries past swa_out_cache_loc's length (all of them without it) are
        # never read: make them hostile.
        unread = out_len if swa_out else 0
        locs[unread:] = _randint(gen, swa_size, 2**62, max(n - unread, 0), torch.int64)
        out_cache_loc = strided(locs, gen, lead=draw(st.integers(0, 2)), tail=draw(st.integers(0, 2)))

    # docs/operators/kv_read_table.md: the unified pool's translations. Every slot drawn above names a
    # virtual page below swa_size // page_size + 1 (wide slots only come
    # without an SWA table: no table is drawn for them). Entries: physical
    # pages, -1 (freed: read as 0), values past int32 (wrap like .to(int32)).
    v2p = swa_v2p = None
    v2p_regime = "none"
    if need is None and not wide_slots and draw(st.integers(0, 3)) == 0:
        n_vpages = swa_size // min(page_size, swa_size) + 1 + draw(st.integers(0, 3))

        def v2p_table():
            t = _randint(gen, -1, 4 * n_vpages + 3, n_vpages, torch.int64)
            if draw(st.booleans()):
                t = _randint(gen, -(2**40), 2**40, n_vpages, torch.int64)
            t = _sprinkle(gen, t, 0.1, lambda k: torch.full((k,), -1))
            return strided(t, gen, lead=draw(st.integers(0, 2)), tail=draw(st.integers(0, 2)))

        v2p_regime = draw(st.sampled_from(["full", "swa", "both", "unified"]))
        if v2p_regime != "swa":
            v2p = v2p_table()
        if v2p_regime != "full":
            swa_v2p = v2p_table()
        if v2p_regime == "unified" and not swa_out:
            swa_mapping = None  # the unified pool has no token-level mapping

    pad_rows = draw(st.integers(0, 3))
    rows = bs + pad_rows
    cols = max_seq_pages + draw(st.integers(0, 3))
    cu_q = q_mode != 0 or draw(st.booleans())
    args = dict(
        req_pool_indices=req_pool_indices,
        seq_lens=seq_lens,
        req_to_token=req_to_token,
        cache_seqlens=_out_1d(draw, gen, rows, torch.int32),
        cu_seqlens_k=_out_1d(draw, gen, rows + 1, torch.int32),
        page_table=_out_2d(draw, gen, rows, cols),
        bs=bs,
        seqlen_offset=seqlen_offset,
        max_seq_pages=max_seq_pages,
        page_size=page_size,
        swa_mapping=swa_mapping,
        swa_page_table=_out_2d(draw, gen, rows, max_seq_pages + draw(st.integers(0, 3))) if swa_table else None,
        out_cache_loc=out_cache_loc,
        swa_out_cache_loc=_out_1d(draw, gen, out_len, torch.int64) if swa_out else None,
        cu_seqlens_q=_out_1d(draw, gen, rows + 1, torch.int32) if cu_q else None,
        qlens=qlens,
        q_stride=q_stride,
        q_mode=q_mode,
        live_pages_only=draw(st.booleans()) or need == "dead_slot",
        seqlen_offsets=seqlen_offsets,
        v2p=v2p,
        swa_v2p=swa_v2p,
    )
    # docs/operators/trtllm_mha_metadata.md: seqlen metadata only; the tables and swa_out_cache_loc may be None
    # (given, they must stay untouched) and no index, slot or mapping is read.
    skip = need is None and draw(st.integers(0, 5)) == 0
    if skip:
        args["skip_page_table"] = True
        for name in ("page_table", "swa_page_table", "swa_out_cache_loc"):
            if draw(st.booleans()):
                args[name] = None
    outputs = ("cache_seqlens", "cu_seqlens_k", "page_table", "swa_page_table", "swa_out_cache_loc",
               "cu_seqlens_q")
    extra = dict(bs=bs, page_size=page_size, max_seq_pages=max_seq_pages, q_mode=q_mode,
                 swa=(swa_table, swa_out), req_to_token=r2t_layout, lens=len_regime, skip=skip,
                 mapping=("none" if swa_mapping is None else "lone" if lone_mapping else "used")
                 + f"/{str(mapping_dtype)[6:]}", offsets=offs_regime, v2p=v2p_regime)
    return Case(args, outputs, note=NAME, extra=extra)


def events(case: Case) -> list[str]:
    """Coarse labels for hypothesis' statistics (--hypothesis-show-statistics)."""
    e = case.extra
    bs = e["bs"]
    return [
        "bs=" + ("0" if bs == 0 else "1" if bs == 1 else "<=40" if bs <= 40 else ">=127"),
        f"q_mode={e['q_mode']}",
        f"swa(table,out)={e['swa']}",
        "page_size=" + ("huge" if e["page_size"] >= 4096 else "pow2" if e["page_size"] & (e["page_size"] - 1) == 0
                        else "other"),
        f"req_to_token={e['req_to_token']}",
        f"lens={e['lens']}",
        f"skip_page_table={e['skip']}",
        f"seqlen_offsets={e['offsets']}",
        f"v2p={e['v2p']}",
        f"swa_mapping={e['mapping']}",
        "max_seq_pages=" + (">1023" if e["max_seq_pages"] > 1023 else "2..12" if e["max_seq_pages"] > 1
                            else str(e["max_seq_pages"])),
    ]


# ---- hostile values (test_hostile_values.py) ---------------------------------
def _live_columns(case: Case, row: int) -> int:
    a = case.args
    if not a["live_pages_only"]:
        return a["max_seq_pages"]
    v = int(a["seq_lens"].view(a["seq_lens"].base)[row]) + a["seqlen_offset"]
    if a.get("seqlen_offsets") is not None:
        v += int(a["seqlen_offsets"].view(a["seqlen_offsets"].base)[row])
    length = (v + 2**31) % 2**32 - 2**31  # int32 wrap, as cache_seqlens
    return 0 if length <= 0 else min((length - 1) // a["page_size"] + 1, a["max_seq_pages"])


def _set(s: Strided, index: tuple, value: int) -> None:
    s.view(s.base)[index] = value


@st.composite
def hostile_cases(draw):
    """(case, kind, expected message parts or None): a valid call with one
    hostile value injected. Parts: the op must raise RuntimeError containing
    them; None: the value is never read, the call must match the clean one."""
    kind = draw(st.sampled_from(["request_index", "swa_slot", "out_loc", "dead_slot"]))
    case = draw(cases(min_bs=1, need=kind, in_contract=True))
    # the injected value must be the call's only error
    assume(length_contract_error(case, ref) is None)
    clean = Case({k: (Strided(v.base.clone(), v.size, v.stride, v.offset) if isinstance(v, Strided) else v)
                  for k, v in case.args.items()}, case.outputs, case.note, case.extra)
    a = case.args
    bs, pool = a["bs"], a["req_to_token"].size[0]
    req = a["req_pool_indices"].view(a["req_pool_indices"].base)
    swa_m = a["swa_mapping"].size[0] if a["swa_mapping"] is not None else 0

    if kind == "dead_slot":
        dead = [(i, _live_columns(case, i)) for i in range(bs)]
        dead = [(i, c) for i, c in dead if c < a["max_seq_pages"]
                and all(_live_columns(case, j) <= c for j in range(bs) if int(req[j]) == int(req[i]))]
        if dead:
            i, c = draw(st.sampled_from(dead))
            value = swa_m if swa_m else I32_MAX
            _set(a["req_to_token"], (int(req[i]), c * a["page_size"]), value)
            return case, clean, kind, None
        kind = "request_index"
    if kind == "swa_slot":
        i = draw(st.integers(0, bs - 1))
        if _live_columns(case, i) == 0:
            a["live_pages_only"] = clean.args["live_pages_only"] = False
        c = draw(st.integers(0, _live_columns(case, i) - 1))
        value = draw(st.sampled_from([swa_m, swa_m + 1, I32_MAX]))
        _set(a["req_to_token"], (int(req[i]), c * a["page_size"]), value)
        return case, clean, kind, [f"= {value} is outside [0, {swa_m}) (swa_mapping.numel())", "req_to_token["]
    if kind == "out_loc":
        n = min(a["swa_out_cache_loc"].size[0], a["out_cache_loc"].size[0])
        k = draw(st.integers(0, n - 1))
        value = draw(st.sampled_from([swa_m, swa_m + 7, 2**40, 2**62]))
        _set(a["out_cache_loc"], (k,), value)
        return case, clean, kind, [f"out_cache_loc[{k}] = {value} is outside [0, {swa_m})"]
    i = draw(st.integers(0, bs - 1))
    big = I32_MAX if req.dtype == torch.int32 else 2**40
    value = draw(st.sampled_from([pool, pool + 1, -1, -big - 1, big]))
    _set(a["req_pool_indices"], (i,), value)
    return case, clean, "request_index", [f"req_pool_indices[{i}] = {value} is outside [0, {pool})"]


def check_hostile(hostile) -> None:
    from tensor_case import compare, outside_views_unchanged

    case, clean, kind, parts = hostile
    if parts is None:  # never read: same result as the clean call, and as the reference
        got, want = case.run(op, "cpu"), clean.run(ref, "cpu")
        outs = [k for k in case.outputs if k in want]
        compare(case, {k: got[k] for k in outs}, {k: want[k] for k in outs}, f"hostile {kind} (never read)")
        return kind
    kwargs, bases = case.materialize("cpu")
    before = {k: (v.clone() if not isinstance(v, list) else [x.clone() for x in v]) for k, v in bases.items()}
    try:
        op(**kwargs)
    except RuntimeError as err:
        msg = str(err)
        assert msg.startswith(f"sgl_meta.{NAME}: "), msg
        for part in parts:
            assert part in msg, f"hostile {kind}: {part!r} not in {msg!r}\ncase: {case.describe()}"
    else:
        raise AssertionError(f"hostile {kind}: no error\ncase: {case.describe()}")
    outside_views_unchanged(case, bases, before, f"hostile {kind}")
    return kind


# ---- update_trtllm_mha_graph_metadata_multi (K destination sets) --------------
MULTI_NAME = "update_trtllm_mha_graph_metadata_multi"
_OUTPUTS = ("cache_seqlens", "cu_seqlens_k", "page_table", "swa_page_table", "swa_out_cache_loc", "cu_seqlens_q")


@st.composite
def multi_cases(draw) -> Case:
    """A valid single-set call (every regime of `cases`) fanned out to K sets:
    each extra set has the first one's layout over fresh poison, and its own
    seqlen_offset (draft steps 1..K, or any int32 values)."""
    one = draw(cases())
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1)))
    k_sets = draw(st.sampled_from([1, 2, 3, 3, 4, 5, 7]))
    if draw(st.booleans()):
        offsets = list(range(1, k_sets + 1))
    else:
        offsets = draw(st.lists(st.one_of(st.integers(-4, 9), st.sampled_from([I32_MIN, I32_MAX])),
                                min_size=k_sets, max_size=k_sets))
    args = dict(one.args)
    for name in _OUTPUTS:
        first = args.get(name)
        if first is None:
            continue
        args[name] = [first] + [Strided(garbage(first.base.numel(), first.base.dtype, gen), first.size, first.stride,
                                        first.offset) for _ in range(k_sets - 1)]
    args["seqlen_offset"] = offsets
    extra = {**one.extra, "k": k_sets}
    return Case(args, one.outputs, note=MULTI_NAME, extra=extra)


def multi_events(case: Case) -> list[str]:
    return [f"K={case.extra['k']}", *events(case)]


ENTRIES = [
    dict(name=NAME, op=op, ref=ref, cases=cases, events=events, weight=1.0),
    dict(name=MULTI_NAME, op=sgl_meta.update_trtllm_mha_graph_metadata_multi,
         ref=reference.update_trtllm_mha_graph_metadata_multi, cases=multi_cases,
         events=multi_events, weight=0.5),
]
