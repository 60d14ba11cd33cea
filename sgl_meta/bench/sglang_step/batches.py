"""Decode batches at serving sizes: pages scattered over the pool, lengths that grow per step.

The kit's own batch builder writes ``req_to_token`` one token at a time from
Python, which takes minutes at 128k-token contexts; this fills the same table
(shuffled pages per request, SGLang's page layout: slot ``page * page_size + i``)
with a few tensor operations and then builds the ``ForwardBatch`` the kit does.
"""

from __future__ import annotations

import torch

from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode


def fill_req_to_token(req_to_token: torch.Tensor, bs: int, page_size: int, gen: torch.Generator) -> None:
    """Rows ``[:bs]`` of ``req_to_token`` over pages ``1..`` (page 0 is SGLang's sink),
    each request's pages in a random order, the pool's pages shuffled across requests."""
    width = req_to_token.shape[1]
    pages_per_req = width // page_size
    perm = torch.randperm(bs * pages_per_req, generator=gen).view(bs, pages_per_req) + 1
    offsets = torch.arange(page_size, dtype=torch.int64)
    slots = (perm.unsqueeze(-1) * page_size + offsets).view(bs, pages_per_req * page_size)
    req_to_token[:bs, : slots.shape[1]].copy_(slots.to(req_to_token.dtype))


def seq_lens(bs: int, context: int, headroom: int, gen: torch.Generator) -> torch.Tensor:
    """Lengths spread over the upper half of ``context``, leaving ``headroom`` tokens for the steps."""
    hi = context - headroom
    return torch.randint(max(1, hi // 2), hi + 1, (bs,), generator=gen, dtype=torch.int64)


def forward_batch(mode: ForwardMode, lens: torch.Tensor, tokens_per_req: int, device) -> ForwardBatch:
    """The ``ForwardBatch`` of the kit's ``_make_forward_batch`` for these lengths
    (requests in pool rows ``0..bs-1``), without KV write locations: the metadata
    path measured here reads none. ``seq_lens`` and ``req_pool_indices`` are int64,
    as in the graph runner's buffers: a backend's ``seq_lens.to(torch.int32)`` then
    makes its own buffer, as in serving, instead of aliasing the batch's."""
    bs = lens.numel()
    n = bs * tokens_per_req
    lens_dev = lens.to(device)
    positions = (lens_dev.repeat_interleave(tokens_per_req) - 1).to(torch.int64)
    return ForwardBatch(
        forward_mode=mode,
        batch_size=bs,
        input_ids=torch.zeros(n, dtype=torch.int64, device=device),
        req_pool_indices=torch.arange(bs, dtype=torch.int64, device=device),
        seq_lens=lens_dev,
        seq_lens_cpu=lens.clone(),
        out_cache_loc=torch.zeros(n, dtype=torch.int64, device=device),
        seq_lens_sum=int(lens.sum()),
        positions=positions,
    )


def advance(batch: ForwardBatch, by: int = 1) -> None:
    """Next step: every request ``by`` tokens longer, in the same buffers (as the graph runner does)."""
    batch.seq_lens.add_(by)
    batch.seq_lens_cpu.add_(by)
    batch.seq_lens_sum += by * batch.batch_size
    batch.positions.add_(by)
