"""The gather ceiling of the KV read tables: a bare gather of the same pages.

The bar a read-table kernel is measured against in the same run: kernels that
read exactly the addresses ``kv_read_page_table`` / ``kv_read_token_stream``
read (the page-start slot of each live page in ``req_to_token``, then its
``v2p`` entry) and write the same outputs, with the same work split and grid
(page table: 256-thread blocks of one column per thread, loads issued before
use; token stream: 128-thread blocks, a warp per 32 pages, 16-byte stores;
both grids capped at one wave, 2048 threads per SM, the row on grid x and a
block's share of it on y; req_to_token read evict-first, v2p through the
read-only path), and nothing else: no request-index, window,
CSR or ``v2p`` bounds checks, no dtype or page-size generality (int32 index
inputs, power-of-two pages), no row cap, no ``zero_tail``. The difference to
the op is what its checks and generality cost.

On CUDA the kernels are compiled at run time with NVRTC and launched with the
driver API (``cuda.bindings``, which PyTorch's CUDA wheels depend on) on the
current stream, so CUDA graphs capture them like any kernel. On CPU (the
bench's self-test of its plumbing) the eager references stand in.
"""

from __future__ import annotations

import numpy as np
import torch

from sgl_meta import reference

# The op's constants (csrc/kv_read_table/kernel.cu): threads per block, page-table
# columns per thread; both grids stop at one wave of 2048 threads per SM. The
# kernels' #defines below are generated from these, so the two cannot drift.
_PAGE_THREADS, _COLS, _STREAM_THREADS = 256, 1, 128

_SOURCE = f"""
typedef long long i64;
#define PAGE_THREADS {_PAGE_THREADS}
#define COLS {_COLS}
#define THREADS {_STREAM_THREADS}
""" + r"""
extern "C" __global__ void __launch_bounds__(PAGE_THREADS, 8) bare_page_table(
    const int* __restrict__ r2t, i64 r2t_stride, const int* __restrict__ req,
    const int* __restrict__ lens, const i64* __restrict__ v2p, int* __restrict__ out,
    i64 out_stride, int shift, int delta, int max_pages) {
  const int row = blockIdx.x, first = blockIdx.y, blocks_per_row = gridDim.y;
  const int len = lens[row] + delta;
  const int n = min(len > 0 ? ((len - 1) >> shift) + 1 : 0, max_pages);
  const int* in = r2t + (i64)req[row] * r2t_stride;
  int* o = out + (i64)row * out_stride;
  for (int c0 = first * PAGE_THREADS * COLS + threadIdx.x; c0 < n; c0 += blocks_per_row * PAGE_THREADS * COLS) {
    int s[COLS];
    i64 e[COLS];
#pragma unroll
    for (int k = 0; k < COLS; ++k) {
      const int c = c0 + k * PAGE_THREADS;
      s[k] = c < n ? __ldcs(in + ((i64)c << shift)) : 0;
    }
#pragma unroll
    for (int k = 0; k < COLS; ++k) {
      const int c = c0 + k * PAGE_THREADS;
      e[k] = c < n ? __ldg(v2p + (s[k] < 0 ? 0 : (s[k] >> shift))) : 0;
    }
#pragma unroll
    for (int k = 0; k < COLS; ++k) {
      const int c = c0 + k * PAGE_THREADS;
      if (c < n) o[c] = (int)(e[k] > 0 ? e[k] : 0);
    }
  }
}

#define BARE_STREAM(NAME, T, V, VT)                                                          \
extern "C" __global__ void __launch_bounds__(THREADS, 16) NAME(                                \
    const int* __restrict__ r2t, i64 r2t_stride, const int* __restrict__ req,                \
    const int* __restrict__ lens, const int* __restrict__ starts,                            \
    const int* __restrict__ indptr, const i64* __restrict__ v2p, T* __restrict__ out,        \
    int shift, int delta, int align) {                                                       \
  const int row = blockIdx.x, blk = blockIdx.y, blocks_per_row = gridDim.y;                  \
  const int len = lens[row] + delta;                                                         \
  if (len <= 0) return;                                                                      \
  const int start = starts ? starts[row] : 0;                                                \
  const i64 lo = indptr[row];                                                                \
  const int first_page = start >> shift, last_page = (start + len - 1) >> shift;             \
  const int chunks = ((last_page - first_page) >> 5) + 1;                                    \
  const int lane = threadIdx.x & 31;                                                         \
  const int* in = r2t + (i64)req[row] * r2t_stride;                                          \
  const int mask = (1 << shift) - 1;                                                         \
  for (int ch = blk * (THREADS / 32) + (threadIdx.x >> 5); ch < chunks;                      \
       ch += blocks_per_row * (THREADS / 32)) {                                              \
    const int pg0 = first_page + ch * 32;                                                    \
    const int pg = pg0 + lane;                                                               \
    i64 base = 0;                                                                            \
    if (pg <= last_page) {                                                                   \
      const int s = __ldcs(in + ((i64)pg << shift));                                         \
      const i64 e = __ldg(v2p + (s < 0 ? 0 : (s >> shift)));                                 \
      base = (e > 0 ? e : 0) << shift;                                                       \
    }                                                                                        \
    const int last = min(pg0 + 31, last_page);                                               \
    const int pos_begin = max(start, pg0 << shift);                                          \
    const int pos_end = last == last_page ? start + len : (last + 1) << shift;               \
    const i64 e_chunk0 = lo + ((i64)pg0 << shift) - start;                                   \
    const i64 e_begin = lo + (pos_begin - start), e_end = lo + (pos_end - start);            \
    const i64 e_first = e_begin - (e_begin + align) % V;                                     \
    for (i64 vb = e_first; vb < e_end; vb += 32 * V) {                                       \
      const i64 v0 = vb + lane * V;                                                          \
      T vals[V];                                                                             \
      bool all_in = true;                                                                    \
      _Pragma("unroll") for (int k = 0; k < V; ++k) {                                        \
        const i64 e = v0 + k;                                                                \
        const bool in_ = e >= e_begin && e < e_end;                                          \
        all_in &= in_;                                                                       \
        const int rel = (int)(e - e_chunk0);                                                 \
        const i64 b = __shfl_sync(0xffffffffu, base, in_ ? rel >> shift : 0);                \
        vals[k] = (T)(b + (rel & mask));                                                     \
      }                                                                                      \
      if (all_in) {                                                                          \
        VT v;                                                                                \
        T* p = (T*)&v;                                                                       \
        _Pragma("unroll") for (int k = 0; k < V; ++k) p[k] = vals[k];                        \
        *(VT*)(out + v0) = v;                                                                \
      } else {                                                                               \
        _Pragma("unroll") for (int k = 0; k < V; ++k)                                        \
          if (v0 + k >= e_begin && v0 + k < e_end) out[v0 + k] = vals[k];                    \
      }                                                                                      \
    }                                                                                        \
  }                                                                                          \
}

BARE_STREAM(bare_stream_i32, int, 4, int4)
BARE_STREAM(bare_stream_i64, i64, 2, longlong2)
"""


def _blocks_per_row(units: int, per_block: int, bs: int, threads: int, device: torch.device) -> int:
    needed = max(1, -(-units // per_block))
    wave = torch.cuda.get_device_properties(device).multi_processor_count * (2048 // threads)
    return max(1, min(needed, wave // max(bs, 1)))


class _Kernels:
    """The NVRTC module on one device (compiled once per process and device)."""

    _cache: dict = {}

    @classmethod
    def get(cls, device: torch.device) -> "_Kernels":
        key = device.index if device.index is not None else torch.cuda.current_device()
        if key not in cls._cache:
            cls._cache[key] = cls(key)
        return cls._cache[key]

    def __init__(self, index: int):
        from cuda.bindings import driver, nvrtc

        self.driver = driver
        torch.empty(1, device=f"cuda:{index}")  # the primary context, current on this thread
        _check(driver.cuInit(0))
        major, minor = torch.cuda.get_device_capability(index)
        err, prog = nvrtc.nvrtcCreateProgram(_SOURCE.encode(), b"bare_gather.cu", 0, [], [])
        _check((err,))
        opts = [f"--gpu-architecture=sm_{major}{minor}".encode(), b"--std=c++17"]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, size = nvrtc.nvrtcGetProgramLogSize(prog)
            log = b" " * size
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise RuntimeError(f"bare gather: NVRTC failed: {log.decode(errors='replace')}")
        _, size = nvrtc.nvrtcGetCUBINSize(prog)
        cubin = b" " * size
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin))
        self._image = np.frombuffer(cubin, dtype=np.uint8).copy()  # (kept alive; loaded by address)
        self.module = _check(driver.cuModuleLoadData(self._image.ctypes.data))
        self.fn = {name: _check(driver.cuModuleGetFunction(self.module, name.encode()))
                   for name in ("bare_page_table", "bare_stream_i32", "bare_stream_i64")}

    def launch(self, name: str, grid: tuple, threads: int, args: list) -> None:
        """``grid``: (x, y) blocks; ``args``: (value, numpy dtype) per kernel parameter, in order."""
        if grid[0] * grid[1] == 0:
            return
        cells = [np.array([v], dtype=t) for v, t in args]
        params = np.array([c.ctypes.data for c in cells], dtype=np.uint64)
        stream = self.driver.CUstream(torch.cuda.current_stream().cuda_stream)
        _check(self.driver.cuLaunchKernel(self.fn[name], grid[0], grid[1], 1, threads, 1, 1, 0, stream,
                                          params.ctypes.data, 0))


def _check(result):
    err, *rest = result
    code = getattr(err, "value", err)
    if code != 0:
        raise RuntimeError(f"bare gather: CUDA driver/NVRTC call failed: {err}")
    return rest[0] if len(rest) == 1 else rest


def _ptr(t):
    return (0 if t is None else t.data_ptr(), np.uint64)


def available(device: torch.device, page_size: int) -> tuple:
    """(usable, why not): CUDA needs cuda.bindings, NVRTC and a power-of-two page."""
    if device.type != "cuda":
        return True, ""
    if page_size & (page_size - 1):
        return False, f"page_size {page_size} is not a power of two"
    try:
        _Kernels.get(device)
    except Exception as e:  # reported in the table's notes, not fatal
        return False, f"{type(e).__name__}: {e}"
    return True, ""


def page_table(*, req_to_token, req_pool_indices, seq_lens, out, page_size, max_pages, v2p, seq_len_delta=0):
    """out[b, c] = max(v2p[vpage(req_to_token[req[b], c * ps])], 0) for c < n_b (live prefix)."""
    if req_to_token.device.type != "cuda":
        reference.kv_read_page_table(req_to_token=req_to_token, req_pool_indices=req_pool_indices,
                                     seq_lens=seq_lens, out=out, page_size=page_size, max_pages=max_pages,
                                     v2p=v2p, seq_len_delta=seq_len_delta)
        return
    bs = req_pool_indices.numel()
    # The op's grid: no column past the req_to_token row can be live.
    cols = min(max_pages, -(-req_to_token.shape[1] // page_size))
    bpr = _blocks_per_row(cols, _PAGE_THREADS * _COLS, bs, _PAGE_THREADS, out.device)
    i32, i64 = np.int32, np.int64
    _Kernels.get(out.device).launch("bare_page_table", (bs, bpr), _PAGE_THREADS, [
        _ptr(req_to_token), (req_to_token.stride(0), i64), _ptr(req_pool_indices), _ptr(seq_lens), _ptr(v2p),
        _ptr(out), (out.stride(0), i64), (page_size.bit_length() - 1, i32), (seq_len_delta, i32),
        (max_pages, i32),
    ])


def token_stream(*, req_to_token, req_pool_indices, seq_lens, indptr, out, page_size, v2p, kv_start_idx=None,
                 seq_len_delta=0):
    """out[indptr[b] + i] = entry(page of pos) * ps + pos % ps, pos = start_b + i, i < len_b + delta."""
    if req_to_token.device.type != "cuda":
        reference.kv_read_token_stream(req_to_token=req_to_token, req_pool_indices=req_pool_indices,
                                       seq_lens=seq_lens, indptr=indptr, out=out, page_size=page_size,
                                       v2p=v2p, kv_start_idx=kv_start_idx, seq_len_delta=seq_len_delta)
        return
    bs = req_pool_indices.numel()
    chunks = -(-(-(-req_to_token.shape[1] // page_size) + 1) // 32)
    bpr = _blocks_per_row(chunks, _STREAM_THREADS // 32, bs, _STREAM_THREADS, out.device)
    v = 2 if out.dtype == torch.int64 else 4
    align = (out.data_ptr() // out.element_size()) % v
    i32, i64 = np.int32, np.int64
    name = "bare_stream_i64" if out.dtype == torch.int64 else "bare_stream_i32"
    _Kernels.get(out.device).launch(name, (bs, bpr), _STREAM_THREADS, [
        _ptr(req_to_token), (req_to_token.stride(0), i64), _ptr(req_pool_indices), _ptr(seq_lens),
        _ptr(kv_start_idx), _ptr(indptr), _ptr(v2p), _ptr(out), (page_size.bit_length() - 1, i32),
        (seq_len_delta, i32), (align, i32),
    ])
