"""SGLang 0.5.23 TRT-LLM MHA speculative decoding in one launch: hook functions.

Two replay paths of ``sglang/srt/layers/attention/trtllm_mha_backend.py`` pay
per-step launches that one ``sgl_meta`` call removes. Each function here has the
``HookRegistry`` AROUND signature ``hook(original, self, *args, **kwargs)``: it
does the work in one launch when it can show that it computes exactly what the
original computes (0.5.23's results, element for element where 0.5.23 defines
them: floor division of negative slots and the row cap are sgl_meta's documented
differences), and calls ``original`` otherwise. The plugin's hook table
(:data:`sgl_meta.sglang.hooks.HOOKS`) registers them as AROUND hooks.

* ``TRTLLMHAAttnMultiStepDraftBackend.init_forward_metadata_in_graph`` (recorded
  in the draft decode graph at capture): the original records K - 1 updates, one
  per draft step backend ``i`` with ``seqlen_offset = i + 1``, each gathering the
  same page table. :func:`multi_step_draft_init_forward_metadata_in_graph`
  records one :func:`sgl_meta.update_trtllm_mha_graph_metadata_multi` into all
  K - 1 backends' buffers (static pool with or without SWA; on the unified pool
  the tables through v2p when :mod:`.trtllm_mha_unified` allows it for every
  step, which marks them so the out-of-graph refresh skips them, else the
  seqlens-only form, whose tables that refresh still fills).
* ``TRTLLMHAAttnBackend._write_ragged_verify_graph_metadata`` (out of graph, on
  every replay prep): 10-14 eager launches (geometry, cumsums, copies, the
  page-table builder, the SWA write-id translation). :func:`ragged_verify_write_graph_metadata`
  makes it SGLang's own padding kernel plus one
  :func:`sgl_meta.update_trtllm_mha_graph_metadata` with per-row
  ``seqlen_offsets`` (static pool; capture-time calls and the unified pool keep
  the original). Still out of graph, as SGLang calls it there, but capturable:
  SGLang's metadata glue graph records it when it is on. Recording it in the
  decode graph itself needs a change in SGLang (see the docstring).

No module here imports ``sglang``: the backends are used through the attributes
0.5.23 gives them, so the functions are testable with stand-in objects.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Optional

from ..trtllm_mha_metadata import Q_MODE_CUMSUM, update_trtllm_mha_graph_metadata, update_trtllm_mha_graph_metadata_multi
from . import trtllm_mha_unified as _unified
from .hooks import wrapped_only_by

logger = logging.getLogger(__name__)

BACKEND = "sglang.srt.layers.attention.trtllm_mha_backend"
MULTI_STEP_TARGET = f"{BACKEND}.TRTLLMHAAttnMultiStepDraftBackend.init_forward_metadata_in_graph"
RAGGED_VERIFY_TARGET = f"{BACKEND}.TRTLLMHAAttnBackend._write_ragged_verify_graph_metadata"

# The class whose own methods the replacements re-implement: a subclass, or a
# method another plugin has wrapped (functools.wraps sets __wrapped__), keeps
# the original path so that code still runs.
_BACKEND_CLASS = "TRTLLMHAAttnBackend"
_REIMPLEMENTED = ("init_forward_metadata_in_graph", "_apply_cuda_graph_metadata", "_fill_page_table_device")
_MISSING = object()
# sgl-meta's own AROUND hooks on those methods: a method wrapped only by these
# still does what the replacements here do (they follow the same rules).
_OURS = (_unified.apply_cuda_graph_metadata,)


def _wrapped_by_us_only(fn: Callable) -> bool:
    return wrapped_only_by(fn, _OURS)


def _plain_backend(backend: Any) -> bool:
    cls = type(backend)
    if cls.__name__ != _BACKEND_CLASS:
        return False
    for name in _REIMPLEMENTED:
        fn = getattr(cls, name, None)
        if fn is None or not _wrapped_by_us_only(fn):
            return False
        if getattr(fn, "__qualname__", "") != f"{_BACKEND_CLASS}.{name}":
            return False
    return True


def _same(values: list) -> bool:
    """Every element is the very same object (one req_to_token, one mapping)."""
    return all(v is values[0] for v in values[1:])


def _attrs(obj: Any, *names: str) -> Optional[list]:
    values = [getattr(obj, n, _MISSING) for n in names]
    return None if any(v is _MISSING for v in values) else values


# ---- multi-step draft: K - 1 recorded updates -> one --------------------------------


def _multi_step_call(self: Any, forward_batch: Any) -> Optional[dict]:
    """The keyword arguments of the one multi-set call that replaces the K - 1
    recorded updates of 0.5.23's loop, or None when a case is not covered."""
    spec_info = getattr(forward_batch, "spec_info", None)
    if spec_info is None or not spec_info.is_draft_input():
        return None  # the original asserts
    steps = getattr(self, "speculative_num_steps", None)
    if not isinstance(steps, int) or steps < 2:
        return None
    backends = list(getattr(self, "attn_backends", ())[: steps - 1])
    if len(backends) != steps - 1 or not all(_plain_backend(b) for b in backends):
        return None
    pools = [_attrs(b, "req_to_token", "kv_index_translator", "_swa_full_to_swa_mapping") for b in backends]
    shapes = [_attrs(b, "page_size", "max_num_pages") for b in backends]
    if any(p is None for p in pools) or any(s is None for s in shapes):
        return None
    # One pool for every step (0.5.23 builds them all from one model runner).
    if not all(_same([p[j] for p in pools]) for j in range(3)) or any(s != shapes[0] for s in shapes):
        return None
    req_to_token, translator, swa_mapping = pools[0]
    page_size, max_num_pages = shapes[0]
    bs = forward_batch.batch_size
    metas = []
    for b in backends:
        meta = getattr(b, "decode_cuda_graph_metadata", {}).get(bs)
        fields = None if meta is None else _attrs(
            meta, "cache_seqlens_int32", "cu_seqlens_k", "page_table", "swa_page_table", "swa_out_cache_loc")
        if fields is None:
            return None  # the original raises its own KeyError
        metas.append((meta, fields))
    unified = bool(getattr(translator, "is_translating", False))
    # Unified pool: the tables through v2p in this launch, as the single-backend
    # hook (trtllm_mha_unified) records them, when every step allows it.
    tables = [_unified.unified_v2p(b, m) for b, (m, _) in zip(backends, metas)] if unified else []
    if tables and not all(t is not None and t["v2p"] is tables[0]["v2p"] and t["swa_v2p"] is tables[0]["swa_v2p"]
                          for t in tables):
        tables = []
    kw = dict(
        req_pool_indices=forward_batch.req_pool_indices[:bs],
        seq_lens=forward_batch.seq_lens[:bs],
        req_to_token=req_to_token,
        cache_seqlens=[f[0] for _, f in metas],
        cu_seqlens_k=[f[1] for _, f in metas],
        bs=bs,
        seqlen_offset=[b.speculative_step_id + 1 for b in backends],
        max_seq_pages=max_num_pages,
        page_size=page_size,
        swa_mapping=swa_mapping,
        out_cache_loc=getattr(forward_batch, "out_cache_loc", None),
        live_pages_only=True,  # 0.5.23 rewrites each row's live prefix only
        skip_page_table=unified and not tables,
    )
    if tables:
        kw.update(page_table=[f[2] for _, f in metas], v2p=tables[0]["v2p"])
        if tables[0]["swa_v2p"] is not None:
            kw.update(swa_page_table=[f[3] for _, f in metas], swa_v2p=tables[0]["swa_v2p"])
        kw["_mark"] = True
    if not unified:
        kw["page_table"] = [f[2] for _, f in metas]
        for name, j in (("swa_page_table", 3), ("swa_out_cache_loc", 4)):
            given = [f[j] is not None for _, f in metas]
            if any(given) and not all(given):
                return None
            if all(given):
                if swa_mapping is None:
                    return None  # 0.5.23 would translate through a missing mapping
                kw[name] = [f[j] for _, f in metas]
    kw["_metas"] = [m for m, _ in metas]
    kw["_backends"] = backends
    return kw


def multi_step_draft_init_forward_metadata_in_graph(original: Callable, self: Any, forward_batch: Any) -> None:
    """AROUND hook for ``TRTLLMHAAttnMultiStepDraftBackend.init_forward_metadata_in_graph``.

    0.5.23 builds a DECODE view of the batch and calls each draft-step backend's
    ``init_forward_metadata_in_graph``, i.e. ``_apply_cuda_graph_metadata`` with
    ``seqlen_offset = speculative_step_id + 1``: K - 1 recorded updates of
    ``decode_cuda_graph_metadata[bs]`` (``cache_seqlens``, ``cu_seqlens_k``, the
    draft-decode page table, its SWA table and ``swa_out_cache_loc`` when bound;
    the unified pool's seqlens only), then sets each backend's
    ``forward_metadata``. This records one multi-set launch doing all of it, each
    live page gathered once. Falls back to ``original`` when the backends are not
    plain 0.5.23 ``TRTLLMHAAttnBackend`` objects sharing one pool, or the buffers
    are not bound as 0.5.23 binds them.
    """
    kw = _multi_step_call(self, forward_batch)
    if kw is None:
        return original(self, forward_batch)
    metas, backends, recorded = kw.pop("_metas"), kw.pop("_backends"), kw.pop("_mark", False)
    update_trtllm_mha_graph_metadata_multi(**kw)
    for backend, meta in zip(backends, metas):
        if recorded:
            _unified.mark(meta)
        backend.forward_metadata = meta
    return None


# ---- ragged verify: 10-14 eager launches -> padding kernel + one ----------------------


def _padded_verify_lens(ragged_layout: Any, padded_bs: int):
    """The layout's verify lengths padded to the captured batch, as 0.5.23's
    ``RaggedVerifyLayout.padded_to_bucket(padded_bs=...)`` pads them: its own
    kernel, without the indptr build (cu_seqlens_q comes from the one launch)."""
    try:
        from sglang.kernels.ops.speculative.ragged_verify_kernels import PaddedToBucket
    except ImportError:
        return ragged_layout.padded_to_bucket(padded_bs=padded_bs).verify_lens
    return PaddedToBucket.execute(
        verify_lens=ragged_layout.verify_lens,
        graph_num_tokens=ragged_layout.graph_num_tokens,
        bs=ragged_layout.bs,
        padded_bs=padded_bs,
    )


def _ragged_verify_call(self: Any, metadata: Any, forward_batch: Any, bs: int) -> Optional[dict]:
    if not _plain_backend(self):
        return None
    attrs = _attrs(self, "req_to_token", "page_size", "max_num_pages", "kv_index_translator",
                   "_swa_full_to_swa_mapping", "_swa_kv_pool")
    fields = _attrs(metadata, "cache_seqlens_int32", "cu_seqlens_q", "cu_seqlens_k", "page_table", "swa_page_table")
    if attrs is None or fields is None:
        return None
    req_to_token, page_size, max_num_pages, translator, mapping, swa_pool = attrs
    if getattr(translator, "is_translating", True):
        return None  # unified pool: its tables come from the plan (kept as 0.5.23 does it)
    cache_seqlens, cu_seqlens_q, cu_seqlens_k, page_table, swa_page_table = fields
    kw = dict(
        req_pool_indices=forward_batch.req_pool_indices[:bs],
        seq_lens=forward_batch.seq_lens[:bs],
        req_to_token=req_to_token,
        cache_seqlens=cache_seqlens,
        cu_seqlens_k=cu_seqlens_k,
        cu_seqlens_q=cu_seqlens_q,
        page_table=page_table,
        bs=bs,
        seqlen_offset=0,
        max_seq_pages=max_num_pages,
        page_size=page_size,
        q_mode=Q_MODE_CUMSUM,
        live_pages_only=True,  # the page-table builder writes live prefixes only
    )
    # 0.5.23's SWA table: build_trtllm_mha_page_table through the SWA pool's
    # mapping (live slots are inside it, so its clamp never changes a value).
    if swa_pool is not None:
        if swa_page_table is None or mapping is None or getattr(swa_pool, "full_to_swa_index_mapping", None) is not mapping:
            return None
        kw.update(swa_mapping=mapping, swa_page_table=swa_page_table)
    # 0.5.23's SWA write ids: the plan's SLIDING_WINDOW ids padded with the sink
    # (0) to out_cache_loc's length, the rest of the buffer zeroed. On the static
    # pool those are full_to_swa[out_cache_loc] (the sink slot 0 maps to 0, a -1
    # to the mapping's -1 sentinel): the op's translation of the whole buffer.
    out_cache_loc = getattr(forward_batch, "out_cache_loc", None)
    if getattr(self, "use_sliding_window_kv_pool", False) and out_cache_loc is not None:
        buffer = getattr(self, "cuda_graph_swa_out_cache_loc", None)
        if buffer is None or mapping is None:
            return None
        kw.update(swa_mapping=mapping, out_cache_loc=out_cache_loc, swa_out_cache_loc=buffer)
    return kw


def ragged_verify_write_graph_metadata(
    original: Callable,
    self: Any,
    metadata: Any,
    forward_batch: Any,
    ragged_layout: Any,
    bs: int,
    in_capture: bool = False,
) -> None:
    """AROUND hook for ``TRTLLMHAAttnBackend._write_ragged_verify_graph_metadata``.

    0.5.23, on every capture and replay prep of a ragged target verify: pads the
    verify lengths to the bucket (``padded_to_bucket``: a padding kernel and an
    indptr kernel), then eagerly ``cache_seqlens = seq_lens + verify_lens``,
    ``cu_seqlens_q = [0, cumsum(verify_lens)]``, ``cu_seqlens_k[1:] =
    cumsum(cache_seqlens)``, the page table (and SWA table) over each row's live
    prefix with ``build_trtllm_mha_page_table``, and the SWA write ids into the
    whole ``cuda_graph_swa_out_cache_loc`` buffer. This keeps the padding kernel
    and does the rest in one update with ``seqlen_offsets = qlens =`` the padded
    lengths, ``Q_MODE_CUMSUM`` and live pages. Capture-time calls (0.5.23 writes
    sink ids there), the unified pool and non-0.5.23 backends keep ``original``.

    Recording it in the decode graph itself (instead of out of graph, or in
    SGLang's metadata glue graph) needs SGLang to keep the padded lengths in a
    static buffer: ``PaddedToBucket`` writing into a ``target_verify_metadata``
    buffer during replay prep, and ``_apply_cuda_graph_metadata`` recording this
    same call with ``seqlen_offsets=qlens=<that buffer>[:bs]`` instead of
    returning early for ragged batches.
    """
    kw = None if in_capture else _ragged_verify_call(self, metadata, forward_batch, bs)
    if kw is None:
        return original(self, metadata, forward_batch, ragged_layout, bs, in_capture=in_capture)
    padded = _padded_verify_lens(ragged_layout, bs)
    update_trtllm_mha_graph_metadata(**kw, seqlen_offsets=padded, qlens=padded)
    return None

