"""Ad-hoc: why are we behind upstream at small sizes only with L2 flushed?
Conditions per case (device us of one graph replay of one launch, median of N):
  warm   : no flush
  zero   : buf.zero_() (L2 full of dirty lines; the bench's method)
  zero+B : zero_(), then the same kernel on other inputs (code + params warm, data cold)
  read   : buf.amax() (L2 evicted with clean lines)
"""
import os, sys, statistics, json
sys.path.insert(0, "benchmarks")
import torch
import small_sizes as S

N = int(os.environ.get("N", "60"))
dev = "cuda"
l2 = torch.cuda.get_device_properties(0).L2_cache_size
buf = torch.empty(max(2 * l2, 64 << 20), dtype=torch.uint8, device=dev)
buf32 = buf.view(torch.int32)

def graph_of(fn):
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s); torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    g.replay(); torch.cuda.synchronize()
    return g

def measure(ga, gb, cond):
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(N)]
    torch.cuda.synchronize()
    torch.cuda._sleep(1_000_000)
    for a, b in ev:
        if cond.startswith("zero"):
            buf.zero_()
        elif cond == "read":
            buf32.amax()
        if cond == "zero+B":
            gb.replay()
        a.record(); ga.replay(); b.record()
    torch.cuda.synchronize()
    return statistics.median(x.elapsed_time(y) * 1e3 for x, y in ev)

CASES = {}
for bs in (1, 256):
    CASES[f"update bs{bs}"] = (bs, S.ours_update(), S.upstream_update())
    CASES[f"seqlens-only bs{bs}"] = (bs, S.ours_update(skip=True), S.upstream_update(skip=True))
    CASES[f"page table bs{bs}"] = (bs, S.ours_page_table(), S.upstream_page_table())
conds = ["warm", "zero", "zero+B", "read"]
out = {}
print(f"{'case':26s} " + " ".join(f"{c + ' ours/up':>20s}" for c in conds))
for name, (bs, ours, up) in CASES.items():
    r2t, mapping, ins = S.make_inputs(bs, 2, False)
    res = {}
    for who, builder in (("ours", ours), ("up", up)):
        outs_a, outs_b = S.outputs(bs, False), S.outputs(bs, False)
        ga = graph_of(builder(ins[0], r2t, mapping, outs_a))
        gb = graph_of(builder(ins[1], r2t, mapping, outs_b))
        res[who] = {c: measure(ga, gb, c) for c in conds}
    out[name] = res
    print(f"{name:26s} " + " ".join(f"{res['ours'][c]:9.2f}/{res['up'][c]:<9.2f} " for c in conds), flush=True)
import op_shapes as O
import sgl_meta
bare = O._bare_gather("table")
for name, args in {"kv table bs1x2048p64": (1, 2048, 64), "kv table bs256x2048p64 ctx<=8k": (256, 2048, 64, 8192),
                   "kv table bs256x2048p64": (256, 2048, 64)}.items():
    bs, pages, ps = args[:3]
    kws, _ = O.kv_read_case(bs, pages, ps, "table", max_len=args[3] if len(args) > 3 else None, sets=2)
    res = {}
    for who, fn in (("ours", sgl_meta.kv_read_page_table), ("up", bare)):
        ga = graph_of(lambda: fn(**kws[0]))
        gb = graph_of(lambda: fn(**kws[1]))
        res[who] = {c: measure(ga, gb, c) for c in conds}
    out[name] = res
    print(f"{name:26s} " + " ".join(f"{res['ours'][c]:9.2f}/{res['up'][c]:<9.2f} " for c in conds) + " (up = bare gather)", flush=True)
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "probe_flush.json"), "w"), indent=1)
