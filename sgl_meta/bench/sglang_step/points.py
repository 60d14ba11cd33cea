"""The grid: backend x forward mode x (batch size, context)."""

from __future__ import annotations

from .backends import BACKENDS, MODES, NOT_MEASURED

SIZES = ((1, 131072), (64, 32768), (256, 8192))
"""(batch size, context tokens): one long request, a mid batch, a full graph bucket."""


def grid(backends=BACKENDS, modes=MODES, sizes=SIZES) -> list:
    return [(b, m, bs, ctx) for b in backends for m in modes for bs, ctx in sizes if (b, m) not in NOT_MEASURED]
