"""FlashAttention (FA3 / FA4) backend workloads: the Hopper Llama preset.

Refreshes per decode step, as SGLang 0.5.23's ``FlashAttentionBackend`` makes them
before each replay (EAGLE top-k 1; the draft steps through
``FlashAttentionMultiStepBackend``), each one ``normal_decode_set_metadata`` or
``draft_extend_set_metadata``, i.e. ``update_flash_attention_metadata`` with one
destination set:

* plain decode: ``seq_len_delta = 0``;
* EAGLE (``num_steps`` S, ``num_draft_tokens`` D): S - 1 draft-decode refreshes with
  ``seq_len_delta = step + 1``, target verify with ``seq_len_delta = D``, and draft
  extend over the post-acceptance lengths with ``cu_seqlens_q`` from the accepted
  token counts.

The page table has ``page_size``-token columns (1, SGLang's default, for this
preset: one column per token). A refresh writes each row's live prefix and leaves
the columns past it as they were. Every refresh passes the full width as
``max_seq_pages`` (the backend's static ``max_num_pages``, whatever the lengths);
eager steps ``bs`` = running requests, captured steps the bucket size.
"""

from __future__ import annotations

import functools
from typing import Optional

import numpy as np
import torch

import sgl_meta
from sgl_meta import reference

from ..presets import BACKEND_FA3
from ..trace import Step
from .base import SECTOR, BenchContext, gather_sectors
from .trtllm_mha_metadata import PAD_SEQ_LEN, DecodeStepBase, DraftsInOneLaunch, Refresh, refresh_lens


class FlashAttentionMetadata(DecodeStepBase):
    """``sgl_meta.update_flash_attention_metadata`` (one set per refresh) vs its eager reference."""

    op = "update_flash_attention_metadata"
    label = "fa metadata"
    backend = BACKEND_FA3

    def __init__(self, ctx: BenchContext):
        super().__init__(ctx)
        n = ctx.max_bs
        self.extend_lens = torch.zeros(n, dtype=torch.int32, device=self.device)
        shapes = {}
        for r in self.plan:
            shapes.update(self._decode_shapes(r, n))
            if r.after_accept:
                shapes[f"{r.name}.cu_seqlens_q"] = ((n + 1,), torch.int32)
        self._make_outputs(shapes)

    def fill(self, step: Step, bucket: int) -> None:
        self._fill_common(step, bucket)
        for k, r in enumerate(self.plan):
            self._h2d(self.lens[k], refresh_lens(step, r), bucket, PAD_SEQ_LEN)
        self._h2d(self.extend_lens, step.accept_lens.astype(np.int32), bucket, 0)

    def _set(self, out: dict, r: Refresh, bs: int) -> dict:
        return dict(cache_seqlens=out[f"{r.name}.cache_seqlens"][:bs], cu_seqlens_k=out[f"{r.name}.cu_seqlens_k"][: bs + 1],
                    page_table=out[f"{r.name}.page_table"][:bs])

    def _call(self, impl: str, out: dict, sets: list, refresh: Refresh, k: int, bs: int, max_seq_pages: int):
        fn = sgl_meta.update_flash_attention_metadata if impl == "fused" else reference.update_flash_attention_metadata
        kw = dict(
            cache_seqlens=[s[0]["cache_seqlens"] for s in sets],
            cu_seqlens_k=[s[0]["cu_seqlens_k"] for s in sets],
            page_table=[s[0]["page_table"] for s in sets],
            seq_len_delta=[s[1] for s in sets],
            req_to_token=self.ctx.trace.req_to_token,
            req_pool_indices=self.req_pool_indices[:bs],
            seq_lens=self.lens[k][:bs],
            bs=bs,
            max_seq_pages=max_seq_pages,
            page_size=self.ps,
        )
        if refresh.after_accept:
            kw.update(cu_seqlens_q=out[f"{refresh.name}.cu_seqlens_q"][: bs + 1], extend_seq_lens=self.extend_lens[:bs])
        return functools.partial(fn, **kw)

    def calls(self, impl: str, bs: int, step: Optional[Step]) -> list:
        out = self.out[(impl, "graph" if step is None else "eager")]
        return [self._call(impl, out, [(self._set(out, r, bs), r.seqlen_offset)], r, k, bs, self._max_seq_pages(step, r))
                for k, r in enumerate(self.plan)]

    def _max_seq_pages(self, step: Optional[Step], r: Refresh) -> int:
        return self.width  # FlashAttentionBackend passes max_num_pages = ceil(max_context_len / page_size)

    def bytes_moved(self, step: Step, bucket: int, mode: str) -> int:
        return sum(self._refresh_bytes(step, bucket, mode, r) for r in self.plan)

    def _refresh_bytes(self, step: Step, bucket: int, mode: str, r: Refresh, reads: bool = True) -> int:
        """Least bytes refresh ``r`` moves: its live columns read (one sector per
        gathered slot run) and written; ``reads=False``: the writes only (a set of a
        multi-set launch whose reads another set already paid)."""
        bs = step.bs if mode == "eager" else bucket
        cols = self._live_cols(step, r, bs)
        written = int(cols.sum())
        total = bs * 4 + (bs + 1) * 4 + written * 4  # cache_seqlens, cu_seqlens_k, page table
        if reads:
            total += 2 * bs * 4 + int(gather_sectors(cols, self.ps).sum()) * SECTOR  # rows, lengths, slots
        if r.after_accept:
            total += bs * 4 + (bs + 1) * 4  # extend_seq_lens, cu_seqlens_q
        return total


class FlashAttentionSpecOneLaunch(DraftsInOneLaunch, FlashAttentionMetadata):
    """EAGLE's refreshes with the S - 1 draft steps as one
    ``update_flash_attention_metadata`` of S - 1 sets (what the ``sgl_meta.sglang``
    hook on ``FlashAttentionMultiStepBackend.init_forward_metadata_out_graph`` runs);
    verify and draft extend stay single calls. Next to the one-set row it is the
    per-step before/after. Every set is the full width, as the one-set calls.
    """

    label = "fa EAGLE, drafts in 1 launch"
    needs_spec = True

    def calls(self, impl: str, bs: int, step: Optional[Step]) -> list:
        singles = super().calls(impl, bs, step)
        if not self.drafts:
            return singles
        out = self.out[(impl, "graph" if step is None else "eager")]
        sets = [(self._set(out, self.plan[k], bs), self.plan[k].seqlen_offset) for k in self.drafts]
        width = max(self._max_seq_pages(step, self.plan[k]) for k in self.drafts)
        first = self.drafts[0]  # every draft step reads the step's seq_lens
        multi = self._call(impl, out, sets, self.plan[first], first, bs, width)
        return [multi] + [c for k, c in enumerate(singles) if k not in self.drafts]
