// vLLM 0.33's target-dependent speculator (EAGLE, MTP,
// vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py): the
// argument bundles shared by the CPU and CUDA kernels of its two ops.
//
// vllm_prepare_decode_inputs: the draft decode steps' inputs after the
// speculator's prefill, every step with drafts (_prepare_decode_inputs_kernel).
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
//
// vllm_update_draft_inputs: after each draft step's sampling, the sampled
// tokens into the draft-token table and the next draft step's inputs
// (_update_draft_inputs_kernel, launched by update_draft_inputs). For
// r < n = draft_tokens.size(0), with step = current_draft_step (one element,
// read on the device; only when n > 0):
//
//   output_draft_tokens[r, step] = draft_tokens[r]
//   if step < num_speculative_steps - 1:              (another draft step follows)
//     sample_src_positions[r] += 1
//     input_ids[r] = draft_tokens[r]                  (low 32 bits)
//     next_input_hidden_states[r, :hidden] = hidden_states[r, :hidden]   (bits)
//     advance: positions[r] = min(positions[r] + 1, max_model_len - 1)
//              seq_lens[r] = min(seq_lens[r] + 1, max_model_len)          (int32, wrapping)
//
// step is the one device value that indexes: 0 <= step <
// output_draft_tokens.size(1), else a RuntimeError (CPU, before any write) or a
// named device assert (CUDA).
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

// A draft step's next position: min(position + 1, max_model_len - 1), the
// + 1 wrapping in int64 as vLLM's kernels compute it.
SGL_HD int64_t vllm_next_position(int64_t position, int64_t max_model_len) {
  const int64_t next = static_cast<int64_t>(static_cast<uint64_t>(position) + 1u);
  return next < max_model_len - 1 ? next : max_model_len - 1;
}

// A draft step's next sequence length: min(seq + 1, max_model_len), the + 1
// wrapping in int32 as vLLM's kernels compute their int32 seq_lens.
SGL_HD int32_t vllm_next_seq_len(int32_t seq, int64_t max_model_len) {
  const int32_t next = static_cast<int32_t>(static_cast<uint32_t>(seq) + 1u);
  return next < max_model_len ? next : static_cast<int32_t>(max_model_len);
}

// Row r's sequence length, as vLLM's int32 arithmetic computes it.
SGL_HD int32_t vllm_decode_seq_len(const VllmDecodeInputsParams& p, int64_t target, int64_t rejected) {
  const int32_t seq = static_cast<int32_t>(static_cast<uint32_t>(target) - static_cast<uint32_t>(rejected));
  return p.advance ? vllm_next_seq_len(seq, p.max_model_len) : seq;
}

void vllm_prepare_decode_inputs_cpu(const VllmDecodeInputsParams& p);
// CUDA launcher; nullptr on success, else the error text.
const char* vllm_prepare_decode_inputs_cuda(const VllmDecodeInputsParams& p, void* stream);

struct VllmDraftInputsParams {
  int64_t n = 0;
  IndexArray draft_tokens;         // [>= n]
  IndexArray current_draft_step;   // one element
  int64_t* output_draft_tokens = nullptr;  // [>= n, cols], rows by out_stride
  int64_t out_stride = 0;
  int64_t cols = 0;                        // output_draft_tokens.size(1): step's bound
  const char* hidden_states = nullptr;     // [>= n] rows of row_bytes, src_stride bytes apart
  char* next_input_hidden_states = nullptr;  // [>= n] rows, dst_stride bytes apart
  int64_t src_stride = 0, dst_stride = 0;  // bytes
  int64_t row_bytes = 0;                   // hidden * element size
  // The widest word (16, 8, 4 or 2 bytes) that divides both rows' addresses,
  // their strides and row_bytes: the row is copied in words of this size.
  int32_t word_bytes = 16;
  int32_t* input_ids = nullptr;             // [>= n]
  int64_t* positions = nullptr;             // [>= n], read and written (advance)
  int32_t* seq_lens = nullptr;              // [>= n], read and written (advance)
  int64_t* sample_src_positions = nullptr;  // [>= n], read and written
  int64_t max_model_len = 1;                // in [1, 2**31 - 1]
  int64_t num_speculative_steps = 1;        // >= 1
  bool advance = true;
};

// Whether step indexes a column of output_draft_tokens.
SGL_HD bool vllm_draft_step_ok(const VllmDraftInputsParams& p, int64_t step) {
  return static_cast<uint64_t>(step) < static_cast<uint64_t>(p.cols);
}

void vllm_update_draft_inputs_cpu(const VllmDraftInputsParams& p);
// CUDA launcher; nullptr on success, else the error text.
const char* vllm_update_draft_inputs_cuda(const VllmDraftInputsParams& p, void* stream);

}  // namespace sgl_meta
