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
