// update_trtllm_mha_graph_metadata: the CUDA kernel (no torch headers).
//
// One launch, three kinds of thread block, picked by blockIdx.x:
//   [0]                      cache_seqlens, cu_seqlens_k, cu_seqlens_q (a scan)
//   [1, 1 + bs * chunks)     one (row, column chunk) of page_table (+ SWA table)
//   [.., + swa_out_blocks)   swa_out_cache_loc translate + zero padding
// The scan block comes first so the only serial piece starts earliest.
//
// Cost model: each page-table element gathers one int32 from a different
// 32-byte sector of req_to_token (page boundaries are page_size * 4 bytes
// apart), so the kernel is bound by sector reads, not by bytes used. Every
// thread therefore issues all of its gathers before it uses any of them
// (kPagesPerThread independent loads in flight), and stores are coalesced.
#include <climits>

#include <cub/block/block_scan.cuh>

#include "common/cuda_utils.cuh"
#include "trtllm_mha_metadata/params.h"

namespace sgl_meta {
namespace {

constexpr int kThreads = 128;
constexpr int kPagesPerThread = 8;
constexpr int64_t kPagesPerBlock = kThreads * kPagesPerThread;
constexpr int kOutPerThread = 4;
constexpr int64_t kOutPerBlock = kThreads * kOutPerThread;

__device__ void scan_block(const TrtllmMhaMetadataParams& p) {
  using Scan = cub::BlockScan<uint32_t, kThreads>;
  __shared__ typename Scan::TempStorage k_tmp, q_tmp;
  uint32_t k_carry = 0, q_carry = 0;
  if (threadIdx.x == 0) {
    p.cu_seqlens_k[0] = 0;
    if (p.q_mode != kQModeNone) p.cu_seqlens_q[0] = 0;
  }
  for (int64_t base = 0; base < p.bs; base += kThreads) {
    const int64_t i = base + threadIdx.x;
    const bool live = i < p.bs;
    uint32_t len = 0;
    if (live) {
      const int32_t l = cache_seqlen(p, i);
      p.cache_seqlens[i] = l;
      len = static_cast<uint32_t>(l);
    }
    uint32_t k_incl, k_total;
    Scan(k_tmp).InclusiveSum(len, k_incl, k_total);
    if (live) p.cu_seqlens_k[i + 1] = static_cast<int32_t>(k_carry + k_incl);
    k_carry += k_total;
    if (p.q_mode == kQModeCumsum) {
      const uint32_t q = live ? static_cast<uint32_t>(p.qlens[i]) : 0u;
      uint32_t q_incl, q_total;
      Scan(q_tmp).InclusiveSum(q, q_incl, q_total);
      if (live) p.cu_seqlens_q[i + 1] = static_cast<int32_t>(q_carry + q_incl);
      q_carry += q_total;
    } else if (p.q_mode == kQModeStrided && live) {
      p.cu_seqlens_q[i + 1] = strided_q(p, i + 1);
    }
    __syncthreads();  // TempStorage is reused by the next tile
  }
}

__device__ void page_block(const TrtllmMhaMetadataParams& p, int64_t row,
                           int64_t chunk) {
  const int64_t req = p.req_pool_indices[row];
  SGL_DEVICE_CHECK(req >= 0 && req < p.pool_size,
                   "update_trtllm_mha_graph_metadata: req_pool_indices[%lld] = %lld "
                   "is outside [0, req_to_token.size(0) = %lld)",
                   (long long)row, (long long)req, (long long)p.pool_size);
  const int64_t cols = columns_to_write(p, row);
  const int64_t first = chunk * kPagesPerBlock + threadIdx.x;
  if (chunk * kPagesPerBlock >= cols) return;

  const int32_t* row_in = p.req_to_token + req * p.req_to_token_stride;
  const int64_t step = p.page.page_size;
  int32_t slot[kPagesPerThread];
#pragma unroll
  for (int k = 0; k < kPagesPerThread; ++k) {
    const int64_t c = first + k * kThreads;
    slot[k] = c < cols ? load_ro(row_in + c * step) : 0;
  }

  int32_t* row_out = p.page_table + row * p.page_table_stride;
#pragma unroll
  for (int k = 0; k < kPagesPerThread; ++k) {
    const int64_t c = first + k * kThreads;
    if (c < cols) row_out[c] = static_cast<int32_t>(p.page.div(slot[k]));
  }
  if (p.swa_page_table == nullptr) return;

  // Second-level gather through the full->SWA slot mapping; -1 sentinels for
  // negative slots and for slots the SWA pool does not hold.
  int64_t mapped[kPagesPerThread];
#pragma unroll
  for (int k = 0; k < kPagesPerThread; ++k) {
    const int64_t c = first + k * kThreads;
    mapped[k] = -1;
    if (c < cols && slot[k] >= 0) {
      SGL_DEVICE_CHECK(slot[k] < p.swa_mapping_size,
                       "update_trtllm_mha_graph_metadata: req_to_token slot %d "
                       "(row %lld, page %lld) is outside swa_mapping [0, %lld)",
                       slot[k], (long long)row, (long long)c,
                       (long long)p.swa_mapping_size);
      mapped[k] = p.swa_mapping.ldg(slot[k]);
    }
  }
  int32_t* swa_out = p.swa_page_table + row * p.swa_page_table_stride;
#pragma unroll
  for (int k = 0; k < kPagesPerThread; ++k) {
    const int64_t c = first + k * kThreads;
    if (c < cols)
      swa_out[c] = mapped[k] < 0 ? -1 : static_cast<int32_t>(p.page.div(mapped[k]));
  }
}

__device__ void swa_out_block(const TrtllmMhaMetadataParams& p, int64_t block) {
  const int64_t first = block * kOutPerBlock + threadIdx.x;
#pragma unroll
  for (int k = 0; k < kOutPerThread; ++k) {
    const int64_t i = first + k * kThreads;
    if (i >= p.swa_out_len) break;
    int64_t v = 0;
    if (i < p.num_out_tokens) {
      const int64_t loc = p.out_cache_loc[i];
      if (loc < 0) {
        v = -1;
      } else {
        SGL_DEVICE_CHECK(loc < p.swa_mapping_size,
                         "update_trtllm_mha_graph_metadata: out_cache_loc[%lld] = %lld "
                         "is outside swa_mapping [0, %lld)",
                         (long long)i, (long long)loc, (long long)p.swa_mapping_size);
        v = p.swa_mapping.ldg(loc);
      }
    }
    p.swa_out_cache_loc[i] = v;
  }
}

__global__ void __launch_bounds__(kThreads)
    update_trtllm_mha_metadata_kernel(const __grid_constant__ TrtllmMhaMetadataParams p,
                                      int64_t chunks) {
  const int64_t b = blockIdx.x;
  if (b == 0) {
    scan_block(p);
    return;
  }
  const int64_t page_blocks = p.bs * chunks;
  if (b - 1 < page_blocks) {
    page_block(p, (b - 1) / chunks, (b - 1) % chunks);
  } else {
    swa_out_block(p, b - 1 - page_blocks);
  }
}

}  // namespace

const char* update_trtllm_mha_metadata_cuda(const TrtllmMhaMetadataParams& p,
                                            void* stream) {
  // skip_page_table: the scan block alone (no page or swa_out blocks).
  const int64_t chunks =
      p.skip_page_table ? 0 : (p.max_seq_pages + kPagesPerBlock - 1) / kPagesPerBlock;
  const int64_t out_blocks = p.swa_out_cache_loc && !p.skip_page_table
                                 ? (p.swa_out_len + kOutPerBlock - 1) / kOutPerBlock
                                 : 0;
  const int64_t blocks = 1 + p.bs * chunks + out_blocks;
  if (blocks > INT32_MAX) return "grid too large (bs * max_seq_pages out of range)";
  update_trtllm_mha_metadata_kernel<<<static_cast<unsigned>(blocks), kThreads, 0,
                                      static_cast<cudaStream_t>(stream)>>>(p, chunks);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace sgl_meta
