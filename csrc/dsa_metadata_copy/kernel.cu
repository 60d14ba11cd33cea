// fused_metadata_copy / fused_metadata_copy_multi: the CUDA kernel (no torch
// headers).
//
// A pure copy, so the floor is bytes moved / bandwidth: read each source
// region once, write it to every destination set. The kernel walks the flat
// unit space of params.h with a grid-stride loop; every thread
//   1. locates up to kUnroll units (field by a forward scan of end[] -- the
//      units a thread visits only increase -- row/column by a multiply-high
//      division, no divide instruction),
//   2. issues all their loads (16-byte vectors where the address allows it),
//   3. then stores each unit to every destination set (16-byte vectors when
//      the field's destinations allow it: they take K times the source's bytes).
// Adjacent threads take adjacent units, so each warp's loads and stores are
// coalesced within a row. The page_table_1 region dominates the bytes; the
// 1-D fields are a few hundred units at the front of the space.
#include <atomic>

#include "common/cuda_utils.cuh"
#include "dsa_metadata_copy/params.h"

namespace sgl_meta {
namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;
constexpr int kBlocksPerSm = 4;  // grid cap: enough resident warps to hide latency
constexpr int kFallbackSms = 132;

// The source's alignment is decided per unit: a source row stride that is not
// a multiple of 4 elements (page_indices_src is often a contiguous
// [bs, max_len] with max_len = the batch's longest sequence) misaligns every
// other row, and those rows still get 8-byte or 4-byte loads.
__device__ __forceinline__ void load_unit(const DsaSourceField& fd, const DsaUnit& u,
                                          int32_t (&v)[4]) {
  const int32_t* s = fd.src + u.row * fd.src_row_stride + u.col;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(s);
  if (fd.width == 4 && u.len == 4 && (addr & 15) == 0) {
    const int4 x = __ldg(reinterpret_cast<const int4*>(s));
    v[0] = x.x;
    v[1] = x.y;
    v[2] = x.z;
    v[3] = x.w;
  } else if (fd.width == 4 && u.len == 4 && (addr & 7) == 0) {
    const int2 x = __ldg(reinterpret_cast<const int2*>(s));
    const int2 y = __ldg(reinterpret_cast<const int2*>(s) + 1);
    v[0] = x.x;
    v[1] = x.y;
    v[2] = y.x;
    v[3] = y.y;
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (e < u.len) v[e] = __ldg(s + e);
  }
}

__device__ __forceinline__ void store_unit(int32_t* t, int32_t width, const DsaUnit& u,
                                           const int32_t (&v)[4]) {
  if (width == 4 && u.len == 4) {
    *reinterpret_cast<int4*>(t) = make_int4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e)
      if (e < u.len) t[e] = v[e];
  }
}

__global__ void __launch_bounds__(kThreads)
    fused_metadata_copy_kernel(const __grid_constant__ DsaCopyParams p) {
  const int64_t total = p.total_units();
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  int f = 0;  // field of the last unit located; never decreases
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
       base < total; base += stride * kUnroll) {
    int field[kUnroll];
    DsaUnit unit[kUnroll];
    int32_t v[kUnroll][4];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      const int64_t g = base + k * stride;
      field[k] = -1;
      if (g < total) {
        while (g >= p.end[f]) ++f;  // skips empty (absent) fields too
        field[k] = f;
        unit[k] = dsa_locate(p.field[f], static_cast<uint32_t>(g - p.begin(f)));
        load_unit(p.field[f], unit[k], v[k]);
      }
    }
    for (int d = 0; d < p.num_sets; ++d) {
      const DsaDstSet& set = p.dst[d];
#pragma unroll
      for (int k = 0; k < kUnroll; ++k) {
        if (field[k] < 0) continue;
        const int fk = field[k];
        int32_t* t = set.ptr[fk] + unit[k].row * set.row_stride(fk) + unit[k].col;
        store_unit(t, p.field[fk].width, unit[k], v[k]);
      }
    }
  }
}

// SM count of the current device (the binding's device guard made it the
// tensors' device), cached: the attribute query is cheap but not free.
int sm_count() {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return kFallbackSms;
  static std::atomic<int> cache[64];
  if (dev >= 0 && dev < 64) {
    const int c = cache[dev].load(std::memory_order_relaxed);
    if (c > 0) return c;
  }
  int c = 0;
  if (cudaDeviceGetAttribute(&c, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      c <= 0)
    return kFallbackSms;
  if (dev >= 0 && dev < 64) cache[dev].store(c, std::memory_order_relaxed);
  return c;
}

}  // namespace

const char* fused_metadata_copy_cuda(const DsaCopyParams& p, void* stream) {
  const int64_t total = p.total_units();
  if (total == 0 || p.num_sets == 0) return nullptr;
  // One unit per thread while that fits in a few resident blocks per SM (small
  // copies spread over many SMs); beyond that each thread loops, kUnroll
  // independent loads in flight per iteration.
  const int64_t cap = static_cast<int64_t>(sm_count()) * kBlocksPerSm;
  int64_t blocks = (total + kThreads - 1) / kThreads;
  if (blocks > cap) blocks = cap;
  fused_metadata_copy_kernel<<<static_cast<unsigned>(blocks), kThreads, 0,
                               static_cast<cudaStream_t>(stream)>>>(p);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace sgl_meta
