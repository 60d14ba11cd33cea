// update_trtllm_mha_graph_metadata(_multi): CPU kernel. Same results as the
// CUDA kernel; hostile device values and lengths raise (before anything is
// written) instead of tripping a device assert.
#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "common/errors.h"
#include "trtllm_mha_metadata/params.h"

namespace sgl_meta {
namespace {

const char* op_name(const TrtllmMhaInputs& in) {
  return in.multi ? "update_trtllm_mha_graph_metadata_multi" : "update_trtllm_mha_graph_metadata";
}

// "<what> = value is outside [0, bound) (bound_name)".
[[noreturn]] void out_of_range(const TrtllmMhaInputs& in, const std::string& what,
                               int64_t value, const char* bound_name, int64_t bound) {
  raise_error(op_name(in), what, " = ", value, " is outside [0, ", bound, ") (", bound_name, ")");
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
                         uint64_t base) {
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

// A length that breaks the contract of params.h: "<what> = <value> is
// negative" or "... does not fit int32 <out>".
[[noreturn]] void bad_length(const TrtllmMhaInputs& in, const std::string& what,
                             const std::string& value, bool negative, const std::string& out) {
  if (negative) raise_error(op_name(in), what, " = ", value, " is negative");
  raise_error(op_name(in), what, " = ", value, " does not fit int32 ", out);
}

// The name of set s's scalar or output: `name` for the single op, name[s] for
// the multi op (whose arguments are lists).
std::string of_set(const TrtllmMhaInputs& in, const char* name, int s) {
  return in.multi ? indexed(name, s) : std::string(name);
}

// "<terms>[0..i] summed (<sum>[i + 1])", of set s (-1: not per set).
std::string summed(const TrtllmMhaInputs& in, const char* terms, const char* sum, int s,
                   int64_t i) {
  const std::string t = s < 0 ? std::string(terms) : of_set(in, terms, s);
  const std::string u = s < 0 ? std::string(sum) : of_set(in, sum, s);
  return t + "[0.." + std::to_string(i) + "] summed (" + u + "[" + std::to_string(i + 1) + "])";
}

// Every length and running sum, in row order (the messages give exact values,
// the decisions are the CUDA kernel's predicates: the same inputs fail).
void validate_lengths(const TrtllmMhaInputs& in, const TrtllmMhaDest* sets, int num_sets) {
  std::vector<int64_t> k_sum(num_sets, 0);
  int64_t q_sum = 0;
  for (int64_t i = 0; i < in.bs; ++i) {
    const int64_t seq = in.seq_lens[i];
    if (!length_fits(seq))
      bad_length(in, indexed("seq_lens", i), std::to_string(seq), seq < 0, "cache_seqlens");
    if (in.q_mode == kQModeCumsum) {
      const int64_t q = in.qlens[i];
      if (!length_fits(q)) bad_length(in, indexed("qlens", i), std::to_string(q), q < 0, "cu_seqlens_q");
      q_sum += q;
      if (q_sum > INT32_MAX)
        bad_length(in, summed(in, "qlens", "cu_seqlens_q", -1, i), std::to_string(q_sum), false,
                   "cu_seqlens_q");
    }
    const int64_t row_off = in.seqlen_offsets.present() ? in.seqlen_offsets[i] : 0;
    const uint64_t base = base_seqlen(in, i);
    for (int s = 0; s < num_sets; ++s) {
      const int32_t off = sets[s].seqlen_offset;
      if (set_seqlen_fits(base, off)) {
        k_sum[s] += set_seqlen(base, off);
        if (k_sum[s] > INT32_MAX)
          bad_length(in, summed(in, "cache_seqlens", "cu_seqlens_k", s, i),
                     std::to_string(k_sum[s]), false, of_set(in, "cu_seqlens_k", s));
        continue;
      }
      std::string what = indexed("seq_lens", i);
      if (in.seqlen_offsets.present()) what += " + " + indexed("seqlen_offsets", i);
      what += " + " + of_set(in, "seqlen_offset", s);
      // seq + off fits int64 (seq passed length_fits); adding the per-row
      // offset may not: then the terms are given instead of the sum.
      int64_t len;
      const bool exact = !__builtin_add_overflow(seq + off, row_off, &len);
      const std::string value =
          exact ? std::to_string(len)
                : std::to_string(seq) + " + " + std::to_string(row_off) + " + " + std::to_string(off);
      bad_length(in, what, value, exact ? len < 0 : row_off < 0, of_set(in, "cache_seqlens", s));
    }
  }
}

}  // namespace

void update_trtllm_mha_metadata_cpu(const TrtllmMhaInputs& in, const TrtllmMhaDest* sets,
                                    int num_sets) {
  validate_lengths(in, sets, num_sets);
  // skip_page_table reads no index (the CUDA launch is the scan alone), so
  // nothing can be out of range.
  if (!in.skip_page_table) validate(in, sets, num_sets);

  // cache_seqlens and the cumulative sums (every value fits int32: checked).
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
    const uint64_t base = base_seqlen(in, i);
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
