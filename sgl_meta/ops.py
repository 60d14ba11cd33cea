"""All public wrappers in one namespace (kept for ``from sgl_meta.ops import ...``).

The wrappers live one file per op family: :mod:`sgl_meta.trtllm_mha`,
:mod:`sgl_meta.dsa_copy`.
"""

from .dsa_copy import (  # noqa: F401
    FORWARD_MODE_DECODE,
    FORWARD_MODE_DRAFT_EXTEND,
    FORWARD_MODE_TARGET_VERIFY,
    fused_metadata_copy,
    fused_metadata_copy_cuda,
    fused_metadata_copy_multi,
    fused_metadata_copy_multi_cuda,
)
from .trtllm_mha import (  # noqa: F401
    Q_MODE_CUMSUM,
    Q_MODE_NONE,
    Q_MODE_STRIDED,
    build_trtllm_mha_page_table,
    update_trtllm_mha_graph_metadata,
    update_trtllm_mha_graph_metadata_multi,
)
