"""One point's replay steps: SGLang's eager metadata call, then the graph it recorded.

Per step, as the 0.5.23 decode graph runner does before every replay: the batch
grows by a token, ``init_forward_metadata_out_graph`` runs eagerly, then the
graph holding ``init_forward_metadata_in_graph`` (the recorded metadata kernels,
nothing else: the attention kernels are not here) is replayed. Measured:

* out-of-graph host us: wall time to issue the eager call;
* out-of-graph device us: CUDA events around it, the stream held by a spin
  kernel first so that the events time the GPU work, not the host's gaps;
* launches: kernels, copies and fills the eager call puts on the GPU, and those
  recorded in the graph (torch.profiler, a few steps);
* in-graph device us: CUDA events around the replay, L2 flushed before it.

The first steps only snapshot the buffers the attention kernels read (compared
between plugin off and on by the caller).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from ..timing import SLEEP_CYCLES, DeviceTimer, stats
from . import batches
from .backends import Setup


@dataclass
class Plan:
    check_steps: int = 4
    warmup: int = 10
    steps: int = 100
    profile_steps: int = 3


def _launches(fn, reps: int) -> float:
    """GPU activities (kernels, memcpy, memset) per call of ``fn``."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    gpu = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return len(gpu) / reps


def snapshot(buffers: dict) -> dict:
    """CPU copies of what the attention kernels read: a table's rows cut to their live columns."""
    out = {}
    for name, (tensor, live) in buffers.items():
        t = tensor.detach().cpu()
        if live is None:
            out[name] = t
        else:
            live = live.cpu().clamp(0, t.shape[1])
            cols = torch.arange(t.shape[1]).expand_as(t)
            out[name] = torch.where(cols < live.unsqueeze(1), t, torch.zeros_like(t))
    return out


def run(setup: Setup, plan: Plan) -> dict:
    """Capture, check steps, timed steps. ``{"snapshots": [...], "metrics": {...}}``."""
    from sglang.srt.model_executor.forward_context import ForwardContext, forward_context

    backend, batch = setup.backend, setup.batch
    cuda = batch.seq_lens.is_cuda
    with torch.no_grad(), forward_context(ForwardContext(attn_backend=backend)):
        backend.init_forward_metadata_out_graph(batch, in_capture=True)
        backend.init_forward_metadata_in_graph(batch)  # compiles what JIT-compiles, outside the capture
        graph = None
        in_graph_launches = _launches(lambda: backend.init_forward_metadata_in_graph(batch), 1) if cuda else None
        if cuda and in_graph_launches:
            torch.cuda.synchronize()
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                backend.init_forward_metadata_in_graph(batch)

        def out_graph():
            backend.init_forward_metadata_out_graph(batch)

        def step():
            batches.advance(batch)
            out_graph()
            if graph is not None:
                graph.replay()
            elif not cuda:
                backend.init_forward_metadata_in_graph(batch)

        snapshots = []
        for _ in range(plan.check_steps):
            step()
            snapshots.append(snapshot(setup.read_buffers()))
        for _ in range(plan.warmup):
            step()
        if not cuda:
            host = []
            for _ in range(plan.steps):
                batches.advance(batch)
                t0 = time.perf_counter_ns()
                out_graph()
                host.append((time.perf_counter_ns() - t0) / 1e3)
                backend.init_forward_metadata_in_graph(batch)
            return {"snapshots": snapshots, "metrics": {"out_host_us": stats(host)}}

        timer = DeviceTimer(batch.seq_lens.device, flush_l2=True)
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        host, dev, replay = [], [], []
        for _ in range(plan.steps):
            batches.advance(batch)
            torch.cuda._sleep(SLEEP_CYCLES)
            ev[0].record()
            t0 = time.perf_counter_ns()
            out_graph()
            host.append((time.perf_counter_ns() - t0) / 1e3)
            ev[1].record()
            ev[1].synchronize()
            dev.append(ev[0].elapsed_time(ev[1]) * 1e3)
            if graph is not None:
                replay.append(timer.time_replays([graph])[0][0])
        out_launches = _launches(out_graph, plan.profile_steps)
    metrics = {
        "out_host_us": stats(host), "out_device_us": stats(dev), "out_launches": out_launches,
        "in_graph_launches": in_graph_launches, "in_graph_device_us": stats(replay),
    }
    return {"snapshots": snapshots, "metrics": metrics}
