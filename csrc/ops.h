// Host entry points of every sgl_meta operator (torch stable-ABI types).
// Schemas and dispatch-key registration live in torch_bindings.cpp alone.
#pragma once

#include <optional>
#include <vector>

#include <torch/csrc/stable/tensor.h>

namespace sgl_meta {

using torch::stable::Tensor;

void update_trtllm_mha_graph_metadata(
    Tensor req_pool_indices, Tensor seq_lens, Tensor req_to_token,
    Tensor cache_seqlens, Tensor cu_seqlens_k, std::optional<Tensor> page_table, int64_t bs,
    int64_t seqlen_offset, int64_t max_seq_pages, int64_t page_size,
    std::optional<Tensor> swa_mapping, std::optional<Tensor> swa_page_table,
    std::optional<Tensor> out_cache_loc, std::optional<Tensor> swa_out_cache_loc,
    std::optional<Tensor> cu_seqlens_q, std::optional<Tensor> qlens, int64_t q_stride,
    int64_t q_mode, bool live_pages_only, bool skip_page_table,
    std::optional<Tensor> seqlen_offsets, std::optional<Tensor> v2p,
    std::optional<Tensor> swa_v2p);

// K >= 1 destination sets as tensor lists (an unused optional field's list is
// empty), one seqlen_offset per set: the multi-step draft backend's K - 1
// steps in one launch (each live page gathered once).
void update_trtllm_mha_graph_metadata_multi(
    Tensor req_pool_indices, Tensor seq_lens, Tensor req_to_token,
    std::vector<Tensor> cache_seqlens, std::vector<Tensor> cu_seqlens_k,
    std::vector<Tensor> page_table, std::vector<Tensor> swa_page_table,
    std::vector<Tensor> swa_out_cache_loc, std::vector<Tensor> cu_seqlens_q, int64_t bs,
    std::vector<int64_t> seqlen_offset, int64_t max_seq_pages, int64_t page_size,
    std::optional<Tensor> swa_mapping, std::optional<Tensor> out_cache_loc,
    std::optional<Tensor> qlens, int64_t q_stride, int64_t q_mode, bool live_pages_only,
    bool skip_page_table, std::optional<Tensor> seqlen_offsets, std::optional<Tensor> v2p,
    std::optional<Tensor> swa_v2p);

void build_trtllm_mha_page_table(Tensor req_to_token, Tensor req_pool_indices,
                                 Tensor cache_seqlens, Tensor page_table,
                                 int64_t page_size, std::optional<Tensor> swa_page_table,
                                 std::optional<Tensor> full_to_swa);

// fused_metadata_copy (one destination set) and fused_metadata_copy_multi (K
// sets as tensor lists; an unused optional field's list is empty).
void fused_metadata_copy(
    Tensor cache_seqlens_src, Tensor cu_seqlens_k_src, Tensor page_indices_src,
    Tensor dsa_cache_seqlens_src, std::optional<Tensor> seqlens_expanded_src,
    Tensor dsa_cu_seqlens_k_src, std::optional<Tensor> real_page_table_src,
    std::optional<Tensor> flashmla_num_splits_src,
    std::optional<Tensor> flashmla_metadata_src, Tensor cache_seqlens_dst,
    Tensor cu_seqlens_k_dst, Tensor page_table_1_dst, Tensor dsa_cache_seqlens_dst,
    std::optional<Tensor> seqlens_expanded_dst, Tensor dsa_cu_seqlens_k_dst,
    std::optional<Tensor> real_page_table_dst,
    std::optional<Tensor> flashmla_num_splits_dst,
    std::optional<Tensor> flashmla_metadata_dst, int64_t forward_mode, int64_t bs,
    int64_t max_len, int64_t max_seqlen_k, int64_t seqlens_expanded_size);

void fused_metadata_copy_multi(
    Tensor cache_seqlens_src, Tensor cu_seqlens_k_src, Tensor page_indices_src,
    Tensor dsa_cache_seqlens_src, std::optional<Tensor> seqlens_expanded_src,
    Tensor dsa_cu_seqlens_k_src, std::optional<Tensor> real_page_table_src,
    std::optional<Tensor> flashmla_num_splits_src,
    std::optional<Tensor> flashmla_metadata_src, std::vector<Tensor> cache_seqlens_dst,
    std::vector<Tensor> cu_seqlens_k_dst, std::vector<Tensor> page_table_1_dst,
    std::vector<Tensor> dsa_cache_seqlens_dst, std::vector<Tensor> seqlens_expanded_dst,
    std::vector<Tensor> dsa_cu_seqlens_k_dst, std::vector<Tensor> real_page_table_dst,
    std::vector<Tensor> flashmla_num_splits_dst,
    std::vector<Tensor> flashmla_metadata_dst, int64_t forward_mode, int64_t bs,
    int64_t max_len, int64_t max_seqlen_k, int64_t seqlens_expanded_size);

// KV read tables (unified memory pool, block tables, token streams): one
// gather-and-translate, as a page table or as a CSR token stream.
void kv_read_page_table(Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens,
                        Tensor out, int64_t page_size, int64_t max_pages,
                        std::optional<Tensor> v2p, std::optional<Tensor> kv_start_idx,
                        int64_t seq_len_delta, bool zero_tail);

void kv_read_token_stream(Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens,
                          Tensor indptr, Tensor out, int64_t page_size,
                          std::optional<Tensor> v2p, std::optional<Tensor> kv_start_idx,
                          int64_t seq_len_delta);

// fused_dsa_metadata: DSA replay metadata generated from the raw batch into K
// destination sets (tensor lists of length K; an unused optional field's list
// is empty).
void fused_dsa_metadata(Tensor seq_lens, Tensor req_pool_indices, Tensor req_to_token,
                        std::optional<Tensor> extend_seq_lens,
                        std::vector<Tensor> cache_seqlens, std::vector<Tensor> cu_seqlens_k,
                        std::vector<Tensor> seqlens_expanded,
                        std::vector<Tensor> dsa_cache_seqlens,
                        std::vector<Tensor> dsa_cu_seqlens_k, std::vector<Tensor> page_table_1,
                        std::vector<Tensor> real_page_table,
                        std::vector<Tensor> paged_mqa_ctx_lens_2d, int64_t forward_mode,
                        int64_t bs, int64_t max_seqlen_k, int64_t dsa_index_topk,
                        int64_t page_size, int64_t next_n, int64_t total_len,
                        bool static_extend_len);

}  // namespace sgl_meta
