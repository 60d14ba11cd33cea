// kv_read_page_table / kv_read_token_stream: the argument bundles shared by the
// CPU and CUDA kernels. Plain data (raw pointers, element strides, scalars):
// the torch binding fills them after its checks, the kernels never see a torch
// type.
//
// One gather-and-translate in two output forms. For row b < bs, with
// req = req_pool_indices[b] and start = kv_start_idx[b] (0 without it):
//
//   slot(b, pos)  = req_to_token[req, start + pos]
//   vpage(slot)   = slot < 0 ? 0 : slot / page_size     (a negative slot is
//                   not divided: it reads virtual page 0, the sink)
//   entry(vpage)  = v2p ? max(v2p[vpage], 0) : vpage
//
// Page table:   out[b, c] = entry(vpage(slot(b, c * page_size))) for c < n_b
// Token stream: out[indptr[b] + i] = entry(vpage(slot(b, p))) * page_size +
//               (start + i) % page_size for i < n_b, p = the first token of
//               (start + i)'s page
#pragma once

#include <cstdint>

#include "common/fast_div.h"
#include "common/index_array.h"

namespace sgl_meta {

// Divides non-negative int32 slots and token positions by page_size without a
// divide instruction when it can (every value < 2^31 and page_size < 2^31).
struct KvDivisor {
  PageDivisor page;   // any value, any page_size >= 1 (floor division)
  FastDivU32 fast;    // values in [0, 2^31), page_size in [1, 2^31)
  bool fast_ok = false;
  bool huge = false;  // page_size >= 2^31: every value < 2^31 divides to 0

  static KvDivisor make(int64_t page_size) {
    KvDivisor d;
    d.page = PageDivisor::make(page_size);
    d.huge = page_size > INT32_MAX;
    d.fast_ok = !d.huge;
    if (d.fast_ok) d.fast = FastDivU32::make(static_cast<uint32_t>(page_size));
    return d;
  }
  // v / page_size for 0 <= v < 2^31 (slots; positions inside a row that fits
  // int32 indexing).
  SGL_HD int64_t div_small(int64_t v) const {
    if (huge) return 0;
    return static_cast<int64_t>(fast.div(static_cast<uint32_t>(v)));
  }
  // v / page_size for any v >= 0.
  SGL_HD int64_t div(int64_t v) const {
    return (fast_ok && v <= INT32_MAX) ? div_small(v) : page.div(v);
  }
  // ceil(v / page_size), 0 for v <= 0.
  SGL_HD int64_t ceil(int64_t v) const { return v <= 0 ? 0 : div(v - 1) + 1; }
};

// What both forms read: the request rows, their lengths, the translation.
struct KvReadSource {
  const int32_t* req_to_token = nullptr;  // [pool_size, row_len], rows by stride
  int64_t req_to_token_stride = 0;        // elements between rows
  int64_t pool_size = 0;                  // req_to_token.size(0)
  int64_t row_len = 0;                    // req_to_token.size(1)
  IndexArray req_pool_indices;            // [bs]
  IndexArray seq_lens;                    // [>= bs], tokens
  IndexArray kv_start_idx;                // [>= bs] or absent (0)
  // Translation through v2p iff `translate` (an empty v2p has no data pointer
  // but still translates: every live read is then outside it).
  bool translate = false;
  const int64_t* v2p = nullptr;  // [v2p_size]
  int64_t v2p_size = 0;
  int64_t bs = 0;
  int64_t seq_len_delta = 0;  // added to every seq_lens value (int32 range)
  int64_t page_size = 1;
  KvDivisor div;
};

struct KvReadPageTableParams {
  KvReadSource src;
  int32_t* out = nullptr;  // [>= bs, >= max_pages], rows by out_stride
  int64_t out_stride = 0;
  int64_t max_pages = 0;   // columns a row may hold
  bool zero_tail = false;  // write 0 in [n_b, max_pages) of rows b < bs
};

struct KvReadTokenStreamParams {
  KvReadSource src;
  IndexArray indptr;     // [>= bs + 1], CSR row starts in out
  void* out = nullptr;   // [out_size] int32 or int64
  bool out64 = false;
  int64_t out_size = 0;
  // Largest entry whose ids (entry * page_size + page_size - 1) fit out's
  // dtype; a larger one takes the exact per-offset check.
  int64_t max_entry = 0;
  int64_t out_max = 0;   // INT32_MAX or INT64_MAX
};

// Lengths (common/index_array.h): seq_lens[b] and row b's window length
// seq_lens[b] + seq_len_delta must both lie in [0, 2**31 - 1]; 0 means an
// empty row. The window length wraps in uint64 so that a hostile seq_lens
// value stays defined arithmetic: the checks reject it, and until they have
// (the CUDA blocks that only size their work) it can only shrink or cap what
// is written, never send an access out of bounds.
SGL_HD int64_t window_len(const KvReadSource& s, int64_t seq_len) {
  return static_cast<int64_t>(static_cast<uint64_t>(seq_len) +
                              static_cast<uint64_t>(s.seq_len_delta));
}

SGL_HD bool window_fits(const KvReadSource& s, int64_t seq_len) {
  return length_fits(seq_len) && length_fits(window_len(s, seq_len));
}

// Tokens of row b's window that lie inside its req_to_token row: a window
// starting at or past the row's end has none, and none is read past the end
// (the gather is capped at the row, whatever the length says). A negative
// start (an error every kernel reports) has none either.
SGL_HD int64_t row_tokens_left(const KvReadSource& s, int64_t start) {
  return start < 0 || start >= s.row_len ? 0 : s.row_len - start;
}

// Page-table columns of row b: min(ceil(max(window_len, 0) / page_size),
// max_pages, columns whose first token lies inside the row).
// (ceil is monotone, so the min of the two column counts is the column count
// of the min: one division, in 32 bits for any row shorter than 2^31.)
SGL_HD int64_t live_columns(const KvReadPageTableParams& p, int64_t seq_len, int64_t start) {
  const int64_t tokens = min_i64(window_len(p.src, seq_len), row_tokens_left(p.src, start));
  return min_i64(p.src.div.ceil(tokens), p.max_pages);
}

// Token-stream ids of row b: min(max(window_len, 0), tokens left in the row).
SGL_HD int64_t live_tokens(const KvReadSource& s, int64_t seq_len, int64_t start) {
  const int64_t len = window_len(s, seq_len);
  return len <= 0 ? 0 : min_i64(len, row_tokens_left(s, start));
}

// Virtual page of a gathered slot (negative: the sink, page 0).
SGL_HD int64_t virtual_page(const KvReadSource& s, int32_t slot) {
  return slot < 0 ? 0 : s.div.div_small(slot);
}

// CPU kernels: check every hostile value first (std::runtime_error naming the
// op, the argument and the value), then write.
void kv_read_page_table_cpu(const KvReadPageTableParams& p);
void kv_read_token_stream_cpu(const KvReadTokenStreamParams& p);

// CUDA launchers; `stream` is a cudaStream_t. nullptr on success, else the
// error text (the binding turns it into an exception naming the op).
const char* kv_read_page_table_cuda(const KvReadPageTableParams& p, void* stream);
const char* kv_read_token_stream_cuda(const KvReadTokenStreamParams& p, void* stream);

}  // namespace sgl_meta
