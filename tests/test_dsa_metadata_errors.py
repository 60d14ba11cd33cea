"""fused_dsa_metadata: bad input raises a clear error naming the op and the argument."""

from __future__ import annotations

import re

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from helpers import assert_same
from dsa_metadata_cases import DRAFT_EXTEND, TARGET_VERIFY, GenCase, clone_sets, lists_of, make_case

DECODE_CASE = GenCase(sets=3)  # bs 5, width 70, page size 4, pool 9
VERIFY = GenCase(mode=TARGET_VERIFY, sets=3)  # n = 15
EXTEND = GenCase(mode=DRAFT_EXTEND, sets=3, total="static")  # n = 15
P1 = GenCase(sets=3, page_size=1)


def kwargs(gen, case=None):
    inputs, sets, scalars = make_case(case or DECODE_CASE, gen, "cpu")
    return {**inputs, **lists_of(sets), **scalars}


def set_(**new):
    return lambda kw: kw.update(new)


def apply(name, fn):
    return lambda kw: kw.update({name: fn(kw[name])})


def at(name, i, fn):
    """Element i of list argument `name` replaced by fn(element)."""
    return apply(name, lambda ts: [fn(t) if j == i else t for j, t in enumerate(ts)])


def share(name, i, j):
    """Set j's `name` is set i's tensor (two sets writing one buffer)."""
    return apply(name, lambda ts: [ts[i] if k == j else t for k, t in enumerate(ts)])


def alias(name, i, onto, offset=0):
    """Element i of `name` becomes a view into element i of `onto`."""
    def edit(kw):
        dst = kw[onto][i]
        kw[name] = [dst[offset:offset + t.numel()] if k == i else t for k, t in enumerate(kw[name])]
    return edit


I32 = "must have dtype int32 (torch.int32), got"
IDX = "must have dtype int32 or int64 (torch.int32 or torch.int64), got"

# name: (case, edit, message substring)
BAD = {
    # dtypes: never a silent cast
    "seq_lens float": (None, apply("seq_lens", lambda t: t.float()), "seq_lens " + IDX + " torch.float32"),
    "req_pool_indices int16": (None, apply("req_pool_indices", lambda t: t.short()), "req_pool_indices " + IDX + " torch.int16"),
    "extend_seq_lens float": (EXTEND, apply("extend_seq_lens", lambda t: t.float()), "extend_seq_lens " + IDX),
    "req_to_token int64": (None, apply("req_to_token", lambda t: t.long()), "req_to_token " + I32 + " torch.int64"),
    "cache_seqlens[1] int64": (None, at("cache_seqlens", 1, lambda t: t.long()), "cache_seqlens[1] " + I32),
    "page_table_1[0] int64": (None, at("page_table_1", 0, lambda t: t.long()), "page_table_1[0] " + I32),
    "real_page_table[2] float": (None, at("real_page_table", 2, lambda t: t.float()), "real_page_table[2] " + I32),
    "paged_mqa_ctx_lens_2d[0] int64": (VERIFY, at("paged_mqa_ctx_lens_2d", 0, lambda t: t.long()), "paged_mqa_ctx_lens_2d[0] " + I32),
    # ranks
    "req_to_token 1-D": (None, apply("req_to_token", lambda t: t[0]), "req_to_token must be 2-D, got 1-D"),
    "seq_lens 2-D": (None, apply("seq_lens", lambda t: t[None]), "seq_lens must be 1-D, got 2-D"),
    "page_table_1[1] 1-D": (None, at("page_table_1", 1, lambda t: t[0]), "page_table_1[1] must be 2-D, got 1-D"),
    "cu_seqlens_k[0] 2-D": (None, at("cu_seqlens_k", 0, lambda t: t[None]), "cu_seqlens_k[0] must be 1-D, got 2-D"),
    # sizes
    "seq_lens short": (None, apply("seq_lens", lambda t: t[:4]), "seq_lens.size(0) must be >= bs = 5, got 4"),
    "req_pool_indices short": (None, apply("req_pool_indices", lambda t: t[:2]), "req_pool_indices.size(0) must be >= bs = 5, got 2"),
    "extend_seq_lens short": (GenCase(mode=DRAFT_EXTEND), apply("extend_seq_lens", lambda t: t[:4]), "extend_seq_lens.size(0) must be >= bs = 5, got 4"),
    "static extend_seq_lens empty": (EXTEND, apply("extend_seq_lens", lambda t: t[:0]), "extend_seq_lens.size(0) must be >= 1 (static_extend_len) = 1, got 0"),
    "req_to_token narrower than max_seqlen_k": (None, apply("req_to_token", lambda t: t[:, :69]), "req_to_token.size(1) must be >= max_seqlen_k = 70, got 69"),
    "cache_seqlens[2] short": (None, at("cache_seqlens", 2, lambda t: t[:4]), "cache_seqlens[2].size(0) must be >= bs = 5, got 4"),
    "cu_seqlens_k[0] short": (None, at("cu_seqlens_k", 0, lambda t: t[:5]), "cu_seqlens_k[0].size(0) must be >= bs + 1 = 6, got 5"),
    "verify dsa_cache_seqlens short": (VERIFY, at("dsa_cache_seqlens", 1, lambda t: t[:14]), "dsa_cache_seqlens[1].size(0) must be >= bs * next_n = 15, got 14"),
    "verify dsa_cu_seqlens_k short": (VERIFY, at("dsa_cu_seqlens_k", 0, lambda t: t[:15]), "dsa_cu_seqlens_k[0].size(0) must be >= bs * next_n + 1 = 16, got 15"),
    "extend seqlens_expanded short": (EXTEND, at("seqlens_expanded", 2, lambda t: t[:14]), "seqlens_expanded[2].size(0) must be >= total_len = 15, got 14"),
    "page_table_1 few rows": (None, at("page_table_1", 0, lambda t: t[:4]), "page_table_1[0].size(0) must be >= bs = 5, got 4"),
    "verify page_table_1 few rows": (VERIFY, at("page_table_1", 0, lambda t: t[:14]), "page_table_1[0].size(0) must be >= bs * next_n = 15, got 14"),
    "page_table_1 narrow": (None, at("page_table_1", 1, lambda t: t[:, :69]), "page_table_1[1].size(1) must be >= max_seqlen_k = 70, got 69"),
    "real_page_table narrow": (None, at("real_page_table", 0, lambda t: t[:, :17]), "real_page_table[0].size(1) must be >= ceil(max_seqlen_k / page_size) = 18, got 17"),
    "paged_mqa_ctx_lens_2d narrow": (VERIFY, at("paged_mqa_ctx_lens_2d", 0, lambda t: t[:, :2]), "paged_mqa_ctx_lens_2d[0].size(1) must be >= next_n = 3, got 2"),
    "paged_mqa_ctx_lens_2d few rows": (VERIFY, at("paged_mqa_ctx_lens_2d", 2, lambda t: t[:4]), "paged_mqa_ctx_lens_2d[2].size(0) must be >= bs = 5, got 4"),
    # inner strides (rows are addressed by stride(0); 1-D tensors read densely)
    "page_table_1 transposed": (GenCase(sets=3, width=5, pad_rows=0, pad_cols=0),
                                at("page_table_1", 0, lambda t: t.t().contiguous().t()), "page_table_1[0] must have inner stride 1"),
    "req_to_token column step 2": (None, apply("req_to_token", lambda t: torch.cat([t, t], 1)[:, ::2]), "req_to_token must have inner stride 1, got stride(1) = 2"),
    "seq_lens step 2": (None, apply("seq_lens", lambda t: torch.cat([t, t])[::2]), "seq_lens must have inner stride 1, got stride(0) = 2"),
    # lists
    "no sets": (None, lambda kw: kw.update({k: [] for k in ("cache_seqlens", "cu_seqlens_k", "dsa_cache_seqlens", "dsa_cu_seqlens_k", "page_table_1", "real_page_table")}),
                "cache_seqlens must hold at least one tensor"),
    "cu_seqlens_k list short": (None, apply("cu_seqlens_k", lambda ts: ts[:2]), "cu_seqlens_k must hold 3 tensors (one per destination set, like cache_seqlens), got 2"),
    "dsa_cu_seqlens_k list long": (None, apply("dsa_cu_seqlens_k", lambda ts: ts + ts[:1]), "dsa_cu_seqlens_k must hold 3 tensors"),
    "page_table_1 list short": (None, apply("page_table_1", lambda ts: ts[:1]), "page_table_1 must hold 0 (not written) or 3 tensors"),
    "real_page_table list short": (None, apply("real_page_table", lambda ts: ts[:2]), "real_page_table must hold 0 (not written) or 3 tensors"),
    "seqlens_expanded in decode": (None, set_(seqlens_expanded=[torch.zeros(5, dtype=torch.int32)] * 3), "seqlens_expanded must be empty in DECODE mode"),
    "verify without seqlens_expanded": (VERIFY, set_(seqlens_expanded=None), "seqlens_expanded must hold 3 tensors (one per destination set) when forward_mode = 1 (TARGET_VERIFY), got 0"),
    "extend seqlens_expanded list short": (EXTEND, apply("seqlens_expanded", lambda ts: ts[:1]), "when forward_mode = 2 (DRAFT_EXTEND), got 1"),
    "paged_mqa_ctx_lens_2d in decode": (None, set_(paged_mqa_ctx_lens_2d=[torch.zeros(5, 3, dtype=torch.int32)] * 3), "paged_mqa_ctx_lens_2d is written in TARGET_VERIFY mode only"),
    "page size 1 real table without page_table_1": (P1, lambda kw: kw.update(real_page_table=kw["page_table_1"], page_table_1=None),
                                                    "at page_size 1 the real page table is the token table: pass it as page_table_1"),
    "extend without extend_seq_lens": (EXTEND, set_(extend_seq_lens=None), "extend_seq_lens is required when forward_mode = 2 (DRAFT_EXTEND)"),
    # outputs that share memory (written concurrently by different blocks)
    "two sets share page_table_1": (None, share("page_table_1", 0, 2), ("page_table_1[0]", "page_table_1[2]", "overlap in memory")),
    "two sets share cache_seqlens": (None, share("cache_seqlens", 1, 2), ("cache_seqlens[1]", "cache_seqlens[2]", "overlap in memory")),
    "cache_seqlens inside cu_seqlens_k": (None, alias("cache_seqlens", 0, "cu_seqlens_k", 1), ("cache_seqlens[0]", "cu_seqlens_k[0]", "overlap in memory")),
    "dsa_cache_seqlens is seqlens_expanded": (VERIFY, alias("dsa_cache_seqlens", 1, "seqlens_expanded"), ("seqlens_expanded[1]", "dsa_cache_seqlens[1]", "overlap")),
    "real_page_table is page_table_1 at page size 4": (None, lambda kw: kw.update(real_page_table=[t[:, :18] for t in kw["page_table_1"]]),
                                                       ("real_page_table[", "page_table_1[", "overlap in memory")),
    "page_table_1 rows overlap (expand)": (None, at("page_table_1", 1, lambda t: t[:1].expand(t.shape[0], -1)), "page_table_1[1] rows overlap: stride(0) = 0 < 70 columns written per row"),
    # scalars
    "forward_mode 3": (None, set_(forward_mode=3), "forward_mode must be 0 (DECODE), 1 (TARGET_VERIFY) or 2 (DRAFT_EXTEND), got 3"),
    "forward_mode -1": (None, set_(forward_mode=-1), "forward_mode must be 0"),
    "negative bs": (None, set_(bs=-1), "bs must be >= 0, got -1"),
    "negative max_seqlen_k": (None, set_(max_seqlen_k=-1), "max_seqlen_k must be >= 0, got -1"),
    "negative dsa_index_topk": (None, set_(dsa_index_topk=-5), "dsa_index_topk must be >= 0, got -5"),
    "page_size 0": (None, set_(page_size=0), "page_size must be >= 1, got 0"),
    "negative total_len": (EXTEND, set_(total_len=-1), "total_len must be >= 0, got -1"),
    "verify without next_n": (VERIFY, set_(next_n=None), "next_n is required in TARGET_VERIFY mode (draft tokens per request), got None"),
    "verify next_n 0": (VERIFY, set_(next_n=0), "next_n must be >= 1 in TARGET_VERIFY mode"),
    "extend without total_len": (EXTEND, set_(total_len=None), "total_len is required in DRAFT_EXTEND mode (expanded rows), got None"),
    "bs past int32": (None, set_(bs=2**31), "bs = 2147483648 is outside [0, 2147483647]"),
    "max_seqlen_k past int32": (None, set_(max_seqlen_k=2**31), "max_seqlen_k = 2147483648 is outside"),
    "dsa_index_topk past int32": (None, set_(dsa_index_topk=2**40), "dsa_index_topk = 1099511627776 is outside"),
    "page_size past int32": (None, set_(page_size=2**31), "page_size = 2147483648 is outside [1, 2147483647]"),
    "next_n past int32": (VERIFY, set_(next_n=2**32), "next_n = 4294967296 is outside"),
    "total_len past int32": (EXTEND, set_(total_len=2**31), "total_len = 2147483648 is outside"),
    "bs * next_n past int32": (VERIFY, set_(next_n=2**30), "bs * next_n = 5368709120 must be <= 2147483647"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input(name, gen):
    case, edit, message = BAD[name]
    kw = kwargs(gen, case)
    edit(kw)
    with pytest.raises(RuntimeError, match="sgl_meta.fused_dsa_metadata: ") as err:
        sgl_meta.fused_dsa_metadata(**kw)
    for part in (message,) if isinstance(message, str) else message:
        assert part in str(err.value)


@pytest.mark.parametrize("name", ["page_table_1", "cu_seqlens_k", "seqlens_expanded"])
def test_none_in_a_list_is_named(name, gen):
    kw = kwargs(gen, VERIFY)
    kw[name] = [kw[name][0], kw[name][1], None]
    with pytest.raises(TypeError, match=rf"sgl_meta.fused_dsa_metadata: {name}\[2\] must be a Tensor, got None"):
        sgl_meta.fused_dsa_metadata(**kw)


@pytest.mark.parametrize("name", ["seq_lens", "req_to_token"])
def test_none_for_a_required_tensor(name, gen):
    kw = kwargs(gen)
    kw[name] = None
    with pytest.raises(TypeError, match=f"sgl_meta.fused_dsa_metadata: {name} must be a Tensor, got None"):
        sgl_meta.fused_dsa_metadata(**kw)


def test_none_for_a_required_list(gen):
    kw = kwargs(gen)
    kw["dsa_cu_seqlens_k"] = None
    with pytest.raises(TypeError, match="dsa_cu_seqlens_k must be a list of tensors, got NoneType"):
        sgl_meta.fused_dsa_metadata(**kw)


@pytest.mark.parametrize("name", ["fused_dsa_decode_metadata", "fused_dsa_draft_extend_metadata"])
def test_dropin_none_for_a_required_tensor(name, gen):
    from test_dsa_metadata import UPSTREAM_PARAMS, dropin_args

    case = GenCase(mode=0 if "decode" in name else DRAFT_EXTEND, total="static")
    inputs, (d,), scalars = make_case(case, gen, "cpu")
    args = dict(zip(UPSTREAM_PARAMS[name], dropin_args(name, inputs, d, scalars, case)))
    args["dsa_cache_seqlens"] = None
    with pytest.raises(TypeError, match=f"sgl_meta.{name}: dsa_cache_seqlens must be a Tensor, got None"):
        getattr(sgl_meta, name)(**args)


@pytest.mark.parametrize("scalar", ["bs", "total_len", "max_total_len", "max_extend_len"])
@pytest.mark.parametrize("value, got", [(None, "NoneType"), ("3", "str"), (3.0, "float")])
def test_dropin_draft_extend_scalar_not_an_int(scalar, value, got, gen):
    """Upstream's asserts compare these before anything else reads them: a named TypeError first."""
    from test_dsa_metadata import UPSTREAM_PARAMS, dropin_args

    name = "fused_dsa_draft_extend_metadata"
    case = GenCase(mode=DRAFT_EXTEND, total="static")
    inputs, (d,), scalars = make_case(case, gen, "cpu")
    args = dict(zip(UPSTREAM_PARAMS[name], dropin_args(name, inputs, d, scalars, case)))
    args[scalar] = value
    with pytest.raises(TypeError, match=f"sgl_meta.{name}: {scalar} must be an int, got {got}"):
        getattr(sgl_meta, name)(**args)


def test_bad_input_leaves_outputs_untouched(gen):
    """Checks run before anything is written."""
    inputs, sets, scalars = make_case(GenCase(sets=3), gen, "cpu")
    out = clone_sets(sets)
    lists = lists_of(out)
    lists["real_page_table"][2] = lists["real_page_table"][2][:, :3]
    with pytest.raises(RuntimeError, match=r"real_page_table\[2\]"):
        sgl_meta.fused_dsa_metadata(**inputs, **lists, **scalars)
    for before, after in zip(sets, out):
        for k, v in before.items():
            assert v is None or torch.equal(after[k], v), k


# --- hostile device values on CPU (CUDA: tests/reliability/hostile_table.py) ---


@pytest.mark.parametrize(
    "case, edit, message",
    [
        (DECODE_CASE, lambda kw: kw["req_pool_indices"].__setitem__(3, 9), "req_pool_indices[3] = 9 is outside [0, req_to_token.size(0) = 9)"),
        (VERIFY, lambda kw: kw["req_pool_indices"].__setitem__(0, -1), "req_pool_indices[0] = -1 is outside"),
        (GenCase(mode=DRAFT_EXTEND, lens="zero", sets=2), lambda kw: kw["req_pool_indices"].__setitem__(4, 10**6),
         "req_pool_indices[4] = 1000000 is outside"),  # a zero-length row is still checked
        # total_len past the extend lengths' sum: never 0 (a call of no token reads no extend length)
        (GenCase(mode=DRAFT_EXTEND, total="more"), lambda kw: kw["extend_seq_lens"].__setitem__(2, -1),
         "extend_seq_lens[2] = -1 is negative"),
        (EXTEND, lambda kw: kw["extend_seq_lens"].__setitem__(0, -3), "extend_seq_lens[0] = -3 is negative"),
    ],
)
def test_cpu_hostile_values_raise_before_writing(case, edit, message, gen):
    inputs, sets, scalars = make_case(case, gen, "cpu")
    out = clone_sets(sets)
    kw = {**inputs, **lists_of(out), **scalars}
    edit(kw)
    with pytest.raises(RuntimeError, match="sgl_meta.fused_dsa_metadata: ") as err:
        sgl_meta.fused_dsa_metadata(**kw)
    assert message in str(err.value)
    for before, after in zip(sets, out):
        for k, v in before.items():
            assert v is None or torch.equal(after[k], v), k


def _no_page_tables_hostile_index(kw):
    kw.update(page_table_1=None, real_page_table=None)
    kw["req_pool_indices"][0] = -(10**6)


@pytest.mark.parametrize(
    "case, edit",
    [
        (DECODE_CASE, _no_page_tables_hostile_index),  # no page table: indices are not read
        (EXTEND, lambda kw: kw["extend_seq_lens"].__setitem__(slice(1, None), -7)),  # static: only [0] is read
        (GenCase(mode=DRAFT_EXTEND, total="zero"), lambda kw: kw["extend_seq_lens"].fill_(-7)),  # total_len 0
    ],
    ids=["no_page_tables", "static_extend_tail", "total_len_zero"],
)
def test_cpu_hostile_values_not_read_are_fine(case, edit, gen):
    """No error, and the same outputs as the reference from the same arguments.
    (Every case also carries hostile values past bs: make_case appends them.)"""
    inputs, sets, scalars = make_case(case, gen, "cpu")
    kw = {**inputs, **lists_of(sets), **scalars}
    edit(kw)
    got, want = clone_sets(sets), clone_sets(sets)
    # each call on its own copies of the destinations the edit left in place
    sgl_meta.fused_dsa_metadata(**{**kw, **{k: v for k, v in lists_of(got).items() if kw[k] is not None}})
    reference.fused_dsa_metadata(**{**kw, **{k: v for k, v in lists_of(want).items() if kw[k] is not None}})
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same(g, w, f"set {i}")
    assert not all(torch.equal(g["cache_seqlens"], s["cache_seqlens"]) for g, s in zip(got, sets))  # it wrote


def test_meta_element_of_a_list_named(gen):
    """A meta tensor among CPU ones reaches the fake kernel: it names the list element."""
    kw = kwargs(gen)
    kw["page_table_1"][1] = kw["page_table_1"][1].to("meta")
    with pytest.raises(RuntimeError, match=re.escape("page_table_1[1] is on meta but seq_lens is on cpu")):
        sgl_meta.fused_dsa_metadata(**kw)


@pytest.mark.gpu
@pytest.mark.parametrize("multi", [False, True])
def test_mixed_devices_named(multi, gen):
    kw = kwargs(gen)
    for k, v in kw.items():
        if isinstance(v, torch.Tensor) and k != "seq_lens":
            kw[k] = v.cuda()
        elif isinstance(v, list):
            kw[k] = [t.cuda() for t in v]
    if multi:
        kw["seq_lens"] = kw["seq_lens"].cuda()
        kw["page_table_1"][1] = kw["page_table_1"][1].cpu()
        message = re.escape("page_table_1[1] is on cpu but the other tensors are on cuda:0")
    else:
        message = "seq_lens is on cpu but the other tensors are on cuda:0"
    with pytest.raises(RuntimeError, match=message):
        sgl_meta.fused_dsa_metadata(**kw)
