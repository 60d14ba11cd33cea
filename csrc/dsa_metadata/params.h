// fused_dsa_metadata: the argument bundle shared by the CPU and CUDA kernels
// (plain data, no torch types).
//
// One call computes a DSA (DeepSeek sparse attention) replay's metadata from
// the raw batch (seq_lens, req_pool_indices, req_to_token, extend_seq_lens)
// and writes it into K destination sets. Two index spaces:
//   * requests r < bs: cache_seqlens, cu_seqlens_k, the page-table source rows;
//   * expanded rows e < n (one per query token; n = bs in DECODE, bs * next_n
//     in TARGET_VERIFY, total_len in DRAFT_EXTEND): seqlens_expanded,
//     dsa_cache_seqlens, dsa_cu_seqlens_k and the page-table rows.
// Request r's page-table rows are the expanded rows [row_begin, row_begin +
// row_count) (see request_rows below); each of them receives the same live
// prefix of req_to_token row req_pool_indices[r]: live_len(r) tokens.
#pragma once

#include <cstdint>

#include "common/index_array.h"

namespace sgl_meta {

enum DsaGenMode : int { kDsaGenDecode = 0, kDsaGenTargetVerify = 1, kDsaGenDraftExtend = 2 };

// Destination sets per launch: the pointer table travels in the kernel's
// parameter space (no device buffer, nothing to upload: graph safe), 16 sets of
// 8 pointers + 3 strides = 1.4 KB. Larger K takes several launches, each of
// which recomputes from the (read-only) inputs. A one-set launch passes a
// one-slot table instead (DsaGenArgs<1>).
constexpr int kDsaGenMaxSets = 16;

struct DsaGenSet {
  int32_t* cache_seqlens = nullptr;      // [>= bs]
  int32_t* cu_seqlens_k = nullptr;       // [>= bs + 1]
  int32_t* seqlens_expanded = nullptr;   // [>= n]; null in DECODE
  int32_t* dsa_cache_seqlens = nullptr;  // [>= n]
  int32_t* dsa_cu_seqlens_k = nullptr;   // [>= n + 1]
  int32_t* page_table_1 = nullptr;       // [>= n, >= max_cols] or null
  int32_t* real_page_table = nullptr;    // [>= n, >= ceil(max_cols / ps)] or null
  int32_t* paged_mqa_ctx_lens = nullptr; // [>= bs, >= next_n] or null (TARGET_VERIFY)
  int64_t page_table_1_stride = 0;
  int64_t real_page_table_stride = 0;
  int64_t paged_mqa_ctx_lens_stride = 0;
};

// Everything a launch reads but the destination sets.
struct DsaGenInputs {
  // inputs
  IndexArray seq_lens;                    // [>= bs]
  IndexArray req_pool_indices;            // [>= bs]
  IndexArray extend_seq_lens;             // [>= bs] (DRAFT_EXTEND; [>= 1] static)
  const int32_t* req_to_token = nullptr;  // [pool_size, >= max_cols], rows by stride
  int64_t req_to_token_stride = 0;
  int64_t pool_size = 0;

  // scalars (host-checked: bs, next_n, total_len, topk, page size fit int32)
  int32_t mode = kDsaGenDecode;
  int64_t bs = 0;
  int64_t n = 0;          // expanded rows (see the file comment); 0 when bs == 0
  int64_t next_n = 1;     // TARGET_VERIFY rows per request
  bool static_extend = false;  // DRAFT_EXTEND: every request extends by extend_seq_lens[0]
  int64_t max_cols = 0;   // the column bound (max_len / max_seqlen_k) <= req_to_token width
  int32_t topk = 0;       // dsa_index_topk
  PageDivisor page;       // physical page size; the real table exists for page_size > 1

  // Which page tables this call writes (identical for every set).
  bool page_table_1 = false;
  bool real_page_table = false;  // only when page_size > 1
  // 16-byte loads from req_to_token / stores into every page_table_1 set are
  // safe: 16-byte aligned rows (base and row stride).
  bool vec_load = false;
  bool vec_store = false;

  int32_t num_sets = 0;

  SGL_HD bool writes_pages() const { return page_table_1 || real_page_table; }
};

// The sets last: the scalars, num_sets among them, sit together at the front
// of the kernel's parameter bank. kSlots: the table's capacity. The parameter
// block is copied by every launch and read by the first instructions of every
// block, so a one-set launch passes one slot (~0.25 KB instead of ~1.6 KB).
template <int kSlots>
struct DsaGenArgs : DsaGenInputs {
  DsaGenSet set[kSlots];

  // The sets to write: a one-slot table's loops have a constant trip count.
  SGL_HD int sets() const { return kSlots == 1 ? 1 : num_sets; }
};

using DsaGenParams = DsaGenArgs<kDsaGenMaxSets>;

// --- shared arithmetic (CPU and CUDA must agree bit for bit) ------------------

// Index values are used as int32 the way upstream's kernels cast them
// (`.to(tl.int32)`): two's-complement truncation.
SGL_HD int32_t to_i32(int64_t v) { return static_cast<int32_t>(static_cast<uint32_t>(v)); }
SGL_HD int32_t add_i32(int32_t a, int64_t b) {  // wrapping int32 sum
  return static_cast<int32_t>(static_cast<uint32_t>(a) + static_cast<uint32_t>(b));
}

// kMode: the mode where the caller knows it at compile time (a CUDA kernel
// instantiated per mode); -1: p.mode.
template <int kMode = -1>
SGL_HD int mode_of(const DsaGenInputs& p) {
  return kMode >= 0 ? kMode : p.mode;
}

// cache_seqlens[r]: seq_lens[r] (+ next_n in TARGET_VERIFY), int32.
template <int kMode = -1>
SGL_HD int32_t cache_len(const DsaGenInputs& p, int32_t seq) {
  return mode_of<kMode>(p) == kDsaGenTargetVerify ? add_i32(seq, p.next_n) : seq;
}

// Lengths (common/index_array.h): seq_lens[r] and cache_seqlens[r] (+ next_n
// in TARGET_VERIFY) lie in [0, 2**31 - 1], and so do the running sums
// cu_seqlens_k and dsa_cu_seqlens_k. Every expanded length then fits too: at
// most its request's cache length (seq + j + 1 <= seq + next_n in verify,
// seq - ext + j + 1 <= seq in draft-extend). Draft-extend's clamp at 0 (a
// padded request shorter than its extend length) is upstream's, not an error.
template <int kMode = -1>
SGL_HD bool cache_len_fits(const DsaGenInputs& p, int64_t seq) {
  return length_fits(seq) && length_fits(seq + (mode_of<kMode>(p) == kDsaGenTargetVerify ? p.next_n : 0));
}

// Columns of request r's page rows: its cache length clamped to [0, max_cols].
SGL_HD int64_t live_len(const DsaGenInputs& p, int32_t cache) {
  return cache <= 0 ? 0 : min_i64(cache, p.max_cols);
}

// A request's extend length as the prefix sums use it: negatives are rejected
// elsewhere (device assert / RuntimeError) and counted as 0 here so that no
// row index can go negative; capped at n (rows past n are never written), so
// bs such values sum without overflow.
SGL_HD int64_t extend_len_of(const DsaGenInputs& p, int64_t e) { return e <= 0 ? 0 : min_i64(e, p.n); }
SGL_HD int64_t extend_len(const DsaGenInputs& p, int64_t r) {
  return extend_len_of(p, p.extend_seq_lens[p.static_extend ? 0 : r]);
}

// DRAFT_EXTEND seqlens_expanded of local row j of a request with cache length
// `seq` extending by `ext` (>= 0, exact) tokens: seq - ext + j + 1, clamped at
// 0 (padded rows whose length is below their extend length). Fits int32 as
// j < ext; written so that no int64 ext can overflow.
SGL_HD int32_t draft_extend_len(int32_t seq, int64_t ext, int64_t j) {
  const int64_t top = static_cast<int64_t>(seq) + j + 1;
  return ext >= top ? 0 : static_cast<int32_t>(top - ext);
}

SGL_HD int32_t min_i32(int32_t a, int32_t b) { return a < b ? a : b; }

// CPU kernel: throws std::runtime_error (before writing anything) on a request
// index outside req_to_token, a negative extend length or a length (or sum of
// lengths) outside [0, 2**31 - 1].
void fused_dsa_metadata_cpu(const DsaGenParams& p);

// CUDA launcher; `stream` is a cudaStream_t. Returns nullptr on success, else
// the error text (the binding turns it into an exception naming the op).
const char* fused_dsa_metadata_cuda(const DsaGenParams& p, void* stream);

}  // namespace sgl_meta
