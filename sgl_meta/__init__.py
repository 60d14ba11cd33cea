"""sgl_meta: one-launch CUDA-graph metadata refresh ops for LLM serving.

Importing the package registers ``torch.ops.sgl_meta.*`` (CUDA and CPU kernels,
from the compiled ``sgl_meta._C``) and their fake implementations. The
functions below are the public API, one module per op family; each op is
described once (:mod:`sgl_meta._op`). :mod:`sgl_meta.reference` holds the eager
PyTorch paths they replace.
"""

from pathlib import Path

from ._build import require_built_extension

require_built_extension()

from . import dsa_metadata, dsa_metadata_copy, kv_read_table, trtllm_mha_metadata, trtllm_mha_page_table  # noqa: E402
from . import vllm_block_table, vllm_flashinfer, vllm_input_batch, vllm_spec_decode  # noqa: E402
from . import flash_attention_metadata  # noqa: E402
from . import kv_indices  # noqa: E402
from . import _fake  # noqa: E402,F401  (registers fake impls for torch.compile)
from . import reference  # noqa: E402,F401  (sgl_meta.reference: the eager paths)
from .dsa_metadata import *  # noqa: E402,F401,F403
from .dsa_metadata_copy import *  # noqa: E402,F401,F403
from .kv_read_table import *  # noqa: E402,F401,F403
from .kv_indices import *  # noqa: E402,F401,F403
from .trtllm_mha_metadata import *  # noqa: E402,F401,F403
from .trtllm_mha_page_table import *  # noqa: E402,F401,F403
from .vllm_block_table import *  # noqa: E402,F401,F403
from .vllm_flashinfer import *  # noqa: E402,F401,F403
from .vllm_input_batch import *  # noqa: E402,F401,F403
from .vllm_spec_decode import *  # noqa: E402,F401,F403
from .flash_attention_metadata import *  # noqa: E402,F401,F403

__version__ = (Path(__file__).with_name("VERSION")).read_text().strip()

__all__ = sorted(
    [
        *dsa_metadata.__all__,
        *dsa_metadata_copy.__all__,
        *kv_read_table.__all__,
        *kv_indices.__all__,
        *trtllm_mha_metadata.__all__,
        *trtllm_mha_page_table.__all__,
        *vllm_block_table.__all__,
        *vllm_flashinfer.__all__,
        *vllm_input_batch.__all__,
        *vllm_spec_decode.__all__,
        *flash_attention_metadata.__all__,
    ]
)
