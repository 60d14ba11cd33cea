"""Small-size device time of the TRT-LLM MHA ops: where a launch is a
few microseconds and latency, not bandwidth, decides.

    python benchmarks/small_sizes.py [--json PATH] [--upstream] [--launches N]
    python benchmarks/small_sizes.py --list-kernels       # kernel names per case
    ncu --nvtx --nvtx-include "small/" --set full -o small \\
        python benchmarks/small_sizes.py --ncu            # one eager call per case
    (each call sits in the NVTX range "<case>" nested in "small": one case alone is
    --nvtx-include "small/update bs1/"; add --only to run fewer cases)

Kernel names (ncu --kernel-name regex:...): ours ``metadata_kernel`` (update,
templated on the number of sets: ``metadata_kernel<1>`` .. ``<4>``),
``seqlens_kernel`` (seqlens-only launches), ``build_trtllm_mha_page_table_kernel``;
SGLang 0.5.23's ``update_trtllm_mha_graph_metadata_kernel`` and
``create_trtllm_mha_kv_indices_triton``. ``--list-kernels`` prints what each case
launches.

Cases: update_trtllm_mha_graph_metadata at bs 1, 8, 64, 256 (2048 pages of 64,
live pages, as SGLang 0.5.23 records it), with SWA, seqlens-only
(skip_page_table), ragged verify (per-row offsets) next to the uniform update,
the multi-step draft update (K - 1 = 3 sets) next to three single updates, and
build_trtllm_mha_page_table at the same batch sizes.

Device time: one CUDA graph of N back-to-back launches, each on its own input
set (different request rows and lengths, so repeated gathers do not all hit
L2), replayed R times between CUDA events; reported per launch (median, p10,
p90 over replays). ``--upstream`` adds SGLang 0.5.23's Triton kernels on the
same inputs when the installed ``sglang`` package provides them (imported from
the installed package, never copied here; ``SGLMETA_UPSTREAM`` = a site dir holding
``sglang/`` or the sglang wheel takes that instead, as ``--upstream PATH`` of the
benchmark does).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics

import torch

import sgl_meta

PAGES, PAGE_SIZE = 2048, 64
BATCHES = (1, 8, 64, 256)


POOL_ROWS = 512  # req_to_token rows: 256 MiB of int32, past L2 in gathered sectors


def make_inputs(bs: int, sets: int, swa: bool, seed: int = 0):
    """`sets` input sets (random distinct pool rows, random lengths) over one
    shuffled, page-aligned KV pool."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    dev = "cuda"
    rows = POOL_ROWS
    perm = torch.randperm(rows * PAGES, device=dev, generator=g)
    tok = torch.arange(PAGES * PAGE_SIZE, device=dev) % PAGE_SIZE
    req_to_token = (perm.view(rows, PAGES).repeat_interleave(PAGE_SIZE, 1) * PAGE_SIZE + tok).to(torch.int32)
    slots = rows * PAGES * PAGE_SIZE
    mapping = torch.randint(0, slots // 4, (slots + 1,), device=dev, generator=g) if swa else None
    ins = []
    for s in range(sets):
        ins.append(dict(
            req_pool_indices=torch.randperm(rows, device=dev, generator=g)[:bs],
            seq_lens=torch.randint(1, PAGES * PAGE_SIZE - 8 * PAGE_SIZE, (bs,), device=dev, generator=g),
            verify=torch.randint(1, 5, (bs,), device=dev, generator=g, dtype=torch.int32),
            out_cache_loc=torch.randint(0, slots, (bs,), device=dev, generator=g) if swa else None,
        ))
    return req_to_token, mapping, ins


def outputs(bs: int, swa: bool, k: int = 1):
    i32 = dict(dtype=torch.int32, device="cuda")

    def one():
        return dict(cache_seqlens=torch.zeros(bs, **i32), cu_seqlens_k=torch.zeros(bs + 1, **i32),
                    cu_seqlens_q=torch.zeros(bs + 1, **i32), page_table=torch.zeros(bs, PAGES, **i32),
                    swa_page_table=torch.zeros(bs, PAGES, **i32) if swa else None,
                    swa_out_cache_loc=torch.zeros(bs, dtype=torch.int64, device="cuda") if swa else None)
    return [one() for _ in range(k)]


def _update_kw(x, r2t, mapping, o, seqlen_offset, swa, skip=False) -> dict:
    """The keywords ours and SGLang's single-set update both take: input set ``x``
    into output set ``o``."""
    kw = dict(req_pool_indices=x["req_pool_indices"], seq_lens=x["seq_lens"], req_to_token=r2t,
              cache_seqlens=o["cache_seqlens"], cu_seqlens_k=o["cu_seqlens_k"],
              page_table=None if skip else o["page_table"], bs=x["seq_lens"].numel(), seqlen_offset=seqlen_offset,
              max_seq_pages=PAGES, page_size=PAGE_SIZE, swa_mapping=mapping, skip_page_table=skip)
    if swa and not skip:
        kw.update(swa_page_table=o["swa_page_table"], out_cache_loc=x["out_cache_loc"],
                  swa_out_cache_loc=o["swa_out_cache_loc"])
    return kw


def _page_table(fn, swa):
    """A page-table builder case for ``fn`` (ours and SGLang's take the same keywords)."""
    def build(x, r2t, mapping, outs):
        o = outs[0]
        lens = (x["seq_lens"] + 1).to(torch.int32)
        kw = dict(req_to_token=r2t, req_pool_indices=x["req_pool_indices"], cache_seqlens=lens,
                  page_table=o["page_table"], page_size=PAGE_SIZE)
        if swa:
            kw.update(swa_page_table=o["swa_page_table"], full_to_swa=mapping)
        return lambda: fn(**kw)
    return build


# ---- cases: name -> (bs, builder(ins set, req_to_token, mapping, outs) -> callable) ----------
def ours_update(swa=False, skip=False, ragged=False):
    def build(x, r2t, mapping, outs):
        o = outs[0]
        kw = dict(_update_kw(x, r2t, mapping, o, 0 if ragged else 1, swa, skip), live_pages_only=True)
        if ragged:
            kw.update(seqlen_offsets=x["verify"], qlens=x["verify"], q_mode=sgl_meta.Q_MODE_CUMSUM,
                      cu_seqlens_q=o["cu_seqlens_q"])
        return lambda: sgl_meta.update_trtllm_mha_graph_metadata(**kw)
    return build


def ours_multi(swa=False, k=3):
    def build(x, r2t, mapping, outs):
        kw = dict(req_pool_indices=x["req_pool_indices"], seq_lens=x["seq_lens"], req_to_token=r2t,
                  cache_seqlens=[o["cache_seqlens"] for o in outs], cu_seqlens_k=[o["cu_seqlens_k"] for o in outs],
                  page_table=[o["page_table"] for o in outs], bs=x["seq_lens"].numel(),
                  seqlen_offset=list(range(1, k + 1)), max_seq_pages=PAGES, page_size=PAGE_SIZE,
                  live_pages_only=True, swa_mapping=mapping)
        if swa:
            kw.update(swa_page_table=[o["swa_page_table"] for o in outs], out_cache_loc=x["out_cache_loc"],
                      swa_out_cache_loc=[o["swa_out_cache_loc"] for o in outs])
        return lambda: sgl_meta.update_trtllm_mha_graph_metadata_multi(**kw)
    return build


def ours_singles(swa=False, k=3):
    """What SGLang 0.5.23 records for K - 1 = k draft steps: k updates."""
    def build(x, r2t, mapping, outs):
        calls = [dict(_update_kw(x, r2t, mapping, o, step + 1, swa), live_pages_only=True)
                 for step, o in enumerate(outs)]
        return lambda: [sgl_meta.update_trtllm_mha_graph_metadata(**kw) for kw in calls]
    return build


def ours_page_table(swa=False):
    return _page_table(sgl_meta.build_trtllm_mha_page_table, swa)


_UPSTREAM = None


def _upstream(name: str):
    """An upstream kernel function, loaded by file path from the installed
    sglang (sgl_meta.bench.upstream.loader: importing ``sglang`` itself would
    run the server's package __init__)."""
    global _UPSTREAM
    if _UPSTREAM is None:
        from sgl_meta.bench.upstream import loader

        _UPSTREAM = loader.load(loader.probe(loader.locate(os.environ.get("SGLMETA_UPSTREAM", "auto"))),
                                families=(loader.TRITON,))
    fn = getattr(_UPSTREAM, name, None)
    if fn is None:
        raise RuntimeError(f"upstream {name} not loaded: {_UPSTREAM.errors}")
    return fn


def upstream_update(swa=False, skip=False):
    up = _upstream("update_trtllm_mha_graph_metadata")

    def build(x, r2t, mapping, outs):
        kw = _update_kw(x, r2t, mapping, outs[0], 1, swa, skip)
        return lambda: up(**kw)
    return build


def upstream_page_table(swa=False):
    return _page_table(_upstream("build_trtllm_mha_page_table"), swa)


def cases(upstream: bool) -> list:
    out = []
    for bs in BATCHES:
        out += [
            (f"update bs{bs}", bs, False, 1, ours_update()),
            (f"update bs{bs} swa", bs, True, 1, ours_update(swa=True)),
            (f"update bs{bs} seqlens-only", bs, False, 1, ours_update(skip=True)),
            (f"update bs{bs} ragged verify", bs, False, 1, ours_update(ragged=True)),
            (f"update bs{bs} ragged verify swa", bs, True, 1, ours_update(swa=True, ragged=True)),
            (f"multi K-1=3 bs{bs}", bs, False, 3, ours_multi()),
            (f"3 singles bs{bs}", bs, False, 3, ours_singles()),
            (f"multi K-1=3 bs{bs} swa", bs, True, 3, ours_multi(swa=True)),
            (f"3 singles bs{bs} swa", bs, True, 3, ours_singles(swa=True)),
            (f"page table bs{bs}", bs, False, 1, ours_page_table()),
            (f"page table bs{bs} swa", bs, True, 1, ours_page_table(swa=True)),
        ]
        if upstream:
            out += [
                (f"upstream update bs{bs}", bs, False, 1, upstream_update()),
                (f"upstream update bs{bs} swa", bs, True, 1, upstream_update(swa=True)),
                (f"upstream update bs{bs} seqlens-only", bs, False, 1, upstream_update(skip=True)),
                (f"upstream page table bs{bs}", bs, False, 1, upstream_page_table()),
                (f"upstream page table bs{bs} swa", bs, True, 1, upstream_page_table(swa=True)),
            ]
    return out


def device_us(calls: list, replays: int) -> tuple:
    """Per-launch device us (median, p10, p90) of one graph running every call once."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for c in calls:  # warm-up (Triton compile, lazy module load) outside capture
            c()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for c in calls:
            c()
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1e3 / len(calls))
    times.sort()
    return statistics.median(times), times[len(times) // 10], times[(9 * len(times)) // 10]


def build_calls(bs, swa, k, builder, launches):
    r2t, mapping, ins = make_inputs(bs, launches, swa)
    outs = outputs(bs, swa, k)
    return [builder(x, r2t, mapping, outs) for x in ins]


def list_kernels(selected):
    from torch.profiler import ProfilerActivity, profile

    for name, bs, swa, k, builder in selected:
        calls = build_calls(bs, swa, k, builder, 1)
        calls[0]()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            calls[0]()
            torch.cuda.synchronize()
        kernels = sorted({e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA})
        print(f"{name:40s} {' | '.join(kernels)}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--upstream", action="store_true", help="also SGLang 0.5.23's kernels (installed sglang)")
    ap.add_argument("--launches", type=int, default=32, help="launches per graph (each on its own inputs)")
    ap.add_argument("--replays", type=int, default=50)
    ap.add_argument("--only", default="", help="substring filter on case names")
    ap.add_argument("--list-kernels", action="store_true", help="print the CUDA kernel names of each case")
    ap.add_argument("--ncu", action="store_true", help="one eager call per case, NVTX range '<case>' inside 'small'")
    args = ap.parse_args()
    if not torch.cuda.is_available():  # (not an assert: python -O would skip it)
        ap.exit(2, "small_sizes.py measures GPU kernels and needs a CUDA device; on CPU run python -m sgl_meta.bench\n")
    selected = [c for c in cases(args.upstream) if args.only in c[0]]
    if args.list_kernels:
        list_kernels(selected)
        return
    if args.ncu:
        for name, bs, swa, k, builder in selected:
            calls = build_calls(bs, swa, k, builder, 2)
            calls[0]()  # warm-up (compile) outside the range
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_push("small")
            torch.cuda.nvtx.range_push(name)
            calls[1]()
            torch.cuda.synchronize()
            torch.cuda.nvtx.range_pop()
            torch.cuda.nvtx.range_pop()
        return
    rows = []
    for name, bs, swa, k, builder in selected:
        med, p10, p90 = device_us(build_calls(bs, swa, k, builder, args.launches), args.replays)
        rows.append(dict(case=name, bs=bs, device_us=med, p10_us=p10, p90_us=p90))
        print(f"{name:40s} {med:7.2f} us  (p10 {p10:6.2f}, p90 {p90:6.2f})", flush=True)
    meta = dict(date=datetime.datetime.now().isoformat(timespec="seconds"), gpu=torch.cuda.get_device_name(),
                torch=torch.__version__, cuda=torch.version.cuda, launches=args.launches, replays=args.replays,
                pages=PAGES, page_size=PAGE_SIZE)
    print(meta)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(meta=meta, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
