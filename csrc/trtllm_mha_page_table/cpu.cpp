// build_trtllm_mha_page_table: CPU kernel. Same results as the CUDA kernel;
// a hostile request index, length or SWA slot raises instead of tripping a
// device assert.

#include "common/errors.h"
#include "common/row_checks.h"
#include "trtllm_mha_page_table/params.h"

namespace sgl_meta {
namespace {

constexpr const char* kOp = "build_trtllm_mha_page_table";

}  // namespace

void build_trtllm_mha_page_table_cpu(const TrtllmMhaPageTableParams& p) {
  // Every row's request index and length are checked before anything is
  // written, whatever the row's length (the CUDA kernel checks every row
  // too), and every SWA slot a live column reads: a bad call leaves the
  // tables untouched.
  for (int64_t r = 0; r < p.bs; ++r) {
    check_request_index(kOp, r, p.req_pool_indices[r], p.pool_size);
    check_length(kOp, "cache_seqlens", r, p.cache_seqlens[r]);
  }
  if (p.swa_page_table != nullptr) {
    for (int64_t r = 0; r < p.bs; ++r) {
      const int32_t* row_in = p.req_to_token + p.req_pool_indices[r] * p.req_to_token_stride;
      const int64_t n = live_pages(p, p.cache_seqlens[r]);
      for (int64_t c = 0; c < n; ++c) {
        const int32_t slot = row_in[c * p.page.page_size];
        if (slot >= p.full_to_swa_size)
          raise_error(kOp, "req_to_token[req_pool_indices[", r, "], ", c, " * page_size] = ", slot,
                      " is outside full_to_swa [0, ", p.full_to_swa_size, ")");
      }
    }
  }

  const int64_t step = p.page.page_size;
  for (int64_t r = 0; r < p.bs; ++r) {
    const int32_t* row_in = p.req_to_token + p.req_pool_indices[r] * p.req_to_token_stride;
    int32_t* row_out = p.page_table + r * p.page_table_stride;
    const int64_t n = live_pages(p, p.cache_seqlens[r]);
    for (int64_t c = 0; c < n; ++c)
      row_out[c] = static_cast<int32_t>(p.page.div(row_in[c * step]));
    if (p.swa_page_table == nullptr) continue;
    int32_t* swa_out = p.swa_page_table + r * p.swa_page_table_stride;
    for (int64_t c = 0; c < n; ++c)
      swa_out[c] = static_cast<int32_t>(p.page.div(p.full_to_swa[swa_index(row_in[c * step])]));
  }
}

}  // namespace sgl_meta
