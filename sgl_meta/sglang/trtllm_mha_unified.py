"""SGLang 0.5.23 TRT-LLM MHA on the unified memory pool: the page tables in the recorded launch.

On the unified pool (``kv_index_translator.is_translating``: ``req_to_token``
holds virtual slots) 0.5.23's ``TRTLLMHAAttnBackend._apply_cuda_graph_metadata``
records its graph-metadata update with ``skip_page_table=True`` (seqlens only),
and ``init_forward_metadata_out_graph`` rebuilds the page table, and the SWA
table when the model has one, outside the graph on every replay:
``kv_index_translator.copy_page_table(kv_loc_plan, out=metadata.page_table[:bs])``
(one table build per replay prep, plus a copy for every reader after the first).

The two AROUND hooks here move that rebuild into the recorded launch:

* :func:`apply_cuda_graph_metadata` records one
  :func:`sgl_meta.update_trtllm_mha_graph_metadata` that writes the seqlens
  *and* ``metadata.page_table`` (``swa_page_table``) through the pool's
  virtual->physical page tables (``v2p=`` / ``swa_v2p=``, the very tensors the
  translator's ``copy_page_table`` reads), each row's live pages
  (``ceil(cache_seqlens / page_size)``, what the attention kernels read), and
  marks the metadata object (:data:`RECORDED`).
* :func:`init_forward_metadata_out_graph` runs 0.5.23's method unchanged except
  that its ``copy_page_table`` calls into a marked metadata's own tables return
  at once; everything else (the capture-time metadata build, the SWA write ids
  ``swa_out_cache_loc``, ragged verify) is SGLang's code.

Both fall back to SGLang's method when a case is not covered: a pool that does
not translate, DCP (reads stay virtual), a translator over other
``req_to_token`` rows, an SWA table without the sliding-window sub-pool's
``v2p``, ragged verify (its tables are written out of graph and nothing is
recorded), a non-0.5.23 backend class. docs/sglang.md ("The unified memory
pool") gives the reasons, with the 0.5.23 source lines they were read from.

Only :func:`_id_space_kind` imports ``sglang`` (at call time, inside SGLang).
"""

from __future__ import annotations

import types
from typing import Any, Callable, Optional

import torch

from ..trtllm_mha_metadata import Q_MODE_STRIDED, update_trtllm_mha_graph_metadata

BACKEND = "sglang.srt.layers.attention.trtllm_mha_backend"
APPLY_TARGET = f"{BACKEND}.TRTLLMHAAttnBackend._apply_cuda_graph_metadata"
OUT_GRAPH_TARGET = f"{BACKEND}.TRTLLMHAAttnBackend.init_forward_metadata_out_graph"

RECORDED = "_sgl_meta_recorded_page_tables"
"""Attribute set to True on a ``TRTLLMMHAMetadata`` whose ``page_table`` (and
``swa_page_table``, when bound) a recorded sgl-meta update writes through v2p.
Set on the object, so metadata rebuilt by a recapture starts unmarked."""

_BACKEND_CLASS = "TRTLLMHAAttnBackend"


def _id_space_kind():
    from sglang.srt.mem_cache.kv_loc_plan import IdSpaceKind

    return IdSpaceKind


def _read_v2p(translator: Any, kind: Any) -> Optional[torch.Tensor]:
    """The page table ``copy_page_table(kind=kind)`` translates through, or None
    (no such sub-pool, or reads that stay virtual: DCP)."""
    space = translator.space(kind)
    return None if space is None else getattr(space, "read_v2p", None)


def unified_v2p(backend: Any, metadata: Any) -> Optional[dict]:
    """``{"v2p": ..., "swa_v2p": ...}`` when a recorded update can build
    ``metadata``'s tables as 0.5.23's ``copy_page_table`` builds them, else None.

    Needs: a translating pool whose reads are translated (not DCP, where
    ``read_v2p`` is None), the translator reading the backend's own
    ``req_to_token`` (the rows the plan's table is built from), an SWA table
    only with the sliding-window sub-pool's ``read_v2p``, int64 1-D tables on
    ``req_to_token``'s device, and ``max_num_pages`` pages inside a row.
    """
    if type(backend).__name__ != _BACKEND_CLASS:
        return None
    translator = getattr(backend, "kv_index_translator", None)
    if translator is None or not getattr(translator, "is_translating", False):
        return None
    if getattr(translator, "defer_read_translate", False):
        return None  # DCP: 0.5.23 keeps reads virtual (no read_v2p)
    req_to_token = getattr(backend, "req_to_token", None)
    if req_to_token is None or getattr(translator, "req_to_token", None) is not req_to_token:
        return None
    if getattr(metadata, "page_table", None) is None:
        return None
    kind = _id_space_kind()
    v2p = _read_v2p(translator, kind.FULL)
    swa_v2p = None
    if getattr(metadata, "swa_page_table", None) is not None:
        swa_v2p = _read_v2p(translator, kind.SLIDING_WINDOW)
        if swa_v2p is None:
            return None  # 0.5.23's copy_page_table asserts here; keep its path
    if v2p is None:
        return None
    for table in (v2p, swa_v2p):
        if table is not None and (
            table.dtype != torch.int64 or table.dim() != 1 or table.device != req_to_token.device
            or table.stride(0) != 1
        ):
            return None
    pages, page_size = getattr(backend, "max_num_pages", 0), getattr(backend, "page_size", 0)
    if not (isinstance(pages, int) and isinstance(page_size, int) and pages >= 1 and page_size >= 1):
        return None
    if (pages - 1) * page_size >= req_to_token.shape[1]:
        return None
    return {"v2p": v2p, "swa_v2p": swa_v2p}


def mark(metadata: Any) -> None:
    """Record that ``metadata``'s tables are written by a recorded update."""
    setattr(metadata, RECORDED, True)


# ---- in graph -----------------------------------------------------------------------


def _mode_call(self: Any, bs: int, forward_mode: Any, spec_info: Any) -> Optional[tuple]:
    """0.5.23's mode dispatch of ``_apply_cuda_graph_metadata``: the metadata and
    the update's mode keywords, or None where the original must run (a ragged
    verify records nothing; an unknown mode raises there)."""
    if forward_mode.is_decode_or_idle():
        metadata = getattr(self, "decode_cuda_graph_metadata", {}).get(bs)
        offset = self.speculative_step_id + 1 if spec_info is not None else 0
        return None if metadata is None else (metadata, dict(seqlen_offset=offset))
    if forward_mode.is_target_verify():
        if spec_info is not None and getattr(spec_info, "ragged_verify_layout", None) is not None:
            return None
        metadata = getattr(self, "target_verify_metadata", {}).get(bs)
        return None if metadata is None else (metadata, dict(seqlen_offset=metadata.max_seq_len_q))
    if forward_mode.is_draft_extend_v2():
        metadata = getattr(self, "draft_extend_metadata", {}).get(bs)
        if metadata is None:
            return None
        return metadata, dict(seqlen_offset=0, cu_seqlens_q=metadata.cu_seqlens_q,
                              q_stride=metadata.max_seq_len_q, q_mode=Q_MODE_STRIDED)
    return None


def apply_cuda_graph_metadata(
    original: Callable,
    self: Any,
    bs: int,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    forward_mode: Any,
    spec_info: Any,
    out_cache_loc: Optional[torch.Tensor] = None,
):
    """AROUND hook for ``TRTLLMHAAttnBackend._apply_cuda_graph_metadata``.

    0.5.23 (recorded in the decode, target-verify and draft-extend graphs):
    picks this mode's metadata, records the update with ``skip_page_table`` on
    the unified pool, refreshes the ENCODER_ONLY expanded rows from the page
    table, sets ``forward_metadata``. Here, when :func:`unified_v2p` allows it,
    the recorded update also writes the page table(s) through ``v2p`` /
    ``swa_v2p`` (live pages; ``swa_out_cache_loc`` stays SGLang's out-of-graph
    write, as on 0.5.23's unified path), and the metadata is marked so that
    :func:`init_forward_metadata_out_graph` skips the rebuild. Everything else,
    and every other case, is 0.5.23's method.
    """
    call = _mode_call(self, bs, forward_mode, spec_info)
    tables = None if call is None else unified_v2p(self, call[0])
    if tables is None:
        return original(self, bs, req_pool_indices, seq_lens, forward_mode, spec_info, out_cache_loc)
    metadata, mode = call
    update_trtllm_mha_graph_metadata(
        req_pool_indices=req_pool_indices[:bs],
        seq_lens=seq_lens[:bs],
        req_to_token=self.req_to_token,
        cache_seqlens=metadata.cache_seqlens_int32,
        cu_seqlens_k=metadata.cu_seqlens_k,
        page_table=metadata.page_table,
        bs=bs,
        max_seq_pages=self.max_num_pages,
        page_size=self.page_size,
        swa_page_table=metadata.swa_page_table,
        live_pages_only=True,
        v2p=tables["v2p"],
        swa_v2p=tables["swa_v2p"],
        **mode,
    )
    mark(metadata)
    if self._needs_encoder_only_expand(forward_mode, metadata):
        # As 0.5.23, recorded after the update: the expanded rows from the fresh tables.
        metadata.encoder_cache_seqlens.copy_(metadata.cache_seqlens_int32[metadata.encoder_row_map])
        metadata.encoder_page_table.copy_(metadata.page_table[metadata.encoder_row_map])
    self.forward_metadata = metadata
    return None


# ---- out of graph -------------------------------------------------------------------


def _same_view(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()
            and a.dtype == b.dtype and a.device == b.device)


class _SkipRecordedTables:
    """The backend's translator during one ``init_forward_metadata_out_graph``
    call: every attribute is the translator's own, except that
    ``copy_page_table`` into a table the recorded update writes returns at once."""

    def __init__(self, translator: Any, backend: Any, forward_batch: Any):
        self._sgl_meta_translator = translator
        self._sgl_meta_backend = backend
        self._sgl_meta_batch = forward_batch

    def __getattr__(self, name: str):
        return getattr(self._sgl_meta_translator, name)

    def _recorded(self, out: torch.Tensor, kind: Any) -> bool:
        metadata = self._sgl_meta_backend.forward_metadata
        if not getattr(metadata, RECORDED, False) or getattr(metadata, "is_ragged_verify", False):
            return False
        spec_info = getattr(self._sgl_meta_batch, "spec_info", None)
        if spec_info is not None and getattr(spec_info, "ragged_verify_layout", None) is not None:
            return False  # ragged verify records nothing in graph
        kinds = _id_space_kind()
        table = {kinds.FULL: metadata.page_table, kinds.SLIDING_WINDOW: metadata.swa_page_table}.get(kind)
        return table is not None and isinstance(out, torch.Tensor) and _same_view(out, table)

    def copy_page_table(self, plan: Any, *, out: torch.Tensor, **kwargs):
        kind = kwargs.get("kind", _id_space_kind().FULL)
        if self._recorded(out, kind):
            return None
        return self._sgl_meta_translator.copy_page_table(plan, out=out, **kwargs)


def _settle(backend: Any, name: str, original: Callable) -> None:
    """Bind SGLang's ``original`` method on ``backend`` itself, so that its calls
    skip this hook's wrapper (the eager call runs before every replay). Only
    where this hook is the one layer around ``original``: another plugin's
    wrapper of the same method stays in the path."""
    wrapper = getattr(type(backend), name, None)
    if getattr(wrapper, "__wrapped__", None) is original:
        backend.__dict__[name] = types.MethodType(original, backend)


def init_forward_metadata_out_graph(original: Callable, self: Any, forward_batch: Any, in_capture: bool = False):
    """AROUND hook for ``TRTLLMHAAttnBackend.init_forward_metadata_out_graph``.

    0.5.23's method, with its ``copy_page_table`` calls into a metadata's
    ``page_table`` / ``swa_page_table`` skipped when :func:`apply_cuda_graph_metadata`
    (or the multi-step draft hook) recorded an update that writes them through
    v2p. The plan then has no read table from this backend: a later reader of the
    same iteration builds its own (``read_table`` / ``copy_page_table``) or
    gathers through ``v2p`` (``read_source`` / ``pack_read_stream``), as 0.5.23
    does for any reader that comes first.
    """
    translator = getattr(self, "kv_index_translator", None)
    if type(self).__name__ != _BACKEND_CLASS or translator is None or not getattr(translator, "is_translating", False):
        # A backend over a pool that does not translate stays so (SGLang fixes
        # both at construction): it calls SGLang's method directly from now on.
        _settle(self, "init_forward_metadata_out_graph", original)
        return original(self, forward_batch, in_capture=in_capture)
    if isinstance(translator, _SkipRecordedTables):
        return original(self, forward_batch, in_capture=in_capture)
    self.kv_index_translator = _SkipRecordedTables(translator, self, forward_batch)
    try:
        return original(self, forward_batch, in_capture=in_capture)
    finally:
        self.kv_index_translator = translator
