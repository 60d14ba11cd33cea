"""Ad-hoc: one call each of ours / bare gather on the kv cases, NVTX ranges for ncu."""
import sys
sys.path.insert(0, "benchmarks")
import torch
import op_shapes as O
import sgl_meta
bare = O._bare_gather("table")
cases = {"bs1x2048": (1, 2048, 64, None), "bs256 ctx8k p64": (256, 2048, 64, 8192), "bs256 ctx8k p16": (256, 8192, 16, 8192)}
built = {n: O.kv_read_case(bs, pages, ps, "table", max_len=ml, sets=2)[0] for n, (bs, pages, ps, ml) in cases.items()}
for n, kws in built.items():  # warm-up (module load, NVRTC)
    sgl_meta.kv_read_page_table(**kws[1]); bare(**kws[1])
torch.cuda.synchronize()
for n, kws in built.items():
    for who, fn in (("ours", sgl_meta.kv_read_page_table), ("bare", bare)):
        torch.cuda.nvtx.range_push("kv"); torch.cuda.nvtx.range_push(f"{n} {who}")
        fn(**kws[0]); torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop(); torch.cuda.nvtx.range_pop()
