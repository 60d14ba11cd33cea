"""Cold start: the first call over SGLang's CUDA-graph bucket list, empty caches.

A server captures one graph per bucket at start, so every kernel variant its
launches specialise on (upstream's Triton kernels compile per power-of-two block,
per batch size where it is a ``constexpr`` as in the DSA generators, per integer
that is 1 or a multiple of 16; its JIT copy per forward mode) is built then.
Per family, with ``TRITON_CACHE_DIR`` and ``SGLANG_JIT_CACHE_DIR`` pointing at
new empty directories, the upstream kernel files are executed afresh (new
in-memory caches too) and each bucket's calls of one server step run once;
then the same again, warm. Ours runs the same calls. The one-off Triton driver
setup of the process is done before (``_triton_warmup``); ``tvm_ffi``'s import is
timed separately. The rows afterwards reuse these instances, so nothing
compiles twice.
"""

from __future__ import annotations

import contextlib
import functools
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

import sgl_meta

from . import loader, rows_dsa, rows_flash_attention_metadata, rows_kv, rows_kv_indices, rows_mha
from .fixtures import Context
from .measure import first_call_seconds

CACHE_VARS = ("TRITON_CACHE_DIR", "SGLANG_JIT_CACHE_DIR")


@contextlib.contextmanager
def fresh_caches(root: Path):
    """Point Triton's and SGLang's JIT caches at new empty directories."""
    d = Path(tempfile.mkdtemp(prefix="cold-", dir=root))
    saved = {k: os.environ.get(k) for k in CACHE_VARS}
    os.environ["TRITON_CACHE_DIR"] = str(d / "triton")
    os.environ["SGLANG_JIT_CACHE_DIR"] = str(d / "sglang-jit")
    try:
        yield d
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@dataclass
class ColdSpec:
    """``calls(ctx, fns, impl, bucket)``: one server step's calls at ``bucket``;
    ``fns`` is the upstream ``Kernels`` or ``sgl_meta``; ``modules``: the loader
    keys whose fresh instances the rows then reuse."""

    name: str
    families: tuple
    modules: tuple
    ours: tuple
    upstream: tuple
    calls: Callable


# One EAGLE step of the gpt-oss preset (the trace replay's refresh plan):
# name, seqlen_offset, new tokens per request, strided cu_seqlens_q.
EAGLE_STEP = (("draft_decode_0", 1, 1, False), ("draft_decode_1", 2, 1, False),
              ("target_verify", 4, 4, False), ("draft_extend", 0, 0, True))


def _mha_update_calls(ctx: Context, fns, impl: str, b: int) -> list:
    f = rows_mha._fixture(ctx)
    o = f.out[impl]
    fn = fns.update_trtllm_mha_graph_metadata
    extra = dict(live_pages_only=True) if impl == "ours" else {}
    calls = []
    for _, offset, tokens, strided in EAGLE_STEP:
        kw = dict(
            req_pool_indices=f.req_pool_indices[:b], seq_lens=f.lens[:b], req_to_token=f.req_to_token,
            cache_seqlens=o["cache_seqlens"][:b], cu_seqlens_k=o["cu_seqlens_k"][: b + 1], page_table=o["page_table"][:b],
            bs=b, seqlen_offset=offset, max_seq_pages=f.width, page_size=f.ps,
            swa_mapping=f.swa_mapping, swa_page_table=o["swa_page_table"][:b], **extra,
        )
        if tokens:
            kw.update(out_cache_loc=f.out_cache_loc[: b * tokens], swa_out_cache_loc=o["swa_out_cache_loc"][: b * tokens])
        if strided:
            kw.update(cu_seqlens_q=o["cu_seqlens_q"][: b + 1], q_mode=2, q_stride=4)
        calls.append(functools.partial(fn, **kw))
    return calls


def _mha_page_table_calls(ctx: Context, fns, impl: str, b: int) -> list:
    f = rows_mha._fixture(ctx)
    o = f.out[impl]
    return [functools.partial(
        fns.build_trtllm_mha_page_table, req_to_token=f.req_to_token, req_pool_indices=f.req_pool_indices[:b],
        cache_seqlens=f.lens[:b], page_table=o["page_table"][:b], page_size=f.ps,
        swa_page_table=o["swa_page_table"][:b], full_to_swa=f.swa_mapping,
    )]


def _dsa_copy_calls(ctx: Context, fns, impl: str, b: int) -> list:
    f = rows_dsa._copy_fixture(ctx)
    calls = []
    for mode in (0, 1):
        n = b * (1 if mode == 0 else rows_dsa.NEXT_N)
        kw = dict(f.src_args(b, n, n, mode != 0), **f.dst_args(impl, 0, b, n, n, mode != 0),
                  forward_mode=mode, bs=b, max_len=rows_dsa.TOPK, max_seqlen_k=rows_dsa.TOPK, seqlens_expanded_size=n)
        calls.append(functools.partial(fns.fused_metadata_copy_cuda, **kw))
    src = f.src_args(b, b, b, False)
    del src["seqlens_expanded_src"]
    sets = {}
    for k in range(3):
        d = f.dst_args(impl, k, b, b, b, False)
        del d["seqlens_expanded_dst"]
        sets.update({f"{nm}{k}": v for nm, v in d.items()})
    calls.append(functools.partial(fns.fused_metadata_copy_multi_cuda, **src, **sets, bs=b,
                                   max_len=rows_dsa.TOPK, seqlens_expanded_size=b))
    return calls


class _GenStaging:
    """Decode and verify outputs at the largest bucket (cold start only)."""

    def __init__(self, ctx: Context):
        dev, n = ctx.device, ctx.max_bs
        rows = n * rows_dsa.NEXT_N
        e = functools.partial(torch.zeros, dtype=torch.int32, device=dev)
        self.t = dict(cache_seqlens=e(n), cu_seqlens_k=e(n + 1), page_table_1=e((rows, rows_dsa.CONTEXT)),
                      seqlens_expanded=e(rows), dsa_cache_seqlens=e(rows), dsa_cu_seqlens_k=e(rows + 1),
                      real_page_table=e((rows, rows_dsa.REAL_W)))


def _dsa_generate_calls(ctx: Context, fns, impl: str, b: int) -> list:
    f = rows_dsa._gen_fixture(ctx)
    s = ctx.fixture("dsa_gen_staging", _GenStaging).t
    common = dict(seq_lens=f.lens[:b], req_pool_indices=f.req_pool_indices[:b], req_to_token=f.req_to_token,
                  bs=b, dsa_index_topk=rows_dsa.TOPK, physical_page_size=rows_dsa.PAGE_SIZE)
    rows = b * rows_dsa.NEXT_N
    out = lambda r: dict(cache_seqlens=s["cache_seqlens"][:b], cu_seqlens_k=s["cu_seqlens_k"][: b + 1],  # noqa: E731
                         page_table_1=s["page_table_1"][:r], dsa_cache_seqlens=s["dsa_cache_seqlens"][:r],
                         dsa_cu_seqlens_k=s["dsa_cu_seqlens_k"][: r + 1], real_page_table=s["real_page_table"][:r])
    return [
        functools.partial(getattr(fns, rows_dsa.GEN[0]), **common, **out(b), max_len=rows_dsa.CONTEXT),
        functools.partial(getattr(fns, rows_dsa.GEN[1]), **common, **out(rows), seqlens_expanded=s["seqlens_expanded"][:rows],
                          max_seqlen_k=rows_dsa.CONTEXT, next_n=rows_dsa.NEXT_N),
    ]


def _kv_calls(ctx: Context, fns, impl: str, b: int) -> list:
    f = rows_kv._fixture(ctx)
    return [functools.partial(
        fns.build_kv_read_table, req_to_token=f.req_to_token, req_pool_indices=f.req_pool_indices[:b],
        seq_lens=f.lens[:b], v2p=f.v2p, page_size=rows_kv.PAGE_SIZE, max_pages=rows_kv.PAGES, out=f.out[impl]["table"],
    )]


def _draft_calls(ctx: Context, fns, impl: str, b: int) -> list:
    """The Triton backend's draft-decode launch over ``b`` requests (rows of 16 pages: the
    compile, not the walk, is what is timed); SGLang's kernel compiles per power-of-two bucket."""
    f = ctx.fixture("draft_kv_indices_cold", lambda c: rows_kv_indices.DraftFixture(
        c, bs=max(c.max_bs, 1), topk=1, out64=True, pages=16))
    if impl == "upstream":
        return [functools.partial(rows_kv_indices.draft_upstream, fns, f, f.out[impl], b, "triton")]
    return [functools.partial(rows_kv_indices.draft_ours, fns.build_draft_decode_kv_indices, f, f.out[impl], b)]


def _fa_calls(ctx: Context, fns, impl: str, b: int) -> list:
    """FlashAttentionBackend's refreshes of one EAGLE step (3 steps, 4 draft tokens): the
    two draft decodes (``seq_len_delta`` 1, 2), target verify (4), draft extend.
    SGLang's kernel compiles once per delta: a ``constexpr``."""
    fa = rows_flash_attention_metadata
    f = fa._fixture(ctx)
    o = f.out[impl]
    calls = fa._decode_calls(f, {impl: fns.normal_decode_set_metadata}, bs=b, deltas=[1, 2, 4], swa=False)[impl]
    calls.append(functools.partial(
        fns.draft_extend_set_metadata, o["cache_seqlens0"][:b], o["cu_seqlens_k0"][: b + 1], o["cu_seqlens_q"][: b + 1],
        o["page_table0"][:b], f.req_to_token, f.req_pool_indices[:b], f.lens[:b], f.extend[:b], fa.PAGE_SIZE))
    return calls


def _stream_calls(ctx: Context, fns, impl: str, b: int) -> list:
    """The Triton backend's decode refresh (FlashInfer's is its first half): ``kv_indptr``,
    SGLang's kv-indices gather, the split counts."""
    kv = rows_kv_indices
    f = ctx.fixture("kv_stream_cold", kv.ColdStreamFixture)
    if impl == "upstream":
        return [functools.partial(kv.upstream_stream, fns, f, f.out[impl], True, "decode", b)]
    return [functools.partial(kv.ours_stream, fns.build_kv_indices, f, f.out[impl], True, "decode", b)]


def _flashmla_calls(ctx: Context, fns, impl: str, b: int) -> list:
    f = rows_kv_indices._fixture(ctx)
    out = f.out[impl]["table"]
    if impl == "upstream":
        return [functools.partial(rows_kv_indices.flashmla_upstream, fns, f, out, b)]
    return [functools.partial(rows_kv_indices.flashmla_ours, fns.create_flashmla_kv_indices, f, out, b)]


COLD = (
    ColdSpec("TRT-LLM MHA update, EAGLE step (2 draft decodes, verify, draft extend; SWA)", (loader.TRITON,),
             ("trtllm_mha_graph_metadata",), (rows_mha.UPDATE,), (rows_mha.UPDATE,), _mha_update_calls),
    ColdSpec("TRT-LLM MHA page-table builder (SWA)", (loader.TRITON,), ("trtllm_mha_page_table",),
             (rows_mha.BUILDER,), (rows_mha.BUILDER,), _mha_page_table_calls),
    ColdSpec("DSA copy (decode, verify, multi K=3)", (loader.JIT,), ("fused_metadata_copy",),
             (rows_dsa.COPY, rows_dsa.COPY_MULTI), (rows_dsa.COPY, rows_dsa.COPY_MULTI), _dsa_copy_calls),
    ColdSpec("DSA generators (decode + verify)", (loader.TRITON,), ("dsa_metadata",),
             (rows_dsa.GEN[0], rows_dsa.GEN[1]), (rows_dsa.GEN[0], rows_dsa.GEN[1]), _dsa_generate_calls),
    ColdSpec("KV read table (v2p)", (loader.TRITON,), ("kv_read_table",), (rows_kv.TABLE,), (rows_kv.TABLE,), _kv_calls),
    ColdSpec("EAGLE draft decode kv indices (Triton backend's launch, 3 steps)", (loader.TRITON,),
             ("speculative_cache_locs",), ("build_draft_decode_kv_indices",), (rows_kv_indices.DRAFT,), _draft_calls),
    ColdSpec("FlashAttention EAGLE step (2 draft decodes, verify, draft extend)", (loader.TRITON,),
             ("flash_attention_metadata",), (rows_flash_attention_metadata.DECODE, rows_flash_attention_metadata.DRAFT_EXTEND),
             (rows_flash_attention_metadata.DECODE, rows_flash_attention_metadata.DRAFT_EXTEND), _fa_calls),
    ColdSpec("Triton decode kv_indptr + kv_indices + split counts (FlashInfer's: the first two)", (loader.TRITON,),
             ("kv_indices", "attention_metadata_splits"), ("build_kv_indices",),
             (rows_kv_indices.FLASHINFER, rows_kv_indices.SPLITS), _stream_calls),
    ColdSpec("FlashMLA / TRT-LLM MLA block table", (loader.TRITON,), ("kv_indices",), ("create_flashmla_kv_indices",),
             (rows_kv_indices.FLASHMLA,), _flashmla_calls),
)


def run_cold_start(probe: loader.Probe, ctx: Context, buckets: list, kernels: loader.Kernels, root: Path, log,
                   picked=lambda name: True) -> list:
    """One result per family (those ``picked`` by name); ``kernels`` adopts the warm fresh instances."""
    results = []
    if probe.runnable(loader.TRITON):
        from ._triton_warmup import warm_up

        warm_up(ctx.device)
    for spec in [s for s in COLD if picked(s.name)]:
        res = {"name": spec.name, "buckets": len(buckets), "max_bucket": max(buckets)}
        results.append(res)
        missing = [m for fam in spec.families for m in probe.missing.get(fam, [])]
        if missing:
            res["skipped"] = "; ".join(missing)
            continue
        log(f"  cold start: {spec.name} over {len(buckets)} buckets")
        with fresh_caches(root):
            k = loader.load(probe, spec.families, tag=f"cold{len(results)}")
            absent = [fn for fn in spec.upstream if not k.has(fn)]
            if absent:
                res["skipped"] = "upstream not loaded: " + "; ".join(sum(k.errors.values(), []) or absent)
                continue
            per_bucket = [spec.calls(ctx, k, "upstream", b) for b in buckets]
            res["calls_per_bucket"] = len(per_bucket[0])
            try:
                res["upstream"] = {"cold_s": first_call_seconds(per_bucket, ctx.device),
                                   "warm_s": first_call_seconds(per_bucket, ctx.device)}
            except Exception as e:  # a kernel that fails to build: say so, keep going
                res["skipped"] = f"upstream failed: {type(e).__name__}: {e}"
                continue
        kernels.adopt(k, spec.modules)
        if all(hasattr(sgl_meta, fn) for fn in spec.ours):
            per_bucket = [spec.calls(ctx, sgl_meta, "ours", b) for b in buckets]
            res["ours"] = {"cold_s": first_call_seconds(per_bucket, ctx.device),
                           "warm_s": first_call_seconds(per_bucket, ctx.device)}
        else:
            res["ours_missing"] = "not in this build: " + ", ".join(fn for fn in spec.ours if not hasattr(sgl_meta, fn))
    ctx.drop("dsa_gen_staging")
    return results
