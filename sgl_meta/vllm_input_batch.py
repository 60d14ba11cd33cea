"""vLLM 0.33 input batch: positions, sequence lengths, sampled and draft tokens.

The ops ``vllm_prepare_pos_seq_lens`` and ``vllm_combine_sampled_and_draft_tokens``
stand in for the Triton kernels of ``vllm/v1/worker/gpu/input_batch.py``
(Model Runner V2); ``vllm_prepare_step`` is the per-step metadata of
``GPUModelRunner.prepare_inputs`` + ``prepare_attn`` in one launch: positions
and sequence lengths, every KV-cache group's gathered block table and its slot
mapping (``prepare_pos_seq_lens`` + ``BlockTables.gather_block_tables`` +
``BlockTables.compute_slot_mappings``, which vLLM runs back to back).

``idx_mapping`` maps batch rows to request-state rows; ``-1`` marks a row that
owns no request state (read as 0 computed tokens, no blocks). Launch grids
depend on host-known sizes only: a captured CUDA graph replays with any new values.
"""

from __future__ import annotations

from . import _op

_UPSTREAM = "vllm.v1.worker.gpu.input_batch"

vllm_prepare_pos_seq_lens = _op.define(
    "vllm_prepare_pos_seq_lens",
    family="vllm_input_batch",
    upstream=f"{_UPSTREAM}.prepare_pos_seq_lens",
    index=("idx_mapping", "query_start_loc", "num_computed_tokens", "pos"),
    keyword_only=False,
    doc="""Write each token's position and each request's sequence length; zero the padded lengths.

    Stands in for vLLM 0.33's ``prepare_pos_seq_lens`` (its signature: the same
    arguments, in order or by keyword).
    With ``n = idx_mapping.numel()``, for ``b < n``, ``c = num_computed_tokens[
    idx_mapping[b]]`` (0 for ``idx_mapping[b] == -1``), ``start, end =
    query_start_loc[b], query_start_loc[b + 1]``::

        seq_lens[b] = c + (end - start)
        pos[start + i] = c + i            for i < end - start
        seq_lens[n:] = 0                  (the padded rows a full CUDA graph reads)

    Tokens outside ``[query_start_loc[0], query_start_loc[n])`` keep their values.

    Args:
        idx_mapping: ``[n]`` int32/int64 request-state rows (vLLM: int64), ``-1`` allowed.
        query_start_loc: ``[>= n + 1]`` int32/int64 (vLLM: int32), non-negative,
            non-decreasing, ``query_start_loc[n] <= pos.numel()``.
        num_computed_tokens: ``[max_num_reqs]`` int32/int64 (vLLM: int32), ``>= 0``.
        pos: ``[num_tokens]`` int32/int64 output positions (vLLM: int64).
        seq_lens: ``[>= n]`` int32 output (its whole length is written).

    Lengths: ``c`` must be ``>= 0`` and ``c + (end - start)`` must fit int32;
    otherwise RuntimeError on CPU naming the value (nothing written), a named
    device assert on CUDA.

    Raises:
        RuntimeError: wrong dtype, device, rank, size, inner stride, aliasing
            outputs; hostile device values (``idx_mapping`` outside ``[-1,
            num_computed_tokens.numel())``, a bad ``query_start_loc``, lengths as
            above) on CPU, a named device-side assert on CUDA.
        TypeError: an argument of the wrong type, naming it.
    """,
)

vllm_combine_sampled_and_draft_tokens = _op.define(
    "vllm_combine_sampled_and_draft_tokens",
    family="vllm_input_batch",
    upstream=f"{_UPSTREAM}.combine_sampled_and_draft_tokens",
    index=("idx_mapping", "last_sampled_tokens", "query_start_loc", "seq_lens", "prefill_len", "draft_tokens",
           "cu_num_logits", "logits_indices"),
    doc="""Write the last sampled and draft tokens into input_ids and the logits indices.

    Stands in for vLLM 0.33's ``combine_sampled_and_draft_tokens``, except that
    ``logits_indices`` is caller-owned (vLLM allocates ``num_logits`` int64
    entries and returns them). With ``n = idx_mapping.numel()``, ``S =
    draft_tokens.size(1)``, ``k = num_new_sampled_tokens``, for ``b < n``,
    ``req = idx_mapping[b]``, ``nl = cu_num_logits[b + 1] - cu_num_logits[b]``,
    ``end = query_start_loc[b + 1]``, ``first = end - nl``::

        logits_indices[cu_num_logits[b] + i] = first + i              for i < nl
        if req != -1 and seq_lens[b] > prefill_len[req]:            # past the prompt
            if k == 1 and seq_lens[b] - nl >= prefill_len[req]:
                input_ids[first] = last_sampled_tokens[req]
            input_ids[end - (nl - k) + i] = draft_tokens[req, i]     for i < nl - k

    Token ids are stored into int32 ``input_ids`` as vLLM stores them (the low
    32 bits). Nothing else is written.

    Args:
        input_ids: ``[num_tokens]`` int32, written.
        idx_mapping: ``[n]`` int32/int64 (vLLM: int64); ``-1`` writes logits indices only.
        last_sampled_tokens: ``[max_num_reqs]`` or ``[max_num_reqs, >= 1]``
            int32/int64 (vLLM: int64 ``[max_num_reqs, 1]``; column 0 is read).
        query_start_loc: ``[>= n + 1]`` int32/int64.
        seq_lens: ``[>= n]`` int32/int64 (this step's, as vLLM passes them).
        prefill_len: ``[max_num_reqs]`` int32/int64.
        draft_tokens: ``[max_num_reqs, S]`` int32/int64 (vLLM: int64).
        cu_num_logits: ``[>= n + 1]`` int32/int64, non-negative, non-decreasing.
        logits_indices: ``[>= cu_num_logits[n]]`` int32/int64 (vLLM: int64), written.
        num_new_sampled_tokens: 0 or 1, as vLLM.

    Raises:
        RuntimeError: wrong dtype, device, rank, size, inner stride, aliasing,
            ``num_new_sampled_tokens`` not 0 or 1. Hostile device values (an
            ``idx_mapping`` entry outside ``[-1, max_num_reqs)``, a decreasing or
            negative ``cu_num_logits``, more logits than ``S + k``, a row that
            writes tokens with more logits than query tokens or, writing its
            last sampled token, with none, a write past ``input_ids`` or
            ``logits_indices``) raise on CPU (nothing written) and trip a named
            device-side assert on CUDA. A row that writes no tokens (a prompt
            row, a ``-1`` row) is not held to its query length, as in vLLM.
        TypeError: an argument of the wrong type, naming it.
    """,
)

vllm_prepare_step = _op.define(
    "vllm_prepare_step",
    family="vllm_input_batch",
    upstream="vllm.v1.worker.gpu: prepare_pos_seq_lens + BlockTables.gather_block_tables + "
             "BlockTables.compute_slot_mappings, back to back each step",
    index=("idx_mapping", "query_start_loc", "num_computed_tokens", "pos"),
    int64=("slot_mappings",),
    boolean=("slot_mapping_enabled", "dcp_sharded"),
    doc="""One launch for a step's positions, sequence lengths, block tables and slot mappings.

    Equal to, back to back::

        vllm_prepare_pos_seq_lens(idx_mapping, query_start_loc, num_computed_tokens, pos, seq_lens)
        vllm_gather_block_tables(idx_mapping, src_block_tables, num_blocks, dst_block_tables, num_rows,
                                 num_computed_tokens if mask_sliding_window else None,
                                 sliding_window_reach, block_sizes)
        vllm_compute_slot_mappings(idx_mapping, query_start_loc, pos, src_block_tables, block_sizes,
                                   slot_mapping_enabled, dcp_sharded, slot_mappings,
                                   cp_rank, cp_size, cp_interleave, pad_id)

    (vLLM 0.33's ``prepare_pos_seq_lens`` in ``prepare_inputs`` and
    ``gather_block_tables`` + ``compute_slot_mappings`` in ``prepare_attn``).
    The slot mappings take each token's position from ``num_computed_tokens``
    and ``query_start_loc`` in the kernel (the same values ``pos`` receives), not
    from ``pos``. Contracts, sentinels and errors are those of the three ops;
    ``mask_sliding_window`` requires ``sliding_window_reach``.

    Args:
        idx_mapping, query_start_loc, num_computed_tokens, pos, seq_lens: as
            :func:`vllm_prepare_pos_seq_lens`.
        src_block_tables, num_blocks, dst_block_tables, num_rows: as
            :func:`vllm_gather_block_tables`.
        block_sizes, slot_mapping_enabled, dcp_sharded, slot_mappings, cp_rank,
            cp_size, cp_interleave, pad_id: as :func:`vllm_compute_slot_mappings`
            (``query_start_loc[n]`` must fit both ``pos`` and ``slot_mappings``).
        sliding_window_reach: ``[>= G]`` int32 (see :func:`vllm_gather_block_tables`).
        mask_sliding_window: null the blocks below each request's sliding window
            (vLLM: ``has_sliding_window_groups and num_computed_tokens is not None``).

    Raises:
        RuntimeError / TypeError: as the three ops.
    """,
)

__all__ = _op.exports(__name__)
