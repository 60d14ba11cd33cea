// build_trtllm_mha_page_table: the CUDA kernel (no torch headers).
//
// Grid: bs * blocks_per_row one-dimensional blocks; block b serves row
// b / blocks_per_row and the kPagesPerBlock-column chunks j, j + blocks_per_row,
// ... (j = b % blocks_per_row) of that row, up to the row's live page count `n`.
// The grid is sized from host-known shapes only (the table width, capped by
// the req_to_token row), never from device lengths: nothing is synchronised,
// and a CUDA graph replays it with any new lengths. A block whose first chunk
// lies past its row's `n` exits after two scalar loads, so short rows cost
// little however wide the table is.
//
// Cost model: every page-table element gathers one int32 from its own 32-byte
// sector of req_to_token (page boundaries are page_size * 4 bytes apart), and
// with SWA one more int64 from full_to_swa, so the kernel is bound by sector
// reads and their latency, not by bytes used. Each thread therefore issues all
// kPagesPerThread gathers of a chunk before it uses any of them; a warp's
// stores cover 32 consecutive columns (coalesced 128-byte rows).
//
// Small batches (bs 1: a few microseconds in all) are bound by latency: the
// row scalars are loaded together (one round trip before the gathers), the
// L1 serves an uncoalesced warp load one cache line per cycle, so chunks are
// small (kPagesPerBlock columns) to spread a long row over many SMs; blockIdx
// is split by a multiply-high divisor and slots divided in 32-bit, and the
// assert's printf lives out of line (SGL_DEVICE_CHECK_COLD).
#include <climits>

#include "common/cuda_utils.cuh"
#include "common/fast_div.h"
#include "trtllm_mha_page_table/params.h"

// Columns per thread and chunk; -DSGL_META_PT_PAGES_PER_THREAD=N (e.g. through
// NVCC_APPEND_FLAGS) rebuilds with another value for an A/B measurement. One
// beat two on the H200 (bs 256 x 2048 pages of 64: 8.6-9.1 vs 9.6 us; bs 1:
// level; results/h200_2026-12-01-s5/call2_ops_*): twice the threads, each
// with one gather, get all the gathers in flight sooner.
#ifndef SGL_META_PT_PAGES_PER_THREAD
#define SGL_META_PT_PAGES_PER_THREAD 1
#endif

namespace sgl_meta {
namespace {

constexpr int kThreads = 128;
constexpr int kPagesPerThread = SGL_META_PT_PAGES_PER_THREAD;
constexpr int64_t kPagesPerBlock = int64_t{kThreads} * kPagesPerThread;
// Past this many blocks (about two waves of 128-thread blocks on an H100/H200)
// a block loops over several chunks of its row instead, so very wide tables of
// mostly short rows (page_size 1, long contexts) do not launch mostly dead blocks.
constexpr int64_t kMaxBlocks = 4096;

// One kPagesPerBlock-column chunk of row `row_in` -> `out` (and `swa_out`), columns
// [begin, n) of it.
__device__ __forceinline__ void gather_chunk(const TrtllmMhaPageTableParams& p,
                                             const int32_t* row_in, int32_t* out,
                                             int32_t* swa_out,
                                             int64_t begin, int64_t n) {
  const int64_t c0 = begin + threadIdx.x;
  const int64_t step = p.page.page_size;
  int32_t slot[kPagesPerThread];
#pragma unroll
  for (int k = 0; k < kPagesPerThread; ++k) {
    const int64_t c = c0 + k * kThreads;
    slot[k] = c < n ? load_once(row_in + c * step) : 0;  // each slot read once: evict-first
  }


  if (swa_out != nullptr) {
    // Second-level gather, issued before any store. The clamp keeps -1
    // sentinels and slots past the mapping in bounds (docs/operators/trtllm_mha_metadata.md keeps the seed's
    // clamp rather than asserting).
    const int64_t last = p.full_to_swa_size - 1;
    int64_t mapped[kPagesPerThread];
#pragma unroll
    for (int k = 0; k < kPagesPerThread; ++k) {
      const int64_t c = c0 + k * kThreads;
      const int64_t at = min_i64(max_i64(slot[k], 0), last);
      mapped[k] = c < n ? p.full_to_swa.ldg(at) : 0;
    }
#pragma unroll
    for (int k = 0; k < kPagesPerThread; ++k) {
      const int64_t c = c0 + k * kThreads;
      if (c < n) {
        out[c] = static_cast<int32_t>(p.page.div32(slot[k]));
        swa_out[c] = static_cast<int32_t>(p.page.div(mapped[k]));
      }
    }
    return;
  }
#pragma unroll
  for (int k = 0; k < kPagesPerThread; ++k) {
    const int64_t c = c0 + k * kThreads;
    if (c < n) out[c] = static_cast<int32_t>(p.page.div32(slot[k]));
  }
}

__global__ void __launch_bounds__(kThreads)
    build_trtllm_mha_page_table_kernel(const __grid_constant__ TrtllmMhaPageTableParams p,
                                       FastDivU32 blocks_per_row) {
  const uint32_t row = blocks_per_row.div(blockIdx.x);
  const uint32_t first_chunk = blockIdx.x - row * blocks_per_row.divisor;
  // Both row scalars are loaded before either is used (one latency, not two).
  const int64_t len = p.cache_seqlens[row];
  const int64_t req = p.req_pool_indices[row];
  // Every block checks, live or not, so a bad index fails whatever the lengths
  // (the CPU kernel checks every row too). The named flag puts the argument's
  // name in the assert text itself, not only in the printf above it.
  const bool req_pool_indices_in_range = req >= 0 && req < p.pool_size;
  SGL_DEVICE_CHECK_COLD(req_pool_indices_in_range,
                   "build_trtllm_mha_page_table: req_pool_indices[%u] = %lld is "
                   "outside [0, req_to_token.size(0) = %lld)",
                   row, (long long)req, (long long)p.pool_size);
  const int64_t n = live_pages(p, len);
  int64_t begin = first_chunk * kPagesPerBlock;
  if (begin >= n) return;  // past the row's live pages: nothing to gather

  const int32_t* row_in = p.req_to_token + req * p.req_to_token_stride;
  int32_t* out = p.page_table + row * p.page_table_stride;
  int32_t* swa_out =
      p.swa_page_table ? p.swa_page_table + row * p.swa_page_table_stride : nullptr;
  const int64_t stride = static_cast<int64_t>(blocks_per_row.divisor) * kPagesPerBlock;
  for (; begin < n; begin += stride) gather_chunk(p, row_in, out, swa_out, begin, n);
}

}  // namespace

const char* build_trtllm_mha_page_table_cuda(const TrtllmMhaPageTableParams& p,
                                             void* stream) {
  // At least one block per row even when no column can be written, so every
  // request index is still checked.
  const int64_t chunks =
      p.max_pages > 0 ? (p.max_pages + kPagesPerBlock - 1) / kPagesPerBlock : 1;
  const int64_t spread = (kMaxBlocks + p.bs - 1) / p.bs;  // >= 1
  const int64_t blocks_per_row = chunks < spread ? chunks : spread;
  const int64_t blocks = p.bs * blocks_per_row;
  if (blocks > INT32_MAX) return "grid too large (page_table.size(0) out of range)";
  build_trtllm_mha_page_table_kernel<<<static_cast<unsigned>(blocks), kThreads, 0,
                                       static_cast<cudaStream_t>(stream)>>>(
      p, FastDivU32::make(static_cast<uint32_t>(blocks_per_row)));
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace sgl_meta
