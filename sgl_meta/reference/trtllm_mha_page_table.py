"""Eager reference of the TRT-LLM MHA page-table builder."""

from __future__ import annotations

from typing import Optional

import torch

from ._lengths import check_rows, on_host
from .trtllm_mha_metadata import _write_columns


def build_trtllm_mha_page_table(
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    cache_seqlens: torch.Tensor,
    page_table: torch.Tensor,
    page_size: int,
    swa_page_table: Optional[torch.Tensor] = None,
    full_to_swa: Optional[torch.Tensor] = None,
) -> None:
    """Eager reference of :func:`sgl_meta.build_trtllm_mha_page_table`.

    The unfused path SGLang's Triton builder replaced: one advanced-index gather
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
    check_rows("build_trtllm_mha_page_table", cache_seqlens, bs, "cache_seqlens")
    device = req_to_token.device
    row_pages = -(-req_to_token.shape[1] // page_size)  # gathers stay inside the row
    lens = cache_seqlens[:bs].long().clamp(min=0)
    pages = (torch.floor_divide(lens - 1, page_size) + 1).clamp(max=min(width, row_pages))
    cols = torch.arange(min(width, row_pages), device=device) * page_size
    slots = req_to_token[req_pool_indices[:bs].long()[:, None], cols[None, :]]
    _write_columns(page_table, torch.floor_divide(slots.long(), page_size).to(torch.int32), pages)
    if swa_page_table is not None:
        # a negative slot reads entry 0 (SGLang's builder clamps it there); a
        # live slot past the mapping is an error
        # (dead columns past the mapping are gathered from entry 0 and never written)
        outside = slots.long() >= full_to_swa.numel()
        past = outside & (torch.arange(slots.shape[1], device=device)[None, :] < pages[:, None])
        if on_host(slots) and bool(past.any()):
            r, c = (int(x) for x in past.nonzero()[0])
            raise RuntimeError(f"sgl_meta.build_trtllm_mha_page_table: req_to_token[req_pool_indices[{r}], {c} * "
                               f"page_size] = {int(slots[r, c])} is outside full_to_swa [0, {full_to_swa.numel()})")
        mapped = full_to_swa[torch.where(outside, 0, slots.long().clamp(min=0))].long()
        _write_columns(swa_page_table, torch.floor_divide(mapped, page_size).to(torch.int32), pages)
