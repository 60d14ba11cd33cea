// vllm_combine_sampled_and_draft_tokens: the argument bundle shared by the
// CPU and CUDA kernels, and the row check both run. (The input batch's other
// ops, vllm_prepare_pos_seq_lens and vllm_prepare_step, run the step kernel of
// vllm_block_table/params.h.)
//
// For row b < n: req = idx_mapping[b], nl = cu[b + 1] - cu[b], end =
// query_start_loc[b + 1], first = end - nl, k = num_new_sampled_tokens:
//
//   logits_indices[cu[b] + i] = first + i                       for i < nl
//   if req != -1 and seq_lens[b] > prefill_len[req]:
//     if k == 1 and seq_lens[b] - nl >= prefill_len[req]: input_ids[first] = last[req]
//     input_ids[end - (nl - k) + i] = draft_tokens[req, i]     for i < nl - k
#pragma once

#include <cstdint>

#include "common/index_array.h"

namespace sgl_meta {

struct VllmCombineParams {
  int64_t n = 0;
  IndexArray idx_mapping;        // [n]
  IndexArray last_sampled;       // element req at req * last_stride
  int64_t last_stride = 1;
  IndexArray query_start_loc;    // [>= n + 1]
  IndexArray seq_lens;           // [>= n]
  IndexArray prefill_len;        // [max_num_reqs]
  IndexArray draft_tokens;       // [max_num_reqs, steps], rows by draft_stride
  int64_t draft_stride = 0;
  int64_t steps = 0;
  IndexArray cu_num_logits;      // [>= n + 1]
  int32_t* input_ids = nullptr;
  int64_t input_ids_size = 0;
  void* logits_indices = nullptr;  // int32 or int64
  bool logits64 = false;
  int64_t logits_size = 0;
  int64_t num_new_sampled = 1;   // 0 or 1
  int64_t req_limit = 0;         // rows of prefill_len, last_sampled, draft_tokens
};

enum VllmCombineFault : int {
  kCombineOk = 0,
  kCombineBadRequest,     // idx_mapping[b] outside [-1, req_limit)
  kCombineBadLogits,      // cu_num_logits negative, decreasing or past logits_indices
  kCombineTooManyLogits,  // nl > steps + num_new_sampled
  kCombineBadQuery,       // a written row's tokens outside [0, input_ids.numel()) or fewer than nl
  kCombineNoLogits,       // a row that writes its last sampled token has no logits: no position for it
};

struct VllmCombineRow {
  int64_t req = -1;
  int64_t lo = 0, nl = 0;  // cu[b], logits of the row
  int64_t start = 0, end = 0, first = 0;
  bool generating = false;  // past the prompt: input_ids are written
  bool write_last = false;
  int64_t drafts = 0;       // draft tokens written
  int64_t last = 0;         // last_sampled[req]
  int64_t draft = 0;        // draft_tokens[req, draft_at] (when the caller asks for one)
  VllmCombineFault fault = kCombineOk;
};

// draft_at: a draft column the caller reads with the row (-1: none; the CUDA
// kernel's lanes each ask for theirs). Every load is issued before any check
// looks at one: the row's own entries, then, as soon as the request index is
// in, what it selects (only for an index inside the tables).
SGL_HD VllmCombineRow vllm_combine_row(const VllmCombineParams& p, int64_t b, int64_t draft_at = -1) {
  VllmCombineRow r;
  r.req = p.idx_mapping[b];
  const int64_t lo = p.cu_num_logits[b], hi = p.cu_num_logits[b + 1];
  const int64_t start = p.query_start_loc[b], end = p.query_start_loc[b + 1];
  const int64_t seq = p.seq_lens[b];
  const bool req_in_range = r.req >= 0 && r.req < p.req_limit;
  const int64_t prefill = req_in_range ? p.prefill_len[r.req] : 0;
  r.last = req_in_range && p.num_new_sampled > 0 ? p.last_sampled[r.req * p.last_stride] : 0;
  r.draft = req_in_range && draft_at >= 0 && draft_at < p.steps ? p.draft_tokens[r.req * p.draft_stride + draft_at]
                                                               : 0;
  if (r.req != -1 && !req_in_range) return r.fault = kCombineBadRequest, r;
  r.lo = lo;
  if (r.lo < 0 || hi < r.lo || hi > p.logits_size) return r.fault = kCombineBadLogits, r;
  r.nl = hi - r.lo;
  if (r.nl > p.steps + p.num_new_sampled) return r.fault = kCombineTooManyLogits, r;
  r.start = start;
  r.end = end;
  r.first = r.end - r.nl;
  if (r.req == -1) return r;
  r.generating = seq > prefill;
  if (!r.generating) return r;
  r.write_last = p.num_new_sampled > 0 && seq - r.nl >= prefill;
  // The token goes to query position end - nl: with no logits that is the next row's first.
  if (r.write_last && r.nl == 0) return r.fault = kCombineNoLogits, r;
  r.drafts = r.nl - p.num_new_sampled;
  if (r.drafts < 0) r.drafts = 0;
  if ((r.write_last || r.drafts > 0) && (r.start < 0 || r.first < r.start || r.end > p.input_ids_size))
    r.fault = kCombineBadQuery;
  return r;
}

void vllm_combine_cpu(const VllmCombineParams& p);
const char* vllm_combine_cuda(const VllmCombineParams& p, void* stream);

}  // namespace sgl_meta
