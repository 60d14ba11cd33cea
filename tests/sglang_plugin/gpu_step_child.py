"""Run in a fresh interpreter by test_gpu_load_plugins.py: SGLang's CUDA-graph
metadata path for TRT-LLM MHA and DSA in every forward mode, first with SGLang's
own kernels, then after SGLang's own ``load_plugins()``; a JSON report on
stdout's last line (hooks applied, per point errors and buffer differences).
"""

from __future__ import annotations

import json
import pkgutil
import sys

from sgl_meta.bench.sglang_step import backends, points, stubs
from sgl_meta.bench.sglang_step.cli import compare, run_half
from sgl_meta.bench.sglang_step.measure import Plan

SIZES = ((1, 8192), (8, 4096))


def main() -> None:
    stubs.install()
    grid = points.grid(sizes=SIZES)
    plan = Plan(check_steps=3, warmup=1, steps=2, profile_steps=1)

    def log(line):
        print(line, file=sys.stderr, flush=True)

    off = run_half(grid, "cuda", plan, log)
    from sglang.srt.plugins import load_plugins

    load_plugins()
    from sgl_meta.sglang.hooks import HOOKS

    hooked = [h.target for h in HOOKS if getattr(pkgutil.resolve_name(h.target), "__wrapped__", None) is not None]
    on = run_half(grid, "cuda", plan, log)
    report = {"hooked": hooked, "points": []}
    for point in grid:
        a, b = off[point], on[point]
        report["points"].append({
            "point": list(point), "error_off": a.get("error"), "error_on": b.get("error"),
            "diffs": compare(a, b) if "error" not in a and "error" not in b else [],
        })
    print(json.dumps(report))


if __name__ == "__main__":
    main()
