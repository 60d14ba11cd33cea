"""DSA backend workloads (DeepSeek-V3.2): metadata copies into graph buffers.

The DSA backend computes a step's metadata once (the "source" set) and copies it
into the static buffers of the graph(s) it replays:

* ``fused_metadata_copy``: plain decode (one copy, ``forward_mode`` 0), or
  with MTP the target-verify (mode 1) and draft-extend (mode 2) copies, whose
  rows are ``bs * num_draft_tokens`` (one page-table row per query token);
* ``fused_metadata_copy_multi``: MTP draft decode, one source into the
  K = 3 draft-step backends' buffers (speculative decoding only).
Each is timed against its eager reference in :mod:`sgl_meta.reference` (the
sequence of ``.copy_()`` calls the fused op replaces).

Sources are built the way the backend builds them: ``page_indices`` is the
token-level ``req_to_token`` row (``page_table_1``, width = the step's longest
sequence), ``real_page_table`` its page-level view (every ``page_size``-th
slot // ``page_size``), DSA lengths are ``min(seq_len, top-k)``. The FlashMLA
scheduler metadata (int32 ``[66, 8]``) and ``num_splits`` have the real shapes
but synthetic contents (FlashMLA is not needed to copy them).

Eager steps copy ``max_len`` = the host max length; a graph has to copy the
full static width (``context_len`` tokens), so graph rows cost more bytes.
"""

from __future__ import annotations

import functools
from typing import Optional

import numpy as np
import torch

import sgl_meta
from sgl_meta import reference

from ..presets import BACKEND_DSA
from ..trace import Step
from .base import BenchContext, Workload

DECODE, TARGET_VERIFY, DRAFT_EXTEND = 0, 1, 2
PAD_SEQ_LEN = 1
FIELDS = (
    "cache_seqlens",
    "cu_seqlens_k",
    "page_table_1",
    "dsa_cache_seqlens",
    "seqlens_expanded",
    "dsa_cu_seqlens_k",
    "real_page_table",
    "flashmla_num_splits",
    "flashmla_metadata",
)


class _DsaBase(Workload):
    backend = BACKEND_DSA
    q = 1  # page-table rows (query tokens) per request
    modes_: tuple = ()  # forward_mode per refresh

    def __init__(self, ctx: BenchContext):
        super().__init__(ctx)
        p = ctx.preset
        if not p.dsa_topk:
            raise ValueError(f"preset {p.name} has no DSA top-k")
        self.ps, self.ctx_len, self.width_pages, self.topk = p.page_size, p.context_len, p.max_pages, p.dsa_topk
        self.sched_shape = tuple(p.flashmla_sched_shape)
        n, rows, dev = ctx.max_bs, ctx.max_bs * self.q, self.device
        i32 = dict(dtype=torch.int32, device=dev)
        self.src = dict(
            cache_seqlens=torch.zeros(n, **i32),
            cu_seqlens_k=torch.zeros(n + 1, **i32),
            page_indices=torch.zeros(rows, self.ctx_len, **i32),
            dsa_cache_seqlens=torch.zeros(rows, **i32),
            seqlens_expanded=torch.zeros(rows, **i32) if self.q > 1 else None,
            dsa_cu_seqlens_k=torch.zeros(rows + 1, **i32),
            real_page_table=torch.zeros(rows, self.width_pages, **i32),
            flashmla_num_splits=torch.zeros(rows + 1, **i32),
            flashmla_metadata=torch.zeros(self.sched_shape, **i32),
        )

    def _dst_shapes(self) -> dict:
        n, rows = self.ctx.max_bs, self.ctx.max_bs * self.q
        i32 = torch.int32
        shapes = dict(
            cache_seqlens=((n,), i32),
            cu_seqlens_k=((n + 1,), i32),
            page_table_1=((rows, self.ctx_len), i32),
            dsa_cache_seqlens=((rows,), i32),
            seqlens_expanded=((rows,), i32),
            dsa_cu_seqlens_k=((rows + 1,), i32),
            real_page_table=((rows, self.width_pages), i32),
            flashmla_num_splits=((rows + 1,), i32),
            flashmla_metadata=(self.sched_shape, i32),
        )
        if self.q == 1:
            del shapes["seqlens_expanded"]
        return shapes

    # -- sources -----------------------------------------------------------

    def _request_lens(self, step: Step) -> np.ndarray:
        """KV length of each request as this workload's refreshes see it."""
        raise NotImplementedError

    def fill(self, step: Step, bucket: int) -> None:
        lens = np.full(bucket, PAD_SEQ_LEN, dtype=np.int64)
        lens[: step.bs] = self._request_lens(step)
        q = self.q
        if q == 1:
            cache, expanded = lens, lens
        else:  # lens are committed lengths; query token j sees lens + j + 1
            cache = lens + q
            expanded = (lens[:, None] + np.arange(1, q + 1)).reshape(-1)
        dsa = np.minimum(expanded, self.topk)
        rows = bucket * q
        s = self.src
        self._h2d(s["cache_seqlens"], cache.astype(np.int32), bucket, 0)
        self._h2d(s["cu_seqlens_k"], _cumsum0(cache), bucket + 1, 0)
        self._h2d(s["dsa_cache_seqlens"], dsa.astype(np.int32), rows, 0)
        self._h2d(s["dsa_cu_seqlens_k"], _cumsum0(dsa), rows + 1, 0)
        if s["seqlens_expanded"] is not None:
            self._h2d(s["seqlens_expanded"], expanded.astype(np.int32), rows, 0)
        # Synthetic FlashMLA outputs: right shapes, contents that change every step.
        self._h2d(s["flashmla_num_splits"], _cumsum0(1 + (dsa - 1) // 1024), rows + 1, 0)
        meta = (step.index * 1_000_003 + np.arange(int(np.prod(self.sched_shape)))) % (2**31 - 1)
        s["flashmla_metadata"].view(-1).copy_(torch.from_numpy(meta.astype(np.int32)))
        # page_table_1 rows: the request's req_to_token row up to its longest length.
        rpi = np.zeros(bucket, dtype=np.int64)
        rpi[: step.bs] = step.req_pool_indices
        cols = int(cache.max())
        idx = torch.from_numpy(np.repeat(rpi, q)).to(self.device)
        r2t = self.ctx.trace.req_to_token
        s["page_indices"][:rows, :cols].copy_(r2t[:, :cols].index_select(0, idx))
        pages = -(-cols // self.ps)
        s["real_page_table"][:rows, :pages].copy_(
            torch.floor_divide(s["page_indices"][:rows, : cols : self.ps], self.ps)
        )
        self._eager_cols = int(cache[: step.bs].max()) if step.bs else 0

    def _src_args(self, bs: int, cols: int, expanded: bool) -> dict:
        rows = bs * self.q
        s = self.src
        return dict(
            cache_seqlens_src=s["cache_seqlens"][:bs],
            cu_seqlens_k_src=s["cu_seqlens_k"][: bs + 1],
            page_indices_src=s["page_indices"][:rows, :cols],
            dsa_cache_seqlens_src=s["dsa_cache_seqlens"][:rows],
            seqlens_expanded_src=s["seqlens_expanded"][:rows] if expanded else None,
            dsa_cu_seqlens_k_src=s["dsa_cu_seqlens_k"][: rows + 1],
            real_page_table_src=s["real_page_table"][:rows, : -(-cols // self.ps)],
            flashmla_num_splits_src=s["flashmla_num_splits"][: rows + 1],
            flashmla_metadata_src=s["flashmla_metadata"],
        )

    def _dst_args(self, out: dict, prefix: str, suffix: str, bs: int, expanded: bool) -> dict:
        rows = bs * self.q
        args = dict(
            cache_seqlens=out[f"{prefix}cache_seqlens"][:bs],
            cu_seqlens_k=out[f"{prefix}cu_seqlens_k"][: bs + 1],
            page_table_1=out[f"{prefix}page_table_1"][:rows],
            dsa_cache_seqlens=out[f"{prefix}dsa_cache_seqlens"][:rows],
            dsa_cu_seqlens_k=out[f"{prefix}dsa_cu_seqlens_k"][: rows + 1],
            real_page_table=out[f"{prefix}real_page_table"][:rows],
            flashmla_num_splits=out[f"{prefix}flashmla_num_splits"][: rows + 1],
            flashmla_metadata=out[f"{prefix}flashmla_metadata"],
        )
        if expanded is not None:
            args["seqlens_expanded"] = out[f"{prefix}seqlens_expanded"][:rows] if expanded else None
        return {f"{k}_dst{suffix}": v for k, v in args.items()}

    def _cols(self, step: Optional[Step]) -> int:
        return self.ctx_len if step is None else self._eager_cols

    def _copy_bytes(self, bs: int, cols: int, expanded: bool) -> int:
        """Bytes of one destination set's copied regions (each read once, written once)."""
        rows = bs * self.q
        elems = bs + bs + rows * cols + rows + rows + rows * -(-cols // self.ps) + rows + 1
        elems += int(np.prod(self.sched_shape)) + (rows if expanded else 0)
        return elems * 4


class DsaMetadataCopy(_DsaBase):
    """``sgl_meta.fused_metadata_copy`` vs the eager ``.copy_()`` sequence."""

    op = "fused_metadata_copy"
    label = "dsa copy"

    def __init__(self, ctx: BenchContext):
        if ctx.spec:
            self.q = ctx.preset.spec_draft_tokens
            self.modes_ = (TARGET_VERIFY, DRAFT_EXTEND)
            self.refreshes = ("target_verify", "draft_extend")
        else:
            self.modes_ = (DECODE,)
            self.refreshes = ("decode",)
        super().__init__(ctx)
        shapes = {}
        for name, m in zip(self.refreshes, self.modes_):
            for field, spec in self._dst_shapes().items():
                if field == "seqlens_expanded" and m == DECODE:
                    continue
                shapes[f"{name}.{field}"] = spec
        self._make_outputs(shapes)

    def _request_lens(self, step: Step) -> np.ndarray:
        # Verify/extend: committed lengths (query tokens add 1..D); decode: seq_lens.
        return step.committed if self.q > 1 else step.seq_lens

    def calls(self, impl: str, bs: int, step: Optional[Step]) -> list:
        fn = getattr(sgl_meta if impl == "fused" else reference, self.op)
        out = self.out[(impl, "graph" if step is None else "eager")]
        cols = self._cols(step)
        calls = []
        for name, m in zip(self.refreshes, self.modes_):
            expanded = m != DECODE
            kw = self._src_args(bs, cols, expanded)
            kw.update(self._dst_args(out, f"{name}.", "", bs, expanded))
            kw.update(
                forward_mode=m,
                bs=bs,
                max_len=cols,
                max_seqlen_k=cols,
                seqlens_expanded_size=bs * self.q,
            )
            calls.append(functools.partial(fn, **kw))
        return calls

    def bytes_moved(self, step: Step, bucket: int, mode: str) -> int:
        bs = step.bs if mode == "eager" else bucket
        cols = self.ctx_len if mode == "graph" else self._eager_cols
        return sum(2 * self._copy_bytes(bs, cols, m != DECODE) for m in self.modes_)


class DsaMetadataCopyMulti(_DsaBase):
    """``sgl_meta.fused_metadata_copy_multi`` (K = 3 draft-decode backends)."""

    op = "fused_metadata_copy_multi"
    label = "dsa copy multi"
    needs_spec = True
    K = 3
    refreshes = ("draft_decode_x3",)

    def __init__(self, ctx: BenchContext):
        super().__init__(ctx)
        shapes = {}
        for k in range(self.K):
            for field, spec in self._dst_shapes().items():
                shapes[f"dst{k}.{field}"] = spec
        self._make_outputs(shapes)

    def _request_lens(self, step: Step) -> np.ndarray:
        return step.committed + 1  # the first draft token is in the cache

    def calls(self, impl: str, bs: int, step: Optional[Step]) -> list:
        fn = getattr(sgl_meta if impl == "fused" else reference, self.op)
        out = self.out[(impl, "graph" if step is None else "eager")]
        cols = self._cols(step)
        kw = self._src_args(bs, cols, expanded=False)
        del kw["seqlens_expanded_src"]
        sets = [self._dst_args(out, f"dst{k}.", "", bs, expanded=None) for k in range(self.K)]
        kw.update({name: [d[name] for d in sets] for name in sets[0]})
        kw.update(bs=bs, max_len=cols, seqlens_expanded_size=bs)
        return [functools.partial(fn, **kw)]

    def bytes_moved(self, step: Step, bucket: int, mode: str) -> int:
        bs = step.bs if mode == "eager" else bucket
        cols = self.ctx_len if mode == "graph" else self._eager_cols
        return (1 + self.K) * self._copy_bytes(bs, cols, False)  # one read, K writes


def _cumsum0(x: np.ndarray) -> np.ndarray:
    """``[0, cumsum(x)]`` as int32."""
    return np.concatenate([[0], np.cumsum(x)]).astype(np.int32)
