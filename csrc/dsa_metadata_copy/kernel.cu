// fused_metadata_copy / fused_metadata_copy_multi: the CUDA kernel (no torch
// headers).
//
// A pure copy, so the floor is bytes moved / bandwidth: read each source
// region once, write it to every destination set. Blocks walk the flat tile
// space of params.h with a grid-stride loop; per step a block
//   1. locates kTilesPerStep tiles (field by a forward scan of end[] -- the
//      tiles a block visits only increase -- row/column by a multiply-high
//      division, once per tile: uniform across the block),
//   2. has every thread load its 4 elements of each tile (16-byte vectors
//      where the address allows it) before storing any,
//   3. then stores them to every destination set (16-byte vectors when the
//      field's destinations allow it: they take K times the source's bytes).
// Adjacent threads take adjacent 16-byte pieces of a row, so loads and stores
// are coalesced. Per-thread state is a few registers, so 6 blocks of 256
// threads fit on an SM (a per-element walk needs some 62 registers: half the
// occupancy, and well short of copy bandwidth on large copies).

#include "common/cuda_utils.cuh"
#include "common/sm_count.h"
#include "dsa_metadata_copy/params.h"

namespace sgl_meta {
namespace {

constexpr int kThreads = 256;
static_assert(kThreads * 4 == kDsaTileElems, "a tile is 4 elements per thread");
constexpr int kTilesPerStep = 2;  // independent 16-byte loads in flight per thread
constexpr int kBlocksPerSm = 6;   // grid cap: what fits at the kernel's ~38 registers
constexpr int kFallbackSms = 132;

// One thread's piece of a tile: `len` (1..4) elements at (row, col).
struct Piece {
  int32_t field;  // -1: nothing to copy
  int32_t len;
  uint32_t row;   // tile indices are 32-bit (checked by the binding)
  int64_t col;
};

// The source's alignment is decided per piece: a source row stride that is
// not a multiple of 4 elements (page_indices_src is often a contiguous
// [bs, max_len] with max_len = the batch's longest sequence) misaligns every
// other row, and those rows still get 8-byte or 4-byte loads.
__device__ __forceinline__ void load_piece(const DsaSourceField& fd, const Piece& u,
                                           int32_t (&v)[4]) {
  const int32_t* s = fd.src + static_cast<int64_t>(u.row) * fd.src_row_stride + u.col;
  const uintptr_t addr = reinterpret_cast<uintptr_t>(s);
  if (u.len == 4 && (addr & 15) == 0) {
    const int4 x = __ldg(reinterpret_cast<const int4*>(s));
    v[0] = x.x;
    v[1] = x.y;
    v[2] = x.z;
    v[3] = x.w;
  } else if (u.len == 4 && (addr & 7) == 0) {
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

__device__ __forceinline__ void store_piece(int32_t* t, int32_t width, const Piece& u,
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
  const int64_t total = p.total_tiles();
  const int64_t stride = gridDim.x;
  int f = 0;  // field of the last tile located; never decreases
  for (int64_t base = blockIdx.x; base < total; base += stride * kTilesPerStep) {
    Piece piece[kTilesPerStep];
    int32_t v[kTilesPerStep][4];
#pragma unroll
    for (int k = 0; k < kTilesPerStep; ++k) {
      const int64_t tile = base + k * stride;
      piece[k].field = -1;
      if (tile >= total) continue;
      while (tile >= p.end[f]) ++f;  // skips empty (absent) fields too
      const DsaSourceField& fd = p.field[f];
      const uint32_t local = static_cast<uint32_t>(tile - p.begin(f));
      const uint32_t row = fd.tiles_per_row.div(local);
      const int64_t col =
          static_cast<int64_t>(local - row * fd.tiles_per_row.divisor) * kDsaTileElems +
          4 * threadIdx.x;
      if (col >= fd.cols) continue;  // past the end of a short last tile
      piece[k] = {f, static_cast<int32_t>(min_i64(4, fd.cols - col)), row, col};
      load_piece(fd, piece[k], v[k]);
    }
    for (int d = 0; d < p.num_sets; ++d) {
      const DsaDstSet& set = p.dst[d];
#pragma unroll
      for (int k = 0; k < kTilesPerStep; ++k) {
        const int fk = piece[k].field;
        if (fk < 0) continue;
        int32_t* t = set.ptr[fk] + static_cast<int64_t>(piece[k].row) * set.row_stride(fk) +
                     piece[k].col;
        store_piece(t, p.field[fk].width, piece[k], v[k]);
      }
    }
  }
}

int sm_count() { return current_device_sm_count(kFallbackSms); }

}  // namespace

const char* fused_metadata_copy_cuda(const DsaCopyParams& p, void* stream) {
  const int64_t total = p.total_tiles();
  if (total == 0 || p.num_sets == 0) return nullptr;
  // One tile per block while that fits in the resident blocks of the GPU
  // (small copies spread over many SMs); beyond that each block loops,
  // kTilesPerStep tiles in flight per step.
  const int64_t cap = static_cast<int64_t>(sm_count()) * kBlocksPerSm;
  int64_t blocks = total;
  if (blocks > cap) blocks = cap;
  fused_metadata_copy_kernel<<<static_cast<unsigned>(blocks), kThreads, 0,
                               static_cast<cudaStream_t>(stream)>>>(p);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace sgl_meta
