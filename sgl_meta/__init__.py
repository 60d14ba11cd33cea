"""sgl_meta: one-launch CUDA-graph metadata refresh ops for LLM serving.

Importing the package registers ``torch.ops.sgl_meta.*`` (CUDA and CPU kernels,
from the compiled ``sgl_meta._C``) and their fake implementations. The keyword
wrappers below are the public API; :mod:`sgl_meta.reference` holds the eager
PyTorch paths they replace.
"""

from pathlib import Path

from . import _fake  # noqa: F401  (registers fake impls for torch.compile)
from . import reference  # noqa: F401  (sgl_meta.reference: the eager paths)
from .dsa_metadata_copy import (
    FORWARD_MODE_DECODE,
    FORWARD_MODE_DRAFT_EXTEND,
    FORWARD_MODE_TARGET_VERIFY,
    fused_metadata_copy,
    fused_metadata_copy_cuda,
    fused_metadata_copy_multi,
    fused_metadata_copy_multi_cuda,
)
from .dsa_metadata import (
    fused_dsa_decode_metadata,
    fused_dsa_draft_extend_metadata,
    fused_dsa_metadata,
    fused_dsa_target_verify_metadata,
)
from .kv_read_table import (
    build_kv_read_table,
    build_kv_read_table_packed,
    kv_read_page_table,
    kv_read_token_stream,
)
from .plan import Plan, bind
from .trtllm_mha_metadata import (
    Q_MODE_CUMSUM,
    Q_MODE_NONE,
    Q_MODE_STRIDED,
    build_trtllm_mha_page_table,
    update_trtllm_mha_graph_metadata,
    update_trtllm_mha_graph_metadata_multi,
)

__version__ = (Path(__file__).with_name("VERSION")).read_text().strip()

__all__ = [
    "Plan",
    "bind",
    "FORWARD_MODE_DECODE",
    "FORWARD_MODE_DRAFT_EXTEND",
    "FORWARD_MODE_TARGET_VERIFY",
    "Q_MODE_CUMSUM",
    "Q_MODE_NONE",
    "Q_MODE_STRIDED",
    "build_kv_read_table",
    "build_kv_read_table_packed",
    "build_trtllm_mha_page_table",
    "fused_dsa_decode_metadata",
    "fused_dsa_draft_extend_metadata",
    "fused_dsa_metadata",
    "fused_dsa_target_verify_metadata",
    "fused_metadata_copy",
    "fused_metadata_copy_cuda",
    "fused_metadata_copy_multi",
    "fused_metadata_copy_multi_cuda",
    "kv_read_page_table",
    "kv_read_token_stream",
    "update_trtllm_mha_graph_metadata",
    "update_trtllm_mha_graph_metadata_multi",
]
