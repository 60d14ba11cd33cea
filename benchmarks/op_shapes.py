"""Fixed-shape microbenchmarks at serving shapes, fused vs eager.

    python benchmarks/op_shapes.py [--json PATH] [--publish DIR]

For each case: host us per call (wall time to issue one call, median and p99;
the dispatch cost a server pays per replay), device us per call (CUDA events
around replays of a graph holding several calls on rotating input sets, so L2
does not serve repeated gathers), and the memory floor: bytes that must move
(strided page-boundary gathers count 64 bytes each, see GATHER) over the
measured device-to-device copy bandwidth. The KV read-table cases also time
the bare gather of the same pages (``sgl_meta.bench.bare_gather``, the
ceiling) on the same inputs; the unified-pool step (the update building its
page tables through v2p in one launch) is timed beside SGLang 0.5.23's split of
the same work (seqlens-only update + one read-table build per table, our
kernels). GPU only.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

import sgl_meta
from sgl_meta import reference
from sgl_meta.bench import publish
from sgl_meta.bench.report import environment, environment_line, write_json
from sgl_meta.bench.workloads.base import SECTOR

GATHER = SECTOR  # DRAM bytes one scattered 4- or 8-byte load costs


def copy_bandwidth(nbytes: int = 1 << 30) -> float:
    """Bytes/s of a large D2D copy, counting bytes read plus bytes written."""
    src = torch.empty(nbytes // 4, dtype=torch.int32, device="cuda").random_()
    dst = torch.empty_like(src)
    for _ in range(3):
        dst.copy_(src)
    times = []
    for _ in range(10):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        dst.copy_(src)
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / 1e3)
    return 2 * nbytes / statistics.median(times)


def host_us(call, n: int = 300) -> tuple[float, float]:
    for _ in range(20):
        call()
    torch.cuda.synchronize()
    samples = []
    for i in range(n):
        t0 = time.perf_counter_ns()
        call()
        samples.append((time.perf_counter_ns() - t0) / 1e3)
        if i % 16 == 15:  # keep the launch queue from filling up
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    samples.sort()
    return statistics.median(samples), samples[int(0.99 * (len(samples) - 1))]


def _graph(calls) -> torch.cuda.CUDAGraph:
    """A CUDA graph of every call in `calls` (warmed up on a side stream first)."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for c in calls:
            c()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in calls:
            c()
    g.replay()
    torch.cuda.synchronize()
    return g


def _replay_us(g: torch.cuda.CUDAGraph, n_calls: int) -> float:
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    g.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1e3 / n_calls


def device_us(calls, replays: int = 30) -> float:
    """Median per-call device time of a graph that runs every call in `calls`."""
    g = _graph(calls)
    return statistics.median(_replay_us(g, len(calls)) for _ in range(replays))


def device_us_paired(calls_a, calls_b, replays: int = 200) -> dict:
    """Two graphs (A: ours, B: the third column) timed in alternation, A B then B A.

    Sequential blocks of replays drift with the clocks (at bs 1 by up to 10%);
    alternating replays see the same drift, so the median of the per-round ratios
    A/B is steady where the ratio of two separate medians is not. Returns both
    medians (us per call) and the ratio's median and quartiles.
    """
    ga, gb = _graph(calls_a), _graph(calls_b)
    ta, tb = [], []
    for i in range(replays):
        if i % 2:
            tb.append(_replay_us(gb, len(calls_b)))
            ta.append(_replay_us(ga, len(calls_a)))
        else:
            ta.append(_replay_us(ga, len(calls_a)))
            tb.append(_replay_us(gb, len(calls_b)))
    q = statistics.quantiles([x / y for x, y in zip(ta, tb)], n=4)
    return dict(a_us=statistics.median(ta), b_us=statistics.median(tb), ratio=q[1], ratio_p25=q[0], ratio_p75=q[2])


def trtllm_metadata_case(bs, pages, page_size, swa, live_pages_only, sets=8):
    """update_trtllm_mha_graph_metadata on a page-aligned, shuffled KV pool."""
    ctx = pages * page_size
    pool_rows = bs * sets
    dev = "cuda"
    n_pages_total = pool_rows * pages
    perm = torch.randperm(n_pages_total, device=dev, dtype=torch.int64)
    tok = torch.arange(ctx, device=dev) % page_size
    req_to_token = (perm.view(pool_rows, pages).repeat_interleave(page_size, 1) * page_size + tok).to(torch.int32)
    swa_mapping = None
    if swa:
        m = n_pages_total * page_size
        swa_mapping = torch.randint(-1, m // 4, (m,), device=dev, dtype=torch.int64)
    i32 = dict(dtype=torch.int32, device=dev)
    outs = dict(
        cache_seqlens=torch.empty(bs, **i32),
        cu_seqlens_k=torch.empty(bs + 1, **i32),
        page_table=torch.empty(bs, pages, **i32),
        swa_page_table=torch.empty(bs, pages, **i32) if swa else None,
        swa_out_cache_loc=torch.empty(bs, dtype=torch.int64, device=dev) if swa else None,
    )
    kwargs = []
    for s in range(sets):
        kwargs.append(dict(
            req_pool_indices=torch.arange(s * bs, (s + 1) * bs, device=dev),
            seq_lens=torch.randint(1, ctx + 1 - page_size, (bs,), device=dev, dtype=torch.int32),
            req_to_token=req_to_token, swa_mapping=swa_mapping,
            out_cache_loc=torch.randint(0, n_pages_total * page_size, (bs,), device=dev) if swa else None,
            bs=bs, seqlen_offset=1, max_seq_pages=pages, page_size=page_size,
            live_pages_only=live_pages_only, **outs,
        ))
    live = sum(float(((k["seq_lens"].float() + 1) / page_size).ceil().clamp(max=pages).sum()) for k in kwargs) / sets
    cols = live if live_pages_only else bs * pages
    per_page = GATHER + 4 + ((GATHER + 4) if swa else 0)
    nbytes = cols * per_page + bs * (8 + 4 + 4 + 4)
    return kwargs, nbytes


def trtllm_ragged_case(bs, pages, page_size, swa, sets=8):
    """Ragged target verify (docs/operators/trtllm_mha_metadata.md): per-row verify lengths 1..4 as seqlen_offsets
    and qlens (q_mode CUMSUM), live pages; compare with the uniform `live` case."""
    kwargs, nbytes = trtllm_metadata_case(bs, pages, page_size, swa, True, sets)
    cu_q = torch.empty(bs + 1, dtype=torch.int32, device="cuda")
    for k in kwargs:
        verify = torch.randint(1, 5, (bs,), device="cuda", dtype=torch.int32)
        k.update(seqlen_offset=0, seqlen_offsets=verify, qlens=verify, q_mode=sgl_meta.Q_MODE_CUMSUM, cu_seqlens_q=cu_q)
    return kwargs, nbytes + bs * 8


def trtllm_multi_case(bs, pages, page_size, swa, k_sets, sets=8):
    """Multi-step draft (docs/operators/trtllm_mha_metadata.md): K - 1 = k_sets destination sets with offsets
    1..k_sets in one launch; the floor gathers each live page once and writes
    it k_sets times."""
    kwargs, _ = trtllm_metadata_case(bs, pages, page_size, swa, True, sets)
    i32 = dict(dtype=torch.int32, device="cuda")
    dst = [dict(cache_seqlens=torch.empty(bs, **i32), cu_seqlens_k=torch.empty(bs + 1, **i32),
                page_table=torch.empty(bs, pages, **i32),
                swa_page_table=torch.empty(bs, pages, **i32) if swa else None,
                swa_out_cache_loc=torch.empty(bs, dtype=torch.int64, device="cuda") if swa else None)
           for _ in range(k_sets)]
    live = 0.0
    for k in kwargs:
        for name in dst[0]:
            k[name] = None if dst[0][name] is None else [d[name] for d in dst]
        k["seqlen_offset"] = list(range(1, k_sets + 1))
        live += float(((k["seq_lens"].float() + k_sets) / page_size).ceil().clamp(max=pages).sum()) / sets
    per_page = GATHER + 4 * k_sets + ((GATHER + 4 * k_sets) if swa else 0)
    return kwargs, live * per_page + bs * (8 + 8 * k_sets)


def page_table_case(bs, pages, page_size, swa, sets=8):
    """build_trtllm_mha_page_table with uniform random lengths in [1, pages * page_size]."""
    kwargs, _ = trtllm_metadata_case(bs, pages, page_size, swa, False, sets)
    out = []
    live = 0.0
    for k in kwargs:
        lens = torch.randint(1, pages * page_size + 1, (bs,), device="cuda", dtype=torch.int32)
        live += float(((lens.float()) / page_size).ceil().sum()) / sets
        out.append(dict(req_to_token=k["req_to_token"], req_pool_indices=k["req_pool_indices"],
                        cache_seqlens=lens, page_table=k["page_table"], page_size=page_size,
                        swa_page_table=k["swa_page_table"], full_to_swa=k["swa_mapping"]))
    nbytes = live * (GATHER + 4 + ((GATHER + 4) if swa else 0)) + bs * 16
    return out, nbytes


def dsa_copy_case(bs, mode, k_sets=None, sets=16, topk=2048, max_ctx=163840, page_size=64, draft=4):
    """DeepSeek-V3.2 DSA metadata copy: top-k 2048 page_table_1, real page table of
    max-context width, FlashMLA metadata [66, 8]; TARGET_VERIFY has bs * 4 rows."""
    dev, i32 = "cuda", dict(dtype=torch.int32, device="cuda")
    rows = bs if mode == 0 else bs * draft
    n = rows  # metadata entries (bs in DECODE, S = bs * draft otherwise)
    real_w = max_ctx // page_size

    def rnd(*shape):
        return torch.randint(0, 1 << 20, shape, **i32)

    def dst_set():
        return dict(cache_seqlens_dst=rnd(bs), cu_seqlens_k_dst=rnd(bs + 1), page_table_1_dst=rnd(rows, topk),
                    dsa_cache_seqlens_dst=rnd(n), dsa_cu_seqlens_k_dst=rnd(n + 1),
                    real_page_table_dst=rnd(rows, real_w), flashmla_num_splits_dst=rnd(n + 1),
                    flashmla_metadata_dst=rnd(66, 8), **({"seqlens_expanded_dst": rnd(n)} if mode else {}))
    dsts = [dst_set() for _ in range(k_sets or 1)]
    if k_sets:
        dst_kw = {k: [d[k] for d in dsts] for k in dsts[0]}
    else:
        dst_kw = dsts[0]
    out = []
    for _ in range(sets):
        out.append(dict(
            cache_seqlens_src=rnd(bs), cu_seqlens_k_src=rnd(bs + 1), page_indices_src=rnd(rows, topk),
            dsa_cache_seqlens_src=rnd(n), dsa_cu_seqlens_k_src=rnd(n + 1), real_page_table_src=rnd(rows, real_w),
            flashmla_num_splits_src=rnd(n + 1), flashmla_metadata_src=rnd(66, 8),
            **({"seqlens_expanded_src": rnd(n)} if mode else {}),
            bs=bs, forward_mode=mode, max_len=topk, max_seqlen_k=topk, seqlens_expanded_size=n if mode else 0,
            **dst_kw))
    elems = bs + bs + rows * topk + n + n + rows * real_w + (n + 1) + 66 * 8 + (n if mode else 0)
    nbytes = elems * 4 * (1 + (k_sets or 1))  # each element read once, written per set
    return out, nbytes


def kv_read_case(bs, pages, page_size, form, max_len=None, delta=0, zero_tail=False, sets=8):
    """A unified pool: req_to_token holds scattered virtual ids, v2p maps them to
    shuffled physical pages (5% freed, -1); uniform random lengths in [1, max_len]."""
    dev = "cuda"
    ctx = pages * page_size
    rows = bs * sets
    vpages = rows * pages + 1
    perm = torch.randperm(vpages - 1, device=dev, dtype=torch.int64) + 1
    tok = torch.arange(ctx, device=dev) % page_size
    req_to_token = (perm.view(rows, pages).repeat_interleave(page_size, 1) * page_size + tok).to(torch.int32)
    v2p = torch.randperm(vpages, device=dev, dtype=torch.int64)
    v2p[torch.rand(vpages, device=dev) < 0.05] = -1
    hi = (max_len or ctx) - delta
    kwargs, live, live_tokens = [], 0.0, 0.0
    lens_sets = [torch.randint(1, hi + 1, (bs,), device=dev, dtype=torch.int32) for _ in range(sets)]
    if form == "table":
        out = torch.empty(bs, pages, dtype=torch.int32, device=dev)
    else:
        cap = max(int(lens.sum()) for lens in lens_sets) + bs * delta
        out = torch.empty(cap, dtype=torch.int32, device=dev)
    for s, lens in enumerate(lens_sets):
        kw = dict(req_to_token=req_to_token, req_pool_indices=torch.arange(s * bs, (s + 1) * bs, device=dev,
                                                                           dtype=torch.int32),
                  seq_lens=lens, out=out, page_size=page_size, v2p=v2p, seq_len_delta=delta)
        n = lens.long() + delta
        live += float(((n + page_size - 1) // page_size).clamp(max=pages).sum()) / sets
        if form == "table":
            kw.update(max_pages=pages, zero_tail=zero_tail)
        else:
            kw["indptr"] = torch.cat([n.new_zeros(1), n.cumsum(0)]).to(torch.int32)
            live_tokens += float(n.sum()) / sets
        kwargs.append(kw)
    if form == "table":
        nbytes = live * (2 * GATHER + 4) + bs * 8 + (bs * pages * 4 if zero_tail else 0)
    else:
        nbytes = live * 2 * GATHER + live_tokens * 4 + bs * 12
    return kwargs, nbytes


def unified_step_case(bs, pages, page_size, swa, sets=8):
    """One decode refresh of TRT-LLM MHA on SGLang 0.5.23's unified pool: the
    update with the page tables (and the SWA table) built through v2p / swa_v2p in the
    same launch, as the plugin records it. Compared (``split`` column) with 0.5.23's
    replay work done by our kernels: the seqlens-only update (``skip_page_table``) plus
    one read-table build per table (``copy_page_table`` -> ``build_kv_read_table``)."""
    kwargs_kv, _ = kv_read_case(bs, pages, page_size, "table", sets=sets)
    dev = "cuda"
    vpages = kwargs_kv[0]["v2p"].numel()
    swa_v2p = torch.randperm(vpages, device=dev, dtype=torch.int64) if swa else None
    i32 = dict(dtype=torch.int32, device=dev)
    outs = dict(cache_seqlens=torch.empty(bs, **i32), cu_seqlens_k=torch.empty(bs + 1, **i32),
                page_table=torch.empty(bs, pages, **i32),
                swa_page_table=torch.empty(bs, pages, **i32) if swa else None)
    kwargs, live = [], 0.0
    for k in kwargs_kv:
        kwargs.append(dict(req_pool_indices=k["req_pool_indices"], seq_lens=k["seq_lens"],
                           req_to_token=k["req_to_token"], bs=bs, seqlen_offset=1, max_seq_pages=pages,
                           page_size=page_size, live_pages_only=True, v2p=k["v2p"], swa_v2p=swa_v2p, **outs))
        live += float(((k["seq_lens"].long() + page_size) // page_size).clamp(max=pages).sum()) / sets
    tables = 2 if swa else 1
    nbytes = live * (GATHER + tables * (GATHER + 4)) + bs * 16
    return kwargs, nbytes


def _unified_split():
    """0.5.23's unified-pool replay with our kernels: seqlens-only update + a table build per table."""
    def run(*, req_pool_indices, seq_lens, req_to_token, page_table, swa_page_table, v2p, swa_v2p,
            max_seq_pages, page_size, **kw):
        sgl_meta.update_trtllm_mha_graph_metadata(
            req_pool_indices=req_pool_indices, seq_lens=seq_lens, req_to_token=req_to_token,
            page_table=None, swa_page_table=None, max_seq_pages=max_seq_pages, page_size=page_size,
            skip_page_table=True, **kw)
        for out, table in ((page_table, v2p), (swa_page_table, swa_v2p)):
            if out is not None:
                sgl_meta.kv_read_page_table(req_to_token=req_to_token, req_pool_indices=req_pool_indices,
                                            seq_lens=seq_lens, v2p=table, page_size=page_size,
                                            max_pages=max_seq_pages, out=out, seq_len_delta=kw["seqlen_offset"])
    return run


def _bare_gather(form):
    from sgl_meta.bench import bare_gather

    if form == "table":
        return lambda zero_tail=False, **kw: bare_gather.page_table(**kw)
    return bare_gather.token_stream


def dsa_gen_case(bs, mode, k_sets, sets=8, width=163840, topk=2048, page_size=64, draft=4):
    """fused_dsa_metadata at DeepSeek-V3.2 MTP shapes: token table 163,840 wide,
    real table / 64, top-k 2048; lengths log-normal like the trace simulator's
    (median ~1,400 tokens, heavy tail), distinct req_to_token rows per input set.
    Floor: live tokens read once, written K times (x draft rows in verify)."""
    dev, i32 = "cuda", dict(dtype=torch.int32, device="cuda")
    g = torch.Generator().manual_seed(bs * 31 + mode * 7 + k_sets)
    rows = bs if mode == 0 else bs * draft
    real_w = -(-width // page_size)
    req_to_token = torch.randint(0, 1 << 26, (bs * sets, width), generator=g, dtype=torch.int32).to(dev)

    def out(*shape):
        return [torch.randint(0, 1 << 20, shape, generator=g, dtype=torch.int32).to(dev) for _ in range(k_sets)]

    dst = dict(cache_seqlens=out(bs), cu_seqlens_k=out(bs + 1), dsa_cache_seqlens=out(rows),
               dsa_cu_seqlens_k=out(rows + 1), page_table_1=out(rows, width), real_page_table=out(rows, real_w))
    if mode:
        dst.update(seqlens_expanded=out(rows), paged_mqa_ctx_lens_2d=out(bs, draft))
    kwargs, live_tokens, live_pages = [], 0, 0
    for s in range(sets):
        lens = (torch.empty(bs).log_normal_(7.25, 1.3, generator=g)).clamp(1, width - draft).long()
        cache = lens + (draft if mode else 0)
        live_tokens += int(cache.clamp(max=width).sum()) / sets
        live_pages += int(((cache.clamp(max=width) + page_size - 1) // page_size).sum()) / sets
        kwargs.append(dict(seq_lens=lens.to(dev), req_pool_indices=torch.arange(s * bs, (s + 1) * bs, device=dev),
                           req_to_token=req_to_token, forward_mode=mode, bs=bs, max_seqlen_k=width,
                           dsa_index_topk=topk, page_size=page_size, next_n=draft if mode else None, **dst))
    per_row = draft if mode else 1
    nbytes = 4 * live_tokens + k_sets * per_row * 4 * (live_tokens + live_pages) + bs * 12 + k_sets * 4 * (2 * bs + 2 * rows + 2)
    return kwargs, nbytes


def _gen_then_copy(gen, copy):
    """SGLang 0.5.23's MTP replay: generator into staging (K = 1), then K full-width copies."""
    def run(*, seq_lens, req_pool_indices, req_to_token, bs, max_seqlen_k, dsa_index_topk, page_size, stage, **dst):
        pages = -(-max_seqlen_k // page_size)
        gen(seq_lens, req_pool_indices, req_to_token, stage["cache_seqlens"], stage["cu_seqlens_k"],
            stage["page_table_1"], stage["dsa_cache_seqlens"], stage["dsa_cu_seqlens_k"], stage["real_page_table"],
            bs, max_seqlen_k, dsa_index_topk, page_size)
        copy(cache_seqlens_src=stage["cache_seqlens"], cu_seqlens_k_src=stage["cu_seqlens_k"],
             page_indices_src=stage["page_table_1"], dsa_cache_seqlens_src=stage["dsa_cache_seqlens"],
             dsa_cu_seqlens_k_src=stage["dsa_cu_seqlens_k"], real_page_table_src=stage["real_page_table"][:, :pages],
             **{f"{k}_dst": v for k, v in dst.items()}, bs=bs, max_len=max_seqlen_k, seqlens_expanded_size=bs)
    return run


def dsa_gen_then_copy_case(bs, k_sets, **kw):
    """dsa_gen_case's decode calls, done the upstream way (same floor: the bytes the refresh must move)."""
    kwargs, nbytes = dsa_gen_case(bs, 0, k_sets, **kw)
    w = kwargs[0]["page_table_1"][0].shape[1]
    stage = dict(cache_seqlens=torch.empty(bs, dtype=torch.int32, device="cuda"),
                 cu_seqlens_k=torch.empty(bs + 1, dtype=torch.int32, device="cuda"),
                 page_table_1=torch.zeros(bs, w, dtype=torch.int32, device="cuda"),
                 dsa_cache_seqlens=torch.empty(bs, dtype=torch.int32, device="cuda"),
                 dsa_cu_seqlens_k=torch.empty(bs + 1, dtype=torch.int32, device="cuda"),
                 real_page_table=torch.zeros(bs, -(-w // 64), dtype=torch.int32, device="cuda"))
    for k in kwargs:
        for drop in ("forward_mode", "next_n"):
            k.pop(drop)
        k["stage"] = stage
    return kwargs, nbytes


CASES = {
    "update_trtllm_mha_graph_metadata bs256x2048p64": (trtllm_metadata_case, (256, 2048, 64, False, False)),
    "update_trtllm_mha_graph_metadata bs256x2048p64 swa": (trtllm_metadata_case, (256, 2048, 64, True, False)),
    "update_trtllm_mha_graph_metadata bs256x2048p64 live": (trtllm_metadata_case, (256, 2048, 64, False, True)),
    "update_trtllm_mha_graph_metadata bs256x2048p64 swa live": (trtllm_metadata_case, (256, 2048, 64, True, True)),
    "update_trtllm_mha_graph_metadata bs256x2048p64 ragged verify": (trtllm_ragged_case, (256, 2048, 64, False)),
    "update_trtllm_mha_graph_metadata bs256x2048p64 ragged verify swa": (trtllm_ragged_case, (256, 2048, 64, True)),
    "update_trtllm_mha_graph_metadata_multi bs256x2048p64 K-1=3": (trtllm_multi_case, (256, 2048, 64, False, 3)),
    "update_trtllm_mha_graph_metadata_multi bs256x2048p64 K-1=3 swa": (trtllm_multi_case, (256, 2048, 64, True, 3)),
    "update_trtllm_mha_graph_metadata bs1x2048p64": (trtllm_metadata_case, (1, 2048, 64, False, False)),
    "update_trtllm_mha_graph_metadata bs32x8192p16": (trtllm_metadata_case, (32, 8192, 16, False, False)),
    "build_trtllm_mha_page_table bs256x2048p64": (page_table_case, (256, 2048, 64, False)),
    "build_trtllm_mha_page_table bs256x2048p64 swa": (page_table_case, (256, 2048, 64, True)),
    "build_trtllm_mha_page_table bs1x2048p64": (page_table_case, (1, 2048, 64, False)),
    "fused_metadata_copy decode bs256": (dsa_copy_case, (256, 0)),
    "fused_metadata_copy target_verify bs64x4": (dsa_copy_case, (64, 1)),
    "fused_metadata_copy decode bs1": (dsa_copy_case, (1, 0)),
    "fused_metadata_copy_multi decode bs256 K=3": (dsa_copy_case, (256, 0, 3)),
    "fused_metadata_copy_multi verify bs64x4 K=3": (dsa_copy_case, (64, 1, 3)),
    "kv_read_page_table bs256x2048p64 verify+4": (kv_read_case, (256, 2048, 64, "table", None, 4)),
    "kv_read_page_table bs256x2048p64 ctx<=8k": (kv_read_case, (256, 2048, 64, "table", 8192)),
    "kv_read_page_table bs256x8192p16 ctx<=8k": (kv_read_case, (256, 8192, 16, "table", 8192)),
    "kv_read_page_table bs1x2048p64": (kv_read_case, (1, 2048, 64, "table")),
    # Long rows where the grid cap makes each block loop over 4 steps of its row.
    "kv_read_page_table bs256x8192p16": (kv_read_case, (256, 8192, 16, "table", None, 0, False, 2)),
    "kv_read_page_table bs256x2048p64 zero_tail": (kv_read_case, (256, 2048, 64, "table", 8192, 0, True)),
    "unified_step bs256x2048p64": (unified_step_case, (256, 2048, 64, False)),
    "unified_step bs256x2048p64 swa": (unified_step_case, (256, 2048, 64, True)),
    "kv_read_token_stream bs256x2048p64 ctx<=8k": (kv_read_case, (256, 2048, 64, "stream", 8192)),
    "kv_read_token_stream bs32x2048p64": (kv_read_case, (32, 2048, 64, "stream")),
    "kv_read_token_stream bs256x8192p16 ctx<=8k": (kv_read_case, (256, 8192, 16, "stream", 8192)),
    # docs/operators/dsa_metadata.md: DSA MTP metadata generated into K graphs (163,840-token width).
    "fused_dsa_metadata decode bs64 K=3": (dsa_gen_case, (64, 0, 3)),
    "dsa_gen_then_copy decode bs64 K=3": (dsa_gen_then_copy_case, (64, 3)),
    "fused_dsa_metadata decode bs256 K=3": (dsa_gen_case, (256, 0, 3)),
    "fused_dsa_metadata decode bs1 K=3": (dsa_gen_case, (1, 0, 3)),
    "fused_dsa_metadata decode bs64 K=5": (dsa_gen_case, (64, 0, 5)),
    "fused_dsa_metadata verify bs64x4 K=1": (dsa_gen_case, (64, 1, 1)),
}
OPS = {
    "update_trtllm_mha_graph_metadata": (sgl_meta.update_trtllm_mha_graph_metadata,
                                         reference.update_trtllm_mha_graph_metadata),
    "update_trtllm_mha_graph_metadata_multi": (sgl_meta.update_trtllm_mha_graph_metadata_multi,
                                               reference.update_trtllm_mha_graph_metadata_multi),
    "build_trtllm_mha_page_table": (sgl_meta.build_trtllm_mha_page_table,
                                    reference.build_trtllm_mha_page_table),
    "fused_metadata_copy": (sgl_meta.fused_metadata_copy, reference.fused_metadata_copy),
    "fused_metadata_copy_multi": (sgl_meta.fused_metadata_copy_multi, reference.fused_metadata_copy_multi),
    "kv_read_page_table": (sgl_meta.kv_read_page_table, reference.kv_read_page_table),
    "fused_dsa_metadata": (sgl_meta.fused_dsa_metadata, reference.fused_dsa_metadata),
    # the upstream way (our drop-in generator, our copy op) vs its eager equivalent
    "dsa_gen_then_copy": (_gen_then_copy(sgl_meta.fused_dsa_decode_metadata, sgl_meta.fused_metadata_copy_multi),
                          _gen_then_copy(reference.fused_dsa_decode_metadata, reference.fused_metadata_copy_multi)),
    "kv_read_token_stream": (sgl_meta.kv_read_token_stream, reference.kv_read_token_stream),
    "unified_step": (sgl_meta.update_trtllm_mha_graph_metadata, reference.update_trtllm_mha_graph_metadata),
}
# A third column: the bare gather of the same pages (not for zero_tail, which it does not
# do), or for the unified-pool step 0.5.23's split of the same work into three launches.
BASELINES = {
    "kv_read_page_table": lambda: ("gather", _bare_gather("table")),
    "kv_read_token_stream": lambda: ("gather", _bare_gather("stream")),
    "unified_step": lambda: ("split", _unified_split()),
}


def markdown(doc: dict) -> str:
    """The rows as a markdown table, with the run's environment."""
    rows = doc["rows"]
    eager = any("eager_dev_us" in r for r in rows)
    lines = ["### sgl_meta op shapes: fixed shapes, device us per call", "", environment_line(doc["environment"]), "",
             "| case | host us (p99) | device us | " + ("eager host / device us | " if eager else "")
             + "floor us | third column us | ours / third [quartiles] |",
             "|---|---|---|" + ("---|" if eager else "") + "---|---|---|"]
    for r in rows:
        third = next((k for k in ("gather", "split") if f"{k}_dev_us" in r), None)
        cells = [r["case"], f"{r['fused_host_med_us']:.1f} ({r['fused_host_p99_us']:.1f})", f"{r['fused_dev_us']:.2f}"]
        if eager:
            cells.append(f"{r['eager_host_med_us']:.1f} / {r['eager_dev_us']:.2f}" if "eager_dev_us" in r else "-")
        cells.append(f"{r['floor_us']:.2f}")
        if third:
            cells += [f"{r[third + '_dev_us']:.2f} ({third})",
                      f"{r['third_ratio']:.2f}x [{r['third_ratio_p25']:.2f}-{r['third_ratio_p75']:.2f}]"]
        else:
            cells += ["-", "-"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"- Copy bandwidth {doc['copy_bandwidth_GBps']:.0f} GB/s (read + write); floor = the bytes a call "
              f"must move over it, a scattered gather counting {GATHER} B.",
              "- device: median over replays of a CUDA graph holding the case's calls on 8 input sets (no L2 "
              "flush); host: median (p99) wall time of one eager call.",
              "- Third column: the bare gather of the same pages (`sgl_meta.bench.bare_gather`, the ceiling), or "
              "for the unified-pool step SGLang 0.5.23's split of the same work (seqlens-only update + one table "
              "build per table, our kernels). ours / third: median of per-pair ratios, the two graphs replayed in "
              "alternation, quartiles in brackets."]
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write results here")
    ap.add_argument("--publish", metavar="DIR",
                    help="write <date>-<gpu>-op-shapes.{json,md} into DIR (e.g. benchmarks/results)")
    ap.add_argument("--only", action="append", default=[], metavar="TEXT",
                    help="run only the cases whose name contains TEXT (repeatable)")
    ap.add_argument("--no-eager", action="store_true", help="skip the eager reference column")
    ap.add_argument("--replays", type=int, default=200,
                    help="alternating replays of ours and the third column (default 200)")
    args = ap.parse_args()
    if not torch.cuda.is_available():  # (not an assert: python -O would skip it)
        ap.exit(2, "op_shapes.py measures GPU kernels and needs a CUDA device; on CPU run python -m sgl_meta.bench\n")
    bw = copy_bandwidth()
    rows = []
    for name, (make, params) in CASES.items():
        if args.only and not any(t in name for t in args.only):
            continue
        op = name.split()[0]
        fused, ref = OPS[op]
        kwargs, nbytes = make(*params)
        r = dict(case=name, floor_us=nbytes / bw * 1e6, bytes=nbytes)
        impls = [("fused", fused)] + ([] if args.no_eager else [("eager", ref)])
        third = BASELINES[op]() if op in BASELINES and "zero_tail" not in name else None
        for label, fn in impls + ([third] if third else []):
            r[f"{label}_host_med_us"], r[f"{label}_host_p99_us"] = host_us(lambda: fn(**kwargs[0]))
        if not args.no_eager:
            r["eager_dev_us"] = device_us([lambda k=k: ref(**k) for k in kwargs])
        if third:
            label, fn = third
            p = device_us_paired([lambda k=k: fused(**k) for k in kwargs], [lambda k=k: fn(**k) for k in kwargs],
                                 replays=args.replays)
            r["fused_dev_us"], r[f"{label}_dev_us"] = p["a_us"], p["b_us"]
            r["third_ratio"], r["third_ratio_p25"], r["third_ratio_p75"] = p["ratio"], p["ratio_p25"], p["ratio_p75"]
        else:
            r["fused_dev_us"] = device_us([lambda k=k: fused(**k) for k in kwargs])
        rows.append(r)
    doc = dict(environment=environment(torch.device("cuda", torch.cuda.current_device())), args=vars(args),
               copy_bandwidth_GBps=bw / 1e9, rows=rows)
    if args.json:
        write_json(args.json, doc)
    if args.publish:
        for path in publish.write(args.publish, "op-shapes", doc, markdown(doc)):
            print(f"wrote {path}")
    print(markdown(doc))


if __name__ == "__main__":
    main()
