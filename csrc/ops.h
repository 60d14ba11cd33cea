// Host entry points of every sgl_meta operator (torch stable-ABI types).
// Schemas and dispatch-key registration live in torch_bindings.cpp alone.
#pragma once

#include <optional>

#include <torch/csrc/stable/tensor.h>

namespace sgl_meta {

using torch::stable::Tensor;

void update_trtllm_mha_graph_metadata(
    Tensor req_pool_indices, Tensor seq_lens, Tensor req_to_token,
    Tensor cache_seqlens, Tensor cu_seqlens_k, Tensor page_table, int64_t bs,
    int64_t seqlen_offset, int64_t max_seq_pages, int64_t page_size,
    std::optional<Tensor> swa_mapping, std::optional<Tensor> swa_page_table,
    std::optional<Tensor> out_cache_loc, std::optional<Tensor> swa_out_cache_loc,
    std::optional<Tensor> cu_seqlens_q, std::optional<Tensor> qlens, int64_t q_stride,
    int64_t q_mode, bool live_pages_only);

void build_trtllm_mha_page_table(Tensor req_to_token, Tensor req_pool_indices,
                                 Tensor cache_seqlens, Tensor page_table,
                                 int64_t page_size, std::optional<Tensor> swa_page_table,
                                 std::optional<Tensor> full_to_swa);

}  // namespace sgl_meta
