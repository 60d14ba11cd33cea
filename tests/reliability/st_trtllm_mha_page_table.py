"""Hypothesis strategy: valid calls of build_trtllm_mha_page_table (docs/operators/trtllm_mha_metadata.md).

Keyword names are upstream's (req_to_token, req_pool_indices, cache_seqlens,
page_table, page_size, swa_page_table, full_to_swa).

Space: bs 0 / 1 / odd / past 4096 rows; W across the CUDA column chunk (128 columns: 127, 128, 129, 255 ..) and
the 4096-block grid cap;
any page_size >= 1 incl. non-powers of two and huge; req_to_token rows
shorter than the table (n capped by the row), aliased or overlapping rows;
lengths <= 0, past the width, int64 past 2**62; full_to_swa of one element,
negative entries, slots clamped into it; outputs as [bs, W] views into
poisoned buffers; index tensors longer than bs with hostile tails.
"""

from __future__ import annotations

import torch
from hypothesis import assume, strategies as st

import sgl_meta
from sgl_meta import reference
from row_kit import Row, apply, overlapping_rows, set_, to_device
from st_trtllm_mha_metadata import I32_MAX, I32_MIN, _index_input, _out_2d, _randint, _req_to_token, _sprinkle
from tensor_case import Case, length_contract_error, strided

NAME = "build_trtllm_mha_page_table"


op = sgl_meta.build_trtllm_mha_page_table


@st.composite
def cases(draw, min_bs: int = 0, in_contract: bool = False) -> Case:
    """A valid call; `in_contract`: one the reference accepts (lengths inside the
    length contract, slots inside the SWA mapping), for a call whose only error
    is an injected value."""
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1)))
    bs = max(min_bs, draw(st.one_of(st.integers(0, 9), st.integers(10, 40), st.sampled_from([127, 129, 4097]))))
    bucket = draw(st.integers(0, 9))  # 40% common powers of two, 40% any small, 20% huge
    page_size = draw(st.sampled_from([1, 2, 16, 64, 128]) if bucket < 4 else st.integers(1, 300) if bucket < 8
                     else st.sampled_from([4096, I32_MAX, 2**31, 2**62, 2**63 - 1]))
    if page_size == 1 and draw(st.integers(0, 3)) == 0:  # across the CUDA column chunks
        width, bs = draw(st.sampled_from([127, 128, 129, 255, 256, 257, 511, 513, 4095, 4096, 4097])), min(bs, 3)
        ctx = draw(st.sampled_from([width, width // 2, width + 3]))
    else:
        width = draw(st.integers(0, 12)) if bs <= 300 else draw(st.integers(0, 3))
        full_row = max(width - 1, 0) * min(page_size, 300) + 1  # every page inside the row
        ctx = draw(st.one_of(st.integers(0, width * min(page_size, 64) + 2), st.just(full_row)))
    pool = draw(st.integers(1, 6))
    swa = draw(st.booleans())
    swa_size = draw(st.one_of(st.just(1), st.integers(2, 64), st.integers(65, 5000)))
    neg_frac = draw(st.sampled_from([0.0, 0.1, 0.5]))
    draw_wide = draw(st.booleans()) and not (swa and in_contract)

    def slots_fn(n):  # any int32; with an SWA mapping, past it is an error
        if draw_wide:
            return _randint(gen, I32_MIN, I32_MAX + 1, n, torch.int32)
        v = _randint(gen, 0, swa_size if swa and in_contract else 2 * swa_size + 3, n, torch.int32)
        return _sprinkle(gen, v, neg_frac, lambda k: _randint(gen, -3 * min(page_size, 2**20), 0, k, torch.int32))

    req_to_token, layout = _req_to_token(draw, gen, pool, ctx, slots_fn)
    idx_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    len_dtype = draw(st.sampled_from([torch.int32, torch.int64]))
    req_pool_indices = _index_input(draw, gen, _randint(gen, 0, pool, bs, torch.int64), idx_dtype)
    regime = draw(st.sampled_from(["live", "live", "past"] + ([] if in_contract else ["negative", "extreme"])))
    live_hi = min((width + 1) * min(page_size, 2**40) + 1, I32_MAX)
    if regime == "live":
        lens = _randint(gen, 0, live_hi, bs, torch.int64)
    elif regime == "negative":
        lens = _randint(gen, -100, 2, bs, torch.int64)
    elif regime == "past":
        lens = _randint(gen, ctx, ctx + live_hi, bs, torch.int64)
    else:
        hi = 2**62 if len_dtype == torch.int64 else I32_MAX
        lens = _randint(gen, -hi, hi, bs, torch.int64)
    cache_seqlens = _index_input(draw, gen, lens, len_dtype)
    full_to_swa = None
    if swa:
        mapped = _randint(gen, -1, 2 * swa_size + 7, swa_size, torch.int64)
        if draw(st.booleans()):
            mapped = _randint(gen, -(2**62), 2**62, swa_size, torch.int64)
        if draw(st.booleans()):  # SGLang's own tests pass int32 mappings too
            mapped = mapped.clamp(I32_MIN, I32_MAX).to(torch.int32)
        full_to_swa = strided(mapped, gen, lead=draw(st.integers(0, 2)), tail=draw(st.integers(0, 2)))
    args = dict(
        req_to_token=req_to_token,
        req_pool_indices=req_pool_indices,
        cache_seqlens=cache_seqlens,
        page_table=_out_2d(draw, gen, bs, width),
        page_size=page_size,
        swa_page_table=_out_2d(draw, gen, bs, width) if swa else None,
        full_to_swa=full_to_swa,
    )
    extra = dict(bs=bs, width=width, page_size=page_size, swa=swa, layout=layout, lens=regime)
    return Case(args, ("page_table", "swa_page_table"), note=NAME, extra=extra)


def events(case: Case) -> list[str]:
    e = case.extra
    return [f"swa={e['swa']}", f"req_to_token={e['layout']}", f"lens={e['lens']}",
            "bs=" + ("0" if e["bs"] == 0 else ">4096" if e["bs"] > 4096 else "<=257"),
            "width=" + (">=4095" if e["width"] >= 4095 else str(min(e["width"], 2)))]


ENTRIES = [dict(name=NAME, op=op, ref=reference.build_trtllm_mha_page_table, cases=cases, events=events, weight=0.5)]


# ---- hostile values -------------------------------------------------------------
@st.composite
def hostile_cases(draw):
    """A request index outside req_to_token in a row < bs: CPU must raise
    (for every row, whatever its length: docs/operators/trtllm_mha_metadata.md / the op's docstring)."""
    case = draw(cases(min_bs=1, in_contract=True))
    # the injected value must be the call's only error
    assume(length_contract_error(case, reference.build_trtllm_mha_page_table) is None)
    a = case.args
    i = draw(st.integers(0, a["page_table"].size[0] - 1))
    pool = a["req_to_token"].size[0]
    value = draw(st.sampled_from([pool, pool + 5, -1, -(2**31)]))
    s = a["req_pool_indices"]
    s.view(s.base)[i] = value
    return case, value


def check_hostile(hostile) -> str:
    from tensor_case import outside_views_unchanged

    case, value = hostile
    kwargs, bases = case.materialize("cpu")
    before = {k: v.clone() for k, v in bases.items()}
    try:
        op(**kwargs)
    except RuntimeError as err:
        msg = str(err)
        assert msg.startswith(f"sgl_meta.{NAME}: ") and "req_pool_indices" in msg and str(value) in msg, msg
    else:
        raise AssertionError(f"no error for req_pool_indices value {value}\ncase: {case.describe()}")
    outside_views_unchanged(case, bases, before, "hostile request index")
    return "request_index"


# ---- bad-input rows (bad_input_table.py) -----------------------------------------
def _base(gen, device):
    i32 = dict(dtype=torch.int32, device=device)
    return dict(
        req_to_token=torch.randint(-3, 300, (6, 40), generator=gen, dtype=torch.int32).to(device),
        req_pool_indices=torch.tensor([0, 5, 2, 2], dtype=torch.int64, device=device),
        cache_seqlens=torch.tensor([0, 17, 40, 3], **i32),
        page_table=torch.full((4, 5), -7, **i32),
        page_size=8,
        swa_page_table=torch.full((4, 5), -7, **i32),
        full_to_swa=torch.randint(-1, 600, (300,), generator=gen, dtype=torch.int64).to(device),
    )


BAD_INPUT_BASES = {NAME: _base}


def _r(id, edit, *names, **kw):
    return Row(id=f"{NAME}/{id}", op=NAME, edit=edit, names=names, **kw)


BAD_INPUT_ROWS = [
    _r("req_to_token int64", apply("req_to_token", lambda t: t.long()), "req_to_token", "torch.int32"),
    _r("req_pool_indices float", apply("req_pool_indices", lambda t: t.float()), "req_pool_indices", "torch.float32"),
    _r("cache_seqlens int16", apply("cache_seqlens", lambda t: t.short()), "cache_seqlens", "torch.int16"),
    _r("page_table int64", apply("page_table", lambda t: t.long()), "page_table", "torch.int32"),
    _r("swa_page_table int64", apply("swa_page_table", lambda t: t.long()), "swa_page_table", "torch.int32"),
    _r("full_to_swa int16", apply("full_to_swa", lambda t: t.short()), "full_to_swa", "torch.int32 or torch.int64"),
    _r("full_to_swa float", apply("full_to_swa", lambda t: t.float()), "full_to_swa", "torch.float32"),
    _r("page_table 1-D", apply("page_table", lambda t: t.flatten()), "page_table", "2-D"),
    _r("req_to_token 1-D", apply("req_to_token", lambda t: t[0]), "req_to_token", "2-D"),
    _r("req_pool_indices shorter than bs", apply("req_pool_indices", lambda t: t[:3]), "req_pool_indices"),
    _r("cache_seqlens shorter than bs", apply("cache_seqlens", lambda t: t[:2]), "cache_seqlens"),
    _r("swa_page_table fewer rows", apply("swa_page_table", lambda t: t[:3]), "swa_page_table"),
    _r("page_table transposed", apply("page_table", lambda t: t.t().contiguous().t()), "page_table", "stride"),
    _r("req_to_token column step 2", apply("req_to_token", lambda t: t[:, ::2]), "req_to_token", "stride"),
    _r("cache_seqlens step 2", apply("cache_seqlens", lambda t: torch.cat([t, t])[::2]), "cache_seqlens", "stride"),
    _r("page_table rows overlap", apply("page_table", overlapping_rows), "page_table"),
    _r("page_size 0", set_(page_size=0), "page_size must be >= 1"),
    _r("page_size negative", set_(page_size=-8), "page_size must be >= 1"),
    _r("swa_page_table without full_to_swa", set_(full_to_swa=None), "swa_page_table", "full_to_swa"),
    _r("full_to_swa without swa_page_table", set_(swa_page_table=None), "swa_page_table", "full_to_swa"),
    _r("full_to_swa empty", apply("full_to_swa", lambda t: t[:0]), "full_to_swa"),
    _r("page_table on meta", to_device("meta", "page_table"), "page_table", "meta"),
    _r("req_to_token on cuda, rest on cpu", to_device("cuda", "req_to_token"), "is on", needs="cuda"),
]

HOSTILE_ROWS = [
    Row(f"{NAME}/request index == pool size", NAME, lambda kw: kw["req_pool_indices"].__setitem__(1, 6),
        ("req_pool_indices", "6")),
    Row(f"{NAME}/request index -1", NAME, lambda kw: kw["req_pool_indices"].__setitem__(3, -1),
        ("req_pool_indices", "-1")),
    Row(f"{NAME}/lengths far past the table and the row", NAME,
        lambda kw: kw["cache_seqlens"].fill_(2**31 - 1), (), raises=()),
    Row(f"{NAME}/slots past full_to_swa", NAME, lambda kw: kw["req_to_token"].fill_(2**31 - 1),
        ("= 2147483647 is outside full_to_swa",)),
    Row(f"{NAME}/negative slots read full_to_swa[0]", NAME, lambda kw: kw["req_to_token"].fill_(-1), (),
        raises=()),
    Row(f"{NAME}/request indices past bs", NAME,
        lambda kw: kw.update(req_pool_indices=torch.cat([kw["req_pool_indices"], kw["req_pool_indices"].new_tensor([10**6])])),
        (), raises=()),
]
