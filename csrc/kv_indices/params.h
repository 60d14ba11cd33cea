// build_kv_indices: the argument bundle shared by the CPU and CUDA kernels
// (plain data, no torch types), and the per-row / per-token formulas both run.
//
// A CSR stream of KV ids (FlashInfer's and SGLang's Triton backend's
// kv_indices), optionally with its row starts (kv_indptr, the running sum of
// the lengths) and the Triton decode kernel's split counts, in one launch.
// For row b < bs, req = req_pool_indices[b], start = kv_start_idx[b] (0
// without it), L_b = seq_lens[b] (with extend_seq_lens: max(seq_lens[b] -
// extend_seq_lens[b], 0); with a sliding window W: min(L, W) of that L, and
// start moves by the L - min(L, W) tokens before the window), token i < n_b
// (L_b cut at the row's end), pos = start + i:
//
//   no v2p:  id = src[req, pos / E] * E + pos % E     (E = entry_page_size;
//            E == 1 copies req_to_token verbatim, negative values included)
//   v2p:     the kv_read_token_stream id (kv_read_table/params.h): the
//            virtual page of the page's first slot, through v2p
//   token_mapping: id = id < 0 ? -1 : token_mapping[id]
//   kv_indices[lo_b + i] = id,  lo_b = kv_indptr[b] or (write_indptr) the
//   sum of L over the rows < b
//
// A verify batch's other row starts in the same launch, for b <= bs
// (q = q_stride, the query tokens of each row):
//   qo_indptr[b]   = b * q
//   mask_indptr[b] = q * (lo_b + b * q)   (write_indptr: the running sum of the
//                    custom-mask rows q * (L + q), SGLang's mask_indptr)
#pragma once

#include <cmath>
#include <cstdint>

#include "kv_read_table/params.h"

namespace sgl_meta {

// Split counts of SGLang's Triton decode kernel (get_num_kv_splits_triton)
// from bs lengths, num_group per request, or absent.
struct KvSplits {
  int32_t* num_kv_splits = nullptr;  // [>= bs * num_group]
  int32_t* uneven_batch = nullptr;   // [>= 1] or absent
  int64_t num_group = 1, num_head = 1, num_kv_head = 1, max_kv_splits = 1, device_core_count = 1;
};

struct KvIndicesParams {
  // Rows, lengths, window starts, and with v2p the translation (page_size is
  // v2p's page size; seq_len_delta is 0).
  KvReadSource src;
  // [>= bs] or absent: row b's length is then max(seq_lens[b] - extend_seq_lens[b], 0)
  IndexArray extend_seq_lens;
  // > 0: row b keeps the last min(L_b, sliding_window) of its L_b tokens (its
  // start moves past the others), SGLang's sliding-window stream; 0: all.
  int64_t sliding_window = 0;
  // [>= bs] int32 or int64, or absent: kv_offsets[b] = row b's start (with a
  // sliding window, its window's: SGLang's window_kv_offsets)
  void* kv_offsets = nullptr;
  bool offsets64 = false;
  int64_t entry_page_size = 1;  // tokens per source entry (no v2p)
  PageDivisor entry_div;
  int64_t row_positions = 0;  // token positions a source row covers (row_len * E, saturated)

  void* kv_indptr = nullptr;  // [>= bs + 1] int32 or int64
  bool indptr64 = false;
  bool write_indptr = false;  // else read: row b starts at kv_indptr[b]
  int64_t indptr_max = 0;     // INT32_MAX or INT64_MAX

  void* out = nullptr;  // kv_indices [out_size] int32 or int64
  bool out64 = false;
  int64_t out_size = 0;
  int64_t out_min = 0, out_max = 0;
  int64_t max_entry = 0;  // v2p: largest entry whose every id fits out

  IndexArray token_mapping;  // [token_mapping_size] or absent
  int64_t token_mapping_size = 0;

  KvSplits splits;  // over the same lengths

  void* qo_indptr = nullptr;  // [>= bs + 1] int32 or int64, or absent
  bool qo64 = false;
  void* mask_indptr = nullptr;  // [>= bs + 1] int32 or int64 (write_indptr), or absent
  bool mask64 = false;
  int64_t mask_max = 0;  // INT32_MAX or INT64_MAX
  int64_t q_stride = 0;  // host-checked: bs * q_stride fits int32
};

SGL_HD void store_index(void* base, bool is64, int64_t i, int64_t v) {
  if (is64)
    static_cast<int64_t*>(base)[i] = v;
  else
    static_cast<int32_t*>(base)[i] = static_cast<int32_t>(v);
}

// mask_indptr[b] from lo = kv_indptr[b] (the running sum, <= INT64_MAX):
// false when q * (lo + b * q) does not fit mask_indptr (b * q fits int32).
SGL_HD bool mask_indptr_of(const KvIndicesParams& p, int64_t b, int64_t lo, int64_t* v) {
  const int64_t q = p.q_stride;
  if (lo > INT64_MAX - b * q) return false;
  const int64_t t = lo + b * q;
  if (q != 0 && t > p.mask_max / q) return false;
  *v = q * t;
  return true;
}

// The verify row starts of entry b (qo_indptr, mask_indptr; lo = kv_indptr[b]),
// whichever are present, once mask_indptr_of passed.
SGL_HD void store_verify_indptrs(const KvIndicesParams& p, int64_t b, int64_t mask) {
  if (p.qo_indptr != nullptr) store_index(p.qo_indptr, p.qo64, b, b * p.q_stride);
  if (p.mask_indptr != nullptr) store_index(p.mask_indptr, p.mask64, b, mask);
}

SGL_HD int64_t indptr_at(const KvIndicesParams& p, int64_t i) {
  return p.indptr64 ? static_cast<const int64_t*>(p.kv_indptr)[i]
                    : static_cast<int64_t>(static_cast<const int32_t*>(p.kv_indptr)[i]);
}

SGL_HD void store_indptr(const KvIndicesParams& p, int64_t i, int64_t v) {
  store_index(p.kv_indptr, p.indptr64, i, v);
}

SGL_HD void store_id(const KvIndicesParams& p, int64_t i, int64_t v) { store_index(p.out, p.out64, i, v); }

// A row's length as it enters a running sum: the checks reject anything
// outside [0, 2**31 - 1]; until they have (other rows' blocks on CUDA), the
// clamp keeps the sum defined and non-negative.
SGL_HD int64_t clamped_len(int64_t v) { return v < 0 ? 0 : min_i64(v, INT32_MAX); }

// Row b's length from its seq_lens and extend_seq_lens values (ext = 0
// without extend_seq_lens): seq - ext clamped at 0, the Triton backend's
// draft-extend prefix (clamp(seq_lens - extend_seq_lens, min=0)). The checks
// reject either value outside [0, 2**31 - 1]; until they have, the clamps keep
// a hostile pair's length in that range.
SGL_HD int64_t kv_len(int64_t seq, int64_t ext) {
  return ext == 0 ? seq : max_i64(clamped_len(seq) - clamped_len(ext), 0);
}
SGL_HD int64_t extend_at(const IndexArray& extend, int64_t b) { return extend.present() ? extend[b] : 0; }
// The tokens a sliding window keeps of a row of `len` (window 0: all of them).
SGL_HD int64_t in_window(int64_t len, int64_t window) { return window > 0 ? min_i64(len, window) : len; }
// Row b's length as the ids, the running sums and the split counts take it.
SGL_HD int64_t kv_row_len(const KvReadSource& s, const IndexArray& extend, int64_t window, int64_t b) {
  return in_window(kv_len(s.seq_lens[b], extend_at(extend, b)), window);
}
// Where row b's ids start in its source row: its kv_start_idx value moved past
// the `dropped` tokens before its window; saturated (such a start reads nothing).
SGL_HD int64_t window_start(int64_t start, int64_t dropped) {
  return start > INT64_MAX - dropped ? INT64_MAX : start + dropped;
}
// Whether row b's start, a non-negative given start plus the tokens dropped
// before its window, fits kv_offsets (and int64 on the way).
SGL_HD bool offset_fits(const KvIndicesParams& p, int64_t given, int64_t dropped) {
  if (given > INT64_MAX - dropped) return false;
  return p.offsets64 || given + dropped <= INT32_MAX;
}
// What the running sums add up, for the errors that name them.
SGL_HD const char* kv_lens_name(const KvIndicesParams& p) {
  if (p.sliding_window > 0)
    return p.extend_seq_lens.present() ? "min(seq_lens - extend_seq_lens, sliding_window)"
                                       : "min(seq_lens, sliding_window)";
  return p.extend_seq_lens.present() ? "(seq_lens - extend_seq_lens)" : "seq_lens";
}

// Ids row b writes: its length, cut at the positions its source row holds
// past its start (no read past the row).
SGL_HD int64_t kv_indices_live(const KvIndicesParams& p, int64_t seq, int64_t start) {
  if (seq <= 0 || start < 0) return 0;
  if (p.src.translate) return min_i64(seq, row_tokens_left(p.src, start));
  return start >= p.row_positions ? 0 : min_i64(seq, p.row_positions - start);
}

// Why an id could not be formed or stored (0: none).
enum KvIdError : int { kIdOk = 0, kIdV2p, kIdMapping, kIdFits };

// The id of position `pos` of a row whose source row starts at `row`, before
// the token mapping. `vpage_out` receives the virtual page read (v2p mode).
SGL_HD int64_t kv_source_id(const KvIndicesParams& p, const int32_t* row, int64_t pos,
                            int* err, int64_t* vpage_out) {
  const KvReadSource& s = p.src;
  if (!s.translate) {
    const int64_t e = p.entry_page_size;
    if (e == 1) return row[pos];
    const int64_t q = p.entry_div.div(pos);
    return static_cast<int64_t>(row[q]) * e + (pos - q * e);
  }
  const int64_t page = s.div.div(pos);
  const int64_t off = pos - page * s.page_size;
  const int64_t vpage = virtual_page(s, row[page * s.page_size]);
  *vpage_out = vpage;
  if (vpage >= s.v2p_size) {
    *err = kIdV2p;
    return 0;
  }
  const int64_t entry = max_i64(s.v2p[vpage], 0);
  // entry * page_size + off <= out_max without overflow (the divide only for
  // an entry past max_entry, which valid inputs never reach).
  if (entry > p.max_entry && (off > p.out_max || entry > (p.out_max - off) / s.page_size)) {
    *err = kIdFits;
    return 0;
  }
  return entry * s.page_size + off;
}

// The stored id of position `pos`: the source id through token_mapping, in
// out's range; *err says what failed.
SGL_HD int64_t kv_index_id(const KvIndicesParams& p, const int32_t* row, int64_t pos, int* err,
                           int64_t* bad) {
  int64_t vpage = 0;
  int64_t id = kv_source_id(p, row, pos, err, &vpage);
  if (*err) {
    *bad = vpage;
    return 0;
  }
  if (p.token_mapping.present()) {
    if (id >= p.token_mapping_size) {
      *err = kIdMapping;
      *bad = id;
      return 0;
    }
    id = id < 0 ? -1 : p.token_mapping[id];
  }
  if (id < p.out_min || id > p.out_max) {
    *err = kIdFits;
    *bad = id;
    return 0;
  }
  return id;
}

// get_num_kv_splits_triton's heuristic, from the batch's largest and smallest
// lengths: each row's split count is max(ceil(len / chunk1), ceil(len / chunk2)).
// A zero length counts as 1 here (upstream divides by it).
struct KvSplitPlan {
  int64_t chunk1 = 1, chunk2 = 1;
  bool uneven = false;
};

SGL_HD int64_t cdiv_pos(int64_t a, int64_t b) { return (a + b - 1) / b; }  // a >= 0, b >= 1

SGL_HD KvSplitPlan kv_split_plan(const KvSplits& p, int64_t bs, int64_t max_len, int64_t min_len) {
  KvSplitPlan plan;
  max_len = max_i64(max_len, 1);
  min_len = max_i64(min_len, 1);
  if (max_len * 8 < min_len * 10) min_len = max_len;
  plan.uneven = min_len < max_len;
  const int64_t splits1 = min_i64(cdiv_pos(max_len, min_len), p.max_kv_splits);
  plan.chunk1 = cdiv_pos(max_len, splits1);
  // In float32, as upstream: the core count grows with log2(max_len / 64).
  const float ext_seq = static_cast<float>(max_len) / 64.0f;
  const float grow = fmaxf(log2f(ext_seq), 1.0f);
  const auto ext_cores = static_cast<int64_t>(static_cast<float>(p.device_core_count) * grow);
  const int64_t kv_group = p.num_head / p.num_kv_head;
  const int64_t per_seq = kv_group == 1 ? p.num_head : cdiv_pos(p.num_head, min_i64(16, kv_group));
  const int64_t token_grid = bs * p.num_group * per_seq;
  const int64_t splits2 = min_i64(cdiv_pos(max_i64(ext_cores, 1), token_grid), p.max_kv_splits);
  plan.chunk2 = cdiv_pos(max_len, splits2);
  return plan;
}

SGL_HD int32_t kv_splits_of(const KvSplitPlan& plan, int64_t len) {
  len = clamped_len(len);
  return static_cast<int32_t>(max_i64(cdiv_pos(len, plan.chunk1), cdiv_pos(len, plan.chunk2)));
}

void build_kv_indices_cpu(const KvIndicesParams& p);
const char* build_kv_indices_cuda(const KvIndicesParams& p, void* stream);

// build_draft_decode_kv_indices: the KV ids of every EAGLE draft-decode step
// (SGLang 0.5.23's generate_draft_decode_kv_indices, launched by its Triton
// and FlashInfer multi-step draft backends). Step s < K = num_steps
// (it = s + 1 draft tokens so far), request b < bs, branch t < topk:
//
//   L = seq_lens[b], row = req_to_token[req_pool_indices[b]]
//   window: Lw = min(L, cap) (cap = window_size + sink_size), the first
//           e = min(sink_size, L) tokens and the last Lw - e; no window: Lw = L
//   off   = cum_b * topk + b * it * topk + t * (Lw + it),
//           cum_b = Lw of the requests before b, summed
//   kv_indices[s][off + i]      = row[src(i)]       i < Lw
//   kv_indices[s][off + Lw + j] = row[chain_t + j]  j < it
//   chain_t = L + t * K                              (page_size 1 or topk 1)
//           = floor(L / P) * P + t * ceil((L % P + K) / P) * P + L % P
//   kv_indptr[s][z] = positions[0] + ... + positions[z - 1] + z * it
//                     for 1 <= z <= bs * topk (positions capped at cap)
struct DraftKvIndicesParams {
  // Rows, lengths, bs, page_size (no v2p, no window starts, seq_len_delta 0).
  KvReadSource src;
  IndexArray positions;  // [>= bs * topk]
  int64_t topk = 1, num_steps = 1;
  int64_t cap = 0;   // window_size + sink_size, 0 without a window
  int64_t sink = 0;  // sink_size (with a window)

  void* out = nullptr;  // kv_indices [>= num_steps, out_width], step rows by out_stride
  bool out64 = false;
  int64_t out_stride = 0, out_width = 0;
  int64_t cum_max = 0;  // out_width / topk: the largest running sum a request may start at
  void* indptr = nullptr;  // kv_indptr [>= num_steps, >= bs * topk + 1]
  bool indptr64 = false;
  int64_t indptr_stride = 0;
  int64_t indptr_max = 0;  // INT32_MAX or INT64_MAX

  KvSplits splits;  // from seq_lens, num_group = topk (the draft backend's last step)
};

// Tokens of a request's prefix each branch reads (L already checked).
SGL_HD int64_t draft_prefix_len(const DraftKvIndicesParams& p, int64_t len) {
  return p.cap > 0 ? min_i64(len, p.cap) : len;
}

// The row position of prefix token i < draft_prefix_len(len).
SGL_HD int64_t draft_prefix_pos(const DraftKvIndicesParams& p, int64_t len, int64_t i) {
  if (p.cap == 0) return i;
  const int64_t sink = min_i64(p.sink, len);
  return i < sink ? i : len - draft_prefix_len(p, len) + i;
}

// The row position of branch t's first draft token.
SGL_HD int64_t draft_chain_start(const DraftKvIndicesParams& p, int64_t len, int64_t t) {
  if (p.src.page_size == 1 || p.topk == 1) return len + t * p.num_steps;
  const int64_t last = len - p.src.div.div(len) * p.src.page_size;
  const int64_t pages = p.src.div.ceil(last + p.num_steps);
  return len - last + t * pages * p.src.page_size + last;
}

// Where branch t of request b starts in step s's row (cum: the prefix
// lengths of the requests before b, summed).
SGL_HD int64_t draft_offset(const DraftKvIndicesParams& p, int64_t cum, int64_t b, int64_t t,
                            int64_t prefix, int64_t s) {
  const int64_t it = s + 1;
  return cum * p.topk + b * it * p.topk + t * (prefix + it);
}

SGL_HD void store_draft(const DraftKvIndicesParams& p, int64_t s, int64_t i, int32_t v) {
  store_index(p.out, p.out64, s * p.out_stride + i, v);
}

SGL_HD void store_draft_indptr(const DraftKvIndicesParams& p, int64_t s, int64_t z, int64_t v) {
  store_index(p.indptr, p.indptr64, s * p.indptr_stride + z, v);
}

// Request j's term of the running sum cum: its prefix length, the length
// clamped to its row first (a row past it fails its own check; the clamp
// keeps every other row's offsets bounded).
SGL_HD int64_t draft_cum_term(const DraftKvIndicesParams& p, int64_t len) {
  return draft_prefix_len(p, len < 0 ? 0 : min_i64(len, p.src.row_len));
}

// What is wrong with request b (0: nothing), given cum and its
// req_pool_indices and seq_lens values; the last step's branches end
// furthest (every offset grows with the step).
enum DraftRowError : int { kDraftOk = 0, kDraftReq, kDraftLen, kDraftRow, kDraftOut };

SGL_HD int draft_row_check(const DraftKvIndicesParams& p, int64_t b, int64_t req, int64_t len, int64_t cum) {
  if (req < 0 || req >= p.src.pool_size) return kDraftReq;
  if (!length_fits(len)) return kDraftLen;
  // The prefix reads positions below len; the last branch's chain ends at
  // chain_start + K - 1.
  if (len > p.src.row_len || draft_chain_start(p, len, p.topk - 1) + p.num_steps > p.src.row_len)
    return kDraftRow;
  if (cum > p.cum_max) return kDraftOut;  // (cum * topk below never overflows)
  const int64_t prefix = draft_prefix_len(p, len);
  const int64_t end =
      draft_offset(p, cum, b, p.topk - 1, prefix, p.num_steps - 1) + prefix + p.num_steps;
  return end > p.out_width ? kDraftOut : kDraftOk;
}

SGL_HD int draft_row_error(const DraftKvIndicesParams& p, int64_t b, int64_t cum) {
  return draft_row_check(p, b, p.src.req_pool_indices[b], p.src.seq_lens[b], cum);
}

void build_draft_decode_kv_indices_cpu(const DraftKvIndicesParams& p);
const char* build_draft_decode_kv_indices_cuda(const DraftKvIndicesParams& p, void* stream);

}  // namespace sgl_meta
