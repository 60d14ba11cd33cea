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
from ._lengths import INT32_MAX, check_length, check_rows, on_host, values
from .kv_read_table import _entries, kv_read_page_table

_OP = "build_kv_indices"


def _cdiv(a: torch.Tensor, b) -> torch.Tensor:
    return torch.div(a + b - 1, b, rounding_mode="floor")


def _check_offset(b: int, given: int, dropped: int, offsets_dtype: torch.dtype) -> None:
    """The CPU kernel's check that row b's start fits kv_offsets (and int64 on the way)."""
    limit = 2**63 - 1 if offsets_dtype == torch.int64 else INT32_MAX
    if given >= 0 and given + dropped > limit:
        raise RuntimeError(
            f"sgl_meta.{_OP}: row {b}'s start, kv_start_idx[{b}] = {given} + {dropped} tokens before its window, "
            f"does not fit kv_offsets ({'int64' if offsets_dtype == torch.int64 else 'int32'})")


def _check_starts_and_sums(seq_lens: torch.Tensor, bs: int, kv_dtype: Optional[torch.dtype], q_stride: int,
                           mask_dtype: Optional[torch.dtype], name: str = "seq_lens", offsets=None) -> None:
    """The CPU kernel's per-row checks after the row's own values, in its order and messages: the
    row's start against kv_offsets (``offsets``: (given starts, dropped tokens, dtype)), then
    with ``kv_dtype`` the running sums (kv_indptr, then mask_indptr; ``name``: what the lengths are)."""
    if not on_host(seq_lens):
        return
    mask_max = None if mask_dtype is None else INT32_MAX if mask_dtype == torch.int32 else 2**63 - 1
    total = 0
    for b, v in enumerate(values(seq_lens, bs)):
        if offsets is not None:
            _check_offset(b, int(offsets[0][b]), int(offsets[1][b]), offsets[2])
        if kv_dtype is None:
            continue
        total += v
        if kv_dtype == torch.int32 and total > INT32_MAX:
            raise RuntimeError(f"sgl_meta.{_OP}: the running sum of {name}[0..{b}] = {total} does not fit "
                               "kv_indptr (int32)")
        if mask_max is not None and q_stride * (total + (b + 1) * q_stride) > mask_max:
            raise RuntimeError(
                f"sgl_meta.{_OP}: the running sum of q_stride * ({name} + q_stride) over rows 0..{b} "
                f"({name} summed: {total}, q_stride = {q_stride}) does not fit mask_indptr "
                f"({'int32' if mask_dtype == torch.int32 else 'int64'})")


def _splits(lens: torch.Tensor, bs: int, num_group: int, num_head: int, num_kv_head: int, max_kv_splits: int,
            device_core_count: int):
    """get_num_kv_splits_triton's counts per row and its uneven flag."""
    mx = lens.max().clamp(min=1)
    mn = lens.min().clamp(min=1)
    mn = torch.where(mx * 8 < mn * 10, mx, mn)
    # Constants as scalars, not device tensors: an H2D copy would keep the reference out of CUDA graphs.
    c1 = _cdiv(mx, _cdiv(mx, mn).clamp(max=max_kv_splits))
    grow = torch.log2(mx.to(torch.float32) / 64.0).clamp(min=1.0)
    ext_cores = (grow * float(device_core_count)).long()  # float32, as the kernel computes it
    kv_group = num_head // num_kv_head
    per_seq = num_head if kv_group == 1 else -(-num_head // min(16, kv_group))
    grid = bs * num_group * per_seq
    s2 = _cdiv(ext_cores.clamp(min=1), grid).clamp(max=max_kv_splits)
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
    qo_indptr: Optional[torch.Tensor] = None,
    q_stride: int = 0,
    mask_indptr: Optional[torch.Tensor] = None,
    extend_seq_lens: Optional[torch.Tensor] = None,
    sliding_window: int = 0,
    kv_offsets: Optional[torch.Tensor] = None,
) -> None:
    """Eager reference of :func:`sgl_meta.build_kv_indices`."""
    if sliding_window < 0:
        raise RuntimeError(f"sgl_meta.{_OP}: sliding_window must be >= 0, got {sliding_window}")
    bs = req_pool_indices.numel()
    name = "seq_lens"
    if extend_seq_lens is None:
        check_rows(_OP, seq_lens, bs, "seq_lens")
    else:  # row by row, each row's two values in turn (the kernels' order)
        if bs > 0 and on_host(seq_lens) and on_host(extend_seq_lens):
            for i, (n, e) in enumerate(zip(values(seq_lens, bs), values(extend_seq_lens, bs))):
                check_length(_OP, f"seq_lens[{i}]", n)
                check_length(_OP, f"extend_seq_lens[{i}]", e)
        seq_lens = (seq_lens[:bs].long() - extend_seq_lens[:bs].long()).clamp(min=0)
        name = "seq_lens - extend_seq_lens"
    if bs == 0:
        return
    whole = seq_lens[:bs].long()
    if sliding_window > 0:  # the last min(L, W) tokens of each row
        seq_lens = whole.clamp(max=sliding_window)
        name = f"min({name}, sliding_window)"
    elif name != "seq_lens":
        name = f"({name})"
    device = req_to_token.device
    given = torch.zeros(bs, dtype=torch.int64, device=device) if kv_start_idx is None else kv_start_idx[:bs].long()
    dropped = whole - seq_lens[:bs].long()  # the tokens before the window
    if write_indptr or kv_offsets is not None:
        _check_starts_and_sums(seq_lens, bs, kv_indptr.dtype if write_indptr else None, q_stride,
                               None if mask_indptr is None else mask_indptr.dtype, name,
                               None if kv_offsets is None else (given, dropped, kv_offsets.dtype))
    lens = seq_lens[:bs].long().clamp(0, INT32_MAX)
    if write_indptr:
        ptr = torch.cat([torch.zeros(1, dtype=torch.int64, device=device), torch.cumsum(lens, 0)])
    else:
        ptr = kv_indptr[: bs + 1].long()
    req = req_pool_indices.long()
    # past the tokens before the window (saturating: such a start reads nothing)
    start = torch.where(given > 2**63 - 1 - dropped, torch.full_like(given, 2**63 - 1), given + dropped)
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
    if kv_offsets is not None:
        kv_offsets[:bs].copy_(start)
    if qo_indptr is not None or mask_indptr is not None:
        starts = torch.arange(bs + 1, dtype=torch.int64, device=device) * q_stride  # qo_indptr
        if qo_indptr is not None:
            qo_indptr[: bs + 1].copy_(starts)
        if mask_indptr is not None:
            mask_indptr[: bs + 1].copy_(q_stride * (ptr + starts))
    if num_kv_splits is not None:
        counts, uneven = _splits(lens, bs, num_group, num_head, num_kv_head, max_kv_splits, device_core_count)
        num_kv_splits[: bs * num_group].copy_(counts.repeat_interleave(num_group))
        if uneven_batch is not None:
            uneven_batch[:1].copy_(uneven.reshape(1))


create_flashinfer_kv_indices = _op.adapt_reference(dropins.create_flashinfer_kv_indices, build_kv_indices)
create_flashmla_kv_indices = dropins.flashmla_dropin(kv_read_page_table)
create_flashmla_kv_indices.__doc__ = "Eager reference of :func:`sgl_meta.create_flashmla_kv_indices`."


_DRAFT_OP = "build_draft_decode_kv_indices"


def _draft_chain_start(lens, t, topk: int, num_steps: int, page_size: int):
    """Branch t's first draft position (ints or tensors of non-negative lengths)."""
    if page_size == 1 or topk == 1:
        return lens + t * num_steps
    last = lens % page_size
    pages = (last + num_steps + page_size - 1) // page_size
    return lens - last + t * pages * page_size + last


def _check_draft(req_to_token, req_pool_indices, seq_lens, positions, kv_indices, kv_indptr, bs, topk,
                 num_steps, page_size, cap, indptr_max) -> None:
    """The CPU kernel's checks of device values, in its order and words (host tensors only)."""
    if not on_host(seq_lens):
        return
    pool, row_len = req_to_token.shape
    width = kv_indices.shape[1]
    cum = 0
    for b, (req, n) in enumerate(zip(values(req_pool_indices, bs), values(seq_lens, bs))):
        if not 0 <= req < pool:
            raise RuntimeError(f"sgl_meta.{_DRAFT_OP}: req_pool_indices[{b}] = {req} is outside [0, "
                               f"req_to_token.size(0) = {pool})")
        if not 0 <= n <= INT32_MAX:
            raise RuntimeError(f"sgl_meta.{_DRAFT_OP}: seq_lens[{b}] = {n} is negative or does not fit int32")
        chain_end = _draft_chain_start(n, topk - 1, topk, num_steps, page_size)
        if n > row_len or chain_end + num_steps > row_len:
            raise RuntimeError(f"sgl_meta.{_DRAFT_OP}: request {b} (seq_lens = {n}) reads past its req_to_token "
                               f"row of {row_len} positions (its prefix and every branch's {num_steps} draft slots)")
        prefix = min(n, cap) if cap else n
        end = cum * topk + b * num_steps * topk + (topk - 1) * (prefix + num_steps) + prefix + num_steps
        if cum > width // topk or end > width:
            raise RuntimeError(f"sgl_meta.{_DRAFT_OP}: request {b}'s ids of the last step end past "
                               f"kv_indices.size(1) = {width}")
        cum += prefix
    total = 0
    for z, v in enumerate(values(positions, bs * topk)):
        if not 0 <= v <= INT32_MAX:
            raise RuntimeError(f"sgl_meta.{_DRAFT_OP}: positions[{z}] = {v} is negative or does not fit int32")
        total += min(v, cap) if cap else v
    n = bs * topk
    if total > indptr_max - n * num_steps:
        raise RuntimeError(f"sgl_meta.{_DRAFT_OP}: kv_indptr's last value ({total} + {n} * {num_steps}) does not "
                           f"fit kv_indptr ({'int64' if indptr_max > INT32_MAX else 'int32'})")


def build_draft_decode_kv_indices(
    *,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    positions: torch.Tensor,
    kv_indices: torch.Tensor,
    kv_indptr: torch.Tensor,
    topk: int,
    num_steps: int,
    page_size: int = 1,
    window_size: int = 0,
    sink_size: int = 0,
    num_kv_splits: Optional[torch.Tensor] = None,
    num_head: int = 1,
    num_kv_head: int = 1,
    max_kv_splits: int = 1,
    device_core_count: int = 1,
) -> None:
    """Eager reference of :func:`sgl_meta.build_draft_decode_kv_indices`: per step, each
    element of the row finds its branch by ``searchsorted`` over the branches' ends."""
    for name, value, lo, hi in (("topk", topk, 1, 1024), ("num_steps", num_steps, 1, 64),
                                ("page_size", page_size, 1, INT32_MAX), ("window_size", window_size, 0, INT32_MAX),
                                ("sink_size", sink_size, 0, INT32_MAX), ("num_head", num_head, 1, INT32_MAX),
                                ("num_kv_head", num_kv_head, 1, num_head), ("max_kv_splits", max_kv_splits, 1, INT32_MAX),
                                ("device_core_count", device_core_count, 1, INT32_MAX)):
        if not lo <= value <= hi:  # the op's scalar checks, before anything else
            raise RuntimeError(f"sgl_meta.{_DRAFT_OP}: {name} = {value} is outside [{lo}, {hi}]")
    bs = req_pool_indices.numel()
    cap = window_size + sink_size if window_size > 0 else 0
    sink = sink_size if window_size > 0 else 0
    indptr_max = INT32_MAX if kv_indptr.dtype == torch.int32 else 2**63 - 1
    _check_draft(req_to_token, req_pool_indices, seq_lens, positions, kv_indices, kv_indptr, bs, topk, num_steps,
                 page_size, cap, indptr_max)
    if bs == 0:
        return
    device = req_to_token.device
    lens = seq_lens[:bs].long()
    prefix = lens.clamp(max=cap) if cap else lens
    req = req_pool_indices.long()
    width = kv_indices.shape[1]
    j = torch.arange(width, device=device)
    branch = torch.arange(bs * topk, device=device)
    b_of, t_of = branch // topk, branch % topk
    pv = positions[: bs * topk].long()
    pv_sum = torch.cumsum(pv.clamp(max=cap) if cap else pv, 0)
    for s in range(num_steps):
        it = s + 1
        seg = (prefix[b_of] + it)
        ends = torch.cumsum(seg, 0)
        z = torch.searchsorted(ends, j, right=True)
        live = z < bs * topk
        z = z.clamp(max=bs * topk - 1)
        i = j - (ends[z] - seg[z])
        b, t = b_of[z], t_of[z]
        n, w = lens[b], prefix[b]
        if cap:
            e = torch.clamp(n, max=sink)
            pre = torch.where(i < e, i, n - w + i)
        else:
            pre = i
        pos = torch.where(i < w, pre, _draft_chain_start(n, t, topk, num_steps, page_size) + i - w)
        pos = torch.where(live, pos, torch.zeros_like(pos)).clamp(0, req_to_token.shape[1] - 1)
        ids = req_to_token[req[b], pos].to(kv_indices.dtype)
        kv_indices[s].copy_(torch.where(live, ids, kv_indices[s]))
        kv_indptr[s, 1 : bs * topk + 1].copy_(pv_sum + (branch + 1) * it)
    if num_kv_splits is not None:
        counts, _ = _splits(lens, bs, topk, num_head, num_kv_head, max_kv_splits, device_core_count)
        num_kv_splits[: bs * topk].copy_(counts.repeat_interleave(topk))
