// vllm_prepare_pos_seq_lens / vllm_combine_sampled_and_draft_tokens /
// vllm_prepare_step: torch bindings. The first and last run the step kernel
// of vllm_block_table (positions computed in the kernel); the combine has its own.
#include <optional>
#include <vector>

#include "common/op_binding.h"
#include "vllm_block_table/step_args.h"
#include "vllm_input_batch/params.h"

namespace sgl_meta {

using DT = Expect::DType;

template <typename T>
void vllm_prepare_pos_seq_lens(T idx_mapping, T query_start_loc, T num_computed_tokens, T pos,
                               T seq_lens) {
  const ArgChecker check("vllm_prepare_pos_seq_lens");
  VllmStepParams p;
  p.op = kVllmPreparePosSeqLens;
  vllm::Regions<T> inputs, outputs;
  vllm::rows(check, p, idx_mapping, &query_start_loc, inputs);
  vllm::computed_tokens(check, p, num_computed_tokens, idx_mapping, inputs);
  vllm::pos_seq_lens(check, p, pos, seq_lens, idx_mapping, outputs);
  vllm::run(check, idx_mapping, p, outputs, inputs);
}

template <typename T>
void vllm_prepare_step(T idx_mapping, T query_start_loc, T num_computed_tokens, T pos, T seq_lens,
                       std::vector<T> src_block_tables, T num_blocks, std::vector<T> dst_block_tables,
                       int64_t num_rows, T block_sizes, T slot_mapping_enabled, T dcp_sharded,
                       T slot_mappings, int64_t cp_rank, int64_t cp_size, int64_t cp_interleave,
                       int64_t pad_id, std::optional<T> sliding_window_reach,
                       bool mask_sliding_window) {
  const ArgChecker check("vllm_prepare_step");
  VllmStepParams p;
  p.op = kVllmPrepareStep;
  vllm::Regions<T> inputs, outputs;
  const T& dev = idx_mapping;
  vllm::rows(check, p, idx_mapping, &query_start_loc, inputs);
  vllm::computed_tokens(check, p, num_computed_tokens, dev, inputs);
  vllm::pos_seq_lens(check, p, pos, seq_lens, dev, outputs);
  vllm::source_tables(check, p, src_block_tables, "src_block_tables", dev, inputs);
  vllm::gather_args(check, p, num_blocks, dst_block_tables, "dst_block_tables", num_rows, dev, inputs,
                    outputs);
  vllm::cp_args(check, p, cp_rank, cp_size, cp_interleave, pad_id);
  vllm::slot_args(check, p, block_sizes, slot_mapping_enabled, dcp_sharded, slot_mappings, dev,
                  inputs, outputs);
  if (mask_sliding_window) {
    check.require(sliding_window_reach.has_value(),
                  "mask_sliding_window=True needs sliding_window_reach");
    vllm::mask_args(check, p, *sliding_window_reach, block_sizes, dev, inputs);
  } else if (sliding_window_reach) {
    vllm::group_array(check, p, *sliding_window_reach, "sliding_window_reach", DT::kInt32, dev,
                      inputs);
  }
  vllm::run(check, dev, p, outputs, inputs);
}

template <typename T>
void vllm_combine_sampled_and_draft_tokens(T input_ids, T idx_mapping, T last_sampled_tokens,
                                           T query_start_loc, T seq_lens, T prefill_len,
                                           T draft_tokens, T cu_num_logits, T logits_indices,
                                           int64_t num_new_sampled_tokens) {
  const ArgChecker check("vllm_combine_sampled_and_draft_tokens");
  check.require(num_new_sampled_tokens == 0 || num_new_sampled_tokens == 1,
                "num_new_sampled_tokens must be 0 or 1, got ", num_new_sampled_tokens);
  const T& dev = idx_mapping;
  check.tensor(idx_mapping, "idx_mapping", {DT::kIndex, 1}, dev);
  const int64_t n = idx_mapping.size(0);
  const char* n_why = "idx_mapping.numel()";
  const char* n1_why = "idx_mapping.numel() + 1";
  check.tensor(input_ids, "input_ids", {DT::kInt32, 1}, dev);
  const int64_t last_dim = last_sampled_tokens.dim();
  check.require(last_dim == 1 || last_dim == 2, "last_sampled_tokens must be 1-D or 2-D, got ",
                last_dim, "-D");
  check.tensor(last_sampled_tokens, "last_sampled_tokens", {DT::kIndex, last_dim, 0, 1}, dev);
  check.tensor(query_start_loc, "query_start_loc", {DT::kIndex, 1, n + 1, 0, n1_why}, dev);
  check.tensor(seq_lens, "seq_lens", {DT::kIndex, 1, n, 0, n_why}, dev);
  check.tensor(prefill_len, "prefill_len", {DT::kIndex, 1}, dev);
  check.tensor(draft_tokens, "draft_tokens", {DT::kIndex, 2}, dev);
  check.tensor(cu_num_logits, "cu_num_logits", {DT::kIndex, 1, n + 1, 0, n1_why}, dev);
  check.tensor(logits_indices, "logits_indices", {DT::kIndex, 1}, dev);
  if (n == 0) return;  // no rows: nothing is written
  check.template disjoint<T>(
      {ArgChecker::whole("input_ids", &input_ids), ArgChecker::whole("logits_indices", &logits_indices)},
      {ArgChecker::whole("idx_mapping", &idx_mapping),
       ArgChecker::whole("last_sampled_tokens", &last_sampled_tokens),
       ArgChecker::whole("query_start_loc", &query_start_loc), ArgChecker::whole("seq_lens", &seq_lens),
       ArgChecker::whole("prefill_len", &prefill_len), ArgChecker::whole("draft_tokens", &draft_tokens),
       ArgChecker::whole("cu_num_logits", &cu_num_logits)});

  VllmCombineParams p;
  p.n = n;
  p.idx_mapping = index_array_of(idx_mapping);
  p.last_sampled = index_array_of(last_sampled_tokens);
  p.last_stride = last_dim == 2 ? last_sampled_tokens.stride(0) : 1;
  p.query_start_loc = index_array_of(query_start_loc);
  p.seq_lens = index_array_of(seq_lens);
  p.prefill_len = index_array_of(prefill_len);
  p.draft_tokens = index_array_of(draft_tokens);
  p.draft_stride = draft_tokens.stride(0);
  p.steps = draft_tokens.size(1);
  p.cu_num_logits = index_array_of(cu_num_logits);
  p.input_ids = input_ids.template mutable_data_ptr<int32_t>();
  p.input_ids_size = input_ids.size(0);
  p.logits_indices = logits_indices.data_ptr();
  p.logits64 = logits_indices.scalar_type() == ScalarType::Long;
  p.logits_size = logits_indices.size(0);
  p.num_new_sampled = num_new_sampled_tokens;
  p.req_limit = std::min(std::min(prefill_len.size(0), last_sampled_tokens.size(0)), draft_tokens.size(0));
  run_on_device(check, dev, p, &vllm_combine_cpu, SGL_CUDA_ONLY(&vllm_combine_cuda));
}

}  // namespace sgl_meta

SGL_META_BIND(vllm_prepare_pos_seq_lens)
SGL_META_BIND(vllm_combine_sampled_and_draft_tokens)
SGL_META_BIND(vllm_prepare_step)
