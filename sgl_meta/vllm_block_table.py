"""vLLM 0.33 block tables: slot mappings and the forward pass's gathered tables.

The ops ``vllm_compute_slot_mappings`` and ``vllm_gather_block_tables`` stand
in for the Triton kernels ``BlockTables.compute_slot_mappings`` and
``BlockTables.gather_block_tables`` launch (``vllm/v1/worker/gpu/block_table.py``,
Model Runner V2). Every KV-cache group is one int32 block table
``[max_num_reqs, max_num_blocks]`` (a tensor list, one per group); the
per-group arrays (``block_sizes``, ``slot_mapping_enabled``, ``dcp_sharded``,
``sliding_window_reach``) are vLLM's own small device tensors, so a caller
passes vLLM's attributes unchanged. One launch covers every group.

A row whose ``idx_mapping`` entry is ``-1`` (vLLM's dummy or CUDA-graph
padding request) owns no blocks: its tokens get ``pad_id``, its gathered row
is zeroed. Launch grids depend on host-known sizes only, so a captured CUDA
graph replays with any new values.
"""

from __future__ import annotations

from . import _build, _op

_UPSTREAM = "vllm.v1.worker.gpu.block_table"

MAX_GROUPS = _build.vllm_max_groups()
"""The most KV-cache groups one call takes (the kernels' per-group tables live in the
launch parameters; the binary says how many); the vLLM plugin leaves larger engines to
vLLM's own kernels."""

vllm_compute_slot_mappings = _op.define(
    "vllm_compute_slot_mappings",
    family="vllm_block_table",
    upstream=f"{_UPSTREAM}.BlockTables.compute_slot_mappings (_compute_slot_mappings_kernel)",
    index=("idx_mapping", "query_start_loc", "positions"),
    int64=("slot_mappings",),
    boolean=("slot_mapping_enabled", "dcp_sharded"),
    doc="""Write every KV-cache group's slot mapping of the batch's tokens, pad the tail.

    Stands in for vLLM 0.33's ``BlockTables.compute_slot_mappings``
    (``_compute_slot_mappings_kernel``). With ``n = idx_mapping.numel()``,
    ``G = len(block_tables)``, ``T = slot_mappings.size(1)``, for every group
    ``g < G``, request ``b < n`` and token ``t`` in ``[query_start_loc[b],
    query_start_loc[b + 1])``, with ``req = idx_mapping[b]``, ``p =
    positions[t]`` and ``bs = block_sizes[g]``::

        if cp_size == 1 or not dcp_sharded[g]:  local, lp = True, p
        else:   # context parallelism: this rank holds every cp_size-th run of cp_interleave tokens
            v, o = p // (bs * cp_size), p % (bs * cp_size)
            local = o // cp_interleave % cp_size == cp_rank
            lp = v * bs + o // (cp_interleave * cp_size) * cp_interleave + o % cp_interleave
        slot_mappings[g, t] = block_tables[g][req, lp // bs] * bs + lp % bs
                              if slot_mapping_enabled[g] and req != -1 and local else pad_id

    and ``slot_mappings[g, t] = pad_id`` for ``query_start_loc[n] <= t < T``
    (the padded token tail a CUDA graph replays over). Tokens below
    ``query_start_loc[0]`` and rows ``>= G`` of ``slot_mappings`` are not
    written. Slots are computed in int64 (vLLM multiplies the int32 block
    number by the int32 block size; equal whenever that product fits int32).

    Args:
        idx_mapping: ``[n]`` int32/int64 request-state row of each batch row
            (vLLM: int64); ``-1`` marks a row that owns no blocks.
        query_start_loc: ``[>= n + 1]`` int32/int64 token offsets (vLLM: int32),
            non-negative and non-decreasing, ``query_start_loc[n] <= T``.
        positions: ``[>= query_start_loc[n]]`` int32/int64 token positions
            (vLLM: int64), ``>= 0``.
        block_tables: ``G`` int32 tables ``[max_num_reqs, max_num_blocks]``, rows
            by ``stride(0)``, inner stride 1; ``G <= 32`` (``G == 0``: nothing
            is written, as vLLM launches nothing).
        block_sizes: ``[>= G]`` int32 tokens per block of each group (``>= 1``).
        slot_mapping_enabled: ``[>= G]`` bool; a disabled group gets ``pad_id``.
        dcp_sharded: ``[>= G]`` bool; read only when ``cp_size > 1``.
        slot_mappings: ``[>= G, T]`` int64 output, rows by ``stride(0)``.
        cp_rank, cp_size, cp_interleave: context parallelism (``cp_size >= 1``,
            ``0 <= cp_rank < cp_size``, ``cp_interleave >= 1``).
        pad_id: the padding slot (vLLM's ``PAD_SLOT_ID``, -1).

    Raises:
        RuntimeError: wrong dtype, device, rank, size, inner stride, ``G`` past
            32, outputs aliasing inputs, bad CP scalars (message names
            the op and the argument). Hostile device values (an ``idx_mapping``
            entry outside ``[-1, max_num_reqs)`` of any group, a
            ``query_start_loc`` that is negative, decreasing or past ``T`` or
            ``positions``, a negative position, a block index past the table
            width, a ``block_sizes`` entry ``< 1``) raise on CPU (nothing
            written) and trip a device-side assert naming the op and the
            argument on CUDA.
        TypeError: an argument of the wrong type, naming it.

    Never allocates, never synchronises: safe inside CUDA-graph capture.
    """,
)

vllm_gather_block_tables = _op.define(
    "vllm_gather_block_tables",
    family="vllm_block_table",
    upstream=f"{_UPSTREAM}.BlockTables.gather_block_tables (_gather_block_tables_kernel)",
    index=("idx_mapping", "num_computed_tokens"),
    doc="""Gather the batch's block-table rows of every KV-cache group; zero padded rows.

    Stands in for vLLM 0.33's ``BlockTables.gather_block_tables``
    (``_gather_block_tables_kernel``). With ``n = idx_mapping.numel()``, for
    every group ``g`` and row ``b < num_rows``:

    * ``b < n`` and ``req = idx_mapping[b] != -1``: ``nb = num_blocks[g, req]``;
      ``dst_block_tables[g][b, c] = src_block_tables[g][req, c]`` for ``c < nb``,
      except that with ``num_computed_tokens`` given the leading ``c < null``
      entries are 0, ``null = max(num_computed_tokens[req] - reach, 0) //
      block_sizes[g]`` when ``reach = sliding_window_reach[g] > 0`` (else 0):
      blocks wholly below the sliding window of the request's first scheduled
      token. Columns ``>= nb`` keep their values.
    * ``b >= n`` (a padded row, or one a larger earlier batch left dirty), or
      ``idx_mapping[b] == -1``: the whole row, ``dst_block_tables[g].size(1)``
      columns, is zeroed.

    Rows ``>= num_rows`` are not written (``num_rows`` is vLLM's
    ``max(num_reqs_padded, dirty rows)``).

    Args:
        idx_mapping: ``[n]`` int32/int64 request-state rows (vLLM: int64);
            ``-1`` owns no blocks.
        src_block_tables: ``G`` int32 tables ``[max_num_reqs, max_num_blocks]``
            (vLLM's ``block_tables[g].gpu``); ``G <= 32`` (0: a no-op).
        num_blocks: ``[>= G, >= max_num_reqs]`` int32 blocks of each request per
            group (vLLM's ``num_blocks.gpu``), ``0 <= nb <=`` both tables' widths.
        dst_block_tables: ``G`` int32 tables ``[>= num_rows, W]`` written
            (vLLM's ``input_block_tables``).
        num_rows: rows written per group, ``>= 0``.
        num_computed_tokens: ``[max_num_reqs]`` int32/int64 (vLLM: int32) or None:
            no sliding-window masking. Given, ``sliding_window_reach`` and
            ``block_sizes`` are required.
        sliding_window_reach: ``[>= G]`` int32 tokens below the first scheduled
            position attention still reads (0: the group has no window).
        block_sizes: ``[>= G]`` int32 tokens per block (``>= 1`` where masking reads it).

    Raises:
        RuntimeError: wrong dtype, device, rank, size, inner stride, list sizes,
            a destination aliasing another or an input, masking without
            ``sliding_window_reach`` / ``block_sizes``. Hostile device values (an
            ``idx_mapping`` entry outside ``[-1, max_num_reqs)``, a ``num_blocks``
            entry outside ``[0, table width]``, a negative
            ``num_computed_tokens`` entry or a ``block_sizes`` entry ``< 1`` that
            masking reads) raise on CPU (nothing written) and trip a named
            device-side assert on CUDA.
        TypeError: an argument of the wrong type, naming it.

    Never allocates, never synchronises: safe inside CUDA-graph capture.
    """,
)

__all__ = _op.exports(__name__)
