"""Random valid calls of the FlashAttention metadata drop-ins (upstream's argument
names), shared by the tests, the reliability base calls and the GPU tests."""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch

from helpers import map_tensors, on_device

POISON = -7


@dataclasses.dataclass(frozen=True)
class FaCase:
    bs: int = 5
    page_size: int = 16
    max_seq_pages: int = 9
    pool: int = 11
    delta: int = 0
    swa: str = "none"  # "none", "mapping" (token slots), "v2p" (pages)
    full_v2p: bool = False
    zero_tail: bool = False
    skip_page_table: bool = False
    index_dtype: torch.dtype = torch.int32
    mapping_dtype: torch.dtype = torch.int64
    negative_slots: bool = False  # sprinkle -1 slots (sentinels)
    tokens_per_req: int = 2  # draft extend: out_cache_loc entries per request
    width_pad: int = 2  # page-table columns past max_seq_pages (never written)


def _randint(gen, lo, hi, shape, dtype=torch.int64):
    return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64).to(dtype)


def decode_call(c: FaCase, gen: torch.Generator, device="cpu") -> dict:
    """Keyword arguments of ``normal_decode_set_metadata`` (outputs poisoned)."""
    ps, msp = c.page_size, c.max_seq_pages
    ctx = max(msp, 1) * ps
    slots_hi = c.pool * ctx
    req_to_token = _randint(gen, 0, slots_hi, (c.pool, ctx), torch.int32)
    if c.negative_slots:
        req_to_token[torch.rand((c.pool, ctx), generator=gen) < 0.2] = -1
    # lengths past the table (capped), empty rows, and a delta that keeps them >= 0
    lens = _randint(gen, 0, ctx + 2 * ps, (c.bs,))
    lens = (lens - c.delta).clamp(min=max(-c.delta, 0))
    out = dict(
        cache_seqlens_int32=torch.full((c.bs,), POISON, dtype=torch.int32),
        cu_seqlens_k=torch.full((c.bs + 1,), POISON, dtype=torch.int32),
        page_table=torch.full((c.bs, msp + c.width_pad), POISON, dtype=torch.int32),
        req_to_token=req_to_token,
        req_pool_indices=_randint(gen, 0, c.pool, (c.bs,), c.index_dtype),
        max_seq_pages=msp,
        seq_lens=lens.to(c.index_dtype),
        seq_len_delta=c.delta,
        page_size=ps,
        skip_page_table=c.skip_page_table,
        zero_tail=c.zero_tail,
    )
    vpages = slots_hi // ps + 1
    if c.full_v2p:
        out["full_v2p"] = _sink_table(gen, vpages)
    if c.swa == "mapping":
        out["full_to_swa_index_mapping"] = _randint(gen, 0, 4 * slots_hi, (slots_hi,), c.mapping_dtype)
    elif c.swa == "v2p":
        out["swa_v2p"] = _sink_table(gen, vpages)
    if c.swa != "none":
        out["swa_page_table"] = torch.full_like(out["page_table"], POISON)
    return on_device(out, device)


def _sink_table(gen, n: int) -> torch.Tensor:
    """A virtual -> physical page table with unbound (-1) and other negative entries."""
    v = _randint(gen, 0, 4 * n, (n,))
    v[torch.rand(n, generator=gen) < 0.2] = -1
    v[torch.rand(n, generator=gen) < 0.05] = -5
    return v


def draft_extend_call(c: FaCase, gen: torch.Generator, device="cpu") -> dict:
    """Keyword arguments of ``draft_extend_set_metadata`` (outputs poisoned)."""
    d = decode_call(dataclasses.replace(c, delta=0, full_v2p=False, swa="mapping" if c.swa != "none" else "none",
                                        zero_tail=False, skip_page_table=False, width_pad=0), gen)
    out = dict(
        cache_seqlens_int32=d["cache_seqlens_int32"],
        cu_seqlens_k=d["cu_seqlens_k"],
        cu_seqlens_q=torch.full((c.bs + 1,), POISON, dtype=torch.int32),
        page_table=d["page_table"],
        req_to_token=d["req_to_token"],
        req_pool_indices=d["req_pool_indices"],
        seq_lens=d["seq_lens"],
        extend_seq_lens=_randint(gen, 0, c.tokens_per_req + 1, (c.bs,), c.index_dtype),
        page_size=c.page_size,
    )
    if c.swa != "none":
        n = c.bs * c.tokens_per_req
        out.update(full_to_swa_index_mapping=d["full_to_swa_index_mapping"], swa_page_table=d["swa_page_table"],
                   out_cache_loc=_randint(gen, 0, d["full_to_swa_index_mapping"].numel(), (n,)),
                   swa_out_cache_loc=torch.full((n,), POISON, dtype=torch.int64))
    return on_device(out, device)


def swa_spec_call(gen: torch.Generator, bs: int = 3, repeat: int = 4, a_width: int = 40, b_width: int = 5,
                  dst_width: Optional[int] = None, consistent: bool = True, device="cpu") -> dict:
    """Positional arguments of ``prepare_swa_spec_page_table_triton`` as a dict.
    ``consistent``: lengths within the tables' widths (what SGLang passes)."""
    rows = bs * repeat
    dst_width = a_width + b_width if dst_width is None else dst_width
    hi_a, hi_b = (a_width, b_width) if consistent else (a_width + 30, b_width + 30)
    out = dict(
        page_table_dst=torch.full((rows, dst_width), POISON, dtype=torch.int32),
        page_table_a=_randint(gen, 0, 10_000, (bs, a_width), torch.int32),
        page_table_b=_randint(gen, 10_000, 20_000, (rows, b_width), torch.int32),
        seq_len_a=_randint(gen, 0, hi_a + 1, (bs,), torch.int32),
        seq_len_b=_randint(gen, 0, hi_b + 1, (rows,), torch.int32),
        speculative_num_draft_tokens=repeat,
    )
    return on_device(out, device)


def verify_expand_call(gen: torch.Generator, bs: int = 3, n: int = 4, ctx: int = 32, device="cpu") -> dict:
    """Keyword arguments of ``flash_attention_verify_expand``: the verify mask of SGLang's
    layout (request b's n rows of seq_lens[b] + n entries), poisoned outputs, a pool of
    bs + 2 rows."""
    pool = bs + 2
    seq = _randint(gen, 0, ctx - n + 1, (bs,), torch.int64)
    rows = bs * n
    out = dict(
        page_table=torch.full((rows, n), POISON, dtype=torch.int32),
        cache_seqlens=torch.full((rows,), POISON, dtype=torch.int32),
        cu_seqlens_k=torch.full((rows + 1,), POISON, dtype=torch.int32),
        custom_mask=torch.rand(int((seq + n).sum()) * n, generator=gen) < 0.5,
        req_to_token=_randint(gen, 0, 10_000, (pool, ctx), torch.int32),
        req_pool_indices=torch.randperm(pool, generator=gen)[:bs],
        seq_lens=seq, bs=bs, num_draft_tokens=n, mask_rows=rows,
    )
    return on_device(out, device)


def draft_topk_call(gen: torch.Generator, bs: int = 3, topk: int = 4, num_steps: int = 3, sets: int = 2,
                    page_size: int = 16, max_seq_pages: int = 6, expand_lens: bool = True, device="cpu") -> dict:
    """Keyword arguments of ``flash_attention_draft_decode_topk``: K = ``sets`` steps
    (decode lengths 1 .. K, as SGLang's step backends), poisoned outputs, a pool of bs + 2
    rows, each branch's draft slots a run of consecutive slots from a random start (so that
    pages repeat and change within a row), now and then a jump."""
    pool, rows = bs + 2, bs * topk
    ctx = max(max_seq_pages, 1) * page_size
    starts = _randint(gen, 0, 50_000, (rows, 1), torch.int64)
    jumps = (torch.rand(rows, num_steps, generator=gen) < 0.2).long() * _randint(gen, 0, 500, (rows, num_steps))
    loc = starts + torch.arange(num_steps) + jumps.cumsum(1)
    decode_length = [s + 1 for s in range(sets)]
    out = dict(
        cache_seqlens=[torch.full((bs,), POISON, dtype=torch.int32) for _ in range(sets)],
        page_table=[torch.full((bs, max_seq_pages + 2), POISON, dtype=torch.int32) for _ in range(sets)],
        expand_cache_seqlens=[torch.full((rows,), POISON, dtype=torch.int32) for _ in range(sets)]
        if expand_lens else [],
        expand_page_table=[torch.full((rows, d + 1), POISON, dtype=torch.int32) for d in decode_length],
        req_to_token=_randint(gen, 0, 2**20, (pool, ctx), torch.int32),
        req_pool_indices=torch.randperm(pool, generator=gen)[:bs],
        seq_lens=_randint(gen, 0, ctx + 1, (bs,), torch.int64),
        out_cache_loc=loc.reshape(-1), bs=bs, topk=topk, num_steps=num_steps, decode_length=decode_length,
        page_size=page_size, max_seq_pages=max_seq_pages,
    )
    return on_device(out, device)


def skew_lengths(kw: dict, gen: torch.Generator) -> dict:
    """``kw`` with most ``seq_lens`` short and one in 4 to past half the req_to_token row
    (the static-width decode at page size 1: most of each table past its row's length)."""
    ctx, bs = kw["req_to_token"].shape[1], kw["seq_lens"].numel()
    lens = torch.randint(0, 300, (bs,), generator=gen)
    long = torch.rand(bs, generator=gen) < 1 / 4
    lens[long] = torch.randint(ctx // 2, ctx + 1, (int(long.sum()),), generator=gen)
    kw["seq_lens"] = lens.to(kw["seq_lens"].dtype)
    return kw


def clone_call(kw: dict) -> dict:
    return map_tensors(kw, torch.Tensor.clone)


OUTPUTS = ("cache_seqlens_int32", "cu_seqlens_k", "cu_seqlens_q", "page_table", "swa_page_table",
           "swa_out_cache_loc", "page_table_dst")
