"""SGLang 0.5.23 DSA multi-step draft decode: every draft step's metadata in one launch.

Before every draft-decode replay, 0.5.23's
``DeepseekSparseAttnMultiStepBackend.init_forward_metadata_out_graph``
(``sglang/srt/layers/attention/dsa_backend.py``) builds the decode metadata once
into freshly allocated staging tensors (``_precompute_replay_metadata``: the
``fused_dsa_decode_metadata`` generator), then copies them into each of the K - 1
draft step backends' graph buffers over the table's whole static width, and
finishes each step. Up to 3 speculative steps each step's copy is its
``init_forward_metadata_replay_cuda_graph_from_precomputed`` (``fused_metadata_copy_cuda``,
then the paged-MQA schedule refresh, the top-k plan, ``forward_metadata``); from 4 steps
on one ``fused_metadata_copy_multi_cuda`` writes the first three steps, which then only
get their ``forward_metadata`` (no schedule refresh, no plan), and every later step
takes that method.

:func:`multi_step_init_forward_metadata_out_graph` (AROUND the multi-step method)
writes every step's lengths, prefix sums and tables with one
:func:`sgl_meta.fused_dsa_metadata` (K - 1 destination sets, each row over its live
prefix, each slot read once, nothing allocated), then finishes each step as
0.5.23 does: where 0.5.23 runs the step's replay method, that method with its
base-buffer copy left out (the schedule refresh and plan on the lengths just
written, ``forward_metadata``: SGLang's code as it is); where its multi copy wrote
the step, the same ``forward_metadata`` alone. It covers plain 0.5.23 step backends of one pool outside
capture, without the KPool index (``dsa_index_kpool <= 1``, no KPool metadata
fusion); everything else calls ``original``. With the ``flashmla_kv`` decode
(SGLang's Hopper default with an FP8 KV cache) 0.5.23 also runs FlashMLA's planner
once on the staging lengths and copies its two tensors into every step with the rest;
here the planner runs on the lengths the launch wrote (the same values) and one
``torch._foreach_copy_`` puts its tensors into every step. Table columns past a row's live
prefix keep their values (0.5.23 fills them from its staging tensor, which the
attention kernels do not read there); negative slots divide by floor in the
page-level table (sgl-meta's documented difference).

No module here imports ``sglang``: the forward-mode enum is read from the
backend's own module.
"""

from __future__ import annotations

import sys
from typing import Any, Callable, Optional

import torch

from .. import dsa_metadata as _dsa
from ..dsa_metadata_copy import FORWARD_MODE_DECODE
from .hooks import wrapped_only_by

BACKEND = "sglang.srt.layers.attention.dsa_backend"
MULTI_STEP_TARGET = f"{BACKEND}.DeepseekSparseAttnMultiStepBackend.init_forward_metadata_out_graph"

_STEP_CLASS = "DeepseekSparseAttnBackend"
# The step backend's replay path and the class (0.5.23's, or one of its mixins) whose own code each
# method must be: the merged launch writes what the generator and the copy would, and the step's own
# method runs the rest.
_STEP_PATH = {
    "init_forward_metadata_replay_cuda_graph_from_precomputed": _STEP_CLASS,
    "_copy_base_replay_buffers": "DSAMetadataManagementMixin",
    "_precompute_replay_metadata": "DeepseekSparseAttnBackendMTPPrecomputeMixin",
    "_precompute_decode_mode": "DeepseekSparseAttnBackendMTPPrecomputeMixin",
    "_update_kpool_metadata_from_precomputed": "DeepseekSparseAttnBackendKPoolMixin",
    "_compute_flashmla_metadata": _STEP_CLASS,
    "set_dsa_prefill_impl": _STEP_CLASS,
}
_MULTI_COPY_STEPS = 3
"""From 4 speculative steps on, 0.5.23 writes its first three draft steps with one multi copy."""


def _plain(backend: Any) -> bool:
    """``backend`` is SGLang's step backend class itself, its replay path 0.5.23's own code."""
    cls = type(backend)
    if cls.__name__ != _STEP_CLASS:
        return False
    for name, owner in _STEP_PATH.items():
        fn = getattr(cls, name, None)
        if fn is None or not wrapped_only_by(fn, ()) or getattr(fn, "__qualname__", "") != f"{owner}.{name}":
            return False
    return "_copy_base_replay_buffers" not in vars(backend)


def _covered(backend: Any) -> bool:
    """The step's decode metadata is the generator's and the copy's (and with the ``flashmla_kv`` decode
    FlashMLA's planner's) alone: no KPool index."""
    kpool = getattr(backend, "dsa_index_kpool", None)
    return (isinstance(kpool, int) and kpool <= 1 and getattr(backend, "experimental_kpool_metadata_fusion", True)
            is False and isinstance(getattr(backend, "dsa_index_topk", None), int)
            and isinstance(getattr(backend, "physical_page_size", None), int))


def _planned(backend: Any) -> bool:
    """The step plans FlashMLA's decode: its graph holds the planner's two tensors."""
    return getattr(backend, "dsa_decode_impl", None) == "flashmla_kv"


def _steps(self: Any, bs: int) -> Optional[list]:
    """``(backend, metadata)`` of every draft step for ``bs`` requests, or None unless each is a plain
    0.5.23 step backend the hook covers, all of one pool, page size and top-k, with tables of one shape
    and buffers of their own."""
    steps, backends = getattr(self, "speculative_num_steps", None), getattr(self, "attn_backends", None)
    if not isinstance(steps, int) or steps < 2 or backends is None or len(backends) < steps - 1:
        return None
    out = []
    for backend in backends[: steps - 1]:
        graphs = getattr(backend, "decode_cuda_graph_metadata", None)
        metadata = graphs.get(bs) if isinstance(graphs, dict) else None
        if (not _plain(backend) or not _covered(backend) or metadata is None
                or getattr(metadata, "page_table_1", None) is None
                or (backend.physical_page_size > 1 and getattr(metadata, "real_page_table", None) is None)
                or (_planned(backend) and getattr(metadata, "flashmla_metadata", None) is None)):
            return None
        out.append((backend, metadata))
    lead, first = out[0]
    table = first.page_table_1
    if table.shape[0] < bs or table.shape[1] > lead.req_to_token.shape[1] or any(
            b.req_to_token is not lead.req_to_token or b.physical_page_size != lead.physical_page_size
            or b.dsa_index_topk != lead.dsa_index_topk or m.page_table_1.shape != table.shape
            or _planned(b) != _planned(lead) for b, m in out):
        return None
    ptrs = [t.data_ptr() for _, m in out for t in _sets(m, lead.physical_page_size)]
    return out if len(set(ptrs)) == len(ptrs) else None


def _sets(metadata: Any, page_size: int) -> list:
    """The buffers of one step the launch writes, in :func:`_write`'s order."""
    bufs = [metadata.cache_seqlens_int32, metadata.cu_seqlens_k, metadata.dsa_cache_seqlens_int32,
            metadata.dsa_cu_seqlens_k, metadata.page_table_1]
    return bufs + [metadata.real_page_table] if page_size > 1 else bufs


def _write(steps: list, bs: int, seq_lens: Any, req_pool_indices: Any) -> None:
    """Every step's decode lengths, prefix sums and tables in one launch. At page size 1 the token
    table is the page-level one (0.5.23's ``real_page_table`` is the same tensor)."""
    lead, first = steps[0]
    page_size = lead.physical_page_size
    sets = [_sets(m, page_size) for _, m in steps]
    column = lambda i: [s[i] for s in sets]  # noqa: E731
    _dsa.fused_dsa_metadata(
        seq_lens=seq_lens, req_pool_indices=req_pool_indices, req_to_token=lead.req_to_token,
        cache_seqlens=column(0), cu_seqlens_k=column(1), dsa_cache_seqlens=column(2),
        dsa_cu_seqlens_k=column(3), page_table_1=column(4), real_page_table=column(5) if page_size > 1 else [],
        forward_mode=FORWARD_MODE_DECODE, bs=bs, max_seqlen_k=first.page_table_1.shape[1],
        dsa_index_topk=lead.dsa_index_topk, page_size=page_size)


def _plan_flashmla(steps: list, bs: int) -> None:
    """FlashMLA's planner, as 0.5.23 calls it once for all steps, on the DSA lengths just written, its
    schedule and split counts copied into every step's graph buffers in one ``_foreach_copy_``."""
    lead, first = steps[0]
    planned = lead._compute_flashmla_metadata(cache_seqlens=first.dsa_cache_seqlens_int32[:bs], seq_len_q=1)
    graphs = [m.flashmla_metadata for _, m in steps]
    schedule, splits = planned.flashmla_metadata.view(-1), planned.num_splits[: bs + 1]
    torch._foreach_copy_([g.flashmla_metadata.view(-1) for g in graphs] + [g.num_splits[: bs + 1] for g in graphs],
                         [schedule] * len(graphs) + [splits] * len(graphs))


def _written(*_args: Any) -> None:
    """A step's base-buffer copy, already done by the merged launch."""


def multi_step_init_forward_metadata_out_graph(original: Callable, self: Any, forward_batch: Any,
                                               in_capture: bool = False) -> None:
    """AROUND hook for ``DeepseekSparseAttnMultiStepBackend.init_forward_metadata_out_graph``: every
    draft step's decode metadata in one launch, then the rest of each step's 0.5.23 replay method.
    Capture, and steps the hook does not cover, call ``original``."""
    module = sys.modules.get(getattr(original, "__module__", None) or "")
    forward_mode = getattr(getattr(module, "ForwardMode", None), "DECODE", None)
    bs = getattr(forward_batch, "batch_size", None)
    steps = _steps(self, bs) if not in_capture and forward_mode is not None and isinstance(bs, int) else None
    if steps is None:
        return original(self, forward_batch, in_capture=in_capture)
    _write(steps, bs, forward_batch.seq_lens, forward_batch.req_pool_indices)
    if _planned(steps[0][0]):
        _plan_flashmla(steps, bs)
    multi_copied = _MULTI_COPY_STEPS if self.speculative_num_steps > _MULTI_COPY_STEPS else 0
    for i, (backend, metadata) in enumerate(steps):
        if i < multi_copied:  # what 0.5.23 does after its multi copy of these steps, nothing more
            backend.set_dsa_prefill_impl(forward_batch=None)
            backend._update_kpool_metadata_from_precomputed(metadata, None, forward_mode)
            backend.forward_metadata = metadata
            continue
        # The step's own method, its copy from the staging tensors (which this path does not make) left
        # out; with the KPool index off it reads nothing else of them.
        backend._copy_base_replay_buffers = _written
        try:
            backend.init_forward_metadata_replay_cuda_graph_from_precomputed(
                bs=bs, precomputed=None, forward_mode=forward_mode)
        finally:
            del backend._copy_base_replay_buffers
    return None
