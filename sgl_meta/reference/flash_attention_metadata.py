"""Eager references of the FlashAttention backend metadata ops.

Plain aten ops over the static shapes (no ``.item()``): the unfused path SGLang's
FlashAttention backend ran before its Triton kernels (``cache_seqlens`` copy, a
cumsum, a strided gather of ``req_to_token`` divided by the page size, the SWA
translation), one set after another. On CPU a length outside the contract raises
as the op does.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from .. import _op
from .. import flash_attention_metadata as dropins
from ._lengths import RunningSum, check_length, check_rows, fits, on_host, values
from .trtllm_mha_metadata import _gather_page_slots, _swa_translate, _v2p_translate

_OP = "update_flash_attention_metadata"


def _check_lengths(seq_lens, extend_seq_lens, bs: int, deltas: Sequence[int], sums: bool = True) -> None:
    """The CPU kernel's length checks, in its order (running sums only where written)."""
    if not on_host(seq_lens):
        return
    multi = len(deltas) > 1

    def of_set(name: str, s: int) -> str:
        return f"{name}[{s}]" if multi else name

    seq, ext = values(seq_lens, bs), values(extend_seq_lens, bs)
    q_sum = RunningSum(_OP, "extend_seq_lens", "cu_seqlens_q", "cu_seqlens_q")
    k_sums = [RunningSum(_OP, "cache_seqlens" + (f"[{s}]" if multi else ""), of_set("cu_seqlens_k", s),
                         of_set("cu_seqlens_k", s)) for s in range(len(deltas))]
    for i in range(bs):
        check_length(_OP, f"seq_lens[{i}]", seq[i], "cache_seqlens")
        if extend_seq_lens is not None:
            check_length(_OP, f"extend_seq_lens[{i}]", ext[i], "cu_seqlens_q")
            q_sum.add(i, ext[i])
        for s, delta in enumerate(deltas):
            length = seq[i] + delta
            check_length(_OP, f"seq_lens[{i}] + {of_set('seq_len_delta', s)}", length, of_set("cache_seqlens", s))
            if sums:
                k_sums[s].add(i, length)
    assert not sums or all(fits(k.total) for k in k_sums)


def _pages(slots: torch.Tensor, live: torch.Tensor, page_size: int, v2p: Optional[torch.Tensor]) -> torch.Tensor:
    """The full table's entries; dead columns read slot 0 (never past a table)."""
    if v2p is None:
        return torch.floor_divide(slots.long(), page_size)
    return _v2p_translate(torch.where(live, slots, torch.zeros_like(slots)), v2p, page_size)


def _swa_pages(slots, live, page_size, mapping, swa_v2p) -> torch.Tensor:
    slots = torch.where(live, slots, torch.zeros_like(slots))
    if swa_v2p is not None:
        return _v2p_translate(slots, swa_v2p, page_size)
    if mapping.numel() == 0:  # nothing live may read it (valid inputs)
        return torch.zeros_like(slots, dtype=torch.int64)
    return torch.floor_divide(_swa_translate(slots, mapping), page_size)


def update_flash_attention_metadata(
    *,
    cache_seqlens: Sequence[torch.Tensor],
    cu_seqlens_k: Sequence[torch.Tensor],
    page_table: Sequence[torch.Tensor],
    swa_page_table: Optional[Sequence[torch.Tensor]] = None,
    cu_seqlens_q: Optional[torch.Tensor] = None,
    swa_out_cache_loc: Optional[torch.Tensor] = None,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    seq_len_delta: Sequence[int],
    bs: int,
    max_seq_pages: int,
    page_size: int,
    extend_seq_lens: Optional[torch.Tensor] = None,
    full_to_swa_index_mapping: Optional[torch.Tensor] = None,
    full_v2p: Optional[torch.Tensor] = None,
    swa_v2p: Optional[torch.Tensor] = None,
    out_cache_loc: Optional[torch.Tensor] = None,
    skip_page_table: bool = False,
    zero_tail: bool = False,
) -> None:
    """Eager reference of :func:`sgl_meta.update_flash_attention_metadata`: one set after another."""
    if bs == 0:
        return
    _check_lengths(seq_lens, extend_seq_lens, bs, list(seq_len_delta), sums=bool(cu_seqlens_k))
    lens = [(seq_lens[:bs].long() + d) for d in seq_len_delta]
    for s, (cache, length) in enumerate(zip(cache_seqlens, lens)):
        cache[:bs].copy_(length.to(torch.int32))
        if cu_seqlens_k:
            cu_seqlens_k[s][:1].zero_()  # (no host scalar copy: stays graph-capturable)
            cu_seqlens_k[s][1 : bs + 1].copy_(torch.cumsum(length, 0).to(torch.int32))
    if cu_seqlens_q is not None:
        cu_seqlens_q[:1].zero_()
        cu_seqlens_q[1 : bs + 1].copy_(torch.cumsum(extend_seq_lens[:bs].long(), 0).to(torch.int32))

    if not skip_page_table and max_seq_pages > 0:
        # ceil(len / page_size), capped at the table width, per set with a table
        cols = [(torch.floor_divide(n.clamp(min=0) - 1, page_size) + 1).clamp(max=max_seq_pages)
                for n in lens[: len(page_table)]]
        col = torch.arange(max_seq_pages, device=req_to_token.device)
        live = col[None, :] < torch.stack(cols).amax(0)[:, None]
        slots = _gather_page_slots(req_to_token, req_pool_indices, bs, max_seq_pages, page_size)
        full = _pages(slots, live, page_size, full_v2p).to(torch.int32)
        swa = None
        if swa_page_table:
            swa = _swa_pages(slots, live, page_size, full_to_swa_index_mapping, swa_v2p).to(torch.int32)
        for s, n in enumerate(cols):
            mask = col[None, :] < n[:, None]
            for table, entries in ((page_table[s], full), (swa_page_table[s] if swa is not None else None, swa)):
                if table is None:
                    continue
                region = table[:bs, :max_seq_pages]
                region.copy_(torch.where(mask, entries, torch.zeros_like(entries) if zero_tail else region))

    if swa_out_cache_loc is not None and swa_out_cache_loc.numel():
        n = swa_out_cache_loc.numel()
        swa_out_cache_loc.copy_(_swa_translate(out_cache_loc[:n], full_to_swa_index_mapping))


def flash_attention_swa_spec_page_table(
    *,
    page_table_dst: torch.Tensor,
    page_table_a: torch.Tensor,
    page_table_b: torch.Tensor,
    seq_len_a: torch.Tensor,
    seq_len_b: torch.Tensor,
    speculative_num_draft_tokens: int,
) -> None:
    """Eager reference of :func:`sgl_meta.flash_attention_swa_spec_page_table`: the
    concatenation as gathers and a masked copy."""
    rows = seq_len_b.numel()
    a_width, b_width = page_table_a.shape[1], page_table_b.shape[1]
    width = min(page_table_dst.shape[1], a_width + b_width)
    if rows == 0 or width == 0:
        return
    op = "flash_attention_swa_spec_page_table"
    check_rows(op, seq_len_a, seq_len_a.numel(), "seq_len_a")
    check_rows(op, seq_len_b, rows, "seq_len_b")
    device = page_table_dst.device
    m = torch.arange(rows, device=device)
    a_row = torch.div(m, speculative_num_draft_tokens, rounding_mode="floor")
    la = seq_len_a.long()[a_row][:, None]
    lb = seq_len_b.long()[:, None]
    n = torch.arange(width, device=device)[None, :]
    a_pad = torch.nn.functional.pad(page_table_a[:, :width], (0, max(width - a_width, 0)))
    b_pad = torch.nn.functional.pad(page_table_b, (0, 1))  # column b_width holds the 0 past B
    nb = (n - la).clamp(min=0, max=b_width)
    from_b = torch.gather(b_pad[:rows], 1, nb)
    value = torch.where(n < la, a_pad[a_row], from_b)
    region = page_table_dst[:rows, :width]
    region.copy_(torch.where(n < la + lb, value, region))


def flash_attention_verify_expand(
    *,
    page_table: torch.Tensor,
    cache_seqlens: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    custom_mask: torch.Tensor,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    bs: int,
    num_draft_tokens: int,
    mask_rows: int,
) -> None:
    """Eager reference of :func:`sgl_meta.flash_attention_verify_expand`: each row's mask
    entries gathered, the draft columns ordered by a sort on (masked out, column), the
    slots gathered from the request rows."""
    n = num_draft_tokens
    rows = bs * n
    if rows == 0:
        return
    op = "flash_attention_verify_expand"
    check_rows(op, seq_lens, bs, "seq_lens")
    device = page_table.device
    seq = seq_lens[:bs].long().repeat_interleave(n)  # [rows]
    base = torch.cumsum(seq + n, 0) - (seq + n)
    j = torch.arange(n, device=device)
    index = (base + seq)[:, None] + j[None, :]
    padding = torch.arange(rows, device=device)[:, None] >= mask_rows
    mask = custom_mask[index.masked_fill(padding, 0)]  # [rows, n]
    _, order = torch.sort(torch.where(mask, j, j + n), dim=1)
    req = req_pool_indices[:bs].long().repeat_interleave(n)
    slots = req_to_token[req[:, None], seq[:, None] + order]
    page_table[:rows, :n].copy_(slots)
    count = mask.sum(dim=1, dtype=torch.int32)
    cache_seqlens[:rows].copy_(count)
    cu_seqlens_k[:1].zero_()
    cu_seqlens_k[1:rows + 1].copy_(torch.cumsum(count, 0, dtype=torch.int32))


def flash_attention_draft_decode_topk(
    *,
    cache_seqlens: Sequence[torch.Tensor],
    page_table: Sequence[torch.Tensor],
    expand_cache_seqlens: Sequence[torch.Tensor],
    expand_page_table: Sequence[torch.Tensor],
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    out_cache_loc: torch.Tensor,
    bs: int,
    topk: int,
    num_steps: int,
    decode_length: Sequence[int],
    page_size: int,
    max_seq_pages: int,
) -> None:
    """Eager reference of :func:`sgl_meta.flash_attention_draft_decode_topk`, step after
    step as SGLang's backends run them: the prefix length floored to a page, a strided
    gather divided by the page size, and the draft slots' pages placed by a running count
    of page changes (a scatter)."""
    if bs == 0:
        return
    op = "flash_attention_draft_decode_topk"
    check_rows(op, seq_lens, bs, "seq_lens")
    device = req_to_token.device
    seq = seq_lens[:bs].long()
    last = torch.remainder(seq, page_size)
    prefix = seq - last
    pages = torch.div(prefix, page_size, rounding_mode="floor").clamp(max=max_seq_pages)
    col = torch.arange(max_seq_pages, device=device)
    live = col[None, :] < pages[:, None]
    slots = _gather_page_slots(req_to_token, req_pool_indices, bs, max_seq_pages, page_size)
    entries = torch.floor_divide(torch.where(live, slots, torch.zeros_like(slots)).long(), page_size).to(torch.int32)
    rows = bs * topk
    loc = out_cache_loc[: rows * num_steps].long().view(rows, num_steps)
    for s, d in enumerate(decode_length):
        cache_seqlens[s][:bs].copy_(prefix)
        if max_seq_pages > 0:
            region = page_table[s][:bs, :max_seq_pages]
            region.copy_(torch.where(live, entries, region))
        draft = loc[:, :d]
        if page_size == 1:
            expand_page_table[s][:rows, :d].copy_(draft)
        else:
            draft = torch.floor_divide(draft, page_size)
            changed = torch.ones_like(draft, dtype=torch.bool)
            changed[:, 1:] = draft[:, 1:] != draft[:, :-1]
            expand_page_table[s][:rows].scatter_(1, changed.long().cumsum(1) - 1, draft.to(torch.int32))
        if expand_cache_seqlens:
            expand_cache_seqlens[s][:rows].copy_(d + last.repeat_interleave(topk))


normal_decode_set_metadata = dropins.decode_dropin(update_flash_attention_metadata)
draft_extend_set_metadata = dropins.draft_extend_dropin(update_flash_attention_metadata)


prepare_swa_spec_page_table_triton = _op.adapt_reference(dropins.prepare_swa_spec_page_table_triton,
                                                        flash_attention_swa_spec_page_table)
