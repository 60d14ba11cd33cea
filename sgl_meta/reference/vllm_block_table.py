"""Eager references of the vLLM block-table ops (docs/operators/vllm_block_table.md).

Plain aten ops over static shapes (no ``.item()``, no data-dependent sizes):
each token finds its request by ``searchsorted`` over ``query_start_loc``, each
group is one masked gather. Device values are not range-checked here (an
index past a table raises ``IndexError`` on CPU, as torch indexing does).
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

PAD_REQ = -1  # vLLM's idx_mapping sentinel: a row that owns no request state


def token_rows(query_start_loc: torch.Tensor, n: int, num_tokens: int):
    """(row of each token t < num_tokens, whether t lies in a row's query,
    whether t lies in the padded tail ``[query_start_loc[n], num_tokens)``)."""
    device = query_start_loc.device
    qsl = query_start_loc[: n + 1].long()
    t = torch.arange(num_tokens, device=device)
    row = torch.searchsorted(qsl[1:], t, right=True)  # rows whose query ended at or before t
    inside = (t >= qsl[0]) & (row < n)
    tail = t >= qsl[n]
    return row.clamp(max=max(n - 1, 0)), inside, tail


def local_positions(pos: torch.Tensor, block_size: torch.Tensor, sharded: torch.Tensor,
                    cp_rank: int, cp_size: int, cp_interleave: int):
    """(position inside this context-parallel rank's share, whether the token is this rank's)."""
    if cp_size == 1:
        return pos, torch.ones_like(pos, dtype=torch.bool)
    virtual = block_size * cp_size
    vblock, voff = torch.div(pos, virtual, rounding_mode="floor"), pos % virtual
    local = torch.div(voff, cp_interleave, rounding_mode="floor") % cp_size == cp_rank
    rounds = torch.div(voff, cp_interleave * cp_size, rounding_mode="floor")
    lp = vblock * block_size + rounds * cp_interleave + voff % cp_interleave
    return torch.where(sharded, lp, pos), local | ~sharded


def slot_mappings_of(*, idx_mapping, query_start_loc, positions, block_tables, block_sizes, slot_mapping_enabled,
                     dcp_sharded, slot_mappings, cp_rank, cp_size, cp_interleave, pad_id) -> None:
    """vllm_compute_slot_mappings with ``positions`` a callable (token rows,
    tokens) -> positions, so the fused step's reference can compute them."""
    n, num_tokens = idx_mapping.numel(), slot_mappings.shape[1]
    row, inside, tail = token_rows(query_start_loc, n, num_tokens)
    if n == 0:
        inside = torch.zeros_like(inside)
    req = idx_mapping.long()[row] if n else torch.zeros_like(row)
    real = inside & (req != PAD_REQ)
    pos = torch.where(inside, positions(row, inside), torch.zeros_like(row))
    for g, table in enumerate(block_tables):
        # A block size is only read for a group with live tokens (the op raises for one < 1
        # there); the others must not divide by it.
        bs = block_sizes[g].long().clamp(min=1)
        lp, local = local_positions(pos, bs, dcp_sharded[g], cp_rank, cp_size, cp_interleave)
        live = real & local & slot_mapping_enabled[g]
        col = torch.where(live, torch.div(lp, bs, rounding_mode="floor"), torch.zeros_like(lp))
        blocks = table[torch.where(live, req, torch.zeros_like(req)), col].long() if table.numel() else \
            torch.zeros_like(lp)
        slot = torch.where(live, blocks * bs + lp % bs, torch.full_like(lp, pad_id))
        out = slot_mappings[g]
        out.copy_(torch.where(inside, slot, torch.where(tail, torch.full_like(slot, pad_id), out)))


def vllm_compute_slot_mappings(
    *,
    idx_mapping: torch.Tensor,
    query_start_loc: torch.Tensor,
    positions: torch.Tensor,
    block_tables: Sequence[torch.Tensor],
    block_sizes: torch.Tensor,
    slot_mapping_enabled: torch.Tensor,
    dcp_sharded: torch.Tensor,
    slot_mappings: torch.Tensor,
    cp_rank: int = 0,
    cp_size: int = 1,
    cp_interleave: int = 1,
    pad_id: int = -1,
) -> None:
    """Eager reference of :func:`sgl_meta.vllm_compute_slot_mappings`."""
    if len(block_tables) == 0:
        return

    def read(row, inside):
        if positions.numel() == 0:  # no token is inside: every column is padding
            return torch.zeros(row.numel(), dtype=torch.long, device=row.device)
        t = torch.arange(row.numel(), device=row.device)
        return positions.long()[torch.where(inside, t, torch.zeros_like(t)).clamp(max=positions.numel() - 1)]

    slot_mappings_of(idx_mapping=idx_mapping, query_start_loc=query_start_loc, positions=read,
                     block_tables=block_tables, block_sizes=block_sizes, slot_mapping_enabled=slot_mapping_enabled,
                     dcp_sharded=dcp_sharded, slot_mappings=slot_mappings, cp_rank=cp_rank, cp_size=cp_size,
                     cp_interleave=cp_interleave, pad_id=pad_id)


def vllm_gather_block_tables(
    *,
    idx_mapping: torch.Tensor,
    src_block_tables: Sequence[torch.Tensor],
    num_blocks: torch.Tensor,
    dst_block_tables: Sequence[torch.Tensor],
    num_rows: int,
    num_computed_tokens: Optional[torch.Tensor] = None,
    sliding_window_reach: Optional[torch.Tensor] = None,
    block_sizes: Optional[torch.Tensor] = None,
) -> None:
    """Eager reference of :func:`sgl_meta.vllm_gather_block_tables`."""
    n = idx_mapping.numel()
    gathered = min(n, num_rows)
    req = idx_mapping[:gathered].long()
    owned = req != PAD_REQ
    safe_req = torch.where(owned, req, torch.zeros_like(req))
    for g, (src, dst) in enumerate(zip(src_block_tables, dst_block_tables)):
        rows = dst[:num_rows]
        rows[gathered:].zero_()
        if gathered == 0:
            continue
        width = dst.shape[1]
        cols = torch.arange(width, device=dst.device)
        nb = torch.where(owned, num_blocks[g].long()[safe_req], torch.zeros_like(req))
        null = torch.zeros_like(nb)
        if num_computed_tokens is not None:
            reach = sliding_window_reach[g].long()
            first = torch.where(owned, num_computed_tokens.long()[safe_req], torch.zeros_like(req))
            below = torch.div((first - reach).clamp(min=0), block_sizes[g].long().clamp(min=1), rounding_mode="floor")
            null = torch.where(reach > 0, below, null)
        live = cols[None, :] < nb[:, None]
        src_cols = cols.clamp(max=max(src.shape[1] - 1, 0))
        values = src[safe_req][:, src_cols] if src.numel() else torch.zeros_like(rows[:gathered])
        values = torch.where(cols[None, :] < null[:, None], torch.zeros_like(values), values)
        new = torch.where(live, values, rows[:gathered])
        rows[:gathered].copy_(torch.where(owned[:, None], new, torch.zeros_like(new)))
