"""Unified-pool read-table rows: ``build_kv_read_table`` (page table) and
``build_kv_read_table_packed`` (token stream), upstream's Triton kernel vs ours.

``req_to_token`` holds virtual ids (shuffled whole pages, page size 64, 2048
pages a row), ``v2p`` maps virtual to physical pages (a random permutation, 1% of
entries freed to -1, as compaction leaves them), lengths uniform. Upstream
defines each row's live prefix (``ceil(len / 64)`` pages, capped at
``max_pages``) and the ``sum(len)`` tokens of the stream. Both rows also time
the bare gather of the same pages (``sgl_meta.bench.bare_gather``: the same
addresses, no checks), the ceiling ours is held to, in the same
rotation and on the same inputs.
"""

from __future__ import annotations

import functools

import torch

import sgl_meta
from sgl_meta import reference

from .. import bare_gather
from .fixtures import (IMPLS, OutputSets, Row, RowSpec, generator, live_cols, make_row, prefix_mask, request_pool,
                       uniform_lengths)
from .loader import TRITON

PAGE_SIZE = 64
PAGES = 2048
PACKED_BS = 64
TABLE, PACKED = "build_kv_read_table", "build_kv_read_table_packed"


class KvFixture:
    def __init__(self, ctx):
        dev, n = ctx.device, ctx.max_bs
        gen = generator(dev, ctx.seed * 7919 + 53)
        self.n = n
        self.req_to_token, self.req_pool_indices = request_pool(n, PAGES, PAGE_SIZE, dev, gen)
        self.lens = uniform_lengths(n, 1, PAGES * PAGE_SIZE, dev, gen)
        virtual = (n + 1) * PAGES + 1
        v2p = torch.randperm(virtual, device=dev, generator=gen)
        freed = torch.rand(virtual, device=dev, generator=gen) < 0.01
        self.v2p = torch.where(freed, torch.full_like(v2p, -1), v2p)
        packed = self.lens[:PACKED_BS].to(torch.int64)
        self.indptr = torch.zeros(PACKED_BS + 1, dtype=torch.int32, device=dev)
        self.indptr[1:] = packed.cumsum(0).to(torch.int32)
        self.tokens = int(packed.sum())  # once, at setup
        self.out = OutputSets({"table": ((n, PAGES), torch.int32), "stream": ((self.tokens,), torch.int32)}, dev, gen,
                              impls=IMPLS)
        self.gather_ok, self.gather_why = bare_gather.available(dev, PAGE_SIZE)


def _fixture(ctx) -> KvFixture:
    return ctx.fixture("kv", KvFixture)


def _calls(up, fn_name: str, kw: dict, out_name: str, f: KvFixture) -> dict:
    calls = {
        "upstream": [functools.partial(getattr(up, fn_name), **kw, out=f.out["upstream"][out_name])],
        "ours": [functools.partial(getattr(sgl_meta, fn_name), **kw, out=f.out["ours"][out_name])],
    }
    if hasattr(reference, fn_name):
        calls["ref"] = [functools.partial(getattr(reference, fn_name), **kw, out=f.out["ref"][out_name])]
    if f.gather_ok:
        bare = bare_gather.page_table if out_name == "table" else bare_gather.token_stream
        args = {k: v for k, v in kw.items() if k != "max_tokens"}
        calls["gather"] = [functools.partial(bare, **args, out=f.out["gather"][out_name])]
    return calls


def build_table(ctx, up, *, bs: int, name: str) -> Row:
    f = _fixture(ctx)
    kw = dict(req_to_token=f.req_to_token, req_pool_indices=f.req_pool_indices[:bs], seq_lens=f.lens[:bs],
              v2p=f.v2p, page_size=PAGE_SIZE, max_pages=PAGES)
    calls = _calls(up, TABLE, kw, "table", f)
    regions = {"table": prefix_mask(live_cols(f.lens[:bs], PAGE_SIZE, PAGES), (f.n, PAGES))}
    return _row(f, name, dict(bs=bs, page_size=PAGE_SIZE, max_pages=PAGES, lengths="uniform"), calls, ["table"], regions)


def build_packed(ctx, up, *, name: str) -> Row:
    f = _fixture(ctx)
    bs = PACKED_BS
    kw = dict(req_to_token=f.req_to_token, req_pool_indices=f.req_pool_indices[:bs], seq_lens=f.lens[:bs],
              v2p=f.v2p, indptr=f.indptr, page_size=PAGE_SIZE, max_tokens=f.tokens)
    calls = _calls(up, PACKED, kw, "stream", f)
    regions = {"stream": (slice(0, f.tokens),)}
    return _row(f, name, dict(bs=bs, page_size=PAGE_SIZE, tokens=f.tokens, lengths="uniform"), calls, ["stream"], regions)


def _row(f, name, params, calls, names, regions) -> Row:
    note = "" if "gather" in calls else f"no bare gather ({f.gather_why})"
    return make_row(f.out, names, name=name, group="kv read", params=params, calls=calls, regions=regions, note=note)


ROWS = (
    RowSpec(name="KV read table bs256 x 2048 pages of 64 (v2p)", group="kv read", families=(TRITON,),
            ours=(TABLE,), upstream=(TABLE,),
            build=lambda ctx, up: build_table(ctx, up, bs=256, name="KV read table bs256 x 2048 pages of 64 (v2p)")),
    RowSpec(name=f"KV read packed bs{PACKED_BS} (token stream, v2p)", group="kv read", families=(TRITON,),
            ours=(PACKED,), upstream=(PACKED,),
            build=lambda ctx, up: build_packed(ctx, up, name=f"KV read packed bs{PACKED_BS} (token stream, v2p)")),
)
