"""One point's replay steps, plugin off and on in turn: SGLang's eager metadata call, then the graph it recorded.

Per step, as the 0.5.23 decode graph runner does before every replay: the batch
grows by a token, ``init_forward_metadata_out_graph`` runs eagerly, then the
graph holding ``init_forward_metadata_in_graph`` (the recorded metadata kernels,
nothing else: the attention kernels are not here) is replayed. Measured:

* out-of-graph host us: wall time to issue the eager call;
* out-of-graph device us: CUDA events around it, the stream held by a spin
  kernel first so that the events time the GPU work, not the host's gaps;
* launches: kernels, copies and fills the eager call puts on the GPU, and those
  recorded in the graph, each with its device us (torch.profiler, a few steps;
  in the JSON);
* in-graph device us: CUDA events around the replay, L2 flushed before it;
* on - off: per step, the plugin-on sample minus the plugin-off one of the same
  step, median with a 95% bootstrap interval (``timing.paired_difference``):
  pairing cancels what drifts between steps, and the interval says whether a
  difference is the plugin's or the spread of the steps.

A point is built several times (``Plan.builds``; the caller puts each build's
buffers at other addresses), its steps split between the builds: where a
kernel's buffers sit moves its time by a few tenths of a us, in either
direction, the same for SGLang's kernels and ours, so one build per side can
read as a difference that is only the layout. ``merge`` pools the builds, and
the interval resamples builds, then steps.

Each side has its own backend and batch, built alike from one seed; every step
runs both in turn (the one that goes first alternates), so drift in the
machine's speed reaches both sides alike. The first steps only snapshot the
buffers the attention kernels read (compared between the sides by the caller).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from ..timing import SLEEP_CYCLES, DeviceTimer, paired_difference, stats
from . import batches
from .backends import Setup


@dataclass
class Plan:
    check_steps: int = 4
    warmup: int = 10
    steps: int = 100  # timed steps per point and side, over all builds
    profile_steps: int = 3
    builds: int = 4
    spin: str = "3x host, both sides"  # the rule of spin_cycles (table.py names each)
    control: bool = False  # both sides SGLang's own code (Switch.control): on - off is the bench's own error
    max_len: Optional[int] = None  # lengths drawn as for this context, the backends still sized for the point's

    def per_build(self) -> "Plan":
        return dataclasses.replace(self, steps=-(-self.steps // self.builds), builds=1)


def _launches(fn, reps: int) -> tuple:
    """GPU activities (kernels, memcpy, memset) per call of ``fn``, and
    ``{name: device us per call}`` of each (torch.profiler)."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
    gpu = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    per_kernel = {}
    for e in gpu:
        per_kernel[e.name] = per_kernel.get(e.name, 0.0) + e.device_time / reps
    return len(gpu) / reps, per_kernel


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


# The eager call is timed on the GPU behind a spin long enough that the host has
# queued all of it before the GPU reaches it (DSA's eager path takes ~100-200 us
# of host time): the events then time the GPU work, not the host's gaps. At
# least ~1 ms; where a side's untimed steps took longer on the host, both sides
# spin three times the larger median (FlashInfer's multi-step draft decode: ~1.1 ms).
OUT_SLEEP_CYCLES = 5 * SLEEP_CYCLES
_CYCLES_PER_US = SLEEP_CYCLES / 200  # SLEEP_CYCLES: ~0.2 ms


def spin_cycles(*untimed_host_us: list) -> int:
    """The spin before every timed eager call of a point whose sides' untimed steps took
    ``untimed_host_us`` (one list per side) on the host: three times the larger median, ~1 ms at
    least. Both sides spin alike: an eager call that waits for the GPU inside it (FlashInfer's draft
    decode copies ``kv_indptr`` to the host) spends what is left of the spin in its host and device
    time, so a spin sized per side would carry one side's slower host, tripled, into both columns."""
    typical = max((float(np.median(u)) for u in untimed_host_us if u), default=0.0)
    return max(OUT_SLEEP_CYCLES, int(3 * typical * _CYCLES_PER_US))


class _Side:
    """One side (plugin off or on): its own backend and batch, built from the same
    seed as the other's, its captured graph, and its samples."""

    def __init__(self, setup: Setup, select):
        self.setup, self.select = setup, select
        self.graph = None
        self.in_graph_launches, self.in_graph_kernels = None, None
        self.host, self.dev, self.replay, self.snapshots = [], [], [], []
        self.untimed_host = []  # us, the untimed steps' eager calls

    def out_graph(self):
        self.setup.backend.init_forward_metadata_out_graph(self.setup.batch)

    def capture(self, cuda: bool) -> None:
        backend, batch = self.setup.backend, self.setup.batch
        self.select()
        backend.init_forward_metadata_out_graph(batch, in_capture=True)
        backend.init_forward_metadata_in_graph(batch)  # compiles what JIT-compiles, outside the capture
        if not cuda:
            return
        self.in_graph_launches, self.in_graph_kernels = _launches(
            lambda: backend.init_forward_metadata_in_graph(batch), 1)
        if self.in_graph_launches:
            torch.cuda.synchronize()
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                backend.init_forward_metadata_in_graph(batch)

    def step(self, cuda: bool) -> None:
        """One untimed replay step: the batch grows, the eager call, the graph."""
        self.select()
        batches.advance(self.setup.batch)
        t0 = time.perf_counter_ns()
        self.out_graph()
        self.untimed_host.append((time.perf_counter_ns() - t0) / 1e3)
        if self.graph is not None:
            self.graph.replay()
        elif not cuda:
            self.setup.backend.init_forward_metadata_in_graph(self.setup.batch)

    def timed_step(self, timer, ev, spin: int) -> None:
        self.select()
        batches.advance(self.setup.batch)
        if timer is None:  # CPU: host time only
            t0 = time.perf_counter_ns()
            self.out_graph()
            self.host.append((time.perf_counter_ns() - t0) / 1e3)
            self.setup.backend.init_forward_metadata_in_graph(self.setup.batch)
            return
        torch.cuda._sleep(spin)
        ev[0].record()
        t0 = time.perf_counter_ns()
        self.out_graph()
        self.host.append((time.perf_counter_ns() - t0) / 1e3)
        ev[1].record()
        ev[1].synchronize()
        self.dev.append(ev[0].elapsed_time(ev[1]) * 1e3)
        if self.graph is not None:
            self.replay.append(timer.time_replays([self.graph])[0][0])

    def samples(self) -> dict:
        return {key: getattr(self, attr) for key, attr in SAMPLES}

    def metrics(self, cuda: bool, plan: Plan) -> dict:
        """What a build measures besides its samples: the launches and their kernels."""
        if not cuda:
            return {}
        self.select()
        out_launches, out_kernels = _launches(self.out_graph, plan.profile_steps)
        return {"out_launches": out_launches, "out_kernels_us": out_kernels,
                "in_graph_launches": self.in_graph_launches, "in_graph_kernels_us": self.in_graph_kernels}


SAMPLES = (("out_host_us", "host"), ("out_device_us", "dev"), ("in_graph_device_us", "replay"))
"""Per timed step: (metric, _Side attribute)."""


def run(off: Setup, on: Setup, switch, plan: Plan) -> dict:
    """One build of both sides of a point, step by step in turn (the side that
    goes first alternates), so that drift in the machine's speed reaches both alike.

    ``{"off": {"snapshots", "metrics", "samples"}, "on": {...}}``; the two setups
    must be built alike (same seed) so that their batches stay equal step for step."""
    from sglang.srt.model_executor.forward_context import ForwardContext, forward_context

    cuda = off.batch.seq_lens.is_cuda
    sides = [_Side(off, switch.off), _Side(on, switch.on)]
    with torch.no_grad():
        for side in sides:
            with forward_context(ForwardContext(attn_backend=side.setup.backend)):
                side.capture(cuda)
        timer = DeviceTimer(off.batch.seq_lens.device, flush_l2=True) if cuda else None
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)] if cuda else None
        spin = None  # set once the untimed steps are done
        for k in range(plan.check_steps + plan.warmup + plan.steps):
            order = sides if k % 2 == 0 else sides[::-1]
            for side in order:
                with forward_context(ForwardContext(attn_backend=side.setup.backend)):
                    if k < plan.check_steps:
                        side.step(cuda)
                        side.snapshots.append(snapshot(side.setup.read_buffers()))
                    elif k < plan.check_steps + plan.warmup:
                        side.step(cuda)
                    else:
                        spin = spin if spin is not None else spin_cycles(*(s.untimed_host for s in sides))
                        side.timed_step(timer, ev, spin)
        out = {}
        for name, side in zip(("off", "on"), sides):
            with forward_context(ForwardContext(attn_backend=side.setup.backend)):
                out[name] = {"snapshots": side.snapshots, "metrics": side.metrics(cuda, plan),
                             "samples": side.samples()}
    switch.on()
    return out


def merge(builds: list) -> dict:
    """The builds of one point (``run``'s results) as one: each side's snapshots
    of every build, its launches from the first, the medians over every step,
    and ``on_minus_off``: per metric, the per-step differences of each build
    through ``paired_difference`` (builds resampled, then steps)."""
    out = {}
    for name in ("off", "on"):
        metrics = dict(builds[0][name]["metrics"])
        for key, _ in SAMPLES:
            pooled = [v for b in builds for v in b[name]["samples"][key]]
            if pooled or key == "out_host_us":
                metrics[key] = stats(pooled)
        out[name] = {"snapshots": [s for b in builds for s in b[name]["snapshots"]], "metrics": metrics}
    out["on_minus_off"] = on_minus_off([(b["off"]["samples"], b["on"]["samples"]) for b in builds])
    return out


def on_minus_off(builds: list) -> dict:
    """``[(off samples, on samples) per build]`` -> per metric, the per-step
    differences (on - off; both sides took the same steps) through
    ``paired_difference``, one group per build."""
    out = {}
    for key, _ in SAMPLES:
        groups = [[y - x for x, y in zip(off[key], on[key])] for off, on in builds
                  if off[key] and len(off[key]) == len(on[key])]
        if groups:
            out[key] = paired_difference(*groups)
    return out
