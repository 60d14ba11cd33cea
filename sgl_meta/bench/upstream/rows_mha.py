"""TRT-LLM MHA rows: the graph-metadata update and the page-table builder.

The fixed shapes of ``benchmarks/op_shapes.py``: page size 64, a
2048-page table (131,072-token context, gpt-oss / Llama 3.1), lengths uniform
in ``[1, context - 128]``, ``seqlen_offset`` 1 (the first EAGLE draft step).
SGLang 0.5.23 records the update in the decode graph with the full static width
and writes live pages only; ours runs with ``live_pages_only=True`` to match.
With SWA it also translates this step's ``out_cache_loc`` (as SGLang passes it).

What upstream defines (``regions``): ``cache_seqlens[:bs]``, ``cu_seqlens_k[1:bs+1]``
(element 0 is the caller's), the live prefix of each page-table row
(``min(ceil(len / 64), width)`` pages), the whole ``swa_out_cache_loc``.
"""

from __future__ import annotations

import functools

import torch

import sgl_meta
from sgl_meta import reference

from .fixtures import (OutputSets, Row, RowSpec, generator, live_cols, make_row, prefix_mask, request_pool,
                       uniform_lengths)
from .loader import TRITON

PAGE_SIZE = 64
PAGES = 2048
OFFSET = 1
TOKENS = 4  # out_cache_loc capacity per request (verify writes num_draft_tokens)
UPDATE = "update_trtllm_mha_graph_metadata"
BUILDER = "build_trtllm_mha_page_table"


class MhaFixture:
    """One shuffled pool, lengths and output sets for every MHA row."""

    def __init__(self, ctx):
        dev, n = ctx.device, ctx.max_bs
        gen = generator(dev, ctx.seed * 7919 + 11)
        self.n, self.ps, self.width = n, PAGE_SIZE, PAGES
        self.context = PAGES * PAGE_SIZE
        self.req_to_token, self.req_pool_indices = request_pool(n, PAGES, PAGE_SIZE, dev, gen)
        self.lens = uniform_lengths(n, 1, self.context - 2 * PAGE_SIZE, dev, gen)
        slots = (n + 1) * PAGES * PAGE_SIZE + PAGE_SIZE  # highest slot + one page
        # SGLang's full->SWA map: one entry per slot plus padding, the last -1.
        # Non-negative otherwise: a negative entry would only show the documented
        # floor- vs truncating-division difference of the builder.
        self.swa_mapping = torch.randint(0, slots // 4, (slots + 1,), dtype=torch.int64, device=dev, generator=gen)
        self.swa_mapping[-1] = -1
        self.out_cache_loc = torch.randint(0, slots - PAGE_SIZE, (n * TOKENS,), dtype=torch.int64, device=dev, generator=gen)
        i32 = torch.int32
        self.out = OutputSets(
            {
                "cache_seqlens": ((n,), i32),
                "cu_seqlens_k": ((n + 1,), i32),
                "cu_seqlens_q": ((n + 1,), i32),
                "page_table": ((n, PAGES), i32),
                "swa_page_table": ((n, PAGES), i32),
                "swa_out_cache_loc": ((n * TOKENS,), torch.int64),
            },
            dev,
            gen,
        )

    def table_mask(self, bs: int, offset: int) -> torch.Tensor:
        return prefix_mask(live_cols(self.lens[:bs] + offset, self.ps, self.width), (self.n, self.width))


def _fixture(ctx) -> MhaFixture:
    return ctx.fixture("mha", MhaFixture)


def _row(ctx, name, params, calls, names, regions, note="") -> Row:
    return make_row(_fixture(ctx).out, names, name=name, group="mha", params=params, calls=calls, regions=regions,
                    note=note)


def build_update(ctx, up, *, bs: int, swa: bool, name: str) -> Row:
    f = _fixture(ctx)
    kw = dict(
        req_pool_indices=f.req_pool_indices[:bs], seq_lens=f.lens[:bs], req_to_token=f.req_to_token,
        bs=bs, seqlen_offset=OFFSET, max_seq_pages=f.width, page_size=f.ps,
    )
    if swa:
        kw.update(swa_mapping=f.swa_mapping, out_cache_loc=f.out_cache_loc[:bs])
    names = ["cache_seqlens", "cu_seqlens_k", "page_table"] + (["swa_page_table", "swa_out_cache_loc"] if swa else [])

    def outs(impl):
        o = f.out[impl]
        d = dict(cache_seqlens=o["cache_seqlens"][:bs], cu_seqlens_k=o["cu_seqlens_k"][: bs + 1], page_table=o["page_table"][:bs])
        if swa:
            d.update(swa_page_table=o["swa_page_table"][:bs], swa_out_cache_loc=o["swa_out_cache_loc"][:bs])
        return d

    calls = {
        "upstream": [functools.partial(up.update_trtllm_mha_graph_metadata, **kw, **outs("upstream"))],
        "ours": [functools.partial(sgl_meta.update_trtllm_mha_graph_metadata, **kw, **outs("ours"), live_pages_only=True)],
        "ref": [functools.partial(reference.update_trtllm_mha_graph_metadata, **kw, **outs("ref"), live_pages_only=True)],
    }
    mask = f.table_mask(bs, OFFSET)
    regions = {"cache_seqlens": (slice(0, bs),), "cu_seqlens_k": (slice(1, bs + 1),), "page_table": mask}
    if swa:
        regions.update(swa_page_table=mask, swa_out_cache_loc=(slice(0, bs),))
    params = dict(bs=bs, page_size=f.ps, width_pages=f.width, seqlen_offset=OFFSET, swa=swa, lengths="uniform")
    return _row(ctx, name, params, calls, names, regions)


def build_seqlens_only(ctx, up, *, bs: int, name: str) -> Row:
    """Upstream's ``skip_page_table=True`` (unified pool: only the seqlen metadata)."""
    f = _fixture(ctx)
    kw = dict(
        req_pool_indices=f.req_pool_indices[:bs], seq_lens=f.lens[:bs], req_to_token=f.req_to_token,
        bs=bs, seqlen_offset=OFFSET, max_seq_pages=f.width, page_size=f.ps,
    )
    names = ["cache_seqlens", "cu_seqlens_k", "page_table"]

    def outs(impl):
        o = f.out[impl]
        return dict(cache_seqlens=o["cache_seqlens"][:bs], cu_seqlens_k=o["cu_seqlens_k"][: bs + 1])

    def ours_kw(impl):
        return dict(kw, **outs(impl), page_table=None, skip_page_table=True)

    ours_fn, ref_fn = sgl_meta.update_trtllm_mha_graph_metadata, reference.update_trtllm_mha_graph_metadata
    calls = {
        "upstream": [functools.partial(up.update_trtllm_mha_graph_metadata, **kw, **outs("upstream"), page_table=None, skip_page_table=True)],
        "ours": [functools.partial(ours_fn, **ours_kw("ours"))],
        "ref": [functools.partial(ref_fn, **ours_kw("ref"))],
    }
    note = "ours: skip_page_table=True"
    regions = {"cache_seqlens": (slice(0, bs),), "cu_seqlens_k": (slice(1, bs + 1),)}
    params = dict(bs=bs, page_size=f.ps, width_pages=f.width, seqlen_offset=OFFSET, skip_page_table=True)
    return _row(ctx, name, params, calls, names, regions, note)


def build_page_table(ctx, up, *, bs: int, swa: bool, name: str) -> Row:
    f = _fixture(ctx)
    kw = dict(req_to_token=f.req_to_token, req_pool_indices=f.req_pool_indices[:bs], cache_seqlens=f.lens[:bs], page_size=f.ps)
    names = ["page_table"] + (["swa_page_table"] if swa else [])

    def outs(impl):
        o = f.out[impl]
        d = dict(page_table=o["page_table"][:bs])
        if swa:
            d.update(swa_page_table=o["swa_page_table"][:bs], full_to_swa=f.swa_mapping)
        return d

    calls = {
        "upstream": [functools.partial(up.build_trtllm_mha_page_table, **kw, **outs("upstream"))],
        "ours": [functools.partial(sgl_meta.build_trtllm_mha_page_table, **kw, **outs("ours"))],
        "ref": [functools.partial(reference.build_trtllm_mha_page_table, **kw, **outs("ref"))],
    }
    mask = f.table_mask(bs, 0)
    regions = {"page_table": mask}
    if swa:
        regions["swa_page_table"] = mask
    params = dict(bs=bs, page_size=f.ps, width_pages=f.width, swa=swa, lengths="uniform")
    return _row(ctx, name, params, calls, names, regions)


def _spec(name, fn_name, build, **kw) -> RowSpec:
    return RowSpec(
        name=name, group="mha", families=(TRITON,), ours=(fn_name,), upstream=(fn_name,),
        build=lambda ctx, up: build(ctx, up, name=name, **kw),
    )


ROWS = (
    _spec("update bs256 x 2048 pages of 64, live pages", UPDATE, build_update, bs=256, swa=False),
    _spec("update bs256, SWA", UPDATE, build_update, bs=256, swa=True),
    _spec("update bs1", UPDATE, build_update, bs=1, swa=False),
    _spec("update bs256, seqlens only (skip_page_table)", UPDATE, build_seqlens_only, bs=256),
    _spec("page-table builder bs256", BUILDER, build_page_table, bs=256, swa=False),
    _spec("page-table builder bs256, SWA", BUILDER, build_page_table, bs=256, swa=True),
    _spec("page-table builder bs1", BUILDER, build_page_table, bs=1, swa=False),
)
