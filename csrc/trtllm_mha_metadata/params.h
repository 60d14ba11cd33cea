// update_trtllm_mha_graph_metadata: the argument bundle shared by the CPU and
// CUDA kernels. Plain data (raw pointers, element strides, scalars): the torch
// binding fills it after its checks, the kernels never see a torch type.
#pragma once

#include <cstdint>

#include "common/index_array.h"

namespace sgl_meta {

enum QMode : int { kQModeNone = 0, kQModeCumsum = 1, kQModeStrided = 2 };

struct TrtllmMhaMetadataParams {
  // inputs
  IndexArray req_pool_indices;  // [>= bs]
  IndexArray seq_lens;          // [>= bs]
  IndexArray qlens;             // [>= bs], q_mode == CUMSUM only
  const int32_t* req_to_token = nullptr;  // [pool_size, row_stride]
  int64_t req_to_token_stride = 0;        // elements between rows
  int64_t pool_size = 0;                  // req_to_token.size(0)
  IndexArray swa_mapping;                 // [swa_mapping_size] int32/int64, or absent
  int64_t swa_mapping_size = 0;
  const int64_t* out_cache_loc = nullptr;  // [num_out_tokens] or null
  int64_t num_out_tokens = 0;  // min(swa_out_len, out_cache_loc.numel())

  // outputs
  int32_t* cache_seqlens = nullptr;  // [>= bs]
  int32_t* cu_seqlens_k = nullptr;   // [>= bs + 1]
  int32_t* cu_seqlens_q = nullptr;   // [>= bs + 1] or null
  int32_t* page_table = nullptr;     // [>= bs, >= max_seq_pages]
  int64_t page_table_stride = 0;
  int32_t* swa_page_table = nullptr;  // like page_table, or null
  int64_t swa_page_table_stride = 0;
  int64_t* swa_out_cache_loc = nullptr;  // [swa_out_len] or null
  int64_t swa_out_len = 0;

  // scalars
  int64_t bs = 0;
  int64_t seqlen_offset = 0;
  int64_t max_seq_pages = 0;
  PageDivisor page;
  int64_t q_stride = 0;
  int q_mode = kQModeNone;
  bool live_pages_only = false;
  // Seqlen metadata only (cache_seqlens, cu_seqlens_k, cu_seqlens_q): no
  // page table, SWA table or swa_out_cache_loc is written, nothing else read.
  bool skip_page_table = false;
};

// cache_seqlens[i] = int32(seq_lens[i] + seqlen_offset); shared so the CPU and
// CUDA paths wrap identically on overflow (like `.to(torch.int32)`). The sum is
// taken in uint64: seq_lens is a device value, and a hostile one near the int64
// limit made the signed add undefined behaviour (defined only under -fwrapv).
SGL_HD int32_t cache_seqlen(const TrtllmMhaMetadataParams& p, int64_t i) {
  const uint64_t sum =
      static_cast<uint64_t>(p.seq_lens[i]) + static_cast<uint64_t>(p.seqlen_offset);
  return static_cast<int32_t>(static_cast<uint32_t>(sum));
}

// cu_seqlens_q[j] = int32(j * q_stride) for Q_MODE_STRIDED, wrapping like the
// eager int64 product cast to int32 (unsigned: no signed-overflow UB).
SGL_HD int32_t strided_q(const TrtllmMhaMetadataParams& p, int64_t j) {
  return static_cast<int32_t>(
      static_cast<uint32_t>(static_cast<uint64_t>(j) * static_cast<uint64_t>(p.q_stride)));
}

// Page-table columns row `i` writes: all `max_seq_pages`, or with
// live_pages_only only min(ceil(cache_seqlens[i] / page_size), max_seq_pages).
SGL_HD int64_t columns_to_write(const TrtllmMhaMetadataParams& p, int64_t i) {
  if (!p.live_pages_only) return p.max_seq_pages;
  const int64_t len = cache_seqlen(p, i);
  return len <= 0 ? 0 : min_i64(p.page.ceil_div(len), p.max_seq_pages);
}

// CPU reference kernel (throws std::runtime_error on out-of-range indices).
void update_trtllm_mha_metadata_cpu(const TrtllmMhaMetadataParams& p);

// CUDA launcher; `stream` is a cudaStream_t. Returns nullptr on success, else
// the error text (the binding turns it into an exception naming the op).
const char* update_trtllm_mha_metadata_cuda(const TrtllmMhaMetadataParams& p,
                                            void* stream);

}  // namespace sgl_meta
