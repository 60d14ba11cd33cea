"""TRT-LLM MHA backend workloads (gpt-oss, Llama presets).

Refreshes per decode step, as SGLang's ``TRTLLMHAAttnBackend`` does them on
CUDA-graph replay (topk 1):

* plain decode: one refresh, ``cache_seqlens = seq_lens``;
* speculative decoding (EAGLE, ``num_steps`` S, ``num_draft_tokens`` D): S - 1
  draft-decode refreshes with ``seqlen_offset = step + 1``, one target-verify
  refresh with ``seqlen_offset = D`` (D new slots per request), and one
  draft-extend refresh over the post-acceptance lengths with
  ``cu_seqlens_q`` in strided mode (``q_stride = D``, draft-extend v2).

With a sliding window (gpt-oss) every refresh also writes the SWA page table,
and those that place new tokens translate ``out_cache_loc`` into the SWA pool.

Eager steps pass ``bs`` = running requests and ``max_seq_pages`` from the host
max of ``seq_lens`` (what the server reads from ``seq_lens_cpu``), all columns
written. A captured graph cannot see host values, so graph steps pass the bucket
size, the full table width and ``live_pages_only=True`` (work bounded by the
device-side lengths).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

import sgl_meta
from sgl_meta import reference

from ..presets import BACKEND_TRTLLM_MHA
from ..trace import Step
from .base import SECTOR, BenchContext, Workload, gather_sectors, live_pages

Q_MODE_NONE, Q_MODE_STRIDED = 0, 2
PAD_SEQ_LEN = 1  # SGLang's seq_len_fill_value for padded graph rows


@dataclass(frozen=True)
class Refresh:
    """One metadata refresh of a decode step."""

    name: str
    seqlen_offset: int
    tokens: int  # new KV slots per request (out_cache_loc); 0 = none
    q_mode: int = Q_MODE_NONE
    q_stride: int = 0
    after_accept: bool = False  # lengths after this step's accepted tokens


def step_refreshes(ctx: BenchContext) -> tuple:
    p = ctx.preset
    if not ctx.spec:
        return (Refresh("decode", 0, 1),)
    d = p.spec_draft_tokens
    drafts = tuple(Refresh(f"draft_decode_{s}", s + 1, 1) for s in range(p.spec_steps - 1))
    return drafts + (
        Refresh("target_verify", d, d),
        Refresh("draft_extend", 0, 0, Q_MODE_STRIDED, d, after_accept=True),
    )


def refresh_lens(step: Step, r: Refresh) -> np.ndarray:
    """The ``seq_lens`` one refresh reads (before its ``seqlen_offset``)."""
    if r.after_accept:
        return (step.committed + step.accept_lens).astype(np.int32)
    return step.seq_lens


def refresh_kv_lens(step: Step, r: Refresh, rows: int) -> np.ndarray:
    """int64 KV length of each of ``rows`` rows in refresh ``r`` (its ``seq_lens`` plus
    ``seqlen_offset``), rows past the step's requests padded as SGLang pads them."""
    lens = np.full(rows, PAD_SEQ_LEN, dtype=np.int64)
    lens[: step.bs] = refresh_lens(step, r)
    return lens + r.seqlen_offset


def refresh_slots(step: Step, r: Refresh, k: int) -> np.ndarray:
    """The ``out_cache_loc`` of refresh ``k`` (draft step k writes column k)."""
    if r.tokens == step.tokens_per_req:
        return step.out_cache_loc.reshape(-1)
    return step.out_cache_loc[:, k % step.tokens_per_req].reshape(-1)


class DecodeStepBase(Workload):
    """What every workload of a paged decode step reads (TRT-LLM MHA, the KV read
    tables, FlashAttention): the step's refreshes, the request rows, each
    refresh's ``seq_lens``. Subclasses set ``backend``."""

    def __init__(self, ctx: BenchContext):
        super().__init__(ctx)
        self.plan = step_refreshes(ctx)
        self.refreshes = tuple(r.name for r in self.plan)
        self.ps = ctx.preset.page_size
        self.width = ctx.preset.max_pages
        self.swa = ctx.trace.full_to_swa is not None
        n = ctx.max_bs
        self.req_pool_indices = torch.zeros(n, dtype=torch.int32, device=self.device)
        self.lens = [torch.full((n,), PAD_SEQ_LEN, dtype=torch.int32, device=self.device) for _ in self.plan]

    def _fill_common(self, step: Step, bucket: int) -> None:
        self._h2d(self.req_pool_indices, step.req_pool_indices, bucket, 0)

    def _decode_shapes(self, r: Refresh, n: int) -> dict:
        """The outputs every decode-metadata refresh writes: lengths, their running sums, the page table."""
        return {f"{r.name}.cache_seqlens": ((n,), torch.int32), f"{r.name}.cu_seqlens_k": ((n + 1,), torch.int32),
                f"{r.name}.page_table": ((n, self.width), torch.int32)}

    def _max_seq_pages(self, step: Optional[Step], r: Refresh) -> int:
        """Table columns refresh ``r`` passes: eager, from the host max of its lengths (what
        the backend reads from ``seq_lens_cpu``); captured (``step`` None), the full width."""
        if step is None:
            return self.width
        longest = int(refresh_lens(step, r).max()) + r.seqlen_offset
        return min(self.width, -(-max(longest, 0) // self.ps))

    def _live_cols(self, step: Step, r: Refresh, rows: int) -> np.ndarray:
        """Page-table columns refresh ``r`` reads in each of ``rows`` rows (its live prefix)."""
        return live_pages(refresh_kv_lens(step, r, rows), self.ps, self.width)

    def _read_table_bytes(self, pages: np.ndarray, rows: int, written: int, translated: bool,
                          row_inputs: int = 2) -> int:
        """Least bytes building a table from ``req_to_token`` moves: ``row_inputs`` int32
        per row (``req_pool_indices``, lengths, ...), the page-start slots of ``pages``
        pages per row, with a translation (SWA mapping, ``v2p``) one scattered entry
        per page, and ``written`` int32 out."""
        total = row_inputs * rows * 4 + int(gather_sectors(pages, self.ps).sum()) * SECTOR + written * 4
        if translated:
            total += int(pages.sum()) * SECTOR
        return total


class DraftsInOneLaunch:
    """For a :class:`DecodeStepBase` workload whose S - 1 draft-decode refreshes
    are one multi-set launch (the plugin's multi-step hooks): which refreshes
    those are, the step's refresh names, and the bytes (the widest draft step's
    reads paid once, every set's writes). Listed before the workload class, so
    the plan exists when it groups the drafts."""

    def __init__(self, ctx: BenchContext):
        super().__init__(ctx)
        self._group_drafts()

    def _group_drafts(self) -> None:
        self.drafts = [k for k, r in enumerate(self.plan) if r.name.startswith("draft_decode")]
        rest = tuple(r.name for k, r in enumerate(self.plan) if k not in self.drafts)
        self.refreshes = ((f"draft_decode_0..{len(self.drafts) - 1}",) if self.drafts else ()) + rest

    def bytes_moved(self, step: Step, bucket: int, mode: str) -> int:
        widest = max(self.drafts, key=lambda k: self.plan[k].seqlen_offset) if self.drafts else None
        return sum(self._refresh_bytes(step, bucket, mode, r, reads=k not in self.drafts or k == widest)
                   for k, r in enumerate(self.plan))


class TrtllmMhaMetadata(DecodeStepBase):
    """``sgl_meta.update_trtllm_mha_graph_metadata`` vs its eager reference."""

    op = "update_trtllm_mha_graph_metadata"
    label = "mha metadata"
    backend = BACKEND_TRTLLM_MHA

    def __init__(self, ctx: BenchContext):
        super().__init__(ctx)
        n, dev = ctx.max_bs, self.device
        self.out_loc = [
            torch.zeros(n * r.tokens, dtype=torch.int64, device=dev) if self._has_swa_out(r) else None
            for r in self.plan
        ]
        shapes = {}
        for k, r in enumerate(self.plan):
            shapes.update(self._decode_shapes(r, n))
            if self.swa:
                shapes[f"{r.name}.swa_page_table"] = ((n, self.width), torch.int32)
            if self._has_swa_out(r):
                shapes[f"{r.name}.swa_out_cache_loc"] = ((n * r.tokens,), torch.int64)
            if r.q_mode != Q_MODE_NONE:
                shapes[f"{r.name}.cu_seqlens_q"] = ((n + 1,), torch.int32)
        self._make_outputs(shapes)

    def _has_swa_out(self, r: Refresh) -> bool:
        return self.swa and r.tokens > 0

    def fill(self, step: Step, bucket: int) -> None:
        self._fill_common(step, bucket)
        for k, r in enumerate(self.plan):
            self._h2d(self.lens[k], refresh_lens(step, r), bucket, PAD_SEQ_LEN)
            if self.out_loc[k] is not None:
                self._h2d(self.out_loc[k], refresh_slots(step, r, k), bucket * r.tokens, 0)

    def calls(self, impl: str, bs: int, step: Optional[Step]) -> list:
        fn = sgl_meta.update_trtllm_mha_graph_metadata if impl == "fused" else (
            reference.update_trtllm_mha_graph_metadata
        )
        mode = "graph" if step is None else "eager"
        out = self.out[(impl, mode)]
        trace = self.ctx.trace
        calls = []
        for k, r in enumerate(self.plan):
            kw = dict(
                req_pool_indices=self.req_pool_indices[:bs],
                seq_lens=self.lens[k][:bs],
                req_to_token=trace.req_to_token,
                cache_seqlens=out[f"{r.name}.cache_seqlens"][:bs],
                cu_seqlens_k=out[f"{r.name}.cu_seqlens_k"][: bs + 1],
                page_table=out[f"{r.name}.page_table"][:bs],
                bs=bs,
                seqlen_offset=r.seqlen_offset,
                max_seq_pages=self._max_seq_pages(step, r),
                page_size=self.ps,
                live_pages_only=step is None,
            )
            if self.swa:
                kw.update(swa_mapping=trace.full_to_swa, swa_page_table=out[f"{r.name}.swa_page_table"][:bs])
            if self._has_swa_out(r):
                n = bs * r.tokens
                kw.update(out_cache_loc=self.out_loc[k][:n], swa_out_cache_loc=out[f"{r.name}.swa_out_cache_loc"][:n])
            if r.q_mode != Q_MODE_NONE:
                kw.update(cu_seqlens_q=out[f"{r.name}.cu_seqlens_q"][: bs + 1], q_mode=r.q_mode, q_stride=r.q_stride)
            calls.append(functools.partial(fn, **kw))
        return calls

    def bytes_moved(self, step: Step, bucket: int, mode: str) -> int:
        return sum(self._refresh_bytes(step, bucket, mode, r) for r in self.plan)

    def _refresh_cols(self, step: Step, bucket: int, mode: str, r: Refresh) -> np.ndarray:
        """Page-table columns refresh ``r`` writes per row."""
        bs = step.bs if mode == "eager" else bucket
        if mode == "eager":
            return np.full(bs, self._max_seq_pages(step, r), dtype=np.int64)
        return self._live_cols(step, r, bs)

    def _refresh_bytes(self, step: Step, bucket: int, mode: str, r: Refresh, reads: bool = True) -> int:
        """Least bytes refresh ``r`` moves; ``reads=False``: its writes only (a
        set of a multi-set launch whose reads another set already paid)."""
        bs = step.bs if mode == "eager" else bucket
        cols = self._refresh_cols(step, bucket, mode, r)
        written = int(cols.sum()) * (2 if self.swa else 1)  # the page table row(s)
        total = bs * 4 + (bs + 1) * 4  # cache_seqlens, cu_seqlens_k
        total += self._read_table_bytes(cols, bs, written, self.swa) if reads else written * 4
        if self._has_swa_out(r):
            n = bs * r.tokens
            total += n * 8 + (n * 8 + n * SECTOR if reads else 0)  # swa_out_cache_loc; out_cache_loc, mapping
        if r.q_mode != Q_MODE_NONE:
            total += (bs + 1) * 4
        return total


class TrtllmMhaSpecOneLaunch(DraftsInOneLaunch, TrtllmMhaMetadata):
    """EAGLE's refreshes with the draft steps in one launch (docs/operators/trtllm_mha_metadata.md): the S - 1
    draft-decode refreshes of a step become one
    ``sgl_meta.update_trtllm_mha_graph_metadata_multi`` (what the
    ``sgl_meta.sglang`` hook records in SGLang's multi-step draft backend), the
    verify and draft-extend refreshes stay single calls. Next to the
    ``update_trtllm_mha_graph_metadata`` row (the same refreshes as S + 1 calls)
    it is the per-step before/after, host and device.

    As in SGLang, every draft step reads the step's one ``out_cache_loc`` (the
    first draft column here); each set has its own buffers. The reference is
    the multi op's eager reference (one single-set update per draft step).
    """

    op = "update_trtllm_mha_graph_metadata_multi"
    label = "mha EAGLE, drafts in 1 launch"
    needs_spec = True

    def calls(self, impl: str, bs: int, step: Optional[Step]) -> list:
        singles = super().calls(impl, bs, step)
        if not self.drafts:
            return singles
        sets = [singles[k].keywords for k in self.drafts]
        kw = dict(sets[0])
        for name in ("cache_seqlens", "cu_seqlens_k", "page_table", "swa_page_table", "swa_out_cache_loc"):
            if name in kw:
                kw[name] = [s[name] for s in sets]
        kw["seqlen_offset"] = [s["seqlen_offset"] for s in sets]
        kw["max_seq_pages"] = max(s["max_seq_pages"] for s in sets)  # one width for every set
        fn = sgl_meta.update_trtllm_mha_graph_metadata_multi if impl == "fused" else (
            reference.update_trtllm_mha_graph_metadata_multi
        )
        multi = functools.partial(fn, **kw)
        return [multi] + [c for k, c in enumerate(singles) if k not in self.drafts]

    def _max_seq_pages(self, step: Optional[Step], r: Refresh) -> int:
        if step is None or not r.name.startswith("draft_decode"):
            return super()._max_seq_pages(step, r)
        # every draft set shares the widest draft step's width
        widest = max((q for q in self.plan if q.name.startswith("draft_decode")), key=lambda q: q.seqlen_offset)
        return super()._max_seq_pages(step, widest)


class TrtllmMhaPageTable(DecodeStepBase):
    """``sgl_meta.build_trtllm_mha_page_table`` (sync-free builder) vs its reference.

    One build per refresh of the step, each from that refresh's device-side
    ``cache_seqlens``; the table is always the full static width (no host max
    needed: that is the point of the builder), eager and graph alike.
    """

    op = "build_trtllm_mha_page_table"
    label = "mha page table"
    backend = BACKEND_TRTLLM_MHA

    def __init__(self, ctx: BenchContext):
        super().__init__(ctx)
        n = ctx.max_bs
        shapes = {}
        for r in self.plan:
            shapes[f"{r.name}.page_table"] = ((n, self.width), torch.int32)
            if self.swa:
                shapes[f"{r.name}.swa_page_table"] = ((n, self.width), torch.int32)
        self._make_outputs(shapes)

    def fill(self, step: Step, bucket: int) -> None:
        self._fill_common(step, bucket)
        for k, r in enumerate(self.plan):
            # This op reads the refresh's cache_seqlens (offset already applied).
            lens = refresh_lens(step, r).astype(np.int64) + r.seqlen_offset
            self._h2d(self.lens[k], lens.astype(np.int32), bucket, PAD_SEQ_LEN + r.seqlen_offset)

    def calls(self, impl: str, bs: int, step: Optional[Step]) -> list:
        fn = getattr(sgl_meta if impl == "fused" else reference, self.op)
        out = self.out[(impl, "graph" if step is None else "eager")]
        trace = self.ctx.trace
        calls = []
        for k, r in enumerate(self.plan):
            kw = dict(
                req_to_token=trace.req_to_token,
                req_pool_indices=self.req_pool_indices[:bs],
                cache_seqlens=self.lens[k][:bs],
                page_table=out[f"{r.name}.page_table"][:bs],
                page_size=self.ps,
            )
            if self.swa:
                kw.update(swa_page_table=out[f"{r.name}.swa_page_table"][:bs], full_to_swa=trace.full_to_swa)
            calls.append(functools.partial(fn, **kw))
        return calls

    def bytes_moved(self, step: Step, bucket: int, mode: str) -> int:
        bs = step.bs if mode == "eager" else bucket
        tables = 2 if self.swa else 1
        total = 0
        for r in self.plan:
            cols = self._live_cols(step, r, bs)
            total += self._read_table_bytes(cols, bs, int(cols.sum()) * tables, self.swa)
        return total
