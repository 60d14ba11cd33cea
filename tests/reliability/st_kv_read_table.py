"""Hypothesis strategies: valid calls of kv_read_page_table and
kv_read_token_stream (docs/operators/kv_read_table.md), their bad-input rows and hostile values.

Space: bs 0 / 1 / odd / past one block wave; page sizes 1 .. 300, powers of
two and huge ones (the token stream's 64-bit kernel above 2**26, int32 and
int64 extremes); req_to_token padded, offset, row-aliased (stride(0) = 0) or
with overlapping rows; virtual slots with negative and -1 sentinels; v2p absent
or a shuffled int64 table with -1 (freed) and other negative rows; lengths
<= 0, past the table and past the row, int64 extremes; seq_len_delta across
int32; kv_start_idx absent, aligned, anywhere, past the row, int64 extremes;
page tables as [bs, W] views into poisoned buffers, W across the CUDA
256-column step, zero_tail; token streams as CSR rows with poisoned gaps at
every 16-byte alignment, int32 and int64, rows across the 32-page chunk;
index inputs longer than bs with hostile tails (never read).
"""

from __future__ import annotations

import torch
from hypothesis import assume, strategies as st

import sgl_meta
from sgl_meta import reference
from row_kit import Row, apply, at, both, hostile, overlapping_rows, set_, to_device
from st_trtllm_mha_metadata import I32_MAX, _index_input, _out_1d, _out_2d, _randint, _req_to_token, _sprinkle
from tensor_case import Case, Strided, length_contract_error, strided

TABLE = "kv_read_page_table"
STREAM = "kv_read_token_stream"
I64_MAX = 2**63 - 1


def _live(form, lens, delta, starts, ctx, page_size, max_pages):
    """n_b per row from the contract (plain ints)."""
    out = []
    for n, s in zip(lens, starts):
        n = max(n + delta, 0)
        left = max(ctx - s, 0)
        if form == TABLE:
            out.append(min(-(-n // page_size), -(-left // page_size), max_pages))
        else:
            out.append(min(n, left))
    return out


@st.composite
def cases(draw, form: str = TABLE, min_bs: int = 0) -> Case:
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1)))
    bs = max(min_bs, draw(st.one_of(st.integers(0, 9), st.integers(10, 40), st.sampled_from([127, 129, 300]))))
    bucket = draw(st.integers(0, 9))  # 40% common powers of two, 40% any small, 20% huge
    page_size = draw(st.sampled_from([1, 2, 16, 64, 128]) if bucket < 4 else st.integers(1, 300) if bucket < 8
                     else st.sampled_from([4096, 2**26 + 1, I32_MAX, 2**31, 2**62, I64_MAX]))
    big = page_size >= 4096
    if form == TABLE:
        max_pages = draw(st.integers(0, 12)) if bs > 9 or big else draw(
            st.one_of(st.integers(0, 12), st.sampled_from([255, 256, 257, 511, 512, 513, 1025])))
        ctx = draw(st.one_of(st.integers(0, max_pages * min(page_size, 64) + 3),
                             st.just(max(max_pages - 1, 0) * min(page_size, 300) + 1)))
    else:
        max_pages = 0
        ctx = draw(st.integers(0, 40) if bs > 9 else st.one_of(st.integers(0, 40), st.integers(41, 1100)))
    pool = draw(st.integers(1, 6))

    # Virtual slots: pages below `vpages` (v2p covers them), negatives sprinkled.
    use_v2p = draw(st.integers(0, 4)) > 0
    vpages = draw(st.one_of(st.integers(1, 40), st.integers(41, 3000)))
    neg_frac = draw(st.sampled_from([0.0, 0.1, 0.5, 1.0]))
    out64 = form == STREAM and draw(st.booleans())
    out_max = I64_MAX if out64 or form == TABLE else I32_MAX
    # Largest entry whose ids fit out: entry * page_size + page_size - 1 <= out_max.
    max_entry = I32_MAX if form == TABLE else (out_max - (page_size - 1)) // page_size if page_size - 1 <= out_max else 0
    slot_hi = min(vpages * page_size, I32_MAX + 1)
    wide = not use_v2p and draw(st.booleans())
    if wide:  # no v2p: any slot; its page must still fit the ids
        slot_hi = I32_MAX + 1 if form == TABLE else min(I32_MAX + 1, (max_entry + 1) * page_size if max_entry < I32_MAX else I32_MAX + 1)

    def slots_fn(n):
        v = _randint(gen, 0, slot_hi, n, torch.int32)
        v = _sprinkle(gen, v, neg_frac, lambda k: _randint(gen, -(2**31), 0, k, torch.int32))
        return _sprinkle(gen, v, neg_frac / 2, lambda k: torch.full((k,), -1))

    req_to_token, layout = _req_to_token(draw, gen, pool, ctx, slots_fn)
    v2p = None
    v2p_kind = "none"
    if use_v2p:
        size = -(-slot_hi // page_size) + draw(st.integers(0, 3))
        hi = min(max_entry, draw(st.sampled_from([size + 7, 2**20, I32_MAX, 2**62])))
        values = _randint(gen, 0, hi + 1, size, torch.int64)
        v2p_kind = draw(st.sampled_from(["plain", "freed", "negative"]))
        if v2p_kind == "freed":
            values = _sprinkle(gen, values, 0.3, lambda k: torch.full((k,), -1))
        elif v2p_kind == "negative":  # any negative entry reads the sink, int64 min included
            values = _sprinkle(gen, values, 0.3, lambda k: _randint(gen, -(2**62), 0, k, torch.int64))
            values[0] = -(2**63)
        v2p = strided(values, gen, lead=draw(st.integers(0, 2)), tail=draw(st.integers(0, 2)))

    idx_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    len_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    reqs = _randint(gen, 0, pool, bs, torch.int64)
    req_pool_indices = _index_input(draw, gen, reqs, idx_dtype, hostile_tail=False)  # numel is bs

    regime = draw(st.sampled_from(["live", "live", "live", "negative", "past", "extreme"]))
    live_hi = min((max(max_pages, 1) + 1) * min(page_size, 2**30) + 1, ctx + 5, I32_MAX) if form == TABLE else ctx + 5
    if regime == "live":
        lens = _randint(gen, 0, live_hi, bs, torch.int64)
    elif regime == "negative":
        lens = _randint(gen, -100, 40, bs, torch.int64)
    elif regime == "past":
        lens = _randint(gen, ctx, ctx + 3 * live_hi + 5, bs, torch.int64)
    else:
        hi = 2**62 if len_dtype == torch.int64 else I32_MAX
        lens = _randint(gen, -hi, hi, bs, torch.int64)
    seq_lens = _index_input(draw, gen, lens, len_dtype)
    delta_kind = draw(st.integers(0, 9))  # 60% none, 30% small, 10% int32 extremes
    delta = 0 if delta_kind < 6 else draw(st.integers(-8, 8)) if delta_kind < 9 else draw(
        st.sampled_from([-(2**31), I32_MAX]))

    start_kind = draw(st.sampled_from(["none", "none", "none", "aligned", "any", "any", "past", "extreme"]))
    starts = [0] * bs
    kv_start_idx = None
    if start_kind != "none":
        st_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
        if start_kind == "aligned":
            s = _randint(gen, 0, ctx // min(page_size, 2**40) + 1, bs, torch.int64) * page_size if not big else \
                torch.zeros(bs, dtype=torch.int64)
        elif start_kind == "any":
            s = _randint(gen, 0, ctx + 1, bs, torch.int64)
        elif start_kind == "past":
            s = _randint(gen, ctx, ctx + 50, bs, torch.int64)
        else:
            s = _randint(gen, 0, I32_MAX if st_dtype == torch.int32 else 2**62, bs, torch.int64)
        starts = s.tolist()
        kv_start_idx = _index_input(draw, gen, s, st_dtype)

    live = _live(form, lens.tolist(), delta, starts, ctx, page_size, max_pages)
    args = dict(req_to_token=req_to_token, req_pool_indices=req_pool_indices, seq_lens=seq_lens)
    extra = dict(form=form, bs=bs, page_size=page_size, v2p=v2p_kind, start=start_kind, layout=layout,
                 lens=regime, live=sum(live), max_pages=max_pages, out64=out64)
    if form == TABLE:
        zero_tail = draw(st.booleans())
        args.update(out=_out_2d(draw, gen, bs, max_pages), page_size=page_size, max_pages=max_pages, v2p=v2p,
                    kv_start_idx=kv_start_idx, seq_len_delta=delta, zero_tail=zero_tail)
        extra["zero_tail"] = zero_tail
    else:
        # CSR rows with gaps (poison between rows), indptr past bs + 1 hostile.
        lead = draw(st.integers(0, 5))
        gaps = _randint(gen, 0, draw(st.sampled_from([1, 4])), bs, torch.int64).tolist()
        indptr = [lead]
        for n, g in zip(live, gaps):
            indptr.append(indptr[-1] + n + g)
        ptr_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
        args.update(indptr=_index_input(draw, gen, torch.tensor(indptr), ptr_dtype),
                    out=_out_1d(draw, gen, indptr[-1] + draw(st.integers(0, 5)),
                                torch.int64 if out64 else torch.int32),
                    page_size=page_size, v2p=v2p, kv_start_idx=kv_start_idx, seq_len_delta=delta)
    return Case(args, ("out",), note=form, extra=extra)


def events(case: Case) -> list[str]:
    e = case.extra
    ps = e["page_size"]
    labels = [
        "bs=" + ("0" if e["bs"] == 0 else "1" if e["bs"] == 1 else "<=40" if e["bs"] <= 40 else ">=127"),
        "page_size=" + ("huge" if ps >= 4096 else "pow2" if ps & (ps - 1) == 0 else "other"),
        f"v2p={e['v2p']}", f"kv_start={e['start']}", f"req_to_token={e['layout']}", f"lens={e['lens']}",
        "live=" + ("0" if e["live"] == 0 else ">0"),
    ]
    if e["form"] == TABLE:
        labels += [f"zero_tail={e['zero_tail']}", "max_pages=" + (">=255" if e["max_pages"] >= 255 else "<=12")]
    else:
        labels.append("out=" + ("int64" if e["out64"] else "int32"))
    return labels


ENTRIES = [
    dict(name=TABLE, op=sgl_meta.kv_read_page_table, ref=reference.kv_read_page_table,
         cases=lambda: cases(TABLE), events=events, weight=0.25),
    dict(name=STREAM, op=sgl_meta.kv_read_token_stream, ref=reference.kv_read_token_stream,
         cases=lambda: cases(STREAM), events=events, weight=0.25),
]


# ---- hostile values (CPU property; test_hostile_values.py) ----------------------
def _set(s: Strided, index: int, value: int) -> None:
    s.view(s.base)[index] = value


@st.composite
def hostile_cases(draw):
    """(case, kind, message parts): a valid call with one value injected that
    the op reads; CPU must raise naming op, argument and value, writing nothing."""
    form = draw(st.sampled_from([TABLE, STREAM]))
    case = draw(cases(form, min_bs=1))
    # lengths inside the contract: the injected value must be the call's only error
    assume(length_contract_error(case, getattr(reference, form)) is None)
    a = case.args
    bs, pool = case.extra["bs"], a["req_to_token"].size[0]
    kinds = ["request_index", "indptr"] if form == STREAM else ["request_index"]
    if a["kv_start_idx"] is not None:
        kinds.append("kv_start")
    if a["v2p"] is not None and case.extra["live"] > 0:
        kinds.append("v2p_short")
    kind = draw(st.sampled_from(kinds))
    i = draw(st.integers(0, bs - 1))
    if kind == "request_index":
        req = a["req_pool_indices"]
        value = draw(st.sampled_from([pool, pool + 3, -1, -(2**31)]))
        _set(req, i, value)
        return case, kind, ["req_pool_indices", f"[{i}] = {value} is outside"]
    if kind == "kv_start":
        value = draw(st.sampled_from([-1, -(2**31)]))
        _set(a["kv_start_idx"], i, value)
        return case, kind, [f"kv_start_idx[{i}] = {value} is negative"]
    if kind == "indptr":
        ptr = a["indptr"]
        value = draw(st.sampled_from([-1, -(2**31)]))
        _set(ptr, i, value)
        return case, kind, ["indptr must be non-negative and non-decreasing"]
    # v2p too short for the pages read: keep no entry at all (every live read is outside)
    v = a["v2p"]
    a["v2p"] = Strided(v.base, (0,), v.stride, v.offset)
    return case, kind, ["outside v2p (v2p.numel() = 0)"]


def check_hostile(hostile) -> str:
    case, kind, parts = hostile
    kwargs, bases = case.materialize("cpu")
    before = {k: v.clone() for k, v in bases.items()}
    name = case.note
    try:
        getattr(sgl_meta, name)(**kwargs)
    except RuntimeError as err:
        msg = str(err)
        assert msg.startswith(f"sgl_meta.{name}: "), msg
        for part in parts:
            assert part in msg, f"hostile {kind}: {part!r} not in {msg!r}\ncase: {case.describe()}"
    else:
        raise AssertionError(f"hostile {kind}: no error\ncase: {case.describe()}")
    for k, b in before.items():  # the CPU kernels check everything before writing
        assert torch.equal(bases[k], b), f"hostile {kind}: {k} changed\ncase: {case.describe()}"
    return kind


NAME = "kv_read_table"


# ---- bad-input rows (bad_input_table.py) -----------------------------------------
def _table_base(gen, device):
    i32 = dict(dtype=torch.int32, device=device)
    return dict(
        req_to_token=torch.randint(-3, 300, (6, 40), generator=gen, dtype=torch.int32).to(device),
        req_pool_indices=torch.tensor([0, 5, 2, 2], dtype=torch.int64, device=device),
        seq_lens=torch.tensor([0, 17, 40, 3], **i32),
        out=torch.full((4, 5), -7, **i32),
        page_size=8,
        max_pages=5,
        v2p=torch.randperm(40, generator=gen).to(device),
        kv_start_idx=torch.tensor([0, 3, 0, 30], **i32),
        seq_len_delta=2,
        zero_tail=True,
    )


def _stream_base(gen, device):
    kw = _table_base(gen, device)
    for k in ("max_pages", "zero_tail"):
        kw.pop(k)
    kw["seq_len_delta"] = 0
    # n_b = min(len, 40 - start): 0, 17, 40, 3
    kw["indptr"] = torch.tensor([1, 1, 20, 60, 64], dtype=torch.int32, device=device)
    kw["out"] = torch.full((66,), -7, dtype=torch.int64, device=device)
    return kw


def _dropin_table_base(gen, device):
    kw = _table_base(gen, device)
    kw.pop("kv_start_idx")
    return kw


def _dropin_stream_base(gen, device):
    kw = _stream_base(gen, device)
    kw.pop("seq_len_delta")
    kw["max_tokens"] = 64
    return kw


DROPIN_TABLE, DROPIN_STREAM = "build_kv_read_table", "build_kv_read_table_packed"
BAD_INPUT_BASES = {TABLE: _table_base, STREAM: _stream_base, DROPIN_TABLE: _dropin_table_base,
                   DROPIN_STREAM: _dropin_stream_base}


def _rows(op, specs):
    return [Row(id=f"{op}/{id}", op=op, edit=edit, names=names, **kw) for id, edit, names, kw in specs]


def _r(id, edit, *names, **kw):
    return (id, edit, names, kw)


_SHARED = [
    _r("req_to_token int64", apply("req_to_token", lambda t: t.long()), "req_to_token", "torch.int32"),
    _r("req_to_token 1-D", apply("req_to_token", lambda t: t[0]), "req_to_token must be 2-D"),
    _r("req_to_token column step 2", apply("req_to_token", lambda t: torch.cat([t, t], 1)[:, ::2]),
       "req_to_token must have inner stride 1"),
    _r("req_pool_indices float", apply("req_pool_indices", lambda t: t.float()), "req_pool_indices", "torch.float32"),
    _r("req_pool_indices 2-D", apply("req_pool_indices", lambda t: t[None]), "req_pool_indices must be 1-D"),
    _r("req_pool_indices step 2", apply("req_pool_indices", lambda t: torch.cat([t, t])[::2]),
       "req_pool_indices must have inner stride 1"),
    _r("seq_lens int16", apply("seq_lens", lambda t: t.short()), "seq_lens", "torch.int16"),
    _r("seq_lens shorter than bs", apply("seq_lens", lambda t: t[:3]),
       "seq_lens.size(0) must be >= req_pool_indices.numel() = 4, got 3"),
    _r("v2p int32", apply("v2p", lambda t: t.int()), "v2p must have dtype int64 (torch.int64), got torch.int32"),
    _r("v2p 2-D", apply("v2p", lambda t: t[None]), "v2p must be 1-D"),
    _r("v2p step 2", apply("v2p", lambda t: torch.cat([t, t])[::2]), "v2p must have inner stride 1"),
    _r("kv_start_idx float", apply("kv_start_idx", lambda t: t.double()), "kv_start_idx", "torch.float64"),
    _r("kv_start_idx shorter than bs", apply("kv_start_idx", lambda t: t[:2]), "kv_start_idx.size(0) must be >="),
    _r("page_size 0", set_(page_size=0), "page_size must be >= 1, got 0"),
    _r("page_size negative", set_(page_size=-8), "page_size must be >= 1, got -8"),
    _r("seq_len_delta past int32", set_(seq_len_delta=2**31), "seq_len_delta = 2147483648 is outside"),
    _r("seq_len_delta below int32", set_(seq_len_delta=-(2**31) - 1), "seq_len_delta = -2147483649 is outside"),
    _r("out on meta", to_device("meta", "out"), "out", "meta"),
    _r("v2p on meta", to_device("meta", "v2p"), "v2p", "meta"),
    _r("v2p on cuda, rest on cpu", to_device("cuda", "v2p"), "v2p is on cuda", needs="cuda"),
    _r("out None", set_(out=None), "out", raises=(TypeError,), prefixed=False),
    _r("unknown keyword", set_(vp2=None), "vp2", raises=(TypeError,), prefixed=False),
]

_TABLE_ONLY = [
    _r("out int64", apply("out", lambda t: t.long()), "out must have dtype int32 (torch.int32), got torch.int64"),
    _r("out 1-D", apply("out", lambda t: t.flatten()), "out must be 2-D"),
    _r("out few rows", apply("out", lambda t: t[:3]), "out.size(0) must be >= req_pool_indices.numel() = 4, got 3"),
    _r("out narrow", apply("out", lambda t: t[:, :4]), "out.size(1) must be >= max_pages = 5, got 4"),
    _r("out transposed", apply("out", lambda t: t.t().contiguous().t()), "out must have inner stride 1"),
    _r("out rows overlap", apply("out", overlapping_rows), "out rows overlap: stride(0) = 2 < 5"),
    _r("out rows aliased (expand)", apply("out", lambda t: t[:1].expand(4, -1)),
       "out rows overlap: stride(0) = 0 < 5 columns written per row"),
    _r("negative max_pages", set_(max_pages=-1), "max_pages must be >= 0, got -1"),
    _r("max_pages past out", set_(max_pages=2**62), "out.size(1) must be >= max_pages = 4611686018427387904"),
]

_STREAM_ONLY = [
    _r("out int16", apply("out", lambda t: t.short()), "out must have dtype int32 or int64 (torch.int32 or torch.int64), got torch.int16"),
    _r("out 2-D", apply("out", lambda t: t.view(6, 11)), "out must be 1-D"),
    _r("out step 2", apply("out", lambda t: torch.cat([t, t])[::2]), "out must have inner stride 1"),
    _r("indptr float", apply("indptr", lambda t: t.float()), "indptr", "torch.float32"),
    _r("indptr too short", apply("indptr", lambda t: t[:4]),
       "indptr.size(0) must be >= req_pool_indices.numel() + 1 = 5, got 4"),
    _r("indptr 2-D", apply("indptr", lambda t: t[None]), "indptr must be 1-D"),
    _r("indptr None", set_(indptr=None), "indptr", raises=(TypeError,), prefixed=False),
    # Distinct outputs cannot alias here (one output); rows overlapping inside
    # out come from indptr, a device value: a hostile-value row.
]

_DROPIN_TABLE_ONLY = [
    _r("max_pages past the req_to_token width", set_(max_pages=6), "max_pages = 6 x page_size = 8 exceeds",
       raises=(ValueError,)),
    _r("out int64", apply("out", lambda t: t.long()), "out must have dtype int32 (torch.int32)"),
    _r("out rows overlap", apply("out", overlapping_rows), "out rows overlap"),
    _r("v2p int32", apply("v2p", lambda t: t.int()), "v2p must have dtype int64 (torch.int64)"),
    _r("seq_lens None", set_(seq_lens=None), "seq_lens must be a Tensor, got None", raises=(TypeError,)),
    _r("req_to_token None", set_(req_to_token=None), "req_to_token must be a Tensor", raises=(TypeError,)),
    _r("page_size 0", set_(page_size=0), "page_size must be >= 1"),
    _r("page_size str", set_(page_size="8"), "page_size must be an int, got str", raises=(TypeError,)),
    _r("page_size float", set_(page_size=8.0), "page_size must be an int, got float", raises=(TypeError,)),
    _r("max_pages bool", set_(max_pages=True), "max_pages must be an int, got bool", raises=(TypeError,)),
    _r("seq_len_delta bool", set_(seq_len_delta=True), "seq_len_delta must be an int, got bool", raises=(TypeError,)),
    _r("seq_len_delta a bool tensor", set_(seq_len_delta=torch.tensor(False)),
       "seq_len_delta must be an int, got a torch.bool Tensor of shape ()", raises=(TypeError,)),
]

_DROPIN_STREAM_ONLY = [
    _r("out smaller than max_tokens", set_(max_tokens=67), "cannot hold max_tokens = 67", raises=(ValueError,)),
    _r("out 2-D", apply("out", lambda t: t.view(6, 11)), "out must be 1-D, got shape (6, 11)", raises=(ValueError,)),
    _r("max_tokens bool", set_(max_tokens=True), "max_tokens must be an int, got bool", raises=(TypeError,)),
    _r("max_tokens float", set_(max_tokens=36.0), "max_tokens must be an int, got float", raises=(TypeError,)),
    _r("max_tokens negative", set_(max_tokens=-1), "max_tokens must be >= 0, got -1", raises=(ValueError,)),
    _r("page_size bool", set_(page_size=True), "page_size must be an int, got bool", raises=(TypeError,)),
    _r("indptr too short", apply("indptr", lambda t: t[:4]), "indptr.size(0) must be >="),
    _r("indptr None", set_(indptr=None), "indptr must be a Tensor, got None", raises=(TypeError,)),
    _r("out int16", apply("out", lambda t: t.short()), "out must have dtype int32 or int64 (torch.int32 or torch.int64)"),
    _r("kv_start_idx shorter than bs", apply("kv_start_idx", lambda t: t[:2]), "kv_start_idx.size(0) must be >="),
]

BAD_INPUT_ROWS = (_rows(TABLE, _SHARED + _TABLE_ONLY) + _rows(STREAM, _SHARED + _STREAM_ONLY)
                  + _rows(DROPIN_TABLE, _DROPIN_TABLE_ONLY) + _rows(DROPIN_STREAM, _DROPIN_STREAM_ONLY))


# ---- hostile rows (hostile_table.py); bases as above ------------------------------
HOSTILE_ROWS = []
for _op in (TABLE, STREAM):
    HOSTILE_ROWS += [
        hostile(_op, "request index == pool size", at("req_pool_indices", 1, 6), "req_pool_indices[1] = 6 is outside [0, "),
        hostile(_op, "request index -1", at("req_pool_indices", 0, -1), "req_pool_indices[0] = -1 is outside"),
        hostile(_op, "kv_start_idx negative", at("kv_start_idx", 2, -1), "kv_start_idx[2] = -1 is negative"),
        hostile(_op, "v2p shorter than the pages read", apply("v2p", lambda t: t[:3]), "outside v2p (v2p.numel() = 3)"),
        hostile(_op, "v2p empty", apply("v2p", lambda t: t[:0]), "outside v2p (v2p.numel() = 0)"),
        hostile(_op, "slot far past v2p", apply("req_to_token", lambda t: t.fill_(2**31 - 1)), "outside v2p"),
        # must succeed: sentinels, capped lengths, values never read
        hostile(_op, "v2p -1 everywhere", apply("v2p", lambda t: t.fill_(-1)), raises=()),
        hostile(_op, "v2p int64 min everywhere", apply("v2p", lambda t: t.fill_(-(2**63))), raises=()),
        hostile(_op, "negative slots are the sink", apply("req_to_token", lambda t: t.fill_(-(2**31))), raises=()),
        hostile(_op, "window past the row", both(apply("kv_start_idx", lambda t: t.long()), at("kv_start_idx", 1, 2**40)),
           raises=()),
        hostile(_op, "seq_lens past bs hostile", apply("seq_lens", lambda t: torch.cat([t, t.new_tensor([-(2**31)])])),
           raises=()),
        hostile(_op, "slots past v2p in dead rows", both(set_(seq_len_delta=0), apply("seq_lens", lambda t: t.fill_(0)),
                                                    apply("req_to_token", lambda t: t.fill_(2**31 - 1))), raises=()),
    ]
HOSTILE_ROWS += [
    hostile(TABLE, "v2p entry past int32", apply("v2p", lambda t: t.fill_(2**31)), "does not fit the int32 out"),
    # (the base's seq_len_delta is 2: windows of exactly 2**31 - 1 tokens)
    hostile(TABLE, "lengths far past the table and the row", apply("seq_lens", lambda t: t.fill_(2**31 - 3)), raises=()),
    hostile(STREAM, "token id past int32", both(apply("out", lambda t: t.int()), apply("v2p", lambda t: t.fill_(2**28))),
       "does not fit out (int32)"),
    hostile(STREAM, "token id past int64", apply("v2p", lambda t: t.fill_(2**61)), "does not fit out (int64)"),
    hostile(STREAM, "indptr row too short", at("indptr", 2, 10), "row 1 holds 17 tokens but indptr gives it [1, 10)"),
    hostile(STREAM, "indptr decreasing", at("indptr", 3, 10), "indptr must be non-negative and non-decreasing"),
    hostile(STREAM, "indptr negative", at("indptr", 0, -4), "indptr must be non-negative"),
    hostile(STREAM, "row past out", apply("out", lambda t: t[:62]), "row 3 holds 3 tokens but indptr gives it [60, 64) in out of 62"),
    hostile(STREAM, "indptr past bs + 1 hostile", apply("indptr", lambda t: torch.cat([t, t.new_tensor([-9])])), raises=()),
]
