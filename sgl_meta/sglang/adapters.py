"""SGLang 0.5.23's metadata entry points, served by sgl-meta's ops.

Each function has the exact signature (names, kinds, order, defaults) of the
SGLang function it replaces, and 0.5.23's semantics: SGLang calls it in place
of its own kernel (``sgl_meta.sglang.hooks.HOOKS`` names the targets), so it
accepts everything SGLang's function accepts. The DSA call sites catch any
exception and fall back to eager copies with a printed warning, so an error of
ours would silently cost performance: where 0.5.23 tolerates an input that our
stricter op rejects (a non-contiguous source, a larger FlashMLA buffer, an
unused argument), the adapter reshapes the call instead of failing.

Differences that remain, by design (docs/sglang.md): ``slot // page_size`` is
floor division here (0.5.23's Triton ``//`` truncates toward zero, which only
differs for negative slots), every row is capped at its table's width (0.5.23
can write past a row), and element 0 of ``cu_seqlens_k`` / ``cu_seqlens_q`` is
written as 0 (0.5.23 leaves it; SGLang's buffers hold 0 there).
"""

from __future__ import annotations

from typing import Optional

import torch

from ..dsa_metadata_copy import FORWARD_MODE_DECODE
from ..dsa_metadata_copy import fused_metadata_copy_cuda as _copy
from ..dsa_metadata_copy import fused_metadata_copy_multi_cuda as _copy_multi
from ..trtllm_mha_metadata import Q_MODE_NONE
from ..trtllm_mha_metadata import update_trtllm_mha_graph_metadata as _update


def update_trtllm_mha_graph_metadata(
    *,
    req_pool_indices,
    seq_lens,
    req_to_token,
    cache_seqlens,
    cu_seqlens_k,
    page_table,
    bs: int,
    seqlen_offset: int,
    max_seq_pages: int,
    page_size: int,
    swa_mapping=None,
    swa_page_table=None,
    out_cache_loc=None,
    swa_out_cache_loc=None,
    cu_seqlens_q=None,
    qlens=None,
    q_stride: int = 0,
    q_mode: int = Q_MODE_NONE,
    skip_page_table: bool = False,
):
    """``sglang.kernels.ops.attention.trtllm_mha_graph_metadata.update_trtllm_mha_graph_metadata``.

    As :func:`sgl_meta.update_trtllm_mha_graph_metadata` with
    ``live_pages_only=True``: 0.5.23 rewrites each page-table row's live prefix
    only (``min(ceil(cache_seqlens[i] / page_size), max_seq_pages)`` pages).
    With ``skip_page_table`` 0.5.23 ignores ``page_table`` and
    ``swa_page_table`` (the unified pool refreshes them out of the graph) but
    still translates ``swa_out_cache_loc`` when it is given.
    """
    if skip_page_table:
        page_table = swa_page_table = None
        if swa_out_cache_loc is not None:
            # Seqlens plus the SWA write locations, no page column: a zero-width
            # table and max_seq_pages = 0 (0.5.23's own call sites never do this).
            skip_page_table, page_table, max_seq_pages = False, cache_seqlens.new_empty((bs, 0)), 0
    _update(
        req_pool_indices=req_pool_indices,
        seq_lens=seq_lens,
        req_to_token=req_to_token,
        cache_seqlens=cache_seqlens,
        cu_seqlens_k=cu_seqlens_k,
        page_table=page_table,
        bs=bs,
        seqlen_offset=seqlen_offset,
        max_seq_pages=max_seq_pages,
        page_size=page_size,
        swa_mapping=swa_mapping,
        swa_page_table=swa_page_table,
        out_cache_loc=out_cache_loc,
        swa_out_cache_loc=swa_out_cache_loc,
        cu_seqlens_q=cu_seqlens_q,
        qlens=qlens,
        q_stride=q_stride,
        q_mode=q_mode,
        skip_page_table=skip_page_table,
        live_pages_only=True,
    )


def _rows(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """A source as 0.5.23's kernel reads it (it makes sources contiguous): our
    op takes any row stride but needs unit element stride."""
    if t is None or t.is_contiguous() or (t.dim() == 2 and t.stride(1) == 1):
        return t
    return t.contiguous()


def _fit(dst: Optional[torch.Tensor], src: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """0.5.23 copies ``src.numel()`` FlashMLA metadata elements into a
    destination that may be larger; ours wants equal sizes: the leading part."""
    if dst is None or src is None or dst.numel() == src.numel() or not dst.is_contiguous():
        return dst
    return dst.view(-1)[: src.numel()]


def fused_metadata_copy_cuda(
    cache_seqlens_src: torch.Tensor,
    cu_seqlens_k_src: torch.Tensor,
    page_indices_src: torch.Tensor,
    dsa_cache_seqlens_src: torch.Tensor,
    seqlens_expanded_src: Optional[torch.Tensor],
    dsa_cu_seqlens_k_src: torch.Tensor,
    real_page_table_src: Optional[torch.Tensor],
    flashmla_num_splits_src: Optional[torch.Tensor],
    flashmla_metadata_src: Optional[torch.Tensor],
    cache_seqlens_dst: torch.Tensor,
    cu_seqlens_k_dst: torch.Tensor,
    page_table_1_dst: torch.Tensor,
    dsa_cache_seqlens_dst: torch.Tensor,
    seqlens_expanded_dst: Optional[torch.Tensor],
    dsa_cu_seqlens_k_dst: torch.Tensor,
    real_page_table_dst: Optional[torch.Tensor],
    flashmla_num_splits_dst: Optional[torch.Tensor],
    flashmla_metadata_dst: Optional[torch.Tensor],
    forward_mode: int,
    bs: int,
    max_len: int,
    max_seqlen_k: int,
    seqlens_expanded_size: int,
) -> None:
    """``sglang.kernels.ops.attention.dsa.fused_metadata_copy.fused_metadata_copy_cuda``.

    As :func:`sgl_meta.fused_metadata_copy_cuda`, with 0.5.23's tolerance:
    DECODE ignores the ``seqlens_expanded`` pair (SGLang passes the
    ``cache_seqlens`` buffers there), the real page table is copied iff its
    source is given and the FlashMLA pair iff ``flashmla_num_splits_src`` is,
    non-contiguous sources are read as their contiguous copies, and a FlashMLA
    metadata destination larger than its source receives the source's size.
    """
    if forward_mode == FORWARD_MODE_DECODE:
        seqlens_expanded_src = seqlens_expanded_dst = None
    if real_page_table_src is None:
        real_page_table_dst = None
    if flashmla_num_splits_src is None:
        flashmla_num_splits_dst = flashmla_metadata_src = flashmla_metadata_dst = None
    args = [
        cache_seqlens_src, cu_seqlens_k_src, page_indices_src, dsa_cache_seqlens_src,
        seqlens_expanded_src, dsa_cu_seqlens_k_src, real_page_table_src,
        flashmla_num_splits_src, flashmla_metadata_src,
        cache_seqlens_dst, cu_seqlens_k_dst, page_table_1_dst, dsa_cache_seqlens_dst,
        seqlens_expanded_dst, dsa_cu_seqlens_k_dst, real_page_table_dst,
        flashmla_num_splits_dst, flashmla_metadata_dst,
        forward_mode, bs, max_len, max_seqlen_k, seqlens_expanded_size,
    ]  # fmt: skip
    try:
        _copy(*args)
        return
    except RuntimeError:
        # Checks run before any write, so a rejected call changed nothing; the
        # same call once more as 0.5.23's kernel sees its inputs (free on the
        # success path). Raises the op's own error if that does not help.
        retry = [_rows(t) for t in args[:9]] + args[9:]
        retry[17] = _fit(args[17], retry[8])
        if all(a is b for a, b in zip(retry, args)):
            raise
    _copy(*retry)


def fused_metadata_copy_multi_cuda(
    cache_seqlens_src: torch.Tensor,
    cu_seqlens_k_src: torch.Tensor,
    page_indices_src: torch.Tensor,
    dsa_cache_seqlens_src: torch.Tensor,
    dsa_cu_seqlens_k_src: torch.Tensor,
    real_page_table_src: Optional[torch.Tensor],
    flashmla_num_splits_src: Optional[torch.Tensor],
    flashmla_metadata_src: Optional[torch.Tensor],
    cache_seqlens_dst0: torch.Tensor,
    cu_seqlens_k_dst0: torch.Tensor,
    page_table_1_dst0: torch.Tensor,
    dsa_cache_seqlens_dst0: torch.Tensor,
    dsa_cu_seqlens_k_dst0: torch.Tensor,
    real_page_table_dst0: Optional[torch.Tensor],
    flashmla_num_splits_dst0: Optional[torch.Tensor],
    flashmla_metadata_dst0: Optional[torch.Tensor],
    cache_seqlens_dst1: torch.Tensor,
    cu_seqlens_k_dst1: torch.Tensor,
    page_table_1_dst1: torch.Tensor,
    dsa_cache_seqlens_dst1: torch.Tensor,
    dsa_cu_seqlens_k_dst1: torch.Tensor,
    real_page_table_dst1: Optional[torch.Tensor],
    flashmla_num_splits_dst1: Optional[torch.Tensor],
    flashmla_metadata_dst1: Optional[torch.Tensor],
    cache_seqlens_dst2: torch.Tensor,
    cu_seqlens_k_dst2: torch.Tensor,
    page_table_1_dst2: torch.Tensor,
    dsa_cache_seqlens_dst2: torch.Tensor,
    dsa_cu_seqlens_k_dst2: torch.Tensor,
    real_page_table_dst2: Optional[torch.Tensor],
    flashmla_num_splits_dst2: Optional[torch.Tensor],
    flashmla_metadata_dst2: Optional[torch.Tensor],
    bs: int,
    max_len: int,
    seqlens_expanded_size: int,
) -> None:
    """``sglang.kernels.ops.attention.dsa.fused_metadata_copy.fused_metadata_copy_multi_cuda``.

    As :func:`sgl_meta.fused_metadata_copy_multi_cuda` (DECODE, three
    destination sets), with 0.5.23's tolerance: the real page table is copied
    iff its source and ``real_page_table_dst0`` are given, the FlashMLA pair iff
    ``flashmla_num_splits_src`` is, non-contiguous sources are read as their
    contiguous copies, and larger FlashMLA metadata destinations receive the
    source's size.
    """
    args = list(locals().values())  # the parameters, in signature order
    if real_page_table_src is None or real_page_table_dst0 is None:
        for i in (5, 13, 21, 29):
            args[i] = None
    if flashmla_num_splits_src is None:
        for i in (6, 7, 14, 15, 22, 23, 30, 31):
            args[i] = None
    try:
        _copy_multi(*args)
        return
    except RuntimeError:
        retry = [_rows(t) for t in args[:8]] + args[8:]  # see fused_metadata_copy_cuda
        for i in (15, 23, 31):
            retry[i] = _fit(args[i], retry[7])
        if all(a is b for a, b in zip(retry, args)):
            raise
    _copy_multi(*retry)
