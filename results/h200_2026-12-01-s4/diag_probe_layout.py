"""Ad-hoc (s4, issue 13): bare page-table gathers of the bench's KV row in
several layouts and load flavours, next to ours and SGLang's Triton kernel,
with the bench's timer (graph replays, L2 flushed by a memset), interleaved."""
import os, statistics, json
import numpy as np
import torch
from cuda.bindings import driver, nvrtc
from sgl_meta.bench import bare_gather as B
from sgl_meta.bench.timing import DeviceTimer
from sgl_meta.bench.upstream import loader, rows_kv
from sgl_meta.bench.upstream.fixtures import Context

SRC = r"""
typedef long long i64;
#define KERNEL(NAME, THREADS, COLS, ADJ, L1, L2)                                                  \
extern "C" __global__ void __launch_bounds__(THREADS) NAME(                                      \
    const int* __restrict__ r2t, i64 r2t_stride, const int* __restrict__ req,                     \
    const int* __restrict__ lens, const i64* __restrict__ v2p, int* __restrict__ out,             \
    i64 out_stride, int shift, int max_pages) {                                                   \
  const int row = blockIdx.x, first = blockIdx.y, bpr = gridDim.y;                                \
  const int len = lens[row];                                                                      \
  const int n = min(len > 0 ? ((len - 1) >> shift) + 1 : 0, max_pages);                           \
  const int* in = r2t + (i64)req[row] * r2t_stride;                                               \
  int* o = out + (i64)row * out_stride;                                                           \
  for (int base = first * THREADS * COLS; base < n; base += bpr * THREADS * COLS) {               \
    int s[COLS]; i64 e[COLS];                                                                     \
    _Pragma("unroll") for (int k = 0; k < COLS; ++k) {                                            \
      const int c = ADJ ? base + threadIdx.x * COLS + k : base + threadIdx.x + k * THREADS;       \
      s[k] = c < n ? L1(in + ((i64)c << shift)) : 0; }                                            \
    _Pragma("unroll") for (int k = 0; k < COLS; ++k) {                                            \
      const int c = ADJ ? base + threadIdx.x * COLS + k : base + threadIdx.x + k * THREADS;       \
      e[k] = c < n ? L2(v2p + (s[k] < 0 ? 0 : (s[k] >> shift))) : 0; }                            \
    _Pragma("unroll") for (int k = 0; k < COLS; ++k) {                                            \
      const int c = ADJ ? base + threadIdx.x * COLS + k : base + threadIdx.x + k * THREADS;       \
      if (c < n) o[c] = (int)(e[k] > 0 ? e[k] : 0); }                                             \
  }                                                                                               \
}
#define LDG(p) __ldg(p)
#define PLAIN(p) (*(p))
#define LDCG(p) __ldcg(p)
#define LDCS(p) __ldcs(p)
KERNEL(v_strided_ldg, 256, 2, 0, LDG, LDG)
KERNEL(v_adjacent_ldg, 256, 2, 1, LDG, LDG)
KERNEL(v_strided_plain, 256, 2, 0, PLAIN, PLAIN)
KERNEL(v_adjacent_plain, 256, 2, 1, PLAIN, PLAIN)
KERNEL(v_strided_ldcg, 256, 2, 0, LDCG, LDCG)
KERNEL(v_strided_ldcs_ldg, 256, 2, 0, LDCS, LDG)
KERNEL(v_c4_t128, 128, 4, 0, LDG, LDG)
KERNEL(v_c1_t512, 512, 1, 0, LDG, LDG)
"""
NAMES = ["v_strided_ldg", "v_adjacent_ldg", "v_strided_plain", "v_adjacent_plain", "v_strided_ldcg",
         "v_strided_ldcs_ldg", "v_c4_t128", "v_c1_t512"]
THREADS = {"v_c4_t128": 128, "v_c1_t512": 512}

def chk(r):
    err, *rest = r
    assert int(getattr(err, "value", err)) == 0, err
    return rest[0] if len(rest) == 1 else rest

torch.empty(1, device="cuda")
major, minor = torch.cuda.get_device_capability()
prog = chk(nvrtc.nvrtcCreateProgram(SRC.encode(), b"v.cu", 0, [], []))
opts = [f"--gpu-architecture=sm_{major}{minor}".encode(), b"--std=c++17"]
(err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
if int(err.value) != 0:
    size = chk(nvrtc.nvrtcGetProgramLogSize(prog)); log = b" " * size; nvrtc.nvrtcGetProgramLog(prog, log); raise SystemExit(log.decode())
size = chk(nvrtc.nvrtcGetCUBINSize(prog)); cubin = b" " * size; chk(nvrtc.nvrtcGetCUBIN(prog, cubin))
img = np.frombuffer(cubin, dtype=np.uint8).copy()
mod = chk(driver.cuModuleLoadData(img.ctypes.data))
fns = {n: chk(driver.cuModuleGetFunction(mod, n.encode())) for n in NAMES}

loc = loader.locate("/tmp/site")
kernels = loader.load(loader.probe(loc, gpu=True))
ctx = Context(device=torch.device("cuda"), seed=0, max_bs=256)
row = rows_kv.ROWS[0].build(ctx, kernels)
f = rows_kv._fixture(ctx)
bs = 256
req = f.req_pool_indices[:bs].to(torch.int32)
outs = {n: torch.zeros(f.n, 2048, dtype=torch.int32, device="cuda") for n in NAMES}
keep = []
def launcher(name):
    t = THREADS.get(name, 256)
    cols = 512  # columns per block step in every variant
    o = outs[name]
    vals = [(f.req_to_token.data_ptr(), np.uint64), (f.req_to_token.stride(0), np.int64), (req.data_ptr(), np.uint64),
            (f.lens.data_ptr(), np.uint64), (f.v2p.data_ptr(), np.uint64), (o.data_ptr(), np.uint64),
            (o.stride(0), np.int64), (6, np.int32), (2048, np.int32)]
    cells = [np.array([v], dtype=d) for v, d in vals]
    params = np.array([c.ctypes.data for c in cells], dtype=np.uint64)
    keep.append((cells, params))
    def call():
        st = driver.CUstream(torch.cuda.current_stream().cuda_stream)
        chk(driver.cuLaunchKernel(fns[name], bs, 4, 1, t, 1, 1, 0, st, params.ctypes.data, 0))
    return call
impls = {n: launcher(n) for n in NAMES}
impls["ours"] = row.calls["ours"][0]
impls["upstream"] = row.calls["upstream"][0]

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
ref = row.outputs["ours"]["table"]
mask = row.regions["table"]
for n in NAMES:
    assert torch.equal(outs[n][mask], ref[mask]), n
res = {}
N = int(os.environ.get("N", "150"))
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
    print(f"flush_l2={flush}")
    up = res[f"flush={flush}"]["upstream"]
    for k, v in res[f"flush={flush}"].items():
        print(f"  {k:20s} {v:7.2f} us  {v / up:.3f} of upstream")
json.dump(res, open(os.path.join(os.environ.get("OUT", "."), "probe_layout.json"), "w"), indent=1)
