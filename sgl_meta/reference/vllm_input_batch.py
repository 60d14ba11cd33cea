"""Eager references of the vLLM input-batch ops (docs/operators/vllm_input_batch.md).

Plain aten ops: tokens find their request by ``searchsorted`` over
``query_start_loc`` (static shapes, no ``.item()``); the combine writes go
through ``index_put_`` on masked positions. Device values are not
range-checked here.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from .vllm_block_table import PAD_REQ, slot_mappings_of, token_rows, vllm_gather_block_tables


def _computed(idx_mapping: torch.Tensor, num_computed_tokens: torch.Tensor) -> torch.Tensor:
    """Computed tokens of each batch row (0 for a -1 row)."""
    req = idx_mapping.long()
    owned = req != PAD_REQ
    return torch.where(owned, num_computed_tokens.long()[torch.where(owned, req, torch.zeros_like(req))],
                       torch.zeros_like(req))


def vllm_prepare_pos_seq_lens(
    *,
    idx_mapping: torch.Tensor,
    query_start_loc: torch.Tensor,
    num_computed_tokens: torch.Tensor,
    pos: torch.Tensor,
    seq_lens: torch.Tensor,
) -> None:
    """Eager reference of :func:`sgl_meta.vllm_prepare_pos_seq_lens`."""
    n = idx_mapping.numel()
    computed = _computed(idx_mapping, num_computed_tokens)
    qsl = query_start_loc[: n + 1].long()
    seq_lens[n:].zero_()
    if n == 0:
        return
    seq_lens[:n].copy_(computed + qsl[1:] - qsl[:-1])
    row, inside, _ = token_rows(query_start_loc, n, pos.numel())
    t = torch.arange(pos.numel(), device=pos.device)
    pos.copy_(torch.where(inside, computed[row] + t - qsl[row], pos.long()))


def vllm_combine_sampled_and_draft_tokens(
    *,
    input_ids: torch.Tensor,
    idx_mapping: torch.Tensor,
    last_sampled_tokens: torch.Tensor,
    query_start_loc: torch.Tensor,
    seq_lens: torch.Tensor,
    prefill_len: torch.Tensor,
    draft_tokens: torch.Tensor,
    cu_num_logits: torch.Tensor,
    logits_indices: torch.Tensor,
    num_new_sampled_tokens: int = 1,
) -> None:
    """Eager reference of :func:`sgl_meta.vllm_combine_sampled_and_draft_tokens`."""
    n = idx_mapping.numel()
    if n == 0:
        return
    device = input_ids.device
    cu = cu_num_logits[: n + 1].long()
    num_logits = cu[1:] - cu[:-1]
    end = query_start_loc[1 : n + 1].long()
    first = end - num_logits
    # logits_indices: entry j < cu[n] belongs to the row whose logits cover it
    j = torch.arange(logits_indices.numel(), device=device)
    row = torch.searchsorted(cu[1:], j, right=True).clamp(max=n - 1)
    covered = (j >= cu[0]) & (j < cu[n])
    logits_indices.copy_(torch.where(covered, first[row] + j - cu[row], logits_indices.long()))

    req = idx_mapping.long()
    owned = req != PAD_REQ
    safe = torch.where(owned, req, torch.zeros_like(req))
    seq = seq_lens[:n].long()
    prefill = prefill_len.long()[safe]
    generating = owned & (seq > prefill)
    last = last_sampled_tokens.reshape(last_sampled_tokens.shape[0], -1)[:, 0] if last_sampled_tokens.dim() == 2 \
        else last_sampled_tokens
    if num_new_sampled_tokens > 0:
        put = generating & (seq - num_logits >= prefill)
        input_ids.index_put_((first[put],), last.long()[safe][put].to(input_ids.dtype))
    steps = draft_tokens.shape[1]
    if steps:
        num_draft = num_logits - num_new_sampled_tokens
        i = torch.arange(steps, device=device)
        put = generating[:, None] & (i[None, :] < num_draft[:, None])
        where = end[:, None] - num_draft[:, None] + i[None, :]
        values = draft_tokens.long()[safe][:, :steps]
        input_ids.index_put_((where[put],), values[put].to(input_ids.dtype))


def vllm_prepare_step(
    *,
    idx_mapping: torch.Tensor,
    query_start_loc: torch.Tensor,
    num_computed_tokens: torch.Tensor,
    pos: torch.Tensor,
    seq_lens: torch.Tensor,
    src_block_tables: Sequence[torch.Tensor],
    num_blocks: torch.Tensor,
    dst_block_tables: Sequence[torch.Tensor],
    num_rows: int,
    block_sizes: torch.Tensor,
    slot_mapping_enabled: torch.Tensor,
    dcp_sharded: torch.Tensor,
    slot_mappings: torch.Tensor,
    cp_rank: int = 0,
    cp_size: int = 1,
    cp_interleave: int = 1,
    pad_id: int = -1,
    sliding_window_reach: Optional[torch.Tensor] = None,
    mask_sliding_window: bool = False,
) -> None:
    """Eager reference of :func:`sgl_meta.vllm_prepare_step`: the three ops back
    to back, the slot mappings' positions computed as ``pos`` receives them."""
    vllm_prepare_pos_seq_lens(idx_mapping=idx_mapping, query_start_loc=query_start_loc,
                              num_computed_tokens=num_computed_tokens, pos=pos, seq_lens=seq_lens)
    vllm_gather_block_tables(idx_mapping=idx_mapping, src_block_tables=src_block_tables, num_blocks=num_blocks,
                             dst_block_tables=dst_block_tables, num_rows=num_rows,
                             num_computed_tokens=num_computed_tokens if mask_sliding_window else None,
                             sliding_window_reach=sliding_window_reach, block_sizes=block_sizes)
    if len(src_block_tables) == 0:
        return
    n = idx_mapping.numel()
    computed = _computed(idx_mapping, num_computed_tokens)
    qsl = query_start_loc[: n + 1].long()

    def positions(row, inside):
        if n == 0:
            return torch.zeros_like(row)
        t = torch.arange(row.numel(), device=row.device)
        return computed[row] + t - qsl[row]

    slot_mappings_of(idx_mapping=idx_mapping, query_start_loc=query_start_loc, positions=positions,
                     block_tables=src_block_tables, block_sizes=block_sizes,
                     slot_mapping_enabled=slot_mapping_enabled, dcp_sharded=dcp_sharded, slot_mappings=slot_mappings,
                     cp_rank=cp_rank, cp_size=cp_size, cp_interleave=cp_interleave, pad_id=pad_id)
