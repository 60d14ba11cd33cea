"""Eager fallback references for the DSA metadata copies (SPEC section 3).

Used only while ``sgl_meta.reference`` has no ``fused_metadata_copy_cuda`` /
``fused_metadata_copy_multi_cuda`` of its own: the sequence of ``.copy_()``
calls the DSA backend made before the fused kernel (seed 003), with the seed's
signatures.
"""

from __future__ import annotations

from typing import Optional

import torch

DECODE = 0


def _copy_one_set(
    *,
    forward_mode: int,
    bs: int,
    max_len: int,
    max_seqlen_k: int,
    seqlens_expanded_size: int,
    src: dict,
    dst: dict,
) -> None:
    if bs == 0:
        return
    decode = forward_mode == DECODE
    s = seqlens_expanded_size
    n = bs if decode else s
    rows = bs if decode else src["page_indices"].size(0)
    cols = max_len if decode else max_seqlen_k
    dst["cache_seqlens"][:bs].copy_(src["cache_seqlens"][:bs])
    dst["cu_seqlens_k"][1 : bs + 1].copy_(src["cu_seqlens_k"][1 : bs + 1])
    dst["page_table_1"][:rows, :cols].copy_(src["page_indices"][:rows, :cols])
    if not decode:
        dst["seqlens_expanded"][:s].copy_(src["seqlens_expanded"][:s])
    dst["dsa_cache_seqlens"][:n].copy_(src["dsa_cache_seqlens"][:n])
    dst["dsa_cu_seqlens_k"][1 : n + 1].copy_(src["dsa_cu_seqlens_k"][1 : n + 1])
    if src["real_page_table"] is not None:
        c = src["real_page_table"].size(1)
        dst["real_page_table"][:rows, :c].copy_(src["real_page_table"][:rows, :c])
    if src["flashmla_num_splits"] is not None:
        dst["flashmla_num_splits"][: n + 1].copy_(src["flashmla_num_splits"][: n + 1])
        dst["flashmla_metadata"].view(-1).copy_(src["flashmla_metadata"].reshape(-1))


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
    """Eager ``fused_metadata_copy_cuda``: one ``.copy_()`` per destination (SPEC 3)."""
    _copy_one_set(
        forward_mode=forward_mode,
        bs=bs,
        max_len=max_len,
        max_seqlen_k=max_seqlen_k,
        seqlens_expanded_size=seqlens_expanded_size,
        src=dict(
            cache_seqlens=cache_seqlens_src,
            cu_seqlens_k=cu_seqlens_k_src,
            page_indices=page_indices_src,
            dsa_cache_seqlens=dsa_cache_seqlens_src,
            seqlens_expanded=seqlens_expanded_src,
            dsa_cu_seqlens_k=dsa_cu_seqlens_k_src,
            real_page_table=real_page_table_src,
            flashmla_num_splits=flashmla_num_splits_src,
            flashmla_metadata=flashmla_metadata_src,
        ),
        dst=dict(
            cache_seqlens=cache_seqlens_dst,
            cu_seqlens_k=cu_seqlens_k_dst,
            page_table_1=page_table_1_dst,
            dsa_cache_seqlens=dsa_cache_seqlens_dst,
            seqlens_expanded=seqlens_expanded_dst,
            dsa_cu_seqlens_k=dsa_cu_seqlens_k_dst,
            real_page_table=real_page_table_dst,
            flashmla_num_splits=flashmla_num_splits_dst,
            flashmla_metadata=flashmla_metadata_dst,
        ),
    )


_MULTI_FIELDS = (
    "cache_seqlens",
    "cu_seqlens_k",
    "page_table_1",
    "dsa_cache_seqlens",
    "dsa_cu_seqlens_k",
    "real_page_table",
    "flashmla_num_splits",
    "flashmla_metadata",
)


def fused_metadata_copy_multi_cuda(
    cache_seqlens_src,
    cu_seqlens_k_src,
    page_indices_src,
    dsa_cache_seqlens_src,
    dsa_cu_seqlens_k_src,
    real_page_table_src,
    flashmla_num_splits_src,
    flashmla_metadata_src,
    *dsts_and_scalars,
    **kw,
) -> None:
    """Eager ``fused_metadata_copy_multi_cuda`` (seed signature: three destination
    sets ``..._dst0``..``..._dst2``, then ``bs, max_len, seqlens_expanded_size``),
    the DECODE copy once per destination set."""
    names = [f"{f}_dst{k}" for k in range(3) for f in _MULTI_FIELDS] + [
        "bs",
        "max_len",
        "seqlens_expanded_size",
    ]
    args = dict(zip(names, dsts_and_scalars))
    args.update(kw)
    missing = [n for n in names if n not in args]
    if missing:
        raise TypeError(f"fused_metadata_copy_multi_cuda: missing arguments {missing}")
    src = dict(
        cache_seqlens=cache_seqlens_src,
        cu_seqlens_k=cu_seqlens_k_src,
        page_indices=page_indices_src,
        dsa_cache_seqlens=dsa_cache_seqlens_src,
        seqlens_expanded=None,
        dsa_cu_seqlens_k=dsa_cu_seqlens_k_src,
        real_page_table=real_page_table_src,
        flashmla_num_splits=flashmla_num_splits_src,
        flashmla_metadata=flashmla_metadata_src,
    )
    for k in range(3):
        dst = {f: args[f"{f}_dst{k}"] for f in _MULTI_FIELDS}
        _copy_one_set(
            forward_mode=DECODE,
            bs=args["bs"],
            max_len=args["max_len"],
            max_seqlen_k=args["max_len"],
            seqlens_expanded_size=args["seqlens_expanded_size"],
            src=src,
            dst=dst,
        )
