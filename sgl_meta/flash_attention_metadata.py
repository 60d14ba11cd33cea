"""FlashAttention (FA3/FA4) backend: decode, draft-extend and SWA speculative metadata.

The ops ``update_flash_attention_metadata`` (any K >= 1 destination sets, one
``seq_len_delta`` each: a multi-step draft backend's K graphs in one launch)
and ``flash_attention_swa_spec_page_table``, plus drop-ins with the exact
signatures of SGLang 0.5.23's ``sglang/kernels/ops/attention/metadata.py``
(``normal_decode_set_metadata``, ``draft_extend_set_metadata``,
``prepare_swa_spec_page_table_triton``), called by
``sglang/srt/layers/attention/flashattention_backend.py``.

Upstream compiles its decode kernel once per ``seq_len_delta`` (a Triton
constexpr); here it is a run-time value.
"""

from __future__ import annotations

import threading
from typing import Callable, Optional

import torch

from . import _errors, _op

_UPSTREAM = "sglang.kernels.ops.attention.metadata"

update_flash_attention_metadata = _op.define(
    "update_flash_attention_metadata",
    family="flash_attention_metadata",
    upstream=f"{_UPSTREAM}.normal_decode_set_metadata; {_UPSTREAM}.draft_extend_set_metadata "
    "(K = 1; K > 1: FlashAttentionMultiStepBackend's K draft steps)",
    index=("req_pool_indices", "seq_lens", "extend_seq_lens", "full_to_swa_index_mapping", "full_v2p",
           "swa_v2p", "out_cache_loc"),
    int64=("swa_out_cache_loc",),
    defaults={"swa_page_table": None},
    doc="""Fill FlashAttention's replay metadata into K >= 1 destination sets, in one launch.

    Covers SGLang 0.5.23's ``normal_decode_set_metadata`` and ``draft_extend_set_metadata``
    (``sglang/kernels/ops/attention/metadata.py``, Triton) and, with K > 1, the K
    per-step calls of ``FlashAttentionMultiStepBackend`` (one per draft step, each with
    its own ``seq_len_delta``) as one launch gathering each page once. Set ``s`` is
    element ``s`` of every list. For row ``i < bs``, ``len_s(i) = seq_lens[i] +
    seq_len_delta[s]``::

        cache_seqlens[s][i] = len_s(i)
        cu_seqlens_k[s][0] = 0;  cu_seqlens_k[s][i + 1] = len_s(0) + ... + len_s(i)  (when given)
        cu_seqlens_q[0] = 0;     cu_seqlens_q[i + 1] = extend_seq_lens[0] + ... (when given)

        for s < len(page_table), c < n_s(i) = min(ceil(len_s(i) / page_size), max_seq_pages):
            slot = req_to_token[req_pool_indices[i], c * page_size]
            vpage = max(slot // page_size, 0)
            page_table[s][i, c] = max(full_v2p[vpage], 0) if full_v2p is given else slot // page_size
            swa_page_table[s][i, c] = max(swa_v2p[vpage], 0) if swa_v2p is given
                                      else -1 if slot < 0
                                      else full_to_swa_index_mapping[slot] // page_size

        swa_out_cache_loc[k] = -1 if out_cache_loc[k] < 0
                               else full_to_swa_index_mapping[out_cache_loc[k]]

    for ``k < swa_out_cache_loc.numel()``. ``//`` is floor division (``-1 // 64 == -1``).
    Columns past ``n_s(i)`` keep their values, or with ``zero_tail`` are set to 0 in both
    tables up to ``max_seq_pages``. ``skip_page_table`` writes no table (the lengths,
    sums and ``swa_out_cache_loc`` only). ``bs == 0`` writes nothing.

    Args:
        cache_seqlens, cu_seqlens_k: lists of K int32 ``[>= bs]`` / ``[>= bs + 1]``;
            ``cu_seqlens_k`` may be empty (no running sums are written, nor checked).
        page_table: up to K int32 ``[>= bs, >= max_seq_pages]`` (rows by ``stride(0)``,
            inner stride 1): sets ``0 .. len(page_table) - 1`` get a table, the rest
            lengths only (two length buffers over one table); may be empty with
            ``skip_page_table``.
        swa_page_table: one tensor per ``page_table`` entry, shaped like it, or None
            (not written).
        cu_seqlens_q: int32 ``[>= bs + 1]``, with ``extend_seq_lens`` (draft extend).
        swa_out_cache_loc: int64 ``[n]``, needs ``out_cache_loc`` (``[>= n]``) and
            ``full_to_swa_index_mapping``.
        req_to_token: int32 ``[pool, ctx]`` token slots (virtual ids in a unified pool).
        req_pool_indices, seq_lens: int32/int64 ``[>= bs]``.
        seq_len_delta: K ints (int32 range), one per set.
        bs: requests. max_seq_pages: table columns, ``(max_seq_pages - 1) * page_size <
            ctx``. page_size: a power of two.
        extend_seq_lens: int32/int64 ``[>= bs]``.
        full_to_swa_index_mapping: int32/int64 token slot -> SWA slot (static SWA pool).
        full_v2p, swa_v2p: int32/int64 virtual -> physical page tables (unified pool;
            ``-1``, unbound, reads as page 0, the sink); the SWA table uses ``swa_v2p``
            when given, else the token mapping.

    Lengths: ``seq_lens[i]``, ``extend_seq_lens[i]``, every ``len_s(i)`` and every running
    sum must lie in ``[0, 2**31 - 1]``; otherwise RuntimeError on CPU (nothing written),
    a named device assert on CUDA.

    Raises:
        RuntimeError: wrong dtype / device / rank / size / inner stride, lists of unequal
            length, overlapping outputs, a page size that is not a power of two,
            ``seq_len_delta`` outside int32, ``max_seq_pages`` past the ``req_to_token``
            row (message names the op and argument). On CPU a ``req_pool_indices[i]``
            outside ``req_to_token`` (every row, when a table is written), a slot outside
            the SWA mapping, a virtual page outside a v2p table or an ``out_cache_loc``
            entry outside the mapping raises before anything is written; on CUDA it
            trips a device-side assert naming the op.
        TypeError: an argument of the wrong type, naming it.

    Never allocates, never synchronises: capturable in a CUDA graph and replayable with
    new inputs. Up to 8 sets per launch; larger K takes ceil(K / 8) launches.
    """,
)

flash_attention_swa_spec_page_table = _op.define(
    "flash_attention_swa_spec_page_table",
    family="flash_attention_metadata",
    upstream=f"`{_UPSTREAM}.prepare_swa_spec_page_table_triton`",
    index=("seq_len_a", "seq_len_b"),
    doc="""Concatenate each request's prefix pages and its draft branch's pages (SWA, topk > 1).

    Covers SGLang 0.5.23's ``prepare_swa_spec_page_table_triton``. With ``R =
    speculative_num_draft_tokens``, ``bs = seq_len_a.numel()`` and ``seq_len_b.numel() ==
    bs * R``, for row ``m``, ``a = m // R``, ``la = seq_len_a[a]``, ``lb = seq_len_b[m]``
    and column ``n < min(la + lb, page_table_dst.size(1), A + B)`` (``A``, ``B`` the widths
    of ``page_table_a`` / ``page_table_b``)::

        page_table_dst[m, n] = (page_table_a[a, n] if n < A else 0) if n < la
                               else (page_table_b[m, n - la] if n - la < B else 0)

    Nothing else is written. Lengths must lie in ``[0, 2**31 - 1]`` (RuntimeError on CPU,
    a named device assert on CUDA). All tables int32, rows by ``stride(0)``, inner stride 1.
    """,
)

flash_attention_verify_expand = _op.define(
    "flash_attention_verify_expand",
    family="flash_attention_metadata",
    upstream="FlashAttentionBackend._apply_cuda_graph_metadata, target verify with top-k > 1: "
    "target_verify_metadata_topk_expand[bs] (~20 eager ops, a full-row req_to_token gather)",
    index=("req_pool_indices", "seq_lens"),
    boolean=("custom_mask",),
    doc="""Fill FA3 target verify's expand metadata (top-k > 1): each draft token's row over the draft tokens it sees.

    What SGLang 0.5.23's ``FlashAttentionBackend._apply_cuda_graph_metadata`` writes into
    ``target_verify_metadata_topk_expand[bs]`` (``page_table``, ``cache_seqlens_int32``,
    ``cu_seqlens_k``) from the verify tree mask, in one launch. With ``n =
    num_draft_tokens``, row ``r < bs * n`` is draft token ``r % n`` of request ``b = r // n``;
    with ``s = seq_lens[b]`` and ``j, k < n``::

        base(r) = sum over rows r' < r of (seq_lens[r' // n] + n)
        m_j     = custom_mask[base(r) + s + j] if r < mask_rows else custom_mask[0]
        order   = the j with m_j, then the others, each in increasing order
        page_table[r, k]  = req_to_token[req_pool_indices[b], s + order[k]]
        cache_seqlens[r]  = m_0 + ... + m_{n-1}
        cu_seqlens_k[0] = 0;  cu_seqlens_k[r + 1] = cache_seqlens[0] + ... + cache_seqlens[r]

    ``custom_mask`` is the verify mask (request ``b``'s ``n`` rows of ``s + n`` entries,
    requests one after the other); SGLang passes ``mask_rows = spec_info.positions.numel()``
    (rows from there on are padding and read entry 0). ``bs * n == 0`` writes nothing.

    Args:
        page_table: int32 ``[>= bs * n, >= n]`` (rows by ``stride(0)``, inner stride 1).
        cache_seqlens: int32 ``[>= bs * n]``. cu_seqlens_k: int32 ``[>= bs * n + 1]``.
        custom_mask: bool, 1-D.
        req_to_token: int32 ``[pool, ctx]`` token slots.
        req_pool_indices, seq_lens: int32/int64 ``[>= bs]``.
        bs: requests. num_draft_tokens: ``n``, in ``[1, 64]``. mask_rows: ``>= 0``.

    Raises:
        RuntimeError: wrong dtype / device / rank / size / inner stride, overlapping outputs,
            ``num_draft_tokens`` outside ``[1, 64]`` (message names the op and argument). A
            ``seq_lens[b]`` outside ``[0, 2**31 - 1]``, a ``req_pool_indices[b]`` outside
            ``req_to_token``, ``seq_lens[b] + n`` past the ``req_to_token`` row or a mask index
            outside ``custom_mask``: on CPU raises before anything is written; on CUDA trips a
            device-side assert naming the op.

    Never allocates, never synchronises: capturable in a CUDA graph and replayable with
    new inputs.
    """,
)

flash_attention_draft_decode_topk = _op.define(
    "flash_attention_draft_decode_topk",
    family="flash_attention_metadata",
    upstream="FlashAttentionMultiStepBackend.init_forward_metadata_out_graph, draft decode with top-k > 1: "
    "each step's draft_decode_metadata_topk_normal[bs] and _expand[bs] (per step a length copy, a "
    "req_to_token gather, a floor division, a page-table copy and the torch.compile'd "
    "draft_decode_set_expand_metadata)",
    index=("req_pool_indices", "seq_lens", "out_cache_loc"),
    doc="""Fill FA3 EAGLE draft decode's metadata with top-k > 1 for K draft steps, in one launch.

    What SGLang 0.5.23's ``FlashAttentionBackend._apply_cuda_graph_metadata`` writes, for
    draft decode with top-k > 1, into each step backend's ``draft_decode_metadata_topk_normal[bs]``
    (the prefix half: ``cache_seqlens_int32``, ``page_table``) and
    ``draft_decode_metadata_topk_expand[bs]`` (the draft half: ``page_table``, and with
    ``page_size > 1`` ``cache_seqlens_int32``). Set ``s`` is element ``s`` of every list, with
    ``d = decode_length[s]`` (SGLang: ``speculative_step_id + 1``) and ``P = page_size``. For
    request ``b < bs``, with ``L = seq_lens[b]``, ``last(b) = L mod P`` and ``len(b) = L - last(b)``::

        cache_seqlens[s][b] = len(b)
        page_table[s][b, c] = req_to_token[req_pool_indices[b], c * P] // P
                              for c < min(len(b) / P, max_seq_pages)

    For row ``r < bs * topk`` (branch ``r % topk`` of request ``b = r // topk``) with
    ``x_j = out_cache_loc[r * num_steps + j]``, ``j < d``::

        P == 1: expand_page_table[s][r, j] = x_j
        P > 1:  q_j = x_j // P;  pos_0 = 0, pos_j = pos_{j-1} + (q_j != q_{j-1})
                expand_page_table[s][r, pos_j] = q_j
        expand_cache_seqlens[s][r] = d + last(b)      (when given)

    ``//`` is floor division. Nothing else is written: prefix columns past ``len(b) / P`` (which
    FA3 does not read: SGLang also copies the partly filled last page there and stale slots up to
    the longest row), expand columns past the last ``pos_j``, rows past the batch.
    ``bs == 0`` writes nothing.

    Args:
        cache_seqlens: K int32 ``[>= bs]``. page_table: K int32 ``[>= bs, >= max_seq_pages]``.
        expand_cache_seqlens: K int32 ``[>= bs * topk]``, or empty (not written; SGLang writes
            them with ``page_size > 1`` only; ``init_cuda_graph_state`` fills in ``d``).
        expand_page_table: K int32 ``[>= bs * topk, >= decode_length[s]]``. Tables: rows by
            ``stride(0)``, inner stride 1.
        req_to_token: int32 ``[pool, ctx]`` token slots.
        req_pool_indices, seq_lens: int32/int64 ``[>= bs]``.
        out_cache_loc: int32/int64 ``[>= bs * topk * num_steps]``: the draft step's slots,
            ``[bs, topk, num_steps]`` row-major.
        bs: requests. topk: branches per request, ``[1, 1024]``. num_steps: ``[1, 64]``.
        decode_length: K ints in ``[1, num_steps]``, 1 <= K <= 16.
        page_size: a power of two. max_seq_pages: prefix table columns,
            ``(max_seq_pages - 1) * page_size < ctx``.

    Raises:
        RuntimeError: wrong dtype / device / rank / size / inner stride, lists of unequal
            length, overlapping outputs, a scalar out of range (message names the op and
            argument). A ``seq_lens[b]`` outside ``[0, 2**31 - 1]``, a ``req_pool_indices[b]``
            outside ``req_to_token``, a draft entry (``x_j``, or ``q_j`` with ``P > 1``) outside
            int32, or with ``expand_cache_seqlens`` given a ``last(b) + max(decode_length)``
            past int32: on CPU raises before anything is written; on CUDA trips a device-side
            assert naming the op.

    Never allocates, never synchronises: capturable in a CUDA graph and replayable with
    new inputs.
    """,
)


# --- Drop-ins: SGLang 0.5.23's exact signatures --------------------------------------


def _size(fn: str, name: str, value, dim: int) -> int:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"sgl_meta.{fn}: {name} must be a Tensor, got {type(value).__name__}")
    if value.dim() <= dim:
        raise ValueError(f"sgl_meta.{fn}: {name} must have at least {dim + 1} dimension(s), got {value.dim()}")
    return value.shape[dim]


_DECODE = "normal_decode_set_metadata"
_DRAFT_EXTEND = "draft_extend_set_metadata"
# The drop-ins pass one set: element [0] of a list is the drop-in's own argument.
_DECODE_NAMES = ((r"\b(cache_seqlens|cu_seqlens_k|page_table|swa_page_table|seq_len_delta)\[0\]", r"\1"),
                 (r"\bcache_seqlens\b", "cache_seqlens_int32"), (r"= bs\b", "= cache_seqlens_int32.size(0)"))
_DRAFT_EXTEND_NAMES = _DECODE_NAMES + ((r"\bmax_seq_pages\b", "page_table.size(1)"),)


def decode_dropin(op: Callable[..., None]) -> Callable[..., None]:
    """``normal_decode_set_metadata`` over ``op`` (this op, or its eager reference)."""

    def normal_decode_set_metadata(
        cache_seqlens_int32: torch.Tensor,
        cu_seqlens_k: torch.Tensor,
        page_table: torch.Tensor,
        req_to_token: torch.Tensor,
        req_pool_indices: torch.Tensor,
        max_seq_pages: int,
        seq_lens: torch.Tensor,
        seq_len_delta: int,
        page_size: int,
        swa_page_table: Optional[torch.Tensor] = None,
        full_to_swa_index_mapping: Optional[torch.Tensor] = None,
        skip_page_table: bool = False,
        full_v2p: Optional[torch.Tensor] = None,
        swa_v2p: Optional[torch.Tensor] = None,
        zero_tail: bool = False,
    ) -> None:
        """Drop-in for ``sglang.kernels.ops.attention.metadata.normal_decode_set_metadata``.

        Same arguments in the same order; :func:`update_flash_attention_metadata` with one set,
        ``bs = cache_seqlens_int32.shape[0]``. ``seq_len_delta`` is a run-time value (no
        compile per value). Upstream's asserts are kept: ValueError for a
        ``swa_page_table`` (without ``skip_page_table``) given with neither or both of
        ``full_to_swa_index_mapping`` and ``swa_v2p``; RuntimeError for a page size
        that is not a power of two. Differences: a negative slot divides by floor
        (upstream's Triton truncates); a negative slot in the token-mapped SWA table
        gives -1 (upstream reads before the mapping); ``bs == 0`` writes nothing.
        """
        fn = _DECODE
        if swa_page_table is not None and not skip_page_table and (
                (full_to_swa_index_mapping is None) == (swa_v2p is None)):
            raise ValueError(f"sgl_meta.{fn}: swa_page_table needs exactly one of full_to_swa_index_mapping "
                             "(token slots) and swa_v2p (pages)")
        bs = _size(fn, "cache_seqlens_int32", cache_seqlens_int32, 0)
        try:
            op(cache_seqlens=[cache_seqlens_int32], cu_seqlens_k=[cu_seqlens_k],
               page_table=[] if page_table is None and skip_page_table else [page_table],
               swa_page_table=None if swa_page_table is None else [swa_page_table],
               req_to_token=req_to_token, req_pool_indices=req_pool_indices, seq_lens=seq_lens,
               seq_len_delta=[_errors.integer(fn, "seq_len_delta", seq_len_delta, tensors=True)], bs=bs,
               max_seq_pages=_errors.integer(fn, "max_seq_pages", max_seq_pages, tensors=True),
               page_size=_errors.integer(fn, "page_size", page_size, tensors=True),
               full_to_swa_index_mapping=full_to_swa_index_mapping, full_v2p=full_v2p, swa_v2p=swa_v2p,
               skip_page_table=skip_page_table, zero_tail=zero_tail)
        except (RuntimeError, TypeError) as err:
            _errors.raise_as(err, op="update_flash_attention_metadata", caller=fn, names=_DECODE_NAMES)

    normal_decode_set_metadata.__qualname__ = _DECODE
    return normal_decode_set_metadata


def _draft_extend_asserts(fn, bs, page_table, swa_page_table, out_cache_loc, swa_out_cache_loc):
    """Upstream's host-side contract of the SWA draft-extend update (it asserts)."""
    for name, t in (("swa_page_table", swa_page_table), ("out_cache_loc", out_cache_loc),
                    ("swa_out_cache_loc", swa_out_cache_loc)):
        if t is None:
            raise ValueError(f"sgl_meta.{fn}: {name} is required with full_to_swa_index_mapping")
        _size(fn, name, t, 0)
    if tuple(swa_page_table.shape) != tuple(page_table.shape):
        raise ValueError(f"sgl_meta.{fn}: swa_page_table shape {tuple(swa_page_table.shape)} must equal "
                         f"page_table's {tuple(page_table.shape)}")
    n = out_cache_loc.shape[0]
    if swa_out_cache_loc.shape[0] != n:
        raise ValueError(f"sgl_meta.{fn}: swa_out_cache_loc.size(0) = {swa_out_cache_loc.shape[0]} must equal "
                         f"out_cache_loc.size(0) = {n}")
    if bs > 0 and (n == 0 or n % bs != 0):
        raise ValueError(f"sgl_meta.{fn}: out_cache_loc.size(0) = {n} must be a positive multiple of "
                         f"cache_seqlens_int32.size(0) = {bs}")


def draft_extend_dropin(op: Callable[..., None]) -> Callable[..., None]:
    """``draft_extend_set_metadata`` over ``op`` (this op, or its eager reference)."""

    def draft_extend_set_metadata(
        cache_seqlens_int32: torch.Tensor,
        cu_seqlens_k: torch.Tensor,
        cu_seqlens_q: torch.Tensor,
        page_table: torch.Tensor,
        req_to_token: torch.Tensor,
        req_pool_indices: torch.Tensor,
        seq_lens: torch.Tensor,
        extend_seq_lens: torch.Tensor,
        page_size: int,
        full_to_swa_index_mapping: Optional[torch.Tensor] = None,
        swa_page_table: Optional[torch.Tensor] = None,
        out_cache_loc: Optional[torch.Tensor] = None,
        swa_out_cache_loc: Optional[torch.Tensor] = None,
    ) -> None:
        """Drop-in for ``sglang.kernels.ops.attention.metadata.draft_extend_set_metadata``.

        Same arguments in the same order; :func:`update_flash_attention_metadata` with one set,
        ``seq_len_delta = 0``, ``bs = cache_seqlens_int32.shape[0]``, ``max_seq_pages =
        page_table.shape[1]``, ``cu_seqlens_q`` from ``extend_seq_lens``. With
        ``full_to_swa_index_mapping`` the SWA table and ``swa_out_cache_loc`` are written
        and upstream's asserts are kept (ValueError: ``swa_page_table``,
        ``out_cache_loc``, ``swa_out_cache_loc`` required, equal table shapes, equal
        token counts, a positive multiple of the batch); without it those three are
        ignored, as upstream does. Differences: a negative slot or ``out_cache_loc``
        entry in the SWA translation gives -1 (upstream reads before the mapping);
        ``bs == 0`` writes nothing.
        """
        fn = _DRAFT_EXTEND
        bs = _size(fn, "cache_seqlens_int32", cache_seqlens_int32, 0)
        max_seq_pages = _size(fn, "page_table", page_table, 1)
        swa = full_to_swa_index_mapping is not None
        if swa:
            _draft_extend_asserts(fn, bs, page_table, swa_page_table, out_cache_loc, swa_out_cache_loc)
        try:
            op(cache_seqlens=[cache_seqlens_int32], cu_seqlens_k=[cu_seqlens_k], page_table=[page_table],
               swa_page_table=[swa_page_table] if swa else None, cu_seqlens_q=cu_seqlens_q,
               swa_out_cache_loc=swa_out_cache_loc if swa else None,
               req_to_token=req_to_token, req_pool_indices=req_pool_indices, seq_lens=seq_lens,
               seq_len_delta=[0], bs=bs, max_seq_pages=max_seq_pages,
               page_size=_errors.integer(fn, "page_size", page_size, tensors=True),
               extend_seq_lens=extend_seq_lens, full_to_swa_index_mapping=full_to_swa_index_mapping,
               out_cache_loc=out_cache_loc if swa else None)
        except (RuntimeError, TypeError) as err:
            _errors.raise_as(err, op="update_flash_attention_metadata", caller=fn, names=_DRAFT_EXTEND_NAMES)

    draft_extend_set_metadata.__qualname__ = _DRAFT_EXTEND
    return draft_extend_set_metadata


class _Deferred(threading.local):
    calls: Optional[list] = None


deferred_decode = _Deferred()
"""While ``deferred_decode.calls`` is a list (this thread only), the decode drop-in
appends its op call's keyword arguments to it instead of launching: the multi-step
draft hook (:mod:`sgl_meta.sglang.flash_attention_spec`) then writes every step's
set in one launch."""


def _decode_op(**kwargs) -> None:
    calls = deferred_decode.calls
    if calls is None:
        update_flash_attention_metadata(**kwargs)
    else:
        calls.append(kwargs)


normal_decode_set_metadata = _op.dropin(_DECODE, _UPSTREAM)(decode_dropin(_decode_op))
draft_extend_set_metadata = _op.dropin(_DRAFT_EXTEND, _UPSTREAM)(draft_extend_dropin(update_flash_attention_metadata))

prepare_swa_spec_page_table_triton = _op.adapt(
    flash_attention_swa_spec_page_table,
    "prepare_swa_spec_page_table_triton",
    params="page_table_dst, page_table_a, page_table_b, seq_len_a, seq_len_b, speculative_num_draft_tokens",
    upstream="prepare_swa_spec_page_table_triton",
    module=_UPSTREAM,
    doc="""Drop-in for ``sglang.kernels.ops.attention.metadata.prepare_swa_spec_page_table_triton``.

    Same arguments in the same order; :func:`flash_attention_swa_spec_page_table`. Writes
    columns ``n < min(seq_len_a + seq_len_b, page_table_dst.size(1), A + B)`` of each row
    (upstream writes up to its 256-column block past the concatenated width when the
    lengths exceed it).
    """,
)

__all__ = _op.exports(__name__)
