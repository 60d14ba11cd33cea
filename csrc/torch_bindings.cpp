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
  // kv_indptr (write_indptr), the Triton decode split counts and a verify batch's qo_indptr /
  // mask_indptr in the same launch.
  m.def(
      "build_kv_indices("
      "Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, Tensor(a!) kv_indptr, "
      "Tensor(b!) kv_indices, bool write_indptr, Tensor? kv_start_idx=None, "
      "int entry_page_size=1, Tensor? token_mapping=None, Tensor? v2p=None, int page_size=1, "
      "Tensor(c!)? num_kv_splits=None, Tensor(d!)? uneven_batch=None, int num_group=1, "
      "int num_head=1, int num_kv_head=1, int max_kv_splits=1, int device_core_count=1, "
      "Tensor(e!)? qo_indptr=None, int q_stride=0, Tensor(f!)? mask_indptr=None, "
      "Tensor? extend_seq_lens=None, int sliding_window=0, Tensor(g!)? kv_offsets=None) -> ()");
  // EAGLE multi-step draft decode's KV ids and row starts, every step in one
  // launch, with the Triton backend's split counts (docs/operators/kv_indices.md).
  m.def(
      "build_draft_decode_kv_indices("
      "Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, Tensor positions, "
      "Tensor(a!) kv_indices, Tensor(b!) kv_indptr, int topk, int num_steps, int page_size=1, "
      "int window_size=0, int sink_size=0, Tensor(c!)? num_kv_splits=None, int num_head=1, "
      "int num_kv_head=1, int max_kv_splits=1, int device_core_count=1) -> ()");
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
  // vLLM 0.33 Model Runner V2 per-step metadata (docs/operators/vllm_block_table.md,
  // vllm_input_batch.md): block tables are one int32 tensor per KV-cache group;
  // the per-group arrays are vLLM's own small device tensors.
  m.def(
      "vllm_compute_slot_mappings("
      "Tensor idx_mapping, Tensor query_start_loc, Tensor positions, Tensor[] block_tables, "
      "Tensor block_sizes, Tensor slot_mapping_enabled, Tensor dcp_sharded, "
      "Tensor(a!) slot_mappings, int cp_rank=0, int cp_size=1, int cp_interleave=1, "
      "int pad_id=-1) -> ()");
  m.def(
      "vllm_gather_block_tables("
      "Tensor idx_mapping, Tensor[] src_block_tables, Tensor num_blocks, "
      "Tensor(a!)[] dst_block_tables, int num_rows, Tensor? num_computed_tokens=None, "
      "Tensor? sliding_window_reach=None, Tensor? block_sizes=None) -> ()");
  m.def(
      "vllm_prepare_pos_seq_lens("
      "Tensor idx_mapping, Tensor query_start_loc, Tensor num_computed_tokens, "
      "Tensor(a!) pos, Tensor(b!) seq_lens) -> ()");
  m.def(
      "vllm_combine_sampled_and_draft_tokens("
      "Tensor(a!) input_ids, Tensor idx_mapping, Tensor last_sampled_tokens, "
      "Tensor query_start_loc, Tensor seq_lens, Tensor prefill_len, Tensor draft_tokens, "
      "Tensor cu_num_logits, Tensor(b!) logits_indices, int num_new_sampled_tokens=1) -> ()");
  m.def(
      "vllm_copy_page_indices("
      "Tensor(a!) page_indices, Tensor block_table, Tensor cu_num_blocks) -> ()");
  m.def(
      "vllm_prepare_decode_inputs("
      "Tensor draft_tokens, Tensor target_seq_lens, Tensor num_rejected, Tensor(a!) input_ids, "
      "Tensor(b!) positions, Tensor(c!) sample_src_positions, Tensor(d!) query_start_loc, "
      "Tensor(e!) seq_lens, int max_model_len, int max_num_reqs, "
      "bool advance_draft_positions=True) -> ()");
  m.def(
      "vllm_update_draft_inputs("
      "Tensor draft_tokens, Tensor current_draft_step, Tensor hidden_states, "
      "Tensor(a!) output_draft_tokens, Tensor(b!) next_input_hidden_states, Tensor(c!) input_ids, "
      "Tensor(d!) positions, Tensor(e!) seq_lens, Tensor(f!) sample_src_positions, int max_model_len, "
      "int num_speculative_steps, bool advance_draft_positions=True) -> ()");
  m.def(
      "vllm_prepare_step("
      "Tensor idx_mapping, Tensor query_start_loc, Tensor num_computed_tokens, "
      "Tensor(a!) pos, Tensor(b!) seq_lens, Tensor[] src_block_tables, Tensor num_blocks, "
      "Tensor(c!)[] dst_block_tables, int num_rows, Tensor block_sizes, "
      "Tensor slot_mapping_enabled, Tensor dcp_sharded, Tensor(d!) slot_mappings, "
      "int cp_rank=0, int cp_size=1, int cp_interleave=1, int pad_id=-1, "
      "Tensor? sliding_window_reach=None, bool mask_sliding_window=False) -> ()");
  // FlashAttention (FA3/FA4) backend metadata (docs/operators/flash_attention_metadata.md):
  // K >= 1 destination sets, one seq_len_delta each; an unused optional list passes [].
  m.def(
      "update_flash_attention_metadata("
      "Tensor(a!)[] cache_seqlens, Tensor(b!)[] cu_seqlens_k, Tensor(c!)[] page_table, "
      "Tensor(d!)[] swa_page_table, Tensor(e!)? cu_seqlens_q, Tensor(f!)? swa_out_cache_loc, "
      "Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, int[] seq_len_delta, "
      "int bs, int max_seq_pages, int page_size, Tensor? extend_seq_lens=None, "
      "Tensor? full_to_swa_index_mapping=None, Tensor? full_v2p=None, Tensor? swa_v2p=None, "
      "Tensor? out_cache_loc=None, bool skip_page_table=False, bool zero_tail=False) -> ()");
  m.def(
      "flash_attention_swa_spec_page_table("
      "Tensor(a!) page_table_dst, Tensor page_table_a, Tensor page_table_b, "
      "Tensor seq_len_a, Tensor seq_len_b, int speculative_num_draft_tokens) -> ()");
  m.def(
      "flash_attention_verify_expand("
      "Tensor(a!) page_table, Tensor(b!) cache_seqlens, Tensor(c!) cu_seqlens_k, "
      "Tensor custom_mask, Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, "
      "int bs, int num_draft_tokens, int mask_rows) -> ()");
  m.def(
      "flash_attention_draft_decode_topk("
      "Tensor(a!)[] cache_seqlens, Tensor(b!)[] page_table, Tensor(c!)[] expand_cache_seqlens, "
      "Tensor(d!)[] expand_page_table, Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, "
      "Tensor out_cache_loc, int bs, int topk, int num_steps, int[] decode_length, int page_size, "
      "int max_seq_pages) -> ()");
}
