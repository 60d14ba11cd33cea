"""vLLM 0.33 speculative decoding: the draft decode steps' inputs.

Two Triton kernels of the target-dependent speculator (EAGLE, MTP:
``vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py``), every
step that drafts more than one token. ``vllm_prepare_decode_inputs`` stands in
for ``_prepare_decode_inputs_kernel``, launched through ``prepare_decode_inputs``
after the speculator's prefill (its grid depends on ``max_num_reqs`` only);
``vllm_update_draft_inputs`` for ``_update_draft_inputs_kernel``, launched
through ``update_draft_inputs`` after each draft decode step's sampling (one
program per request; inside the speculator's CUDA graph when it captures one).
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

vllm_update_draft_inputs = _op.define(
    "vllm_update_draft_inputs",
    family="vllm_spec_decode",
    upstream="vllm.v1.worker.gpu.spec_decode.target_dependent_ar.speculator._update_draft_inputs_kernel",
    index=("draft_tokens", "current_draft_step"),
    int64=("output_draft_tokens", "positions", "sample_src_positions"),
    floating=("hidden_states", "next_input_hidden_states"),
    keyword_only=False,
    doc="""Record a draft step's sampled tokens and write the next draft step's inputs.

    What vLLM 0.33's ``_update_draft_inputs_kernel`` writes, launched as
    ``update_draft_inputs`` launches it (``num_reqs`` programs). With
    ``n = draft_tokens.size(0)`` and ``step = current_draft_step`` (read on the
    device: a CUDA graph replays the value of the moment; not read when n is 0),
    for ``r < n``::

        output_draft_tokens[r, step] = draft_tokens[r]
        if step < num_speculative_steps - 1:            # another draft step follows
            sample_src_positions[r] += 1
            input_ids[r] = draft_tokens[r]               # low 32 bits
            next_input_hidden_states[r, :hidden] = hidden_states[r, :hidden]   # bits, hidden = hidden_states.size(1)
            if advance_draft_positions:
                positions[r] = min(positions[r] + 1, max_model_len - 1)
                seq_lens[r] = min(seq_lens[r] + 1, max_model_len)               # int32, wrapping

    Nothing else is written. ``positions``, ``seq_lens`` and
    ``sample_src_positions`` are read and written in place, so a call (or a graph
    replay) advances them once more each time, as vLLM's does.

    Args:
        draft_tokens: ``[n]`` int32/int64 (vLLM: the step's int64 sampled tokens).
        current_draft_step: one int32/int64 element, any rank (vLLM: its 0-d int64
            step counter). Must lie in ``[0, output_draft_tokens.size(1))``.
        hidden_states: ``[>= n, hidden]`` bfloat16/float16/float32, unit inner
            stride (vLLM: the draft model's output hidden states).
        output_draft_tokens: ``[>= n, cols]`` int64, unit inner stride, written at
            column ``step`` (vLLM: its ``[max_num_reqs, num_speculative_steps]``
            draft tokens).
        next_input_hidden_states: ``[>= n, >= hidden]``, the dtype of
            ``hidden_states``, unit inner stride, written (vLLM: the speculator's
            input hidden states). Writes do not bump autograd version counters:
            never pass a tensor autograd saved for backward.
        input_ids: ``[>= n]`` int32, written.
        positions: ``[>= n]`` int64, advanced in place (with ``advance_draft_positions``).
        seq_lens: ``[>= n]`` int32, advanced in place (with ``advance_draft_positions``).
        sample_src_positions: ``[>= n]`` int64, advanced in place.
        max_model_len: in ``[1, 2**31 - 1]``.
        num_speculative_steps: ``>= 1``: the step ``num_speculative_steps - 1``
            (and any later) writes its tokens only.
        advance_draft_positions: vLLM's flag (False for Gemma 4 MTP: positions stay).

    Raises:
        RuntimeError: wrong dtype, device, rank, size, inner stride, the hidden
            states of two dtypes, scalars out of range, an output sharing memory
            with another argument; on CPU a ``current_draft_step`` outside
            ``[0, output_draft_tokens.size(1))``, naming it and its value (before
            anything is written; on CUDA a device-side assert that names it).
        TypeError: an argument of the wrong type, naming it.
    """,
)

__all__ = _op.exports(__name__)
