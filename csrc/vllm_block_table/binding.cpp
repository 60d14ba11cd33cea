// vllm_compute_slot_mappings / vllm_gather_block_tables: torch bindings
// (checks, params, dispatch to the step kernel).
#include <optional>
#include <vector>

#include "common/op_binding.h"
#include "vllm_block_table/step_args.h"

namespace sgl_meta {

using DT = Expect::DType;

template <typename T>
void vllm_compute_slot_mappings(T idx_mapping, T query_start_loc, T positions,
                                std::vector<T> block_tables, T block_sizes, T slot_mapping_enabled,
                                T dcp_sharded, T slot_mappings, int64_t cp_rank, int64_t cp_size,
                                int64_t cp_interleave, int64_t pad_id) {
  const ArgChecker check("vllm_compute_slot_mappings");
  VllmStepParams p;
  p.op = kVllmSlotMappings;
  vllm::Regions<T> inputs, outputs;
  vllm::rows(check, p, idx_mapping, &query_start_loc, inputs);
  const T& dev = idx_mapping;
  check.tensor(positions, "positions", {DT::kIndex, 1}, dev);
  p.positions = index_array_of(positions);
  p.positions_given = true;
  p.token_cap = positions.size(0);
  inputs.push_back(ArgChecker::whole("positions", &positions));
  vllm::source_tables(check, p, block_tables, "block_tables", dev, inputs);
  vllm::cp_args(check, p, cp_rank, cp_size, cp_interleave, pad_id);
  vllm::slot_args(check, p, block_sizes, slot_mapping_enabled, dcp_sharded, slot_mappings, dev,
                  inputs, outputs);
  if (p.groups == 0) return;  // vLLM launches nothing without KV-cache groups
  vllm::run(check, dev, p, outputs, inputs);
}

template <typename T>
void vllm_gather_block_tables(T idx_mapping, std::vector<T> src_block_tables, T num_blocks,
                              std::vector<T> dst_block_tables, int64_t num_rows,
                              std::optional<T> num_computed_tokens,
                              std::optional<T> sliding_window_reach, std::optional<T> block_sizes) {
  const ArgChecker check("vllm_gather_block_tables");
  VllmStepParams p;
  p.op = kVllmGatherBlockTables;
  vllm::Regions<T> inputs, outputs;
  vllm::rows(check, p, idx_mapping, static_cast<const T*>(nullptr), inputs);
  const T& dev = idx_mapping;
  vllm::source_tables(check, p, src_block_tables, "src_block_tables", dev, inputs);
  vllm::gather_args(check, p, num_blocks, dst_block_tables, "dst_block_tables", num_rows, dev,
                    inputs, outputs);
  if (num_computed_tokens) {
    check.require(sliding_window_reach.has_value() && block_sizes.has_value(),
                  "num_computed_tokens (sliding-window masking) needs sliding_window_reach and "
                  "block_sizes");
    vllm::computed_tokens(check, p, *num_computed_tokens, dev, inputs);
    vllm::group_array(check, p, *block_sizes, "block_sizes", DT::kInt32, dev, inputs);
    vllm::mask_args(check, p, *sliding_window_reach, *block_sizes, dev, inputs);
  } else {
    // Not read without masking; still held to their description when given.
    if (sliding_window_reach)
      vllm::group_array(check, p, *sliding_window_reach, "sliding_window_reach", DT::kInt32, dev,
                        inputs);
    if (block_sizes) vllm::group_array(check, p, *block_sizes, "block_sizes", DT::kInt32, dev, inputs);
  }
  if (p.groups == 0) return;  // vLLM launches nothing without KV-cache groups
  vllm::run(check, dev, p, outputs, inputs);
}

}  // namespace sgl_meta

SGL_META_BIND(vllm_compute_slot_mappings)
SGL_META_BIND(vllm_gather_block_tables)
