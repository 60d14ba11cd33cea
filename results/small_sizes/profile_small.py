"""Ad-hoc H200 profile: sgl_meta vs SGLang 0.5.23 Triton kernels at small sizes."""
import importlib.util, os, sys, json, statistics
import torch

site = sys.argv[1]
mode = sys.argv[2] if len(sys.argv) > 2 else "time"


def load(rel, name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(site, rel))
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


up_upd = load("sglang/kernels/ops/attention/trtllm_mha_graph_metadata.py", "up_upd")
up_pt = load("sglang/kernels/ops/attention/trtllm_mha_page_table.py", "up_pt")
import sgl_meta

dev = "cuda"
PS, PAGES = 64, 2048
CTX = PS * PAGES
g = torch.Generator(device="cpu").manual_seed(0)


def make(bs, swa=False):
    pool = max(bs, 8) + 4
    r2t = torch.randint(0, 2**22, (pool, CTX), dtype=torch.int32, generator=g).to(dev)
    req = torch.randperm(pool, generator=g)[:bs].to(torch.int64).to(dev)
    seq = torch.randint(1, CTX - 8, (bs,), generator=g).to(torch.int64).to(dev)
    d = dict(req=req, seq=seq, r2t=r2t,
             cache=torch.zeros(bs, dtype=torch.int32, device=dev),
             cu=torch.zeros(bs + 1, dtype=torch.int32, device=dev),
             pt=torch.zeros(bs, PAGES, dtype=torch.int32, device=dev))
    if swa:
        d["map"] = torch.randint(-1, 2**20, (2**22 + 1,), dtype=torch.int64, generator=g).to(dev)
        d["swa_pt"] = torch.zeros(bs, PAGES, dtype=torch.int32, device=dev)
    return d


def ours_update(d, bs, skip=False, swa=False):
    return lambda: sgl_meta.update_trtllm_mha_graph_metadata(
        req_pool_indices=d["req"], seq_lens=d["seq"], req_to_token=d["r2t"],
        cache_seqlens=d["cache"], cu_seqlens_k=d["cu"], page_table=d["pt"], bs=bs,
        seqlen_offset=0, max_seq_pages=0 if skip else PAGES, page_size=PS,
        live_pages_only=True,
        swa_mapping=d.get("map") if swa else None, swa_page_table=d.get("swa_pt") if swa else None)


def up_update(d, bs, skip=False, swa=False):
    return lambda: up_upd.update_trtllm_mha_graph_metadata(
        req_pool_indices=d["req"], seq_lens=d["seq"], req_to_token=d["r2t"],
        cache_seqlens=d["cache"], cu_seqlens_k=d["cu"], page_table=None if skip else d["pt"], bs=bs,
        seqlen_offset=0, max_seq_pages=PAGES, page_size=PS, skip_page_table=skip,
        swa_mapping=d.get("map") if swa else None, swa_page_table=d.get("swa_pt") if swa else None)


def ours_pt(d, bs, swa=False):
    return lambda: sgl_meta.build_trtllm_mha_page_table(
        d["r2t"], d["req"], d["seq"], d["pt"], PS,
        d.get("swa_pt") if swa else None, d.get("map") if swa else None)


def up_ptf(d, bs, swa=False):
    return lambda: up_pt.build_trtllm_mha_page_table(
        d["r2t"], d["req"], d["seq"], d["pt"], PS,
        d.get("swa_pt") if swa else None, d.get("map") if swa else None)


def dev_time(fn, inner=20, reps=50):
    fn(); torch.cuda.synchronize()
    s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        fn()
    torch.cuda.current_stream().wait_stream(s)
    out = {}
    for n in (1, inner):
        gr = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gr):
            for _ in range(n):
                fn()
        for _ in range(5):
            gr.replay()
        ts = []
        for _ in range(reps):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record(); gr.replay(); b.record(); b.synchronize()
            ts.append(a.elapsed_time(b) * 1000 / n)
        out[n] = statistics.median(ts)
    return out


def host_time(fn, reps=2000):
    import time
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        t = time.perf_counter_ns(); fn(); ts.append(time.perf_counter_ns() - t)
        if len(ts) % 200 == 0:
            torch.cuda.synchronize()
    return statistics.median(ts) / 1000


cases = []
for bs in (1, 8, 64, 256):
    d = make(bs)
    cases.append((f"update bs{bs}", ours_update(d, bs), up_update(d, bs)))
    cases.append((f"seqlens-only bs{bs}", ours_update(d, bs, skip=True), up_update(d, bs, skip=True)))
    cases.append((f"pagetable bs{bs}", ours_pt(d, bs), up_ptf(d, bs)))
d = make(256, swa=True)
cases.append(("update swa bs256", ours_update(d, 256, swa=True), up_update(d, 256, swa=True)))
cases.append(("pagetable swa bs256", ours_pt(d, 256, swa=True), up_ptf(d, 256, swa=True)))

if mode == "ncu":
    torch.cuda.synchronize()
    for name, a, b in cases:
        a(); b()
    torch.cuda.synchronize()
    for name, a, b in cases:
        torch.cuda.nvtx.range_push(name)
        a(); b()
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    sys.exit(0)

rows = []
print(f"{'case':24s} {'ours dev1':>9s} {'up dev1':>9s} {'ours devN':>9s} {'up devN':>9s} {'ours host':>9s} {'up host':>9s}")
for name, a, b in cases:
    ta, tb = dev_time(a), dev_time(b)
    ha, hb = host_time(a), host_time(b)
    rows.append(dict(case=name, ours_dev1=ta[1], up_dev1=tb[1], ours_devN=ta[20], up_devN=tb[20], ours_host=ha, up_host=hb))
    print(f"{name:24s} {ta[1]:9.2f} {tb[1]:9.2f} {ta[20]:9.2f} {tb[20]:9.2f} {ha:9.2f} {hb:9.2f}", flush=True)
json.dump(rows, open(os.path.join(os.environ.get("OUT", "."), "profile_small.json"), "w"), indent=1)
