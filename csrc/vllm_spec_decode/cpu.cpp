// vllm_prepare_decode_inputs on CPU: same results as the CUDA kernel.
#include "vllm_spec_decode/params.h"

namespace sgl_meta {

void vllm_prepare_decode_inputs_cpu(const VllmDecodeInputsParams& p) {
  for (int64_t r = 0; r < p.n; ++r) {
    p.input_ids[r] = static_cast<int32_t>(p.draft_tokens[r * p.draft_stride]);
    p.sample_src_positions[r] = static_cast<int64_t>(static_cast<uint64_t>(p.sample_src_positions[r]) + 1u);
    if (p.advance) p.positions[r] = vllm_decode_position(p, p.positions[r]);
    p.seq_lens[r] = vllm_decode_seq_len(p, p.target_seq_lens[r], p.num_rejected[r]);
  }
  for (int64_t i = 0; i <= p.max_num_reqs; ++i) p.query_start_loc[i] = static_cast<int32_t>(i < p.n ? i : p.n);
  for (int64_t i = p.n; i < p.max_num_reqs; ++i) p.seq_lens[i] = 0;
}

}  // namespace sgl_meta
