"""KV read tables: the unified memory pool's gather-and-translate, in the graph.

The ops ``kv_read_page_table`` and ``kv_read_token_stream`` as keyword
functions, plus drop-ins with the exact
signatures of SGLang 0.5.23's Triton builders
(``sglang/kernels/ops/kvcache/kv_read_table.py``: ``build_kv_read_table``,
``build_kv_read_table_packed``).

One formula, two output forms. For row ``b < bs`` (``bs =
req_pool_indices.numel()``), ``req = req_pool_indices[b]``, ``start =
kv_start_idx[b]`` (0 without it)::

    vpage(slot) = 0 if slot < 0 else slot // page_size   # a negative slot reads the sink page 0
    entry(slot) = max(v2p[vpage(slot)], 0) if v2p is given else vpage(slot)

* page table:   ``out[b, c] = entry(req_to_token[req, start + c * page_size])``
* token stream: ``out[indptr[b] + i] = entry(req_to_token[req, first slot of
  pos's page]) * page_size + pos % page_size`` with ``pos = start + i``

Work is bounded by the device-side lengths (no host sync): the launch grid
depends on ``bs`` and static shapes only, so a captured CUDA graph replays
with any new lengths, request rows and ``v2p`` contents.
"""

from __future__ import annotations

from typing import Callable, Optional

import torch

from . import _errors, _op

_UPSTREAM = "sglang.kernels.ops.kvcache.kv_read_table"

kv_read_page_table = _op.define(
    "kv_read_page_table",
    family="kv_read_table",
    upstream=f"{_UPSTREAM}.build_kv_read_table; sglang.kernels.ops.attention.kv_indices.create_flashmla_kv_indices_triton",
    index=("req_pool_indices", "seq_lens", "kv_start_idx"),
    int64=("v2p",),
    doc="""Fill a page table (block table) of each request's KV pages, translated.

    Covers SGLang 0.5.23's ``build_kv_read_table`` (the unified pool's read
    table, ``sglang/kernels/ops/kvcache/kv_read_table.py``, caller
    ``KVIndexTranslator.build_iteration_table``) and, with ``kv_start_idx`` and
    no ``v2p``, ``create_flashmla_kv_indices_triton`` (the FlashMLA / TRT-LLM MLA
    block table, ``sglang/kernels/ops/attention/kv_indices.py``). For row
    ``b < bs = req_pool_indices.numel()`` and column ``c < n_b``::

        slot = req_to_token[req_pool_indices[b], start_b + c * page_size]
        vpage = 0 if slot < 0 else slot // page_size
        out[b, c] = max(v2p[vpage], 0) if v2p is not None else vpage

    with ``start_b = kv_start_idx[b]`` (0 without it) and ``n_b = min(ceil(max(
    seq_lens[b] + seq_len_delta, 0) / page_size), max_pages, ceil((
    req_to_token.size(1) - start_b) / page_size))``: the live prefix, cut at the
    table width and at the ``req_to_token`` row (no slot past the row is read).
    With ``zero_tail`` columns ``n_b <= c < max_pages`` of rows ``b < bs`` get 0
    (the sink page, for a fresh ``torch.empty`` table); without it they keep
    their values. Rows ``>= bs`` and columns ``>= max_pages`` are never written.
    ``bs == 0`` is a no-op.

    Args:
        req_to_token: ``[pool_size, max_context_len]`` int32 token ids (virtual
            ids in a unified pool); rows by ``stride(0)``, inner stride 1.
        req_pool_indices: ``[bs]`` int32/int64, row of each request; sets ``bs``.
        seq_lens: ``[>= bs]`` int32/int64 KV length in tokens.
        out: ``[>= bs, >= max_pages]`` int32 page table; rows by ``stride(0)``
            (``stride(0) >= max_pages``), inner stride 1.
        page_size: tokens per page, ``>= 1``.
        max_pages: columns a row may hold, ``>= 0``.
        v2p: ``[num_pages]`` int64 virtual -> physical page table; a ``-1`` (freed)
            entry reads as page 0. None: no translation (entries are the pages
            themselves, e.g. a static pool's block table).
        kv_start_idx: ``[>= bs]`` int32/int64 first token of each row's window
            (``>= 0``); None: 0.
        seq_len_delta: tokens added to every ``seq_lens`` value (a target verify
            reads its draft tokens back: ``num_draft_tokens``), in int32 range.
        zero_tail: write 0 past each row's live prefix up to ``max_pages``.

    Lengths: ``seq_lens[b]`` and the window ``seq_lens[b] + seq_len_delta`` must lie in
    ``[0, 2**31 - 1]`` (0 is an empty row); otherwise RuntimeError on CPU naming
    ``seq_lens[b]`` (nothing written), a named device assert on CUDA.

    Raises:
        RuntimeError: wrong dtype, device, rank, size, inner stride, overlapping
            ``out`` rows, ``page_size < 1``, ``max_pages < 0``, ``seq_len_delta``
            outside int32 (message names the op and the argument). Hostile device
            values: a ``req_pool_indices[b]`` outside ``req_to_token`` (checked
            for every row, whatever its length), a negative ``kv_start_idx[b]``,
            a virtual page outside ``v2p``, or a ``v2p`` entry past int32 raise on
            CPU (nothing written) and trip a device-side assert naming the op and
            argument on CUDA.
        TypeError: an argument of the wrong type (``None`` for a required tensor,
            a float or bool for an int, an int for a tensor), naming it.

    1-D tensors must be contiguous. Never allocates, never synchronises: safe
    inside CUDA-graph capture. Writes do not bump autograd version counters.
    """,
)

kv_read_token_stream = _op.define(
    "kv_read_token_stream",
    family="kv_read_table",
    upstream=f"{_UPSTREAM}.build_kv_read_table_packed",
    index=("req_pool_indices", "seq_lens", "kv_start_idx", "indptr", "out"),
    int64=("v2p",),
    doc="""Fill a CSR token stream (FlashInfer-style ``kv_indices``), translated.

    Covers SGLang 0.5.23's ``build_kv_read_table_packed`` (the unified pool's
    per-token read stream, caller ``KVIndexTranslator.pack_read_stream``) and,
    without ``v2p``, ``create_flashinfer_kv_indices_triton`` over a
    page-aligned pool (``sglang/kernels/ops/attention/kv_indices.py``). For row
    ``b < bs = req_pool_indices.numel()`` and token ``i < n_b``, ``pos =
    start_b + i``::

        p = pos // page_size
        slot = req_to_token[req_pool_indices[b], p * page_size]   # the page's first slot
        entry = max(v2p[vpage], 0) if v2p is not None else vpage  # vpage = 0 if slot < 0 else slot // page_size
        out[indptr[b] + i] = entry * page_size + pos % page_size

    with ``start_b = kv_start_idx[b]`` (0 without it) and ``n_b = min(max(
    seq_lens[b] + seq_len_delta, 0), req_to_token.size(1) - start_b)`` (no
    position past the ``req_to_token`` row is read). Only a page's first slot is
    translated; the offset inside the page is kept. Nothing else is written.
    ``bs == 0`` is a no-op.

    Args:
        req_to_token: ``[pool_size, max_context_len]`` int32 token ids; rows by
            ``stride(0)``, inner stride 1.
        req_pool_indices: ``[bs]`` int32/int64, row of each request; sets ``bs``.
        seq_lens: ``[>= bs]`` int32/int64 tokens of each row's window.
        indptr: ``[>= bs + 1]`` int32/int64 CSR row starts in ``out``:
            non-negative, non-decreasing, and each live row must fit
            (``indptr[b] + n_b <= min(indptr[b + 1], out.numel())``).
        out: ``[capacity]`` int32 or int64 token ids, contiguous.
        page_size: tokens per page, ``>= 1``.
        v2p: ``[num_pages]`` int64 virtual -> physical page table (``-1``: page 0);
            None: no translation.
        kv_start_idx: ``[>= bs]`` int32/int64 first token of each row's window
            (``>= 0``); it moves where a row reads, not where it lands.
        seq_len_delta: tokens added to every ``seq_lens`` value, in int32 range.

    Lengths: ``seq_lens[b]`` and the window ``seq_lens[b] + seq_len_delta`` must lie in
    ``[0, 2**31 - 1]`` (0 is an empty row); otherwise RuntimeError on CPU naming
    ``seq_lens[b]`` (nothing written), a named device assert on CUDA.

    Raises:
        RuntimeError: as :func:`kv_read_page_table` (host checks, and on CPU /
            as a device-side assert on CUDA the hostile values), plus an
            ``indptr`` that decreases, is negative or gives a live row less room
            than it needs, and an id that does not fit ``out``'s dtype.
        TypeError: an argument of the wrong type (``None`` for a required tensor,
            a float or bool for an int, an int for a tensor), naming it.
    """,
)

# --- Drop-ins: SGLang 0.5.23's exact signatures (keyword-only, return `out`) ---


def _is_tensor(x) -> bool:
    return isinstance(x, torch.Tensor)



def table_dropin(page_table: Callable[..., None]) -> Callable[..., torch.Tensor]:
    """``build_kv_read_table`` over ``page_table`` (this op, or its eager reference)."""

    def build_kv_read_table(
        *,
        req_to_token: torch.Tensor,
        req_pool_indices: torch.Tensor,
        seq_lens: torch.Tensor,
        v2p: torch.Tensor,
        page_size: int,
        max_pages: int,
        out: torch.Tensor,
        seq_len_delta: int = 0,
        zero_tail: bool = False,
    ) -> torch.Tensor:
        """Drop-in for ``sglang.kernels.ops.kvcache.kv_read_table.build_kv_read_table``.

        Same keyword-only arguments, returns ``out`` (filled in place). Behaves as
        :func:`kv_read_page_table`, in one launch on CUDA and CPU alike (upstream
        loops over rows in Python on CPU). Like upstream it requires ``(max_pages -
        1) * page_size < req_to_token.size(1)`` (ValueError here, an AssertionError
        there) and returns without writing when ``bs`` or ``max_pages`` is 0.
        ``v2p=None`` is accepted and means no translation. Integer arguments may
        be any integer with ``__index__`` (numpy integers, one-element tensors); a
        bool or a float is a TypeError. Errors name ``build_kv_read_table``.
        """
        op = "build_kv_read_table"
        page_size = _errors.integer(op, "page_size", page_size, tensors=True)
        max_pages = _errors.integer(op, "max_pages", max_pages, tensors=True)
        seq_len_delta = _errors.integer(op, "seq_len_delta", seq_len_delta, tensors=True)
        if _is_tensor(req_to_token) and req_to_token.dim() == 2 and max_pages > 0:
            if (max_pages - 1) * page_size >= req_to_token.shape[1]:
                raise ValueError(
                    f"sgl_meta.{op}: max_pages = {max_pages} x page_size = {page_size} exceeds "
                    f"the req_to_token width {req_to_token.shape[1]}"
                )
        if _is_tensor(req_pool_indices) and _is_tensor(out) and (req_pool_indices.numel() == 0 or max_pages == 0):
            return out
        try:
            page_table(
                req_to_token=req_to_token, req_pool_indices=req_pool_indices, seq_lens=seq_lens, out=out,
                page_size=page_size, max_pages=max_pages, v2p=v2p, seq_len_delta=seq_len_delta, zero_tail=zero_tail,
            )
        except (RuntimeError, TypeError) as err:
            _errors.raise_as(err, op="kv_read_page_table", caller=op)
        return out

    build_kv_read_table.__qualname__ = "build_kv_read_table"
    return build_kv_read_table


def packed_dropin(token_stream: Callable[..., None]) -> Callable[..., torch.Tensor]:
    """``build_kv_read_table_packed`` over ``token_stream`` (this op, or its eager reference)."""

    def build_kv_read_table_packed(
        *,
        req_to_token: torch.Tensor,
        req_pool_indices: torch.Tensor,
        seq_lens: torch.Tensor,
        v2p: torch.Tensor,
        indptr: torch.Tensor,
        page_size: int,
        max_tokens: int,
        out: torch.Tensor,
        kv_start_idx: Optional[torch.Tensor] = None,
    ) -> torch.Tensor:
        """Drop-in for ``sglang.kernels.ops.kvcache.kv_read_table.build_kv_read_table_packed``.

        Same keyword-only arguments, returns ``out`` (filled in place). Behaves as
        :func:`kv_read_token_stream` over ``out[:max_tokens]``: the capacity the
        caller vouches for bounds the writes (upstream only asserts it). Like
        upstream it needs ``out`` 1-D with ``out.numel() >= max_tokens``
        (ValueError) and returns without writing when ``bs`` or ``max_tokens`` is 0.
        ``v2p=None`` is accepted and means no translation. Integer arguments may
        be any integer with ``__index__`` (numpy integers, one-element tensors); a
        bool or a float is a TypeError. Errors name ``build_kv_read_table_packed``.
        """
        op = "build_kv_read_table_packed"
        page_size = _errors.integer(op, "page_size", page_size, tensors=True)
        max_tokens = _errors.integer(op, "max_tokens", max_tokens, tensors=True)
        if max_tokens < 0:
            raise ValueError(f"sgl_meta.{op}: max_tokens must be >= 0, got {max_tokens}")
        if _is_tensor(out) and out.dim() != 1:
            raise ValueError(f"sgl_meta.{op}: out must be 1-D, got shape {tuple(out.shape)}")
        if _is_tensor(out) and out.numel() < max_tokens:
            raise ValueError(f"sgl_meta.{op}: out {tuple(out.shape)} cannot hold max_tokens = {max_tokens}")
        if _is_tensor(req_pool_indices) and _is_tensor(out) and (req_pool_indices.numel() == 0 or max_tokens == 0):
            return out
        target = out[:max_tokens] if _is_tensor(out) and out.numel() != max_tokens else out
        try:
            token_stream(
                req_to_token=req_to_token, req_pool_indices=req_pool_indices, seq_lens=seq_lens, indptr=indptr,
                out=target, page_size=page_size, v2p=v2p, kv_start_idx=kv_start_idx,
            )
        except (RuntimeError, TypeError) as err:
            _errors.raise_as(err, op="kv_read_token_stream", caller=op)
        return out

    build_kv_read_table_packed.__qualname__ = "build_kv_read_table_packed"
    return build_kv_read_table_packed


build_kv_read_table = _op.dropin("build_kv_read_table", _UPSTREAM)(table_dropin(kv_read_page_table))
build_kv_read_table_packed = _op.dropin("build_kv_read_table_packed", _UPSTREAM)(packed_dropin(kv_read_token_stream))


__all__ = _op.exports(__name__)
