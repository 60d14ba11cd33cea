"""Run in a fresh interpreter by test_gpu_load_plugins.py: SGLang's CUDA-graph
metadata path for TRT-LLM MHA, DSA, FA3, Triton, TRT-LLM MLA, FlashMLA and FlashInfer in every forward mode, with SGLang's own
kernels and, in turn, with the hooks SGLang's own ``load_plugins()`` applied; a
JSON report on stdout's last line (hooks applied, per point errors and buffer
differences).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pkgutil
import sys

from sgl_meta.bench.sglang_step import backends, points, stubs
from sgl_meta.bench.sglang_step.cli import compare, run_points
from sgl_meta.bench.sglang_step.measure import Plan
from sgl_meta.bench.sglang_step.plugin_switch import Switch

SIZES = ((1, 8192), (8, 4096))
# FA3 at page size 1 over a 128k static width with requests to 4k (--max-len): past 4,096 blocks
# of 128 columns, the kernel's looping page blocks.
WIDE = ((32, 131072), 4096)
# SGLMETA_STEP_BACKENDS=a,b: a subset (the whole run takes about five minutes on an H200).
BACKENDS = tuple(os.environ.get("SGLMETA_STEP_BACKENDS",
                                "trtllm_mha,dsa,dsa_fp8,fa3,fa3_page1,fa3_topk4,triton,trtllm_mla,flashmla,flashinfer,"
                                "flashinfer_mla").split(","))


def main() -> None:
    stubs.install()
    grid = points.grid(backends=BACKENDS, sizes=SIZES)
    plan = Plan(check_steps=3, warmup=1, steps=2, profile_steps=1, builds=2)

    def log(line):
        print(line, file=sys.stderr, flush=True)

    from sglang.srt.plugins import load_plugins

    switch, _ = Switch.apply(load=load_plugins)
    from sgl_meta.sglang.hooks import HOOKS

    hooked = [h.target for h in HOOKS if getattr(pkgutil.resolve_name(h.target), "__wrapped__", None) is not None]
    results = run_points(grid, "cuda", plan, switch, log)
    if "fa3_page1" in BACKENDS:
        wide = points.grid(backends=("fa3_page1",), sizes=(WIDE[0],))
        results.update(run_points(wide, "cuda", dataclasses.replace(plan, max_len=WIDE[1]), switch, log))
        grid += wide
    report = {"hooked": hooked, "points": []}
    for point in grid:
        result = results[point]
        report["points"].append({
            "point": list(point), "error": result.get("error"),
            "diffs": compare(result["off"], result["on"]) if "error" not in result else [],
        })
    print(json.dumps(report))


if __name__ == "__main__":
    main()
