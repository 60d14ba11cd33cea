"""fused_metadata_copy / fused_metadata_copy_multi: bad input raises a clear error."""

from __future__ import annotations

import pytest
import torch

import sgl_meta
from dsa_metadata_copy_cases import DECODE, DRAFT_EXTEND, TARGET_VERIFY, DsaCase, make_case, multi_lists

# Every test runs through the eager fast path and through torch.ops (conftest.py).
pytestmark = pytest.mark.usefixtures("call_path")


def single_kwargs(gen, case=None):
    sources, dests, scalars = make_case(case or DsaCase(), gen, "cpu")
    return {**sources, **dests[0], **scalars}


def multi_kwargs(gen, case=None):
    sources, dests, scalars = make_case(case or DsaCase(sets=3), gen, "cpu")
    return {**sources, **multi_lists(dests), **scalars}


def set_(**new):
    return lambda kw: kw.update(new)


def apply(name, fn):
    return lambda kw: kw.update({name: fn(kw[name])})


VERIFY = DsaCase(mode=TARGET_VERIFY)

# name: (case, change, message) for the single op.
BAD_SINGLE = {
    "forward_mode 3": (None, set_(forward_mode=3), "forward_mode must be 0 (DECODE), 1 (TARGET_VERIFY) or 2"),
    "forward_mode -1": (None, set_(forward_mode=-1), "forward_mode must be 0"),
    "negative bs": (None, set_(bs=-1), "bs must be >= 0, got -1"),
    "decode without max_len": (None, set_(max_len=None), "max_len is required in DECODE mode (columns of page_indices_src copied), got None"),
    "decode negative max_len": (None, set_(max_len=-3), "max_len must be >= 0 in DECODE mode"),
    "verify without max_seqlen_k": (VERIFY, set_(max_seqlen_k=None), "max_seqlen_k is required in TARGET_VERIFY mode"),
    "verify without seqlens_expanded_size": (VERIFY, set_(seqlens_expanded_size=None), "seqlens_expanded_size is required in TARGET_VERIFY mode, got None"),
    "verify negative size": (VERIFY, set_(seqlens_expanded_size=-1), "seqlens_expanded_size must be >= 0 in TARGET_VERIFY mode, got -1"),
    "page_indices_src int64": (None, apply("page_indices_src", lambda t: t.long()), "page_indices_src must have dtype int32 (torch.int32), got torch.int64"),
    "cache_seqlens_src float": (None, apply("cache_seqlens_src", lambda t: t.float()), "cache_seqlens_src must have dtype int32 (torch.int32), got torch.float32"),
    "page_indices_src 1-D": (None, apply("page_indices_src", lambda t: t[0]), "page_indices_src must be 2-D, got 1-D"),
    "page_indices_src few rows": (None, apply("page_indices_src", lambda t: t[:3]), "page_indices_src.size(0) must be >= bs = 5, got 3"),
    "page_indices_src narrow": (None, apply("page_indices_src", lambda t: t[:, :30]), "page_indices_src.size(1) must be >= max_len = 37, got 30"),
    "verify page_indices_src narrow": (VERIFY, apply("page_indices_src", lambda t: t[:, :40]), "page_indices_src.size(1) must be >= max_seqlen_k = 41"),
    "page_indices_src transposed": (
        DsaCase(max_len=5, src_extra_cols=0, src_extra_rows=0),
        apply("page_indices_src", lambda t: t.t().contiguous().t()),
        "page_indices_src must have inner stride 1",
    ),
    "page_table_1_dst rows aliased (expand)": (None, apply("page_table_1_dst", lambda t: t[:1].expand(t.shape[0], -1)), "page_table_1_dst rows overlap: stride(0) = 0 < 37 columns written per row"),
    "real_page_table_dst rows overlap": (None, apply("real_page_table_dst", lambda t: torch.zeros(t.shape[0] * 2 + t.shape[1], dtype=torch.int32).as_strided(t.shape, (2, 1))), "real_page_table_dst rows overlap: stride(0) = 2 < 3 columns written per row"),
    "page_table_1_dst narrow": (None, apply("page_table_1_dst", lambda t: t[:, :36]), "page_table_1_dst.size(1) must be >= max_len = 37, got 36"),
    "page_table_1_dst few rows": (None, apply("page_table_1_dst", lambda t: t[:4]), "page_table_1_dst.size(0) must be >= bs = 5, got 4"),
    "verify page_table_1_dst few rows": (VERIFY, apply("page_table_1_dst", lambda t: t[:19]), "page_table_1_dst.size(0) must be >= page_indices_src.size(0) = 20, got 19"),
    "cache_seqlens_dst short": (None, apply("cache_seqlens_dst", lambda t: t[:4]), "cache_seqlens_dst.size(0) must be >= bs = 5, got 4"),
    "cu_seqlens_k_src short": (None, apply("cu_seqlens_k_src", lambda t: t[:5]), "cu_seqlens_k_src.size(0) must be >= bs + 1 = 6, got 5"),
    "cu_seqlens_k_dst 2-D": (None, apply("cu_seqlens_k_dst", lambda t: t.view(1, -1)), "cu_seqlens_k_dst must be 1-D, got 2-D"),
    "dsa_cache_seqlens_dst short": (None, apply("dsa_cache_seqlens_dst", lambda t: t[:4]), "dsa_cache_seqlens_dst.size(0) must be >= bs = 5"),
    "verify dsa_cu_seqlens_k_dst short": (VERIFY, apply("dsa_cu_seqlens_k_dst", lambda t: t[:20]), "dsa_cu_seqlens_k_dst.size(0) must be >= seqlens_expanded_size + 1 = 21, got 20"),
    "verify dsa_cache_seqlens_src short": (VERIFY, apply("dsa_cache_seqlens_src", lambda t: t[:19]), "dsa_cache_seqlens_src.size(0) must be >= seqlens_expanded_size = 20"),
    "verify without seqlens_expanded_src": (VERIFY, set_(seqlens_expanded_src=None), "seqlens_expanded_src is required when forward_mode = 1 (TARGET_VERIFY)"),
    "draft extend without seqlens_expanded_dst": (
        DsaCase(mode=DRAFT_EXTEND),
        set_(seqlens_expanded_dst=None),
        "seqlens_expanded_dst is required when forward_mode = 2 (DRAFT_EXTEND)",
    ),
    "verify seqlens_expanded_dst short": (VERIFY, apply("seqlens_expanded_dst", lambda t: t[:19]), "seqlens_expanded_dst.size(0) must be >= seqlens_expanded_size = 20"),
    "decode seqlens_expanded unpaired": (
        DsaCase(expanded_in_decode=True),
        set_(seqlens_expanded_dst=None),
        "seqlens_expanded_src and seqlens_expanded_dst must be given together",
    ),
    "real_page_table_dst missing": (None, set_(real_page_table_dst=None), "real_page_table_src and real_page_table_dst must be given together (got real_page_table_src, real_page_table_dst=None)"),
    "real_page_table_src missing": (None, set_(real_page_table_src=None), "(got real_page_table_src=None, real_page_table_dst)"),
    "real_page_table_dst narrow": (None, apply("real_page_table_dst", lambda t: t[:, :2]), "real_page_table_dst.size(1) must be >= real_page_table_src.size(1) = 3, got 2"),
    "real_page_table_src few rows": (None, apply("real_page_table_src", lambda t: t[:4]), "real_page_table_src.size(0) must be >= bs = 5, got 4"),
    "flashmla metadata src missing": (None, set_(flashmla_metadata_src=None), "flashmla_num_splits_src and flashmla_metadata_src must be given together"),
    "flashmla num_splits dst missing": (None, set_(flashmla_num_splits_dst=None), "flashmla_num_splits_src and flashmla_num_splits_dst must be given together"),
    "flashmla metadata dst missing": (None, set_(flashmla_metadata_dst=None), "flashmla_metadata_src and flashmla_metadata_dst must be given together"),
    "flashmla num_splits short": (None, apply("flashmla_num_splits_dst", lambda t: t[:5]), "flashmla_num_splits_dst.size(0) must be >= bs + 1 = 6, got 5"),
    "flashmla metadata numel": (None, apply("flashmla_metadata_dst", lambda t: t[:-1]), "flashmla_metadata_dst.numel() must equal flashmla_metadata_src.numel() = 528, got 520"),
    "flashmla metadata not contiguous": (None, apply("flashmla_metadata_src", lambda t: t.t()), "flashmla_metadata_src must be contiguous"),
    "flashmla metadata int64": (None, apply("flashmla_metadata_dst", lambda t: t.long()), "flashmla_metadata_dst must have dtype int32 (torch.int32)"),
}


@pytest.mark.parametrize("name", sorted(BAD_SINGLE))
def test_bad_input_single(name, gen):
    case, change, message = BAD_SINGLE[name]
    kw = single_kwargs(gen, case)
    change(kw)
    with pytest.raises(RuntimeError, match="sgl_meta.fused_metadata_copy: ") as err:
        sgl_meta.fused_metadata_copy(**kw)
    assert message in str(err.value)


def drop(name, i):
    return apply(name, lambda ts: [t for j, t in enumerate(ts) if j != i])


def at(name, i, fn):
    return apply(name, lambda ts: [fn(t) if j == i else t for j, t in enumerate(ts)])


BAD_MULTI = {
    "no sets": (
        None,
        lambda kw: kw.update({k: [] for k in kw if k.endswith("_dst") and kw[k] is not None}),
        "cache_seqlens_dst must hold at least one tensor",
    ),
    "short list": (None, drop("page_table_1_dst", 1), "page_table_1_dst must hold 3 tensors (one per destination set, like cache_seqlens_dst), got 2"),
    "optional list without source": (None, set_(real_page_table_src=None), "real_page_table_dst must be empty (real_page_table_src is None), got 3 tensors"),
    "source without optional list": (None, set_(flashmla_num_splits_dst=None), "flashmla_num_splits_dst must hold 3 tensors (one per destination set, as flashmla_num_splits_src is given), got 0"),
    "optional list short": (None, drop("flashmla_metadata_dst", 0), "flashmla_metadata_dst must hold 3 tensors"),
    "verify without seqlens_expanded": (
        DsaCase(mode=TARGET_VERIFY, sets=3),
        set_(seqlens_expanded_dst=None),
        "seqlens_expanded_src and 3 seqlens_expanded_dst tensors (one per destination set) are required when forward_mode = 1",
    ),
    "element named by index": (None, at("page_table_1_dst", 1, lambda t: t[:, :10]), "page_table_1_dst[1].size(1) must be >= max_len = 37, got 10"),
    "element dtype": (None, at("cu_seqlens_k_dst", 2, lambda t: t.long()), "cu_seqlens_k_dst[2] must have dtype int32 (torch.int32)"),
    "element metadata numel": (None, at("flashmla_metadata_dst", 2, lambda t: t[1:]), "flashmla_metadata_dst[2].numel() must equal flashmla_metadata_src.numel()"),
    "bad mode": (None, set_(forward_mode=7), "forward_mode must be 0"),
    "decode without max_len": (None, set_(max_len=None), "max_len is required in DECODE mode"),
}


@pytest.mark.parametrize("name", sorted(BAD_MULTI))
def test_bad_input_multi(name, gen):
    case, change, message = BAD_MULTI[name]
    kw = multi_kwargs(gen, case)
    change(kw)
    with pytest.raises(RuntimeError, match="sgl_meta.fused_metadata_copy_multi: ") as err:
        sgl_meta.fused_metadata_copy_multi(**kw)
    assert message in str(err.value)


def test_bad_input_leaves_outputs_untouched(gen):
    """Checks run before anything is written (a failing call has no side effects)."""
    case = DsaCase(sets=3)
    sources, dests, scalars = make_case(case, gen, "cpu")
    before = [{k: (None if v is None else v.clone()) for k, v in d.items()} for d in dests]
    lists = multi_lists(dests)
    lists["page_table_1_dst"] = [*lists["page_table_1_dst"][:2], lists["page_table_1_dst"][2][:, :3]]
    with pytest.raises(RuntimeError, match=r"page_table_1_dst\[2\]"):
        sgl_meta.fused_metadata_copy_multi(**sources, **lists, **scalars)
    for b, d in zip(before, dests):
        for k, v in d.items():
            assert v is None or torch.equal(v, b[k]), k


@pytest.mark.parametrize("mode", [DECODE, TARGET_VERIFY])
def test_bs0_is_a_noop_even_with_unchecked_garbage(mode, gen):
    """bs == 0 returns before any tensor is looked at (docs/operators.md: no-op, no
    error): every tensor, the poisoned destinations included, keeps its values."""
    kw = single_kwargs(gen, DsaCase(mode=mode, bs=0))
    kw["page_table_1_dst"] = kw["page_table_1_dst"][:0, :0]
    assert_call_changes_nothing(sgl_meta.fused_metadata_copy, kw)
    kw = multi_kwargs(gen, DsaCase(mode=mode, bs=0, sets=2))
    kw["page_table_1_dst"] = kw["page_table_1_dst"][:1]
    assert_call_changes_nothing(sgl_meta.fused_metadata_copy_multi, kw)


def assert_call_changes_nothing(fn, kw):
    def tensors():  # by name, the destination lists flattened
        for k, v in kw.items():
            for i, t in enumerate(v if isinstance(v, list) else [v]):
                if isinstance(t, torch.Tensor) and t.numel():
                    yield (f"{k}[{i}]" if isinstance(v, list) else k), t

    before = {name: t.clone() for name, t in tensors()}
    assert any(name.endswith("_dst") or "_dst[" in name for name in before)  # poisoned destinations to watch
    fn(**kw)
    for name, t in tensors():
        assert torch.equal(t, before[name]), f"{name} changed"


@pytest.mark.parametrize("multi", [False, True], ids=["single", "multi"])
def test_mixed_devices_named(multi, gen):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    kw = multi_kwargs(gen) if multi else single_kwargs(gen)
    for k, v in kw.items():
        if isinstance(v, torch.Tensor) and k != "flashmla_num_splits_src":
            kw[k] = v.cuda()
        elif isinstance(v, list):
            kw[k] = [t.cuda() for t in v]
    with pytest.raises(RuntimeError, match="flashmla_num_splits_src is on cpu but the other tensors are on cuda:0"):
        (sgl_meta.fused_metadata_copy_multi if multi else sgl_meta.fused_metadata_copy)(**kw)
