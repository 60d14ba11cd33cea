"""Eager references of the vLLM speculative-decoding ops (docs/operators/vllm_spec_decode.md).

Plain aten ops on the first ``n`` rows and the padded tails; int32 wrapping as
vLLM's Triton arithmetic wraps.
"""

from __future__ import annotations

import torch


def _wrap32(v: torch.Tensor) -> torch.Tensor:
    """int64 values to int32, keeping the low 32 bits (two's complement)."""
    return ((v + 2**31) % 2**32 - 2**31).to(torch.int32)


def vllm_prepare_decode_inputs(draft_tokens: torch.Tensor, target_seq_lens: torch.Tensor, num_rejected: torch.Tensor,
                               input_ids: torch.Tensor, positions: torch.Tensor, sample_src_positions: torch.Tensor,
                               query_start_loc: torch.Tensor, seq_lens: torch.Tensor, max_model_len: int,
                               max_num_reqs: int, advance_draft_positions: bool = True) -> None:
    """Eager reference of :func:`sgl_meta.vllm_prepare_decode_inputs`."""
    n = draft_tokens.size(0)
    draft = draft_tokens[:, 0] if draft_tokens.dim() == 2 else draft_tokens
    input_ids[:n] = _wrap32(draft.long())
    sample_src_positions[:n] += 1
    seq = _wrap32(target_seq_lens[:n].long() - num_rejected[:n].long()).long()
    if advance_draft_positions:
        positions[:n] = torch.clamp(positions[:n] + 1, max=max_model_len - 1)
        seq = torch.clamp(_wrap32(seq + 1).long(), max=max_model_len)
    seq_lens[:n] = seq.to(torch.int32)
    i = torch.arange(max_num_reqs + 1, device=query_start_loc.device)
    query_start_loc[: max_num_reqs + 1] = torch.clamp(i, max=n).to(torch.int32)
    seq_lens[n:max_num_reqs] = 0


def vllm_update_draft_inputs(draft_tokens: torch.Tensor, current_draft_step: torch.Tensor, hidden_states: torch.Tensor,
                             output_draft_tokens: torch.Tensor, next_input_hidden_states: torch.Tensor,
                             input_ids: torch.Tensor, positions: torch.Tensor, seq_lens: torch.Tensor,
                             sample_src_positions: torch.Tensor, max_model_len: int, num_speculative_steps: int,
                             advance_draft_positions: bool = True) -> None:
    """Eager reference of :func:`sgl_meta.vllm_update_draft_inputs` (reads the step
    on the host: a sync, which the op does not make)."""
    n = draft_tokens.size(0)
    if n == 0:
        return
    step = int(current_draft_step.reshape(-1)[0])
    if not 0 <= step < output_draft_tokens.size(1):
        raise RuntimeError(f"sgl_meta.vllm_update_draft_inputs: current_draft_step = {step} is outside "
                           f"[0, {output_draft_tokens.size(1)}) (output_draft_tokens.size(1))")
    draft = draft_tokens.long()
    output_draft_tokens[:n, step] = draft
    if step >= num_speculative_steps - 1:
        return
    sample_src_positions[:n] += 1
    input_ids[:n] = _wrap32(draft)
    hidden = hidden_states.size(1)
    # Through an integer view: a copy of the bits, NaN payloads included.
    bits = {2: torch.int16, 4: torch.int32}[hidden_states.element_size()]
    next_input_hidden_states[:n, :hidden].view(bits).copy_(hidden_states[:n].view(bits))
    if advance_draft_positions:
        positions[:n] = torch.clamp(positions[:n] + 1, max=max_model_len - 1)
        seq_lens[:n] = torch.clamp(_wrap32(seq_lens[:n].long() + 1).long(), max=max_model_len).to(torch.int32)
