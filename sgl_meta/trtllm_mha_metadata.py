"""TRT-LLM MHA backend: CUDA-graph metadata update and the page-table builder.

Keyword wrappers over ``torch.ops.sgl_meta.update_trtllm_mha_graph_metadata`` and
``torch.ops.sgl_meta.build_trtllm_mha_page_table``. Each wrapper only forwards to
the registered operator, so it costs one Python call on top of the dispatcher and
traces cleanly under ``torch.compile``. Argument names are SGLang's.
"""

from __future__ import annotations

from typing import Optional, Sequence

import torch

from ._common import explain_missing_tensor

Q_MODE_NONE = 0
"""``cu_seqlens_q`` is preset by the caller and left untouched (decode, target-verify)."""
Q_MODE_CUMSUM = 1
"""``cu_seqlens_q[1:] = cumsum(qlens)`` (draft-extend)."""
Q_MODE_STRIDED = 2
"""``cu_seqlens_q[j] = j * q_stride`` (draft-extend v2, fixed tokens per request)."""

_update_trtllm_mha_graph_metadata = torch.ops.sgl_meta.update_trtllm_mha_graph_metadata.default


def update_trtllm_mha_graph_metadata(
    *,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    req_to_token: torch.Tensor,
    cache_seqlens: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    page_table: Optional[torch.Tensor] = None,
    bs: int,
    seqlen_offset: int,
    max_seq_pages: int,
    page_size: int,
    swa_mapping: Optional[torch.Tensor] = None,
    swa_page_table: Optional[torch.Tensor] = None,
    out_cache_loc: Optional[torch.Tensor] = None,
    swa_out_cache_loc: Optional[torch.Tensor] = None,
    cu_seqlens_q: Optional[torch.Tensor] = None,
    qlens: Optional[torch.Tensor] = None,
    q_stride: int = 0,
    q_mode: int = Q_MODE_NONE,
    live_pages_only: bool = False,
    skip_page_table: bool = False,
    seqlen_offsets: Optional[torch.Tensor] = None,
    v2p: Optional[torch.Tensor] = None,
    swa_v2p: Optional[torch.Tensor] = None,
) -> None:
    """Refresh all CUDA-graph metadata of the TRT-LLM MHA backend in one launch.

    Mirrors SGLang 0.5.23's Triton ``update_trtllm_mha_graph_metadata``
    (``sglang/kernels/ops/attention/trtllm_mha_graph_metadata.py``, called by
    ``TRTLLMHAAttnBackend._apply_cuda_graph_metadata`` and recorded in the decode
    graph), which replaced ~25 eager ops (gathers, floor_divide, cumsum, casts,
    copies); it accepts every keyword set 0.5.23 passes. Writes, for ``i < bs``:

    * ``cache_seqlens[i] = seq_lens[i] + seqlen_offset (+ seqlen_offsets[i])``
    * ``cu_seqlens_k[0] = 0``, ``cu_seqlens_k[i+1] = cache_seqlens[0..i].sum()``
    * ``cu_seqlens_q`` per ``q_mode``: ``Q_MODE_NONE`` leaves it untouched,
      ``Q_MODE_CUMSUM`` writes ``0, cumsum(qlens[:bs])``, ``Q_MODE_STRIDED`` writes
      ``cu_seqlens_q[j] = j * q_stride`` for ``j <= bs``
    * ``page_table[i, p] = req_to_token[req_pool_indices[i], p * page_size] // page_size``
    * ``swa_page_table[i, p]``: the same slot ``t`` mapped through
      ``swa_mapping[t] // page_size``, or ``-1`` when ``t < 0`` or ``swa_mapping[t] < 0``
    * ``swa_out_cache_loc[k] = swa_mapping[out_cache_loc[k]]`` (``-1`` for a negative
      location) for ``k < min(L, out_cache_loc.numel())``, ``0`` for the rest of its
      ``L`` elements (all ``0`` when ``out_cache_loc`` is None)

    Columns ``p < max_seq_pages`` are written, or with ``live_pages_only=True`` only
    ``p < min(ceil(cache_seqlens[i] / page_size), max_seq_pages)`` (the tail keeps its
    old values). ``//`` is floor division (``-1 // 64 == -1``). ``bs == 0`` is a no-op.
    Differences from 0.5.23: the default writes the full width (0.5.23: live pages
    only, ``live_pages_only=True`` here), negative slots floor (0.5.23 truncates),
    ``cu_seqlens_k[0]`` / ``cu_seqlens_q[0]`` are written as 0 (0.5.23 relies on
    zero-initialised buffers), out-of-range device values trip a named assert.
    The full contract: ``docs/operators/trtllm_mha_metadata.md``.

    Args:
        req_pool_indices: ``[>= bs]`` int32/int64, row of each request in ``req_to_token``.
        seq_lens: ``[>= bs]`` int32/int64, KV length in tokens.
        req_to_token: ``[pool_size, max_context_len]`` int32 token-slot pool; rows
            addressed by ``stride(0)``, inner stride 1.
        cache_seqlens: out, ``[>= bs]`` int32.
        cu_seqlens_k: out, ``[>= bs + 1]`` int32.
        page_table: out, ``[>= bs, >= max_seq_pages]`` int32, inner stride 1;
            required unless ``skip_page_table``.
        bs: batch size (rows to write), ``>= 0``.
        seqlen_offset: tokens added to every ``seq_lens`` entry (e.g. draft step).
        max_seq_pages: page-table columns to write, ``>= 0``; needs
            ``(max_seq_pages - 1) * page_size < req_to_token.size(1)``.
        page_size: tokens per KV page, ``>= 1``.
        swa_mapping: ``[M]`` int32/int64 full-pool slot -> SWA-pool slot; required
            when ``swa_page_table`` or ``swa_out_cache_loc`` is given, accepted and
            unused otherwise (SGLang 0.5.23 passes it on every call).
        swa_page_table: out, int32, same shape rules as ``page_table``.
        out_cache_loc: ``[n]`` int64 full-pool slots of this step's new tokens.
        swa_out_cache_loc: out, ``[L]`` int64.
        cu_seqlens_q: out, ``[>= bs + 1]`` int32; required when ``q_mode != Q_MODE_NONE``.
        qlens: ``[>= bs]`` int32/int64 query lengths; required for ``Q_MODE_CUMSUM``.
        q_stride: query tokens per request for ``Q_MODE_STRIDED``, ``>= 0``.
        q_mode: ``Q_MODE_NONE`` (0), ``Q_MODE_CUMSUM`` (1) or ``Q_MODE_STRIDED`` (2).
        live_pages_only: write only each row's live pages.
        skip_page_table: write only ``cache_seqlens``, ``cu_seqlens_k`` and
            ``cu_seqlens_q``; ``page_table``, ``swa_page_table`` and
            ``swa_out_cache_loc`` may be None and are never touched (nor checked),
            ``req_pool_indices``, ``req_to_token``'s values and the mapping are not
            read. SGLang 0.5.23's unified memory pool path.
        seqlen_offsets: ``[>= bs]`` int32/int64 per-row tokens added on top of
            ``seqlen_offset`` (ragged verify: each request's verify length; pass
            the same tensor as ``qlens`` with ``Q_MODE_CUMSUM`` and
            ``live_pages_only=True`` for SGLang's ``_write_ragged_verify_graph_metadata``
            geometry in one launch).
        v2p: ``[num_pages + 1]`` int64 virtual -> physical page table of SGLang's
            unified memory pool (``req_to_token`` holds virtual slots): then
            ``page_table[i, p] = max(v2p[vpage], 0)`` with ``vpage = slot // page_size``,
            a negative slot reading virtual page 0 (as ``kv_read_table.py``). A
            ``vpage`` outside ``v2p`` raises on CPU / trips a device assert on CUDA.
        swa_v2p: the same for ``swa_page_table`` (the sliding-window sub-pool's
            table, from the same virtual slots); when given, the SWA table uses it
            instead of ``swa_mapping`` (which ``swa_out_cache_loc`` still needs).

    Raises:
        RuntimeError: a wrong dtype, device, rank, size, inner stride, negative
            scalar, ``page_size < 1``, a missing or unpaired optional tensor, a bad
            ``q_mode``, page-table rows that overlap (``stride(0) < max_seq_pages``
            with ``bs > 1``), outputs that share memory, ``page_table=None`` without
            ``skip_page_table``, or ``seqlen_offset`` / ``bs * q_stride`` outside int32
            (message names the op and argument). On CPU also for a request index
            outside ``req_to_token``, a slot outside ``swa_mapping`` or a virtual page
            outside ``v2p`` / ``swa_v2p``; on CUDA those trip a device-side assert
            instead; on CPU nothing is written before such an error.
        TypeError: ``None`` for a required tensor.

    ``out_cache_loc`` is only read to fill ``swa_out_cache_loc`` (ignored without
    it, as upstream). 1-D tensors must be contiguous (stride 1; a strided 1-D view
    is rejected, never copied). Never allocates, never synchronises: safe inside
    CUDA-graph capture. Writes do not bump autograd version counters: do not
    overwrite a tensor that autograd saved for backward (these are inference-time
    index buffers).
    """
    try:  # (free on the success path; see explain_missing_tensor)
        _update_trtllm_mha_graph_metadata(
            req_pool_indices,
            seq_lens,
            req_to_token,
            cache_seqlens,
            cu_seqlens_k,
            page_table,
            bs,
            seqlen_offset,
            max_seq_pages,
            page_size,
            swa_mapping,
            swa_page_table,
            out_cache_loc,
            swa_out_cache_loc,
            cu_seqlens_q,
            qlens,
            q_stride,
            q_mode,
            live_pages_only,
            skip_page_table,
            seqlen_offsets,
            v2p,
            swa_v2p,
        )
    except RuntimeError as err:
        explain_missing_tensor("update_trtllm_mha_graph_metadata", err, locals())
        raise


_update_trtllm_mha_graph_metadata_multi = torch.ops.sgl_meta.update_trtllm_mha_graph_metadata_multi.default
_MULTI_LISTS = ("cache_seqlens", "cu_seqlens_k", "page_table", "swa_page_table", "swa_out_cache_loc", "cu_seqlens_q")


def update_trtllm_mha_graph_metadata_multi(
    *,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    req_to_token: torch.Tensor,
    cache_seqlens: Sequence[torch.Tensor],
    cu_seqlens_k: Sequence[torch.Tensor],
    page_table: Optional[Sequence[torch.Tensor]] = None,
    bs: int,
    seqlen_offset: Sequence[int],
    max_seq_pages: int,
    page_size: int,
    swa_mapping: Optional[torch.Tensor] = None,
    swa_page_table: Optional[Sequence[torch.Tensor]] = None,
    out_cache_loc: Optional[torch.Tensor] = None,
    swa_out_cache_loc: Optional[Sequence[torch.Tensor]] = None,
    cu_seqlens_q: Optional[Sequence[torch.Tensor]] = None,
    qlens: Optional[torch.Tensor] = None,
    q_stride: int = 0,
    q_mode: int = Q_MODE_NONE,
    live_pages_only: bool = False,
    skip_page_table: bool = False,
    seqlen_offsets: Optional[torch.Tensor] = None,
    v2p: Optional[torch.Tensor] = None,
    swa_v2p: Optional[torch.Tensor] = None,
) -> None:
    """:func:`update_trtllm_mha_graph_metadata` into K >= 1 destination sets, in one launch.

    For SGLang's multi-step speculative draft backend
    (``TRTLLMHAAttnMultiStepDraftBackend.init_forward_metadata_in_graph``, which
    records one update per draft step ``i`` with ``seqlen_offset = i + 1``). Set
    ``k`` is element ``k`` of every list argument and receives exactly what
    :func:`update_trtllm_mha_graph_metadata` would write with
    ``seqlen_offset=seqlen_offset[k]`` and the shared inputs (``seqlen_offsets``,
    ``v2p``, ``swa_v2p``, ... included). The sets differ only by their offsets, so
    each page slot is gathered (and translated) once and stored into every set
    whose live prefix covers it: the cost of one update plus the extra stores.

    Args: as :func:`update_trtllm_mha_graph_metadata`, except that the outputs are
    lists of K tensors (a tuple works too) and ``seqlen_offset`` a list of K ints.
    ``page_table`` may be None only with ``skip_page_table``; ``swa_page_table``,
    ``swa_out_cache_loc`` and ``cu_seqlens_q`` are None (or empty) or K tensors;
    ``swa_page_table`` is given for every set or for none. Up to 4 sets go in one
    launch; larger K takes ceil(K / 4) launches on the same stream (still no
    allocation or sync). Every output of every set must be distinct memory.

    Raises:
        RuntimeError: as :func:`update_trtllm_mha_graph_metadata` (messages name the
            list element, e.g. ``page_table[2]``), plus lists whose length is not K.
        TypeError: ``None`` for a required tensor or inside a list (named, e.g.
            ``cache_seqlens[1]``).
    """
    try:  # (free on the success path; see _explain_multi_error)
        _update_trtllm_mha_graph_metadata_multi(
            req_pool_indices,
            seq_lens,
            req_to_token,
            cache_seqlens,
            cu_seqlens_k,
            () if page_table is None else page_table,
            () if swa_page_table is None else swa_page_table,
            () if swa_out_cache_loc is None else swa_out_cache_loc,
            () if cu_seqlens_q is None else cu_seqlens_q,
            bs,
            seqlen_offset,
            max_seq_pages,
            page_size,
            swa_mapping,
            out_cache_loc,
            qlens,
            q_stride,
            q_mode,
            live_pages_only,
            skip_page_table,
            seqlen_offsets,
            v2p,
            swa_v2p,
        )
    except (RuntimeError, TypeError) as err:
        _explain_multi_error(err, locals())
        raise


def _explain_multi_error(err: Exception, args: dict) -> None:
    """Error path only: a None inside a destination list gets torch's generic
    list-type message; name the op and the list element instead."""
    for name in _MULTI_LISTS:
        for k, t in enumerate(args.get(name) or ()):
            if t is None:
                raise TypeError(
                    f"sgl_meta.update_trtllm_mha_graph_metadata_multi: {name}[{k}] must be a Tensor, got None"
                ) from err
    if isinstance(err, RuntimeError):
        explain_missing_tensor("update_trtllm_mha_graph_metadata_multi", err, args)


_build_trtllm_mha_page_table = torch.ops.sgl_meta.build_trtllm_mha_page_table.default


def build_trtllm_mha_page_table(
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    cache_seqlens: torch.Tensor,
    page_table: torch.Tensor,
    page_size: int,
    swa_page_table: Optional[torch.Tensor] = None,
    full_to_swa: Optional[torch.Tensor] = None,
) -> None:
    """Fill the TRT-LLM MHA page table from ``req_to_token``, sync-free.

    Mirrors SGLang 0.5.23's Triton ``build_trtllm_mha_page_table``
    (``sglang/kernels/ops/attention/trtllm_mha_page_table.py``), same signature, which
    replaced a ``seq_lens.max().item()`` + gather + ``floor_divide`` eager path:
    each row's work is bounded by its device-side length, the launch only by
    ``page_table``'s static shape. For row ``r < bs`` (``bs, W = page_table.shape``)
    and ``p < n_r``::

        slot = req_to_token[req_pool_indices[r], p * page_size]
        page_table[r, p] = slot // page_size
        swa_page_table[r, p] = full_to_swa[clamp(slot, 0, M - 1)] // page_size

    with ``n_r = min(ceil(max(cache_seqlens[r], 0) / page_size), W,
    ceil(req_to_token.size(1) / page_size))``. Columns ``p >= n_r`` are never
    written (a ``-1``-prefilled tail survives). ``//`` is floor division
    (``-1 // 64 == -1``). ``bs == 0`` is a no-op. Unlike SGLang's Triton builder, ``n_r`` is
    capped by the table width and the ``req_to_token`` row, and any ``page_size >= 1``
    works (0.5.23 needs ``4096 % page_size == 0``).

    Args:
        req_to_token: ``[pool_size, max_context_len]`` int32 token-slot pool; rows
            addressed by ``stride(0)``, inner stride 1.
        req_pool_indices: ``[>= bs]`` int32/int64, row of each request in
            ``req_to_token``.
        cache_seqlens: ``[>= bs]`` int32/int64, KV length in tokens (``<= 0``: no pages).
        page_table: out, ``[bs, W]`` int32 page ids; rows addressed by ``stride(0)``
            (e.g. a ``[:bs, :W]`` slice of a larger buffer), inner stride 1.
        page_size: tokens per KV page, ``>= 1``.
        swa_page_table: out, int32 ``[>= bs, >= W]`` SWA page ids, same stride
            rules; given iff ``full_to_swa`` is.
        full_to_swa: ``[M]`` int32/int64 full-pool slot -> SWA-pool slot, ``M >= 1``;
            lookups are clamped into ``[0, M - 1]`` (no sentinel handling, as the seed).

    Raises:
        RuntimeError: a wrong dtype, device, rank, size, inner stride, overlapping
            output rows, ``page_size < 1``, an empty ``full_to_swa``, or only one of
            ``swa_page_table``/``full_to_swa`` (message names the op and argument).
            On CPU also for a ``req_pool_indices[r]`` outside ``[0, req_to_token.size(0))``
            (checked for every row, whatever its length); on CUDA that trips a
            device-side assert instead. On CPU nothing is written before an error.
        TypeError: ``None`` for a required tensor.

    1-D tensors must be contiguous (stride 1). Never allocates, never synchronises:
    safe inside CUDA-graph capture. Writes do not bump autograd version counters.
    """
    try:  # (free on the success path; see explain_missing_tensor)
        _build_trtllm_mha_page_table(
            req_to_token,
            req_pool_indices,
            cache_seqlens,
            page_table,
            page_size,
            swa_page_table,
            full_to_swa,
        )
    except RuntimeError as err:
        explain_missing_tensor("build_trtllm_mha_page_table", err, locals())
        raise
