"""SGLang 0.5.23 FlashMLA replay metadata: the block table and the key lengths in one launch.

Before every decode, target-verify and draft-extend replay (and once per step
backend of its multi-step draft backend), 0.5.23's
``FlashMLABackend._apply_decode_target_verify_metadata``
(``sglang/srt/layers/attention/flashmla_backend.py``) writes the block table
with ``create_flashmla_kv_indices_triton``, converts the key lengths to int32
for FlashMLA's planner (``seq_lens.to(torch.int32)``; in target verify after
``seq_lens + num_draft_tokens``; in draft extend also copied into
``cuda_graph_draft_extend_seq_lens_k``), calls the planner
(``get_mla_metadata``) and copies its two tensors into the graph's buffers:
2 to 4 launches of ours to fuse before the planner's.

:func:`apply_decode_target_verify_metadata` (AROUND) writes the table and the
int32 lengths (``seq_len_delta = num_draft_tokens`` in target verify) with one
:func:`sgl_meta.update_flash_attention_metadata`, into the draft-extend
buffer or a buffer of its own the size of the table's rows, then runs the rest
of 0.5.23's method as it is: the planner on those lengths, the copies, and the
``forward_metadata`` it builds. It covers a pool that does not translate reads,
without decode context parallelism, with 0.5.23's buffers in place, outside
capture until its length buffer exists; everything else calls ``original``.
Columns past the live pages keep their values, as 0.5.23's kernel leaves them;
negative slots divide by floor (sgl-meta's documented difference).

No module here imports ``sglang``: the planner, the metadata class and the page
size are read from the backend's own module, so whatever that module holds
(a patched planner included) is what runs.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional

import torch

from .. import flash_attention_metadata as _fam
from .trtllm_mla import gathers_block_table, table_pages

BACKEND = "sglang.srt.layers.attention.flashmla_backend"
TARGET = f"{BACKEND}.FlashMLABackend._apply_decode_target_verify_metadata"


def _lengths(backend: Any, table: torch.Tensor, draft_extend: bool) -> Optional[torch.Tensor]:
    """Where the int32 key lengths go: draft extend's graph buffer, else ours (allocated once, outside
    capture), or None when neither can be had."""
    if draft_extend:
        out = getattr(backend, "cuda_graph_draft_extend_seq_lens_k", None)
        return out if isinstance(out, torch.Tensor) and out.dtype == torch.int32 else None
    out = getattr(backend, "_sgl_meta_seq_lens_k", None)
    if out is None:
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            return None
        out = torch.empty(table.shape[0], dtype=torch.int32, device=table.device)
        backend._sgl_meta_seq_lens_k = out
    return out


def apply_decode_target_verify_metadata(original: Callable, self: Any, plan: Any, bs: int,
                                        req_pool_indices: torch.Tensor, seq_lens: torch.Tensor,
                                        seq_lens_cpu: Optional[torch.Tensor], forward_mode: Any) -> None:
    """AROUND hook for ``FlashMLABackend._apply_decode_target_verify_metadata``: the block table and
    the int32 key lengths in one launch, then 0.5.23's planner call, copies and ``forward_metadata``."""
    def theirs() -> None:
        return original(self, plan, bs, req_pool_indices, seq_lens, seq_lens_cpu, forward_mode)

    module = sys.modules.get(getattr(original, "__module__", None) or "")
    page = getattr(module, "PAGE_SIZE", None)
    table = getattr(self, "cuda_graph_kv_indices", None)
    mla_buf, splits_buf = getattr(self, "cuda_graph_mla_metadata", None), getattr(self, "cuda_graph_num_splits", None)
    if (module is None or page is None or not isinstance(table, torch.Tensor) or table.dtype != torch.int32
            or mla_buf is None or splits_buf is None or getattr(self, "page_size", None) != page
            or not gathers_block_table(self)):
        return theirs()
    verify, draft_extend = forward_mode.is_target_verify(), forward_mode.is_draft_extend_v2()
    lengths = _lengths(self, table, draft_extend)
    if lengths is None or lengths.device != table.device:
        return theirs()
    delta = self.num_draft_tokens if verify else 0
    _fam.update_flash_attention_metadata(
        cache_seqlens=[lengths], cu_seqlens_k=[], page_table=[table], req_to_token=self.req_to_token,
        req_pool_indices=req_pool_indices[:bs], seq_lens=seq_lens[:bs], seq_len_delta=[delta], bs=bs,
        max_seq_pages=table_pages(self, table), page_size=page)

    # The rest of 0.5.23's method, as it is.
    if seq_lens_cpu is not None:
        seq_lens_cpu = seq_lens_cpu[:bs] + delta if verify else seq_lens_cpu[:bs]
        max_seqlen_pad = (seq_lens_cpu.max().item() + page - 1) // page
    else:
        max_seqlen_pad = table.shape[1]
    q_head_mult = self.num_draft_tokens if verify or draft_extend else 1
    mla_metadata, num_splits = module.get_mla_metadata(
        lengths[:bs], q_head_mult * self.num_q_heads, 1, is_fp8_kvcache=self.is_fp8_kvcache)
    parts = mla_metadata.shape[0]
    assert parts <= mla_buf.shape[0], f"num_sm_parts {parts} exceeds preallocated max {mla_buf.shape[0]}"
    view = self.cuda_graph_mla_metadata_view
    if view is None or parts != view.shape[0]:
        if view is not None:
            module.logger.warning(
                f"num_sm_parts mismatch in CUDA Graph replay: capture={view.shape[0]}, replay={parts}. "
                "This may indicate batch size changed between capture and replay.")
        self.cuda_graph_mla_metadata_view = mla_buf[:parts]
    self.cuda_graph_num_splits_view = splits_buf[: bs + 1]
    mla_buf[:parts].copy_(mla_metadata)
    splits_buf[: bs + 1].copy_(num_splits)
    self.forward_metadata = module.FlashMLADecodeMetadata(
        self.cuda_graph_mla_metadata_view, self.cuda_graph_num_splits_view, table[:bs, :max_seqlen_pad],
        lengths[:bs] if draft_extend else None)
    return None
