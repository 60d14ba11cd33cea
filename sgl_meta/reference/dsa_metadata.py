"""Eager reference of the DSA metadata generator (docs/operators/dsa_metadata.md).

Plain torch ops on any device, no host sync (capturable in a CUDA graph): the
metadata is computed once, vectorised over the expanded rows, then written into
each destination set. Page rows are gathered at the full column bound and
merged under a live-prefix mask, the way an eager path without data-dependent
shapes has to (so this is the full-width "before" of the benchmarks).
Arithmetic is done in int64 and wrapped to int32 explicitly, matching the
kernels' two's-complement int32 sums.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from .. import dsa_metadata as dropins
from .._op import adapt_reference
from ._lengths import RunningSum, check_length, on_host, values

DECODE, TARGET_VERIFY, DRAFT_EXTEND = 0, 1, 2
OP = "fused_dsa_metadata"


def _wrap32(x: torch.Tensor) -> torch.Tensor:
    """int64 -> the int32 value with the same low 32 bits (still int64)."""
    low = torch.bitwise_and(x, 0xFFFFFFFF)
    return torch.where(low >= 2**31, low - 2**32, low)


def _expanded_rows(mode, bs, n, seq, cache, extend_seq_lens, next_n, static_extend_len):
    """(x, row_req, row_live): expanded row lengths, the request of each row and
    whether the row is a page row of that request (int64 / bool, length n)."""
    dev = seq.device
    if mode == DECODE:
        return cache, torch.arange(bs, device=dev), torch.ones(bs, dtype=torch.bool, device=dev)
    e = torch.arange(n, device=dev)
    if mode == TARGET_VERIFY:
        r = torch.div(e, next_n, rounding_mode="floor")
        return _wrap32(seq[r] + (e - r * next_n) + 1), r, torch.ones(n, dtype=torch.bool, device=dev)
    ext = (extend_seq_lens[:1].expand(bs) if static_extend_len else extend_seq_lens[:bs]).long()
    capped = ext.clamp(0, n)  # negatives are hostile (the op raises); rows past n unused
    ends = torch.cumsum(capped, 0)
    r = torch.searchsorted(ends, e, right=True)  # first request whose rows end after e
    covered = r < bs
    rc = torch.where(covered, r, torch.zeros_like(r))
    local = torch.where(covered, e - (ends[rc] - capped[rc]), torch.zeros_like(e))
    qo = torch.where(covered, ext[rc], torch.ones_like(e))  # uncovered: upstream's defaults
    top = seq[rc] + local + 1
    x = torch.where(qo >= top, torch.zeros_like(top), top - qo)
    return x, rc, covered


def fused_dsa_metadata(
    *,
    seq_lens: torch.Tensor,
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    cache_seqlens: Sequence[torch.Tensor],
    cu_seqlens_k: Sequence[torch.Tensor],
    dsa_cache_seqlens: Sequence[torch.Tensor],
    dsa_cu_seqlens_k: Sequence[torch.Tensor],
    forward_mode: int,
    bs: int,
    max_seqlen_k: int,
    dsa_index_topk: int,
    page_size: int,
    seqlens_expanded: Optional[Sequence[torch.Tensor]] = None,
    page_table_1: Optional[Sequence[torch.Tensor]] = None,
    real_page_table: Optional[Sequence[torch.Tensor]] = None,
    paged_mqa_ctx_lens_2d: Optional[Sequence[torch.Tensor]] = None,
    extend_seq_lens: Optional[torch.Tensor] = None,
    next_n: Optional[int] = None,
    total_len: Optional[int] = None,
    static_extend_len: bool = False,
) -> None:
    """Eager reference of :func:`sgl_meta.fused_dsa_metadata` (same arguments)."""
    for t in (*cu_seqlens_k, *dsa_cu_seqlens_k):
        t[:1].zero_()
    if bs == 0:
        return
    mode = forward_mode
    if on_host(seq_lens):  # the length contract, in the CPU kernel's order
        extra = next_n if mode == TARGET_VERIFY else 0
        cu = RunningSum(OP, "cache_seqlens", "cu_seqlens_k")
        for r, v in enumerate(values(seq_lens, bs)):
            check_length(OP, f"seq_lens[{r}]", v)
            if extra:
                check_length(OP, f"seq_lens[{r}] + next_n", v + extra, "cache_seqlens")
            cu.add(r, v + extra)
    seq = _wrap32(seq_lens[:bs].long())
    cache = _wrap32(seq + next_n) if mode == TARGET_VERIFY else seq
    n = bs if mode == DECODE else bs * next_n if mode == TARGET_VERIFY else total_len
    x, row_req, row_live = _expanded_rows(mode, bs, n, seq, cache, extend_seq_lens, next_n, static_extend_len)
    dsa = torch.clamp(x, max=dsa_index_topk)
    if on_host(seq):
        dsa_cu = RunningSum(OP, "dsa_cache_seqlens", "dsa_cu_seqlens_k")
        for e, v in enumerate(values(dsa, dsa.numel())):
            dsa_cu.add(e, v)
    cu = _wrap32(torch.cumsum(cache, 0))
    dsa_cu = _wrap32(torch.cumsum(dsa, 0))
    for k in range(len(cache_seqlens)):
        cache_seqlens[k][:bs].copy_(cache)
        cu_seqlens_k[k][1 : bs + 1].copy_(cu)
        if mode != DECODE:
            seqlens_expanded[k][:n].copy_(x)
        dsa_cache_seqlens[k][:n].copy_(dsa)
        dsa_cu_seqlens_k[k][1 : n + 1].copy_(dsa_cu)
        if mode == TARGET_VERIFY and paged_mqa_ctx_lens_2d:
            paged_mqa_ctx_lens_2d[k][:bs, :next_n].copy_(cache[:, None].expand(bs, next_n))

    real = real_page_table if (real_page_table and page_size > 1) else None
    if n == 0 or not (page_table_1 or real):
        return
    width = max_seqlen_k
    row_len = torch.where(row_live, cache[row_req].clamp(0, width), torch.zeros_like(row_req))
    gathered = req_to_token[req_pool_indices[:bs].long()[row_req], :width]  # [n, W]
    cols = torch.arange(width, device=seq.device)
    if page_table_1:
        live = cols[None, :] < row_len[:, None]
        for t in page_table_1:
            t[:n, :width].copy_(torch.where(live, gathered, t[:n, :width]))
    if real:
        pages = -(-width // page_size)
        first = torch.floor_divide(gathered[:, ::page_size], page_size)  # every page's first slot
        live = (cols[::page_size][None, :] < row_len[:, None])[:, :pages]
        for t in real:
            t[:n, :pages].copy_(torch.where(live, first, t[:n, :pages]))


# --- The three upstream generators' signatures (K = 1), for callers of the drop-ins ---


# The drop-ins (upstream's signatures) over this reference, mapped as the ops' are.
fused_dsa_decode_metadata = adapt_reference(dropins.fused_dsa_decode_metadata, fused_dsa_metadata)
fused_dsa_target_verify_metadata = adapt_reference(dropins.fused_dsa_target_verify_metadata, fused_dsa_metadata)
fused_dsa_draft_extend_metadata = adapt_reference(dropins.fused_dsa_draft_extend_metadata, fused_dsa_metadata)
