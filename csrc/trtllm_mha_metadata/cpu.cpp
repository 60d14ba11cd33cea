// update_trtllm_mha_graph_metadata: CPU kernel. Same results as the CUDA
// kernel; hostile device values raise instead of tripping a device assert.
#include <sstream>
#include <stdexcept>

#include "trtllm_mha_metadata/params.h"

namespace sgl_meta {
namespace {

constexpr const char* kOp = "sgl_meta.update_trtllm_mha_graph_metadata";

// "<what>[at] = value is outside [0, bound) (bound_name)"; at < 0: no "[at]".
[[noreturn]] void out_of_range(const char* what, int64_t at, int64_t value,
                               const char* bound_name, int64_t bound) {
  std::ostringstream msg;
  msg << kOp << ": " << what;
  if (at >= 0) msg << "[" << at << "]";
  msg << " = " << value << " is outside [0, " << bound << ") (" << bound_name << ")";
  throw std::runtime_error(msg.str());
}

// swa_mapping[slot] / page_size, or -1 for a negative slot or mapping (the
// documented sentinels). `slot` was range-checked by validate().
int32_t swa_page(const TrtllmMhaMetadataParams& p, int64_t slot) {
  if (slot < 0) return -1;
  const int64_t mapped = p.swa_mapping[slot];
  return mapped < 0 ? -1 : static_cast<int32_t>(p.page.div(mapped));
}

// Every device value that indexes something, checked before anything is
// written: a hostile call raises and leaves all outputs as they were.
void validate(const TrtllmMhaMetadataParams& p) {
  for (int64_t i = 0; i < p.bs; ++i) {
    const int64_t req = p.req_pool_indices[i];
    if (req < 0 || req >= p.pool_size)
      out_of_range("req_pool_indices", i, req, "req_to_token.size(0)", p.pool_size);
    if (p.swa_page_table == nullptr) continue;
    const int32_t* row_in = p.req_to_token + req * p.req_to_token_stride;
    const int64_t cols = columns_to_write(p, i);
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t slot = row_in[c * p.page.page_size];
      if (slot >= p.swa_mapping_size) {
        std::ostringstream what;
        what << "req_to_token[req_pool_indices[" << i << "], " << c << " * page_size]";
        out_of_range(what.str().c_str(), -1, slot, "swa_mapping.numel()",
                     p.swa_mapping_size);
      }
    }
  }
  for (int64_t k = 0; k < p.num_out_tokens; ++k) {
    const int64_t loc = p.out_cache_loc[k];
    if (loc >= p.swa_mapping_size)
      out_of_range("out_cache_loc", k, loc, "swa_mapping.numel()", p.swa_mapping_size);
  }
}

}  // namespace

void update_trtllm_mha_metadata_cpu(const TrtllmMhaMetadataParams& p) {
  // skip_page_table reads no index (the CUDA launch is the scan block alone),
  // so nothing can be out of range.
  if (!p.skip_page_table) validate(p);
  // cache_seqlens and the cumulative sums (int32 wrap-around, like the eager
  // int32 cast of torch.cumsum).
  uint32_t k_sum = 0, q_sum = 0;
  p.cu_seqlens_k[0] = 0;
  if (p.q_mode != kQModeNone) p.cu_seqlens_q[0] = 0;
  for (int64_t i = 0; i < p.bs; ++i) {
    const int32_t len = cache_seqlen(p, i);
    p.cache_seqlens[i] = len;
    k_sum += static_cast<uint32_t>(len);
    p.cu_seqlens_k[i + 1] = static_cast<int32_t>(k_sum);
    if (p.q_mode == kQModeCumsum) {
      q_sum += static_cast<uint32_t>(p.qlens[i]);
      p.cu_seqlens_q[i + 1] = static_cast<int32_t>(q_sum);
    } else if (p.q_mode == kQModeStrided) {
      p.cu_seqlens_q[i + 1] = strided_q(p, i + 1);
    }
  }

  if (p.skip_page_table) return;

  // Page tables: one gathered slot per page boundary.
  for (int64_t i = 0; i < p.bs; ++i) {
    const int32_t* row_in = p.req_to_token + p.req_pool_indices[i] * p.req_to_token_stride;
    int32_t* row_out = p.page_table + i * p.page_table_stride;
    int32_t* swa_out =
        p.swa_page_table ? p.swa_page_table + i * p.swa_page_table_stride : nullptr;
    const int64_t cols = columns_to_write(p, i);
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t slot = row_in[c * p.page.page_size];
      row_out[c] = static_cast<int32_t>(p.page.div(slot));
      if (swa_out) swa_out[c] = swa_page(p, slot);
    }
  }

  // SWA out-cache-loc: translate the real prefix, zero the padded tail.
  for (int64_t k = 0; k < p.swa_out_len; ++k) {
    int64_t v = 0;
    if (k < p.num_out_tokens) {
      const int64_t loc = p.out_cache_loc[k];
      v = loc < 0 ? -1 : p.swa_mapping[loc];
    }
    p.swa_out_cache_loc[k] = v;
  }
}

}  // namespace sgl_meta
