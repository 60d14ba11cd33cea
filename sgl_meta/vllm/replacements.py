"""What vLLM 0.33 calls once the plugin is installed: its own signatures and
side effects, our ops underneath.

Methods of ``vllm.v1.worker.gpu.block_table.BlockTables`` (installed on the
class; ``self`` is vLLM's object, its attributes passed unchanged) and Triton
kernel stand-ins (installed through ``vllm.triton_utils.dispatcher.register_kernels``,
which calls them with the kernel's launch arguments and drops the grid; each
recovers the grid from its arguments as vLLM 0.33's launcher computes it).
Nothing here imports vLLM: ``PAD_SLOT_ID`` is handed over by the plugin.
"""

from __future__ import annotations

from typing import Optional

import torch

from .. import vllm_block_table as _bt
from .. import vllm_flashinfer as _fi
from .. import vllm_input_batch as _ib
from .. import vllm_spec_decode as _sd
from .targets import _BT

PAD_SLOT_ID = -1
"""vLLM's ``vllm.v1.attention.backends.utils.PAD_SLOT_ID``; the plugin checks it is still -1."""


def _vllms_own(name: str):
    """vLLM's own ``BlockTables.<name>``, for engines past :data:`sgl_meta.vllm_block_table.MAX_GROUPS`
    KV-cache groups (one launch of ours takes at most that many)."""
    from .plugin import original

    fn = original(f"{_BT}.BlockTables.{name}")
    if fn is None:
        raise RuntimeError(f"sgl-meta's BlockTables.{name}: {_bt.MAX_GROUPS} KV-cache groups at most, and "
                           "vLLM's own method is not at hand (the plugin did not install this one)")
    return fn


def _tables(self) -> list[torch.Tensor]:
    """``[b.gpu for b in self.block_tables]``, rebuilt only when vLLM rebuilds its
    pointer array (``init_block_table_layout_tensors``), so a step pays no list
    comprehension."""
    cached = self.__dict__.get("_sgl_meta_tables")
    if cached is None or cached[0] is not self.block_table_ptrs:
        cached = (self.block_table_ptrs, [b.gpu for b in self.block_tables])
        self.__dict__["_sgl_meta_tables"] = cached
    return cached[1]


def compute_slot_mappings(
    self,
    idx_mapping: torch.Tensor,
    query_start_loc: torch.Tensor,
    positions: torch.Tensor,
    num_tokens_padded: int,
    out: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """``BlockTables.compute_slot_mappings``: every group's slot mapping, the
    tail past the batch's tokens padded, one launch (vLLM's own method past
    ``MAX_GROUPS`` groups)."""
    if self.num_kv_cache_groups > _bt.MAX_GROUPS:
        return _vllms_own("compute_slot_mappings")(self, idx_mapping, query_start_loc, positions,
                                                   num_tokens_padded, out)
    slot_mappings = self.slot_mappings if out is None else out
    if self.num_kv_cache_groups:
        _bt.vllm_compute_slot_mappings(
            idx_mapping=idx_mapping,
            query_start_loc=query_start_loc,
            positions=positions,
            block_tables=_tables(self),
            block_sizes=self.block_sizes_tensor,
            slot_mapping_enabled=self.slot_mapping_enabled,
            dcp_sharded=self.dcp_sharded,
            slot_mappings=slot_mappings,
            cp_rank=self.cp_rank,
            cp_size=self.cp_size,
            cp_interleave=self.cp_interleave,
            pad_id=PAD_SLOT_ID,
        )
    return slot_mappings[:, :num_tokens_padded]


def gather_block_tables(
    self,
    idx_mapping: torch.Tensor,
    num_reqs_padded: int,
    out: Optional[tuple[torch.Tensor, ...]] = None,
    out_ptrs: Optional[torch.Tensor] = None,
    num_computed_tokens: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, ...]:
    """``BlockTables.gather_block_tables``: the batch's rows into the forward
    pass's tables (vLLM's shared ``input_block_tables`` unless ``out`` is given),
    rows a larger earlier batch left there zeroed, sliding-window masking when
    ``num_computed_tokens`` is given and a group has a window (vLLM's own method
    past ``MAX_GROUPS`` groups)."""
    if self.num_kv_cache_groups == 0:
        return ()
    if self.num_kv_cache_groups > _bt.MAX_GROUPS:
        return _vllms_own("gather_block_tables")(self, idx_mapping, num_reqs_padded, out, out_ptrs,
                                                 num_computed_tokens)
    num_reqs = idx_mapping.shape[0]
    num_rows = num_reqs_padded
    if out is None:
        out = tuple(self.input_block_tables)
        # The shared tables' dirty-row bookkeeping, as vLLM keeps it.
        num_rows = max(num_rows, self._num_dirty_rows)
        self._num_dirty_rows = num_reqs
    else:
        # vLLM's own contract for an external output (out_ptrs is its
        # kernel's view of ``out``; ours takes the tensors).
        assert out_ptrs is not None
        assert len(out) == self.num_kv_cache_groups
    mask = self.has_sliding_window_groups and num_computed_tokens is not None
    _bt.vllm_gather_block_tables(
        idx_mapping=idx_mapping,
        src_block_tables=_tables(self),
        num_blocks=self.num_blocks.gpu,
        dst_block_tables=out,
        num_rows=num_rows,
        num_computed_tokens=num_computed_tokens if mask else None,
        sliding_window_reach=self.sliding_window_reach if mask else None,
        block_sizes=self.block_sizes_tensor if mask else None,
    )
    return tuple(bt[:num_reqs_padded] for bt in out)


def prepare_pos_seq_lens_kernel(
    pos_ptr, seq_lens_ptr, idx_mapping_ptr, query_start_loc_ptr, num_computed_tokens_ptr, max_num_reqs, BLOCK_SIZE=None
) -> None:
    """Stands in for ``input_batch._prepare_pos_seq_lens_kernel`` launched over
    ``(idx_mapping.shape[0] + 1,)`` with ``max_num_reqs = seq_lens.shape[0]``
    (``prepare_pos_seq_lens``); our op covers the same rows from the tensors."""
    if int(max_num_reqs) != seq_lens_ptr.shape[0]:
        raise RuntimeError(
            f"sgl-meta's _prepare_pos_seq_lens_kernel stand-in: max_num_reqs={max_num_reqs} is not "
            f"seq_lens.shape[0]={seq_lens_ptr.shape[0]} (the launch vLLM 0.33 makes)"
        )
    _ib.vllm_prepare_pos_seq_lens(
        idx_mapping=idx_mapping_ptr,
        query_start_loc=query_start_loc_ptr,
        num_computed_tokens=num_computed_tokens_ptr,
        pos=pos_ptr,
        seq_lens=seq_lens_ptr,
    )


def combine_sampled_and_draft_tokens_kernel(
    input_ids_ptr,
    idx_mapping_ptr,
    last_sampled_tokens_ptr,
    query_start_loc_ptr,
    seq_lens_ptr,
    prefill_len_ptr,
    draft_tokens_ptr,
    draft_tokens_stride,
    cu_num_logits_ptr,
    logits_indices_ptr,
    BLOCK_SIZE=None,
    NUM_NEW_SAMPLED_TOKENS=1,
) -> None:
    """Stands in for ``input_batch._combine_sampled_and_draft_tokens_kernel``
    launched over ``(idx_mapping.shape[0],)`` (``combine_sampled_and_draft_tokens``,
    which allocates ``logits_indices`` and returns it)."""
    if draft_tokens_ptr.dim() != 2 or int(draft_tokens_stride) != draft_tokens_ptr.stride(0):
        raise RuntimeError(
            "sgl-meta's _combine_sampled_and_draft_tokens_kernel stand-in: draft_tokens_stride="
            f"{draft_tokens_stride} is not draft_tokens.stride(0) of a 2-D draft_tokens (the launch vLLM 0.33 makes)"
        )
    _ib.vllm_combine_sampled_and_draft_tokens(
        input_ids=input_ids_ptr,
        idx_mapping=idx_mapping_ptr,
        last_sampled_tokens=last_sampled_tokens_ptr,
        query_start_loc=query_start_loc_ptr,
        seq_lens=seq_lens_ptr,
        prefill_len=prefill_len_ptr,
        draft_tokens=draft_tokens_ptr,
        cu_num_logits=cu_num_logits_ptr,
        logits_indices=logits_indices_ptr,
        num_new_sampled_tokens=int(NUM_NEW_SAMPLED_TOKENS),
    )


def copy_page_indices_kernel(page_indices, block_table, block_table_stride, cu_num_blocks, BLOCK_SIZE=None) -> None:
    """Stands in for ``flashinfer._copy_page_indices_kernel`` launched over
    ``(num_reqs,)`` with ``cu_num_blocks`` the ``num_reqs + 1`` entries of
    ``paged_kv_indptr`` (``FlashInferMetadataBuilder._compute_flashinfer_kv_metadata``);
    our op covers the same rows from ``cu_num_blocks.numel() - 1``."""
    if block_table.dim() != 2 or int(block_table_stride) != block_table.stride(0):
        raise RuntimeError(
            "sgl-meta's _copy_page_indices_kernel stand-in: block_table_stride="
            f"{block_table_stride} is not block_table.stride(0) of a 2-D block_table (the launch vLLM 0.33 makes)"
        )
    _fi.vllm_copy_page_indices(page_indices=page_indices, block_table=block_table, cu_num_blocks=cu_num_blocks)


def prepare_decode_inputs_kernel(
    draft_tokens_ptr, draft_tokens_stride, target_seq_lens_ptr, num_rejected_ptr, input_ids_ptr, positions_ptr,
    sample_src_positions_ptr, query_start_loc_ptr, seq_lens_ptr, max_model_len, max_num_reqs, BLOCK_SIZE=None,
    ADVANCE_DRAFT_POSITIONS=True,
) -> None:
    """Stands in for the speculator's ``_prepare_decode_inputs_kernel`` launched
    over ``(draft_tokens.shape[0] + 1,)`` (``prepare_decode_inputs``). vLLM hands
    over column 0 of its draft tokens, a 1-D view whose stride is the row
    stride, which our op reads as it is."""
    n = draft_tokens_ptr.shape[0]
    if draft_tokens_ptr.dim() != 1 or (n > 1 and int(draft_tokens_stride) != draft_tokens_ptr.stride(0)):
        raise RuntimeError(
            "sgl-meta's _prepare_decode_inputs_kernel stand-in: draft_tokens_stride="
            f"{draft_tokens_stride} is not the stride of a 1-D draft_tokens (the launch vLLM 0.33 makes)"
        )
    _sd.vllm_prepare_decode_inputs(
        draft_tokens_ptr, target_seq_lens_ptr, num_rejected_ptr, input_ids_ptr, positions_ptr, sample_src_positions_ptr,
        query_start_loc_ptr, seq_lens_ptr, int(max_model_len), int(max_num_reqs), bool(ADVANCE_DRAFT_POSITIONS),
    )


def update_draft_inputs_kernel(
    output_draft_tokens_ptr, output_draft_tokens_stride, next_input_hidden_states_ptr,
    next_input_hidden_states_stride, input_ids_ptr, positions_ptr, sample_src_positions_ptr, seq_lens_ptr,
    draft_tokens_ptr, current_draft_step_ptr, hidden_states_ptr, hidden_states_stride, hidden_size, max_model_len,
    num_speculative_steps, BLOCK_SIZE=None, ADVANCE_DRAFT_POSITIONS=True,
) -> None:
    """Stands in for the speculator's ``_update_draft_inputs_kernel`` launched over
    ``(num_reqs,)`` (``update_draft_inputs``), where ``_generate_draft`` hands over
    the ``num_reqs`` it sampled ``draft_tokens`` for: our op covers
    ``draft_tokens.shape[0]`` requests. The step stays on the device."""
    if (output_draft_tokens_ptr.dim() != 2 or int(output_draft_tokens_stride) != output_draft_tokens_ptr.stride(0)
            or next_input_hidden_states_ptr.dim() != 2
            or int(next_input_hidden_states_stride) != next_input_hidden_states_ptr.stride(0)
            or hidden_states_ptr.dim() != 2 or int(hidden_states_stride) != hidden_states_ptr.stride(0)
            or int(hidden_size) != hidden_states_ptr.shape[1]):
        raise RuntimeError(
            "sgl-meta's _update_draft_inputs_kernel stand-in: the strides and hidden_size="
            f"{hidden_size} are not those of 2-D output_draft_tokens, next_input_hidden_states and hidden_states "
            "(the launch vLLM 0.33 makes)"
        )
    _sd.vllm_update_draft_inputs(
        draft_tokens_ptr, current_draft_step_ptr, hidden_states_ptr, output_draft_tokens_ptr,
        next_input_hidden_states_ptr, input_ids_ptr, positions_ptr, seq_lens_ptr, sample_src_positions_ptr,
        int(max_model_len), int(num_speculative_steps), bool(ADVANCE_DRAFT_POSITIONS),
    )
