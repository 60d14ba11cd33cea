"""Replay steps over a batch built through SGLang's attention test kit, for the
hook tests that run SGLang's world and the hooked one side by side."""

from __future__ import annotations

import torch


def replay_batch(batch, raw: int, seed: int, ctx: int, whole_row: bool = False) -> None:
    """New live rows and lengths in the captured batch's buffers; rows past ``raw``
    padded as the graph runner pads them (pool row 0, length 1). ``whole_row``:
    row 0 spans the whole ``ctx`` (with target verify's 4 draft tokens: the
    table's last page)."""
    gen = torch.Generator().manual_seed(seed)
    bs = batch.batch_size
    batch.req_pool_indices.copy_(torch.randperm(bs, generator=gen))
    batch.seq_lens.copy_(torch.randint(1, ctx - 300, (bs,), generator=gen))
    if whole_row:
        batch.seq_lens[0] = ctx - 4
    batch.req_pool_indices[raw:] = 0
    batch.seq_lens[raw:] = 1
    batch.seq_lens_cpu.copy_(batch.seq_lens.cpu())
    batch.seq_lens_sum = int(batch.seq_lens.sum())


def diff(a: dict, b: dict) -> list:
    """The keys whose values differ between two states (tensors bit for bit), and
    the keys of ``b`` missing from ``a``."""
    def same(x, y):
        return torch.equal(x, y) if isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) else x == y

    return [k for k in a if not same(a[k], b[k])] + [k for k in b if k not in a]
