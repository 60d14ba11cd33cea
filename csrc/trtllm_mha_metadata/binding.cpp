// update_trtllm_mha_graph_metadata: torch binding (checks, params, dispatch).

#include <algorithm>
#include <climits>

#include "common/cuda_launch.h"
#include "common/index_tensor.h"
#include "ops.h"
#include "trtllm_mha_metadata/params.h"

namespace sgl_meta {

using DT = Expect::DType;

void update_trtllm_mha_graph_metadata(
    Tensor req_pool_indices, Tensor seq_lens, Tensor req_to_token,
    Tensor cache_seqlens, Tensor cu_seqlens_k, std::optional<Tensor> page_table, int64_t bs,
    int64_t seqlen_offset, int64_t max_seq_pages, int64_t page_size,
    std::optional<Tensor> swa_mapping, std::optional<Tensor> swa_page_table,
    std::optional<Tensor> out_cache_loc, std::optional<Tensor> swa_out_cache_loc,
    std::optional<Tensor> cu_seqlens_q, std::optional<Tensor> qlens, int64_t q_stride,
    int64_t q_mode, bool live_pages_only, bool skip_page_table) {
  const ArgChecker check("update_trtllm_mha_graph_metadata");
  check.non_negative(bs, "bs");
  if (bs == 0) return;  // documented no-op
  check.non_negative(max_seq_pages, "max_seq_pages");
  check.non_negative(q_stride, "q_stride");
  check.require(page_size >= 1, "page_size must be >= 1, got ", page_size);
  check.require(q_mode >= kQModeNone && q_mode <= kQModeStrided,
                "q_mode must be 0 (Q_MODE_NONE), 1 (Q_MODE_CUMSUM) or 2 "
                "(Q_MODE_STRIDED), got ", q_mode);
  // skip_page_table: the tables and swa_out_cache_loc are neither checked nor
  // touched (SGLang's unified pool passes None for them and refreshes them
  // elsewhere); without it the page table is required.
  check.require(skip_page_table || page_table.has_value(),
                "page_table is required (got None) unless skip_page_table=True");
  if (skip_page_table) {
    page_table.reset();
    swa_page_table.reset();
    swa_out_cache_loc.reset();
  }

  const Tensor& dev = req_to_token;
  check.tensor(req_to_token, "req_to_token", {DT::kInt32, 2}, dev);
  check.tensor(req_pool_indices, "req_pool_indices", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  check.tensor(seq_lens, "seq_lens", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  check.tensor(cache_seqlens, "cache_seqlens", {DT::kInt32, 1, bs, 0, "bs"}, dev);
  check.tensor(cu_seqlens_k, "cu_seqlens_k", {DT::kInt32, 1, bs + 1, 0, "bs + 1"}, dev);
  const Expect table{DT::kInt32, 2, bs, max_seq_pages, "bs", "max_seq_pages"};
  check.optional_tensor(page_table, "page_table", table, dev);
  check.optional_tensor(swa_page_table, "swa_page_table", table, dev);
  // int32 or int64 mappings, as SGLang's own tests pass both.
  check.optional_tensor(swa_mapping, "swa_mapping", {DT::kIndex, 1}, dev);
  check.optional_tensor(out_cache_loc, "out_cache_loc", {DT::kInt64, 1}, dev);
  check.optional_tensor(swa_out_cache_loc, "swa_out_cache_loc", {DT::kInt64, 1}, dev);

  // Every gathered slot p * page_size (p < max_seq_pages) lies in its row.
  // Tested as (max_seq_pages - 1) <= (ctx - 1) / page_size: the product itself
  // can overflow int64 for hostile scalars (page_size = 2**61 + 2**40 and
  // max_seq_pages = 5 wrapped negative, passed, and the gather segfaulted).
  const int64_t ctx = req_to_token.size(1);
  if (max_seq_pages > 0 && !skip_page_table)
    check.require(ctx > 0 && max_seq_pages - 1 <= (ctx - 1) / page_size,
                  "max_seq_pages = ", max_seq_pages, " pages of page_size = ", page_size,
                  " need req_to_token.size(1) > (max_seq_pages - 1) * page_size, got "
                  "req_to_token.size(1) = ", ctx);
  if (page_table) check.rows_disjoint(*page_table, "page_table", bs, max_seq_pages);
  if (swa_page_table) check.rows_disjoint(*swa_page_table, "swa_page_table", bs, max_seq_pages);
  // A swa_mapping without SWA outputs is accepted and unused (SGLang 0.5.23
  // passes its mapping on every call).
  check.require(swa_mapping.has_value() ||
                    !(swa_page_table.has_value() || swa_out_cache_loc.has_value()),
                "swa_mapping is required when swa_page_table or swa_out_cache_loc is given");
  if (q_mode != kQModeNone) {
    check.require(cu_seqlens_q.has_value(), "cu_seqlens_q is required when q_mode = ",
                  q_mode);
    check.tensor(*cu_seqlens_q, "cu_seqlens_q", {DT::kInt32, 1, bs + 1, 0, "bs + 1"}, dev);
  }
  check.require(q_mode != kQModeCumsum || qlens.has_value(),
                "qlens is required when q_mode = 1 (Q_MODE_CUMSUM)");
  check.optional_tensor(qlens, "qlens", {DT::kIndex, 1, bs, 0, "bs"}, dev);
  // cache_seqlens and cu_seqlens_q are int32: the scalars must fit it.
  check.in_range(seqlen_offset, INT32_MIN, INT32_MAX, "seqlen_offset",
                 "it is added into int32 cache_seqlens");
  if (q_mode == kQModeStrided)
    check.require(q_stride <= INT32_MAX / bs, "q_stride = ", q_stride,
                  " is too large: bs * q_stride must fit int32 cu_seqlens_q (bs = ", bs,
                  ")");
  const int64_t swa_out_len = swa_out_cache_loc ? swa_out_cache_loc->numel() : 0;
  const auto opt = [](std::optional<Tensor>& t) { return t ? &*t : nullptr; };
  check.outputs_disjoint({{"cache_seqlens", &cache_seqlens, 1, bs},
                          {"cu_seqlens_k", &cu_seqlens_k, 1, bs + 1},
                          {"page_table", opt(page_table), bs, max_seq_pages},
                          {"swa_page_table", opt(swa_page_table), bs, max_seq_pages},
                          {"swa_out_cache_loc", opt(swa_out_cache_loc), 1, swa_out_len},
                          {"cu_seqlens_q",
                           q_mode != kQModeNone ? &*cu_seqlens_q : nullptr, 1, bs + 1}});

  TrtllmMhaMetadataParams p;
  p.req_pool_indices = index_array_of(req_pool_indices);
  p.seq_lens = index_array_of(seq_lens);
  if (q_mode == kQModeCumsum) p.qlens = index_array_of(*qlens);
  p.req_to_token = req_to_token.const_data_ptr<int32_t>();
  p.req_to_token_stride = req_to_token.stride(0);
  p.pool_size = req_to_token.size(0);
  const bool uses_swa_mapping = swa_page_table.has_value() || swa_out_cache_loc.has_value();
  if (uses_swa_mapping) {
    p.swa_mapping = index_array_of(*swa_mapping);
    p.swa_mapping_size = swa_mapping->numel();
  }
  p.cache_seqlens = cache_seqlens.mutable_data_ptr<int32_t>();
  p.cu_seqlens_k = cu_seqlens_k.mutable_data_ptr<int32_t>();
  if (q_mode != kQModeNone) p.cu_seqlens_q = cu_seqlens_q->mutable_data_ptr<int32_t>();
  if (page_table) {
    p.page_table = page_table->mutable_data_ptr<int32_t>();
    p.page_table_stride = page_table->stride(0);
  }
  if (swa_page_table) {
    p.swa_page_table = swa_page_table->mutable_data_ptr<int32_t>();
    p.swa_page_table_stride = swa_page_table->stride(0);
  }
  if (swa_out_cache_loc) {
    p.swa_out_cache_loc = swa_out_cache_loc->mutable_data_ptr<int64_t>();
    p.swa_out_len = swa_out_cache_loc->numel();
    if (out_cache_loc) {
      p.out_cache_loc = out_cache_loc->const_data_ptr<int64_t>();
      p.num_out_tokens = std::min(p.swa_out_len, out_cache_loc->numel());
    }
  }
  p.bs = bs;
  p.seqlen_offset = seqlen_offset;
  p.max_seq_pages = max_seq_pages;
  p.page = PageDivisor::make(page_size);
  p.q_stride = q_stride;
  p.q_mode = static_cast<int>(q_mode);
  p.live_pages_only = live_pages_only;
  p.skip_page_table = skip_page_table;

  run_on_device(check, dev, p, &update_trtllm_mha_metadata_cpu,
                SGL_CUDA_ONLY(&update_trtllm_mha_metadata_cuda));
}

}  // namespace sgl_meta
