"""DSA rows (DeepSeek-V3.2): the metadata copy, and generation fanned out to K graphs.

Copy rows (``benchmarks/op_shapes.py`` shapes): sources of a
top-k-wide ``page_table_1`` (2048 columns), a real page table of the 160K
context (2560 pages of 64) and FlashMLA metadata (``[66, 8]`` + ``num_splits``),
random contents. Ours is the drop-in with upstream's positional signature
(``sgl_meta.fused_metadata_copy_cuda`` / ``_multi_cuda``), called with the same
arguments; upstream defines exactly the copied regions.

Generator rows (decode, bs 1/64/256, K = 1, 2, 3, 5 graphs; target-verify bs 64
x 4, K = 1): the path SGLang 0.5.23 runs on a replay, from the raw inputs
(``seq_lens``, ``req_pool_indices``, a 163,840-token ``req_to_token``, trace
lengths): its Triton generator into freshly allocated staging buffers (as its
``_precompute_*_mode`` does), then the copies into each graph's buffers at the
full static width (``fused_metadata_copy_multi_cuda`` for the first three when
K >= 3, ``fused_metadata_copy_cuda`` for each other one, as its multi-step
backend does). No FlashMLA in these rows (it needs FlashMLA itself). Ours:
``sgl_meta.fused_dsa_metadata`` writing every graph's buffers directly in one
launch (the drop-ins with upstream's generator signatures are its K = 1
form). Upstream
defines the live prefix of each page row (the generator writes whole 128-column
blocks from ``req_to_token``; what the copy carries past them is the staging
buffer's garbage): compared are columns ``< kv length`` and real-table pages
``< ceil(kv length / 64)``, the seqlens, and ``cu_seqlens_k[1:]``,
``dsa_cu_seqlens_k[1:]`` (element 0 is not copied).
"""

from __future__ import annotations

import functools

import torch

import sgl_meta
from sgl_meta import reference

from .fixtures import (OutputSets, Row, RowSpec, generator, live_cols, make_row, prefix_mask, request_pool,
                       trace_lengths)
from .loader import JIT, TRITON

PAGE_SIZE = 64
CONTEXT = 163840
TOPK = 2048
REAL_W = CONTEXT // PAGE_SIZE
NEXT_N = 4
SCHED = (66, 8)
K_MAX = 5
COPY, COPY_MULTI = "fused_metadata_copy_cuda", "fused_metadata_copy_multi_cuda"
GEN = {0: "fused_dsa_decode_metadata", 1: "fused_dsa_target_verify_metadata"}
GEN_K = "fused_dsa_metadata"  # ours: K graphs in one launch
SET_FIELDS = (
    "cache_seqlens", "cu_seqlens_k", "page_table_1", "dsa_cache_seqlens",
    "dsa_cu_seqlens_k", "real_page_table", "flashmla_num_splits", "flashmla_metadata",
)


# -- copy rows -------------------------------------------------------------------------


class CopyFixture:
    """Random sources and three destination sets, ``rows`` page rows at most."""

    def __init__(self, ctx):
        dev = ctx.device
        gen = generator(dev, ctx.seed * 7919 + 23)
        self.rows = rows = NEXT_N * ctx.max_bs
        i32 = dict(dtype=torch.int32, device=dev)

        def rnd(*shape):
            return torch.randint(0, 1 << 20, shape, generator=gen, **i32)

        self.src = dict(
            cache_seqlens=rnd(rows), cu_seqlens_k=rnd(rows + 1), page_indices=rnd(rows, TOPK),
            dsa_cache_seqlens=rnd(rows), seqlens_expanded=rnd(rows), dsa_cu_seqlens_k=rnd(rows + 1),
            real_page_table=rnd(rows, REAL_W), flashmla_num_splits=rnd(rows + 1), flashmla_metadata=rnd(*SCHED),
        )
        shapes = {}
        for k in range(3):
            shapes.update({
                f"{k}.cache_seqlens": ((rows,), torch.int32), f"{k}.cu_seqlens_k": ((rows + 1,), torch.int32),
                f"{k}.page_table_1": ((rows, TOPK), torch.int32), f"{k}.dsa_cache_seqlens": ((rows,), torch.int32),
                f"{k}.seqlens_expanded": ((rows,), torch.int32), f"{k}.dsa_cu_seqlens_k": ((rows + 1,), torch.int32),
                f"{k}.real_page_table": ((rows, REAL_W), torch.int32),
                f"{k}.flashmla_num_splits": ((rows + 1,), torch.int32), f"{k}.flashmla_metadata": (SCHED, torch.int32),
            })
        self.out = OutputSets(shapes, dev, gen)

    def src_args(self, bs: int, rows: int, n: int, expanded: bool) -> dict:
        s = self.src
        return dict(
            cache_seqlens_src=s["cache_seqlens"][:bs], cu_seqlens_k_src=s["cu_seqlens_k"][: bs + 1],
            page_indices_src=s["page_indices"][:rows], dsa_cache_seqlens_src=s["dsa_cache_seqlens"][:n],
            seqlens_expanded_src=s["seqlens_expanded"][:n] if expanded else None,
            dsa_cu_seqlens_k_src=s["dsa_cu_seqlens_k"][: n + 1], real_page_table_src=s["real_page_table"][:rows],
            flashmla_num_splits_src=s["flashmla_num_splits"][: n + 1], flashmla_metadata_src=s["flashmla_metadata"],
        )

    def dst_args(self, impl: str, k: int, bs: int, rows: int, n: int, expanded: bool) -> dict:
        o = self.out[impl]
        return dict(
            cache_seqlens_dst=o[f"{k}.cache_seqlens"][:bs], cu_seqlens_k_dst=o[f"{k}.cu_seqlens_k"][: bs + 1],
            page_table_1_dst=o[f"{k}.page_table_1"][:rows], dsa_cache_seqlens_dst=o[f"{k}.dsa_cache_seqlens"][:n],
            seqlens_expanded_dst=o[f"{k}.seqlens_expanded"][:n] if expanded else None,
            dsa_cu_seqlens_k_dst=o[f"{k}.dsa_cu_seqlens_k"][: n + 1], real_page_table_dst=o[f"{k}.real_page_table"][:rows],
            flashmla_num_splits_dst=o[f"{k}.flashmla_num_splits"][: n + 1], flashmla_metadata_dst=o[f"{k}.flashmla_metadata"],
        )

    def regions(self, k: int, bs: int, rows: int, n: int, expanded: bool) -> dict:
        r = {
            f"{k}.cache_seqlens": (slice(0, bs),), f"{k}.cu_seqlens_k": (slice(1, bs + 1),),
            f"{k}.page_table_1": (slice(0, rows), slice(0, TOPK)), f"{k}.dsa_cache_seqlens": (slice(0, n),),
            f"{k}.dsa_cu_seqlens_k": (slice(1, n + 1),), f"{k}.real_page_table": (slice(0, rows), slice(0, REAL_W)),
            f"{k}.flashmla_num_splits": (slice(0, n + 1),), f"{k}.flashmla_metadata": (slice(None),),
        }
        if expanded:
            r[f"{k}.seqlens_expanded"] = (slice(0, n),)
        return r


def _copy_fixture(ctx) -> CopyFixture:
    return ctx.fixture("dsa_copy", CopyFixture)


def build_copy(ctx, up, *, bs: int, mode: int, name: str) -> Row:
    f = _copy_fixture(ctx)
    q = 1 if mode == 0 else NEXT_N
    rows = n = bs * q
    expanded = mode != 0
    scalars = dict(forward_mode=mode, bs=bs, max_len=TOPK, max_seqlen_k=TOPK, seqlens_expanded_size=n)
    src = f.src_args(bs, rows, n, expanded)

    def kw(impl):
        return dict(src, **f.dst_args(impl, 0, bs, rows, n, expanded), **scalars)

    calls = {
        "upstream": [functools.partial(getattr(up, COPY), **kw("upstream"))],
        "ours": [functools.partial(sgl_meta.fused_metadata_copy_cuda, **kw("ours"))],
        "ref": [functools.partial(reference.fused_metadata_copy, **kw("ref"))],
    }
    regions = f.regions(0, bs, rows, n, expanded)
    names = [nm for nm in f.out.poison if nm.startswith("0.")]
    params = dict(bs=bs, forward_mode=mode, rows=rows, max_len=TOPK, real_cols=REAL_W, flashmla=True)
    return _copy_row(f, name, params, calls, names, regions)


def build_copy_multi(ctx, up, *, bs: int, name: str) -> Row:
    f = _copy_fixture(ctx)
    src = f.src_args(bs, bs, bs, False)
    del src["seqlens_expanded_src"]
    scalars = dict(bs=bs, max_len=TOPK, seqlens_expanded_size=bs)

    def positional_sets(impl):  # upstream's dst0/dst1/dst2 keyword names
        out = {}
        for k in range(3):
            d = f.dst_args(impl, k, bs, bs, bs, False)
            del d["seqlens_expanded_dst"]
            out.update({f"{nm}{k}": v for nm, v in d.items()})
        return out

    def list_sets(impl):  # the reference's list form
        sets = [f.dst_args(impl, k, bs, bs, bs, False) for k in range(3)]
        return {nm: [s[nm] for s in sets] for nm in sets[0] if nm != "seqlens_expanded_dst"}

    calls = {
        "upstream": [functools.partial(getattr(up, COPY_MULTI), **src, **positional_sets("upstream"), **scalars)],
        "ours": [functools.partial(sgl_meta.fused_metadata_copy_multi_cuda, **src, **positional_sets("ours"), **scalars)],
        "ref": [functools.partial(reference.fused_metadata_copy_multi, **src, **list_sets("ref"), **scalars)],
    }
    regions = {}
    for k in range(3):
        regions.update(f.regions(k, bs, bs, bs, False))
    names = [nm for nm in f.out.poison if not nm.endswith("seqlens_expanded")]
    params = dict(bs=bs, forward_mode=0, graphs=3, max_len=TOPK, real_cols=REAL_W, flashmla=True)
    return _copy_row(f, name, params, calls, names, regions)


def _copy_row(f, name, params, calls, names, regions) -> Row:
    return make_row(f.out, names, name=name, group="dsa copy", params=params, calls=calls, regions=regions)


# -- generator rows ----------------------------------------------------------------------


class GenFixture:
    """A 160K-context pool, trace lengths, K_MAX destination sets of full width."""

    def __init__(self, ctx):
        dev = ctx.device
        gen = generator(dev, ctx.seed * 7919 + 37)
        self.n = n = ctx.max_bs
        self.req_to_token, self.req_pool_indices = request_pool(n, REAL_W, PAGE_SIZE, dev, gen)
        # Committed lengths; verify reads NEXT_N more, so leave room for them.
        self.lens = trace_lengths(n, CONTEXT - 2 * NEXT_N, dev, ctx.seed * 7919 + 41)
        i32 = torch.int32
        shapes = {}
        for k in range(K_MAX):
            shapes.update({
                f"{k}.cache_seqlens": ((n,), i32), f"{k}.cu_seqlens_k": ((n + 1,), i32),
                f"{k}.page_table_1": ((n, CONTEXT), i32), f"{k}.seqlens_expanded": ((n,), i32),
                f"{k}.dsa_cache_seqlens": ((n,), i32), f"{k}.dsa_cu_seqlens_k": ((n + 1,), i32),
                f"{k}.real_page_table": ((n, REAL_W), i32),
            })
        self.out = OutputSets(shapes, dev, gen)

    def dst(self, impl: str, k: int, bs: int, rows: int) -> dict:
        o = self.out[impl]
        return dict(
            cache_seqlens=o[f"{k}.cache_seqlens"][:bs], cu_seqlens_k=o[f"{k}.cu_seqlens_k"][: bs + 1],
            page_table_1=o[f"{k}.page_table_1"][:rows], seqlens_expanded=o[f"{k}.seqlens_expanded"][:rows],
            dsa_cache_seqlens=o[f"{k}.dsa_cache_seqlens"][:rows], dsa_cu_seqlens_k=o[f"{k}.dsa_cu_seqlens_k"][: rows + 1],
            real_page_table=o[f"{k}.real_page_table"][:rows],
        )


def _gen_fixture(ctx) -> GenFixture:
    return ctx.fixture("dsa_gen", GenFixture)


def upstream_dsa_step(up, f: GenFixture, *, mode: int, bs: int, graphs: int):
    """SGLang's replay path: generator into fresh staging, then copies into each graph."""
    q = 1 if mode == 0 else NEXT_N
    rows = bs * q
    dev = f.req_to_token.device
    gen_fn, copy, multi = getattr(up, GEN[mode]), getattr(up, COPY), getattr(up, COPY_MULTI)
    dsts = [f.dst("upstream", k, bs, rows) for k in range(graphs)]
    common = dict(seq_lens=f.lens[:bs], req_pool_indices=f.req_pool_indices[:bs], req_to_token=f.req_to_token)

    def step():
        e = functools.partial(torch.empty, dtype=torch.int32, device=dev)
        st = dict(cache_seqlens=e(bs), cu_seqlens_k=e(bs + 1), page_table_1=e((rows, CONTEXT)),
                  dsa_cache_seqlens=e(rows), dsa_cu_seqlens_k=e(rows + 1), real_page_table=e((rows, REAL_W)))
        if mode == 0:
            gen_fn(**common, **st, bs=bs, max_len=CONTEXT, dsa_index_topk=TOPK, physical_page_size=PAGE_SIZE)
            st["seqlens_expanded"] = st["cache_seqlens"]  # what SGLang hands the copy in decode
        else:
            st["seqlens_expanded"] = e(rows)
            gen_fn(**common, **st, bs=bs, max_seqlen_k=CONTEXT, dsa_index_topk=TOPK,
                   physical_page_size=PAGE_SIZE, next_n=NEXT_N)
        src = dict(
            cache_seqlens_src=st["cache_seqlens"], cu_seqlens_k_src=st["cu_seqlens_k"],
            page_indices_src=st["page_table_1"], dsa_cache_seqlens_src=st["dsa_cache_seqlens"],
            dsa_cu_seqlens_k_src=st["dsa_cu_seqlens_k"], real_page_table_src=st["real_page_table"],
            flashmla_num_splits_src=None, flashmla_metadata_src=None,
        )
        rest = dsts
        if mode == 0 and graphs >= 3:
            sets = {}
            for k, d in enumerate(dsts[:3]):
                sets.update({f"{nm}_dst{k}": d[nm] for nm in ("cache_seqlens", "cu_seqlens_k", "page_table_1",
                                                             "dsa_cache_seqlens", "dsa_cu_seqlens_k", "real_page_table")})
                sets.update({f"flashmla_num_splits_dst{k}": None, f"flashmla_metadata_dst{k}": None})
            multi(**src, **sets, bs=bs, max_len=CONTEXT, seqlens_expanded_size=bs)
            rest = dsts[3:]
        for d in rest:
            copy(**src, seqlens_expanded_src=st["seqlens_expanded"],
                 cache_seqlens_dst=d["cache_seqlens"], cu_seqlens_k_dst=d["cu_seqlens_k"],
                 page_table_1_dst=d["page_table_1"], dsa_cache_seqlens_dst=d["dsa_cache_seqlens"],
                 seqlens_expanded_dst=d["seqlens_expanded"] if mode else None,
                 dsa_cu_seqlens_k_dst=d["dsa_cu_seqlens_k"], real_page_table_dst=d["real_page_table"],
                 flashmla_num_splits_dst=None, flashmla_metadata_dst=None,
                 forward_mode=mode, bs=bs, max_len=CONTEXT, max_seqlen_k=CONTEXT, seqlens_expanded_size=rows)

    return step


def k_set_call(fn, f: GenFixture, impl: str, *, mode: int, bs: int, graphs: int):
    """One ``fused_dsa_metadata`` call writing all K graphs' buffers (docs/operators/dsa_metadata.md)."""
    q = 1 if mode == 0 else NEXT_N
    sets = [f.dst(impl, k, bs, bs * q) for k in range(graphs)]
    fields = ["cache_seqlens", "cu_seqlens_k", "page_table_1", "dsa_cache_seqlens", "dsa_cu_seqlens_k",
              "real_page_table"] + (["seqlens_expanded"] if mode else [])
    return functools.partial(
        fn, seq_lens=f.lens[:bs], req_pool_indices=f.req_pool_indices[:bs], req_to_token=f.req_to_token,
        **{nm: [d[nm] for d in sets] for nm in fields}, forward_mode=mode, bs=bs, max_seqlen_k=CONTEXT,
        dsa_index_topk=TOPK, page_size=PAGE_SIZE, next_n=NEXT_N if mode else None)


def build_generate(ctx, up, *, mode: int, bs: int, graphs: int, name: str) -> Row:
    f = _gen_fixture(ctx)
    q = 1 if mode == 0 else NEXT_N
    rows = bs * q
    # Ours: the K-set op, one launch for every graph.
    calls = {
        "upstream": [upstream_dsa_step(up, f, mode=mode, bs=bs, graphs=graphs)],
        "ours": [k_set_call(sgl_meta.fused_dsa_metadata, f, "ours", mode=mode, bs=bs, graphs=graphs)],
    }
    if hasattr(reference, GEN_K):
        calls["ref"] = [k_set_call(reference.fused_dsa_metadata, f, "ref", mode=mode, bs=bs, graphs=graphs)]
    kv = f.lens[:bs].to(torch.int64) + (0 if mode == 0 else NEXT_N)
    kv_rows = kv.repeat_interleave(q)
    pt_mask = prefix_mask(live_cols(kv_rows, 1, CONTEXT), (f.n, CONTEXT))
    real_mask = prefix_mask(live_cols(kv_rows, PAGE_SIZE, REAL_W), (f.n, REAL_W))
    regions, names = {}, []
    for k in range(graphs):
        r = {
            f"{k}.cache_seqlens": (slice(0, bs),), f"{k}.cu_seqlens_k": (slice(1, bs + 1),),
            f"{k}.dsa_cache_seqlens": (slice(0, rows),), f"{k}.dsa_cu_seqlens_k": (slice(1, rows + 1),),
            f"{k}.page_table_1": pt_mask, f"{k}.real_page_table": real_mask,
        }
        if mode:
            r[f"{k}.seqlens_expanded"] = (slice(0, rows),)
        regions.update(r)
        names += list(r)
    params = dict(bs=bs, forward_mode=mode, graphs=graphs, rows=rows, width=CONTEXT, lengths="trace",
                  mean_len=float(f.lens[:bs].float().mean()))
    return make_row(f.out, names, name=name, group="dsa generate", params=params, calls=calls, regions=regions)


# -- the rows --------------------------------------------------------------------------


def _copy_spec(name, **kw) -> RowSpec:
    return RowSpec(name=name, group="dsa copy", families=(JIT,), ours=(COPY,), upstream=(COPY,),
                   build=lambda ctx, up: build_copy(ctx, up, name=name, **kw))


def _gen_spec(mode, bs, graphs) -> RowSpec:
    if mode == 0:
        name = f"DSA generate decode bs{bs}, K={graphs}"
    else:
        name = f"DSA generate verify bs{bs} x {NEXT_N}, K={graphs}"
    need = (GEN[mode], COPY, COPY_MULTI) if graphs >= 3 else (GEN[mode], COPY)
    return RowSpec(name=name, group="dsa generate", families=(TRITON, JIT), ours=(GEN_K,), upstream=need,
                   build=lambda ctx, up: build_generate(ctx, up, mode=mode, bs=bs, graphs=graphs, name=name))


ROWS = (
    _copy_spec("DSA copy decode bs256 (real table + FlashMLA)", bs=256, mode=0),
    _copy_spec(f"DSA copy verify bs64 x {NEXT_N}", bs=64, mode=1),
    RowSpec(name="DSA multi K=3 bs256", group="dsa copy", families=(JIT,), ours=(COPY_MULTI,), upstream=(COPY_MULTI,),
            build=lambda ctx, up: build_copy_multi(ctx, up, bs=256, name="DSA multi K=3 bs256")),
)
GEN_ROWS = tuple(_gen_spec(0, bs, k) for bs in (1, 64, 256) for k in (1, 2, 3, 5)) + (_gen_spec(1, 64, 1),)
