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


class OpCalls:
    """Records the calls of ``module``'s functions ``names`` (by name) while entered,
    each still made."""

    def __init__(self, module, names):
        self.module, self.calls = module, []
        self.real = {name: getattr(module, name) for name in names}

    def __enter__(self):
        for name, real in self.real.items():
            setattr(self.module, name, lambda real=real, name=name, **kw: (self.calls.append(name), real(**kw))[1])
        return self

    def __exit__(self, *exc):
        for name, real in self.real.items():
            setattr(self.module, name, real)


def uncovered_runs(run, changes: dict) -> dict:
    """``run(change)`` per labelled change of a world the hook leaves to SGLang; where
    SGLang's own path raises there, the error."""
    report = {}
    for label, change in changes.items():
        try:
            report[f"uncovered-{label}"] = run(change)
        except Exception as err:  # noqa: BLE001 -- SGLang's own path on a world it does not support
            report[f"uncovered-{label}"] = {"error": f"{type(err).__name__}: {err}"}
    return report
