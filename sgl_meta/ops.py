"""Keyword wrappers over ``torch.ops.sgl_meta.*``.

Each wrapper only forwards to the registered operator, so it costs one Python
call on top of the dispatcher and traces cleanly under ``torch.compile``. The
argument names are the upstream (SGLang) names, so model code switches to
sgl_meta by changing an import.
"""

from __future__ import annotations

from typing import Optional

import torch

from . import _C  # noqa: F401  (loads the library: registers torch.ops.sgl_meta.*)

Q_MODE_NONE = 0
"""``cu_seqlens_q`` is preset by the caller and left untouched (decode, target-verify)."""
Q_MODE_CUMSUM = 1
"""``cu_seqlens_q[1:] = cumsum(qlens)`` (draft-extend)."""
Q_MODE_STRIDED = 2
"""``cu_seqlens_q[j] = j * q_stride`` (draft-extend v2, fixed tokens per request)."""

_update_trtllm_mha_graph_metadata = torch.ops.sgl_meta.update_trtllm_mha_graph_metadata.default


def _explain_missing_tensor(op_name: str, err: RuntimeError, args: dict) -> None:
    """Error path only: None for a required Tensor fails in the stable-ABI
    boxing with a message naming neither the op nor the argument
    ("Not yet supported ScalarType 47"); name them instead."""
    for a in getattr(torch.ops.sgl_meta, op_name).default._schema.arguments:
        if a.type.kind() == "TensorType" and a.name in args and args[a.name] is None:
            raise TypeError(f"sgl_meta.{op_name}: {a.name} must be a Tensor, got None") from err


def update_trtllm_mha_graph_metadata(
    *,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    req_to_token: torch.Tensor,
    cache_seqlens: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    page_table: torch.Tensor,
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
) -> None:
    """Refresh all CUDA-graph metadata of the TRT-LLM MHA backend in one launch.

    Mirrors SGLang's Triton ``update_trtllm_mha_graph_metadata`` (the
    ``TRTLLMHAAttnBackend`` CUDA-graph replay path), which replaced ~25 eager ops
    (gathers, floor_divide, cumsum, casts, copies). Writes, for ``i < bs``:

    * ``cache_seqlens[i] = seq_lens[i] + seqlen_offset``
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

    Args:
        req_pool_indices: ``[>= bs]`` int32/int64, row of each request in ``req_to_token``.
        seq_lens: ``[>= bs]`` int32/int64, KV length in tokens.
        req_to_token: ``[pool_size, max_context_len]`` int32 token-slot pool; rows
            addressed by ``stride(0)``, inner stride 1.
        cache_seqlens: out, ``[>= bs]`` int32.
        cu_seqlens_k: out, ``[>= bs + 1]`` int32.
        page_table: out, ``[>= bs, >= max_seq_pages]`` int32, inner stride 1.
        bs: batch size (rows to write), ``>= 0``.
        seqlen_offset: tokens added to every ``seq_lens`` entry (e.g. draft step).
        max_seq_pages: page-table columns to write, ``>= 0``; needs
            ``(max_seq_pages - 1) * page_size < req_to_token.size(1)``.
        page_size: tokens per KV page, ``>= 1``.
        swa_mapping: ``[M]`` int64 full-pool slot -> SWA-pool slot; required iff
            ``swa_page_table`` or ``swa_out_cache_loc`` is given.
        swa_page_table: out, int32, same shape rules as ``page_table``.
        out_cache_loc: ``[n]`` int64 full-pool slots of this step's new tokens.
        swa_out_cache_loc: out, ``[L]`` int64.
        cu_seqlens_q: out, ``[>= bs + 1]`` int32; required when ``q_mode != Q_MODE_NONE``.
        qlens: ``[>= bs]`` int32/int64 query lengths; required for ``Q_MODE_CUMSUM``.
        q_stride: query tokens per request for ``Q_MODE_STRIDED``, ``>= 0``.
        q_mode: ``Q_MODE_NONE`` (0), ``Q_MODE_CUMSUM`` (1) or ``Q_MODE_STRIDED`` (2).
        live_pages_only: write only each row's live pages.

    Raises:
        RuntimeError: a wrong dtype, device, rank, size, inner stride, negative
            scalar, ``page_size < 1``, a missing or unpaired optional tensor, a bad
            ``q_mode``, or page-table rows that overlap (``stride(0) < max_seq_pages``
            with ``bs > 1``) (message names the op and argument). On CPU also for a
            request index outside ``req_to_token`` or a slot outside ``swa_mapping``;
            on CUDA those trip a device-side assert instead.
        TypeError: ``None`` for a required tensor.

    Never allocates, never synchronises: safe inside CUDA-graph capture.
    """
    try:  # (free on the success path; see _explain_missing_tensor)
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
        )
    except RuntimeError as err:
        _explain_missing_tensor("update_trtllm_mha_graph_metadata", err, locals())
        raise
