// Host-side checks and parameter filling shared by the bindings of the ops
// that run the vLLM step kernel (vllm_block_table/binding.cpp and
// vllm_input_batch/binding.cpp). Metadata reads only: no device values.
#pragma once

#include <algorithm>
#include <climits>
#include <optional>
#include <vector>

#include "common/checks.h"
#include "common/cuda_launch.h"
#include "common/index_tensor.h"
#include "vllm_block_table/params.h"

namespace sgl_meta {
namespace vllm {

using DT = Expect::DType;

template <typename T>
using Regions = std::vector<ArgChecker::WrittenOf<T>>;

// idx_mapping (sets n) and, when the op reads tokens, query_start_loc.
template <typename T>
void rows(const ArgChecker& check, VllmStepParams& p, const T& idx_mapping,
          const T* query_start_loc, Regions<T>& inputs) {
  check.tensor(idx_mapping, "idx_mapping", {DT::kIndex, 1}, idx_mapping);
  p.n = idx_mapping.size(0);
  p.idx_mapping = index_array_of(idx_mapping);
  p.req_limit = INT64_MAX;
  inputs.push_back(ArgChecker::whole("idx_mapping", &idx_mapping));
  if (query_start_loc != nullptr) {
    check.tensor(*query_start_loc, "query_start_loc",
                 {DT::kIndex, 1, p.n + 1, 0, "idx_mapping.numel() + 1"}, idx_mapping);
    p.query_start_loc = index_array_of(*query_start_loc);
    p.token_cap = INT64_MAX;
    inputs.push_back(ArgChecker::whole("query_start_loc", query_start_loc));
  }
}

template <typename T>
void computed_tokens(const ArgChecker& check, VllmStepParams& p, const T& num_computed_tokens,
                     const T& dev, Regions<T>& inputs) {
  check.tensor(num_computed_tokens, "num_computed_tokens", {DT::kIndex, 1}, dev);
  p.num_computed_tokens = index_array_of(num_computed_tokens);
  p.req_limit = std::min(p.req_limit, num_computed_tokens.size(0));
  inputs.push_back(ArgChecker::whole("num_computed_tokens", &num_computed_tokens));
}

// pos (1-D int32/int64) and seq_lens (int32, >= n).
template <typename T>
void pos_seq_lens(const ArgChecker& check, VllmStepParams& p, T& pos, T& seq_lens, const T& dev,
                  Regions<T>& outputs) {
  check.tensor(pos, "pos", {DT::kIndex, 1}, dev);
  check.tensor(seq_lens, "seq_lens", {DT::kInt32, 1, p.n, 0, "idx_mapping.numel()"}, dev);
  p.write_pos = true;
  p.pos = pos.data_ptr();
  p.pos64 = pos.scalar_type() == ScalarType::Long;
  p.seq_lens = seq_lens.template mutable_data_ptr<int32_t>();
  p.seq_lens_size = seq_lens.size(0);
  p.token_cap = std::min(p.token_cap, pos.size(0));
  outputs.push_back(ArgChecker::whole("pos", &pos));
  outputs.push_back(ArgChecker::whole("seq_lens", &seq_lens));
}

// The source block tables (one per group): int32 2-D, inner stride 1.
template <typename T>
void source_tables(const ArgChecker& check, VllmStepParams& p, const std::vector<T>& tables,
                   const char* name, const T& dev, Regions<T>& inputs) {
  check.require(tables.size() <= static_cast<size_t>(kVllmMaxGroups), name,
                " must hold at most ", kVllmMaxGroups, " tensors (one per KV-cache group), got ",
                tables.size());
  p.groups = static_cast<int>(tables.size());
  for (int g = 0; g < p.groups; ++g) {
    const T& t = tables[g];
    check.tensor(t, ArgName(name, g), {DT::kInt32, 2}, dev);
    VllmGroup& grp = p.group[g];
    grp.src = t.template const_data_ptr<int32_t>();
    grp.src_stride = t.stride(0);
    grp.src_cols = t.size(1);
    p.req_limit = std::min(p.req_limit, t.size(0));
    inputs.push_back(ArgChecker::whole(ArgName(name, g), &t));
  }
}

// A per-group array of G entries (int32 or bool), 1-D.
template <typename T>
void group_array(const ArgChecker& check, const VllmStepParams& p, const T& t, const char* name,
                 DT dtype, const T& dev, Regions<T>& inputs) {
  check.tensor(t, name, {dtype, 1, p.groups, 0, "the number of KV-cache groups"}, dev);
  inputs.push_back(ArgChecker::whole(name, &t));
}

// The gather's num_blocks and destination tables (num_rows rows each).
template <typename T>
void gather_args(const ArgChecker& check, VllmStepParams& p, const T& num_blocks,
                 std::vector<T>& dst, const char* dst_name, int64_t num_rows, const T& dev,
                 Regions<T>& inputs, Regions<T>& outputs) {
  check.non_negative(num_rows, "num_rows");
  check.list_size(dst, dst_name, p.groups, "one per source table");
  check.tensor(num_blocks, "num_blocks", {DT::kInt32, 2, p.groups, 0, "the number of KV-cache groups"},
               dev);
  if (p.groups > 0) p.req_limit = std::min(p.req_limit, num_blocks.size(1));
  inputs.push_back(ArgChecker::whole("num_blocks", &num_blocks));
  p.gather = true;
  p.num_rows = num_rows;
  const int32_t* nb = num_blocks.template const_data_ptr<int32_t>();
  const int64_t nb_stride = num_blocks.dim() == 2 ? num_blocks.stride(0) : 0;
  for (int g = 0; g < p.groups; ++g) {
    T& t = dst[g];
    check.tensor(t, ArgName(dst_name, g), {DT::kInt32, 2, num_rows, 0, "num_rows"}, dev);
    check.rows_disjoint(t, ArgName(dst_name, g), num_rows, t.size(1));
    VllmGroup& grp = p.group[g];
    grp.dst = t.template mutable_data_ptr<int32_t>();
    grp.dst_stride = t.stride(0);
    grp.dst_cols = t.size(1);
    grp.num_blocks = nb + g * nb_stride;
    outputs.push_back({ArgName(dst_name, g), &t, num_rows, t.size(1)});
  }
}

// Context-parallel scalars and pad_id.
inline void cp_args(const ArgChecker& check, VllmStepParams& p, int64_t cp_rank, int64_t cp_size,
                    int64_t cp_interleave, int64_t pad_id) {
  check.require(cp_size >= 1 && cp_size <= INT32_MAX, "cp_size must be in [1, 2**31 - 1], got ",
                cp_size);
  check.require(cp_rank >= 0 && cp_rank < cp_size, "cp_rank must be in [0, cp_size = ", cp_size,
                "), got ", cp_rank);
  check.require(cp_interleave >= 1 && cp_interleave <= INT32_MAX,
                "cp_interleave must be in [1, 2**31 - 1], got ", cp_interleave);
  p.cp_rank = cp_rank;
  p.cp_size = cp_size;
  p.cp_interleave = cp_interleave;
  p.pad_id = pad_id;
}

// The slot mappings' per-group arrays and output ([>= G, T] int64).
template <typename T>
void slot_args(const ArgChecker& check, VllmStepParams& p, const T& block_sizes,
               const T& slot_mapping_enabled, const T& dcp_sharded, T& slot_mappings, const T& dev,
               Regions<T>& inputs, Regions<T>& outputs) {
  group_array(check, p, block_sizes, "block_sizes", DT::kInt32, dev, inputs);
  group_array(check, p, slot_mapping_enabled, "slot_mapping_enabled", DT::kBool, dev, inputs);
  group_array(check, p, dcp_sharded, "dcp_sharded", DT::kBool, dev, inputs);
  check.tensor(slot_mappings, "slot_mappings",
               {DT::kInt64, 2, p.groups, 0, "the number of KV-cache groups"}, dev);
  const int64_t cols = slot_mappings.size(1);
  check.rows_disjoint(slot_mappings, "slot_mappings", p.groups, cols);
  p.slots = true;
  p.block_sizes = block_sizes.template const_data_ptr<int32_t>();
  p.slot_mapping_enabled = slot_mapping_enabled.template const_data_ptr<bool>();
  p.dcp_sharded = dcp_sharded.template const_data_ptr<bool>();
  p.slot_mappings = slot_mappings.template mutable_data_ptr<int64_t>();
  p.slot_stride = p.groups > 1 ? slot_mappings.stride(0) : cols;
  p.slot_cols = cols;
  p.token_cap = std::min(p.token_cap, cols);
  outputs.push_back({"slot_mappings", &slot_mappings, p.groups, cols});
}

// Masking arguments of the gather (sliding window): reach and block sizes of every group.
template <typename T>
void mask_args(const ArgChecker& check, VllmStepParams& p, const T& sliding_window_reach,
               const T& block_sizes, const T& dev, Regions<T>& inputs) {
  group_array(check, p, sliding_window_reach, "sliding_window_reach", DT::kInt32, dev, inputs);
  p.mask_sliding_window = true;
  p.sliding_window_reach = sliding_window_reach.template const_data_ptr<int32_t>();
  p.block_sizes = block_sizes.template const_data_ptr<int32_t>();
}

// Checks aliasing, then runs the kernel on the tensors' device.
template <typename T>
void run(const ArgChecker& check, const T& dev, const VllmStepParams& p, const Regions<T>& outputs,
         const Regions<T>& inputs) {
  check.template disjoint<T>(outputs, inputs);
  run_on_device(check, dev, p, &vllm_step_cpu, SGL_CUDA_ONLY(&vllm_step_cuda));
}

}  // namespace vllm
}  // namespace sgl_meta
