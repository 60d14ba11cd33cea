// vllm_prepare_decode_inputs: the argument bundle shared by the CPU and CUDA
// kernels. vLLM 0.33's target-dependent speculator (EAGLE, MTP) prepares the
// draft decode steps' inputs after its prefill, every step with drafts
// (_prepare_decode_inputs_kernel in
// vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py).
//
// For r < n = draft_tokens.size(0):
//
//   input_ids[r] = draft_tokens[r, 0]                     (low 32 bits)
//   sample_src_positions[r] += 1
//   seq = target_seq_lens[r] - num_rejected[r]            (int32, wrapping)
//   advance: positions[r] = min(positions[r] + 1, max_model_len - 1)
//            seq = min(seq + 1, max_model_len)
//   seq_lens[r] = seq
//
// and query_start_loc[i] = min(i, n) for i <= max_num_reqs, seq_lens[i] = 0
// for n <= i < max_num_reqs. No value read indexes anything: there is no
// hostile device value, only the host-checked sizes.
#pragma once

#include <cstdint>

#include "common/index_array.h"

namespace sgl_meta {

struct VllmDecodeInputsParams {
  int64_t n = 0;
  IndexArray draft_tokens;  // element r at r * draft_stride
  int64_t draft_stride = 1;
  IndexArray target_seq_lens;  // [>= n]
  IndexArray num_rejected;     // [>= n]
  int32_t* input_ids = nullptr;           // [>= n]
  int64_t* positions = nullptr;           // [>= n], read and written
  int64_t* sample_src_positions = nullptr;  // [>= n], read and written
  int32_t* query_start_loc = nullptr;     // [>= max_num_reqs + 1]
  int32_t* seq_lens = nullptr;            // [>= max_num_reqs]
  int64_t max_model_len = 1;              // in [1, 2**31 - 1]
  int64_t max_num_reqs = 0;               // >= n
  bool advance = true;
};

// Row r's sequence length, as vLLM's int32 arithmetic computes it.
SGL_HD int32_t vllm_decode_seq_len(const VllmDecodeInputsParams& p, int64_t target, int64_t rejected) {
  int32_t seq = static_cast<int32_t>(static_cast<uint32_t>(target) - static_cast<uint32_t>(rejected));
  if (p.advance) {
    const int32_t next = static_cast<int32_t>(static_cast<uint32_t>(seq) + 1u);
    seq = next < p.max_model_len ? next : static_cast<int32_t>(p.max_model_len);
  }
  return seq;
}

// Row r's next position (advance only).
SGL_HD int64_t vllm_decode_position(const VllmDecodeInputsParams& p, int64_t position) {
  const int64_t next = static_cast<int64_t>(static_cast<uint64_t>(position) + 1u);
  return next < p.max_model_len - 1 ? next : p.max_model_len - 1;
}

void vllm_prepare_decode_inputs_cpu(const VllmDecodeInputsParams& p);
// CUDA launcher; nullptr on success, else the error text.
const char* vllm_prepare_decode_inputs_cuda(const VllmDecodeInputsParams& p, void* stream);

}  // namespace sgl_meta
