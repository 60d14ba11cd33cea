"""Eager references of the KV read-table ops (the unfused, capturable path).

Plain aten ops over the static shapes only (no ``.item()``, no data-dependent
sizes), so they can be captured in a CUDA graph like the fused ops. Upstream's
own eager path (its CPU branch) loops over rows with ``int(seq_lens[b])``, a
host sync per row; these compute every row at once over the static width and
mask by the device-side lengths instead.
"""

from __future__ import annotations

from typing import Optional

import torch

from .. import kv_read_table as dropins
from ._lengths import check_rows


def _window(op, req_to_token, req_pool_indices, seq_lens, kv_start_idx, seq_len_delta):
    """(bs, rows of req_to_token, window starts, lengths + delta, tokens left
    in each row past its start). On CPU a length or window length outside
    [0, 2**31 - 1] raises as the op does."""
    bs = req_pool_indices.numel()
    device = req_to_token.device
    req = req_pool_indices.long()
    start = torch.zeros(bs, dtype=torch.int64, device=device) if kv_start_idx is None else kv_start_idx[:bs].long()
    check_rows(op, seq_lens, bs, "seq_lens", window=lambda v: v + seq_len_delta, window_what="seq_len_delta")
    # (clamped for the devices that do not check: only in-bounds values follow)
    lens = (seq_lens[:bs].long().clamp(0, 2**31 - 1) + seq_len_delta).clamp(min=0)
    left = (req_to_token.shape[1] - start).clamp(min=0)
    return bs, req, start, lens, left


def _ceil_div(x: torch.Tensor, d: int) -> torch.Tensor:
    """ceil(x / d) for x >= 0 (0 for 0), without the x + d - 1 that overflows for huge d."""
    return torch.where(x > 0, torch.floor_divide(x - 1, d) + 1, torch.zeros_like(x))


def _entries(slots: torch.Tensor, live: torch.Tensor, page_size: int, v2p: Optional[torch.Tensor]):
    """entry(slot): the virtual page (a negative slot reads page 0), through v2p
    with -1 clamped to 0. Dead positions look up page 0 (never past v2p)."""
    slots = slots.long()
    vpage = torch.where(slots < 0, torch.zeros_like(slots), torch.floor_divide(slots, page_size))
    if v2p is None:
        return vpage
    if v2p.numel() == 0:  # nothing live may read it (valid inputs): entries unused
        return torch.zeros_like(vpage)
    return v2p[torch.where(live, vpage, torch.zeros_like(vpage))].clamp(min=0)


def kv_read_page_table(
    *,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    out: torch.Tensor,
    page_size: int,
    max_pages: int,
    v2p: Optional[torch.Tensor] = None,
    kv_start_idx: Optional[torch.Tensor] = None,
    seq_len_delta: int = 0,
    zero_tail: bool = False,
) -> None:
    """Eager reference of :func:`sgl_meta.kv_read_page_table`: one gather of the
    page-start slots over ``[bs, max_pages]``, the translation, a masked copy."""
    bs, req, start, lens, left = _window("kv_read_page_table", req_to_token, req_pool_indices, seq_lens,
                                         kv_start_idx, seq_len_delta)
    if bs == 0 or max_pages == 0:
        return
    n = torch.minimum(_ceil_div(lens, page_size), _ceil_div(left, page_size)).clamp(max=max_pages)
    cols = torch.arange(max_pages, device=req_to_token.device)
    live = cols[None, :] < n[:, None]
    region = out[:bs, :max_pages]
    if req_to_token.shape[1] == 0:  # no slot to read: n == 0 everywhere
        values = torch.zeros_like(region)
    else:
        pos = torch.where(live, start[:, None] + cols[None, :] * page_size, torch.zeros_like(live, dtype=torch.int64))
        slots = req_to_token[req[:, None], pos]
        values = _entries(slots, live, page_size, v2p).to(torch.int32)
    fill = torch.zeros_like(region) if zero_tail else region
    region.copy_(torch.where(live, values, fill))


def kv_read_token_stream(
    *,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    indptr: torch.Tensor,
    out: torch.Tensor,
    page_size: int,
    v2p: Optional[torch.Tensor] = None,
    kv_start_idx: Optional[torch.Tensor] = None,
    seq_len_delta: int = 0,
) -> None:
    """Eager reference of :func:`sgl_meta.kv_read_token_stream`, computed per
    element of ``out``: element ``j`` belongs to the last row ``b`` with
    ``indptr[b] <= j`` (``searchsorted``; the contract makes ``indptr``
    non-decreasing), token ``i = j - indptr[b]``, written when ``i < n_b``.
    Elementwise over ``out.numel()``, so its cost follows the stream's
    capacity, not ``bs * max_context_len``."""
    bs, req, start, lens, left = _window("kv_read_token_stream", req_to_token, req_pool_indices, seq_lens,
                                         kv_start_idx, seq_len_delta)
    cap = out.numel()
    if bs == 0 or cap == 0 or req_to_token.shape[1] == 0:  # (no row, no room, or no token to read)
        return
    n = torch.minimum(lens, left)
    ptr = indptr[: bs + 1].long()
    j = torch.arange(cap, device=out.device)
    row = torch.searchsorted(ptr[1:], j, right=True)
    in_batch = row < bs
    row = row.clamp(max=bs - 1)
    i = j - ptr[row]
    live = in_batch & (i >= 0) & (i < n[row])
    pos = torch.where(live, start[row] + i, torch.zeros_like(i))
    page = torch.floor_divide(pos, page_size)
    slots = req_to_token[req[row], page * page_size]
    ids = _entries(slots, live, page_size, v2p) * page_size + (pos - page * page_size)
    out.copy_(torch.where(live, ids.to(out.dtype), out))


# The drop-ins (upstream's signatures, host checks included) over these references.
build_kv_read_table = dropins.table_dropin(kv_read_page_table)
build_kv_read_table.__doc__ = "Eager reference of the drop-in :func:`sgl_meta.build_kv_read_table`."
build_kv_read_table_packed = dropins.packed_dropin(kv_read_token_stream)
build_kv_read_table_packed.__doc__ = "Eager reference of the drop-in :func:`sgl_meta.build_kv_read_table_packed`."
