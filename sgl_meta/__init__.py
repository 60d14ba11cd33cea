"""sgl_meta: one-launch CUDA-graph metadata refresh ops for LLM serving.

Importing the package registers ``torch.ops.sgl_meta.*`` (CUDA and CPU kernels,
from the compiled ``sgl_meta._C``) and their fake implementations. The keyword
wrappers below are the public API; :mod:`sgl_meta.reference` holds the eager
PyTorch paths they replace.
"""

from pathlib import Path

from . import _fake  # noqa: F401  (registers fake impls for torch.compile)
from . import reference  # noqa: F401  (sgl_meta.reference: the eager paths)
from .dsa_copy import (
    FORWARD_MODE_DECODE,
    FORWARD_MODE_DRAFT_EXTEND,
    FORWARD_MODE_TARGET_VERIFY,
    fused_metadata_copy,
    fused_metadata_copy_cuda,
    fused_metadata_copy_multi,
    fused_metadata_copy_multi_cuda,
)
from .plan import Plan, bind
from .trtllm_mha import (
    Q_MODE_CUMSUM,
    Q_MODE_NONE,
    Q_MODE_STRIDED,
    build_trtllm_mha_page_table,
    update_trtllm_mha_graph_metadata,
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
    "build_trtllm_mha_page_table",
    "fused_metadata_copy",
    "fused_metadata_copy_cuda",
    "fused_metadata_copy_multi",
    "fused_metadata_copy_multi_cuda",
    "update_trtllm_mha_graph_metadata",
]
