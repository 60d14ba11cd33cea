"""TRT-LLM MHA backend: the sync-free page-table builder (SGLang's signature)."""

from __future__ import annotations

from . import _op

build_trtllm_mha_page_table = _op.define(
    "build_trtllm_mha_page_table",
    family="trtllm_mha_page_table",
    upstream="sglang.kernels.ops.attention.trtllm_mha_page_table.build_trtllm_mha_page_table",
    index=("req_pool_indices", "cache_seqlens", "full_to_swa"),
    keyword_only=False,
    doc="""Fill the TRT-LLM MHA page table from ``req_to_token``, sync-free.

    Mirrors SGLang 0.5.23's Triton ``build_trtllm_mha_page_table``
    (``sglang/kernels/ops/attention/trtllm_mha_page_table.py``), same signature, which
    replaced a ``seq_lens.max().item()`` + gather + ``floor_divide`` eager path:
    each row's work is bounded by its device-side length, the launch only by
    ``page_table``'s static shape. For row ``r < bs`` (``bs, W = page_table.shape``)
    and ``p < n_r``::

        slot = req_to_token[req_pool_indices[r], p * page_size]
        page_table[r, p] = slot // page_size
        swa_page_table[r, p] = full_to_swa[max(slot, 0)] // page_size

    with ``n_r = min(ceil(cache_seqlens[r] / page_size), W,
    ceil(req_to_token.size(1) / page_size))``. Columns ``p >= n_r`` are never
    written (a ``-1``-prefilled tail survives). ``//`` is floor division
    (``-1 // 64 == -1``). ``bs == 0`` is a no-op. Unlike SGLang's Triton builder, ``n_r`` is
    capped by the table width and the ``req_to_token`` row, any ``page_size >= 1``
    works (0.5.23 needs ``4096 % page_size == 0``), and a negative slot divides by floor
    (Triton's ``//`` truncates toward 0).

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
            a negative slot reads entry 0 (as SGLang's builder), a slot ``>= M`` is an error.

    Lengths: ``cache_seqlens[r]`` must lie in ``[0, 2**31 - 1]``; 0 writes no pages, a
    negative length is an error (RuntimeError on CPU, a device assert on CUDA). SWA: a
    negative slot reads ``full_to_swa[0]`` (as SGLang 0.5.23's builder clamps it); a slot
    ``>= full_to_swa.numel()`` in a live column is an error naming it, never clamped.

    Raises:
        RuntimeError: a wrong dtype, device, rank, size, inner stride, overlapping
            output rows, ``page_size < 1``, an empty ``full_to_swa``, or only one of
            ``swa_page_table``/``full_to_swa`` (message names the op and argument).
            On CPU also for a ``req_pool_indices[r]`` outside ``[0, req_to_token.size(0))``
            (checked for every row, whatever its length); on CUDA that trips a
            device-side assert instead. On CPU nothing is written before an error.
        TypeError: an argument of the wrong type (``None`` for a required tensor,
            a float or bool for an int, an int for a tensor), naming it.

    1-D tensors must be contiguous (stride 1). Never allocates, never synchronises:
    safe inside CUDA-graph capture. Writes do not bump autograd version counters.
    """,
)

__all__ = _op.exports(__name__)
