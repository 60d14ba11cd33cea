"""Eager references of the DSA copy ops (the 6-9 ``.copy_()`` calls they replace)."""

from __future__ import annotations

from typing import Optional, Sequence

import torch


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
    """Eager reference of :func:`sgl_meta.fused_metadata_copy`.

    The ``.copy_()`` sequence of SGLang's DSA backend
    (``init_forward_metadata_replay_cuda_graph_from_precomputed`` without the fused
    kernel), one copy per field, restricted to the regions docs/operators/dsa_metadata_copy.md names.
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
    """Eager reference of :func:`sgl_meta.fused_metadata_copy_multi`: the
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
