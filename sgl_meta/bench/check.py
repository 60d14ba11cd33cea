"""Fused vs reference output comparison; a mismatch stops the run."""

from __future__ import annotations

import torch


class BenchMismatch(RuntimeError):
    """A fused op's outputs differ from its eager reference's."""


def compare(got: dict, want: dict, where: str) -> None:
    """Raise :class:`BenchMismatch` unless every ``got[name]`` equals ``want[name]``.

    Whole buffers are compared (not just the rows/columns a call should write),
    so a write outside the contract shows up as well as a missing one. On CUDA
    the per-tensor verdicts are gathered first and read with one sync.
    """
    names = list(want)
    if all(want[n].device.type == "cpu" for n in names):
        bad = [n for n in names if not torch.equal(got[n], want[n])]
    else:  # one host sync for all tensors, not one per tensor
        flags = torch.stack([(got[n] != want[n]).any() for n in names]).tolist()
        bad = [n for n, f in zip(names, flags) if f]
    if not bad:
        return
    lines = [f"{where}: fused output differs from the reference"]
    for name in bad:
        g, w = got[name], want[name]
        diff = (g != w).nonzero()
        first = tuple(diff[0].tolist())
        lines.append(
            f"  {name}: {diff.shape[0]} of {w.numel()} elements differ; first at {first}: "
            f"fused {g[first].item()}, reference {w[first].item()}"
        )
    raise BenchMismatch("\n".join(lines))


def corrupt(outputs: dict) -> str:
    """Change one element of the first output (self-test of the check)."""
    name = next(iter(outputs))
    outputs[name].view(-1)[:1].add_(1)
    return name
