"""Eager reference of the vLLM FlashInfer op (docs/operators/vllm_flashinfer.md).

Static shapes, no ``.item()``: every entry of ``page_indices`` finds its row by
``searchsorted`` over ``cu_num_blocks``; entries outside ``[cu[0], cu[n])`` keep
their values. Device values are not range-checked here.
"""

from __future__ import annotations

import torch


def vllm_copy_page_indices(page_indices: torch.Tensor, block_table: torch.Tensor,
                           cu_num_blocks: torch.Tensor) -> None:
    """Eager reference of :func:`sgl_meta.vllm_copy_page_indices`."""
    n = cu_num_blocks.numel() - 1
    if n <= 0 or page_indices.numel() == 0 or block_table.size(1) == 0:
        return
    cu = cu_num_blocks.long()
    j = torch.arange(page_indices.numel(), device=page_indices.device)
    row = torch.searchsorted(cu[1:], j, right=True)  # the first row whose span ends past j
    inside = (j >= cu[0]) & (row < n)
    row = row.clamp(max=n - 1)
    col = (j - cu[row]).clamp(0, block_table.size(1) - 1)
    page_indices.copy_(torch.where(inside, block_table[row, col], page_indices))
