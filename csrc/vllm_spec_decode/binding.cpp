// vllm_prepare_decode_inputs: torch binding (argument checks, then the kernel).
#include <climits>

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

}  // namespace sgl_meta

SGL_META_BIND(vllm_prepare_decode_inputs)
