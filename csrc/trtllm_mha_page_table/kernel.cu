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
// asserts' printf lives out of line (SGL_FAILURE_PATH).
#include <climits>

#include "common/cuda_utils.cuh"
#include "common/fast_div.h"
#include "trtllm_mha_page_table/params.h"

namespace sgl_meta {
namespace {

constexpr int kThreads = 128;
// Columns per thread and chunk: one gather per thread puts every gather of a
// block in flight at once (faster than two per thread at bs 256 x 2048 pages
// on the H200, level at bs 1).
constexpr int kPagesPerThread = 1;
constexpr int64_t kPagesPerBlock = int64_t{kThreads} * kPagesPerThread;
// Past this many blocks (about two waves of 128-thread blocks on an H100/H200)
// a block loops over several chunks of its row instead, so very wide tables of
// mostly short rows (page_size 1, long contexts) do not launch mostly dead blocks.
constexpr int64_t kMaxBlocks = 4096;

// Failure paths (SGL_FAILURE_PATH).
SGL_FAILURE_PATH void fail_row(const TrtllmMhaPageTableParams& p, uint32_t row, int64_t req,
                               int64_t len) {
  const bool req_pool_indices_in_range = req >= 0 && req < p.pool_size;
  SGL_DEVICE_CHECK(req_pool_indices_in_range,
                   "build_trtllm_mha_page_table: req_pool_indices[%u] = %lld is outside [0, "
                   "req_to_token.size(0) = %lld)",
                   row, (long long)req, (long long)p.pool_size);
  const bool cache_seqlens_in_int32_range = length_fits(len);
  SGL_DEVICE_CHECK(cache_seqlens_in_int32_range,
                   "build_trtllm_mha_page_table: cache_seqlens[%u] = %lld is negative or does not "
                   "fit int32",
                   row, (long long)len);
  __trap();
}

SGL_FAILURE_PATH void fail_swa_slot(const TrtllmMhaPageTableParams& p, uint32_t row, int32_t slot,
                                    int64_t c) {
  const bool slot_inside_full_to_swa = slot < p.full_to_swa_size;
  SGL_DEVICE_CHECK(slot_inside_full_to_swa,
                   "build_trtllm_mha_page_table: req_to_token slot %d (row %u, page %lld) is "
                   "outside full_to_swa [0, %lld)",
                   slot, row, (long long)c, (long long)p.full_to_swa_size);
  __trap();
}

// One kPagesPerBlock-column chunk of row `row_in` -> `out` (and `swa_out`), columns
// [begin, n) of it.
__device__ __forceinline__ void gather_chunk(const TrtllmMhaPageTableParams& p, uint32_t row,
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
    // Second-level gather, issued before any store: a negative slot reads
    // entry 0 (params.h), a slot past the mapping is never read.
    int64_t mapped[kPagesPerThread];
#pragma unroll
    for (int k = 0; k < kPagesPerThread; ++k) {
      const int64_t c = c0 + k * kThreads;
      if (c >= n) {
        mapped[k] = 0;
        continue;
      }
      if (__builtin_expect(slot[k] >= p.full_to_swa_size, 0)) fail_swa_slot(p, row, slot[k], c);
      mapped[k] = p.full_to_swa.ldg(swa_index(slot[k]));
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
  // Every block checks, live or not, so a bad index or length fails whatever
  // the lengths (the CPU kernel checks every row too).
  if (__builtin_expect(!(req >= 0 && req < p.pool_size && length_fits(len)), 0))
    fail_row(p, row, req, len);
  const int64_t n = live_pages(p, len);
  int64_t begin = first_chunk * kPagesPerBlock;
  if (begin >= n) return;  // past the row's live pages: nothing to gather

  const int32_t* row_in = p.req_to_token + req * p.req_to_token_stride;
  int32_t* out = p.page_table + row * p.page_table_stride;
  int32_t* swa_out =
      p.swa_page_table ? p.swa_page_table + row * p.swa_page_table_stride : nullptr;
  const int64_t stride = static_cast<int64_t>(blocks_per_row.divisor) * kPagesPerBlock;
  for (; begin < n; begin += stride) gather_chunk(p, row, row_in, out, swa_out, begin, n);
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
