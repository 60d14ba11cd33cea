"""KV read tables of a unified memory pool (presets with ``unified_pool``).

SGLang 0.5.23's unified pool keeps virtual ids in ``req_to_token``; every
reader translates them through ``v2p`` (``KVIndexTranslator``). Per decode
step, for each metadata refresh of the TRT-LLM MHA plan (``trtllm_mha_metadata.py``:
decode, or the speculative draft / verify / draft-extend refreshes) and each
sub-pool (full attention with ``v2p``, sliding window with ``swa_v2p``):

* ``KvReadPageTable`` builds the refresh's page table (``copy_page_table`` ->
  ``build_kv_read_table``): live prefix ``ceil((seq_lens + seqlen_offset) /
  page_size)``, the verify reading its draft tokens back through
  ``seq_len_delta``;
* ``KvReadTokenStream`` builds the FlashInfer-style CSR stream
  (``pack_read_stream`` -> ``build_kv_read_table_packed``): full attention
  over ``[0, seq_len + offset)``, the sliding window over its last ``window``
  tokens (``kv_start_idx``).

Between steps the trace compacts the pool (pages move: ``v2p`` changes,
``req_to_token`` does not), so every replay must translate again.

Eager steps call with what SGLang's eager path knows on the host: the
``seq_lens_cpu`` max sizes the table (``max_pages``) and ``zero_tail`` fills
the rest with the sink, as ``build_iteration_table`` does. Graph steps pass
the bucket, the full width and no ``zero_tail`` (live prefix only: readers
bound themselves by the lengths), work bounded by the device-side lengths.

Each workload also times the bare gather of the same pages
(``bare_gather.py``), the ceiling, and with ``--upstream`` SGLang's own Triton
builders (loaded by ``bench/upstream/loader.py``) through upstream's exact
signatures, on the same inputs in the same run; both are checked against the
reference in graph mode.
"""

from __future__ import annotations

import functools
from typing import Optional

import numpy as np
import torch

import sgl_meta
from sgl_meta import reference

from .. import bare_gather
from ..presets import BACKEND_TRTLLM_MHA
from ..trace import Step
from .base import IMPLS, BenchContext
from .trtllm_mha_metadata import PAD_SEQ_LEN, DecodeStepBase, refresh_kv_lens, refresh_lens


_UPSTREAM: dict = {}


def upstream_kernels(spec: str, device: torch.device) -> tuple:
    """(SGLang's loaded Triton read-table builders, or None; why not), once per spec."""
    if device.type != "cuda":
        return None, "no GPU"
    if spec not in _UPSTREAM:
        from ..upstream import loader

        probe = loader.probe(loader.locate(spec), gpu=True)
        kernels = loader.load(probe, families=(loader.TRITON,)) if probe.runnable(loader.TRITON) else None
        if kernels is None or not (kernels.has("build_kv_read_table") and kernels.has("build_kv_read_table_packed")):
            errors = [] if kernels is None else kernels.errors.get(loader.TRITON, [])
            _UPSTREAM[spec] = (None, "; ".join(probe.missing.get(loader.TRITON, []) + errors) or "not loaded")
        else:
            _UPSTREAM[spec] = (kernels, "")
    return _UPSTREAM[spec]


class _KvReadBase(DecodeStepBase):
    backend = BACKEND_TRTLLM_MHA
    baselines = ("gather",)
    checked_baselines = ("gather",)

    @classmethod
    def applies(cls, ctx: BenchContext) -> bool:
        return ctx.preset.unified_pool and super().applies(ctx)

    def __init__(self, ctx: BenchContext):
        super().__init__(ctx)
        self.kinds = ("full", "swa") if ctx.trace.swa_v2p is not None else ("full",)
        self.refreshes = tuple(f"{r.name}.{k}" for r in self.plan for k in self.kinds)
        self.notes = []
        usable, why = bare_gather.available(ctx.device, self.ps)
        if not ctx.graphs:
            # On CPU the bare gather is the eager reference again: no ceiling to compare with.
            self.baselines = self.checked_baselines = ()
            self.notes.append("the bare gather (the ceiling the GPU kernel is held to) runs on CUDA only")
        elif not usable:
            self.baselines = self.checked_baselines = ()
            self.notes.append(f"bare gather baseline not run: {why}")
        elif ctx.device.type != "cuda":
            self.notes.append("'gather' runs the eager reference on CPU (a self-test of the plumbing, "
                              "not a ceiling); on CUDA it is the bare NVRTC gather kernel")
        self.upstream = None
        if ctx.upstream:
            self.upstream, why = upstream_kernels(ctx.upstream, ctx.device)
            if self.upstream is None:
                self.notes.append(f"upstream not run: {why}")
            else:
                self.baselines = tuple(self.baselines) + ("upstream",)
                self.checked_baselines = tuple(self.checked_baselines) + ("upstream",)

    def _v2p(self, kind: str) -> torch.Tensor:
        return self.ctx.trace.v2p if kind == "full" else self.ctx.trace.swa_v2p

    def _fn(self, impl: str):
        """The callable of one implementation (same keyword arguments)."""
        if impl in IMPLS:
            return getattr(sgl_meta if impl == "fused" else reference, self.op)
        return self._baseline_fn(impl)

    def _baseline_fn(self, impl: str):
        """``"gather"`` or ``"upstream"``, taking the keywords ours takes."""
        raise NotImplementedError


class KvReadPageTable(_KvReadBase):
    """``sgl_meta.kv_read_page_table`` (drop-in: ``build_kv_read_table``) vs its reference."""

    op = "kv_read_page_table"
    label = "kv read table"

    def __init__(self, ctx: BenchContext):
        super().__init__(ctx)
        n = ctx.max_bs
        self._make_outputs({name: ((n, self.width), torch.int32) for name in self.refreshes})

    def _baseline_fn(self, impl: str):
        if impl == "gather":
            return lambda zero_tail, **kw: bare_gather.page_table(**kw)
        return self.upstream.build_kv_read_table  # the call keywords are upstream's build_kv_read_table's

    def fill(self, step: Step, bucket: int) -> None:
        self._fill_common(step, bucket)
        for k, r in enumerate(self.plan):
            self._h2d(self.lens[k], refresh_lens(step, r), bucket, PAD_SEQ_LEN)

    def _eager_pages(self, step: Step, r) -> int:
        """The host-known width SGLang's eager build uses (seq_lens_cpu max)."""
        longest = int(refresh_lens(step, r).max()) + r.seqlen_offset
        return min(self.width, max(-(-longest // self.ps), 1))

    def calls(self, impl: str, bs: int, step: Optional[Step]) -> list:
        fn = self._fn(impl)
        out = self.out[(impl, "graph" if step is None else "eager")]
        trace = self.ctx.trace
        calls = []
        for k, r in enumerate(self.plan):
            for kind in self.kinds:
                kw = dict(
                    req_to_token=trace.req_to_token,
                    req_pool_indices=self.req_pool_indices[:bs],
                    seq_lens=self.lens[k][:bs],
                    out=out[f"{r.name}.{kind}"][:bs],
                    page_size=self.ps,
                    max_pages=self.width if step is None else self._eager_pages(step, r),
                    v2p=self._v2p(kind),
                    seq_len_delta=r.seqlen_offset,
                    zero_tail=step is not None,
                )
                calls.append(functools.partial(fn, **kw))
        return calls

    def bytes_moved(self, step: Step, bucket: int, mode: str) -> int:
        bs = step.bs if mode == "eager" else bucket
        total = 0
        for r in self.plan:
            cols = self._live_cols(step, r, bs)
            written = bs * self._eager_pages(step, r) if mode == "eager" else int(cols.sum())
            total += len(self.kinds) * self._read_table_bytes(cols, bs, written, translated=True)
        return total


class KvReadTokenStream(_KvReadBase):
    """``sgl_meta.kv_read_token_stream`` (drop-in: ``build_kv_read_table_packed``) vs its reference."""

    op = "kv_read_token_stream"
    label = "kv read stream"

    def __init__(self, ctx: BenchContext):
        super().__init__(ctx)
        p, n, dev = ctx.preset, ctx.max_bs, self.device
        self.window = p.swa_window
        extra = (p.spec_draft_tokens if ctx.spec else 1) + PAD_SEQ_LEN + 1
        # Capacities a server sizes once: the pool (and the batch's longest
        # possible rows) bound the running tokens.
        cap = {"full": min(p.kv_pool_tokens, n * p.context_len) + n * extra,
               "swa": n * ((self.window or 0) + extra)}
        i32 = dict(dtype=torch.int32, device=dev)
        # Per refresh and kind: the window lengths, starts (SWA) and CSR row starts.
        self.win_lens = {key: torch.full((n,), PAD_SEQ_LEN, **i32) for key in self.refreshes}
        self.starts = {key: torch.zeros(n, **i32) for key in self.refreshes if key.endswith(".swa")}
        # CSR row starts consistent with those placeholder lengths: the graphs
        # are captured (one warm-up call each) before the first fill().
        self.indptr = {key: torch.arange(n + 1, **i32) * PAD_SEQ_LEN for key in self.refreshes}
        self._make_outputs({key: ((cap[key.rsplit(".", 1)[1]],), torch.int32) for key in self.refreshes})

    def _baseline_fn(self, impl: str):
        if impl == "gather":
            return bare_gather.token_stream
        up = self.upstream.build_kv_read_table_packed
        return lambda seq_len_delta, **kw: up(**kw, max_tokens=kw["out"].numel())

    def _windows(self, step: Step, r, bucket: int, kind: str) -> tuple:
        """(tokens, starts) per row of one stream: full attention reads
        [0, seq_len + offset); the sliding window its last `window` tokens."""
        total = refresh_kv_lens(step, r, bucket)
        if kind == "full":
            return total, np.zeros_like(total)
        tokens = np.minimum(total, self.window)
        return tokens, total - tokens

    def fill(self, step: Step, bucket: int) -> None:
        self._fill_common(step, bucket)
        for r in self.plan:
            for kind in self.kinds:
                key = f"{r.name}.{kind}"
                tokens, starts = self._windows(step, r, bucket, kind)
                # Each row's tokens, the refresh's offset included (upstream's
                # packed builder has no seq_len_delta); the window's starts.
                self._h2d(self.win_lens[key], tokens.astype(np.int32), bucket, PAD_SEQ_LEN)
                if kind == "swa":
                    self._h2d(self.starts[key], starts.astype(np.int32), bucket, 0)
                indptr = np.concatenate([[0], np.cumsum(tokens)]).astype(np.int32)
                self._h2d(self.indptr[key], indptr, bucket + 1, indptr[-1])

    def calls(self, impl: str, bs: int, step: Optional[Step]) -> list:
        fn = self._fn(impl)
        out = self.out[(impl, "graph" if step is None else "eager")]
        calls = []
        for r in self.plan:
            for kind in self.kinds:
                key = f"{r.name}.{kind}"
                kw = dict(
                    req_to_token=self.ctx.trace.req_to_token,
                    req_pool_indices=self.req_pool_indices[:bs],
                    seq_lens=self.win_lens[key][:bs],
                    indptr=self.indptr[key][: bs + 1],
                    out=out[key],
                    page_size=self.ps,
                    v2p=self._v2p(kind),
                    kv_start_idx=self.starts[key][:bs] if kind == "swa" else None,
                    seq_len_delta=0,
                )
                calls.append(functools.partial(fn, **kw))
        return calls

    def bytes_moved(self, step: Step, bucket: int, mode: str) -> int:
        bs = step.bs if mode == "eager" else bucket
        total = 0
        for r in self.plan:
            for kind in self.kinds:
                tokens, starts = self._windows(step, r, bs, kind)
                pages = np.where(tokens > 0, (starts + tokens - 1) // self.ps - starts // self.ps + 1, 0)
                # row inputs: req_pool_indices, seq_lens, indptr (+ starts)
                total += self._read_table_bytes(pages, bs, int(tokens.sum()), translated=True, row_inputs=4)
        return total
