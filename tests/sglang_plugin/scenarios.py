"""Argument sets shaped like SGLang 0.5.23's calls of the hooked functions.

A scenario gives a value for every parameter of the SGLang function (CPU
tensors: int64 request indices and lengths, int32 tables, an int64 full->SWA
mapping with a trailing -1, SGLang's zero-initialised element 0 of the
cumulative sums, output buffers wider and taller than the rows written, all
other output elements poisoned). A test then passes only what a real call
site passes. ``make(name, seed)`` builds fresh tensors, so two runs (0.5.23's
model and ours) get equal inputs, aliases included.
"""

from __future__ import annotations

import torch

I32, I64 = torch.int32, torch.int64


class _Rand:
    def __init__(self, seed: int):
        self.g = torch.Generator().manual_seed(seed)

    def ints(self, lo, hi, shape, dtype=I32):
        return torch.randint(lo, hi, shape, generator=self.g, dtype=I64).to(dtype)

    def poison(self, shape, dtype=I32):
        t = self.ints(-(2**31), 2**31 - 1, shape, dtype)
        return t.masked_fill(t == 0, 12345)


# ---- update_trtllm_mha_graph_metadata ----------------------------------------------------
UPDATE = {
    # name: (swa, seqlen_offset, q_mode, skip_page_table)
    "decode": (False, 0, 0, False),
    "decode_swa": (True, 0, 0, False),
    "draft_decode_swa": (True, 2, 0, False),
    "target_verify_swa": (True, 4, 0, False),
    "draft_extend_v2": (True, 0, 2, False),
    "unified": (False, 0, 0, True),
    "unified_swa": (True, 0, 0, True),
    "bs0": (True, 0, 0, False),
}


def update(name: str, seed: int, page_size: int = 16) -> dict:
    swa, offset, q_mode, skip = UPDATE[name]
    r = _Rand(seed)
    ps, max_bs, pages = page_size, 7, 6
    bs = 0 if name == "bs0" else 5
    full = 40 * ps
    ctx = pages * ps + 3
    seq_lens = r.ints(0, pages * ps + 2 * ps, (max_bs,), I64)
    seq_lens[:4] = torch.tensor([0, 1, ps, pages * ps])  # empty, one token, exactly a page, full width
    cu_k = r.poison((max_bs + 1,))
    cu_k[0] = 0
    cu_q = r.poison((max_bs + 1,))
    cu_q[0] = 0
    mapping = r.ints(0, 20 * ps, (full + ps + 1,), I64)
    mapping[r.ints(0, full, (12,), I64)] = -1  # unmapped slots (SWA page -1)
    mapping[-1] = -1  # 0.5.23's trailing sentinel
    out_loc = r.ints(0, full, (9,), I64)
    out_loc[3] = -1
    return dict(
        req_pool_indices=r.ints(0, 9, (max_bs,), I64),
        seq_lens=seq_lens,
        req_to_token=r.ints(0, full, (9, ctx)),
        cache_seqlens=r.poison((max_bs,)),
        cu_seqlens_k=cu_k,
        page_table=None if skip else r.poison((max_bs, pages)),
        bs=bs,
        seqlen_offset=offset,
        max_seq_pages=pages,
        page_size=ps,
        swa_mapping=mapping if swa else None,
        swa_page_table=None if (skip or not swa) else r.poison((max_bs, pages)),
        out_cache_loc=out_loc if swa else None,  # read only for swa_out_cache_loc
        swa_out_cache_loc=None if (skip or not swa) else r.poison((12,), I64),
        cu_seqlens_q=cu_q if q_mode else None,
        qlens=None,
        q_stride=3 if q_mode == 2 else 0,
        q_mode=q_mode,
        skip_page_table=skip,
    )


# ---- build_trtllm_mha_page_table ---------------------------------------------------------
PAGE_TABLE = ("full", "swa", "swa_strided_rows")


def page_table(name: str, seed: int, page_size: int = 16) -> dict:
    r = _Rand(seed)
    ps, bs, pages = page_size, 5, 6
    full = 40 * ps
    lens = r.ints(0, pages * ps + 1, (bs,))
    lens[:3] = torch.tensor([0, 1, pages * ps])
    table = r.poison((bs, pages))
    swa_table = r.poison((bs + 2, pages + 3))  # a wider graph buffer; rows addressed by stride(0)
    if name == "swa_strided_rows":
        table = r.poison((bs + 2, pages + 3))[:bs, :pages]
    return dict(
        req_to_token=r.ints(0, full, (9, pages * ps + 5)),
        req_pool_indices=r.ints(0, 9, (bs,), I64),
        cache_seqlens=lens,
        page_table=table,
        page_size=ps,
        swa_page_table=None if name == "full" else swa_table,
        full_to_swa=None if name == "full" else r.ints(0, 20 * ps, (full + ps + 1,), I64),
    )


# ---- fused_metadata_copy_cuda / fused_metadata_copy_multi_cuda ---------------------------
DSA = {
    # name: (forward_mode, real page table, FlashMLA)
    "decode": (0, False, False),
    "decode_real": (0, True, False),
    "decode_real_flashmla": (0, True, True),
    "target_verify": (1, False, False),
    "target_verify_real_flashmla": (1, True, True),
}


def _dsa_sources(r: _Rand, mode: int, bs: int, width: int, next_n: int, real: bool, flashmla: bool) -> dict:
    rows = bs if mode == 0 else bs * next_n
    n = bs if mode == 0 else rows
    cache = r.ints(1, 500, (bs,))
    src = dict(
        cache_seqlens=cache,
        cu_seqlens_k=torch.nn.functional.pad(cache.cumsum(0).to(I32), (1, 0)),
        page_indices=r.ints(0, 5000, (rows, width)),
        dsa_cache_seqlens=r.ints(1, 64, (n,)),
        seqlens_expanded=cache if mode == 0 else r.ints(1, 500, (n,)),  # DECODE: cache_seqlens itself
        dsa_cu_seqlens_k=r.ints(0, 5000, (n + 1,)),
        real_page_table=r.ints(0, 300, (rows, width // 4)) if real else None,
        flashmla_num_splits=r.ints(1, 9, (n + 1,)) if flashmla else None,
        flashmla_metadata=r.ints(0, 100, (4, 8)) if flashmla else None,
    )
    return src


def _dsa_dests(r: _Rand, src: dict, mode: int, width: int) -> dict:
    rows = src["page_indices"].shape[0]
    n = src["dsa_cache_seqlens"].numel()
    cache = r.poison((src["cache_seqlens"].numel() + 2,))
    cu = r.poison((cache.numel() + 1,))
    cu[0] = 0
    dsa_cu = r.poison((n + 3,))
    dsa_cu[0] = 0
    real, flashmla = src["real_page_table"] is not None, src["flashmla_num_splits"] is not None
    return dict(
        cache_seqlens=cache,
        cu_seqlens_k=cu,
        page_table_1=r.poison((rows + 2, width)),
        dsa_cache_seqlens=r.poison((n + 2,)),
        seqlens_expanded=cache if mode == 0 else r.poison((n + 2,)),  # DECODE: the graph's cache_seqlens
        dsa_cu_seqlens_k=dsa_cu,
        real_page_table=r.poison((rows + 2, width // 4 + 3)) if real else None,
        flashmla_num_splits=r.poison((n + 3,)) if flashmla else None,
        flashmla_metadata=r.poison((4, 8)) if flashmla else None,
    )


_SRC_PARAMS = ("cache_seqlens_src", "cu_seqlens_k_src", "page_indices_src", "dsa_cache_seqlens_src",
               "seqlens_expanded_src", "dsa_cu_seqlens_k_src", "real_page_table_src", "flashmla_num_splits_src",
               "flashmla_metadata_src")
_DST_KEYS = ("cache_seqlens", "cu_seqlens_k", "page_table_1", "dsa_cache_seqlens", "seqlens_expanded",
             "dsa_cu_seqlens_k", "real_page_table", "flashmla_num_splits", "flashmla_metadata")


def dsa_copy(name: str, seed: int) -> dict:
    """dsa_metadata_manager's call: precomputed staging buffers -> one graph's buffers."""
    mode, real, flashmla = DSA[name]
    r = _Rand(seed)
    bs, width, next_n = 5, 24, 3
    src = _dsa_sources(r, mode, bs, width, next_n, real, flashmla)
    dst = _dsa_dests(r, src, mode, width)
    out = dict(zip(_SRC_PARAMS, src.values()))
    out.update({f"{k}_dst": dst[k] for k in _DST_KEYS})
    out.update(forward_mode=mode, bs=bs, max_len=width if mode == 0 else -1, max_seqlen_k=width,
               seqlens_expanded_size=src["dsa_cache_seqlens"].numel())
    return out


DSA_MULTI = ("decode", "decode_real", "decode_real_flashmla")


def dsa_copy_multi(name: str, seed: int) -> dict:
    """dsa_backend's call: precomputed staging buffers -> three draft graphs' buffers."""
    _, real, flashmla = DSA[name]
    r = _Rand(seed)
    bs, width = 5, 24
    src = _dsa_sources(r, 0, bs, width, 1, real, flashmla)
    out = {p: src[p.removesuffix("_src")] for p in _SRC_PARAMS if p != "seqlens_expanded_src"}
    for k in range(3):
        dst = _dsa_dests(r, src, 0, width)
        out.update({f"{f}_dst{k}": dst[f] for f in _DST_KEYS if f != "seqlens_expanded"})
    out.update(bs=bs, max_len=width, seqlens_expanded_size=bs)
    return out
