"""Ad-hoc (issue 11): how far below SGLang's Triton kernel can a small-size
TRT-LLM MHA refresh go with the bench's timer (graph replay, L2 flushed by a
write)? Floor (a 1-element fill), ours, upstream, and bare NVRTC kernels of
the same work in several shapes, all interleaved in one loop; medians.
"""
import os, sys, json, statistics
sys.path.insert(0, "benchmarks")
import numpy as np
import torch
import small_sizes as S
import sgl_meta
from sgl_meta.bench.timing import DeviceTimer

N = int(os.environ.get("N", "200"))
SRC = r"""
typedef long long i64;
extern "C" __global__ void fill1(int* p) { if (threadIdx.x == 0) p[0] = 1; }

__device__ __forceinline__ unsigned incl(unsigned v) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) { unsigned o = __shfl_up_sync(0xffffffffu, v, d); if (lane >= d) v += o; }
  return v;
}
// 1 warp, lane l rows [8l, 8l + 8) (ours)
extern "C" __global__ void __launch_bounds__(128) seq_contig(const i64* seq, int bs, int off, int* cs, int* cuk) {
  if (threadIdx.x == 0) cuk[0] = 0;
  if (threadIdx.x >= 32) return;
  const int per = (bs + 31) / 32, first = threadIdx.x * per;
  unsigned v[8], pre[8], run = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) v[j] = (j < per && first + j < bs) ? (unsigned)seq[first + j] + off : 0u;
#pragma unroll
  for (int j = 0; j < 8; ++j) { run += v[j]; pre[j] = run; }
  const unsigned base = incl(run) - run;
#pragma unroll
  for (int j = 0; j < 8; ++j) if (j < per && first + j < bs) { cs[first + j] = v[j]; cuk[first + j + 1] = base + pre[j]; }
}
// 1 warp, lane l rows l, l + 32, ... (coalesced)
extern "C" __global__ void __launch_bounds__(128) seq_strided(const i64* seq, int bs, int off, int* cs, int* cuk) {
  if (threadIdx.x == 0) cuk[0] = 0;
  if (threadIdx.x >= 32) return;
  const int l = threadIdx.x;
  unsigned v[8], s[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) { const int i = 32 * j + l; v[j] = i < bs ? (unsigned)seq[i] + off : 0u; s[j] = v[j]; }
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
#pragma unroll
    for (int j = 0; j < 8; ++j) { unsigned o = __shfl_up_sync(0xffffffffu, s[j], d); if (l >= d) s[j] += o; }
  }
  unsigned carry = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int i = 32 * j + l;
    const unsigned tot = __shfl_sync(0xffffffffu, s[j], 31);
    if (i < bs) { cs[i] = v[j]; cuk[i + 1] = carry + s[j]; }
    carry += tot;
  }
}
// 256 threads, one row each, warp totals through shared memory
extern "C" __global__ void __launch_bounds__(256) seq_block(const i64* seq, int bs, int off, int* cs, int* cuk) {
  __shared__ unsigned tot[8];
  const int i = threadIdx.x, w = i >> 5, l = i & 31;
  if (i == 0) cuk[0] = 0;
  const unsigned v = i < bs ? (unsigned)seq[i] + off : 0u;
  const unsigned s = incl(v);
  if (l == 31) tot[w] = s;
  __syncthreads();
  unsigned base = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) if (k < w) base += tot[k];
  if (i < bs) { cs[i] = v; cuk[i + 1] = base + s; }
}
// bs = 1 update: block 0 the seqlens, blocks 1.. COLS * 128 page-table columns each
#define UPD(NAME, COLS)                                                                           \
extern "C" __global__ void __launch_bounds__(128) NAME(const i64* req, const i64* seq, const int* r2t, \
    i64 stride, int off, int* cs, int* cuk, int* pt, int shift, int max_pages) {                 \
  const int len = (int)seq[0] + off;                                                            \
  if (blockIdx.x == 0) { if (threadIdx.x == 0) { cs[0] = len; cuk[0] = 0; cuk[1] = len; } return; } \
  const i64 r = req[0];                                                                         \
  const int n = min(len > 0 ? ((len - 1) >> shift) + 1 : 0, max_pages);                         \
  const int c0 = (blockIdx.x - 1) * 128 * COLS + threadIdx.x;                                   \
  if (c0 - (int)threadIdx.x >= n) return;                                                       \
  const int* in = r2t + r * stride;                                                             \
  int v[COLS];                                                                                  \
  _Pragma("unroll") for (int k = 0; k < COLS; ++k) { const int c = c0 + k * 128; v[k] = c < n ? __ldg(in + ((i64)c << shift)) : 0; } \
  _Pragma("unroll") for (int k = 0; k < COLS; ++k) { const int c = c0 + k * 128; if (c < n) pt[c] = v[k] >> shift; } \
}
UPD(upd_c2, 2)
UPD(upd_c4, 4)
UPD(upd_c16, 16)
"""


class Mod:
    def __init__(self):
        from cuda.bindings import driver, nvrtc
        self.d = driver
        torch.empty(1, device="cuda")
        major, minor = torch.cuda.get_device_capability()
        err, prog = nvrtc.nvrtcCreateProgram(SRC.encode(), b"p.cu", 0, [], [])
        opts = [f"--gpu-architecture=sm_{major}{minor}".encode(), b"--std=c++17"]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog); log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log); raise RuntimeError(log.decode())
        _, size = nvrtc.nvrtcGetCUBINSize(prog); cubin = b" " * size
        nvrtc.nvrtcGetCUBIN(prog, cubin)
        self.img = np.frombuffer(cubin, dtype=np.uint8).copy()
        _, self.mod = driver.cuModuleLoadData(self.img.ctypes.data)

    def fn(self, name, grid, threads, args):
        _, f = self.d.cuModuleGetFunction(self.mod, name.encode())
        cells = [np.array([v], dtype=t) for v, t in args]
        params = np.array([c.ctypes.data for c in cells], dtype=np.uint64)

        def call():
            st = self.d.CUstream(torch.cuda.current_stream().cuda_stream)
            (e,) = self.d.cuLaunchKernel(f, grid, 1, 1, threads, 1, 1, 0, st, params.ctypes.data, 0)
            assert int(e) == 0, e
        call.keep = (cells, params)
        return call


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


def P(t):
    return (t.data_ptr(), np.uint64)


def main():
    m = Mod()
    i32, i64 = np.int32, np.int64
    timer = DeviceTimer(torch.device("cuda"), True)
    results = {}
    floor_buf = torch.zeros(1, dtype=torch.int32, device="cuda")
    for case in ("update bs1", "update bs1 short", "seqlens bs256", "seqlens bs1", "seqlens bs64"):
        bs = 1 if "bs1" in case else (64 if case.endswith("64") else 256)
        skip = case.startswith("seqlens")
        r2t, mapping, ins = S.make_inputs(bs, 1, False, seed=3)
        x = ins[0]
        if case.endswith("short"):
            x["seq_lens"].fill_(5000)
        impls = {"floor(fill 1)": m.fn("fill1", 1, 32, [P(floor_buf)])}
        outs = {}
        for who, b in (("ours", S.ours_update(skip=skip)), ("upstream", S.upstream_update(skip=skip))):
            o = S.outputs(bs, False)
            outs[who] = o[0]
            impls[who] = b(x, r2t, mapping, o)
        ob = S.outputs(bs, False)[0]
        seq, req = x["seq_lens"], x["req_pool_indices"]
        if skip:
            for k, th in (("seq_contig", 128), ("seq_strided", 128), ("seq_block", 256)):
                if k == "seq_block" and bs > 256:
                    continue
                o = S.outputs(bs, False)[0]
                outs[k] = o
                impls["bare " + k] = m.fn(k, 1, th, [P(seq), (bs, i32), (1, i32), P(o["cache_seqlens"]), P(o["cu_seqlens_k"])])
        else:
            n = min(-(-(int(seq[0]) + 1) // S.PAGE_SIZE), S.PAGES)
            for k, cols in (("upd_c2", 2), ("upd_c4", 4), ("upd_c16", 16)):
                o = S.outputs(bs, False)[0]
                outs[k] = o
                grid = 1 + -(-S.PAGES // (128 * cols))
                impls[f"bare {k} ({grid} blocks)"] = m.fn(k, grid, 128, [P(req), P(seq), P(r2t), (r2t.stride(0), i64), (1, i32),
                                                       P(o["cache_seqlens"]), P(o["cu_seqlens_k"]), P(o["page_table"]),
                                                       (6, i32), (S.PAGES, i32)])
        graphs = {k: graph_of(f) for k, f in impls.items()}
        torch.cuda.synchronize()
        ref = outs["ours"]
        for k, o in outs.items():
            assert torch.equal(o["cache_seqlens"], ref["cache_seqlens"]), (case, k)
            assert torch.equal(o["cu_seqlens_k"][1:], ref["cu_seqlens_k"][1:]), (case, k)
            if not skip:
                assert torch.equal(o["page_table"][0, :n], ref["page_table"][0, :n]), (case, k)
        names = list(graphs)
        dev = {k: [] for k in names}
        for r in range(N):
            order = names if r % 2 == 0 else names[::-1]
            d, _ = timer.time_replays([graphs[k] for k in order])
            for k, v in zip(order, d):
                dev[k].append(v)
        results[case] = {k: statistics.median(v) for k, v in dev.items()}
        print(case + (f" (live pages {n})" if not skip else ""))
        for k, v in results[case].items():
            print(f"  {k:34s} {v:7.2f} us  ({v / results[case]['upstream']:.2f} of upstream)")
    out = os.environ.get("OUT", ".")
    json.dump(results, open(os.path.join(out, "probe_small2.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
