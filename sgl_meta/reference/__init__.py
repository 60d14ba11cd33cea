"""Eager PyTorch references: the unfused paths the fused ops replace.

Device-agnostic and deliberately plain (one small aten op per step, as the
upstream eager code did), so they serve as the oracle in tests and as the
"before" column in benchmarks. Same keyword signatures as the public wrappers.
Out-of-range indices raise ``IndexError`` on CPU (device assert on CUDA).
One module per op family; every reference is importable from here.
"""

from .dsa_metadata_copy import fused_metadata_copy, fused_metadata_copy_multi
from .dsa_metadata import (
    fused_dsa_decode_metadata,
    fused_dsa_draft_extend_metadata,
    fused_dsa_metadata,
    fused_dsa_target_verify_metadata,
)
from .kv_indices import (
    build_draft_decode_kv_indices,
    build_kv_indices,
    create_flashinfer_kv_indices,
    create_flashmla_kv_indices,
)
from .kv_read_table import build_kv_read_table, build_kv_read_table_packed, kv_read_page_table, kv_read_token_stream
from .trtllm_mha_metadata import update_trtllm_mha_graph_metadata, update_trtllm_mha_graph_metadata_multi
from .trtllm_mha_page_table import build_trtllm_mha_page_table
from .vllm_block_table import vllm_compute_slot_mappings, vllm_gather_block_tables
from .vllm_flashinfer import vllm_copy_page_indices
from .vllm_input_batch import vllm_combine_sampled_and_draft_tokens, vllm_prepare_pos_seq_lens, vllm_prepare_step
from .vllm_spec_decode import vllm_prepare_decode_inputs, vllm_update_draft_inputs
from .flash_attention_metadata import (
    draft_extend_set_metadata,
    update_flash_attention_metadata,
    flash_attention_swa_spec_page_table,
    flash_attention_verify_expand,
    flash_attention_draft_decode_topk,
    normal_decode_set_metadata,
    prepare_swa_spec_page_table_triton,
)

__all__ = [
    "build_kv_indices",
    "build_draft_decode_kv_indices",
    "build_kv_read_table",
    "build_kv_read_table_packed",
    "build_trtllm_mha_page_table",
    "create_flashinfer_kv_indices",
    "create_flashmla_kv_indices",
    "fused_dsa_decode_metadata",
    "fused_dsa_draft_extend_metadata",
    "fused_dsa_metadata",
    "fused_dsa_target_verify_metadata",
    "fused_metadata_copy",
    "fused_metadata_copy_multi",
    "kv_read_page_table",
    "kv_read_token_stream",
    "update_trtllm_mha_graph_metadata",
    "update_trtllm_mha_graph_metadata_multi",
    "vllm_combine_sampled_and_draft_tokens",
    "vllm_compute_slot_mappings",
    "vllm_copy_page_indices",
    "vllm_gather_block_tables",
    "vllm_prepare_decode_inputs",
    "vllm_prepare_pos_seq_lens",
    "vllm_prepare_step",
    "vllm_update_draft_inputs",
    "draft_extend_set_metadata",
    "update_flash_attention_metadata",
    "flash_attention_swa_spec_page_table",
    "flash_attention_verify_expand",
    "flash_attention_draft_decode_topk",
    "normal_decode_set_metadata",
    "prepare_swa_spec_page_table_triton",
]
