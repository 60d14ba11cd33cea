// build_trtllm_mha_page_table: CPU kernel. Same results as the CUDA kernel;
// an out-of-range request index raises instead of tripping a device assert.
#include <sstream>
#include <stdexcept>

#include "trtllm_mha_page_table/params.h"

namespace sgl_meta {

void build_trtllm_mha_page_table_cpu(const TrtllmMhaPageTableParams& p) {
  // Every row's request index is checked before anything is written, whatever
  // the row's length (the CUDA kernel checks every row too), so a bad call
  // leaves the tables untouched here.
  for (int64_t r = 0; r < p.bs; ++r) {
    const int64_t req = p.req_pool_indices[r];
    if (req < 0 || req >= p.pool_size) {
      std::ostringstream msg;
      msg << "sgl_meta.build_trtllm_mha_page_table: req_pool_indices[" << r
          << "] = " << req << " is outside [0, req_to_token.size(0) = " << p.pool_size
          << ")";
      throw std::runtime_error(msg.str());
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
    const int64_t last = p.full_to_swa_size - 1;
    for (int64_t c = 0; c < n; ++c) {
      // Clamped lookup: -1 sentinels and slots past the mapping read an end
      // entry instead of failing (the seed's behaviour, kept by docs/operators/trtllm_mha_metadata.md).
      const int64_t slot = min_i64(max_i64(row_in[c * step], 0), last);
      swa_out[c] = static_cast<int32_t>(p.page.div(p.full_to_swa[slot]));
    }
  }
}

}  // namespace sgl_meta
