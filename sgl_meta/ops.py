"""All public wrappers in one namespace (kept for ``from sgl_meta.ops import ...``).

The wrappers live one file per op family: :mod:`sgl_meta.trtllm_mha`,
:mod:`sgl_meta.dsa_copy`, :mod:`sgl_meta.dsa_metadata`, :mod:`sgl_meta.kv_read_table`.
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
from .dsa_metadata import (  # noqa: F401
    fused_dsa_decode_metadata,
    fused_dsa_draft_extend_metadata,
    fused_dsa_metadata,
    fused_dsa_target_verify_metadata,
)
from .kv_read_table import (  # noqa: F401
    build_kv_read_table,
    build_kv_read_table_packed,
    kv_read_page_table,
    kv_read_token_stream,
)
from .trtllm_mha import (  # noqa: F401
    Q_MODE_CUMSUM,
    Q_MODE_NONE,
    Q_MODE_STRIDED,
    build_trtllm_mha_page_table,
    update_trtllm_mha_graph_metadata,
    update_trtllm_mha_graph_metadata_multi,
)
