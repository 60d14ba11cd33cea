"""The grid: backend x forward mode x (batch size, context)."""

from __future__ import annotations

MODES = ("decode", "target_verify", "draft_extend", "draft_decode")
BACKENDS = ("trtllm_mha", "fa3", "fa3_page1", "fa3_topk4", "triton", "dsa", "dsa_fp8", "trtllm_mla", "flashmla",
            "flashinfer", "flashinfer_mla")
NOT_MEASURED = {
    ("fa3_topk4", "decode"): "FA3 top-k 4 decode: no speculative input, fa3's row",
    ("fa3_topk4", "draft_extend"): "FA3 top-k 4 draft extend: top-k does not enter it, fa3's row",
    **{("dsa_fp8", m): f"DSA FP8 {m.replace('_', ' ')}: dsa's row and FlashMLA's planner, left out"
       for m in ("decode", "target_verify", "draft_extend")},
    ("flashinfer_mla", "draft_extend"): "FlashInfer MLA draft extend: 0.5.23 captures no graph for it (its "
                                        "out-of-graph refresh takes decode and target verify only)",
}
"""Points left out of the grid, and why."""

SIZES = ((1, 131072), (64, 32768), (256, 8192))
"""(batch size, context tokens): one long request, a mid batch, a full graph bucket."""

HEADROOM = 256
"""Tokens a run may grow each request by (steps, draft tokens): at most 2 per replay step plus 8."""


def growth(steps_per_build: int, untimed: int) -> int:
    """Tokens a build grows each request by at most, over its untimed and timed steps."""
    return 2 * (steps_per_build + untimed) + 8


def grid(backends=BACKENDS, modes=MODES, sizes=SIZES) -> list:
    """Every (backend, mode, bs, context) measured, each once, in the order given."""
    return list(dict.fromkeys((b, m, bs, ctx) for b in backends for m in modes for bs, ctx in sizes
                              if (b, m) not in NOT_MEASURED))
