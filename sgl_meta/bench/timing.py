"""Clocks: host dispatch time, device time of graph replays, copy bandwidth.

* Host time per call: wall time (``perf_counter_ns``) to *issue* one eager
  call, i.e. what a server's CPU pays to launch it; on CUDA that excludes the
  kernel's run time, on CPU it is the whole computation.
* Device time: CUDA events around one graph replay. The stream is first held by
  a short spin kernel (``torch.cuda._sleep``) so that everything after it is
  queued before the GPU reaches it: the events then time the replay alone, not
  the host's launch gaps. Before each timed replay the L2 cache is flushed by
  overwriting a buffer twice its size (in a server the model's forward pass has
  evicted the metadata inputs by the next refresh), unless disabled.
* Copy bandwidth: device-to-device copy of a large buffer, bytes read + written
  per second, measured once; the bytes-moved floor of an op is its byte count
  divided by this.
"""

from __future__ import annotations

import time

import numpy as np
import torch

SLEEP_CYCLES = 400_000  # ~0.2 ms at H200 clocks: longer than the host needs to queue a step


def host_call_times(calls) -> list:
    """Issue ``calls`` one by one; wall microseconds of each."""
    out = []
    clock = time.perf_counter_ns
    for call in calls:
        t0 = clock()
        call()
        out.append((clock() - t0) / 1e3)
    return out


def copy_bandwidth(device: torch.device) -> dict:
    """Bytes/s (read + write) of a large device-to-device copy."""
    cuda = device.type == "cuda"
    nbytes = (512 if cuda else 64) << 20
    src = torch.empty(nbytes, dtype=torch.uint8, device=device).fill_(1)
    dst = torch.empty_like(src)
    dst.copy_(src)
    reps = 10 if cuda else 5
    if cuda:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize(device)
        start.record()
        for _ in range(reps):
            dst.copy_(src)
        end.record()
        end.synchronize()
        seconds = start.elapsed_time(end) / 1e3 / reps
    else:
        best = float("inf")
        for _ in range(reps):
            t0 = time.perf_counter()
            dst.copy_(src)
            best = min(best, time.perf_counter() - t0)
        seconds = best
    return {"bytes_per_s": 2 * nbytes / seconds, "buffer_bytes": nbytes, "method": "D2D copy" if cuda else "memcpy"}


class DeviceTimer:
    """Times graph replays with CUDA events (see the module docstring)."""

    def __init__(self, device: torch.device, flush_l2: bool):
        self.device = device
        self.flush = None
        if flush_l2:
            l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0) or (50 << 20)
            self.flush = torch.empty(max(2 * l2, 64 << 20), dtype=torch.uint8, device=device)
        self.spin = hasattr(torch.cuda, "_sleep")
        self.events: list = []

    def time_replays(self, graphs: list) -> tuple:
        """Replay each graph once, back to back; (device us, host us) per graph."""
        while len(self.events) < 2 * len(graphs):
            self.events.append(torch.cuda.Event(enable_timing=True))
        if self.spin:
            torch.cuda._sleep(SLEEP_CYCLES)
        host = []
        for i, graph in enumerate(graphs):
            if self.flush is not None:
                self.flush.zero_()
            self.events[2 * i].record()
            t0 = time.perf_counter_ns()
            graph.replay()
            host.append((time.perf_counter_ns() - t0) / 1e3)
            self.events[2 * i + 1].record()
        self.events[2 * len(graphs) - 1].synchronize()
        dev = [self.events[2 * i].elapsed_time(self.events[2 * i + 1]) * 1e3 for i in range(len(graphs))]
        return dev, host


class WallTimer:
    """``DeviceTimer``'s interface for emulated graphs on CPU: wall time of each replay."""

    def time_replays(self, graphs: list) -> tuple:
        us = host_call_times([g.replay for g in graphs])
        return us, us


def paired_difference(*builds, resamples: int = 2000, seed: int = 0) -> dict:
    """Median of per-round differences (one implementation's replay minus the
    other's in the same round) with a 95% bootstrap interval of that median:
    pairing cancels what drifts between rounds (clocks, the other rows' cache
    state), so a difference well below the rows' spread still shows. Each
    argument holds the rounds of one build of the row (its buffers at other
    addresses, which moves the difference by more than rounds do); the
    bootstrap resamples the builds, then the rounds within each, so the
    interval covers both. ``builds``: each build's median. None for no rounds."""
    parts = [np.asarray(b, dtype=np.float64) for b in builds if len(b)]
    if not parts:
        return None
    rng = np.random.default_rng(seed)
    meds = np.empty(resamples)
    for i in range(resamples):
        picked = [parts[j] for j in rng.integers(0, len(parts), size=len(parts))]
        meds[i] = np.median(np.concatenate([p[rng.integers(0, p.size, size=p.size)] for p in picked]))
    lo, hi = np.percentile(meds, [2.5, 97.5])
    v = np.concatenate(parts)
    return {"median": float(np.median(v)), "ci95": [float(lo), float(hi)], "n": int(v.size),
            "builds": [float(np.median(p)) for p in parts]}


def stats(values) -> dict:
    """median / p99 / mean / n of a sample (empty -> None)."""
    v = np.asarray(values, dtype=np.float64)
    if v.size == 0:
        return None
    return {
        "median": float(np.median(v)),
        "p99": float(np.percentile(v, 99)),
        "mean": float(v.mean()),
        "n": int(v.size),
    }
