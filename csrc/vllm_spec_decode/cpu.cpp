// The vLLM speculator's ops on CPU: same results as the CUDA kernels. A
// hostile current_draft_step raises std::runtime_error before anything is
// written, where CUDA trips a device-side assert.
#include <cstring>

#include "common/errors.h"
#include "vllm_spec_decode/params.h"

namespace sgl_meta {

void vllm_prepare_decode_inputs_cpu(const VllmDecodeInputsParams& p) {
  for (int64_t r = 0; r < p.n; ++r) {
    p.input_ids[r] = static_cast<int32_t>(p.draft_tokens[r * p.draft_stride]);
    p.sample_src_positions[r] = static_cast<int64_t>(static_cast<uint64_t>(p.sample_src_positions[r]) + 1u);
    if (p.advance) p.positions[r] = vllm_next_position(p.positions[r], p.max_model_len);
    p.seq_lens[r] = vllm_decode_seq_len(p, p.target_seq_lens[r], p.num_rejected[r]);
  }
  for (int64_t i = 0; i <= p.max_num_reqs; ++i) p.query_start_loc[i] = static_cast<int32_t>(i < p.n ? i : p.n);
  for (int64_t i = p.n; i < p.max_num_reqs; ++i) p.seq_lens[i] = 0;
}

void vllm_update_draft_inputs_cpu(const VllmDraftInputsParams& p) {
  if (p.n == 0) return;  // as on CUDA: no request, no block reads the step
  const int64_t step = p.current_draft_step[0];
  if (!vllm_draft_step_ok(p, step)) {
    raise_error("vllm_update_draft_inputs", "current_draft_step = ", step, " is outside [0, ", p.cols,
                ") (output_draft_tokens.size(1))");
  }
  const bool next_step = step < p.num_speculative_steps - 1;
  for (int64_t r = 0; r < p.n; ++r) {
    const int64_t draft = p.draft_tokens[r];
    p.output_draft_tokens[r * p.out_stride + step] = draft;
    if (!next_step) continue;
    p.sample_src_positions[r] = static_cast<int64_t>(static_cast<uint64_t>(p.sample_src_positions[r]) + 1u);
    p.input_ids[r] = static_cast<int32_t>(draft);
    // Bytes as they are: a copy, never a conversion (NaN payloads included).
    // An empty row may come with null pointers, which memcpy must not be given.
    if (p.row_bytes > 0)
      std::memcpy(p.next_input_hidden_states + r * p.dst_stride, p.hidden_states + r * p.src_stride,
                  static_cast<size_t>(p.row_bytes));
    if (p.advance) {
      p.positions[r] = vllm_next_position(p.positions[r], p.max_model_len);
      p.seq_lens[r] = vllm_next_seq_len(p.seq_lens[r], p.max_model_len);
    }
  }
}

}  // namespace sgl_meta
