// vllm_combine_sampled_and_draft_tokens on CUDA (no torch headers): one warp
// per row (a row writes at most draft_tokens.size(1) + 1 logits indices and
// tokens); the grid depends on n only.
#include <climits>

#include "common/cuda_utils.cuh"
#include "vllm_input_batch/params.h"

namespace sgl_meta {
namespace {

constexpr int kThreads = 128;
constexpr int kRowsPerBlock = kThreads / 32;
#define COMBINE_OP "vllm_combine_sampled_and_draft_tokens"

// (values, not the parameter struct: see SGL_FAILURE_PATH)
SGL_FAILURE_PATH void fail_row(int64_t b, VllmCombineRow r, IndexArray cu_num_logits, int64_t req_limit,
                               int64_t logits_size, int64_t max_logits, int64_t input_ids_size) {
  const bool idx_mapping_in_range = r.fault != kCombineBadRequest;
  SGL_DEVICE_CHECK(idx_mapping_in_range, COMBINE_OP ": idx_mapping[%lld] = %lld is outside [-1, %lld)",
                   (long long)b, (long long)r.req, (long long)req_limit);
  const bool cu_num_logits_valid = r.fault != kCombineBadLogits;
  SGL_DEVICE_CHECK(cu_num_logits_valid,
                   COMBINE_OP ": cu_num_logits[%lld] = %lld, cu_num_logits[%lld] = %lld must be "
                              "non-negative, non-decreasing and within logits_indices (%lld entries)",
                   (long long)b, (long long)cu_num_logits[b], (long long)(b + 1),
                   (long long)cu_num_logits[b + 1], (long long)logits_size);
  const bool num_logits_within_draft_steps = r.fault != kCombineTooManyLogits;
  SGL_DEVICE_CHECK(num_logits_within_draft_steps,
                   COMBINE_OP ": row %lld has %lld logits, more than draft_tokens.size(1) + "
                              "num_new_sampled_tokens = %lld",
                   (long long)b, (long long)r.nl, (long long)max_logits);
  const bool query_holds_logits = r.fault != kCombineBadQuery;
  SGL_DEVICE_CHECK(query_holds_logits,
                   COMBINE_OP ": query_start_loc of row %lld = [%lld, %lld) cannot hold its %lld logits "
                              "inside input_ids (%lld tokens)",
                   (long long)b, (long long)r.start, (long long)r.end, (long long)r.nl,
                   (long long)input_ids_size);
  const bool row_writing_last_token_has_logits = r.fault != kCombineNoLogits;
  SGL_DEVICE_CHECK(row_writing_last_token_has_logits,
                   COMBINE_OP
                   ": row %lld writes its last sampled token (seq_lens past prefill_len) but has "
                   "no logits (cu_num_logits[%lld] == cu_num_logits[%lld] = %lld)",
                   (long long)b, (long long)b, (long long)(b + 1), (long long)r.lo);
  __trap();
}

__global__ void __launch_bounds__(kThreads) vllm_combine_kernel(const __grid_constant__ VllmCombineParams p) {
  const int64_t b = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (b >= p.n) return;
  const VllmCombineRow r = vllm_combine_row(p, b, lane);
  if (r.fault != kCombineOk)
    fail_row(b, r, p.cu_num_logits, p.req_limit, p.logits_size, p.steps + p.num_new_sampled, p.input_ids_size);
  for (int64_t i = lane; i < r.nl; i += 32) {
    if (p.logits64)
      static_cast<int64_t*>(p.logits_indices)[r.lo + i] = r.first + i;
    else
      static_cast<int32_t*>(p.logits_indices)[r.lo + i] = static_cast<int32_t>(r.first + i);
  }
  if (r.write_last && lane == 0) p.input_ids[r.first] = static_cast<int32_t>(r.last);
  if (lane < r.drafts) p.input_ids[r.end - r.drafts + lane] = static_cast<int32_t>(r.draft);
  for (int64_t i = lane + 32; i < r.drafts; i += 32)
    p.input_ids[r.end - r.drafts + i] = static_cast<int32_t>(p.draft_tokens[r.req * p.draft_stride + i]);
}

}  // namespace

const char* vllm_combine_cuda(const VllmCombineParams& p, void* stream) {
  const int64_t blocks = (p.n + kRowsPerBlock - 1) / kRowsPerBlock;
  if (blocks > INT32_MAX) return "too many rows for one launch";
  vllm_combine_kernel<<<static_cast<unsigned>(blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(p);
  const cudaError_t err = cudaGetLastError();
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

}  // namespace sgl_meta
