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
2 to 4 launches of ours to fuse before the planner's. Its multi-step draft
backend (``FlashMLAMultiStepDraftBackend.init_forward_metadata_out_graph``)
runs the decode refresh once per draft step backend: the same table and
lengths into K - 1 backends' buffers.

:func:`apply_decode_target_verify_metadata` (AROUND) writes the table and the
int32 lengths (``seq_len_delta = num_draft_tokens`` in target verify) with one
:func:`sgl_meta.update_flash_attention_metadata`, into the draft-extend
buffer or a buffer of its own the size of the table's rows, then runs the rest
of 0.5.23's method as it is: the planner on those lengths, the copies, and the
``forward_metadata`` it builds. It covers a pool that does not translate reads,
without decode context parallelism, with 0.5.23's buffers in place, outside
capture until its length buffer exists; everything else calls ``original``.
:func:`multi_step_init_forward_metadata_out_graph` (AROUND the multi-step
method) writes every step backend's table and lengths in one launch (K - 1
sets, each page read once), then runs each step's planner call, copies and
``forward_metadata``; it needs plain 0.5.23 step backends of one pool, each
one the first hook covers, and leaves capture to SGLang's loop.
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

from .hooks import plain_methods
from .trtllm_mla import gathers_block_table, update_lengths_and_tables

BACKEND = "sglang.srt.layers.attention.flashmla_backend"
TARGET = f"{BACKEND}.FlashMLABackend._apply_decode_target_verify_metadata"
MULTI_STEP_TARGET = f"{BACKEND}.FlashMLAMultiStepDraftBackend.init_forward_metadata_out_graph"

_STEP_CLASS = "FlashMLABackend"
# A step backend's replay path under the multi-step method: plain 0.5.23 code (the single-step hook
# allowed), so the merged call writes what each step's own call would.
_STEP_PATH = ("init_forward_metadata_out_graph", "_apply_decode_target_verify_metadata")


def _lengths(backend: Any, table: torch.Tensor, draft_extend: bool) -> Optional[torch.Tensor]:
    """Where the int32 key lengths go: draft extend's graph buffer, else ours (allocated once, outside
    capture), or None when neither can be had."""
    if draft_extend:
        out = getattr(backend, "cuda_graph_draft_extend_seq_lens_k", None)
        return out if isinstance(out, torch.Tensor) and out.dtype == torch.int32 else None
    out = getattr(backend, "_sgl_meta_seq_lens_k", None)
    # Again when SGLang re-allocates the graph state for more rows (a recapture with a larger max_bs).
    if out is None or out.shape[0] < table.shape[0] or out.device != table.device:
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            return None
        out = torch.empty(table.shape[0], dtype=torch.int32, device=table.device)
        backend._sgl_meta_seq_lens_k = out
    return out


def _buffers(module: Any, backend: Any, draft_extend: bool) -> Optional[tuple]:
    """``(table, lengths)`` of a backend whose refresh the hook takes over, or None."""
    page = getattr(module, "PAGE_SIZE", None)
    table = getattr(backend, "cuda_graph_kv_indices", None)
    if (page is None or not isinstance(table, torch.Tensor) or table.dtype != torch.int32
            or getattr(backend, "cuda_graph_mla_metadata", None) is None
            or getattr(backend, "cuda_graph_num_splits", None) is None
            or getattr(backend, "page_size", None) != page or not gathers_block_table(backend)):
        return None
    lengths = _lengths(backend, table, draft_extend)
    return None if lengths is None or lengths.device != table.device else (table, lengths)


def _fits(found: tuple, bs: int) -> bool:
    """The rows of ``bs`` requests fit both buffers (the op would refuse them, SGLang's path would not)."""
    table, lengths = found
    return bs <= table.shape[0] and bs <= lengths.shape[0]


def _plan(module: Any, backend: Any, bs: int, table: torch.Tensor, lengths: torch.Tensor,
          seq_lens_cpu: Optional[torch.Tensor], delta: int, q_head_mult: int, draft_extend: bool) -> None:
    """The rest of 0.5.23's method once the table and lengths are written, as it is: the planner on
    those lengths, its tensors copied into the graph's buffers, the ``forward_metadata`` it builds."""
    page = module.PAGE_SIZE
    if seq_lens_cpu is not None:
        seq_lens_cpu = seq_lens_cpu[:bs] + delta if delta else seq_lens_cpu[:bs]
        max_seqlen_pad = (seq_lens_cpu.max().item() + page - 1) // page
    else:
        max_seqlen_pad = table.shape[1]
    mla_metadata, num_splits = module.get_mla_metadata(
        lengths[:bs], q_head_mult * backend.num_q_heads, 1, is_fp8_kvcache=backend.is_fp8_kvcache)
    mla_buf, splits_buf = backend.cuda_graph_mla_metadata, backend.cuda_graph_num_splits
    parts = mla_metadata.shape[0]
    assert parts <= mla_buf.shape[0], f"num_sm_parts {parts} exceeds preallocated max {mla_buf.shape[0]}"
    view = backend.cuda_graph_mla_metadata_view
    if view is None or parts != view.shape[0]:
        if view is not None:
            module.logger.warning(
                f"num_sm_parts mismatch in CUDA Graph replay: capture={view.shape[0]}, replay={parts}. "
                "This may indicate batch size changed between capture and replay.")
        backend.cuda_graph_mla_metadata_view = mla_buf[:parts]
    backend.cuda_graph_num_splits_view = splits_buf[: bs + 1]
    mla_buf[:parts].copy_(mla_metadata)
    splits_buf[: bs + 1].copy_(num_splits)
    backend.forward_metadata = module.FlashMLADecodeMetadata(
        backend.cuda_graph_mla_metadata_view, backend.cuda_graph_num_splits_view, table[:bs, :max_seqlen_pad],
        lengths[:bs] if draft_extend else None)


def apply_decode_target_verify_metadata(original: Callable, self: Any, plan: Any, bs: int,
                                        req_pool_indices: torch.Tensor, seq_lens: torch.Tensor,
                                        seq_lens_cpu: Optional[torch.Tensor], forward_mode: Any) -> None:
    """AROUND hook for ``FlashMLABackend._apply_decode_target_verify_metadata``: the block table and
    the int32 key lengths in one launch, then 0.5.23's planner call, copies and ``forward_metadata``."""
    module = sys.modules.get(getattr(original, "__module__", None) or "")
    verify, draft_extend = forward_mode.is_target_verify(), forward_mode.is_draft_extend_v2()
    found = _buffers(module, self, draft_extend) if module is not None else None
    if found is None or not isinstance(bs, int) or not _fits(found, bs):
        return original(self, plan, bs, req_pool_indices, seq_lens, seq_lens_cpu, forward_mode)
    delta = self.num_draft_tokens if verify else 0
    table, lengths = found
    update_lengths_and_tables(self, bs, req_pool_indices, seq_lens, [lengths], [table], delta)
    _plan(module, self, bs, *found, seq_lens_cpu, delta, self.num_draft_tokens if verify or draft_extend else 1,
          draft_extend)
    return None


def _steps(module: Any, self: Any, bs: int) -> Optional[list]:
    """``(backend, table, lengths)`` of every draft step backend, or None unless each is a plain 0.5.23
    ``FlashMLABackend`` the hook covers for ``bs`` requests, all of one pool with tables of one shape."""
    steps, backends = getattr(self, "speculative_num_steps", None), getattr(self, "attn_backends", None)
    if not isinstance(steps, int) or steps < 2 or backends is None or len(backends) < steps - 1:
        return None
    out = []
    for backend in backends[: steps - 1]:
        if not plain_methods(backend, _STEP_CLASS, _STEP_PATH, (apply_decode_target_verify_metadata,)):
            return None
        found = _buffers(module, backend, draft_extend=False)
        if found is None or not _fits(found, bs):
            return None
        out.append((backend, *found))
    lead, table = out[0][0], out[0][1]
    if any(b.req_to_token is not lead.req_to_token or t.shape != table.shape for b, t, _ in out):
        return None
    # One launch writes every set: step backends sharing a table or a length buffer run SGLang's loop.
    ptrs = [t.data_ptr() for _, t, _ in out] + [n.data_ptr() for _, _, n in out]
    return out if len(set(ptrs)) == len(ptrs) else None


def multi_step_init_forward_metadata_out_graph(original: Callable, self: Any, forward_batch: Any,
                                               in_capture: bool = False) -> None:
    """AROUND hook for ``FlashMLAMultiStepDraftBackend.init_forward_metadata_out_graph``: every draft
    step backend's block table and int32 key lengths in one launch (each page read once), then each
    step's planner call, copies and ``forward_metadata`` as 0.5.23 writes them. Capture, and step
    backends the single-step hook would not take, call ``original``."""
    module = sys.modules.get(getattr(original, "__module__", None) or "")
    bs = getattr(forward_batch, "batch_size", None)
    steps = None
    spec_info = getattr(forward_batch, "spec_info", None)
    if not in_capture and module is not None and isinstance(bs, int) and spec_info is not None:
        steps = _steps(module, self, bs)  # (without spec_info: SGLang's method, whose check raises)
    if steps is None:
        return original(self, forward_batch, in_capture=in_capture)
    update_lengths_and_tables(steps[0][0], bs, forward_batch.req_pool_indices, forward_batch.seq_lens,
                              [n for _, _, n in steps], [t for _, t, _ in steps], 0)
    for backend, table, lengths in steps:
        _plan(module, backend, bs, table, lengths, forward_batch.seq_lens_cpu, 0, 1, draft_extend=False)
    return None
