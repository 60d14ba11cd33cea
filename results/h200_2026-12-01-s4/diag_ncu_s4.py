"""Ad-hoc (s4): one call each of upstream and ours (grid orders 0/1/2, an
experiment-only build switch since removed) on the bench's KV rows and the MHA
update row, NVTX ranges for ncu. For diag_ncu_kv_32bit.csv the device run
edited it to the KV rows and one "ours" (sed in the call's script)."""
import os
import torch
from sgl_meta.bench.upstream import loader, rows_kv, rows_mha
from sgl_meta.bench.upstream.fixtures import Context

loc = loader.locate("/tmp/site")
kernels = loader.load(loader.probe(loc, gpu=True))
ctx = Context(device=torch.device("cuda"), seed=0, max_bs=256)
rows = [s.build(ctx, kernels) for s in rows_kv.ROWS] + [s.build(ctx, kernels) for s in rows_mha.ROWS[:1]]
for r in rows:  # warm-up (Triton compile)
    for c in r.calls["upstream"] + r.calls["ours"]:
        c()
torch.cuda.synchronize()
for r in rows:
    for who, mode in (("upstream", None), ("ours0", "0"), ("ours1", "1"), ("ours2", "2")):
        if mode is not None:
            os.environ["SGL_META_GRID_ORDER"] = mode
        calls = r.calls["upstream" if mode is None else "ours"]
        torch.cuda.nvtx.range_push("m"); torch.cuda.nvtx.range_push(f"{r.name[:22]} {who}")
        for c in calls:
            c()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop(); torch.cuda.nvtx.range_pop()
