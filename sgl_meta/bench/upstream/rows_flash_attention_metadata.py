"""FlashAttention (FA3/FA4) backend rows: ``normal_decode_set_metadata`` and
``draft_extend_set_metadata``, SGLang 0.5.23's Triton functions vs our drop-ins
on the same inputs, and the multi-step draft backend's K updates.

The fixed shapes of the MHA rows: page size 64, a 2048-page table (131,072-token
context), lengths uniform in ``[1, context - 256]``. Rows: normal decode (delta 0),
a target verify (``seq_len_delta`` = 4 draft tokens, a Triton compile of its own
upstream), the static SWA pool (token-slot mapping), batch 1, draft extend with
SWA (``cu_seqlens_q``, ``swa_out_cache_loc``), and the multi-step draft: upstream
records K = 3 calls (deltas 1, 2, 3, one per step backend), ours one launch into
the 3 sets. At page size 1 (the FA3 backend's default: a column per token; the
backend passes its static width, ``ceil(max_context_len / page_size)``, here 128k
columns, whatever the batch's lengths): 256 requests to 8k, 256 with one 128k request
among ones to 4k, one 128k request; most of each table lies past its rows' lengths.

What upstream defines (``regions``): ``cache_seqlens[:bs]``, ``cu_seqlens_k[:bs + 1]``,
``cu_seqlens_q[:bs + 1]``, the live prefix of each page-table row
(``min(ceil((len + delta) / 64), width)`` pages), ``swa_out_cache_loc``.
"""

from __future__ import annotations

import functools

import torch

import sgl_meta
from sgl_meta import reference

from .fixtures import OutputSets, Row, RowSpec, generator, live_cols, make_row, prefix_mask, request_pool, uniform_lengths
from .loader import TRITON

PAGE_SIZE = 64
PAGES = 2048
SETS = 3  # multi-step draft: speculative_num_steps - 1 step backends
TOKENS = 4  # draft extend: tokens per request
DECODE, DRAFT_EXTEND = "normal_decode_set_metadata", "draft_extend_set_metadata"
MULTI = "update_flash_attention_metadata"


class FaFixture:
    def __init__(self, ctx):
        dev, n = ctx.device, ctx.max_bs
        gen = generator(dev, ctx.seed * 7919 + 71)
        self.n = n
        self.req_to_token, self.req_pool_indices = request_pool(n, PAGES, PAGE_SIZE, dev, gen)
        self.lens = uniform_lengths(n, 1, PAGES * PAGE_SIZE - 4 * PAGE_SIZE, dev, gen)
        slots = (n + 1) * PAGES * PAGE_SIZE + PAGE_SIZE
        # Non-negative entries: a negative one would only show the documented floor- vs
        # truncating-division difference.
        self.swa_mapping = torch.randint(0, slots // 4, (slots,), dtype=torch.int64, device=dev, generator=gen)
        self.extend = torch.randint(1, TOKENS + 1, (n,), dtype=torch.int32, device=dev, generator=gen)
        self.out_cache_loc = torch.randint(0, slots, (n * TOKENS,), dtype=torch.int64, device=dev, generator=gen)
        i32 = torch.int32
        shapes = {"cu_seqlens_q": ((n + 1,), i32), "swa_page_table": ((n, PAGES), i32),
                  "swa_out_cache_loc": ((n * TOKENS,), torch.int64)}
        for k in range(SETS):
            shapes |= {f"cache_seqlens{k}": ((n,), i32), f"cu_seqlens_k{k}": ((n + 1,), i32),
                       f"page_table{k}": ((n, PAGES), i32)}
        self.out = OutputSets(shapes, dev, gen)

    def mask(self, bs: int, delta: int) -> torch.Tensor:
        return prefix_mask(live_cols(self.lens[:bs] + delta, PAGE_SIZE, PAGES), (self.n, PAGES))


def _fixture(ctx) -> FaFixture:
    return ctx.fixture("flash_attention", FaFixture)


def _decode_calls(f: FaFixture, fns: dict, *, bs: int, deltas: list, swa: bool) -> dict:
    """``{impl: [one normal_decode_set_metadata call per delta]}``, set k into outputs ``*k``."""
    calls = {}
    for impl, fn in fns.items():
        o = f.out[impl]
        calls[impl] = [functools.partial(
            fn, o[f"cache_seqlens{k}"][:bs], o[f"cu_seqlens_k{k}"][: bs + 1], o[f"page_table{k}"][:bs], f.req_to_token,
            f.req_pool_indices[:bs], PAGES, f.lens[:bs], delta, PAGE_SIZE,
            o["swa_page_table"][:bs] if swa else None, full_to_swa_index_mapping=f.swa_mapping if swa else None)
            for k, delta in enumerate(deltas)]
    return calls


def _decode_regions(f: FaFixture, bs: int, deltas: list, swa: bool) -> tuple[list, dict]:
    names, regions = [], {}
    for k, delta in enumerate(deltas):
        names += [f"cache_seqlens{k}", f"cu_seqlens_k{k}", f"page_table{k}"]
        regions |= {f"cache_seqlens{k}": (slice(0, bs),), f"cu_seqlens_k{k}": (slice(0, bs + 1),),
                    f"page_table{k}": f.mask(bs, delta)}
    if swa:
        names.append("swa_page_table")
        regions["swa_page_table"] = f.mask(bs, deltas[-1])
    return names, regions


def build_decode(ctx, up, *, bs: int, delta: int, swa: bool, name: str) -> Row:
    f = _fixture(ctx)
    fns = {"upstream": up.normal_decode_set_metadata, "ours": sgl_meta.normal_decode_set_metadata,
           "ref": reference.normal_decode_set_metadata}
    calls = _decode_calls(f, fns, bs=bs, deltas=[delta], swa=swa)
    names, regions = _decode_regions(f, bs, [delta], swa)
    params = dict(bs=bs, page_size=PAGE_SIZE, width_pages=PAGES, seq_len_delta=delta, swa=swa, lengths="uniform")
    return make_row(f.out, names, name=name, group="flash attention", params=params, calls=calls, regions=regions)


def build_multi(ctx, up, *, bs: int, name: str) -> Row:
    """Upstream: the K recorded calls of FlashAttentionMultiStepBackend; ours: one launch."""
    f = _fixture(ctx)
    deltas = [k + 1 for k in range(SETS)]
    calls = _decode_calls(f, {"upstream": up.normal_decode_set_metadata}, bs=bs, deltas=deltas, swa=False)
    for impl, fn in (("ours", sgl_meta.update_flash_attention_metadata),
                     ("ref", reference.update_flash_attention_metadata)):
        o = f.out[impl]
        calls[impl] = [functools.partial(
            fn, cache_seqlens=[o[f"cache_seqlens{k}"][:bs] for k in range(SETS)],
            cu_seqlens_k=[o[f"cu_seqlens_k{k}"][: bs + 1] for k in range(SETS)],
            page_table=[o[f"page_table{k}"][:bs] for k in range(SETS)], req_to_token=f.req_to_token,
            req_pool_indices=f.req_pool_indices[:bs], seq_lens=f.lens[:bs], seq_len_delta=deltas, bs=bs,
            max_seq_pages=PAGES, page_size=PAGE_SIZE)]
    names, regions = _decode_regions(f, bs, deltas, False)
    params = dict(bs=bs, page_size=PAGE_SIZE, width_pages=PAGES, seq_len_delta=deltas, sets=SETS, lengths="uniform")
    return make_row(f.out, names, name=name, group="flash attention", params=params, calls=calls, regions=regions,
                    note=f"upstream: {SETS} calls (one per draft step); ours: one launch")


def build_draft_extend(ctx, up, *, bs: int, name: str) -> Row:
    f = _fixture(ctx)
    n = bs * TOKENS
    calls = {}
    for impl, fn in (("upstream", up.draft_extend_set_metadata), ("ours", sgl_meta.draft_extend_set_metadata),
                     ("ref", reference.draft_extend_set_metadata)):
        o = f.out[impl]
        calls[impl] = [functools.partial(
            fn, o["cache_seqlens0"][:bs], o["cu_seqlens_k0"][: bs + 1], o["cu_seqlens_q"][: bs + 1],
            o["page_table0"][:bs], f.req_to_token, f.req_pool_indices[:bs], f.lens[:bs], f.extend[:bs], PAGE_SIZE,
            f.swa_mapping, o["swa_page_table"][:bs], f.out_cache_loc[:n], o["swa_out_cache_loc"][:n])]
    mask = f.mask(bs, 0)
    names = ["cache_seqlens0", "cu_seqlens_k0", "cu_seqlens_q", "page_table0", "swa_page_table", "swa_out_cache_loc"]
    regions = {"cache_seqlens0": (slice(0, bs),), "cu_seqlens_k0": (slice(0, bs + 1),),
               "cu_seqlens_q": (slice(0, bs + 1),), "page_table0": mask, "swa_page_table": mask,
               "swa_out_cache_loc": (slice(0, n),)}
    params = dict(bs=bs, page_size=PAGE_SIZE, width_pages=PAGES, tokens_per_request=TOKENS, swa=True)
    return make_row(f.out, names, name=name, group="flash attention", params=params, calls=calls, regions=regions)


PAGE1_WIDTH = 131072  # SGLang's FA3 default, page size 1: one column per token of a 128k context


class Page1Fixture:
    """Page size 1 (the FA3 backend's default): ``bs`` requests whose tokens sit at shuffled
    slots, lengths uniform in ``[1, PAGE1_WIDTH // div]`` and, ``skewed``, the last one a
    whole context long; the table ``PAGE1_WIDTH`` columns wide, the backend's static width."""

    def __init__(self, ctx, bs: int, div: int, skewed: bool):
        dev = ctx.device
        gen = generator(dev, ctx.seed * 7919 + 83 + bs)
        short = PAGE1_WIDTH // div
        self.req_to_token, self.req_pool_indices = request_pool(bs, PAGE1_WIDTH, 1, dev, gen)
        self.lens = uniform_lengths(bs, 1, short, dev, gen)
        if skewed:
            self.lens[-1] = PAGE1_WIDTH - 8
        self.width = PAGE1_WIDTH  # max_seq_pages: FlashAttentionBackend.max_num_pages, whatever the lengths
        i32 = torch.int32
        self.out = OutputSets({"cache_seqlens": ((bs,), i32), "cu_seqlens_k": ((bs + 1,), i32),
                               "page_table": ((bs, self.width), i32)}, dev, gen)


def build_decode_page1(ctx, up, *, bs: int, div: int, skewed: bool, name: str) -> Row:
    """``normal_decode_set_metadata`` at page size 1, as the FA3 backend's decode replay calls it."""
    f = ctx.fixture(f"flash_attention_page1_{bs}_{div}_{skewed}",
                    functools.partial(Page1Fixture, bs=bs, div=div, skewed=skewed))
    calls = {}
    for impl, fn in (("upstream", up.normal_decode_set_metadata), ("ours", sgl_meta.normal_decode_set_metadata),
                     ("ref", reference.normal_decode_set_metadata)):
        o = f.out[impl]
        calls[impl] = [functools.partial(fn, o["cache_seqlens"], o["cu_seqlens_k"], o["page_table"], f.req_to_token,
                                         f.req_pool_indices, f.width, f.lens, 0, 1)]
    regions = {"cache_seqlens": (slice(0, bs),), "cu_seqlens_k": (slice(0, bs + 1),),
               "page_table": prefix_mask(live_cols(f.lens, 1, f.width), (bs, f.width))}
    params = dict(bs=bs, page_size=1, width_pages=f.width, lengths=f"uniform to {PAGE1_WIDTH // div}" + (
        f", the last at {PAGE1_WIDTH - 8}" if skewed else ""))
    return make_row(f.out, list(regions), name=name, group="flash attention", params=params, calls=calls,
                    regions=regions)


def _spec(name, ours, upstream, build, **kw) -> RowSpec:
    return RowSpec(name=name, group="flash attention", families=(TRITON,), ours=(ours,), upstream=(upstream,),
                   build=lambda ctx, up: build(ctx, up, name=name, **kw))


ROWS = (
    _spec("FA decode bs256 x 2048 pages of 64", DECODE, DECODE, build_decode, bs=256, delta=0, swa=False),
    _spec("FA verify bs64 (seq_len_delta 4)", DECODE, DECODE, build_decode, bs=64, delta=4, swa=False),
    _spec("FA decode bs256, SWA (token mapping)", DECODE, DECODE, build_decode, bs=256, delta=1, swa=True),
    _spec("FA decode bs1", DECODE, DECODE, build_decode, bs=1, delta=0, swa=False),
    _spec(f"FA draft extend bs64 x {TOKENS}, SWA", DRAFT_EXTEND, DRAFT_EXTEND, build_draft_extend, bs=64),
    _spec(f"FA multi-step draft bs256, K={SETS} (upstream: {SETS} calls)", MULTI, DECODE, build_multi, bs=256),
    _spec("FA decode page size 1, bs256 x 8k", DECODE, DECODE, build_decode_page1, bs=256, div=16, skewed=False),
    _spec("FA decode page size 1, bs16 x 4k", DECODE, DECODE, build_decode_page1, bs=16, div=32, skewed=False),
    _spec("FA decode page size 1, bs256: one 128k request, the rest to 4k", DECODE, DECODE, build_decode_page1,
          bs=256, div=32, skewed=True),
    _spec("FA decode page size 1, bs1 x 128k", DECODE, DECODE, build_decode_page1, bs=1, div=1, skewed=True),
)
