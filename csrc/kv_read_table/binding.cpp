// kv_read_page_table / kv_read_token_stream: torch bindings (checks, params,
// dispatch).
#include <climits>
#include <vector>

#include "common/cuda_launch.h"
#include "common/index_tensor.h"
#include "kv_read_table/source.h"
#include "common/op_binding.h"

namespace sgl_meta {

using DT = Expect::DType;

template <typename T>
void kv_read_page_table(T req_to_token, T req_pool_indices, T seq_lens, T out,
                        int64_t page_size, int64_t max_pages, std::optional<T> v2p,
                        std::optional<T> kv_start_idx, int64_t seq_len_delta, bool zero_tail) {
  const ArgChecker check("kv_read_page_table");
  check.non_negative(max_pages, "max_pages");
  KvReadPageTableParams p;
  p.src = checked_source(check, req_to_token, req_pool_indices, seq_lens, page_size, v2p,
                         kv_start_idx, seq_len_delta);
  const int64_t bs = p.src.bs;
  check.tensor(out, "out",
               {DT::kInt32, 2, bs, max_pages, "req_pool_indices.numel()", "max_pages"},
               req_to_token);
  check.rows_disjoint(out, "out", bs, max_pages);
  if (bs == 0) return;  // documented no-op
  check.template disjoint<T>({{"out", &out, bs, max_pages}},
                 read_inputs(req_to_token, req_pool_indices, seq_lens, v2p, kv_start_idx));

  p.out = out.template mutable_data_ptr<int32_t>();
  p.out_stride = out.stride(0);
  p.max_pages = max_pages;
  p.zero_tail = zero_tail;
  run_on_device(check, req_to_token, p, &kv_read_page_table_cpu,
                SGL_CUDA_ONLY(&kv_read_page_table_cuda));
}

template <typename T>
void kv_read_token_stream(T req_to_token, T req_pool_indices, T seq_lens, T indptr, T out,
                          int64_t page_size, std::optional<T> v2p,
                          std::optional<T> kv_start_idx, int64_t seq_len_delta) {
  const ArgChecker check("kv_read_token_stream");
  KvReadTokenStreamParams p;
  p.src = checked_source(check, req_to_token, req_pool_indices, seq_lens, page_size, v2p,
                         kv_start_idx, seq_len_delta);
  const int64_t bs = p.src.bs;
  check.tensor(indptr, "indptr", {DT::kIndex, 1, bs + 1, 0, "req_pool_indices.numel() + 1"},
               req_to_token);
  check.tensor(out, "out", {DT::kIndex, 1}, req_to_token);
  if (bs == 0) return;  // documented no-op
  std::vector<ArgChecker::WrittenOf<T>> inputs =
      read_inputs(req_to_token, req_pool_indices, seq_lens, v2p, kv_start_idx);
  inputs.push_back(ArgChecker::whole("indptr", &indptr));
  check.template disjoint<T>({ArgChecker::whole("out", &out)}, inputs);

  p.indptr = index_array_of(indptr);
  p.out = out.data_ptr();
  p.out64 = out.scalar_type() == ScalarType::Long;
  p.out_size = out.size(0);
  p.out_max = p.out64 ? INT64_MAX : INT32_MAX;
  // Ids of a page reach entry * page_size + page_size - 1.
  p.max_entry = page_size - 1 > p.out_max ? -1 : (p.out_max - (page_size - 1)) / page_size;
  run_on_device(check, req_to_token, p, &kv_read_token_stream_cpu,
                SGL_CUDA_ONLY(&kv_read_token_stream_cuda));
}

}  // namespace sgl_meta

SGL_META_BIND(kv_read_page_table)
SGL_META_BIND(kv_read_token_stream)
