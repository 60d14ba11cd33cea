"""Eager PyTorch references: the unfused paths the fused ops replace.

Device-agnostic and deliberately plain (one small aten op per step, as the
upstream eager code did), so they serve as the oracle in tests and as the
"before" column in benchmarks. Same keyword signatures as the public wrappers.
Out-of-range indices raise ``IndexError`` on CPU (device assert on CUDA).
One module per op family; every reference is importable from here.
"""

from .dsa_copy import fused_metadata_copy, fused_metadata_copy_multi
from .trtllm_mha import (
    build_trtllm_mha_page_table,
    update_trtllm_mha_graph_metadata,
    update_trtllm_mha_graph_metadata_multi,
)

__all__ = [
    "build_trtllm_mha_page_table",
    "fused_metadata_copy",
    "fused_metadata_copy_multi",
    "update_trtllm_mha_graph_metadata",
    "update_trtllm_mha_graph_metadata_multi",
]
