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
            setattr(self.module, name,
                    lambda *args, real=real, name=name, **kw: (self.calls.append(name), real(*args, **kw))[1])
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


def worlds_report(results: list) -> dict:
    """SGLang's world against the hooked one: ``results`` is ``[(states, calls)]`` of each,
    in that order."""
    (sa, ca), (sb, cb) = results
    return {"diff": [d for x, y in zip(sa, sb) for d in diff(x, y)], "sglang_calls": ca, "hooked_calls": cb,
            "compared": sum(len(s) for s in sa)}


def fa3_child():
    """A child's SGLang FA3 world: the stubs installed, FA3 buildable without a GPU.
    Returns (flashattention_backend, HookRegistry's wrapper, HookType)."""
    from sgl_meta.bench.sglang_step import stubs

    stubs.install()
    from sglang.srt.layers.attention import attention_registry
    from sglang.srt.layers.attention import flashattention_backend as fb
    from sglang.srt.plugins.hook_registry import HookType, _wrap_fn as wrap

    attention_registry.get_device_capability = lambda *a, **k: (9, 0)  # FA3 is built for SM 8.x / 9.x
    return fb, wrap, HookType
