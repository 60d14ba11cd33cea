from vllm.v1.worker.gpu.input_batch import _Jit

_prepare_decode_inputs_kernel = _Jit(
    "draft_tokens_ptr", "draft_tokens_stride", "target_seq_lens_ptr", "num_rejected_ptr", "input_ids_ptr",
    "positions_ptr", "sample_src_positions_ptr", "query_start_loc_ptr", "seq_lens_ptr", "max_model_len",
    "max_num_reqs", "BLOCK_SIZE", "ADVANCE_DRAFT_POSITIONS",
)


def prepare_decode_inputs(draft_tokens, target_seq_lens, num_rejected, input_buffers, sample_src_positions,
                          max_model_len, max_num_reqs, advance_draft_positions=True):
    num_reqs = draft_tokens.shape[0]
    _prepare_decode_inputs_kernel[(num_reqs + 1,)](
        draft_tokens,
        draft_tokens.stride(0),
        target_seq_lens,
        num_rejected,
        input_buffers.input_ids,
        input_buffers.positions,
        sample_src_positions,
        input_buffers.query_start_loc,
        input_buffers.seq_lens,
        max_model_len,
        max_num_reqs,
        BLOCK_SIZE=1024,
        ADVANCE_DRAFT_POSITIONS=advance_draft_positions,
    )


_update_draft_inputs_kernel = _Jit(
    "output_draft_tokens_ptr", "output_draft_tokens_stride", "next_input_hidden_states_ptr",
    "next_input_hidden_states_stride", "input_ids_ptr", "positions_ptr", "sample_src_positions_ptr", "seq_lens_ptr",
    "draft_tokens_ptr", "current_draft_step_ptr", "hidden_states_ptr", "hidden_states_stride", "hidden_size",
    "max_model_len", "num_speculative_steps", "BLOCK_SIZE", "ADVANCE_DRAFT_POSITIONS",
)


class TargetDependentARSpeculator:
    """The speculator's state update_draft_inputs reads; the draft model's forward
    pass and sampling are stand-ins (``_run_model``, ``sample_draft``) a test sets."""

    def _generate_draft(self, num_reqs, num_tokens_padded, attn_metadata, slot_mappings, num_tokens_across_dp,
                        cudagraph_runtime_mode, num_speculative_steps):
        last_hidden_states, hidden_states = self._run_model(num_tokens_padded)
        sample_hidden_states = last_hidden_states[:num_reqs]
        sample_src_positions = self.sample_src_positions[:num_reqs]
        draft_tokens = self.sample_draft(
            sample_hidden_states,
            sample_src_positions,
        )
        update_draft_inputs(
            draft_tokens,
            self.current_draft_step,
            hidden_states,
            self.draft_tokens,
            self.hidden_states,
            self.input_buffers,
            self.sample_src_positions,
            num_reqs,
            self.max_model_len,
            num_speculative_steps,
            advance_draft_positions=self.advance_draft_positions,
        )


def update_draft_inputs(draft_tokens, current_draft_step, hidden_states, output_draft_tokens,
                        next_input_hidden_states, input_buffers, sample_src_positions, num_reqs, max_model_len,
                        num_speculative_steps, advance_draft_positions=True):
    _, hidden_size = hidden_states.shape
    _update_draft_inputs_kernel[(num_reqs,)](
        output_draft_tokens,
        output_draft_tokens.stride(0),
        next_input_hidden_states,
        next_input_hidden_states.stride(0),
        input_buffers.input_ids,
        input_buffers.positions,
        sample_src_positions,
        input_buffers.seq_lens,
        draft_tokens,
        current_draft_step,
        hidden_states,
        hidden_states.stride(0),
        hidden_size,
        max_model_len,
        num_speculative_steps,
        BLOCK_SIZE=1024,
        ADVANCE_DRAFT_POSITIONS=advance_draft_positions,
    )
