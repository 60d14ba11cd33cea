"""The replay loop: one preset's trace through every available workload.

Per decode step, for each workload:

1. ``fill``: the step's inputs go into the static buffers (untimed, as in a
   server this is the scheduler's work, not the refresh's);
2. eager: the fused calls and the reference calls are issued one by one and
   their host time taken (the order alternates every step);
3. check (every ``check_every`` steps): fused vs reference outputs, eager;
4. CUDA only: the bucket's graphs (fused, reference and the workload's
   baselines, captured for every bucket before the loop) are replayed under
   CUDA events, then checked the same way (baselines in ``checked_baselines``
   against the reference as well).
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from . import graphs as graph_capture
from .buckets import capture_batch_sizes, pad_to_bucket
from .check import compare, corrupt
from .presets import Preset
from .progress import make_bar
from .timing import DeviceTimer, WallTimer, host_call_times, stats
from .trace import ServingTrace
from .workloads import REGISTRY, BenchContext


@dataclass
class Options:
    presets: list
    steps: int
    warmup: int
    seed: int
    max_bs: int
    buckets: Optional[list]
    check_every: int
    spec: Optional[bool]
    context_len: Optional[int]
    flush_l2: bool
    device: torch.device
    progress: bool
    corrupt_fused: Optional[int] = None
    emulate_graphs: bool = False  # CPU: run the graph-mode path with eager "graphs"
    upstream: Optional[str] = None  # --upstream spec (workloads with an upstream slot use it)


class Record:
    """Per-step measurements of one workload."""

    def __init__(self, workload):
        self.op = workload.op
        self.label = workload.label
        self.refreshes = list(workload.refreshes)
        self.impls = workload.impls
        self.notes = list(getattr(workload, "notes", ()))
        self.bucket: list = []
        self.bs: list = []
        self.host = {impl: [] for impl in self.impls}  # per step: per-call us
        self.dev = {impl: [] for impl in self.impls}  # per step: graph replay us
        self.replay_host = {impl: [] for impl in self.impls}
        self.bytes = {"eager": [], "graph": []}
        self.checked = 0


def run_preset(preset: Preset, opts: Options, bandwidth: float) -> dict:
    """Replay ``opts.steps`` (+ warmup) decode steps of ``preset``; results dict."""
    t_start = time.perf_counter()
    cuda = opts.device.type == "cuda"
    use_graphs = cuda or opts.emulate_graphs
    spec = preset.spec if opts.spec is None else opts.spec
    preset = preset.with_overrides(context_len=opts.context_len)
    buckets = sorted(opts.buckets) if opts.buckets else capture_batch_sizes(opts.max_bs, spec)
    total = opts.warmup + opts.steps
    trace = ServingTrace(
        preset, spec=spec, max_bs=buckets[-1], total_steps=total, seed=opts.seed, device=opts.device
    )
    ctx = BenchContext(
        preset=preset, spec=spec, device=opts.device, max_bs=buckets[-1], trace=trace, seed=opts.seed, graphs=use_graphs,
        upstream=opts.upstream,
    )
    classes = [c for c in REGISTRY if c.applies(ctx)]
    result = {
        "preset": preset.name,
        "model": preset.model,
        "backend": preset.backend,
        "page_size": preset.page_size,
        "context_len": preset.context_len,
        "page_table_width": preset.max_pages,
        "swa_window": preset.swa_window,
        "dsa_topk": preset.dsa_topk,
        "spec": spec,
        "spec_steps": preset.spec_steps if spec else None,
        "spec_draft_tokens": preset.spec_draft_tokens if spec else None,
        "sources": preset.sources,
        "buckets": buckets,
        "ops_not_in_build": [c.op for c in classes if not c.available()],
        "workloads": [],
    }
    workloads = [c(ctx) for c in classes if c.available()]
    if not workloads:
        result["skipped"] = "no op of this backend in this build"
        return result
    records = [Record(w) for w in workloads]
    graphs: dict = {}
    pool = torch.cuda.graph_pool_handle() if cuda else None
    timer = DeviceTimer(opts.device, opts.flush_l2) if cuda else WallTimer()

    if use_graphs:
        # Every bucket up front, like a server at startup (the static inputs hold
        # valid padding values already): no capture, allocator flush or sync
        # lands inside the measured loop.
        bar = make_bar(len(buckets) * len(workloads), f"{preset.name} capture", opts.progress)
        for bucket in buckets:
            for wi, w in enumerate(workloads):
                for impl in w.impls:
                    graphs[(wi, bucket, impl)] = _capture(w, impl, bucket, cuda, pool)
                bar.update(1)
        bar.close()
        if cuda:
            torch.cuda.synchronize(opts.device)

    bar = make_bar(total, preset.name, opts.progress)
    gc.collect()
    gc.disable()  # keep collector pauses out of the host-time tails
    try:
        for t in range(total):
            step = trace.next_step()
            bucket = pad_to_bucket(step.bs, buckets)
            measure = t >= opts.warmup
            check = t % opts.check_every == 0
            sabotage = opts.corrupt_fused is not None and t == opts.corrupt_fused
            for wi, (w, rec) in enumerate(zip(workloads, records)):
                where = f"{preset.name} / {w.op} / step {t} (bs {step.bs}, bucket {bucket})"
                w.fill(step, bucket)
                calls = {impl: w.calls(impl, step.bs, step) for impl in w.impls}
                order = w.impls if t % 2 == 0 else w.impls[::-1]
                host = {impl: host_call_times(calls[impl]) for impl in order}
                if sabotage and wi == 0:
                    corrupt(w.outputs("fused", "eager"))
                if check:
                    compare(w.outputs("fused", "eager"), w.outputs("ref", "eager"), f"{where}, eager")
                if use_graphs:
                    dev, replay_host = timer.time_replays([graphs[(wi, bucket, impl)] for impl in w.impls])
                    if sabotage and wi == 0:
                        corrupt(w.outputs("fused", "graph"))
                    if check:
                        compare(w.outputs("fused", "graph"), w.outputs("ref", "graph"), f"{where}, graph")
                        for impl in w.checked_baselines:
                            compare(w.outputs(impl, "graph"), w.outputs("ref", "graph"), f"{where}, graph, {impl}")
                rec.checked += check
                if not measure:
                    continue
                rec.bucket.append(bucket)
                rec.bs.append(step.bs)
                for i, impl in enumerate(w.impls):
                    rec.host[impl].append(host[impl])
                    if use_graphs:
                        rec.dev[impl].append(dev[i])
                        rec.replay_host[impl].append(replay_host[i])
                rec.bytes["eager"].append(w.bytes_moved(step, bucket, "eager"))
                if use_graphs:
                    rec.bytes["graph"].append(w.bytes_moved(step, bucket, "graph"))
            bar.update(1)
            if t % 25 == 0:
                bar.set_postfix_str(f"bs {step.bs} -> {bucket}")
    finally:
        gc.enable()
        bar.close()

    result["trace"] = trace.stats.as_dict()
    result["trace"]["page_contiguity"] = trace.page_contiguity()
    result["graphs_captured"] = len(graphs)
    result["workloads"] = [summarize(rec, bandwidth, use_graphs) for rec in records]
    result["wall_s"] = time.perf_counter() - t_start
    return result


def _capture(w, impl: str, bucket: int, cuda: bool, pool):
    calls = w.calls(impl, bucket, None)
    if not cuda:
        return graph_capture.EmulatedGraph(calls)
    try:
        return graph_capture.capture(calls, pool)
    except Exception as e:  # name what failed: a reference that syncs or copies H2D cannot be captured
        raise RuntimeError(f"CUDA-graph capture of {w.op} ({impl}) at bucket {bucket} failed: {e}") from e


def summarize(rec: Record, bandwidth: float, graphs: bool) -> dict:
    """Aggregate one workload's records (per call and per step, and per bucket)."""
    calls = len(rec.refreshes)
    impls = rec.impls
    host = {impl: np.asarray(rec.host[impl], dtype=np.float64).reshape(-1, calls) for impl in impls}
    dev = {impl: np.asarray(rec.dev[impl], dtype=np.float64) for impl in impls}
    floor = {m: np.asarray(b, dtype=np.float64) / bandwidth * 1e6 for m, b in rec.bytes.items()}
    out = {
        "op": rec.op,
        "label": rec.label,
        "refreshes": rec.refreshes,
        "impls": list(impls),
        "notes": rec.notes,
        "calls_per_step": calls,
        "steps_measured": len(rec.bucket),
        "steps_checked": rec.checked,
        "host_us_per_call": {impl: stats(host[impl].reshape(-1)) for impl in impls},
        "host_us_per_step": {impl: stats(host[impl].sum(axis=1)) for impl in impls},
        "device_us_per_call": {impl: stats(dev[impl] / calls) for impl in impls} if graphs else None,
        "device_us_per_step": {impl: stats(dev[impl]) for impl in impls} if graphs else None,
        "graph_replay_host_us": {impl: stats(rec.replay_host[impl]) for impl in impls} if graphs else None,
        "bytes_per_step": {m: stats(b) for m, b in rec.bytes.items() if b},
        "floor_us_per_call": {m: stats(f / calls) for m, f in floor.items() if f.size},
        "per_bucket": [],
    }
    buckets = np.asarray(rec.bucket)
    for b in sorted(set(rec.bucket)):
        sel = buckets == b
        row = {
            "bucket": int(b),
            "steps": int(sel.sum()),
            "bs_mean": float(np.asarray(rec.bs)[sel].mean()),
            "host_us_per_call": {impl: float(np.median(host[impl][sel])) for impl in impls},
        }
        if graphs:
            row["device_us_per_call"] = {impl: float(np.median(dev[impl][sel])) / calls for impl in impls}
            row["floor_us_per_call"] = float(np.median(floor["graph"][sel])) / calls
        else:
            row["floor_us_per_call"] = float(np.median(floor["eager"][sel])) / calls
        out["per_bucket"].append(row)
    return out
