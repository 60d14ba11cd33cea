class _Jit:
    def __init__(self, *names):
        self.arg_names = names

    def __getitem__(self, grid):
        raise AssertionError("vLLM's Triton kernel ran")


_prepare_pos_seq_lens_kernel = _Jit(
    "pos_ptr", "seq_lens_ptr", "idx_mapping_ptr", "query_start_loc_ptr", "num_computed_tokens_ptr",
    "max_num_reqs", "BLOCK_SIZE",
)
_combine_sampled_and_draft_tokens_kernel = _Jit(
    "input_ids_ptr", "idx_mapping_ptr", "last_sampled_tokens_ptr", "query_start_loc_ptr", "seq_lens_ptr",
    "prefill_len_ptr", "draft_tokens_ptr", "draft_tokens_stride", "cu_num_logits_ptr", "logits_indices_ptr",
    "BLOCK_SIZE", "NUM_NEW_SAMPLED_TOKENS",
)


def prepare_pos_seq_lens(idx_mapping, query_start_loc, num_computed_tokens, pos, seq_lens):
    num_reqs = idx_mapping.shape[0]
    _prepare_pos_seq_lens_kernel[(num_reqs + 1,)](
        pos, seq_lens, idx_mapping, query_start_loc, num_computed_tokens, seq_lens.shape[0], BLOCK_SIZE=1024
    )


def combine_sampled_and_draft_tokens(input_ids, idx_mapping, last_sampled_tokens, query_start_loc, seq_lens,
                                     prefill_len, draft_tokens, cu_num_logits, num_logits, num_new_sampled_tokens=1):
    num_reqs = idx_mapping.shape[0]
    logits_indices = None
    _combine_sampled_and_draft_tokens_kernel[(num_reqs,)](
        input_ids, idx_mapping, last_sampled_tokens, query_start_loc, seq_lens, prefill_len, draft_tokens,
        draft_tokens.stride(0), cu_num_logits, logits_indices, NUM_NEW_SAMPLED_TOKENS=num_new_sampled_tokens,
        BLOCK_SIZE=1,
    )
    return logits_indices
