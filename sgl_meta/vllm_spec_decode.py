"""vLLM 0.33 speculative decoding: the draft decode steps' inputs.

``vllm_prepare_decode_inputs`` stands in for the Triton kernel
``_prepare_decode_inputs_kernel`` that the target-dependent speculator (EAGLE,
MTP: ``vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py``)
launches through ``prepare_decode_inputs`` after its prefill, every step that
drafts more than one token. The launch grid depends on ``max_num_reqs`` only.
"""

from __future__ import annotations

from . import _op

vllm_prepare_decode_inputs = _op.define(
    "vllm_prepare_decode_inputs",
    family="vllm_spec_decode",
    upstream="vllm.v1.worker.gpu.spec_decode.target_dependent_ar.speculator._prepare_decode_inputs_kernel",
    index=("draft_tokens", "target_seq_lens", "num_rejected"),
    int64=("positions", "sample_src_positions"),
    keyword_only=False,
    doc="""Write the first draft decode step's inputs: tokens, positions, lengths, sampling keys.

    What vLLM 0.33's ``_prepare_decode_inputs_kernel`` writes, launched as
    ``prepare_decode_inputs`` launches it. With ``n = draft_tokens.size(0)``, for
    ``r < n``::

        input_ids[r] = draft_tokens[r, 0]                   # (a 1-D draft_tokens: [r]); low 32 bits
        sample_src_positions[r] += 1
        seq = target_seq_lens[r] - num_rejected[r]          # int32, wrapping (see Lengths)
        if advance_draft_positions:
            positions[r] = min(positions[r] + 1, max_model_len - 1)
            seq = min(seq + 1, max_model_len)
        seq_lens[r] = seq

    and for the graph's padded rows ``query_start_loc[i] = min(i, n)`` for
    ``i <= max_num_reqs``, ``seq_lens[i] = 0`` for ``n <= i < max_num_reqs``.
    ``positions`` and ``sample_src_positions`` are read and written in place, so a
    call (or a graph replay) advances them once more each time, as vLLM's does.

    Lengths: the subtraction, the ``+ 1`` and the clamp run in int32 and wrap, as
    vLLM's kernel computes its int32 inputs (what vLLM passes). int64
    ``target_seq_lens`` / ``num_rejected`` are read as their low 32 bits first;
    vLLM's kernel would compute those in int64 (the two differ only for values
    outside int32).

    Args:
        draft_tokens: ``[n]`` or ``[n, >= 1]`` int32/int64, any strides (only
            ``[r]`` / ``[r, 0]`` is read, through ``stride(0)``; vLLM: column 0 of
            the int64 ``[max_num_reqs, num_speculative_steps]`` draft tokens, a
            strided 1-D view).
        target_seq_lens: ``[>= n]`` int32/int64 (vLLM: the step's int32 ``seq_lens``).
        num_rejected: ``[>= n]`` int32/int64 (vLLM: int32).
        input_ids: ``[>= n]`` int32, written.
        positions: ``[>= n]`` int64, advanced in place (with ``advance_draft_positions``).
        sample_src_positions: ``[>= n]`` int64, advanced in place.
        query_start_loc: ``[>= max_num_reqs + 1]`` int32, written.
        seq_lens: ``[>= max_num_reqs]`` int32, written.
        max_model_len: in ``[1, 2**31 - 1]``.
        max_num_reqs: ``>= n`` and ``< 2**31 - 1``.
        advance_draft_positions: vLLM's flag (False for Gemma 4 MTP: positions stay).

    Raises:
        RuntimeError: wrong dtype, device, rank, size, inner stride, scalars out
            of range, an output sharing memory with another argument. No device
            value indexes anything, so none is hostile.
        TypeError: an argument of the wrong type, naming it.
    """,
)

__all__ = _op.exports(__name__)
