// The checked source of a KV read (req_to_token rows, lengths, window starts,
// v2p), shared by the bindings that gather from it (kv_read_table,
// kv_indices). Torch-facing: include from binding.cpp files only.
#pragma once

#include <climits>
#include <optional>
#include <vector>

#include "common/checks.h"
#include "common/index_tensor.h"
#include "kv_read_table/params.h"

namespace sgl_meta {

using KvDT = Expect::DType;

// Checks shared by every gather from req_to_token; fills everything of the source but bs-derived
// sizes of the outputs. `bs` = req_pool_indices.numel().
template <typename T>
KvReadSource checked_source(const ArgChecker& check, const T& req_to_token,
                            const T& req_pool_indices, const T& seq_lens, int64_t page_size,
                            const std::optional<T>& v2p, const std::optional<T>& kv_start_idx,
                            int64_t seq_len_delta) {
  check.require(page_size >= 1, "page_size must be >= 1, got ", page_size);
  check.in_range(seq_len_delta, INT32_MIN, INT32_MAX, "seq_len_delta",
                 "a token count added to every seq_lens value");
  const T& dev = req_to_token;
  check.tensor(req_to_token, "req_to_token", {KvDT::kInt32, 2}, dev);
  check.tensor(req_pool_indices, "req_pool_indices", {KvDT::kIndex, 1}, dev);
  const int64_t bs = req_pool_indices.size(0);
  const char* bs_why = "req_pool_indices.numel()";
  check.tensor(seq_lens, "seq_lens", {KvDT::kIndex, 1, bs, 0, bs_why}, dev);
  check.optional_tensor(kv_start_idx, "kv_start_idx", {KvDT::kIndex, 1, bs, 0, bs_why}, dev);
  check.optional_tensor(v2p, "v2p", {KvDT::kInt64, 1}, dev);

  KvReadSource s;
  s.req_to_token = req_to_token.template const_data_ptr<int32_t>();
  s.req_to_token_stride = req_to_token.stride(0);
  s.pool_size = req_to_token.size(0);
  s.row_len = req_to_token.size(1);
  s.req_pool_indices = index_array_of(req_pool_indices);
  s.seq_lens = index_array_of(seq_lens);
  if (kv_start_idx) s.kv_start_idx = index_array_of(*kv_start_idx);
  if (v2p) {
    s.translate = true;
    s.v2p = v2p->template const_data_ptr<int64_t>();
    s.v2p_size = v2p->size(0);
  }
  s.bs = bs;
  s.seq_len_delta = seq_len_delta;
  s.page_size = page_size;
  s.div = KvDivisor::make(page_size);
  return s;
}

// The inputs of every such gather, for the no-alias check of their output.
template <typename T>
std::vector<ArgChecker::WrittenOf<T>> read_inputs(const T& req_to_token,
                                                  const T& req_pool_indices, const T& seq_lens,
                                                  const std::optional<T>& v2p,
                                                  const std::optional<T>& kv_start_idx) {
  return {ArgChecker::whole("req_to_token", &req_to_token),
          ArgChecker::whole("req_pool_indices", &req_pool_indices),
          ArgChecker::whole("seq_lens", &seq_lens),
          ArgChecker::whole("v2p", v2p ? &*v2p : nullptr),
          ArgChecker::whole("kv_start_idx", kv_start_idx ? &*kv_start_idx : nullptr)};
}

}  // namespace sgl_meta
