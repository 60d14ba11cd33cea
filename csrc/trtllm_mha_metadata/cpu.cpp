// update_trtllm_mha_graph_metadata(_multi): CPU kernel. Same results as the
// CUDA kernel; hostile device values raise (before anything is written)
// instead of tripping a device assert.
#include <algorithm>
#include <sstream>
#include <stdexcept>
#include <string>

#include "trtllm_mha_metadata/params.h"

namespace sgl_meta {
namespace {

const char* op_name(const TrtllmMhaInputs& in) {
  return in.multi ? "sgl_meta.update_trtllm_mha_graph_metadata_multi"
                  : "sgl_meta.update_trtllm_mha_graph_metadata";
}

// "<what> = value is outside [0, bound) (bound_name)".
[[noreturn]] void out_of_range(const TrtllmMhaInputs& in, const std::string& what,
                               int64_t value, const char* bound_name, int64_t bound) {
  std::ostringstream msg;
  msg << op_name(in) << ": " << what << " = " << value << " is outside [0, " << bound << ") ("
      << bound_name << ")";
  throw std::runtime_error(msg.str());
}

std::string gathered_slot(int64_t row, int64_t col) {
  std::ostringstream what;
  what << "req_to_token[req_pool_indices[" << row << "], " << col << " * page_size]";
  return what.str();
}

std::string indexed(const char* name, int64_t i) {
  return std::string(name) + "[" + std::to_string(i) + "]";
}

// Columns row i gathers: the widest live prefix over the sets.
int64_t gathered_columns(const TrtllmMhaInputs& in, const TrtllmMhaDest* sets, int num_sets,
                         uint32_t base) {
  int64_t cols = 0;
  for (int s = 0; s < num_sets; ++s)
    cols = std::max(cols, columns_to_write(in, set_seqlen(base, sets[s].seqlen_offset)));
  return cols;
}

// The SWA table entry of a slot: through swa_v2p, or swa_mapping[slot] /
// page_size with -1 for a negative slot or mapping (the sentinels).
int64_t swa_entry(const TrtllmMhaInputs& in, int32_t slot) {
  if (in.swa_v2p != nullptr) return std::max<int64_t>(in.swa_v2p[virtual_page(in, slot)], 0);
  if (slot < 0) return -1;
  const int64_t mapped = in.swa_mapping[slot];
  return mapped < 0 ? -1 : in.page.div(mapped);
}

int64_t full_entry(const TrtllmMhaInputs& in, int32_t slot) {
  if (in.v2p != nullptr) return std::max<int64_t>(in.v2p[virtual_page(in, slot)], 0);
  return in.page.div32(slot);
}

// Every device value that indexes something, checked before anything is
// written: a hostile call raises and leaves all outputs as they were.
void validate(const TrtllmMhaInputs& in, const TrtllmMhaDest* sets, int num_sets) {
  const bool swa_table = sets[0].swa_page_table != nullptr;
  for (int64_t i = 0; i < in.bs; ++i) {
    const int64_t req = in.req_pool_indices[i];
    if (req < 0 || req >= in.pool_size)
      out_of_range(in, indexed("req_pool_indices", i), req, "req_to_token.size(0)",
                   in.pool_size);
    const bool translated = in.v2p != nullptr || (swa_table && in.swa_v2p != nullptr);
    if (!translated && !swa_table) continue;
    const int32_t* row_in = in.req_to_token + req * in.req_to_token_stride;
    const int64_t cols = gathered_columns(in, sets, num_sets, base_seqlen(in, i));
    for (int64_t c = 0; c < cols; ++c) {
      const int32_t slot = row_in[c * in.page.page_size];
      const int64_t vpage = virtual_page(in, slot);
      if (in.v2p != nullptr && vpage >= in.v2p_size)
        out_of_range(in, "virtual page " + gathered_slot(i, c) + " // page_size", vpage,
                     "v2p.numel()", in.v2p_size);
      if (!swa_table) continue;
      if (in.swa_v2p != nullptr) {
        if (vpage >= in.swa_v2p_size)
          out_of_range(in, "virtual page " + gathered_slot(i, c) + " // page_size", vpage,
                       "swa_v2p.numel()", in.swa_v2p_size);
      } else if (slot >= in.swa_mapping_size) {
        out_of_range(in, gathered_slot(i, c), slot, "swa_mapping.numel()",
                     in.swa_mapping_size);
      }
    }
  }
  int64_t out_len = 0;
  for (int s = 0; s < num_sets; ++s)
    if (sets[s].swa_out_cache_loc != nullptr) out_len = std::max(out_len, sets[s].swa_out_len);
  const int64_t read = std::min(out_len, in.out_cache_loc ? in.out_cache_loc_size : 0);
  for (int64_t k = 0; k < read; ++k) {
    const int64_t loc = in.out_cache_loc[k];
    if (loc >= in.swa_mapping_size)
      out_of_range(in, indexed("out_cache_loc", k), loc, "swa_mapping.numel()",
                   in.swa_mapping_size);
  }
}

}  // namespace

void update_trtllm_mha_metadata_cpu(const TrtllmMhaInputs& in, const TrtllmMhaDest* sets,
                                    int num_sets) {
  // skip_page_table reads no index (the CUDA launch is the scan alone), so
  // nothing can be out of range.
  if (!in.skip_page_table) validate(in, sets, num_sets);

  // cache_seqlens and the cumulative sums (int32 wrap-around, like the eager
  // int32 cast of torch.cumsum).
  for (int s = 0; s < num_sets; ++s) {
    const TrtllmMhaDest& d = sets[s];
    uint32_t k_sum = 0, q_sum = 0;
    d.cu_seqlens_k[0] = 0;
    if (in.q_mode != kQModeNone) d.cu_seqlens_q[0] = 0;
    for (int64_t i = 0; i < in.bs; ++i) {
      const int32_t len = set_seqlen(base_seqlen(in, i), d.seqlen_offset);
      d.cache_seqlens[i] = len;
      k_sum += static_cast<uint32_t>(len);
      d.cu_seqlens_k[i + 1] = static_cast<int32_t>(k_sum);
      if (in.q_mode == kQModeCumsum) {
        q_sum += static_cast<uint32_t>(in.qlens[i]);
        d.cu_seqlens_q[i + 1] = static_cast<int32_t>(q_sum);
      } else if (in.q_mode == kQModeStrided) {
        d.cu_seqlens_q[i + 1] = strided_q(in, i + 1);
      }
    }
  }
  if (in.skip_page_table) return;

  // Page tables: one gathered slot per page boundary, written to every set
  // whose live prefix covers it.
  const bool swa_table = sets[0].swa_page_table != nullptr;
  for (int64_t i = 0; i < in.bs; ++i) {
    const int32_t* row_in = in.req_to_token + in.req_pool_indices[i] * in.req_to_token_stride;
    const uint32_t base = base_seqlen(in, i);
    const int64_t cols = gathered_columns(in, sets, num_sets, base);
    for (int64_t c = 0; c < cols; ++c) {
      const int32_t slot = row_in[c * in.page.page_size];
      const auto full = static_cast<int32_t>(full_entry(in, slot));
      const auto swa = swa_table ? static_cast<int32_t>(swa_entry(in, slot)) : 0;
      for (int s = 0; s < num_sets; ++s) {
        const TrtllmMhaDest& d = sets[s];
        if (c >= columns_to_write(in, set_seqlen(base, d.seqlen_offset))) continue;
        d.page_table[i * d.page_table_stride + c] = full;
        if (swa_table) d.swa_page_table[i * d.swa_page_table_stride + c] = swa;
      }
    }
  }

  // SWA out-cache-loc: translate the real prefix, zero the padded tail.
  for (int s = 0; s < num_sets; ++s) {
    const TrtllmMhaDest& d = sets[s];
    if (d.swa_out_cache_loc == nullptr) continue;
    const int64_t n = std::min(d.swa_out_len, in.out_cache_loc ? in.out_cache_loc_size : 0);
    for (int64_t k = 0; k < d.swa_out_len; ++k) {
      int64_t v = 0;
      if (k < n) {
        const int64_t loc = in.out_cache_loc[k];
        v = loc < 0 ? -1 : in.swa_mapping[loc];
      }
      d.swa_out_cache_loc[k] = v;
    }
  }
}

}  // namespace sgl_meta
