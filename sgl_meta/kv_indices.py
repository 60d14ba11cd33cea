"""KV index streams: FlashInfer's and the Triton backend's ``kv_indices``, in one launch.

The op ``build_kv_indices`` as a keyword function, and function forms of the
raw Triton kernels SGLang 0.5.23 launches itself
(``sglang/kernels/ops/attention/kv_indices.py``), their strides taken from
the tensors:

* :func:`create_flashinfer_kv_indices` (``create_flashinfer_kv_indices_triton``,
  launched as ``KVIndexTranslator.pack_read_stream`` launches it): over
  ``build_kv_indices`` reading ``kv_indptr``.
* :func:`create_flashmla_kv_indices` (``create_flashmla_kv_indices_triton``,
  the FlashMLA / TRT-LLM MLA block table): over ``kv_read_page_table``, the
  same gather with ``kv_start_idx`` and no ``v2p``.

``build_draft_decode_kv_indices``: every EAGLE draft-decode step's
``kv_indices`` and ``kv_indptr`` (``generate_draft_decode_kv_indices``, which
walks each request's prefix serially once per step and branch), each prefix
token read once for all steps and branches.

Where SGLang runs several launches per replay, ``build_kv_indices`` runs one:
FlashInfer decode's ``kv_indptr[1:bs+1] = cumsum(lens)`` plus its
``kv_indices`` (``write_indptr=True``), the Triton backend's
``num_kv_splits`` (``get_num_kv_splits_triton``) on top, and a verify batch's
``qo_indptr`` and ``mask_indptr`` (the Triton backend's target verify).
"""

from __future__ import annotations

from typing import Callable, Optional

import torch

from . import _errors, _op
from .kv_read_table import kv_read_page_table

_UPSTREAM = "sglang.kernels.ops.attention.kv_indices"

build_kv_indices = _op.define(
    "build_kv_indices",
    family="kv_indices",
    upstream=(f"{_UPSTREAM}.create_flashinfer_kv_indices_triton; the kv_indptr cumsum before it "
              "(FlashInferIndicesUpdaterDecode.call_begin_forward, TritonAttnBackend._fill_kv_indptr_and_indices); "
              "sglang.kernels.ops.attention.metadata.get_num_kv_splits_triton"),
    index=("req_pool_indices", "seq_lens", "kv_indptr", "kv_indices", "kv_start_idx", "token_mapping",
           "qo_indptr", "mask_indptr", "extend_seq_lens", "kv_offsets"),
    int64=("v2p",),
    doc="""Fill a CSR stream of KV ids (``kv_indices``), with its ``kv_indptr`` and split counts if asked.

    What SGLang 0.5.23's ``create_flashinfer_kv_indices_triton`` writes, and
    in the same launch what its callers compute around it on every replay:
    ``kv_indptr[1:bs+1] = cumsum(seq_lens)`` (FlashInfer decode, the Triton
    backend) and ``get_num_kv_splits_triton`` (the Triton backend's decode).
    For row ``b < bs = req_pool_indices.numel()``, ``start_b = kv_start_idx[b]``
    (0 without it) and token ``i < n_b``, ``pos = start_b + i``::

        row = req_to_token[req_pool_indices[b]]
        id = row[pos // E] * E + pos % E                 # no v2p; E = entry_page_size
        id = kv_read_token_stream's id of pos            # with v2p (page_size: v2p's page size)
        id = -1 if id < 0 else token_mapping[id]         # with token_mapping
        kv_indices[lo_b + i] = id

    ``E == 1`` copies ``req_to_token`` verbatim (negative values included);
    ``E > 1`` reads a page-granular table (entries are pages of ``E`` tokens,
    the unified pool's read table). ``n_b = min(seq_lens[b], positions the
    source row holds past start_b)``: nothing is read past the row.

    ``write_indptr=False``: ``lo_b = kv_indptr[b]`` (read). ``write_indptr=True``:
    ``lo_b = seq_lens[0] + ... + seq_lens[b-1]``, and ``kv_indptr[0] = 0``,
    ``kv_indptr[b+1] = lo_b + seq_lens[b]`` are written. With ``num_kv_splits``,
    ``num_kv_splits[b * num_group + g] = max(ceil(seq_lens[b] / c1), ceil(seq_lens[b] / c2))``
    for ``g < num_group``, with upstream's chunk sizes ``c1``, ``c2`` from the
    batch's largest and smallest lengths, the head counts, ``max_kv_splits``
    and ``device_core_count``; ``uneven_batch[0] = min < max`` (a length of 0
    counts as 1 there: upstream divides by it). A verify batch's other row
    starts (the Triton backend's target verify, EAGLE's prefill arguments),
    for ``b <= bs`` and ``q = q_stride``: ``qo_indptr[b] = b * q`` and, with
    ``write_indptr``, ``mask_indptr[b] = q * (lo_b + b * q)``, the running
    sum of the custom-mask rows ``q * (seq_lens + q)`` (what 0.5.23 writes
    with ``torch.arange`` and ``mask_indptr[1:bs+1] = cumsum(...)``; its
    ``mask_indptr[0]`` is the 0 its buffer holds). With ``extend_seq_lens``,
    every length above (the ids, the running sum, the split counts, the mask
    rows) is ``max(seq_lens[b] - extend_seq_lens[b], 0)`` instead of
    ``seq_lens[b]``: the prefix of a draft-extend batch, as the Triton
    backend's ``_update_draft_extend_buffers`` computes it with
    ``torch.clamp(seq_lens - extend_seq_lens, min=0)`` before its gather.
    With ``sliding_window = W > 0``, each of those lengths ``L`` becomes
    ``min(L, W)`` (again everywhere) and ``start_b`` moves past the ``L -
    min(L, W)`` tokens before the window: the window stream SGLang's
    ``update_sliding_window_buffer`` builds with ``window_kv_lens =
    torch.minimum(seq_lens, W)``, ``kv_start_idx = seq_lens - window_kv_lens``
    and a cumsum for its ``window_kv_indptr`` (the Triton backend's split
    counts for the window then come from the same lengths). With
    ``kv_offsets``, ``kv_offsets[b] = start_b`` (with a window, where it
    starts: the ``window_kv_offsets`` SGLang's target verify and draft extend
    keep from that call).
    Nothing else is written; ``bs == 0`` is a no-op.

    Args:
        req_to_token: ``[pool, width]`` int32 token slots (``E == 1``, or with
            ``v2p`` virtual slots) or page entries (``E > 1``); rows by
            ``stride(0)``, inner stride 1.
        req_pool_indices: ``[bs]`` int32/int64 row of each request; sets ``bs``.
        seq_lens: ``[>= bs]`` int32/int64 tokens of each row (``page_kernel_lens``).
        kv_indptr: ``[>= bs + 1]`` int32/int64 CSR row starts: read (non-negative,
            non-decreasing, each live row fits: ``kv_indptr[b] + n_b <=
            min(kv_indptr[b + 1], kv_indices.numel())``) or written.
        kv_indices: ``[capacity]`` int32/int64 ids, contiguous.
        write_indptr: write ``kv_indptr`` as the running sum of ``seq_lens``.
        kv_start_idx: ``[>= bs]`` int32/int64 first position of each row's tokens
            (with ``sliding_window``, moved past the tokens before the window).
        entry_page_size: tokens per ``req_to_token`` entry (in ``[1, 2**31 - 1]``; 1 with ``v2p``).
        token_mapping: ``[M]`` int32/int64 id map (a static SWA pool's
            full-to-SWA slots); not with ``v2p``.
        v2p: ``[pages]`` int64 virtual -> physical pages (``-1``: page 0), the
            unified pool's translation as ``kv_read_token_stream`` applies it.
        page_size: ``v2p``'s page size (``>= 1``; unused without ``v2p``).
        num_kv_splits: ``[>= bs * num_group]`` int32 split counts, or None.
        uneven_batch: ``[>= 1]`` int32 flag (needs ``num_kv_splits``), or None.
        num_group, num_head, num_kv_head, max_kv_splits, device_core_count:
            the Triton backend's values (``>= 1``; ``num_kv_head <= num_head``).
        qo_indptr: ``[>= bs + 1]`` int32/int64 query row starts, or None.
        q_stride: query tokens per row (``>= 1`` with ``qo_indptr`` or
            ``mask_indptr``, and ``bs * q_stride`` fits int32; else unused).
        mask_indptr: ``[>= bs + 1]`` int32/int64 custom-mask row starts (needs
            ``write_indptr``), or None.
        extend_seq_lens: ``[>= bs]`` int32/int64 tokens each row extends by,
            taken off its length (clamped at 0), or None.
        sliding_window: tokens a row keeps at its end (``>= 0``; 0: every token).
        kv_offsets: ``[>= bs]`` int32/int64 each row's start (written), or None;
            a start that does not fit its dtype is an error.

    Lengths: ``seq_lens[b]`` (and ``extend_seq_lens[b]``) must lie in
    ``[0, 2**31 - 1]`` and, with
    ``write_indptr``, the running sum must fit ``kv_indptr``'s dtype (and
    ``mask_indptr``'s values its own); otherwise RuntimeError on CPU naming
    the value (nothing written), a named device assert on CUDA.

    Differences from upstream, on purpose: a row never reads past its
    ``req_to_token`` row and never writes past ``kv_indices`` or its CSR slot
    (upstream reads and writes out of bounds); an id that does not fit
    ``kv_indices``' dtype is an error (upstream's store truncates it).

    Raises:
        RuntimeError: wrong dtype, device, rank, size, inner stride, aliasing,
            scalar out of range (naming the op and the argument). Hostile device
            values: a request index outside ``req_to_token``, a negative
            ``kv_start_idx``, a CSR row outside its slot, a virtual page past
            ``v2p``, an id past ``token_mapping`` or outside ``kv_indices``'
            dtype raise on CPU (nothing written) and trip a device-side assert
            naming the op on CUDA.
        TypeError: an argument of the wrong type, naming it.

    Never allocates, never synchronises: safe inside CUDA-graph capture.
    """,
)

build_draft_decode_kv_indices = _op.define(
    "build_draft_decode_kv_indices",
    family="kv_indices",
    upstream=("sglang.kernels.ops.speculative.cache_locs.generate_draft_decode_kv_indices (launched by "
              "TritonMultiStepDraftBackend and FlashInferMultiStepDraftBackend.common_template)"),
    index=("req_pool_indices", "seq_lens", "positions", "kv_indices", "kv_indptr"),
    doc="""Fill every EAGLE draft-decode step's ``kv_indices`` and ``kv_indptr``, in one launch.

    What SGLang 0.5.23's ``generate_draft_decode_kv_indices`` writes when its
    Triton and FlashInfer multi-step draft backends launch it over a static
    pool (token-granular ``req_to_token``, no ``v2p``). Step ``s < K =
    num_steps`` has ``it = s + 1`` draft tokens; request ``b < bs =
    req_pool_indices.numel()``, branch ``t < topk``, ``P = page_size``::

        L   = seq_lens[b];  row = req_to_token[req_pool_indices[b]]
        Lw  = min(L, cap) with a window (cap = window_size + sink_size), else L
        src(i) = i for i < e = min(sink_size, L), else L - Lw + i   (window)
               = i                                                  (no window)
        off = cum_b * topk + b * it * topk + t * (Lw + it)
              (cum_b: Lw of the requests before b, summed)
        kv_indices[s, off + i]      = row[src(i)]          for i < Lw
        kv_indices[s, off + Lw + j] = row[chain_t + j]     for j < it
        chain_t = L + t * K                                (P == 1 or topk == 1)
                = L - L % P + t * ceil((L % P + K) / P) * P + L % P   (else)
        kv_indptr[s, z] = pos_0 + ... + pos_{z-1} + z * it  for 1 <= z <= bs * topk
              (pos_j = positions[j], capped at cap with a window)

    The ids are ``req_to_token``'s entries as they are (negative ones
    included). With ``num_kv_splits``, the Triton backend's split counts for
    the last step in the same launch (what its multi-step draft backend then
    launches ``get_num_kv_splits_triton`` for): ``num_kv_splits[b * topk + t]``
    as :func:`build_kv_indices` writes them with ``num_group = topk`` from
    ``seq_lens``. Nothing else is written: ``kv_indptr[s, 0]`` (SGLang's buffer
    holds 0 there), ids past each step's last branch. ``bs == 0`` is a no-op.

    Args:
        req_to_token: ``[pool, ctx]`` int32 token slots, rows by ``stride(0)``.
        req_pool_indices: ``[bs]`` int32/int64 row of each request.
        seq_lens: ``[>= bs]`` int32/int64 committed tokens of each request.
        positions: ``[>= bs * topk]`` int32/int64 per-branch lengths SGLang's
            ``kv_indptr`` sums (``forward_batch.positions``).
        kv_indices: ``[>= num_steps, W]`` int32/int64, step rows by ``stride(0)``.
        kv_indptr: ``[>= num_steps, >= bs * topk + 1]`` int32/int64.
        topk: branches per request, ``[1, 1024]``. num_steps: ``[1, 64]``.
        page_size: tokens per KV page (``>= 1``): places the chains when
            ``topk > 1``.
        window_size, sink_size: the draft's sliding window (``0``: none) and
            the prefix tokens it keeps (ignored without a window).
        num_kv_splits: ``[>= bs * topk]`` int32 split counts, or None.
        num_head, num_kv_head, max_kv_splits, device_core_count: the Triton
            backend's values (``>= 1``; ``num_kv_head <= num_head``).

    Differences from upstream, on purpose: a request never reads past its
    ``req_to_token`` row (its prefix and every chain must lie inside it) and
    never writes past ``kv_indices``' row (upstream reads and writes out of
    bounds); an int32 ``kv_indptr`` whose last value does not fit is an error.

    Raises:
        RuntimeError: wrong dtype, device, rank, size, inner stride, aliasing,
            scalar out of range (naming the op and the argument). Hostile device
            values (a request index outside ``req_to_token``, a length or position
            outside ``[0, 2**31 - 1]``, reads or writes past a row, a ``kv_indptr``
            value past its dtype) raise on CPU before anything is written and trip
            a device-side assert naming the op on CUDA.
        TypeError: an argument of the wrong type, naming it.

    Never allocates, never synchronises: safe inside CUDA-graph capture.
    """,
)

create_flashinfer_kv_indices = _op.adapt(
    build_kv_indices,
    "create_flashinfer_kv_indices",
    params=("req_to_token, req_pool_indices, page_kernel_lens, kv_indptr, kv_start_idx, kv_indices, "
            "entry_page_size=1, token_mapping=None"),
    renamed={"seq_lens": "page_kernel_lens"},
    fixed={"write_indptr": False},
    upstream="create_flashinfer_kv_indices_triton",
    module=_UPSTREAM,
    doc="""Function form of ``create_flashinfer_kv_indices_triton`` (strides from the tensors).

    Writes what SGLang 0.5.23's kernel writes when launched over ``bs =
    req_pool_indices.numel()`` rows (as ``KVIndexTranslator.pack_read_stream``
    launches it, ``req_pool_indices[:bs]``): ``kv_indices[kv_indptr[i] + j]``
    for ``j < page_kernel_lens[i]``, the ``req_to_token`` entry of position
    ``kv_start_idx[i] + j`` (``entry_page_size > 1``: entry ``* E + pos % E``),
    through ``token_mapping`` (``-1`` for a negative id) when given. Nothing
    else is written. :func:`build_kv_indices` with ``write_indptr=False``;
    its notes (no read or write out of bounds, an id must fit ``kv_indices``)
    hold here, errors name this function.
    """,
)


def flashmla_dropin(page_table: Callable[..., None]) -> Callable[..., None]:
    """``create_flashmla_kv_indices`` over ``page_table`` (``kv_read_page_table``, or its reference)."""

    def create_flashmla_kv_indices(
        req_to_token: torch.Tensor,
        req_pool_indices: torch.Tensor,
        page_kernel_lens: torch.Tensor,
        kv_start_idx: Optional[torch.Tensor],
        kv_indices: torch.Tensor,
        page_size: int = 64,
    ) -> None:
        """Function form of ``create_flashmla_kv_indices_triton`` (strides from the tensors).

        For row ``i < bs = req_pool_indices.numel()``: ``kv_indices[i, p] =
        max(req_to_token[req_pool_indices[i], start_i + p * page_size], 0) // page_size``
        for ``p < ceil(page_kernel_lens[i] / page_size)`` (``start_i =
        kv_start_idx[i]``, 0 for None); other columns and rows are untouched.
        :func:`kv_read_page_table` with ``max_pages = kv_indices.size(1)``.

        Differences from SGLang 0.5.23's kernel, on purpose: columns stop at
        ``kv_indices.size(1)`` and at the ``req_to_token`` row (upstream writes
        into the next row and reads past the row); a negative slot reads page 0
        (upstream truncates: the same for the ``-1`` sentinel, ``-1`` for
        ``-page_size`` and below). Lengths, hostile values and errors as
        :func:`kv_read_page_table`, naming this function.
        """
        op = "create_flashmla_kv_indices"
        page_size = _errors.integer(op, "page_size", page_size, tensors=True)
        if not isinstance(kv_indices, torch.Tensor):
            raise TypeError(f"sgl_meta.{op}: kv_indices must be a Tensor, got {type(kv_indices).__name__}")
        if kv_indices.dim() != 2:
            raise RuntimeError(f"sgl_meta.{op}: kv_indices must be 2-D, got {kv_indices.dim()}-D")
        try:
            page_table(req_to_token=req_to_token, req_pool_indices=req_pool_indices, seq_lens=page_kernel_lens,
                       out=kv_indices, page_size=page_size, max_pages=kv_indices.shape[1],
                       kv_start_idx=kv_start_idx)
        except (RuntimeError, TypeError) as err:
            _errors.raise_as(err, op="kv_read_page_table", caller=op,
                             names=((r"\bseq_lens\b", "page_kernel_lens"), (r"\bout\b", "kv_indices"),
                                    (r"\bmax_pages\b", "kv_indices.size(1)")))

    create_flashmla_kv_indices.__qualname__ = "create_flashmla_kv_indices"
    return create_flashmla_kv_indices


create_flashmla_kv_indices = _op.dropin("create_flashmla_kv_indices_triton", _UPSTREAM)(
    flashmla_dropin(kv_read_page_table))
create_flashmla_kv_indices.__module__ = __name__


__all__ = _op.exports(__name__)
