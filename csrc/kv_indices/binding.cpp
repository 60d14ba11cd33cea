// build_kv_indices, build_draft_decode_kv_indices: torch bindings (checks, params, dispatch).
#include <climits>
#include <vector>

#include "common/cuda_launch.h"
#include "common/index_tensor.h"
#include "kv_indices/params.h"
#include "kv_read_table/source.h"
#include "common/op_binding.h"

namespace sgl_meta {
namespace {

// The Triton decode kernel's split-count arguments, both ops.
void check_split_scalars(const ArgChecker& check, int64_t num_head, int64_t num_kv_head,
                         int64_t max_kv_splits, int64_t device_core_count) {
  check.in_range(num_head, 1, INT32_MAX, "num_head", "query heads");
  check.in_range(num_kv_head, 1, num_head, "num_kv_head", "KV heads, at most num_head");
  check.in_range(max_kv_splits, 1, INT32_MAX, "max_kv_splits", "the largest split count");
  check.in_range(device_core_count, 1, INT32_MAX, "device_core_count", "the GPU's SM count");
}

KvSplits split_params(int32_t* num_kv_splits, int32_t* uneven_batch, int64_t num_group, int64_t num_head,
                      int64_t num_kv_head, int64_t max_kv_splits, int64_t device_core_count) {
  KvSplits k;
  k.num_kv_splits = num_kv_splits;
  k.uneven_batch = uneven_batch;
  k.num_group = num_group;
  k.num_head = num_head;
  k.num_kv_head = num_kv_head;
  k.max_kv_splits = max_kv_splits;
  k.device_core_count = device_core_count;
  return k;
}

}  // namespace

template <typename T>
void build_kv_indices(T req_to_token, T req_pool_indices, T seq_lens, T kv_indptr, T kv_indices,
                      bool write_indptr, std::optional<T> kv_start_idx, int64_t entry_page_size,
                      std::optional<T> token_mapping, std::optional<T> v2p, int64_t page_size,
                      std::optional<T> num_kv_splits, std::optional<T> uneven_batch,
                      int64_t num_group, int64_t num_head, int64_t num_kv_head,
                      int64_t max_kv_splits, int64_t device_core_count,
                      std::optional<T> qo_indptr, int64_t q_stride, std::optional<T> mask_indptr,
                      std::optional<T> extend_seq_lens, int64_t sliding_window,
                      std::optional<T> kv_offsets) {
  const ArgChecker check("build_kv_indices");
  check.non_negative(sliding_window, "sliding_window");
  // An id is entry * entry_page_size + offset: at most 2**31 * (2**31 - 1) in
  // magnitude, so int64 holds every id before the check that it fits kv_indices.
  check.in_range(entry_page_size, 1, INT32_MAX, "entry_page_size", "tokens per req_to_token entry");
  check.require(!v2p || entry_page_size == 1,
                "entry_page_size must be 1 with v2p (v2p translates a token-granular "
                "req_to_token), got ", entry_page_size);
  check.require(!(v2p && token_mapping), "token_mapping and v2p cannot be given together");
  check.require(!uneven_batch || num_kv_splits, "uneven_batch needs num_kv_splits");
  check.in_range(num_group, 1, INT32_MAX, "num_group", "split counts written per request");
  check_split_scalars(check, num_head, num_kv_head, max_kv_splits, device_core_count);
  KvIndicesParams p;
  p.src = checked_source(check, req_to_token, req_pool_indices, seq_lens, page_size, v2p,
                         kv_start_idx, 0);
  const int64_t bs = p.src.bs;
  const T& dev = req_to_token;
  check.tensor(kv_indptr, "kv_indptr", {KvDT::kIndex, 1, bs + 1, 0, "req_pool_indices.numel() + 1"},
               dev);
  check.tensor(kv_indices, "kv_indices", {KvDT::kIndex, 1}, dev);
  check.optional_tensor(extend_seq_lens, "extend_seq_lens", {KvDT::kIndex, 1, bs, 0, "req_pool_indices.numel()"},
                        dev);
  check.optional_tensor(token_mapping, "token_mapping", {KvDT::kIndex, 1}, dev);
  check.optional_tensor(num_kv_splits, "num_kv_splits",
                        {KvDT::kInt32, 1, bs * num_group, 0, "req_pool_indices.numel() * num_group"},
                        dev);
  check.optional_tensor(uneven_batch, "uneven_batch", {KvDT::kInt32, 1, 1}, dev);
  check.optional_tensor(kv_offsets, "kv_offsets", {KvDT::kIndex, 1, bs, 0, "req_pool_indices.numel()"}, dev);
  check.require(!mask_indptr || write_indptr,
                "mask_indptr needs write_indptr (its values are the running sum's)");
  check.optional_tensor(qo_indptr, "qo_indptr",
                        {KvDT::kIndex, 1, bs + 1, 0, "req_pool_indices.numel() + 1"}, dev);
  check.optional_tensor(mask_indptr, "mask_indptr",
                        {KvDT::kIndex, 1, bs + 1, 0, "req_pool_indices.numel() + 1"}, dev);
  check.in_range(q_stride, 0, INT32_MAX, "q_stride", "query tokens per row");
  if (qo_indptr || mask_indptr) {
    check.require(q_stride >= 1, "q_stride must be >= 1 with qo_indptr or mask_indptr, got ", q_stride);
    check.require(bs == 0 || q_stride <= INT32_MAX / bs, "req_pool_indices.numel() * q_stride = ", bs,
                  " * ", q_stride, " does not fit int32");
  }
  if (bs == 0) return;  // documented no-op

  std::vector<ArgChecker::WrittenOf<T>> inputs =
      read_inputs(req_to_token, req_pool_indices, seq_lens, v2p, kv_start_idx);
  inputs.push_back(ArgChecker::whole("token_mapping", token_mapping ? &*token_mapping : nullptr));
  inputs.push_back(ArgChecker::whole("extend_seq_lens", extend_seq_lens ? &*extend_seq_lens : nullptr));
  std::vector<ArgChecker::WrittenOf<T>> outputs = {ArgChecker::whole("kv_indices", &kv_indices)};
  if (write_indptr)
    outputs.push_back({"kv_indptr", &kv_indptr, 1, bs + 1});
  else
    inputs.push_back(ArgChecker::whole("kv_indptr", &kv_indptr));
  if (num_kv_splits) outputs.push_back({"num_kv_splits", &*num_kv_splits, 1, bs * num_group});
  if (uneven_batch) outputs.push_back({"uneven_batch", &*uneven_batch, 1, 1});
  if (qo_indptr) outputs.push_back({"qo_indptr", &*qo_indptr, 1, bs + 1});
  if (mask_indptr) outputs.push_back({"mask_indptr", &*mask_indptr, 1, bs + 1});
  if (kv_offsets) outputs.push_back({"kv_offsets", &*kv_offsets, 1, bs});
  check.template disjoint<T>(outputs, inputs);

  if (extend_seq_lens) p.extend_seq_lens = index_array_of(*extend_seq_lens);
  p.sliding_window = sliding_window;
  if (kv_offsets) {
    p.kv_offsets = kv_offsets->data_ptr();
    p.offsets64 = kv_offsets->scalar_type() == ScalarType::Long;
  }
  p.entry_page_size = entry_page_size;
  p.entry_div = PageDivisor::make(entry_page_size);
  const int64_t row_len = p.src.row_len;
  p.row_positions = row_len == 0 ? 0 : (entry_page_size > INT64_MAX / row_len ? INT64_MAX
                                                                               : row_len * entry_page_size);
  p.kv_indptr = kv_indptr.data_ptr();
  p.indptr64 = kv_indptr.scalar_type() == ScalarType::Long;
  p.write_indptr = write_indptr;
  p.indptr_max = p.indptr64 ? INT64_MAX : INT32_MAX;
  p.out = kv_indices.data_ptr();
  p.out64 = kv_indices.scalar_type() == ScalarType::Long;
  p.out_size = kv_indices.size(0);
  p.out_min = p.out64 ? INT64_MIN : INT32_MIN;
  p.out_max = p.out64 ? INT64_MAX : INT32_MAX;
  // Ids of a page reach entry * page_size + page_size - 1.
  p.max_entry = page_size - 1 > p.out_max ? -1 : (p.out_max - (page_size - 1)) / page_size;
  if (token_mapping) {
    p.token_mapping = index_array_of(*token_mapping);
    p.token_mapping_size = token_mapping->size(0);
  }
  p.splits = split_params(num_kv_splits ? num_kv_splits->template mutable_data_ptr<int32_t>() : nullptr,
                          uneven_batch ? uneven_batch->template mutable_data_ptr<int32_t>() : nullptr,
                          num_group, num_head, num_kv_head, max_kv_splits, device_core_count);
  if (qo_indptr) {
    p.qo_indptr = qo_indptr->data_ptr();
    p.qo64 = qo_indptr->scalar_type() == ScalarType::Long;
  }
  if (mask_indptr) {
    p.mask_indptr = mask_indptr->data_ptr();
    p.mask64 = mask_indptr->scalar_type() == ScalarType::Long;
    p.mask_max = p.mask64 ? INT64_MAX : INT32_MAX;
  }
  p.q_stride = q_stride;
  run_on_device(check, req_to_token, p, &build_kv_indices_cpu, SGL_CUDA_ONLY(&build_kv_indices_cuda));
}

template <typename T>
void build_draft_decode_kv_indices(T req_to_token, T req_pool_indices, T seq_lens, T positions,
                                   T kv_indices, T kv_indptr, int64_t topk, int64_t num_steps,
                                   int64_t page_size, int64_t window_size, int64_t sink_size,
                                   std::optional<T> num_kv_splits, int64_t num_head, int64_t num_kv_head,
                                   int64_t max_kv_splits, int64_t device_core_count) {
  const ArgChecker check("build_draft_decode_kv_indices");
  check.in_range(topk, 1, 1024, "topk", "branches per request");
  check.in_range(num_steps, 1, 64, "num_steps", "draft steps");
  check.in_range(page_size, 1, INT32_MAX, "page_size", "tokens per KV page");
  check.in_range(window_size, 0, INT32_MAX, "window_size", "the draft's recent window, 0 for none");
  check.in_range(sink_size, 0, INT32_MAX, "sink_size", "prefix tokens kept with a window");
  check_split_scalars(check, num_head, num_kv_head, max_kv_splits, device_core_count);
  DraftKvIndicesParams p;
  p.src = checked_source(check, req_to_token, req_pool_indices, seq_lens, page_size, std::optional<T>{},
                         std::optional<T>{}, 0);
  const int64_t bs = p.src.bs;
  check.require(bs <= INT32_MAX / topk, "req_pool_indices.numel() * topk = ", bs, " * ", topk,
                " does not fit int32");
  const T& dev = req_to_token;
  check.tensor(positions, "positions", {KvDT::kIndex, 1, bs * topk, 0, "req_pool_indices.numel() * topk"},
               dev);
  check.tensor(kv_indices, "kv_indices", {KvDT::kIndex, 2, num_steps, 0, "num_steps"}, dev);
  check.tensor(kv_indptr, "kv_indptr",
               {KvDT::kIndex, 2, num_steps, bs * topk + 1, "num_steps",
                "req_pool_indices.numel() * topk + 1"},
               dev);
  check.optional_tensor(num_kv_splits, "num_kv_splits",
                        {KvDT::kInt32, 1, bs * topk, 0, "req_pool_indices.numel() * topk"}, dev);
  check.rows_disjoint(kv_indices, "kv_indices", num_steps, kv_indices.size(1));
  check.rows_disjoint(kv_indptr, "kv_indptr", num_steps, bs * topk + 1);
  if (bs == 0) return;  // documented no-op

  std::vector<ArgChecker::WrittenOf<T>> inputs =
      read_inputs(req_to_token, req_pool_indices, seq_lens, std::optional<T>{}, std::optional<T>{});
  inputs.push_back(ArgChecker::whole("positions", &positions));
  std::vector<ArgChecker::WrittenOf<T>> outputs = {{"kv_indices", &kv_indices, num_steps, kv_indices.size(1)},
                                                  {"kv_indptr", &kv_indptr, num_steps, bs * topk + 1}};
  if (num_kv_splits) outputs.push_back({"num_kv_splits", &*num_kv_splits, 1, bs * topk});
  check.template disjoint<T>(outputs, inputs);

  p.positions = index_array_of(positions);
  p.topk = topk;
  p.num_steps = num_steps;
  p.cap = window_size > 0 ? window_size + sink_size : 0;
  p.sink = window_size > 0 ? sink_size : 0;
  p.out = kv_indices.data_ptr();
  p.out64 = kv_indices.scalar_type() == ScalarType::Long;
  p.out_stride = kv_indices.stride(0);
  p.out_width = kv_indices.size(1);
  p.cum_max = p.out_width / topk;
  p.indptr = kv_indptr.data_ptr();
  p.indptr64 = kv_indptr.scalar_type() == ScalarType::Long;
  p.indptr_stride = kv_indptr.stride(0);
  p.indptr_max = p.indptr64 ? INT64_MAX : INT32_MAX;
  p.splits = split_params(num_kv_splits ? num_kv_splits->template mutable_data_ptr<int32_t>() : nullptr, nullptr,
                          topk, num_head, num_kv_head, max_kv_splits, device_core_count);
  run_on_device(check, req_to_token, p, &build_draft_decode_kv_indices_cpu,
                SGL_CUDA_ONLY(&build_draft_decode_kv_indices_cuda));
}

}  // namespace sgl_meta

SGL_META_BIND(build_kv_indices)
SGL_META_BIND(build_draft_decode_kv_indices)
