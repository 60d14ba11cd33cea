"""TRT-LLM MHA backend: the CUDA-graph metadata update, into one or K destination sets.

Argument names are SGLang's; the arguments themselves are the ops' schemas
(``csrc/torch_bindings.cpp``), described once in :mod:`sgl_meta._op`.
"""

from __future__ import annotations

from . import _op

Q_MODE_NONE = 0
"""``cu_seqlens_q`` is preset by the caller and left untouched (decode, target-verify)."""
Q_MODE_CUMSUM = 1
"""``cu_seqlens_q[1:] = cumsum(qlens)`` (draft-extend)."""
Q_MODE_STRIDED = 2
"""``cu_seqlens_q[j] = j * q_stride`` (draft-extend v2, fixed tokens per request)."""

# Both forms take the same inputs.
_INPUTS = dict(
    family="trtllm_mha_metadata",
    index=("req_pool_indices", "seq_lens", "qlens", "seqlen_offsets", "swa_mapping"),
    int64=("out_cache_loc", "swa_out_cache_loc", "v2p", "swa_v2p"),
)

update_trtllm_mha_graph_metadata = _op.define(
    "update_trtllm_mha_graph_metadata",
    **_INPUTS,
    upstream="sglang.kernels.ops.attention.trtllm_mha_graph_metadata.update_trtllm_mha_graph_metadata",
    defaults={"page_table": None},
    doc="""Refresh all CUDA-graph metadata of the TRT-LLM MHA backend in one launch.

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

    Lengths: every ``seq_lens[i]`` (and ``qlens[i]`` with ``Q_MODE_CUMSUM``) must lie in
    ``[0, 2**31 - 1]``, and so must every ``cache_seqlens[i] = seq_lens[i] (+ seqlen_offsets[i])
    + seqlen_offset`` and every running sum written to ``cu_seqlens_k`` / ``cu_seqlens_q``:
    offsets may be negative, the results may not. Otherwise the CPU op raises RuntimeError
    naming the op and the argument, with nothing written; CUDA trips a device-side assert
    naming the op. Also with ``skip_page_table=True``.

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
        TypeError: an argument of the wrong type (``None`` for a required tensor,
            a float or bool for an int, an int for a tensor), naming it.

    ``out_cache_loc`` is only read to fill ``swa_out_cache_loc`` (ignored without
    it, as upstream). 1-D tensors must be contiguous (stride 1; a strided 1-D view
    is rejected, never copied). Never allocates, never synchronises: safe inside
    CUDA-graph capture. Writes do not bump autograd version counters: do not
    overwrite a tensor that autograd saved for backward (these are inference-time
    index buffers).
    """,
)

update_trtllm_mha_graph_metadata_multi = _op.define(
    "update_trtllm_mha_graph_metadata_multi",
    **_INPUTS,
    upstream="the K - 1 recorded updates of TRTLLMHAAttnMultiStepDraftBackend.init_forward_metadata_in_graph",
    defaults={"page_table": None, "swa_page_table": None, "swa_out_cache_loc": None, "cu_seqlens_q": None},
    doc=""":func:`update_trtllm_mha_graph_metadata` into K >= 1 destination sets, in one launch.

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

    Lengths: as :func:`update_trtllm_mha_graph_metadata`, per destination set:
    ``seq_lens[i] (+ seqlen_offsets[i]) + seqlen_offset[s]`` and each set's ``cu_seqlens_k``
    running sum must lie in ``[0, 2**31 - 1]``; errors name the set (``seqlen_offset[1]``).

    Raises:
        RuntimeError: as :func:`update_trtllm_mha_graph_metadata` (messages name the
            list element, e.g. ``page_table[2]``), plus lists whose length is not K.
        TypeError: an argument of the wrong type, ``None`` for a required tensor or
            inside a list (named, e.g. ``cache_seqlens[1]``).
    """,
)

__all__ = _op.exports(__name__, "Q_MODE_NONE", "Q_MODE_CUMSUM", "Q_MODE_STRIDED")
