"""Ad-hoc (s4, issue 13): does using shared memory cost a kernel launch-time
penalty in the bench's timer (graph replay after a memset flush)? Bare page-table
gathers without / with a shared-memory broadcast, a 1-element fill without /
with shared memory, ours and upstream on the bench's KV row, interleaved."""
import os, statistics, json
import numpy as np
import torch
from sgl_meta.bench import bare_gather as B
from sgl_meta.bench.timing import DeviceTimer
from sgl_meta.bench.upstream import loader, rows_kv
from sgl_meta.bench.upstream.fixtures import Context

SMEM = B._SOURCE.replace("bare_page_table(", "bare_page_table_smem(").replace(
    "  const int row = blockIdx.x, first = blockIdx.y, blocks_per_row = gridDim.y;\n  const int len = lens[row] + delta;",
    "  const int row = blockIdx.x, first = blockIdx.y, blocks_per_row = gridDim.y;\n"
    "  __shared__ int sh_len;\n  if (threadIdx.x == 0) sh_len = lens[row] + delta;\n  __syncthreads();\n  const int len = sh_len;")
assert "sh_len" in SMEM
SMEM = SMEM[:SMEM.index("#define BARE_STREAM")]
EXTRA = r"""
extern "C" __global__ void fill1(int* p) { if (threadIdx.x == 0) p[0] = 1; }
extern "C" __global__ void fill1_smem(int* p) { __shared__ int s; if (threadIdx.x == 0) s = 1; __syncthreads(); if (threadIdx.x == 0) p[0] = s; }
"""
src = B._SOURCE + SMEM.replace("typedef long long i64;", "").replace("#define PAGE_THREADS 256\n#define COLS 2\n#define THREADS 128\n", "") + EXTRA
B._SOURCE = src
K = B._Kernels.get(torch.device("cuda"))
from cuda.bindings import driver
for n in ("bare_page_table_smem", "fill1", "fill1_smem"):
    K.fn[n] = B._check(driver.cuModuleGetFunction(K.module, n.encode()))

loc = loader.locate("/tmp/site")
kernels = loader.load(loader.probe(loc, gpu=True))
ctx = Context(device=torch.device("cuda"), seed=0, max_bs=256)
row = rows_kv.ROWS[0].build(ctx, kernels)
f = rows_kv._fixture(ctx)
bs, ps = 256, 64
kw = dict(req_to_token=f.req_to_token, req_pool_indices=f.req_pool_indices[:bs].to(torch.int32), seq_lens=f.lens[:bs],
          v2p=f.v2p, page_size=ps, max_pages=2048)
outs = {k: torch.zeros(f.n, 2048, dtype=torch.int32, device="cuda") for k in ("bare", "bare_smem")}
bpr = B._blocks_per_row(2048, 512, bs, 256, torch.device("cuda"))
i32, i64 = np.int32, np.int64
def bare(name, out):
    args = [B._ptr(kw["req_to_token"]), (kw["req_to_token"].stride(0), i64), B._ptr(kw["req_pool_indices"]),
            B._ptr(kw["seq_lens"]), B._ptr(kw["v2p"]), B._ptr(out), (out.stride(0), i64), (6, i32), (0, i32), (2048, i32)]
    return lambda: K.launch(name, (bs, bpr), 256, args)
buf = torch.zeros(1, dtype=torch.int32, device="cuda")
impls = {
    "fill1": lambda: K.launch("fill1", (1, 1), 32, [B._ptr(buf)]),
    "fill1_smem": lambda: K.launch("fill1_smem", (1, 1), 32, [B._ptr(buf)]),
    "bare": bare("bare_page_table", outs["bare"]),
    "bare_smem": bare("bare_page_table_smem", outs["bare_smem"]),
    "ours": row.calls["ours"][0],
    "upstream": row.calls["upstream"][0],
}
def graph_of(fn):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay(); torch.cuda.synchronize()
    return g
graphs = {k: graph_of(v) for k, v in impls.items()}
torch.cuda.synchronize()
assert torch.equal(outs["bare"], outs["bare_smem"])
res = {}
for flush in (True, False):
    timer = DeviceTimer(torch.device("cuda"), flush)
    names = list(graphs)
    dev = {k: [] for k in names}
    N = int(os.environ.get("N", "200"))
    for r in range(N):
        rot = names[r % len(names):] + names[:r % len(names)]
        order = rot if (r // len(names)) % 2 == 0 else rot[::-1]
        d, _ = timer.time_replays([graphs[k] for k in order])
        for k, v in zip(order, d):
            dev[k].append(v)
    res[f"flush={flush}"] = {k: statistics.median(v) for k, v in dev.items()}
    print(f"flush_l2={flush}")
    for k, v in res[f"flush={flush}"].items():
        print(f"  {k:12s} {v:7.2f} us")
json.dump(res, open(os.path.join(os.environ.get("OUT", "."), "probe_smem.json"), "w"), indent=1)
