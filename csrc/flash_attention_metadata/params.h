// update_flash_attention_metadata / flash_attention_swa_spec_page_table /
// flash_attention_verify_expand / flash_attention_draft_decode_topk: the argument
// bundles shared by the CPU and CUDA kernels. Plain data (raw pointers,
// element strides, scalars): the torch binding fills them after its checks,
// the kernels never see a torch type.
//
// update_flash_attention_metadata reads one set of inputs and writes K >= 1
// destination sets (FaDest), set s with its own seq_len_delta[s]. For row
// i < bs, len_s(i) = seq_lens[i] + seq_len_delta[s]:
//
//   cache_seqlens[s][i]     = len_s(i)
//   cu_seqlens_k[s][0]      = 0, [i + 1] = len_s(0) + ... + len_s(i)  (when given)
//   cu_seqlens_q[0]         = 0, [i + 1] = extend_seq_lens[0] + ... (when given)
//   for c < n_s(i) = min(ceil(len_s(i) / page_size), max_seq_pages), in the sets
//   that have a page table, with
//   slot = req_to_token[req_pool_indices[i], c * page_size]:
//     page_table[s][i, c]     = full_entry(slot)
//     swa_page_table[s][i, c] = swa_entry(slot)
//   zero_tail: both tables 0 for n_s(i) <= c < max_seq_pages
//   swa_out_cache_loc[k]    = out_cache_loc[k] < 0 ? -1
//                             : full_to_swa_index_mapping[out_cache_loc[k]]
//
//   vpage(slot)      = max(floor(slot / page_size), 0)
//   full_entry(slot) = full_v2p ? max(full_v2p[vpage], 0) : floor(slot / page_size)
//   swa_entry(slot)  = swa_v2p  ? max(swa_v2p[vpage], 0)
//                    : slot < 0 ? -1 : floor(mapping[slot] / page_size)
//
// flash_attention_verify_expand (target verify, top-k > 1: each draft token's
// row over the draft tokens it attends to), n = num_draft_tokens, for row
// r < bs * n, b = r / n, s = seq_lens[b] and j, k < n:
//   base(r)           = sum over rows r' < r of (seq_lens[r' / n] + n)
//   m_j               = custom_mask[r < mask_rows ? base(r) + s + j : 0]
//   order             = the j with m_j, then the others, each ascending
//   page_table[r, k]  = req_to_token[req_pool_indices[b], s + order[k]]
//   cache_seqlens[r]  = m_0 + ... + m_{n-1}
//   cu_seqlens_k[0]   = 0, [r + 1] = cache_seqlens[0] + ... + cache_seqlens[r]
//
// flash_attention_draft_decode_topk (EAGLE draft decode, top-k > 1: each step's
// prefix half and draft half), P = page_size, K sets, set s with d = decode_length[s]:
//   for request b < bs: L = seq_lens[b], last(b) = L mod P, len(b) = L - last(b)
//     cache_seqlens[s][b] = len(b)
//     page_table[s][b, c] = floor(req_to_token[req_pool_indices[b], c * P] / P)
//                           for c < min(len(b) / P, max_seq_pages)
//   for row r < bs * topk, b = r / topk, x_j = out_cache_loc[r * num_steps + j], j < d:
//     P == 1: expand_page_table[s][r, j] = x_j
//     P > 1:  q_j = floor(x_j / P), pos_0 = 0, pos_j = pos_{j-1} + (q_j != q_{j-1})
//             expand_page_table[s][r, pos_j] = q_j
//     expand_cache_seqlens[s][r] = d + last(b)   (when given)
//
// flash_attention_swa_spec_page_table, for row m < rows, a = m / repeat,
// la = seq_len_a[a], lb = seq_len_b[m] and column n < min(la + lb, width):
//   dst[m, n] = n < la ? (n < a_width ? A[a, n] : 0)
//                      : (n - la < b_width ? B[m, n - la] : 0)
#pragma once

#include <cstdint>

#include "common/index_array.h"

namespace sgl_meta {

// Destination sets one CUDA launch writes; more take several launches.
constexpr int kFaMaxSetsPerLaunch = 8;

struct FaInputs {
  IndexArray req_pool_indices;  // [>= bs]
  IndexArray seq_lens;          // [>= bs]
  IndexArray extend_seq_lens;   // [>= bs], or absent (no cu_seqlens_q)
  const int32_t* req_to_token = nullptr;  // [pool_size, ctx], rows by stride
  int64_t req_to_token_stride = 0;
  int64_t pool_size = 0;
  IndexArray swa_mapping;  // full_to_swa_index_mapping: token slot -> SWA slot
  int64_t swa_mapping_size = 0;
  IndexArray full_v2p;  // virtual page -> physical page (unified pool)
  int64_t full_v2p_size = 0;
  IndexArray swa_v2p;
  int64_t swa_v2p_size = 0;
  IndexArray out_cache_loc;  // [>= swa_out_len]
  int32_t* cu_seqlens_q = nullptr;        // [>= bs + 1], or null
  int64_t* swa_out_cache_loc = nullptr;   // [swa_out_len], or null
  int64_t swa_out_len = 0;

  int64_t bs = 0;
  int64_t max_seq_pages = 0;
  PageDivisor page;
  bool tables = false;     // page tables are written (not skip_page_table)
  bool swa_table = false;  // every set has a swa_page_table (when tables)
  bool zero_tail = false;
  bool multi = false;      // K > 1: errors name the set
};

struct FaDest {
  int32_t* cache_seqlens = nullptr;   // [>= bs]
  int32_t* cu_seqlens_k = nullptr;    // [>= bs + 1], or null (not written)
  int32_t* page_table = nullptr;      // [>= bs, >= max_seq_pages], or null (lengths only)
  int32_t* swa_page_table = nullptr;  // like page_table, or null
  int64_t page_table_stride = 0;
  int64_t swa_page_table_stride = 0;
  int32_t delta = 0;  // seq_len_delta of the set (host-checked to fit int32)
};

// Lengths (common/index_array.h): seq_lens[i], extend_seq_lens[i] and every
// len_s(i) lie in [0, 2**31 - 1], and so does every running sum.
// len_s(i) mod 2**32 (seq_lens is a device value: a signed add of a hostile
// one would be undefined behaviour); the value itself once it fits.
SGL_HD uint64_t fa_len(int64_t seq, int32_t delta) {
  return static_cast<uint64_t>(seq) + static_cast<uint64_t>(static_cast<int64_t>(delta));
}

// Whether seq + delta lies in [0, 2**31 - 1] for a seq that passed
// length_fits (the true sum is then far from wrapping into that range).
SGL_HD bool fa_len_fits(int64_t seq, int32_t delta) { return fa_len(seq, delta) <= INT32_MAX; }

// log2(page_size) as the divisions below use it: the op takes power-of-two page
// sizes only (the binding checks), so a division by the page size is a shift,
// with no branch on the divisor's kind; capped at 31 (page sizes past 2**31
// give -1 or 0, as floor division of an int32 does).
SGL_HD int fa_shift(int shift) { return shift < 31 ? shift : 31; }

// floor(v / page_size) of an int32 value, `shift` = log2(page_size).
SGL_HD int32_t fa_page(int32_t v, int shift) { return v >> fa_shift(shift); }

// Page-table columns of a row whose length is `len` (int32, possibly hostile:
// a negative one writes nothing).
template <class In>
SGL_HD int64_t fa_columns(const In& in, int32_t len) {
  return len <= 0 ? 0 : min_i64(int64_t{fa_page(len - 1, in.page.shift)} + 1, in.max_seq_pages);
}

SGL_HD int64_t fa_vpage(int32_t slot, int shift) { return slot < 0 ? 0 : fa_page(slot, shift); }
template <class In>
SGL_HD int64_t fa_vpage(const In& in, int32_t slot) {
  return fa_vpage(slot, in.page.shift);
}

// Translation of the looked-up values (the lookups themselves are the
// kernels': bounds checks and load paths differ).
SGL_HD int64_t fa_translated(int64_t v2p_entry) { return max_i64(v2p_entry, 0); }

template <class In>
SGL_HD int64_t fa_swa_from_mapping(const In& in, int32_t slot, int64_t mapped) {
  return slot < 0 ? -1 : in.page.div(mapped);
}

void flash_attention_metadata_cpu(const FaInputs& in, const FaDest* sets, int num_sets);
// One launch for up to kFaMaxSetsPerLaunch sets (the first launch also writes
// cu_seqlens_q and swa_out_cache_loc). nullptr on success, else the error.
const char* flash_attention_metadata_cuda(const FaInputs& in, const FaDest* sets, int num_sets,
                                          void* stream);

struct FaSwaSpecParams {
  int32_t* dst = nullptr;  // [>= rows, width], rows by dst_stride
  int64_t dst_stride = 0;
  int64_t width = 0;       // columns that may be written: min(dst.size(1), a_width + b_width)
  const int32_t* a = nullptr;  // [>= rows / repeat, a_width]
  int64_t a_stride = 0;
  int64_t a_width = 0;
  const int32_t* b = nullptr;  // [>= rows, b_width]
  int64_t b_stride = 0;
  int64_t b_width = 0;
  IndexArray seq_len_a;  // [rows / repeat]
  IndexArray seq_len_b;  // [rows]
  int64_t rows = 0;
  int64_t repeat = 1;
};

// dst[m, n] for n < the row's written width (see the top of this file).
SGL_HD int32_t fa_spec_value(const FaSwaSpecParams& p, int64_t m, int64_t n, int64_t la) {
  if (n < la) return n < p.a_width ? p.a[(m / p.repeat) * p.a_stride + n] : 0;
  const int64_t nb = n - la;
  return nb < p.b_width ? p.b[m * p.b_stride + nb] : 0;
}

void flash_attention_swa_spec_page_table_cpu(const FaSwaSpecParams& p);
const char* flash_attention_swa_spec_page_table_cuda(const FaSwaSpecParams& p, void* stream);

// A mask row is one bit per draft token.
constexpr int64_t kFaMaxDraftTokens = 64;

struct FaVerifyExpandParams {
  int32_t* page_table = nullptr;  // [>= rows, >= n], rows by page_table_stride
  int64_t page_table_stride = 0;
  int32_t* cache_seqlens = nullptr;  // [>= rows]
  int32_t* cu_seqlens_k = nullptr;   // [>= rows + 1]
  const bool* custom_mask = nullptr;
  int64_t mask_size = 0;
  const int32_t* req_to_token = nullptr;  // [pool_size, ctx], rows by stride
  int64_t req_to_token_stride = 0;
  int64_t pool_size = 0;
  int64_t ctx = 0;
  IndexArray req_pool_indices;  // [>= bs]
  IndexArray seq_lens;          // [>= bs]
  int64_t bs = 0;
  int64_t n = 0;          // num_draft_tokens, in [1, kFaMaxDraftTokens]
  int64_t mask_rows = 0;  // rows below it read their own mask entries
};

// The custom_mask index of m_j in row r (base = base(r), seq = s).
SGL_HD int64_t fa_mask_index(const FaVerifyExpandParams& p, int64_t r, int64_t base, int64_t seq,
                             int64_t j) {
  return r < p.mask_rows ? base + seq + j : 0;
}

void flash_attention_verify_expand_cpu(const FaVerifyExpandParams& p);
const char* flash_attention_verify_expand_cuda(const FaVerifyExpandParams& p, void* stream);

// Draft steps one call writes (one launch); SGLang has speculative_num_steps - 1.
constexpr int kFaMaxDraftSets = 16;
// Draft slots a row reads (out_cache_loc entries per draft token branch).
constexpr int64_t kFaMaxDraftSteps = 64;

struct FaDraftSet {
  int32_t* cache_seqlens = nullptr;         // [>= bs]
  int32_t* page_table = nullptr;            // [>= bs, >= max_seq_pages]
  int32_t* expand_cache_seqlens = nullptr;  // [>= bs * topk], or null (not written)
  int32_t* expand_page_table = nullptr;     // [>= bs * topk, >= decode_length]
  int64_t page_table_stride = 0;
  int64_t expand_page_table_stride = 0;
  int32_t decode_length = 0;  // in [1, num_steps]
};

struct FaDraftTopkParams {
  const int32_t* req_to_token = nullptr;  // [pool_size, ctx], rows by stride
  int64_t req_to_token_stride = 0;
  int64_t pool_size = 0;
  IndexArray req_pool_indices;  // [>= bs]
  IndexArray seq_lens;          // [>= bs]
  IndexArray out_cache_loc;     // [>= bs * topk * num_steps]
  int64_t bs = 0;
  int64_t topk = 0;
  int64_t num_steps = 0;  // in [1, kFaMaxDraftSteps]
  int32_t max_decode_length = 0;
  int64_t max_seq_pages = 0;
  PageDivisor page;
  int num_sets = 0;
  FaDraftSet set[kFaMaxDraftSets];
};

// last(b) = L mod P of a length L that passed length_fits.
SGL_HD int32_t fa_last_page_len(int64_t seq, int shift) {
  return static_cast<int32_t>(seq & ((int64_t{1} << fa_shift(shift)) - 1));
}

// Prefix-half page-table columns of request b: len(b) / P, capped.
SGL_HD int64_t fa_draft_columns(const FaDraftTopkParams& p, int64_t seq) {
  return min_i64((seq - fa_last_page_len(seq, p.page.shift)) >> fa_shift(p.page.shift), p.max_seq_pages);
}

void flash_attention_draft_decode_topk_cpu(const FaDraftTopkParams& p);
const char* flash_attention_draft_decode_topk_cuda(const FaDraftTopkParams& p, void* stream);

}  // namespace sgl_meta
