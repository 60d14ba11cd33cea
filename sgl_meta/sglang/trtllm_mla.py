"""SGLang 0.5.23 TRT-LLM MLA replay metadata in one launch: hook functions.

Before every replay, 0.5.23's ``TRTLLMMLABackend._apply_cuda_graph_metadata``
(``sglang/srt/layers/attention/trtllm_mla_backend.py``) refreshes
``decode_cuda_graph_metadata[bs]`` with eager launches: the int32 key lengths
(``seq_lens_k``; in target verify ``seq_lens + num_draft_tokens``, written into
``global_seq_lens_k`` and copied into ``seq_lens_k``), then
``create_flashmla_kv_indices_triton`` for the block table
(``block_kv_indices``, live pages ``slot // page_size``): 2 launches in decode
and draft extend, 3 in target verify. Its multi-step EAGLE draft backend
(``TRTLLMMLAMultiStepDraftBackend.init_forward_metadata_out_graph``) runs the
decode refresh once per draft step backend: 2 (K - 1) launches of the same data
into K - 1 backends' buffers.

:func:`apply_cuda_graph_metadata` (AROUND ``_apply_cuda_graph_metadata``) writes
the same buffers with one :func:`sgl_meta.update_flash_attention_metadata`
(``seq_len_delta = num_draft_tokens`` in target verify, the two length buffers
as two sets over one table, no prefix sums) and sets draft extend's host fields
as 0.5.23 does. :func:`multi_step_init_forward_metadata_out_graph` (AROUND the
multi-step method) writes every step backend's lengths and table in one launch
(K - 1 sets, each page read once). Both cover a pool that does not translate
reads, without decode context parallelism; the first at capture too (SGLang's
capture path calls the same method), the multi-step one only for plain 0.5.23
step backends outside capture (SGLang's loop captures, its step calls going
through the first hook); everything else calls ``original``. The block table's
columns past the live pages keep their values, as 0.5.23's kernel leaves them;
negative slots divide by floor (sgl-meta's documented difference).

No module here imports ``sglang``: the backends are used through the attributes
0.5.23 gives them (decode context parallelism is read through the backend
module's own ``get_parallel``).
"""

from __future__ import annotations

from typing import Any, Callable, Optional

import torch

from .. import flash_attention_metadata as _fam
from .hooks import dcp_enabled, plain_methods

BACKEND = "sglang.srt.layers.attention.trtllm_mla_backend"
APPLY_TARGET = f"{BACKEND}.TRTLLMMLABackend._apply_cuda_graph_metadata"
MULTI_STEP_TARGET = f"{BACKEND}.TRTLLMMLAMultiStepDraftBackend.init_forward_metadata_out_graph"

_STEP_CLASS = "TRTLLMMLABackend"
# A step backend's replay path under the multi-step method: plain 0.5.23 code (our
# AROUND hook on _apply_cuda_graph_metadata is allowed), so the merged call writes
# what each step's own call would.
_STEP_PATH = ("init_forward_metadata_out_graph", "_apply_cuda_graph_metadata")


def gathers_block_table(backend: Any) -> bool:
    """The block table is gathered from req_to_token (a static pool), without DCP."""
    translator = getattr(backend, "kv_index_translator", None)
    if translator is None or getattr(translator, "is_translating", True) is not False:
        return False  # the plan's table is copied instead
    return not dcp_enabled(type(backend).__module__)


def _table_pages(backend: Any, table: torch.Tensor) -> int:
    """Table columns the update may write. 0.5.23's kernel writes the live
    pages of each row, all inside the request's ``req_to_token`` row; the
    table itself is padded past it (``_calc_padded_blocks``)."""
    ctx = backend.req_to_token.shape[1]
    return min(table.shape[1], (ctx + backend.page_size - 1) // backend.page_size)


def _graph(backend: Any, bs: int) -> Any:
    """``decode_cuda_graph_metadata[bs]`` when it holds the lengths and the block
    table the update writes, else None."""
    graphs = getattr(backend, "decode_cuda_graph_metadata", None)
    metadata = graphs.get(bs) if isinstance(graphs, dict) else None
    if metadata is None or metadata.seq_lens_k is None or metadata.block_kv_indices is None:
        return None
    return metadata


def update_lengths_and_tables(backend: Any, bs: int, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor,
                              lengths: list, tables: list, delta: int) -> None:
    """The int32 key lengths (``seq_lens + delta``) into every buffer of ``lengths`` and the block
    table into every one of ``tables``, one launch, each page read once."""
    _fam.update_flash_attention_metadata(
        cache_seqlens=lengths, cu_seqlens_k=[], page_table=tables, req_to_token=backend.req_to_token,
        req_pool_indices=req_pool_indices[:bs], seq_lens=seq_lens[:bs], seq_len_delta=[delta] * len(lengths),
        bs=bs, max_seq_pages=_table_pages(backend, tables[0]), page_size=backend.page_size)


def apply_cuda_graph_metadata(original: Callable, self: Any, plan: Any, bs: int, req_pool_indices: torch.Tensor,
                              seq_lens: torch.Tensor, forward_mode: Any) -> None:
    """AROUND hook for ``TRTLLMMLABackend._apply_cuda_graph_metadata``: the
    lengths and block table of ``decode_cuda_graph_metadata[bs]`` in one launch
    (decode, target verify, draft extend); ``original`` where the table is not
    gathered (translating pool, DCP) or a buffer is missing."""
    metadata = _graph(self, bs)
    if metadata is None or not gathers_block_table(self):
        return original(self, plan, bs, req_pool_indices, seq_lens, forward_mode)
    if forward_mode.is_target_verify():
        if metadata.global_seq_lens_k is None:
            return original(self, plan, bs, req_pool_indices, seq_lens, forward_mode)
        update_lengths_and_tables(self, bs, req_pool_indices, seq_lens,
                                  [metadata.seq_lens_k, metadata.global_seq_lens_k], [metadata.block_kv_indices],
                                  self.num_draft_tokens)
        return None
    if forward_mode.is_draft_extend_v2():
        metadata.max_seq_len_q = self.num_draft_tokens
        metadata.sum_seq_lens_q = self.num_draft_tokens * bs
    update_lengths_and_tables(self, bs, req_pool_indices, seq_lens, [metadata.seq_lens_k], [metadata.block_kv_indices],
                              0)
    return None


def _plain_step(backend: Any) -> bool:
    ours = (apply_cuda_graph_metadata,)
    return plain_methods(backend, _STEP_CLASS, _STEP_PATH, ours) and gathers_block_table(backend)


def _step_buffers(self: Any, bs: int) -> Optional[list]:
    """Each step backend's ``decode_cuda_graph_metadata[bs]``, or None when one is
    not a plain 0.5.23 step backend or lacks a buffer."""
    steps = getattr(self, "speculative_num_steps", None)
    backends = getattr(self, "attn_backends", None)
    if not isinstance(steps, int) or steps < 2 or backends is None or len(backends) < steps - 1:
        return None
    out = []
    lead = backends[0]
    for backend in backends[: steps - 1]:
        if (getattr(backend, "req_to_token", None) is not getattr(lead, "req_to_token", None)
                or getattr(backend, "page_size", None) != getattr(lead, "page_size", None)):
            return None  # one gather serves the steps of one pool only
        metadata = _graph(backend, bs) if _plain_step(backend) else None
        if metadata is None:
            return None
        out.append(metadata)
    return out


def multi_step_init_forward_metadata_out_graph(original: Callable, self: Any, forward_batch: Any,
                                               in_capture: bool = False) -> None:
    """AROUND hook for ``TRTLLMMLAMultiStepDraftBackend.init_forward_metadata_out_graph``:
    every draft step backend's decode refresh (lengths and block table of its
    ``decode_cuda_graph_metadata[bs]``) in one launch, K - 1 sets over one
    gather. Capture, translating pools, DCP and step backends that are not plain
    0.5.23 ``TRTLLMMLABackend`` objects call ``original``."""
    bs = getattr(forward_batch, "batch_size", None)
    steps = None if in_capture or not isinstance(bs, int) else _step_buffers(self, bs)
    if steps is None:
        return original(self, forward_batch, in_capture=in_capture)
    lead = self.attn_backends[0]
    update_lengths_and_tables(lead, bs, forward_batch.req_pool_indices, forward_batch.seq_lens,
                              [m.seq_lens_k for m in steps], [m.block_kv_indices for m in steps], 0)
    return None
