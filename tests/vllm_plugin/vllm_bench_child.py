"""Run in a fresh interpreter (the overlay venv, vLLM's Triton kernels under
Triton's interpreter, flashinfer's import stub on the path) by
test_vllm_bench_rows.py: build every vLLM row of
``python -m sgl_meta.bench --upstream`` on CPU at small shapes, run upstream
(vLLM 0.33's own functions), ours and the reference once, and report the
checks as JSON on stdout's last line; then corrupt one element of upstream's
output inside its region of each row and report that the checks catch it.
"""

from __future__ import annotations

import json
import sys

import torch

from vllm_child import cpu_buffers


def main() -> None:
    cpu_buffers()
    from sgl_meta.bench.upstream import rows_vllm as rows
    from sgl_meta.bench.upstream.fixtures import Context
    from sgl_meta.bench.upstream.measure import check_row

    # Small engine: the interpreter runs every program in Python.
    rows.MAX_MODEL_LEN, rows.WIDTH, rows.MAX_REQS, rows.MAX_TOKENS = 1024, 64, 24, 256
    small = {
        rows.DECODE_64: rows.Step("decode bs6", 6), rows.DECODE_256: rows.Step("decode bs9", 9),
        rows.SPEC_64: rows.Step("spec decode bs5 x 4", 5, drafts=3),
        rows.MIXED: rows.Step("mixed", 4, prefill=((40, 0), (33, 700))),
    }
    report = {"unavailable": rows.why_unavailable(), "no_flashinfer": rows.why_no_flashinfer(), "rows": {}}
    ctx = Context(device=torch.device("cpu"), seed=5)
    for spec in rows.ROWS:
        build, groups, step = rows.ROW_ARGS[spec.name]
        row = build(ctx, None, groups=groups, step=small[step], name=spec.name)
        row.repoison()
        for calls in row.calls.values():
            for c in calls:
                c()
        problems = check_row(row, "eager")
        name = next(iter(row.regions))
        inside = torch.zeros_like(row.outputs["ours"][name], dtype=torch.bool)
        inside[row.regions[name]] = True
        compared = int(inside.sum())
        first = tuple(inside.nonzero()[0].tolist())
        row.outputs["upstream"][name][first] += 1
        caught = len(check_row(row, "eager"))
        report["rows"][spec.name] = {"problems": problems, "caught": caught, "compared": compared,
                                     "impls": sorted(row.calls), "calls": {k: len(v) for k, v in row.calls.items()}}
    report["cold_start"] = cold_start(rows, ctx)
    print(json.dumps(report))


def cold_start(rows, ctx) -> dict:
    """The cold-start path at buckets 1..8, its timer replaced by a plain run
    (no CUDA here); every call's outputs of ours and upstream compared."""
    import tempfile

    from sgl_meta.bench.upstream.coldstart import fresh_caches

    rows.CAPTURE_SIZES, rows.CAPTURE = (1, 2, 4, 8), rows.Step("decode bs8", 8)
    ran = []

    def run_all(per_bucket, device):
        for calls in per_bucket:
            for c in calls:
                ran.append(c())
        return 0.0

    with tempfile.TemporaryDirectory() as root:
        res = rows.cold_start(ctx, root, lambda msg: None, run_all, fresh_caches)
    half = len(ran) // 2  # upstream cold + warm, then ours cold + warm
    up, ours = ran[: half // 2], ran[half: half + half // 2]
    # the block tables and slot mappings both return (views of their buffers)
    pairs = [(a, b) for a, b in zip(up, ours) if isinstance(b, (tuple, torch.Tensor))]
    res["compared"] = len(pairs)
    res["equal"] = len(up) == len(ours) == 16 and all(_same(a, b) for a, b in pairs)
    return res


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return torch.equal(a, b)
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


if __name__ == "__main__":
    sys.exit(main())
