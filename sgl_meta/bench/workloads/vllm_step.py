"""vLLM 0.33 workload: a Model Runner V2 decode step on the vLLM preset.

Per step, what ``GPUModelRunner.prepare_inputs`` + ``prepare_attn`` build for the
batch (positions and ``seq_lens``, every request's block-table row gathered into
the batch's table, the slot mappings: ``vllm_prepare_step``, one launch where
vLLM launches three Triton kernels), then what vLLM's FlashInfer backend packs
from that table (``vllm_copy_page_indices``, the paged-KV index stream of
``_compute_flashinfer_kv_metadata``). Both against their eager references.

The trace's requests own rows of ``req_to_token``; a request's vLLM block table
holds the same pages, one entry per block (``block_table[req, j] =
req_to_token[req, j * block_size] // block_size``), rebuilt for the step's rows
before each step. Plain decode: one token per request at position ``committed``
(``num_computed_tokens``). Graph buckets pad the batch with rows that own no
request state (``idx_mapping = -1``): a zero table row, ``pad_id`` slots, no pages.
"""

from __future__ import annotations

import functools
from typing import Optional

import numpy as np
import torch

import sgl_meta
from sgl_meta import reference

from ..presets import BACKEND_VLLM
from ..trace import Step
from .base import BenchContext, Workload

PAD_ID = -1  # vLLM's PAD_SLOT_ID


class VllmStep(Workload):
    """``vllm_prepare_step`` + ``vllm_copy_page_indices`` vs their eager references."""

    op = "vllm_prepare_step"
    label = "vllm step + flashinfer pages"
    backend = BACKEND_VLLM
    refreshes = ("prepare_step", "copy_page_indices")

    @classmethod
    def available(cls) -> bool:
        return super().available() and hasattr(sgl_meta, "vllm_copy_page_indices")

    def __init__(self, ctx: BenchContext):
        super().__init__(ctx)
        n, dev = ctx.max_bs, self.device
        self.bsz = ctx.preset.page_size
        self.width = ctx.preset.max_pages
        rows = ctx.trace.req_to_token.shape[0]
        i32 = dict(dtype=torch.int32, device=dev)
        self.idx_mapping = torch.full((n,), -1, dtype=torch.int64, device=dev)
        self.query_start_loc = torch.arange(n + 1, **i32)  # one token per request
        self.num_computed_tokens = torch.zeros(rows, **i32)
        self.src = torch.zeros((rows, self.width), **i32)
        self.num_blocks = torch.zeros((1, rows), **i32)
        self.cu_num_blocks = torch.zeros(n + 1, **i32)
        self.block_sizes = torch.tensor([self.bsz], **i32)
        self.enabled = torch.ones(1, dtype=torch.bool, device=dev)
        self.dcp_sharded = torch.zeros(1, dtype=torch.bool, device=dev)
        self.reach = torch.zeros(1, **i32)
        self._make_outputs({"pos": ((n,), torch.int64), "seq_lens": ((n,), torch.int32),
                            "block_table": ((n, self.width), torch.int32), "slot_mappings": ((1, n), torch.int64),
                            "page_indices": ((n * self.width,), torch.int32)})

    def _blocks(self, step: Step) -> np.ndarray:
        return -(-step.seq_lens.astype(np.int64) // self.bsz)

    def fill(self, step: Step, bucket: int) -> None:
        rows = torch.from_numpy(step.req_pool_indices.astype(np.int64)).to(self.device)
        table = self.ctx.trace.req_to_token[rows][:, :: self.bsz][:, : self.width]
        self.src[rows] = torch.div(table, self.bsz, rounding_mode="floor")
        self.num_computed_tokens[rows] = torch.from_numpy(step.committed.astype(np.int32)).to(self.device)
        blocks = self._blocks(step)
        self.num_blocks[0, rows] = torch.from_numpy(blocks.astype(np.int32)).to(self.device)
        self._h2d(self.idx_mapping, step.req_pool_indices.astype(np.int64), bucket, -1)
        self._h2d(self.cu_num_blocks, np.concatenate([[0], np.cumsum(blocks)]).astype(np.int32), bucket + 1,
                  int(blocks.sum()))

    def calls(self, impl: str, bs: int, step: Optional[Step]) -> list:
        out = self.out[(impl, "graph" if step is None else "eager")]
        fused = impl == "fused"
        prepare = sgl_meta.vllm_prepare_step if fused else reference.vllm_prepare_step
        copy = sgl_meta.vllm_copy_page_indices if fused else reference.vllm_copy_page_indices
        return [
            functools.partial(
                prepare, idx_mapping=self.idx_mapping[:bs], query_start_loc=self.query_start_loc[: bs + 1],
                num_computed_tokens=self.num_computed_tokens, pos=out["pos"][:bs], seq_lens=out["seq_lens"],
                src_block_tables=[self.src], num_blocks=self.num_blocks, dst_block_tables=[out["block_table"]],
                num_rows=bs, block_sizes=self.block_sizes, slot_mapping_enabled=self.enabled,
                dcp_sharded=self.dcp_sharded, slot_mappings=out["slot_mappings"], cp_rank=0, cp_size=1,
                cp_interleave=1, pad_id=PAD_ID, sliding_window_reach=self.reach, mask_sliding_window=False),
            functools.partial(copy, page_indices=out["page_indices"], block_table=out["block_table"],
                              cu_num_blocks=self.cu_num_blocks[: bs + 1]),
        ]

    def bytes_moved(self, step: Step, bucket: int, mode: str) -> int:
        """Per row: its index, query bounds, computed count and block count read,
        its position, length and slot written, its table read and written, then
        read again and packed; a padded row's table row zeroed."""
        rows = step.bs if mode == "eager" else bucket
        blocks = int(self._blocks(step).sum())
        padded = rows - step.bs
        per_row = 8 + 4 + 4 + 4 + 8 + 4 + 8 + 4  # idx, qsl, computed, num_blocks; pos, seq_len, slot; cu
        return rows * per_row + blocks * 4 * 4 + padded * self.width * 4
