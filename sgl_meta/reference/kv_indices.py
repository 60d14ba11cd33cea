"""Eager references of the KV index-stream ops (the unfused, capturable path).

Plain aten ops over static shapes (no ``.item()``): the ids are computed per
element of ``kv_indices`` (its row by ``searchsorted`` over the CSR starts),
the running sum by ``cumsum``, the split counts by reductions, as SGLang's own
eager sequence does it (``torch.cumsum`` into ``kv_indptr[1:]``, then the
kernels).
"""

from __future__ import annotations

from typing import Optional

import torch

from .. import _op
from .. import kv_indices as dropins
from ._lengths import INT32_MAX, check_rows, on_host, values
from .kv_read_table import _entries, kv_read_page_table

_OP = "build_kv_indices"


def _cdiv(a: torch.Tensor, b) -> torch.Tensor:
    return torch.div(a + b - 1, b, rounding_mode="floor")


def _check_running_sum(seq_lens: torch.Tensor, bs: int, dtype: torch.dtype) -> None:
    """The CPU kernel's running-sum check (int32 kv_indptr), in its message."""
    if not on_host(seq_lens) or dtype != torch.int32:
        return
    total = 0
    for b, v in enumerate(values(seq_lens, bs)):
        total += v
        if total > INT32_MAX:
            raise RuntimeError(f"sgl_meta.{_OP}: the running sum of seq_lens[0..{b}] = {total} does not fit "
                               "kv_indptr (int32)")


def _splits(lens: torch.Tensor, bs: int, num_group: int, num_head: int, num_kv_head: int, max_kv_splits: int,
            device_core_count: int):
    """get_num_kv_splits_triton's counts per row and its uneven flag."""
    mx = lens.max().clamp(min=1)
    mn = lens.min().clamp(min=1)
    mn = torch.where(mx * 8 < mn * 10, mx, mn)
    c1 = _cdiv(mx, torch.minimum(_cdiv(mx, mn), torch.tensor(max_kv_splits, device=lens.device)))
    grow = torch.log2(mx.to(torch.float32) / 64.0).clamp(min=1.0)
    ext_cores = (torch.tensor(float(device_core_count), dtype=torch.float32, device=lens.device) * grow).long()
    kv_group = num_head // num_kv_head
    per_seq = num_head if kv_group == 1 else -(-num_head // min(16, kv_group))
    grid = bs * num_group * per_seq
    s2 = torch.minimum(_cdiv(ext_cores.clamp(min=1), grid), torch.tensor(max_kv_splits, device=lens.device))
    c2 = _cdiv(mx, s2)
    return torch.maximum(_cdiv(lens, c1), _cdiv(lens, c2)).to(torch.int32), (mn < mx).to(torch.int32)


def build_kv_indices(
    *,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    write_indptr: bool,
    kv_start_idx: Optional[torch.Tensor] = None,
    entry_page_size: int = 1,
    token_mapping: Optional[torch.Tensor] = None,
    v2p: Optional[torch.Tensor] = None,
    page_size: int = 1,
    num_kv_splits: Optional[torch.Tensor] = None,
    uneven_batch: Optional[torch.Tensor] = None,
    num_group: int = 1,
    num_head: int = 1,
    num_kv_head: int = 1,
    max_kv_splits: int = 1,
    device_core_count: int = 1,
) -> None:
    """Eager reference of :func:`sgl_meta.build_kv_indices`."""
    bs = req_pool_indices.numel()
    check_rows(_OP, seq_lens, bs, "seq_lens")
    if bs == 0:
        return
    if write_indptr:
        _check_running_sum(seq_lens, bs, kv_indptr.dtype)
    device = req_to_token.device
    lens = seq_lens[:bs].long().clamp(0, INT32_MAX)
    if write_indptr:
        ptr = torch.cat([torch.zeros(1, dtype=torch.int64, device=device), torch.cumsum(lens, 0)])
    else:
        ptr = kv_indptr[: bs + 1].long()
    req = req_pool_indices.long()
    start = torch.zeros(bs, dtype=torch.int64, device=device) if kv_start_idx is None else kv_start_idx[:bs].long()
    width = req_to_token.shape[1]
    positions = width if v2p is not None else width * entry_page_size
    n = torch.minimum(lens, (positions - start).clamp(min=0))
    cap = kv_indices.numel()
    if cap and width:
        j = torch.arange(cap, device=device)
        row = torch.searchsorted(ptr[1:].contiguous(), j, right=True)
        in_batch = row < bs
        row = row.clamp(max=bs - 1)
        i = j - ptr[row]
        live = in_batch & (i >= 0) & (i < n[row])
        pos = torch.where(live, start[row] + i, torch.zeros_like(i))
        rows = req[row]
        if v2p is None:
            q = torch.div(pos, entry_page_size, rounding_mode="floor")
            ids = req_to_token[rows, q].long() * entry_page_size + (pos - q * entry_page_size)
        else:
            page = torch.div(pos, page_size, rounding_mode="floor")
            slots = req_to_token[rows, page * page_size]
            ids = _entries(slots, live, page_size, v2p) * page_size + (pos - page * page_size)
        if token_mapping is not None:
            take = live & (ids >= 0)
            mapped = token_mapping[torch.where(take, ids, torch.zeros_like(ids))].long()
            ids = torch.where(ids >= 0, mapped, torch.full_like(ids, -1))
        kv_indices.copy_(torch.where(live, ids.to(kv_indices.dtype), kv_indices))
    if write_indptr:
        kv_indptr[: bs + 1].copy_(ptr)
    if num_kv_splits is not None:
        counts, uneven = _splits(lens, bs, num_group, num_head, num_kv_head, max_kv_splits, device_core_count)
        num_kv_splits[: bs * num_group].copy_(counts.repeat_interleave(num_group))
        if uneven_batch is not None:
            uneven_batch[:1].copy_(uneven.reshape(1))


create_flashinfer_kv_indices = _op.adapt_reference(dropins.create_flashinfer_kv_indices, build_kv_indices)
create_flashmla_kv_indices = dropins.flashmla_dropin(kv_read_page_table)
create_flashmla_kv_indices.__doc__ = "Eager reference of :func:`sgl_meta.create_flashmla_kv_indices`."
