// update_flash_attention_metadata / flash_attention_swa_spec_page_table /
// flash_attention_verify_expand / flash_attention_draft_decode_topk: CPU
// kernels. Same results as the CUDA kernels; every hostile device value (a
// request index outside req_to_token, a slot outside the SWA mapping, a
// virtual page outside a v2p table, an out_cache_loc entry outside the
// mapping, a length outside [0, 2**31 - 1]) raises std::runtime_error before
// anything is written, where CUDA trips a device-side assert.
#include <algorithm>
#include <string>
#include <vector>

#include "common/errors.h"
#include "common/row_checks.h"
#include "flash_attention_metadata/params.h"

namespace sgl_meta {
namespace {

constexpr const char* kOp = "update_flash_attention_metadata";
constexpr const char* kSpecOp = "flash_attention_swa_spec_page_table";
constexpr const char* kExpandOp = "flash_attention_verify_expand";
constexpr const char* kDraftOp = "flash_attention_draft_decode_topk";

// The name of set s's argument: bare for a one-set call.
std::string of_set(const FaInputs& in, const char* name, int s) {
  return in.multi ? std::string(name) + "[" + std::to_string(s) + "]" : std::string(name);
}

// "<what> = value is negative" / "... does not fit int32 <out>".
[[noreturn]] void bad_length(const std::string& what, int64_t value, const std::string& out) {
  if (value < 0) raise_error(kOp, what, " = ", value, " is negative");
  raise_error(kOp, what, " = ", value, " does not fit int32 ", out);
}

// Every length and running sum, in row order (the CUDA kernel's predicates).
void validate_lengths(const FaInputs& in, const FaDest* sets, int num_sets) {
  std::vector<int64_t> k_sum(num_sets, 0);
  int64_t q_sum = 0;
  for (int64_t i = 0; i < in.bs; ++i) {
    const std::string row = "[" + std::to_string(i) + "]";
    const int64_t seq = in.seq_lens[i];
    if (!length_fits(seq)) bad_length("seq_lens" + row, seq, "cache_seqlens");
    if (in.extend_seq_lens.present()) {
      const int64_t q = in.extend_seq_lens[i];
      if (!length_fits(q)) bad_length("extend_seq_lens" + row, q, "cu_seqlens_q");
      q_sum += q;
      if (q_sum > INT32_MAX)
        bad_length("extend_seq_lens[0.." + std::to_string(i) + "] summed (cu_seqlens_q[" +
                       std::to_string(i + 1) + "])",
                   q_sum, "cu_seqlens_q");
    }
    for (int s = 0; s < num_sets; ++s) {
      const int32_t delta = sets[s].delta;
      if (!fa_len_fits(seq, delta))
        bad_length("seq_lens" + row + " + " + of_set(in, "seq_len_delta", s), seq + delta,
                   of_set(in, "cache_seqlens", s));
      k_sum[s] += seq + delta;
      if (sets[s].cu_seqlens_k != nullptr && k_sum[s] > INT32_MAX)
        bad_length("cache_seqlens" + (in.multi ? "[" + std::to_string(s) + "]" : std::string()) +
                       "[0.." + std::to_string(i) + "] summed (" +
                       of_set(in, "cu_seqlens_k", s) + "[" + std::to_string(i + 1) + "])",
                   k_sum[s], of_set(in, "cu_seqlens_k", s));
    }
  }
}

std::string gathered_slot(int64_t row, int64_t col) {
  return "req_to_token[req_pool_indices[" + std::to_string(row) + "], " + std::to_string(col) +
         " * page_size]";
}

// Columns row i gathers: the widest live prefix over the sets with a table.
int64_t gathered_columns(const FaInputs& in, const FaDest* sets, int num_sets, int64_t seq) {
  int64_t cols = 0;
  for (int s = 0; s < num_sets; ++s)
    if (sets[s].page_table != nullptr)
      cols = std::max(cols, fa_columns(in, static_cast<int32_t>(fa_len(seq, sets[s].delta))));
  return cols;
}

// Every device value that indexes something, checked before anything is written.
void validate_indices(const FaInputs& in, const FaDest* sets, int num_sets) {
  for (int64_t i = 0; in.tables && i < in.bs; ++i) {
    const int64_t req = in.req_pool_indices[i];
    if (req < 0 || req >= in.pool_size)
      raise_error(kOp, "req_pool_indices[", i, "] = ", req, " is outside [0, ", in.pool_size,
                  ") (req_to_token.size(0))");
    const int32_t* row_in = in.req_to_token + req * in.req_to_token_stride;
    const int64_t cols = gathered_columns(in, sets, num_sets, in.seq_lens[i]);
    for (int64_t c = 0; c < cols; ++c) {
      const int32_t slot = row_in[c * in.page.page_size];
      const int64_t vpage = fa_vpage(in, slot);
      if (in.full_v2p.present() && vpage >= in.full_v2p_size)
        raise_error(kOp, "virtual page ", gathered_slot(i, c), " // page_size = ", vpage, " is outside [0, ",
                    in.full_v2p_size, ") (full_v2p.numel())");
      if (!in.swa_table) continue;
      if (in.swa_v2p.present()) {
        if (vpage >= in.swa_v2p_size)
          raise_error(kOp, "virtual page ", gathered_slot(i, c), " // page_size = ", vpage,
                      " is outside [0, ", in.swa_v2p_size, ") (swa_v2p.numel())");
      } else if (slot >= in.swa_mapping_size) {
        raise_error(kOp, gathered_slot(i, c), " = ", slot, " is outside [0, ", in.swa_mapping_size,
                    ") (full_to_swa_index_mapping.numel())");
      }
    }
  }
  for (int64_t k = 0; k < in.swa_out_len; ++k) {
    const int64_t loc = in.out_cache_loc[k];
    if (loc >= in.swa_mapping_size)
      raise_error(kOp, "out_cache_loc[", k, "] = ", loc, " is outside [0, ", in.swa_mapping_size,
                  ") (full_to_swa_index_mapping.numel())");
  }
}

int64_t full_entry(const FaInputs& in, int32_t slot) {
  if (in.full_v2p.present()) return fa_translated(in.full_v2p[fa_vpage(in, slot)]);
  return fa_page(slot, in.page.shift);
}

int64_t swa_entry(const FaInputs& in, int32_t slot) {
  if (in.swa_v2p.present()) return fa_translated(in.swa_v2p[fa_vpage(in, slot)]);
  return fa_swa_from_mapping(in, slot, slot < 0 ? -1 : in.swa_mapping[slot]);
}

}  // namespace

void flash_attention_metadata_cpu(const FaInputs& in, const FaDest* sets, int num_sets) {
  validate_lengths(in, sets, num_sets);
  validate_indices(in, sets, num_sets);

  for (int s = 0; s < num_sets; ++s) {
    const FaDest& d = sets[s];
    uint32_t sum = 0;
    if (d.cu_seqlens_k != nullptr) d.cu_seqlens_k[0] = 0;
    for (int64_t i = 0; i < in.bs; ++i) {
      const auto len = static_cast<int32_t>(fa_len(in.seq_lens[i], d.delta));
      d.cache_seqlens[i] = len;
      sum += static_cast<uint32_t>(len);
      if (d.cu_seqlens_k != nullptr) d.cu_seqlens_k[i + 1] = static_cast<int32_t>(sum);
    }
  }
  if (in.cu_seqlens_q != nullptr) {
    uint32_t sum = 0;
    in.cu_seqlens_q[0] = 0;
    for (int64_t i = 0; i < in.bs; ++i) {
      sum += static_cast<uint32_t>(in.extend_seq_lens[i]);
      in.cu_seqlens_q[i + 1] = static_cast<int32_t>(sum);
    }
  }

  for (int64_t i = 0; in.tables && i < in.bs; ++i) {
    const int64_t seq = in.seq_lens[i];
    const int32_t* row_in = in.req_to_token + in.req_pool_indices[i] * in.req_to_token_stride;
    const int64_t cols = gathered_columns(in, sets, num_sets, seq);
    const int64_t end = in.zero_tail ? in.max_seq_pages : cols;
    for (int64_t c = 0; c < end; ++c) {
      const bool live = c < cols;
      const int32_t slot = live ? row_in[c * in.page.page_size] : 0;
      const auto full = live ? static_cast<int32_t>(full_entry(in, slot)) : 0;
      const auto swa = live && in.swa_table ? static_cast<int32_t>(swa_entry(in, slot)) : 0;
      for (int s = 0; s < num_sets; ++s) {
        const FaDest& d = sets[s];
        if (d.page_table == nullptr) continue;
        const bool mine = c < fa_columns(in, static_cast<int32_t>(fa_len(seq, d.delta)));
        if (!mine && !in.zero_tail) continue;
        d.page_table[i * d.page_table_stride + c] = mine ? full : 0;
        if (in.swa_table) d.swa_page_table[i * d.swa_page_table_stride + c] = mine ? swa : 0;
      }
    }
  }

  for (int64_t k = 0; k < in.swa_out_len; ++k) {
    const int64_t loc = in.out_cache_loc[k];
    in.swa_out_cache_loc[k] = loc < 0 ? -1 : in.swa_mapping[loc];
  }
}

void flash_attention_swa_spec_page_table_cpu(const FaSwaSpecParams& p) {
  if (p.width == 0) return;  // nothing to write, nothing read (as on CUDA)
  const int64_t bs = p.rows / p.repeat;
  for (int64_t a = 0; a < bs; ++a) {
    check_length(kSpecOp, "seq_len_a", a, p.seq_len_a[a]);
  }
  for (int64_t m = 0; m < p.rows; ++m) {
    check_length(kSpecOp, "seq_len_b", m, p.seq_len_b[m]);
  }
  for (int64_t m = 0; m < p.rows; ++m) {
    const int64_t la = p.seq_len_a[m / p.repeat];
    const int64_t n_end = min_i64(la + p.seq_len_b[m], p.width);
    int32_t* out = p.dst + m * p.dst_stride;
    for (int64_t n = 0; n < n_end; ++n) out[n] = fa_spec_value(p, m, n, la);
  }
}

namespace {

// Request b's length (in [0, 2**31 - 1]) and pool row (inside req_to_token), or the error.
template <class P>
int64_t checked_request(const char* op, const P& p, int64_t b) {
  const int64_t seq = p.seq_lens[b];
  check_length(op, "seq_lens", b, seq);
  check_request_index(op, b, p.req_pool_indices[b], p.pool_size);
  return seq;
}

}  // namespace

void flash_attention_verify_expand_cpu(const FaVerifyExpandParams& p) {
  const int64_t rows = p.bs * p.n;
  // Every request and every mask entry first: nothing is written on an error.
  for (int64_t b = 0; b < p.bs; ++b) {
    const int64_t seq = checked_request(kExpandOp, p, b);
    if (seq + p.n > p.ctx)
      raise_error(kExpandOp, "seq_lens[", b, "] + num_draft_tokens = ", seq + p.n,
                  " is past the req_to_token row (req_to_token.size(1) = ", p.ctx, ")");
  }
  int64_t base = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t seq = p.seq_lens[r / p.n];
    const int64_t last = fa_mask_index(p, r, base, seq, p.n - 1);
    if (last >= p.mask_size)
      raise_error(kExpandOp, "custom_mask index ", last, " (row ", r, ") is outside custom_mask [0, ",
                  p.mask_size, ")");
    base += seq + p.n;
  }
  base = 0;
  uint32_t cu = 0;
  if (rows > 0) p.cu_seqlens_k[0] = 0;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / p.n, seq = p.seq_lens[b];
    const int32_t* tokens = p.req_to_token + p.req_pool_indices[b] * p.req_to_token_stride + seq;
    int32_t* out = p.page_table + r * p.page_table_stride;
    uint64_t in = 0;
    for (int64_t j = 0; j < p.n; ++j)
      if (p.custom_mask[fa_mask_index(p, r, base, seq, j)]) in |= uint64_t{1} << j;
    int64_t k = 0;
    for (int pass = 0; pass < 2; ++pass)
      for (int64_t j = 0; j < p.n; ++j)
        if (((in >> j) & 1u) == (pass == 0 ? 1u : 0u)) out[k++] = tokens[j];
    const auto count = static_cast<uint32_t>(__builtin_popcountll(in));
    cu += count;
    p.cache_seqlens[r] = static_cast<int32_t>(count);
    p.cu_seqlens_k[r + 1] = static_cast<int32_t>(cu);
    base += seq + p.n;
  }
}

void flash_attention_draft_decode_topk_cpu(const FaDraftTopkParams& p) {
  const int64_t rows = p.bs * p.topk;
  // Every request and every draft slot first: nothing is written on an error.
  for (int64_t b = 0; b < p.bs; ++b) {
    const int64_t seq = checked_request(kDraftOp, p, b);
    const bool expand_lens = p.set[0].expand_cache_seqlens != nullptr;
    if (expand_lens && fa_last_page_len(seq, p.page.shift) > INT32_MAX - p.max_decode_length)
      raise_error(kDraftOp, "seq_lens[", b,
                  "] mod page_size + decode_length does not fit int32 expand_cache_seqlens");
  }
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < p.max_decode_length; ++j) {
      const int64_t k = r * p.num_steps + j, entry = p.page.div(p.out_cache_loc[k]);
      if (entry < INT32_MIN || entry > INT32_MAX)
        raise_error(kDraftOp, "out_cache_loc[", k, "] = ", p.out_cache_loc[k],
                    " gives an expand_page_table entry outside int32");
    }
  const int shift = p.page.shift;
  for (int64_t b = 0; b < p.bs; ++b) {
    const int64_t seq = p.seq_lens[b];
    const int32_t* tokens = p.req_to_token + p.req_pool_indices[b] * p.req_to_token_stride;
    const int64_t columns = fa_draft_columns(p, seq);
    for (int s = 0; s < p.num_sets; ++s) {
      const FaDraftSet& d = p.set[s];
      d.cache_seqlens[b] = static_cast<int32_t>(seq - fa_last_page_len(seq, shift));
      int32_t* out = d.page_table + b * d.page_table_stride;
      for (int64_t c = 0; c < columns; ++c) out[c] = fa_page(tokens[c << fa_shift(shift)], shift);
    }
  }
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t last = fa_last_page_len(p.seq_lens[r / p.topk], shift);
    for (int s = 0; s < p.num_sets; ++s) {
      const FaDraftSet& d = p.set[s];
      int32_t* out = d.expand_page_table + r * d.expand_page_table_stride;
      int64_t pos = 0, prev = 0;
      for (int64_t j = 0; j < d.decode_length; ++j) {
        const int64_t entry = p.page.div(p.out_cache_loc[r * p.num_steps + j]);
        if (p.page.page_size > 1 && j > 0 && entry != prev) ++pos;
        out[p.page.page_size > 1 ? pos : j] = static_cast<int32_t>(entry);
        prev = entry;
      }
      if (d.expand_cache_seqlens != nullptr) d.expand_cache_seqlens[r] = d.decode_length + last;
    }
  }
}

}  // namespace sgl_meta
