// build_trtllm_mha_page_table: torch binding (checks, params, dispatch).

#include "common/cuda_launch.h"
#include "common/index_tensor.h"
#include "common/op_binding.h"
#include "trtllm_mha_page_table/params.h"

namespace sgl_meta {
namespace {

using DT = Expect::DType;

}  // namespace

template <typename T>
void build_trtllm_mha_page_table(T req_to_token, T req_pool_indices, T cache_seqlens,
                                 T page_table, int64_t page_size,
                                 std::optional<T> swa_page_table, std::optional<T> full_to_swa) {
  const ArgChecker check("build_trtllm_mha_page_table");
  check.require(page_size >= 1, "page_size must be >= 1, got ", page_size);
  check.paired(swa_page_table, "swa_page_table", full_to_swa, "full_to_swa");

  const T& dev = req_to_token;
  check.tensor(req_to_token, "req_to_token", {DT::kInt32, 2}, dev);
  check.tensor(page_table, "page_table", {DT::kInt32, 2}, dev);
  check.rows_disjoint(page_table, "page_table", page_table.size(0), page_table.size(1));
  // The table's own shape is the batch and the width (SGLang's contract).
  const int64_t bs = page_table.size(0);
  const int64_t width = page_table.size(1);
  const char* bs_why = "page_table.size(0)";
  check.tensor(req_pool_indices, "req_pool_indices", {DT::kIndex, 1, bs, 0, bs_why}, dev);
  check.tensor(cache_seqlens, "cache_seqlens", {DT::kIndex, 1, bs, 0, bs_why}, dev);
  if (swa_page_table) {
    check.tensor(*swa_page_table, "swa_page_table",
                 {DT::kInt32, 2, bs, width, bs_why, "page_table.size(1)"}, dev);
    check.rows_disjoint(*swa_page_table, "swa_page_table", page_table.size(0),
                        page_table.size(1));
    // int32 or int64: SGLang's own tests pass both.
    check.tensor(*full_to_swa, "full_to_swa", {DT::kIndex, 1}, dev);
    check.require(full_to_swa->size(0) >= 1,
                  "full_to_swa must not be empty (slots are clamped into "
                  "[0, full_to_swa.numel() - 1]), got 0 elements");
  }
  if (bs == 0) return;  // documented no-op
  check.template disjoint<T>({{"page_table", &page_table, bs, width},
                  {"swa_page_table", swa_page_table ? &*swa_page_table : nullptr, bs, width}},
                 {ArgChecker::whole("req_to_token", &req_to_token),
                  ArgChecker::whole("req_pool_indices", &req_pool_indices),
                  ArgChecker::whole("cache_seqlens", &cache_seqlens),
                  ArgChecker::whole("full_to_swa", full_to_swa ? &*full_to_swa : nullptr)});

  TrtllmMhaPageTableParams p;
  p.req_pool_indices = index_array_of(req_pool_indices);
  p.cache_seqlens = index_array_of(cache_seqlens);
  p.req_to_token = req_to_token.template const_data_ptr<int32_t>();
  p.req_to_token_stride = req_to_token.stride(0);
  p.pool_size = req_to_token.size(0);
  p.page_table = page_table.template mutable_data_ptr<int32_t>();
  p.page_table_stride = page_table.stride(0);
  if (swa_page_table) {
    p.full_to_swa = index_array_of(*full_to_swa);
    p.full_to_swa_size = full_to_swa->size(0);
    p.swa_page_table = swa_page_table->template mutable_data_ptr<int32_t>();
    p.swa_page_table_stride = swa_page_table->stride(0);
  }
  p.bs = bs;
  // Page p gathers token p * page_size, which must lie in the row: p <
  // ceil(row_len / page_size) (written so no page_size can overflow).
  const int64_t row_len = req_to_token.size(1);
  const int64_t row_pages = row_len == 0 ? 0 : (row_len - 1) / page_size + 1;
  p.max_pages = width < row_pages ? width : row_pages;
  p.page = PageDivisor::make(page_size);

  run_on_device(check, dev, p, &build_trtllm_mha_page_table_cpu,
                SGL_CUDA_ONLY(&build_trtllm_mha_page_table_cuda));
}

}  // namespace sgl_meta

SGL_META_BIND(build_trtllm_mha_page_table)
