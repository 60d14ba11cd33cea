// build_trtllm_mha_page_table: the argument bundle shared by the CPU and CUDA
// kernels. Plain data (raw pointers, element strides, scalars): the torch
// binding fills it after its checks, the kernels never see a torch type.
#pragma once

#include <cstdint>

#include "common/index_array.h"

namespace sgl_meta {

struct TrtllmMhaPageTableParams {
  // inputs
  IndexArray req_pool_indices;            // [>= bs]
  IndexArray cache_seqlens;               // [>= bs], KV length in tokens
  const int32_t* req_to_token = nullptr;  // [pool_size, row_len], rows by stride
  int64_t req_to_token_stride = 0;        // elements between rows
  int64_t pool_size = 0;                  // req_to_token.size(0)
  IndexArray full_to_swa;                 // [full_to_swa_size] int32/int64, or absent
  int64_t full_to_swa_size = 0;           // >= 1 when given (a negative slot reads entry 0)

  // outputs
  int32_t* page_table = nullptr;  // [bs, width], rows by page_table_stride
  int64_t page_table_stride = 0;
  int32_t* swa_page_table = nullptr;  // [>= bs, >= width] or null
  int64_t swa_page_table_stride = 0;

  // scalars
  int64_t bs = 0;
  // min(width, ceil(req_to_token.size(1) / page_size)): no row writes more
  // columns than the table has, nor gathers past the end of its req_to_token
  // row. Host-known, so it also bounds the CUDA grid.
  int64_t max_pages = 0;
  PageDivisor page;
};

// Lengths (common/index_array.h): cache_seqlens[r] must lie in
// [0, 2**31 - 1]; 0 means no pages. SWA lookups: a negative slot reads
// full_to_swa[0] (SGLang's builder clamps it there), a slot >= full_to_swa's
// size is an error (a read out of bounds).
SGL_HD int64_t swa_index(int32_t slot) { return slot < 0 ? 0 : slot; }

// Columns row `r` writes, given its cache_seqlens value `len`:
// min(ceil(max(len, 0) / page_size), max_pages). Written as
// (len - 1) / page_size + 1 so no int64 length can overflow.
SGL_HD int64_t live_pages(const TrtllmMhaPageTableParams& p, int64_t len) {
  return len <= 0 ? 0 : min_i64(p.page.div(len - 1) + 1, p.max_pages);
}

// CPU kernel (throws std::runtime_error on an out-of-range request index,
// length or SWA slot, before anything is written).
void build_trtllm_mha_page_table_cpu(const TrtllmMhaPageTableParams& p);

// CUDA launcher; `stream` is a cudaStream_t. Returns nullptr on success, else
// the error text (the binding turns it into an exception naming the op).
const char* build_trtllm_mha_page_table_cuda(const TrtllmMhaPageTableParams& p,
                                             void* stream);

}  // namespace sgl_meta
