"""vLLM 0.33 FlashInfer backend: the paged-KV index stream of a step.

``vllm_copy_page_indices`` stands in for the Triton kernel
``_copy_page_indices_kernel`` that ``FlashInferMetadataBuilder._compute_flashinfer_kv_metadata``
(``vllm/v1/attention/backends/flashinfer.py``, the paged paths of vLLM's default
backend on Blackwell) launches every step, after it copies ``paged_kv_indptr`` to
the GPU. The launch grid depends on ``cu_num_blocks.numel()`` only.
"""

from __future__ import annotations

from . import _op

vllm_copy_page_indices = _op.define(
    "vllm_copy_page_indices",
    family="vllm_flashinfer",
    upstream="vllm.v1.attention.backends.flashinfer._copy_page_indices_kernel",
    index=("cu_num_blocks",),
    keyword_only=False,
    doc="""Pack each request's block-table row into FlashInfer's paged-KV index stream.

    What vLLM 0.33's ``_copy_page_indices_kernel`` writes, launched as
    ``_compute_flashinfer_kv_metadata`` launches it (``num_reqs`` programs,
    ``cu_num_blocks`` = ``paged_kv_indptr``). With ``n = cu_num_blocks.numel() - 1``,
    for ``r < n``, ``s, e = cu_num_blocks[r], cu_num_blocks[r + 1]``::

        page_indices[s + i] = block_table[r, i]      for i < e - s

    Nothing else is written (entries of ``page_indices`` past ``cu_num_blocks[n]``
    keep their values). ``n == 0`` is a no-op.

    Args:
        page_indices: ``[>= cu_num_blocks[n]]`` int32, written (vLLM: a
            ``paged_kv_indices[:num_actual_pages]`` view).
        block_table: ``[>= n, max_blocks]`` int32; rows addressed by
            ``stride(0)``, inner stride 1 (vLLM: the step's gathered table).
        cu_num_blocks: ``[n + 1]`` int32/int64 (vLLM: int32), non-negative,
            non-decreasing, each row's count at most ``block_table.size(1)``.

    Raises:
        RuntimeError: wrong dtype, device, rank, size, inner stride, an empty
            ``cu_num_blocks``, ``page_indices`` sharing memory with an input.
            Hostile device values (a negative or decreasing ``cu_num_blocks``,
            a row past ``page_indices`` or wider than ``block_table``) raise on
            CPU (nothing written) and trip a named device-side assert on CUDA,
            where vLLM's kernel reads or writes out of bounds.
        TypeError: an argument of the wrong type, naming it.
    """,
)

__all__ = _op.exports(__name__)
