"""Eager references of the TRT-LLM MHA ops (the ~25-op replay path they replace)."""

from __future__ import annotations

from typing import Optional

import torch

from ..trtllm_mha_metadata import Q_MODE_CUMSUM, Q_MODE_NONE, Q_MODE_STRIDED
from ._lengths import check_rows, check_trtllm_mha, on_host


def _gather_page_slots(req_to_token, req_pool_indices, bs, max_seq_pages, page_size):
    """``req_to_token[req_pool_indices[i], p * page_size]`` as ``[bs, max_seq_pages]``.

    One 2-D gather of just those slots, as upstream's eager path did
    (``req_to_token[req_pool_indices[:, None], strided_indices[None, :]]``);
    selecting whole rows first would copy ``bs * max_context_len`` slots per call
    and make the reference look slower than the code the fused op replaced.
    """
    cols = torch.arange(max_seq_pages, device=req_to_token.device) * page_size
    return req_to_token[req_pool_indices[:bs].long()[:, None], cols[None, :]]


def _swa_translate(slots: torch.Tensor, swa_mapping: torch.Tensor) -> torch.Tensor:
    """``swa_mapping[slot]`` (int64) with ``-1`` for a negative slot (the sentinel)."""
    slots = slots.long()
    mapped = swa_mapping[slots.clamp(min=0)].long()
    return torch.where(slots < 0, torch.full_like(mapped, -1), mapped)


def _v2p_translate(slots: torch.Tensor, v2p: torch.Tensor, page_size: int) -> torch.Tensor:
    """``max(v2p[vpage], 0)``, ``vpage = slot // page_size``; a negative slot reads
    virtual page 0 (the unified pool's sink), as SGLang's ``kv_read_table`` does."""
    slots = slots.long()
    vpage = torch.where(slots < 0, torch.zeros_like(slots), torch.floor_divide(slots, page_size))
    return v2p[vpage].clamp(min=0)


def _live(slots: torch.Tensor, cols_per_row: Optional[torch.Tensor], translate) -> torch.Tensor:
    """``translate(slots)`` on each row's live columns only (the kernel reads no mapping past
    them, so a slot there may be anything), 0 elsewhere (left unwritten by :func:`_write_columns`)."""
    if cols_per_row is None:
        return translate(slots)
    live = torch.arange(slots.shape[1], device=slots.device) < cols_per_row[:, None]
    # A dead column reads as the sentinel slot -1 (in range for every mapping); masks, not
    # boolean indexing, so that the reference stays capturable in a CUDA graph.
    mapped = translate(torch.where(live, slots, torch.full_like(slots, -1))).long()
    return torch.where(live, mapped, torch.zeros_like(mapped))


def _write_columns(dst, values, cols_per_row):
    """``dst[i, :cols_per_row[i]] = values[i, :cols_per_row[i]]``, tail untouched."""
    if cols_per_row is None:
        dst[: values.shape[0], : values.shape[1]] = values
        return
    region = dst[: values.shape[0], : values.shape[1]]
    mask = torch.arange(values.shape[1], device=values.device) < cols_per_row[:, None]
    region.copy_(torch.where(mask, values, region))


def update_trtllm_mha_graph_metadata(
    *,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    req_to_token: torch.Tensor,
    cache_seqlens: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    page_table: Optional[torch.Tensor] = None,
    bs: int,
    seqlen_offset: int,
    max_seq_pages: int,
    page_size: int,
    swa_mapping: Optional[torch.Tensor] = None,
    swa_page_table: Optional[torch.Tensor] = None,
    out_cache_loc: Optional[torch.Tensor] = None,
    swa_out_cache_loc: Optional[torch.Tensor] = None,
    cu_seqlens_q: Optional[torch.Tensor] = None,
    qlens: Optional[torch.Tensor] = None,
    q_stride: int = 0,
    q_mode: int = Q_MODE_NONE,
    live_pages_only: bool = False,
    skip_page_table: bool = False,
    seqlen_offsets: Optional[torch.Tensor] = None,
    v2p: Optional[torch.Tensor] = None,
    swa_v2p: Optional[torch.Tensor] = None,
) -> None:
    """Eager reference of :func:`sgl_meta.update_trtllm_mha_graph_metadata`.

    Mirrors the ~25-op ``TRTLLMHAAttnBackend`` CUDA-graph replay path in SGLang
    that the fused kernel replaced; same arguments, same results. On CPU a
    length outside the contract (``_lengths``) raises as the op does.
    """
    if bs == 0:
        return
    if page_table is None and not skip_page_table:
        raise ValueError("update_trtllm_mha_graph_metadata: page_table is required unless skip_page_table=True")
    check_trtllm_mha("update_trtllm_mha_graph_metadata", seq_lens=seq_lens, bs=bs, offsets=[seqlen_offset],
                     seqlen_offsets=seqlen_offsets, qlens=qlens, q_cumsum=q_mode == Q_MODE_CUMSUM)
    lens = seq_lens[:bs].long() + seqlen_offset
    if seqlen_offsets is not None:  # ragged verify: per-row extension
        lens = lens + seqlen_offsets[:bs].long()
    lens = lens.to(torch.int32)
    cache_seqlens[:bs].copy_(lens)
    cu_seqlens_k[:1].zero_()  # (no host scalar copy: stays graph-capturable)
    cu_seqlens_k[1 : bs + 1].copy_(torch.cumsum(lens, 0).to(torch.int32))
    if q_mode == Q_MODE_CUMSUM:
        cu_seqlens_q[:1].zero_()
        cu_seqlens_q[1 : bs + 1].copy_(torch.cumsum(qlens[:bs].long(), 0).to(torch.int32))
    elif q_mode == Q_MODE_STRIDED:
        steps = torch.arange(bs + 1, device=cu_seqlens_q.device, dtype=torch.int64)
        cu_seqlens_q[: bs + 1].copy_((steps * q_stride).to(torch.int32))
    if skip_page_table:
        return

    cols_per_row = None
    if live_pages_only:
        # ceil(len / page_size) as floor((len - 1) / page_size) + 1: `len + page_size - 1`
        # overflows int64 for page sizes near 2**63 (0 pages for len 0 all the same).
        pages = torch.floor_divide(lens.long().clamp(min=0) - 1, page_size) + 1
        cols_per_row = pages.clamp(max=max_seq_pages)
    slots = _gather_page_slots(req_to_token, req_pool_indices, bs, max_seq_pages, page_size)
    # int64 first: an int32 tensor op a Python int stays int32, so a page_size
    # >= 2**31 would wrap (2**31 -> -2**31) and flip the sign of every page.
    if v2p is not None:
        pages_full = _live(slots, cols_per_row, lambda s: _v2p_translate(s, v2p, page_size)).to(torch.int32)
    else:
        pages_full = torch.floor_divide(slots.long(), page_size).to(torch.int32)
    _write_columns(page_table, pages_full, cols_per_row)
    if swa_page_table is not None and swa_v2p is not None:
        swa_pages = _live(slots, cols_per_row, lambda s: _v2p_translate(s, swa_v2p, page_size))
        _write_columns(swa_page_table, swa_pages.to(torch.int32), cols_per_row)
    elif swa_page_table is not None:
        mapped = _live(slots, cols_per_row, lambda s: _swa_translate(s, swa_mapping))
        swa_pages = torch.where(
            mapped < 0, torch.full_like(mapped, -1), torch.floor_divide(mapped, page_size)
        ).to(torch.int32)
        _write_columns(swa_page_table, swa_pages, cols_per_row)

    if swa_out_cache_loc is not None:
        n = 0 if out_cache_loc is None else min(swa_out_cache_loc.numel(), out_cache_loc.numel())
        swa_out_cache_loc.zero_()
        if n:
            swa_out_cache_loc[:n] = _swa_translate(out_cache_loc[:n], swa_mapping)


def update_trtllm_mha_graph_metadata_multi(
    *,
    cache_seqlens,
    cu_seqlens_k,
    seqlen_offset,
    page_table=None,
    swa_page_table=None,
    swa_out_cache_loc=None,
    cu_seqlens_q=None,
    **shared,
) -> None:
    """Eager reference of :func:`sgl_meta.update_trtllm_mha_graph_metadata_multi`:
    the K single-set updates it replaces (what SGLang's multi-step draft backend
    records, one per draft step)."""
    if shared.get("bs", 0) == 0:
        return
    check_trtllm_mha("update_trtllm_mha_graph_metadata_multi", seq_lens=shared["seq_lens"], bs=shared["bs"],
                     offsets=list(seqlen_offset), seqlen_offsets=shared.get("seqlen_offsets"),
                     qlens=shared.get("qlens"), q_cumsum=shared.get("q_mode", Q_MODE_NONE) == Q_MODE_CUMSUM,
                     multi=True)
    for k in range(len(cache_seqlens)):
        update_trtllm_mha_graph_metadata(
            cache_seqlens=cache_seqlens[k],
            cu_seqlens_k=cu_seqlens_k[k],
            seqlen_offset=seqlen_offset[k],
            page_table=page_table[k] if page_table else None,
            swa_page_table=swa_page_table[k] if swa_page_table else None,
            swa_out_cache_loc=swa_out_cache_loc[k] if swa_out_cache_loc else None,
            cu_seqlens_q=cu_seqlens_q[k] if cu_seqlens_q else None,
            **shared,
        )
