// The vLLM speculator's ops, vllm_prepare_decode_inputs and
// vllm_update_draft_inputs: torch bindings (argument checks, then the kernel).
#include <climits>
#include <cstdint>

#include "common/cuda_launch.h"
#include "common/index_tensor.h"
#include "common/op_binding.h"
#include "vllm_spec_decode/params.h"

namespace sgl_meta {

using DT = Expect::DType;

template <typename T>
void vllm_prepare_decode_inputs(T draft_tokens, T target_seq_lens, T num_rejected, T input_ids, T positions,
                                T sample_src_positions, T query_start_loc, T seq_lens, int64_t max_model_len,
                                int64_t max_num_reqs, bool advance_draft_positions) {
  const ArgChecker check("vllm_prepare_decode_inputs");
  const T& dev = draft_tokens;
  // draft_tokens: dtype and device only, then rank and width here. Only
  // element [r] or [r, 0] is read, through stride(0): vLLM passes column 0 of
  // its [max_num_reqs, steps] buffer, a 1-D view whose stride is the row's.
  check.tensor(draft_tokens, "draft_tokens", {DT::kIndex, Expect::kAnyDim}, dev);
  const int64_t draft_dim = draft_tokens.dim();
  check.require(draft_dim == 1 || draft_dim == 2, "draft_tokens must be 1-D or 2-D, got ", draft_dim, "-D");
  const int64_t n = draft_tokens.size(0);
  if (draft_dim == 2 && n > 0)
    check.require(draft_tokens.size(1) >= 1, "draft_tokens.size(1) must be >= 1, got ", draft_tokens.size(1));
  const char* n_why = "draft_tokens.size(0)";
  check.in_range(max_model_len, 1, INT32_MAX, "max_model_len", "seq_lens are int32");
  check.require(max_num_reqs >= n, "max_num_reqs must be >= draft_tokens.size(0) = ", n, ", got ", max_num_reqs);
  check.require(max_num_reqs < INT32_MAX, "max_num_reqs must be < 2**31 - 1, got ", max_num_reqs);
  check.tensor(target_seq_lens, "target_seq_lens", {DT::kIndex, 1, n, 0, n_why}, dev);
  check.tensor(num_rejected, "num_rejected", {DT::kIndex, 1, n, 0, n_why}, dev);
  check.tensor(input_ids, "input_ids", {DT::kInt32, 1, n, 0, n_why}, dev);
  check.tensor(positions, "positions", {DT::kInt64, 1, n, 0, n_why}, dev);
  check.tensor(sample_src_positions, "sample_src_positions", {DT::kInt64, 1, n, 0, n_why}, dev);
  check.tensor(query_start_loc, "query_start_loc", {DT::kInt32, 1, max_num_reqs + 1, 0, "max_num_reqs + 1"}, dev);
  check.tensor(seq_lens, "seq_lens", {DT::kInt32, 1, max_num_reqs, 0, "max_num_reqs"}, dev);
  // Outputs: each written region apart from the others and from what is read
  // (positions and sample_src_positions are both, row by row, in one thread).
  auto part = [](ArgName name, const T* t, int64_t len) { return ArgChecker::WrittenOf<T>{name, t, 1, len}; };
  check.template disjoint<T>(
      {part("input_ids", &input_ids, n), part("positions", &positions, advance_draft_positions ? n : 0),
       part("sample_src_positions", &sample_src_positions, n),
       part("query_start_loc", &query_start_loc, max_num_reqs + 1), part("seq_lens", &seq_lens, max_num_reqs)},
      {ArgChecker::WrittenOf<T>{"draft_tokens", &draft_tokens, n, 1}, part("target_seq_lens", &target_seq_lens, n),
       part("num_rejected", &num_rejected, n)});

  VllmDecodeInputsParams p;
  p.n = n;
  p.draft_tokens = index_array_of(draft_tokens);
  p.draft_stride = n > 1 ? draft_tokens.stride(0) : 1;
  p.target_seq_lens = index_array_of(target_seq_lens);
  p.num_rejected = index_array_of(num_rejected);
  p.input_ids = input_ids.template mutable_data_ptr<int32_t>();
  p.positions = positions.template mutable_data_ptr<int64_t>();
  p.sample_src_positions = sample_src_positions.template mutable_data_ptr<int64_t>();
  p.query_start_loc = query_start_loc.template mutable_data_ptr<int32_t>();
  p.seq_lens = seq_lens.template mutable_data_ptr<int32_t>();
  p.max_model_len = max_model_len;
  p.max_num_reqs = max_num_reqs;
  p.advance = advance_draft_positions;
  run_on_device(check, dev, p, &vllm_prepare_decode_inputs_cpu, SGL_CUDA_ONLY(&vllm_prepare_decode_inputs_cuda));
}

// The widest word (16, 8, 4 or 2 bytes) dividing every address the row copy
// touches: both tensors' first rows, their row strides (when a second row is
// copied) and the row's byte count. Elements are at least 2 bytes, and torch
// aligns every element to its size, so 2 always divides.
inline int32_t copy_word_bytes(const void* src, const void* dst, int64_t src_stride, int64_t dst_stride,
                               int64_t row_bytes, int64_t rows) {
  uint64_t bits = reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) |
                  static_cast<uint64_t>(row_bytes);
  if (rows > 1) bits |= static_cast<uint64_t>(src_stride) | static_cast<uint64_t>(dst_stride);
  for (int32_t w = 16; w > 2; w /= 2)
    if (bits % static_cast<uint64_t>(w) == 0) return w;
  return 2;
}

template <typename T>
void vllm_update_draft_inputs(T draft_tokens, T current_draft_step, T hidden_states, T output_draft_tokens,
                              T next_input_hidden_states, T input_ids, T positions, T seq_lens,
                              T sample_src_positions, int64_t max_model_len, int64_t num_speculative_steps,
                              bool advance_draft_positions) {
  const ArgChecker check("vllm_update_draft_inputs");
  const T& dev = draft_tokens;
  check.tensor(draft_tokens, "draft_tokens", {DT::kIndex, 1}, dev);
  const int64_t n = draft_tokens.size(0);
  const char* n_why = "draft_tokens.size(0)";
  // The step: read on the device (a CUDA graph replays it with the value of
  // the moment), one element of any rank (vLLM's is 0-d).
  check.tensor(current_draft_step, "current_draft_step", {DT::kIndex, Expect::kAnyDim}, dev);
  check.require(current_draft_step.numel() == 1, "current_draft_step must hold one element, got ",
                current_draft_step.numel());
  check.tensor(hidden_states, "hidden_states", {DT::kFloating, 2, n, 0, n_why}, dev);
  const int64_t hidden = hidden_states.size(1);
  check.require(hidden <= INT32_MAX, "hidden_states.size(1) must be <= 2**31 - 1, got ", hidden);
  check.tensor(next_input_hidden_states, "next_input_hidden_states", {DT::kFloating, 2, n, hidden, n_why,
               "hidden_states.size(1)"}, dev);
  check.same_dtype(hidden_states, "hidden_states", next_input_hidden_states, "next_input_hidden_states");
  check.tensor(output_draft_tokens, "output_draft_tokens", {DT::kInt64, 2, n, 0, n_why}, dev);
  check.tensor(input_ids, "input_ids", {DT::kInt32, 1, n, 0, n_why}, dev);
  check.tensor(positions, "positions", {DT::kInt64, 1, n, 0, n_why}, dev);
  check.tensor(seq_lens, "seq_lens", {DT::kInt32, 1, n, 0, n_why}, dev);
  check.tensor(sample_src_positions, "sample_src_positions", {DT::kInt64, 1, n, 0, n_why}, dev);
  check.in_range(max_model_len, 1, INT32_MAX, "max_model_len", "seq_lens are int32");
  check.require(num_speculative_steps >= 1, "num_speculative_steps must be >= 1, got ", num_speculative_steps);
  // Outputs: each written region apart from the others and from what is read
  // (positions, seq_lens and sample_src_positions are both, row by row, in one
  // thread). The step's column is known only on the device: the whole of each
  // row of output_draft_tokens counts as written.
  const int64_t cols = output_draft_tokens.size(1);
  check.rows_disjoint(output_draft_tokens, "output_draft_tokens", n, cols);
  check.rows_disjoint(next_input_hidden_states, "next_input_hidden_states", n, hidden);
  auto part = [](ArgName name, const T* t, int64_t rows, int64_t len) {
    return ArgChecker::WrittenOf<T>{name, t, rows, len};
  };
  check.template disjoint<T>(
      {part("output_draft_tokens", &output_draft_tokens, n, cols),
       part("next_input_hidden_states", &next_input_hidden_states, n, hidden), part("input_ids", &input_ids, 1, n),
       part("positions", &positions, 1, advance_draft_positions ? n : 0),
       part("seq_lens", &seq_lens, 1, advance_draft_positions ? n : 0),
       part("sample_src_positions", &sample_src_positions, 1, n)},
      {part("draft_tokens", &draft_tokens, 1, n), part("current_draft_step", &current_draft_step, 1, 1),
       part("hidden_states", &hidden_states, n, hidden)});

  VllmDraftInputsParams p;
  p.n = n;
  p.draft_tokens = index_array_of(draft_tokens);
  p.current_draft_step = index_array_of(current_draft_step);
  p.output_draft_tokens = output_draft_tokens.template mutable_data_ptr<int64_t>();
  p.out_stride = n > 1 ? output_draft_tokens.stride(0) : 0;
  p.cols = cols;
  p.hidden_states = static_cast<const char*>(hidden_states.data_ptr());
  p.next_input_hidden_states = static_cast<char*>(next_input_hidden_states.data_ptr());
  const int64_t esz = element_size(hidden_states.scalar_type());
  p.src_stride = n > 1 ? hidden_states.stride(0) * esz : 0;
  p.dst_stride = n > 1 ? next_input_hidden_states.stride(0) * esz : 0;
  p.row_bytes = hidden * esz;
  p.word_bytes = copy_word_bytes(p.hidden_states, p.next_input_hidden_states, p.src_stride, p.dst_stride,
                                 p.row_bytes, n);
  p.input_ids = input_ids.template mutable_data_ptr<int32_t>();
  p.positions = positions.template mutable_data_ptr<int64_t>();
  p.seq_lens = seq_lens.template mutable_data_ptr<int32_t>();
  p.sample_src_positions = sample_src_positions.template mutable_data_ptr<int64_t>();
  p.max_model_len = max_model_len;
  p.num_speculative_steps = num_speculative_steps;
  p.advance = advance_draft_positions;
  run_on_device(check, dev, p, &vllm_update_draft_inputs_cpu, SGL_CUDA_ONLY(&vllm_update_draft_inputs_cuda));
}

}  // namespace sgl_meta

SGL_META_BIND(vllm_prepare_decode_inputs)
SGL_META_BIND(vllm_update_draft_inputs)
