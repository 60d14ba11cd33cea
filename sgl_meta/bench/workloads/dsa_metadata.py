"""DSA backend (DeepSeek-V3.2) with MTP: the replay metadata generated into K graphs.

SGLang 0.5.23's multi-step MTP draft decode computes one set of DSA metadata per
replay (a Triton generator, ``fused_dsa_decode_metadata``, into staging
buffers) and copies it at the full static width into each of the K draft
backends' captured buffers (``fused_metadata_copy_multi``). Lines, per K in the
preset's ``mtp_sets``, all on the same trace and inputs:

* ``dsa gen K=k``: ``sgl_meta.fused_dsa_metadata`` writes all K sets directly,
  live prefixes only; its reference column is the eager path
  (:func:`sgl_meta.reference.fused_dsa_metadata`: full-width masked gathers).
* ``dsa gen+copy K=k``: the upstream way, a generator into staging, then the K
  full-width copies (``sgl_meta.fused_metadata_copy_multi`` stands in for
  upstream's JIT copy). The generator is pluggable (:func:`use_generator`):
  by default sgl_meta's drop-in (K = 1) on the fused side and the eager
  reference on the reference side; an upstream-kernel layer can slot in
  SGLang's Triton generator for either side. Both sides start from the same
  poisoned staging buffers, so whatever a generator leaves past the live
  prefix is copied identically; a generator that writes past it (upstream
  writes whole 128-column blocks) must be plugged into both sides for the
  per-step check to hold.
* ``dsa gen verify/extend``: the target-verify and draft-extend refreshes
  (K = 1, ``next_n`` = the draft tokens, static extend lengths as SGLang's
  draft-extend v2), fused vs eager.

Eager steps use ``bs`` = running requests and the host max length as the column
bound (what a server derives from ``seq_lens_cpu``); graph steps use the
bucket and the full width (``context_len`` tokens), as SGLang's graphs do.
The floor of every line is what the refresh must move: each live token read
once from ``req_to_token`` and written K times (page rows x sets), the real
table's entries written K times, and the small per-request arrays.
"""

from __future__ import annotations

import functools
from typing import Callable, Optional

import numpy as np
import torch

import sgl_meta
from sgl_meta import reference

from ..presets import BACKEND_DSA
from ..trace import Step
from .base import BenchContext, Workload

DECODE, TARGET_VERIFY, DRAFT_EXTEND = 0, 1, 2
PAD_SEQ_LEN = 1  # SGLang's seq_len_fill_value for padded graph rows

# The generator of the gen+copy lines, per side: upstream's decode signature
# (seq_lens, req_pool_indices, req_to_token, cache_seqlens, cu_seqlens_k,
# page_table_1, dsa_cache_seqlens, dsa_cu_seqlens_k, real_page_table, bs,
# max_len, dsa_index_topk, physical_page_size).
# The fused side's K copies take sgl_meta.fused_metadata_copy_multi's keywords.
GENERATOR = {
    "fused": lambda *a: sgl_meta.fused_dsa_decode_metadata(*a),
    "ref": lambda *a: reference.fused_dsa_decode_metadata(*a),
    "copy": lambda **kw: sgl_meta.fused_metadata_copy_multi(**kw),
    "label": "gen",
}


def use_generator(fused: Optional[Callable] = None, ref: Optional[Callable] = None,
                  label: Optional[str] = None, copy: Optional[Callable] = None) -> None:
    """Plug a generator (e.g. SGLang's Triton ``fused_dsa_decode_metadata``) into
    the gen+copy lines, and optionally the fused side's copy (e.g. upstream's JIT
    copy, behind ``fused_metadata_copy_multi``'s keywords); ``label`` names the
    generator in the table."""
    for key, value in (("fused", fused), ("ref", ref), ("label", label), ("copy", copy)):
        if value is not None:
            GENERATOR[key] = value


def _small_bytes(bs: int, rows: int, sets: int) -> int:
    """seq_lens + req_pool_indices read; cache, cu, dsa, dsa_cu (+ expanded) written per set."""
    return bs * 12 + sets * 4 * (2 * bs + 1 + 2 * rows + 1)


class _DsaGenBase(Workload):
    backend = BACKEND_DSA
    needs_spec = True
    op = "fused_dsa_metadata"
    sets = 1

    def __init__(self, ctx: BenchContext):
        super().__init__(ctx)
        p = ctx.preset
        self.ps, self.ctx_len, self.topk = p.page_size, p.context_len, p.dsa_topk
        self.real_cols = -(-self.ctx_len // self.ps)
        self.next_n = p.spec_draft_tokens
        n, dev = ctx.max_bs, self.device
        self.seq_lens = torch.full((n,), PAD_SEQ_LEN, dtype=torch.int32, device=dev)
        self.req_pool_indices = torch.zeros(n, dtype=torch.int64, device=dev)
        self.extend_seq_lens = torch.full((n,), self.next_n, dtype=torch.int32, device=dev)
        self._lens = np.zeros(0, dtype=np.int64)
        self._eager_cols = 0

    @classmethod
    def applies(cls, ctx: BenchContext) -> bool:
        return super().applies(ctx) and bool(ctx.preset.dsa_topk) and cls._wanted(ctx)

    @classmethod
    def _wanted(cls, ctx: BenchContext) -> bool:
        return cls.sets in ctx.preset.mtp_sets

    def _set_shapes(self, prefix: str, rows: int, expanded: bool = False) -> dict:
        n, i32 = self.ctx.max_bs, torch.int32
        shapes = {
            f"{prefix}cache_seqlens": ((n,), i32),
            f"{prefix}cu_seqlens_k": ((n + 1,), i32),
            f"{prefix}dsa_cache_seqlens": ((rows,), i32),
            f"{prefix}dsa_cu_seqlens_k": ((rows + 1,), i32),
            f"{prefix}page_table_1": ((rows, self.ctx_len), i32),
            f"{prefix}real_page_table": ((rows, self.real_cols), i32),
        }
        if expanded:
            shapes[f"{prefix}seqlens_expanded"] = ((rows,), i32)
        return shapes

    def _request_lens(self, step: Step) -> np.ndarray:
        return step.committed + 1  # MTP draft decode: the first draft token is in the cache

    def fill(self, step: Step, bucket: int) -> None:
        lens = self._request_lens(step).astype(np.int32)
        self._h2d(self.seq_lens, lens, bucket, PAD_SEQ_LEN)
        self._h2d(self.req_pool_indices, step.req_pool_indices.astype(np.int64), bucket, 0)
        self._lens = np.concatenate([lens.astype(np.int64), np.full(bucket - step.bs, PAD_SEQ_LEN)])
        self._eager_cols = int(lens.max()) + self.next_n if step.bs else 0

    def _cols(self, step: Optional[Step]) -> int:
        return self.ctx_len if step is None else min(self._eager_cols, self.ctx_len)

    def _inputs(self) -> dict:
        return dict(seq_lens=self.seq_lens, req_pool_indices=self.req_pool_indices,
                    req_to_token=self.ctx.trace.req_to_token)

    def _floor(self, lens: np.ndarray, bs: int, cols: int, rows_per_req: int, offset: int, sets: int) -> int:
        live = np.clip(lens[:bs] + offset, 0, cols)
        tokens = int(live.sum())
        pages = int((-(-live // self.ps)).sum())
        return 4 * tokens + sets * rows_per_req * 4 * (tokens + pages) + _small_bytes(bs, bs * rows_per_req, sets)

    def bytes_moved(self, step: Step, bucket: int, mode: str) -> int:
        bs = step.bs if mode == "eager" else bucket
        cols = self.ctx_len if mode == "graph" else self._eager_cols
        return self._floor(self._lens, bs, cols, 1, 0, self.sets)


class _DsaGenerate(_DsaGenBase):
    """``sgl_meta.fused_dsa_metadata`` into K sets vs the eager reference."""

    def __init__(self, ctx: BenchContext):
        super().__init__(ctx)
        self.refreshes = (f"draft_decode_x{self.sets}",)
        shapes = {}
        for k in range(self.sets):
            shapes.update(self._set_shapes(f"dst{k}.", ctx.max_bs))
        self._make_outputs(shapes)

    def calls(self, impl: str, bs: int, step: Optional[Step]) -> list:
        fn = sgl_meta.fused_dsa_metadata if impl == "fused" else reference.fused_dsa_metadata
        out = self.out[(impl, "graph" if step is None else "eager")]
        fields = ("cache_seqlens", "cu_seqlens_k", "dsa_cache_seqlens", "dsa_cu_seqlens_k", "page_table_1",
                  "real_page_table")
        lists = {f: [out[f"dst{k}.{f}"] for k in range(self.sets)] for f in fields}
        return [functools.partial(fn, **self._inputs(), **lists, forward_mode=DECODE, bs=bs,
                                  max_seqlen_k=self._cols(step), dsa_index_topk=self.topk, page_size=self.ps)]


class _DsaGenThenCopy(_DsaGenBase):
    """The upstream path: a generator into staging, then K full-width copies."""

    @classmethod
    def available(cls) -> bool:
        return super().available() and hasattr(sgl_meta, "fused_metadata_copy_multi")

    def __init__(self, ctx: BenchContext):
        super().__init__(ctx)
        self.refreshes = (f"draft_decode_x{self.sets}",)
        self.label = f"dsa {GENERATOR['label']}+copy K={self.sets}"
        shapes = self._set_shapes("stage.", ctx.max_bs)
        for k in range(self.sets):
            shapes.update(self._set_shapes(f"dst{k}.", ctx.max_bs))
        self._make_outputs(shapes)

    def calls(self, impl: str, bs: int, step: Optional[Step]) -> list:
        out = self.out[(impl, "graph" if step is None else "eager")]
        cols = self._cols(step)
        real_cols = -(-cols // self.ps)
        st = {k.split(".", 1)[1]: v for k, v in out.items() if k.startswith("stage.")}
        generate = functools.partial(
            GENERATOR[impl], self.seq_lens[:bs], self.req_pool_indices[:bs], self.ctx.trace.req_to_token,
            st["cache_seqlens"], st["cu_seqlens_k"], st["page_table_1"][:bs], st["dsa_cache_seqlens"],
            st["dsa_cu_seqlens_k"], st["real_page_table"][:bs], bs, cols, self.topk, self.ps,
        )
        copy = GENERATOR["copy"] if impl == "fused" else reference.fused_metadata_copy_multi

        def dst(f):
            return [out[f"dst{k}.{f}"] for k in range(self.sets)]

        copies = functools.partial(
            copy,
            cache_seqlens_src=st["cache_seqlens"][:bs], cu_seqlens_k_src=st["cu_seqlens_k"][: bs + 1],
            page_indices_src=st["page_table_1"][:bs, :cols], dsa_cache_seqlens_src=st["dsa_cache_seqlens"][:bs],
            dsa_cu_seqlens_k_src=st["dsa_cu_seqlens_k"][: bs + 1],
            real_page_table_src=st["real_page_table"][:bs, :real_cols],
            cache_seqlens_dst=dst("cache_seqlens"), cu_seqlens_k_dst=dst("cu_seqlens_k"),
            page_table_1_dst=dst("page_table_1"), dsa_cache_seqlens_dst=dst("dsa_cache_seqlens"),
            dsa_cu_seqlens_k_dst=dst("dsa_cu_seqlens_k"), real_page_table_dst=dst("real_page_table"),
            bs=bs, max_len=cols, seqlens_expanded_size=bs,
        )

        def both():
            generate()
            copies()

        return [both]


class DsaGenerateSpec(_DsaGenBase):
    """Target-verify and draft-extend generation (K = 1) vs the eager reference."""

    label = "dsa gen verify/extend"
    refreshes = ("target_verify", "draft_extend")

    @classmethod
    def _wanted(cls, ctx: BenchContext) -> bool:
        return bool(ctx.preset.mtp_sets)

    def __init__(self, ctx: BenchContext):
        super().__init__(ctx)
        rows = ctx.max_bs * self.next_n
        shapes = {}
        for name in self.refreshes:
            shapes.update(self._set_shapes(f"{name}.", rows, expanded=True))
        shapes["target_verify.paged_mqa_ctx_lens_2d"] = ((ctx.max_bs, self.next_n), torch.int32)
        self._make_outputs(shapes)
        self.seq_lens_extend = torch.full((ctx.max_bs,), PAD_SEQ_LEN, dtype=torch.int32, device=self.device)
        self._lens_extend = np.zeros(0, dtype=np.int64)

    def _request_lens(self, step: Step) -> np.ndarray:
        return step.committed  # target-verify adds next_n itself

    def fill(self, step: Step, bucket: int) -> None:
        super().fill(step, bucket)
        # Draft-extend runs after acceptance: the committed + accepted lengths.
        lens = (step.committed + step.accept_lens).astype(np.int32)
        self._h2d(self.seq_lens_extend, lens, bucket, PAD_SEQ_LEN)
        self._lens_extend = np.concatenate([lens.astype(np.int64), np.full(bucket - step.bs, PAD_SEQ_LEN)])

    def calls(self, impl: str, bs: int, step: Optional[Step]) -> list:
        fn = sgl_meta.fused_dsa_metadata if impl == "fused" else reference.fused_dsa_metadata
        out = self.out[(impl, "graph" if step is None else "eager")]
        calls = []
        for name, mode in (("target_verify", TARGET_VERIFY), ("draft_extend", DRAFT_EXTEND)):
            fields = ("cache_seqlens", "cu_seqlens_k", "seqlens_expanded", "dsa_cache_seqlens", "dsa_cu_seqlens_k",
                      "page_table_1", "real_page_table")
            lists = {f: [out[f"{name}.{f}"]] for f in fields}
            extra = dict(next_n=self.next_n)
            if mode == TARGET_VERIFY:
                lists["paged_mqa_ctx_lens_2d"] = [out["target_verify.paged_mqa_ctx_lens_2d"]]
            inputs = self._inputs()
            if mode == DRAFT_EXTEND:
                inputs["seq_lens"] = self.seq_lens_extend
                extra = dict(extend_seq_lens=self.extend_seq_lens, total_len=bs * self.next_n,
                             static_extend_len=True)
            calls.append(functools.partial(fn, **inputs, **lists, **extra, forward_mode=mode, bs=bs,
                                           max_seqlen_k=self._cols(step), dsa_index_topk=self.topk,
                                           page_size=self.ps))
        return calls

    def bytes_moved(self, step: Step, bucket: int, mode: str) -> int:
        bs = step.bs if mode == "eager" else bucket
        cols = self.ctx_len if mode == "graph" else self._eager_cols
        verify = self._floor(self._lens, bs, cols, self.next_n, self.next_n, 1)  # rows see seq + next_n
        return verify + self._floor(self._lens_extend, bs, cols, self.next_n, 0, 1)


def _per_k(base: type, kind: str, k: int) -> type:
    label = f"dsa gen K={k}" if kind == "gen" else f"dsa gen+copy K={k}"
    return type(f"{base.__name__.lstrip('_')}{k}", (base,), dict(sets=k, label=label))


MTP_SETS = (1, 2, 3, 5)
WORKLOADS = (
    *(_per_k(_DsaGenerate, "gen", k) for k in MTP_SETS),
    *(_per_k(_DsaGenThenCopy, "copy", k) for k in MTP_SETS),
    DsaGenerateSpec,
)
