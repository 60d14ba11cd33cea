// build_kv_indices, build_draft_decode_kv_indices: CPU kernels. Same results
// as the CUDA kernels; every hostile device value (a request index outside
// req_to_token, a negative window start, a length outside [0, 2**31 - 1], a
// running sum past kv_indptr's or mask_indptr's dtype, a CSR row outside its
// slot or outside kv_indices, a virtual page past v2p, an id past
// token_mapping or outside kv_indices' dtype) raises std::runtime_error
// before anything is written, where CUDA trips a device-side assert.
#include "common/errors.h"
#include "common/row_checks.h"
#include "kv_indices/params.h"

namespace sgl_meta {
namespace {

constexpr const char* kOp = "build_kv_indices";
constexpr const char* kDraftOp = "build_draft_decode_kv_indices";

struct Row {
  const int32_t* in;  // source row
  int64_t len;        // its length (kv_row_len: less its extend length, in its window)
  int64_t start, n, lo;
  int64_t mask;  // mask_indptr[b + 1] (with mask_indptr)
};

// Checks row b (given the running sum `sum` of the rows before it) and
// returns where it reads and writes.
Row check_row(const KvIndicesParams& p, int64_t b, int64_t sum) {
  const KvReadSource& s = p.src;
  const int64_t req = s.req_pool_indices[b];
  check_request_index(kOp, b, req, s.pool_size);
  const int64_t given_start = s.kv_start_idx.present() ? s.kv_start_idx[b] : 0;
  if (given_start < 0) raise_error(kOp, "kv_start_idx[", b, "] = ", given_start, " is negative");
  const int64_t raw = s.seq_lens[b];
  check_length(kOp, "seq_lens", b, raw);
  const int64_t ext = extend_at(p.extend_seq_lens, b);
  check_length(kOp, "extend_seq_lens", b, ext);
  const int64_t whole = kv_len(raw, ext);
  const int64_t seq = in_window(whole, p.sliding_window);
  const int64_t start = window_start(given_start, whole - seq);
  if (p.kv_offsets != nullptr && !offset_fits(p, given_start, whole - seq))
    raise_error(kOp, "row ", b, "'s start, kv_start_idx[", b, "] = ", given_start, " + ", whole - seq,
                " tokens before its window, does not fit kv_offsets (", p.offsets64 ? "int64" : "int32", ")");
  const int64_t n = kv_indices_live(p, seq, start);
  int64_t lo = sum, mask = 0;
  if (p.write_indptr) {
    const char* lens = kv_lens_name(p);
    if (sum + seq > p.indptr_max)
      raise_error(kOp, "the running sum of ", lens, "[0..", b, "] = ", sum + seq, " does not fit kv_indptr (",
                  p.indptr64 ? "int64" : "int32", ")");
    if (n > 0 && lo > p.out_size - n)
      raise_error(kOp, "row ", b, " holds ", n, " tokens at ", lo, " but kv_indices has ", p.out_size,
                  " elements");
    if (p.mask_indptr != nullptr && !mask_indptr_of(p, b + 1, sum + seq, &mask))
      raise_error(kOp, "the running sum of q_stride * (", lens, " + q_stride) over rows 0..", b, " (", lens,
                  " summed: ", sum + seq, ", q_stride = ", p.q_stride, ") does not fit mask_indptr (",
                  p.mask64 ? "int64" : "int32", ")");
  } else {
    lo = indptr_at(p, b);
    const int64_t hi = indptr_at(p, b + 1);
    if (lo < 0 || hi < lo)
      raise_error(kOp, "kv_indptr must be non-negative and non-decreasing, got kv_indptr[", b, "] = ", lo,
                  ", kv_indptr[", b + 1, "] = ", hi);
    if (n > 0 && (n > hi - lo || lo > p.out_size - n))
      raise_error(kOp, "row ", b, " holds ", n, " tokens but kv_indptr gives it [", lo, ", ", hi,
                  ") in kv_indices of ", p.out_size, " elements");
  }
  return {s.req_to_token + req * s.req_to_token_stride, seq, start, n, lo, mask};
}

int64_t checked_id(const KvIndicesParams& p, const Row& r, int64_t b, int64_t i) {
  int err = kIdOk;
  int64_t bad = 0;
  const int64_t id = kv_index_id(p, r.in, r.start + i, &err, &bad);
  if (err == kIdV2p)
    raise_error(kOp, "row ", b, ", token ", i, " reads virtual page ", bad,
                ", outside v2p (v2p.numel() = ", p.src.v2p_size, ")");
  if (err == kIdMapping)
    raise_error(kOp, "row ", b, ", token ", i, ": id ", bad,
                " is outside token_mapping (token_mapping.numel() = ", p.token_mapping_size, ")");
  if (err == kIdFits)
    raise_error(kOp, "row ", b, ", token ", i, ": its id does not fit kv_indices (",
                p.out64 ? "int64" : "int32", ")");
  return id;
}

// The split counts from the lengths of the bs requests (checked before).
void write_kv_splits(const KvSplits& k, const KvReadSource& s, const IndexArray& extend, int64_t window) {
  if (k.num_kv_splits == nullptr) return;
  int64_t max_len = 0, min_len = INT64_MAX;
  for (int64_t b = 0; b < s.bs; ++b) {
    const int64_t len = kv_row_len(s, extend, window, b);
    max_len = max_i64(max_len, len);
    min_len = min_i64(min_len, len);
  }
  const KvSplitPlan plan = kv_split_plan(k, s.bs, max_len, min_len);
  for (int64_t b = 0; b < s.bs; ++b) {
    const int32_t v = kv_splits_of(plan, kv_row_len(s, extend, window, b));
    for (int64_t g = 0; g < k.num_group; ++g) k.num_kv_splits[b * k.num_group + g] = v;
  }
  if (k.uneven_batch != nullptr) k.uneven_batch[0] = plan.uneven ? 1 : 0;
}

}  // namespace

void build_kv_indices_cpu(const KvIndicesParams& p) {
  const int64_t bs = p.src.bs;
  int64_t sum = 0;
  for (int64_t b = 0; b < bs; ++b) {  // checks: nothing is written before they pass
    const Row r = check_row(p, b, sum);
    for (int64_t i = 0; i < r.n; ++i) checked_id(p, r, b, i);
    sum += r.len;
  }
  sum = 0;
  if (p.write_indptr) store_indptr(p, 0, 0);
  store_verify_indptrs(p, 0, 0);
  for (int64_t b = 0; b < bs; ++b) {
    const Row r = check_row(p, b, sum);
    for (int64_t i = 0; i < r.n; ++i) store_id(p, r.lo + i, checked_id(p, r, b, i));
    sum += r.len;
    if (p.write_indptr) store_indptr(p, b + 1, sum);
    store_verify_indptrs(p, b + 1, r.mask);
    if (p.kv_offsets != nullptr) store_index(p.kv_offsets, p.offsets64, b, r.start);
  }
  write_kv_splits(p.splits, p.src, p.extend_seq_lens, p.sliding_window);
}

namespace {

void check_draft_row(const DraftKvIndicesParams& p, int64_t b, int64_t cum) {
  switch (draft_row_error(p, b, cum)) {
    case kDraftReq:
      raise_request_index(kDraftOp, b, p.src.req_pool_indices[b], p.src.pool_size);
    case kDraftLen:
      raise_error(kDraftOp, "seq_lens[", b, "] = ", p.src.seq_lens[b], " is negative or does not fit int32");
    case kDraftRow:
      raise_error(kDraftOp, "request ", b, " (seq_lens = ", p.src.seq_lens[b],
                  ") reads past its req_to_token row of ", p.src.row_len,
                  " positions (its prefix and every branch's ", p.num_steps, " draft slots)");
    case kDraftOut:
      raise_error(kDraftOp, "request ", b,
                  "'s ids of the last step end past kv_indices.size(1) = ", p.out_width);
    default:
      return;
  }
}

// Every position, and the largest kv_indptr value written (the last step's
// end: the capped positions summed, plus bs * topk * num_steps).
void check_positions(const DraftKvIndicesParams& p) {
  const int64_t n = p.src.bs * p.topk;
  int64_t sum = 0;
  for (int64_t z = 0; z < n; ++z) {
    const int64_t v = p.positions[z];
    if (!length_fits(v))
      raise_error(kDraftOp, "positions[", z, "] = ", v, " is negative or does not fit int32");
    sum += p.cap > 0 ? min_i64(v, p.cap) : v;
  }
  if (sum > p.indptr_max - n * p.num_steps)
    raise_error(kDraftOp, "kv_indptr's last value (", sum, " + ", n, " * ", p.num_steps,
                ") does not fit kv_indptr (", p.indptr64 ? "int64" : "int32", ")");
}

}  // namespace

void build_draft_decode_kv_indices_cpu(const DraftKvIndicesParams& p) {
  int64_t cum = 0;
  for (int64_t b = 0; b < p.src.bs; ++b) {  // checks: nothing is written before they pass
    check_draft_row(p, b, cum);
    cum += draft_cum_term(p, p.src.seq_lens[b]);
  }
  check_positions(p);
  cum = 0;
  for (int64_t b = 0; b < p.src.bs; ++b) {
    const int64_t len = p.src.seq_lens[b];
    const int64_t prefix = draft_prefix_len(p, len);
    const int32_t* row = p.src.req_to_token + p.src.req_pool_indices[b] * p.src.req_to_token_stride;
    for (int64_t s = 0; s < p.num_steps; ++s) {
      for (int64_t t = 0; t < p.topk; ++t) {
        const int64_t off = draft_offset(p, cum, b, t, prefix, s);
        for (int64_t i = 0; i < prefix; ++i) store_draft(p, s, off + i, row[draft_prefix_pos(p, len, i)]);
        const int64_t chain = draft_chain_start(p, len, t);
        for (int64_t j = 0; j <= s; ++j) store_draft(p, s, off + prefix + j, row[chain + j]);
      }
    }
    cum += prefix;
  }
  const int64_t n = p.src.bs * p.topk;
  int64_t sum = 0;
  for (int64_t z = 1; z <= n; ++z) {
    const int64_t v = p.positions[z - 1];
    sum += p.cap > 0 ? min_i64(v, p.cap) : v;
    for (int64_t s = 0; s < p.num_steps; ++s) store_draft_indptr(p, s, z, sum + z * (s + 1));
  }
  write_kv_splits(p.splits, p.src, IndexArray{}, 0);
}

}  // namespace sgl_meta
