"""Eager PyTorch references: the unfused paths the fused ops replace.

Device-agnostic and deliberately plain (one small aten op per step, as the
upstream eager code did), so they serve as the oracle in tests and as the
"before" column in benchmarks. Same keyword signatures as :mod:`sgl_meta.ops`.
Out-of-range indices raise ``IndexError`` on CPU (device assert on CUDA).
"""

from __future__ import annotations

from typing import Optional

import torch

from .ops import Q_MODE_CUMSUM, Q_MODE_NONE, Q_MODE_STRIDED


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
    """``swa_mapping[slot]`` with ``-1`` for a negative slot (the sentinel)."""
    slots = slots.long()
    mapped = swa_mapping[slots.clamp(min=0)]
    return torch.where(slots < 0, torch.full_like(mapped, -1), mapped)


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
    page_table: torch.Tensor,
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
) -> None:
    """Eager reference of :func:`sgl_meta.ops.update_trtllm_mha_graph_metadata`.

    Mirrors the ~25-op ``TRTLLMHAAttnBackend`` CUDA-graph replay path in SGLang
    that the seed Triton kernel replaced; same arguments, same results.
    """
    if bs == 0:
        return
    lens = (seq_lens[:bs].long() + seqlen_offset).to(torch.int32)
    cache_seqlens[:bs].copy_(lens)
    cu_seqlens_k[:1].zero_()  # (no host scalar copy: stays graph-capturable)
    cu_seqlens_k[1 : bs + 1].copy_(torch.cumsum(lens, 0).to(torch.int32))
    if q_mode == Q_MODE_CUMSUM:
        cu_seqlens_q[:1].zero_()
        cu_seqlens_q[1 : bs + 1].copy_(torch.cumsum(qlens[:bs].long(), 0).to(torch.int32))
    elif q_mode == Q_MODE_STRIDED:
        steps = torch.arange(bs + 1, device=cu_seqlens_q.device, dtype=torch.int64)
        cu_seqlens_q[: bs + 1].copy_((steps * q_stride).to(torch.int32))

    cols_per_row = None
    if live_pages_only:
        # ceil(len / page_size) as floor((len - 1) / page_size) + 1: `len + page_size - 1`
        # overflows int64 for page sizes near 2**63 (0 pages for len 0 all the same).
        pages = torch.floor_divide(lens.long().clamp(min=0) - 1, page_size) + 1
        cols_per_row = pages.clamp(max=max_seq_pages)
    slots = _gather_page_slots(req_to_token, req_pool_indices, bs, max_seq_pages, page_size)
    # int64 first: an int32 tensor op a Python int stays int32, so a page_size
    # >= 2**31 would wrap (2**31 -> -2**31) and flip the sign of every page.
    pages_full = torch.floor_divide(slots.long(), page_size).to(torch.int32)
    _write_columns(page_table, pages_full, cols_per_row)
    if swa_page_table is not None:
        mapped = _swa_translate(slots, swa_mapping)
        swa_pages = torch.where(
            mapped < 0, torch.full_like(mapped, -1), torch.floor_divide(mapped, page_size)
        ).to(torch.int32)
        _write_columns(swa_page_table, swa_pages, cols_per_row)

    if swa_out_cache_loc is not None:
        n = 0 if out_cache_loc is None else min(swa_out_cache_loc.numel(), out_cache_loc.numel())
        swa_out_cache_loc.zero_()
        if n:
            swa_out_cache_loc[:n] = _swa_translate(out_cache_loc[:n], swa_mapping)


def build_trtllm_mha_page_table(
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    cache_seqlens: torch.Tensor,
    page_table: torch.Tensor,
    page_size: int,
    swa_page_table: Optional[torch.Tensor] = None,
    full_to_swa: Optional[torch.Tensor] = None,
) -> None:
    """Eager reference of :func:`sgl_meta.ops.build_trtllm_mha_page_table`.

    The unfused path the seed's Triton kernel replaced: one advanced-index gather
    of the page-boundary slots, ``floor_divide`` and a masked copy that keeps every
    row's tail. Same arguments, same results. Upstream sized the gather with
    ``seq_lens.max().item()`` (a device-to-host sync); this reference gathers the
    static width instead so that it, too, can be captured in a CUDA graph.
    """
    if (swa_page_table is None) != (full_to_swa is None):
        raise ValueError("build_trtllm_mha_page_table: swa_page_table and full_to_swa go together")
    bs, width = page_table.shape
    if bs == 0:
        return
    device = req_to_token.device
    row_pages = -(-req_to_token.shape[1] // page_size)  # gathers stay inside the row
    lens = cache_seqlens[:bs].long().clamp(min=0)
    pages = (torch.floor_divide(lens - 1, page_size) + 1).clamp(max=min(width, row_pages))
    cols = torch.arange(min(width, row_pages), device=device) * page_size
    slots = req_to_token[req_pool_indices[:bs].long()[:, None], cols[None, :]]
    _write_columns(page_table, torch.floor_divide(slots.long(), page_size).to(torch.int32), pages)
    if swa_page_table is not None:
        mapped = full_to_swa[slots.long().clamp(0, full_to_swa.numel() - 1)]
        _write_columns(swa_page_table, torch.floor_divide(mapped, page_size).to(torch.int32), pages)


def fused_metadata_copy(
    *,
    cache_seqlens_src: torch.Tensor,
    cu_seqlens_k_src: torch.Tensor,
    page_indices_src: torch.Tensor,
    dsa_cache_seqlens_src: torch.Tensor,
    dsa_cu_seqlens_k_src: torch.Tensor,
    cache_seqlens_dst: torch.Tensor,
    cu_seqlens_k_dst: torch.Tensor,
    page_table_1_dst: torch.Tensor,
    dsa_cache_seqlens_dst: torch.Tensor,
    dsa_cu_seqlens_k_dst: torch.Tensor,
    bs: int,
    forward_mode: int = 0,
    max_len: Optional[int] = None,
    max_seqlen_k: Optional[int] = None,
    seqlens_expanded_size: Optional[int] = None,
    seqlens_expanded_src: Optional[torch.Tensor] = None,
    seqlens_expanded_dst: Optional[torch.Tensor] = None,
    real_page_table_src: Optional[torch.Tensor] = None,
    real_page_table_dst: Optional[torch.Tensor] = None,
    flashmla_num_splits_src: Optional[torch.Tensor] = None,
    flashmla_metadata_src: Optional[torch.Tensor] = None,
    flashmla_num_splits_dst: Optional[torch.Tensor] = None,
    flashmla_metadata_dst: Optional[torch.Tensor] = None,
) -> None:
    """Eager reference of :func:`sgl_meta.ops.fused_metadata_copy`.

    The ``.copy_()`` sequence of SGLang's DSA backend
    (``init_forward_metadata_replay_cuda_graph_from_precomputed`` without the fused
    kernel), one copy per field, restricted to the regions SPEC.md section 3 names.
    """
    if bs == 0:
        return
    decode = forward_mode == 0
    n = bs if decode else seqlens_expanded_size
    rows = bs if decode else page_indices_src.shape[0]
    cols = max_len if decode else max_seqlen_k
    cache_seqlens_dst[:bs].copy_(cache_seqlens_src[:bs])
    cu_seqlens_k_dst[1 : bs + 1].copy_(cu_seqlens_k_src[1 : bs + 1])
    page_table_1_dst[:rows, :cols].copy_(page_indices_src[:rows, :cols])
    if not decode:
        s = seqlens_expanded_size
        seqlens_expanded_dst[:s].copy_(seqlens_expanded_src[:s])
    dsa_cache_seqlens_dst[:n].copy_(dsa_cache_seqlens_src[:n])
    dsa_cu_seqlens_k_dst[1 : n + 1].copy_(dsa_cu_seqlens_k_src[1 : n + 1])
    if real_page_table_src is not None:
        real_cols = real_page_table_src.shape[1]
        real_page_table_dst[:rows, :real_cols].copy_(real_page_table_src[:rows])
    if flashmla_num_splits_src is not None:
        flashmla_num_splits_dst[: n + 1].copy_(flashmla_num_splits_src[: n + 1])
        flashmla_metadata_dst.view(-1).copy_(flashmla_metadata_src.view(-1))


def fused_metadata_copy_multi(
    *,
    cache_seqlens_dst,
    cu_seqlens_k_dst,
    page_table_1_dst,
    dsa_cache_seqlens_dst,
    dsa_cu_seqlens_k_dst,
    seqlens_expanded_dst=None,
    real_page_table_dst=None,
    flashmla_num_splits_dst=None,
    flashmla_metadata_dst=None,
    **sources_and_scalars,
) -> None:
    """Eager reference of :func:`sgl_meta.ops.fused_metadata_copy_multi`: the
    single-set copy once per destination set (what SGLang's multi-step backend did
    before the fused multi kernel)."""
    optional = dict(
        seqlens_expanded_dst=seqlens_expanded_dst,
        real_page_table_dst=real_page_table_dst,
        flashmla_num_splits_dst=flashmla_num_splits_dst,
        flashmla_metadata_dst=flashmla_metadata_dst,
    )
    for i in range(len(cache_seqlens_dst)):
        fused_metadata_copy(
            cache_seqlens_dst=cache_seqlens_dst[i],
            cu_seqlens_k_dst=cu_seqlens_k_dst[i],
            page_table_1_dst=page_table_1_dst[i],
            dsa_cache_seqlens_dst=dsa_cache_seqlens_dst[i],
            dsa_cu_seqlens_k_dst=dsa_cu_seqlens_k_dst[i],
            **{k: (v[i] if v else None) for k, v in optional.items()},
            **sources_and_scalars,
        )
