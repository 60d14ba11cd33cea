// vllm_combine_sampled_and_draft_tokens on CPU: same results as the CUDA
// kernel; every hostile value raises std::runtime_error before anything is
// written, where CUDA trips a device-side assert.

#include "common/errors.h"
#include "vllm_input_batch/params.h"

namespace sgl_meta {
namespace {

constexpr const char* kOp = "vllm_combine_sampled_and_draft_tokens";

void check_row(const VllmCombineParams& p, int64_t b, const VllmCombineRow& r) {
  switch (r.fault) {
    case kCombineBadRequest:
      raise_error(kOp, "idx_mapping[", b, "] = ", r.req, " is outside [-1, ", p.req_limit, ")");
    case kCombineBadLogits:
      raise_error(kOp, "cu_num_logits[", b, "] = ", p.cu_num_logits[b], ", cu_num_logits[", b + 1,
                  "] = ", p.cu_num_logits[b + 1],
                  " must be non-negative, non-decreasing and within logits_indices (", p.logits_size,
                  " entries)");
    case kCombineTooManyLogits:
      raise_error(
          kOp, "row ", b, " has ", r.nl,
          " logits, more than draft_tokens.size(1) + num_new_sampled_tokens = ", p.steps + p.num_new_sampled);
    case kCombineBadQuery:
      raise_error(kOp, "query_start_loc of row ", b, " = [", r.start, ", ", r.end, ") cannot hold its ", r.nl,
                  " logits inside input_ids (", p.input_ids_size, " tokens)");
    case kCombineNoLogits:
      raise_error(kOp, "row ", b,
                  " writes its last sampled token (seq_lens past prefill_len) but has no logits (",
                  "cu_num_logits[", b, "] == cu_num_logits[", b + 1, "] = ", r.lo, ")");
    default: return;
  }
}

}  // namespace

void vllm_combine_cpu(const VllmCombineParams& p) {
  for (int64_t b = 0; b < p.n; ++b) check_row(p, b, vllm_combine_row(p, b));
  for (int64_t b = 0; b < p.n; ++b) {
    const VllmCombineRow r = vllm_combine_row(p, b);
    for (int64_t i = 0; i < r.nl; ++i) {
      if (p.logits64)
        static_cast<int64_t*>(p.logits_indices)[r.lo + i] = r.first + i;
      else
        static_cast<int32_t*>(p.logits_indices)[r.lo + i] = static_cast<int32_t>(r.first + i);
    }
    if (r.write_last) p.input_ids[r.first] = static_cast<int32_t>(r.last);
    for (int64_t i = 0; i < r.drafts; ++i)
      p.input_ids[r.end - r.drafts + i] =
          static_cast<int32_t>(p.draft_tokens[r.req * p.draft_stride + i]);
  }
}

}  // namespace sgl_meta
