"""SGLang 0.5.23's DSA multi-step EAGLE draft decode: the step backends' copies in one launch.

On every draft-decode replay prep, 0.5.23's
``DeepseekSparseAttnMultiStepBackend.init_forward_metadata_out_graph`` (in
``sglang/srt/layers/attention/dsa_backend.py``) generates the step's metadata once
(``_precompute_replay_metadata``) and then, per step backend, copies it into that
backend's graph buffers (``init_forward_metadata_replay_cuda_graph_from_precomputed``
-> ``_copy_base_replay_buffers`` -> ``fused_metadata_copy_cuda``, one launch each)
before the backend refreshes what reads them (DeepGEMM's schedule planner, the
context lengths) and sets its ``forward_metadata``. With more than three steps the
first three backends share one ``fused_metadata_copy_multi_cuda`` launch and the rest
copy one by one.

:func:`multi_step_init_forward_metadata_out_graph` (an AROUND hook) runs that method
as written, with every step backend's copy destinations registered: the first
``fused_metadata_copy_cuda`` call of a registered backend (the plugin's REPLACE row)
copies into that backend and every registered backend after it in one
:func:`sgl_meta.fused_metadata_copy_multi` launch, and the later calls of those
backends, with the same sources and sizes, find their copy done. Each backend's
buffers are written before anything of its own reads them, and nothing of an earlier
backend reads a later one's. A call that does not match (other sources, other sizes,
not DECODE, destinations that overlap) copies as before. Capture, SGLang's
experimental KPool metadata fusion and a single step backend call ``original``
alone; so does everything where the copy row is not hooked (nothing is merged).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional

from .. import dsa_metadata_copy as _dmc

_SOURCES = ("cache_seqlens_src", "cu_seqlens_k_src", "page_indices_src", "dsa_cache_seqlens_src",
            "seqlens_expanded_src", "dsa_cu_seqlens_k_src", "real_page_table_src", "flashmla_num_splits_src",
            "flashmla_metadata_src")
_SCALARS = ("forward_mode", "bs", "max_len", "max_seqlen_k", "seqlens_expanded_size")
_DESTS = ("cache_seqlens_dst", "cu_seqlens_k_dst", "page_table_1_dst", "dsa_cache_seqlens_dst",
          "seqlens_expanded_dst", "dsa_cu_seqlens_k_dst", "real_page_table_dst", "flashmla_num_splits_dst",
          "flashmla_metadata_dst")

_local = threading.local()  # .pending: registered destination sets; .done: id(cache_seqlens_dst) -> call key


def _dests(metadata: Any) -> Optional[dict]:
    """A step backend's copy destinations, as 0.5.23's ``_copy_base_replay_buffers``
    passes them (the real page table and the FlashMLA pair where the metadata has them)."""
    try:
        flashmla = metadata.flashmla_metadata
        return dict(zip(_DESTS, (
            metadata.cache_seqlens_int32, metadata.cu_seqlens_k, metadata.page_table_1,
            metadata.dsa_cache_seqlens_int32, metadata.dsa_seqlens_expanded, metadata.dsa_cu_seqlens_k,
            metadata.real_page_table, None if flashmla is None else flashmla.num_splits,
            None if flashmla is None else flashmla.flashmla_metadata)))
    except AttributeError:
        return None


def _key(args: dict) -> tuple:
    return tuple(id(args[k]) for k in _SOURCES) + tuple(args[k] for k in _SCALARS)


def merged_copy(args: dict) -> bool:
    """Whether the one-set copy ``args`` (the adapter's arguments, its tolerance
    applied) is done: by an earlier merged launch, or now, merged with the registered
    sets after it. False: copy it as usual."""
    pending = getattr(_local, "pending", None)
    if pending is None or args["forward_mode"] != _dmc.FORWARD_MODE_DECODE:
        return False
    dst = args["cache_seqlens_dst"]
    done = _local.done.get(id(dst))
    if done is not None:
        return done == _key(args)
    at = next((i for i, d in enumerate(pending) if d["cache_seqlens_dst"] is dst), None)
    if at is None or at + 1 == len(pending):
        return False
    group = [{k: args[k] for k in _DESTS}] + pending[at + 1:]
    kw = {k: args[k] for k in _SOURCES + _SCALARS}
    for k in _DESTS:
        given = args[k] is not None
        if given and any(d[k] is None for d in group):
            return False
        kw[k] = [d[k] for d in group] if given else None
    if kw["flashmla_metadata_src"] is not None:
        kw["flashmla_metadata_dst"] = [t.view(-1)[: kw["flashmla_metadata_src"].numel()]
                                       if t.is_contiguous() else t for t in kw["flashmla_metadata_dst"]]
    try:
        _dmc.fused_metadata_copy_multi(**kw)
    except RuntimeError:
        return False  # checked before any write: the sets copy one by one
    for d in group[1:]:
        _local.done[id(d["cache_seqlens_dst"])] = _key(args)
    return True


def multi_step_init_forward_metadata_out_graph(
    original: Callable, self: Any, forward_batch: Any, in_capture: bool = False
) -> None:
    """AROUND hook for ``DeepseekSparseAttnMultiStepBackend.init_forward_metadata_out_graph``:
    0.5.23's method with its step backends' copies merged into one launch (see the
    module docstring)."""
    def theirs() -> None:
        return original(self, forward_batch, in_capture=in_capture)

    if in_capture or getattr(_local, "pending", None) is not None:
        return theirs()
    steps = getattr(self, "speculative_num_steps", None)
    backends = list(getattr(self, "attn_backends", None) or ())[: (steps or 1) - 1]
    if len(backends) < 2 or any(getattr(b, "experimental_kpool_metadata_fusion", True) for b in backends):
        return theirs()
    dests = [_dests(b.decode_cuda_graph_metadata.get(forward_batch.batch_size)) for b in backends]
    if any(d is None for d in dests):
        return theirs()
    _local.pending, _local.done = dests, {}
    try:
        return theirs()
    finally:
        _local.pending = _local.done = None
