// The one place where sgl_meta's operator schemas are defined. Every op
// writes caller-owned buffers (annotated `(x!)`) and returns nothing, so it can
// be captured in a CUDA graph and traced by torch.compile (auto-functionalized
// from the schema). The Python side reads each op's arguments from its schema
// (sgl_meta/_op.py); each family's binding.cpp defines the host function and
// binds it with SGL_META_BIND (common/op_binding.h).
#include <torch/csrc/stable/library.h>

STABLE_TORCH_LIBRARY(sgl_meta, m) {
  m.def(
      "update_trtllm_mha_graph_metadata("
      "Tensor req_pool_indices, Tensor seq_lens, Tensor req_to_token, "
      "Tensor(a!) cache_seqlens, Tensor(b!) cu_seqlens_k, Tensor(c!)? page_table, "
      "int bs, int seqlen_offset, int max_seq_pages, int page_size, "
      "Tensor? swa_mapping=None, Tensor(d!)? swa_page_table=None, "
      "Tensor? out_cache_loc=None, Tensor(e!)? swa_out_cache_loc=None, "
      "Tensor(f!)? cu_seqlens_q=None, Tensor? qlens=None, int q_stride=0, "
      "int q_mode=0, bool live_pages_only=False, bool skip_page_table=False, "
      "Tensor? seqlen_offsets=None, Tensor? v2p=None, Tensor? swa_v2p=None) -> ()");
  // The same update into K >= 1 destination sets (multi-step draft backends):
  // one seqlen_offset per set; an unused optional field passes an empty list.
  m.def(
      "update_trtllm_mha_graph_metadata_multi("
      "Tensor req_pool_indices, Tensor seq_lens, Tensor req_to_token, "
      "Tensor(a!)[] cache_seqlens, Tensor(b!)[] cu_seqlens_k, Tensor(c!)[] page_table, "
      "Tensor(d!)[] swa_page_table, Tensor(e!)[] swa_out_cache_loc, "
      "Tensor(f!)[] cu_seqlens_q, int bs, int[] seqlen_offset, int max_seq_pages, "
      "int page_size, Tensor? swa_mapping=None, Tensor? out_cache_loc=None, "
      "Tensor? qlens=None, int q_stride=0, int q_mode=0, bool live_pages_only=False, "
      "bool skip_page_table=False, Tensor? seqlen_offsets=None, Tensor? v2p=None, "
      "Tensor? swa_v2p=None) -> ()");
  m.def(
      "build_trtllm_mha_page_table("
      "Tensor req_to_token, Tensor req_pool_indices, Tensor cache_seqlens, "
      "Tensor(a!) page_table, int page_size, Tensor(b!)? swa_page_table=None, "
      "Tensor? full_to_swa=None) -> ()");
  // DSA backend: argument names and order are SGLang's, so its callers switch
  // by import; a column bound or size the forward mode does not use may be None. The multi op's destination sets are tensor lists
  // of one length K; an unused optional field passes an empty list. (Mutable
  // `Tensor(x!)[]` is the long-supported form for auto-functionalization;
  // `Tensor(x!)[]?` also works on torch 2.14 but only became traceable in 2025.)
  m.def(
      "fused_metadata_copy("
      "Tensor cache_seqlens_src, Tensor cu_seqlens_k_src, Tensor page_indices_src, "
      "Tensor dsa_cache_seqlens_src, Tensor? seqlens_expanded_src, "
      "Tensor dsa_cu_seqlens_k_src, Tensor? real_page_table_src, "
      "Tensor? flashmla_num_splits_src, Tensor? flashmla_metadata_src, "
      "Tensor(a!) cache_seqlens_dst, Tensor(b!) cu_seqlens_k_dst, "
      "Tensor(c!) page_table_1_dst, Tensor(d!) dsa_cache_seqlens_dst, "
      "Tensor(e!)? seqlens_expanded_dst, Tensor(f!) dsa_cu_seqlens_k_dst, "
      "Tensor(g!)? real_page_table_dst, Tensor(h!)? flashmla_num_splits_dst, "
      "Tensor(i!)? flashmla_metadata_dst, int forward_mode, int bs, int? max_len, "
      "int? max_seqlen_k, int? seqlens_expanded_size) -> ()");
  m.def(
      "fused_metadata_copy_multi("
      "Tensor cache_seqlens_src, Tensor cu_seqlens_k_src, Tensor page_indices_src, "
      "Tensor dsa_cache_seqlens_src, Tensor? seqlens_expanded_src, "
      "Tensor dsa_cu_seqlens_k_src, Tensor? real_page_table_src, "
      "Tensor? flashmla_num_splits_src, Tensor? flashmla_metadata_src, "
      "Tensor(a!)[] cache_seqlens_dst, Tensor(b!)[] cu_seqlens_k_dst, "
      "Tensor(c!)[] page_table_1_dst, Tensor(d!)[] dsa_cache_seqlens_dst, "
      "Tensor(e!)[] seqlens_expanded_dst, Tensor(f!)[] dsa_cu_seqlens_k_dst, "
      "Tensor(g!)[] real_page_table_dst, Tensor(h!)[] flashmla_num_splits_dst, "
      "Tensor(i!)[] flashmla_metadata_dst, int forward_mode, int bs, int? max_len, "
      "int? max_seqlen_k, int? seqlens_expanded_size) -> ()");
  // KV read tables (docs/operators/kv_read_table.md): bs = req_pool_indices.numel(); v2p int64.
  m.def(
      "kv_read_page_table("
      "Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, Tensor(a!) out, "
      "int page_size, int max_pages, Tensor? v2p=None, Tensor? kv_start_idx=None, "
      "int seq_len_delta=0, bool zero_tail=False) -> ()");
  m.def(
      "kv_read_token_stream("
      "Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, Tensor indptr, "
      "Tensor(a!) out, int page_size, Tensor? v2p=None, Tensor? kv_start_idx=None, "
      "int seq_len_delta=0) -> ()");
  // KV index streams (docs/operators/kv_indices.md): FlashInfer / Triton-backend kv_indices, with
  // kv_indptr (write_indptr) and the Triton decode split counts in the same launch.
  m.def(
      "build_kv_indices("
      "Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, Tensor(a!) kv_indptr, "
      "Tensor(b!) kv_indices, bool write_indptr, Tensor? kv_start_idx=None, "
      "int entry_page_size=1, Tensor? token_mapping=None, Tensor? v2p=None, int page_size=1, "
      "Tensor(c!)? num_kv_splits=None, Tensor(d!)? uneven_batch=None, int num_group=1, "
      "int num_head=1, int num_kv_head=1, int max_kv_splits=1, int device_core_count=1) -> ()");
  // DSA metadata generation (docs/operators/dsa_metadata.md): the replay metadata computed from the raw
  // batch straight into K destination sets (lists as in the multi copy).
  m.def(
      "fused_dsa_metadata("
      "Tensor seq_lens, Tensor req_pool_indices, Tensor req_to_token, "
      "Tensor? extend_seq_lens, Tensor(a!)[] cache_seqlens, Tensor(b!)[] cu_seqlens_k, "
      "Tensor(c!)[] seqlens_expanded, Tensor(d!)[] dsa_cache_seqlens, "
      "Tensor(e!)[] dsa_cu_seqlens_k, Tensor(f!)[] page_table_1, "
      "Tensor(g!)[] real_page_table, Tensor(h!)[] paged_mqa_ctx_lens_2d, "
      "int forward_mode, int bs, int max_seqlen_k, int dsa_index_topk, int page_size, "
      "int? next_n, int? total_len, bool static_extend_len) -> ()");
}
