"""Ad-hoc (s5, issue 11): the floor of the small rows. Bare kernels that do only
the dependent loads and stores a row needs (no checks, no generality), timed
the bench's way (graph replay, L2 flushed, rotating order) beside ours and
upstream on the same fixture:
  fill1          one thread stores one int (the launch + graph floor)
  floor_seqlens  seqlens-only at bs 256: load seq_lens, +offset, store, block scan -> cu_seqlens_k
  floor_bs1      update bs1: the above for one row + its live page-table columns
                 (req_pool_indices -> req_to_token -> page_table), 4 blocks of 512 columns
"""
import os, statistics, json, sys
import numpy as np
import torch
from sgl_meta.bench import bare_gather as B
from sgl_meta.bench.timing import DeviceTimer
from sgl_meta.bench.upstream import loader, rows_mha
from sgl_meta.bench.upstream.fixtures import Context

SRC = r"""
typedef long long i64;
extern "C" __global__ void fill1(int* p) { if (threadIdx.x == 0) p[0] = 1; }
extern "C" __global__ void floor_seqlens(const int* __restrict__ lens, int offset, int bs,
                                         int* __restrict__ cache, int* __restrict__ cu) {
  __shared__ int warp_sum[32];
  const int i = threadIdx.x, lane = i & 31, w = i >> 5;
  int v = i < bs ? lens[i] + offset : 0;
  if (i < bs) cache[i] = v;
  int x = v;
  for (int d = 1; d < 32; d <<= 1) { int y = __shfl_up_sync(0xffffffffu, x, d); if (lane >= d) x += y; }
  if (lane == 31) warp_sum[w] = x;
  __syncthreads();
  if (w == 0) {
    int s = lane < (blockDim.x >> 5) ? warp_sum[lane] : 0;
    for (int d = 1; d < 32; d <<= 1) { int y = __shfl_up_sync(0xffffffffu, s, d); if (lane >= d) s += y; }
    warp_sum[lane] = s;
  }
  __syncthreads();
  if (i < bs) cu[i + 1] = x + (w > 0 ? warp_sum[w - 1] : 0);
}
extern "C" __global__ void floor_bs1(const int* __restrict__ r2t, i64 stride, const int* __restrict__ req,
                                     const int* __restrict__ lens, int offset, int shift,
                                     int* __restrict__ cache, int* __restrict__ cu, int* __restrict__ table) {
  const int len = lens[0] + offset;
  const int r = req[0];
  if (blockIdx.x == 0 && threadIdx.x == 0) { cache[0] = len; cu[1] = len; }
  const int n = len > 0 ? ((len - 1) >> shift) + 1 : 0;
  const int c0 = blockIdx.x * 512 + threadIdx.x;
  const int* in = r2t + (i64)r * stride;
  int s0 = 0, s1 = 0;
  if (c0 < n) s0 = __ldcs(in + ((i64)c0 << shift));
  if (c0 + 256 < n) s1 = __ldcs(in + ((i64)(c0 + 256) << shift));
  if (c0 < n) table[c0] = s0 >> shift;
  if (c0 + 256 < n) table[c0 + 256] = s1 >> shift;
}
"""
B._SOURCE = SRC
K = B._Kernels.__new__(B._Kernels)
from cuda.bindings import driver, nvrtc
# compile (the _Kernels constructor wants its own names)
K.driver = driver
torch.empty(1, device="cuda")
major, minor = torch.cuda.get_device_capability()
err, prog = nvrtc.nvrtcCreateProgram(SRC.encode(), b"floor.cu", 0, [], [])
opts = [f"--gpu-architecture=sm_{major}{minor}".encode(), b"--std=c++17"]
(err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
assert err == nvrtc.nvrtcResult.NVRTC_SUCCESS, err
_, size = nvrtc.nvrtcGetCUBINSize(prog)
cubin = b" " * size
B._check(nvrtc.nvrtcGetCUBIN(prog, cubin))
K._image = np.frombuffer(cubin, dtype=np.uint8).copy()
K.module = B._check(driver.cuModuleLoadData(K._image.ctypes.data))
K.fn = {n: B._check(driver.cuModuleGetFunction(K.module, n.encode())) for n in ("fill1", "floor_seqlens", "floor_bs1")}

site = sys.argv[1] if len(sys.argv) > 1 else "/tmp/site"
kernels = loader.load(loader.probe(loader.locate(site), gpu=True))
ctx = Context(device=torch.device("cuda"), seed=0, max_bs=256)
rows = {s.name: s.build(ctx, kernels) for s in rows_mha.ROWS if s.name in ("update bs1", "update bs256, seqlens only (skip_page_table)", "page-table builder bs1")}
f = rows_mha._fixture(ctx)
i32, i64 = np.int32, np.int64
buf = torch.zeros(1, dtype=torch.int32, device="cuda")
fo = {k: torch.zeros(s, dtype=torch.int32, device="cuda") for k, s in (("cache", 256), ("cu", 257), ("table", 2048))}
impls = {
    "fill1": lambda: K.launch("fill1", (1, 1), 32, [B._ptr(buf)]),
    "floor_seqlens": lambda: K.launch("floor_seqlens", (1, 1), 256, [B._ptr(f.lens), (1, i32), (256, i32), B._ptr(fo["cache"]), B._ptr(fo["cu"])]),
    "floor_bs1": lambda: K.launch("floor_bs1", (4, 1), 256, [B._ptr(f.req_to_token), (f.req_to_token.stride(0), i64), B._ptr(f.req_pool_indices),
                                                            B._ptr(f.lens), (1, i32), (6, i32), B._ptr(fo["cache"]), B._ptr(fo["cu"]), B._ptr(fo["table"])]),
}
short = {"update bs1": "upd1", "update bs256, seqlens only (skip_page_table)": "seqonly", "page-table builder bs1": "bld1"}
for name, row in rows.items():
    for impl in ("ours", "upstream"):
        calls = row.calls[impl]
        impls[f"{short[name]}_{impl}"] = (lambda cs=calls: [c() for c in cs])
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
# the floors compute what the rows do
lens = f.lens.long() + 1
assert torch.equal(fo["cache"].long(), lens), "floor_seqlens cache"
assert torch.equal(fo["cu"][1:].long(), lens.cumsum(0)), "floor_seqlens cu"
res = {}
N = int(os.environ.get("N", "300"))
for flush in (True, False):
    timer = DeviceTimer(torch.device("cuda"), flush)
    names = list(graphs)
    dev = {k: [] for k in names}
    for r in range(N):
        rot = names[r % len(names):] + names[:r % len(names)]
        order = rot if (r // len(names)) % 2 == 0 else rot[::-1]
        d, _ = timer.time_replays([graphs[k] for k in order])
        for k, v in zip(order, d):
            dev[k].append(v)
    res[f"flush={flush}"] = {k: statistics.median(v) for k, v in dev.items()}
    print(f"flush_l2={flush}  (median us over {N} rotating replays)")
    for k in names:
        print(f"  {k:>16s} {res[f'flush={flush}'][k]:6.2f}")
json.dump(res, open(os.path.join(os.environ.get("OUT", "/tmp"), "probe_floor.json"), "w"), indent=1)
