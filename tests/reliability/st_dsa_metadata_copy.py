"""Hypothesis strategies: valid calls of the DSA metadata copies (docs/operators/dsa_metadata_copy.md).

Four entry points, one source of cases:

* ``fused_metadata_copy`` / ``fused_metadata_copy_cuda``: upstream's keyword
  names (the drop-in keeps them; the general op takes the same names), any
  forward_mode.
* ``fused_metadata_copy_multi``: any K >= 1 destination sets, any mode, the
  schema's names (destination fields are lists of K tensors, an unused
  optional field an empty list).
* ``fused_metadata_copy_multi_cuda``: upstream's signature (``_dst0.._dst2``,
  DECODE, no forward_mode).

The oracle is ``sgl_meta.reference.<name>``; the two drop-ins it does not
mirror are checked against ``spec_copy`` / ``spec_copy_multi_seed`` below:
docs/operators/dsa_metadata_copy.md's table, written out in plain slicing. Space: every mode; bs 0 /
1 / odd / > 128; S (seqlens_expanded_size) 0 .. 40 independent of bs; rows of
page_indices_src independent of bs outside DECODE; widths across 1024; the
optional real-page-table and FlashMLA pairs present or not; 2-D tensors with
row padding; destinations as views into poisoned buffers (rows/columns past
what is copied must survive, ``cu_seqlens_k_dst[0]`` too).
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

import sgl_meta
from sgl_meta import reference
from row_kit import Row, apply, drop, set_, to_device
from tensor_case import Case, garbage, strided

I32 = torch.int32
FIELDS_1D = ("cache_seqlens", "cu_seqlens_k", "dsa_cache_seqlens", "seqlens_expanded", "dsa_cu_seqlens_k",
             "flashmla_num_splits")
FIELDS = ("cache_seqlens", "cu_seqlens_k", "page_table_1", "dsa_cache_seqlens", "seqlens_expanded",
          "dsa_cu_seqlens_k", "real_page_table", "flashmla_num_splits", "flashmla_metadata")
SRC_NAME = {f: f + "_src" for f in FIELDS}
SRC_NAME["page_table_1"] = "page_indices_src"


# ---- the oracle: docs/operators/dsa_metadata_copy.md, one destination set ---------------------------------------
def _copy_set(src: dict, dst: dict, mode: int, bs: int, max_len: int, max_seqlen_k: int, s: int) -> None:
    """`src[field]` / `dst[field]` tensors (None when not used)."""
    if bs == 0:
        return  # docs/operators.md: bs == 0 is a no-op in every mode
    n = bs if mode == 0 else s
    rows = bs if mode == 0 else src["page_table_1"].shape[0]
    cols = max_len if mode == 0 else max_seqlen_k
    dst["cache_seqlens"][:bs] = src["cache_seqlens"][:bs]
    dst["cu_seqlens_k"][1 : bs + 1] = src["cu_seqlens_k"][1 : bs + 1]
    dst["page_table_1"][:rows, :cols] = src["page_table_1"][:rows, :cols]
    if mode != 0:
        dst["seqlens_expanded"][:s] = src["seqlens_expanded"][:s]
    dst["dsa_cache_seqlens"][:n] = src["dsa_cache_seqlens"][:n]
    dst["dsa_cu_seqlens_k"][1 : n + 1] = src["dsa_cu_seqlens_k"][1 : n + 1]
    if src.get("real_page_table") is not None:
        c2 = src["real_page_table"].shape[1]
        dst["real_page_table"][:rows, :c2] = src["real_page_table"][:rows, :c2]
    if src.get("flashmla_num_splits") is not None:
        dst["flashmla_num_splits"][: n + 1] = src["flashmla_num_splits"][: n + 1]
        dst["flashmla_metadata"].view(-1).copy_(src["flashmla_metadata"].reshape(-1))


def spec_copy(**kw) -> None:
    """docs/operators/dsa_metadata_copy.md for SGLang's single-set keyword arguments."""
    src = {f: kw.get(SRC_NAME[f]) for f in FIELDS}
    dst = {f: kw.get(f + "_dst") for f in FIELDS}
    _copy_set(src, dst, kw["forward_mode"], kw["bs"], kw["max_len"], kw["max_seqlen_k"], kw["seqlens_expanded_size"])


def spec_copy_multi_seed(**kw) -> None:
    """docs/operators/dsa_metadata_copy.md for SGLang's fused_metadata_copy_multi_cuda (dst0..dst2, DECODE)."""
    src = {f: kw.get(SRC_NAME[f]) for f in FIELDS}
    for j in range(3):
        dst = {f: kw.get(f"{f}_dst{j}") for f in FIELDS}
        _copy_set(src, dst, 0, kw["bs"], kw["max_len"], 0, kw["seqlens_expanded_size"])


# ---- one source set + K destination sets ----------------------------------------------
def _vec(draw, gen, n):
    return strided(garbage(n, I32, gen), gen, lead=draw(st.integers(0, 2)), tail=draw(st.integers(0, 2)))


def _mat(draw, gen, rows, cols):
    return strided(garbage(rows * cols, I32, gen).view(rows, cols), gen, lead=draw(st.integers(0, 2)),
                   row_pad=draw(st.integers(0, 3)), tail=draw(st.integers(0, 2)))


@st.composite
def _sets(draw, k: int, mode: int | None = None):
    """(scalars, src fields, [dst fields] * k) as Strided."""
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1)))
    mode = draw(st.sampled_from([0, 1, 2])) if mode is None else mode
    bs = draw(st.one_of(st.integers(0, 9), st.integers(10, 40), st.sampled_from([127, 128, 129, 257])))
    wide = draw(st.integers(0, 7)) == 0
    max_len = draw(st.sampled_from([1023, 1024, 1025]) if wide else st.integers(0, 12))
    max_seqlen_k = draw(st.sampled_from([1023, 1025]) if wide else st.integers(0, 12))
    if wide:
        bs = min(bs, 3)
    s = draw(st.integers(0, 40)) if not wide else draw(st.integers(0, 3))
    rows = bs if mode == 0 else draw(st.integers(0, 40 if not wide else 3))
    cols = max_len if mode == 0 else max_seqlen_k
    n = bs if mode == 0 else s
    real = draw(st.booleans())
    flash = draw(st.booleans())
    c2 = draw(st.integers(0, 12))
    meta_shape = (draw(st.integers(0, 4)), draw(st.integers(1, 16)))

    src = dict(
        cache_seqlens=_vec(draw, gen, bs + draw(st.integers(0, 2))),
        cu_seqlens_k=_vec(draw, gen, bs + 1 + draw(st.integers(0, 2))),
        page_table_1=_mat(draw, gen, rows + (draw(st.integers(0, 2)) if mode == 0 else 0),
                          cols + draw(st.integers(0, 3))),
        dsa_cache_seqlens=_vec(draw, gen, n + draw(st.integers(0, 2))),
        seqlens_expanded=_vec(draw, gen, s + draw(st.integers(0, 2))) if mode != 0 else None,
        dsa_cu_seqlens_k=_vec(draw, gen, n + 1 + draw(st.integers(0, 2))),
        real_page_table=_mat(draw, gen, rows, c2) if real else None,
        flashmla_num_splits=_vec(draw, gen, n + 1 + draw(st.integers(0, 2))) if flash else None,
        flashmla_metadata=(strided(garbage(meta_shape[0] * meta_shape[1], I32, gen).view(meta_shape), gen,
                                   lead=draw(st.integers(0, 2)), tail=draw(st.integers(0, 2))) if flash else None),
    )
    dsts = []
    for _ in range(k):
        pad = lambda: draw(st.integers(0, 2))  # noqa: E731
        dsts.append(dict(
            cache_seqlens=_vec(draw, gen, bs + pad()),
            cu_seqlens_k=_vec(draw, gen, bs + 1 + pad()),
            page_table_1=_mat(draw, gen, rows + pad(), cols + pad()),
            dsa_cache_seqlens=_vec(draw, gen, n + pad()),
            seqlens_expanded=_vec(draw, gen, s + pad()) if mode != 0 else None,
            dsa_cu_seqlens_k=_vec(draw, gen, n + 1 + pad()),
            real_page_table=_mat(draw, gen, rows + pad(), c2 + pad()) if real else None,
            flashmla_num_splits=_vec(draw, gen, n + 1 + pad()) if flash else None,
            flashmla_metadata=(strided(garbage(meta_shape[0] * meta_shape[1], I32, gen).view(meta_shape), gen,
                                       lead=pad(), tail=pad()) if flash else None),
        ))
    scalars = dict(forward_mode=mode, bs=bs, max_len=max_len, max_seqlen_k=max_seqlen_k, seqlens_expanded_size=s)
    extra = dict(mode=mode, bs=bs, k=k, real=real, flash=flash, wide=wide)
    return scalars, src, dsts, extra


@st.composite
def single_cases(draw) -> Case:
    scalars, src, (dst,), extra = draw(_sets(1))
    args = {SRC_NAME[f]: src[f] for f in FIELDS}
    args.update({f + "_dst": dst[f] for f in FIELDS})
    args.update(scalars)
    return Case(args, tuple(f + "_dst" for f in FIELDS), note="fused_metadata_copy", extra=extra)


@st.composite
def multi_list_cases(draw) -> Case:
    scalars, src, dsts, extra = draw(_sets(draw(st.integers(1, 4))))
    args = {SRC_NAME[f]: src[f] for f in FIELDS}
    args.update({f + "_dst": [d[f] for d in dsts] if dsts[0][f] is not None else [] for f in FIELDS})
    args.update(scalars)
    return Case(args, tuple(f + "_dst" for f in FIELDS), note="fused_metadata_copy_multi", extra=extra)


@st.composite
def multi_seed_cases(draw) -> Case:
    scalars, src, dsts, extra = draw(_sets(3, mode=0))
    fields = [f for f in FIELDS if f != "seqlens_expanded"]
    args = {SRC_NAME[f]: src[f] for f in fields}
    for j, d in enumerate(dsts):
        args.update({f"{f}_dst{j}": d[f] for f in fields})
    args.update(bs=scalars["bs"], max_len=scalars["max_len"], seqlens_expanded_size=scalars["seqlens_expanded_size"])
    outs = tuple(f"{f}_dst{j}" for j in range(3) for f in fields)
    return Case(args, outs, note="fused_metadata_copy_multi_cuda", extra=extra)


def events(case: Case) -> list[str]:
    e = case.extra
    return [f"mode={e['mode']}", f"K={e['k']}", f"real={e['real']}", f"flashmla={e['flash']}",
            "bs=" + ("0" if e["bs"] == 0 else "1" if e["bs"] == 1 else "<=40" if e["bs"] <= 40 else ">=127"),
            f"wide={e['wide']}"]


# ---- entries ---------------------------------------------------------------------------
ENTRIES = [
    dict(name="fused_metadata_copy", op=sgl_meta.fused_metadata_copy, ref=reference.fused_metadata_copy,
         cases=single_cases, events=events, weight=0.3),
    dict(name="fused_metadata_copy_cuda", op=sgl_meta.fused_metadata_copy_cuda, ref=spec_copy, cases=single_cases,
         events=events, weight=0.2),
    dict(name="fused_metadata_copy_multi", op=sgl_meta.fused_metadata_copy_multi,
         ref=reference.fused_metadata_copy_multi, cases=multi_list_cases, events=events, weight=0.3),
    dict(name="fused_metadata_copy_multi_cuda", op=sgl_meta.fused_metadata_copy_multi_cuda, ref=spec_copy_multi_seed,
         cases=multi_seed_cases, events=events, weight=0.2),
]


# ---- bad-input rows (bad_input_table.py) ----------------------------------------------
OP = "fused_metadata_copy"


def _base(gen, device):
    """A valid DECODE call with every optional pair: bs 4, max_len 6."""
    def v(n):
        return torch.randint(0, 1000, (n,), generator=gen, dtype=I32).to(device)

    def m(r, c):
        return torch.randint(0, 1000, (r, c), generator=gen, dtype=I32).to(device)

    return dict(
        cache_seqlens_src=v(4), cu_seqlens_k_src=v(5), page_indices_src=m(4, 6), dsa_cache_seqlens_src=v(4),
        seqlens_expanded_src=None, dsa_cu_seqlens_k_src=v(5), real_page_table_src=m(4, 3),
        flashmla_num_splits_src=v(5), flashmla_metadata_src=m(2, 8),
        cache_seqlens_dst=v(4), cu_seqlens_k_dst=v(5), page_table_1_dst=m(4, 6), dsa_cache_seqlens_dst=v(4),
        seqlens_expanded_dst=None, dsa_cu_seqlens_k_dst=v(5), real_page_table_dst=m(4, 3),
        flashmla_num_splits_dst=v(5), flashmla_metadata_dst=m(2, 8),
        forward_mode=0, bs=4, max_len=6, max_seqlen_k=6, seqlens_expanded_size=4,
    )


OP_MULTI = "fused_metadata_copy_multi"


def _base_multi(gen, device):
    """The same DECODE call into K = 2 destination sets (lists)."""
    kw = _base(gen, device)
    for name in [k for k in kw if k.endswith("_dst")]:
        kw[name] = None if kw[name] is None else [kw[name], kw[name].clone()]
    return kw


BAD_INPUT_BASES = {OP: _base, OP_MULTI: _base_multi}


def _r(id, edit, *names, **kw):
    return Row(id=f"{OP}/{id}", op=OP, edit=edit, names=names, **kw)


def _verify_mode_without_expanded(kw):
    kw.update(forward_mode=1)


BAD_INPUT_ROWS = [
    # "must have dtype int32" is SGLang's wording (its tests match it)
    _r("cache_seqlens_src int64", apply("cache_seqlens_src", lambda t: t.long()), "cache_seqlens_src",
       "must have dtype int32", "torch.int64"),
    _r("page_table_1_dst int64", apply("page_table_1_dst", lambda t: t.long()), "page_table_1_dst",
       "must have dtype int32", "torch.int64"),
    _r("flashmla_metadata_dst float", apply("flashmla_metadata_dst", lambda t: t.float()), "flashmla_metadata_dst"),
    _r("page_indices_src 1-D", apply("page_indices_src", lambda t: t.flatten()), "page_indices_src", "2-D"),
    _r("cache_seqlens_dst shorter than bs", apply("cache_seqlens_dst", lambda t: t[:3]), "cache_seqlens_dst"),
    _r("cu_seqlens_k_dst shorter than bs + 1", apply("cu_seqlens_k_dst", lambda t: t[:4]), "cu_seqlens_k_dst"),
    _r("dsa_cu_seqlens_k_src shorter than bs + 1", apply("dsa_cu_seqlens_k_src", lambda t: t[:4]), "dsa_cu_seqlens_k_src"),
    _r("page_table_1_dst narrower than max_len", apply("page_table_1_dst", lambda t: t[:, :5]), "page_table_1_dst"),
    _r("page_indices_src narrower than max_len", apply("page_indices_src", lambda t: t[:, :5]), "page_indices_src"),
    _r("page_indices_src column step 2", apply("page_indices_src", lambda t: torch.cat([t, t], 1)[:, ::2]),
       "page_indices_src", "stride"),
    _r("negative bs", set_(bs=-1), "bs"),
    _r("negative max_len", set_(max_len=-1), "max_len"),
    _r("forward_mode 3", set_(forward_mode=3), "forward_mode"),
    _r("verify mode without seqlens_expanded", _verify_mode_without_expanded, "seqlens_expanded"),
    _r("real_page_table_src without dst", set_(real_page_table_dst=None), "real_page_table"),
    _r("flashmla num_splits without metadata", set_(flashmla_metadata_src=None, flashmla_metadata_dst=None),
       "flashmla"),
    _r("flashmla metadata numel mismatch", apply("flashmla_metadata_dst", lambda t: t[:1]), "flashmla_metadata"),
    _r("page_table_1_dst on meta", to_device("meta", "page_table_1_dst"), "page_table_1_dst", "meta"),
    _r("missing bs", drop("bs"), "bs", raises=(TypeError,), prefixed=False),
]


def _rm(id, edit, *names, **kw):
    return Row(id=f"{OP_MULTI}/{id}", op=OP_MULTI, edit=edit, names=names, **kw)


def _element(name, i, fn):
    return apply(name, lambda ts: [fn(t) if j == i else t for j, t in enumerate(ts)])


BAD_INPUT_ROWS += [
    _rm("None in cache_seqlens_dst", _element("cache_seqlens_dst", 1, lambda t: None), "cache_seqlens_dst[1]",
        "got None", raises=(TypeError,)),
    _rm("None in page_table_1_dst", _element("page_table_1_dst", 0, lambda t: None), "page_table_1_dst[0]",
        "got None", raises=(TypeError,)),
    _rm("None in real_page_table_dst", _element("real_page_table_dst", 1, lambda t: None), "real_page_table_dst[1]",
        "got None", raises=(TypeError,)),
    _rm("None in flashmla_metadata_dst", _element("flashmla_metadata_dst", 0, lambda t: None),
        "flashmla_metadata_dst[0]", "got None", raises=(TypeError,)),
    _rm("cu_seqlens_k_dst[1] int64", _element("cu_seqlens_k_dst", 1, lambda t: t.long()), "cu_seqlens_k_dst[1]",
        "must have dtype int32", "torch.int64"),
    _rm("dsa_cache_seqlens_src float", apply("dsa_cache_seqlens_src", lambda t: t.float()), "dsa_cache_seqlens_src",
        "must have dtype int32", "torch.float32"),
]
