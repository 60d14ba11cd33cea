"""One row measured: checks, host time, device time and in-graph launch cost.

For each implementation present (upstream, ours, the eager reference, and
for the KV read rows the bare gather of the same pages):

1. one eager call (compiles upstream's kernel if the cold start did not), then
   the checks: ours vs the reference on every element of every output, ours vs
   upstream (and vs the bare gather) on the elements upstream defines
   (``Row.regions``), and that upstream did write those (not still the poison);
2. host us: wall time of one direct call (all of the row's calls for one
   refresh), outside any graph, interleaved by implementation; the queue is
   drained every few calls (untimed) so a full launch queue never blocks one;
3. device us: the calls captured in a CUDA graph, replayed under CUDA events
   behind a spin kernel with L2 flushed first (``timing.DeviceTimer``, as the
   trace replay); after a re-poison the first replay's outputs are checked too.
   Each round replays every implementation once, and the order rotates so that
   each takes every position equally often (a row of a few microseconds moves
   by a few percent between positions and runs, so 300 rounds by default);
   ours minus upstream is also taken round by round (``device_diff_us``: the
   median difference with a 95% bootstrap interval), which resolves what the
   medians' run-to-run spread hides; the rounds are split between several
   builds of the row at other addresses (``LAYOUTS``, each build's median in
   ``device_diff_us["builds"]``; the interval resamples builds and rounds),
   checked each;
4. launch us: host wall time of ``graph.replay()`` for that graph, i.e. the
   per-step host cost when the refresh is recorded in the step's graph.
"""

from __future__ import annotations

import gc
import time
from typing import Iterable

import torch

from .. import graphs as graph_capture
from ..check import BenchMismatch, compare
from ..timing import DeviceTimer, paired_difference, stats
from .fixtures import IMPLS, Row

HOST_ROUNDS = 10
HOST_PER_ROUND = 32
DRAIN_EVERY = 8
DEVICE_REPLAYS = 300  # rounds; --replays
LAYOUTS = 8  # builds of each row the rounds are split between; --layouts
UNWRITTEN_LIMIT = 0.01  # share of upstream's region still equal to the poison


def compare_regions(ours: dict, up: dict, regions: dict, where: str, other: str = "upstream"):
    """Message naming the first element where ours and upstream (or ``other``)
    differ inside upstream's regions, or None."""
    names = list(regions)
    if not names:
        return None
    flags = torch.stack([(ours[n][regions[n]] != up[n][regions[n]]).any() for n in names]).tolist()
    bad = [n for n, flag in zip(names, flags) if flag]
    if not bad:
        return None
    lines = [f"{where}: ours differs from {other} on what upstream defines"]
    for n in bad:
        inside = torch.zeros_like(ours[n], dtype=torch.bool)
        inside[regions[n]] = True
        diff = (inside & (ours[n] != up[n])).nonzero()
        first = tuple(diff[0].tolist())
        lines.append(f"  {n}: {diff.shape[0]} of {int(inside.sum())} compared elements differ; first at {first}: "
                     f"ours {ours[n][first].item()}, {other} {up[n][first].item()}")
    return "\n".join(lines)


def unwritten(up: dict, poison: dict, regions: dict, where: str):
    """Message when upstream left (much of) a compared region at the poison: a
    comparison against values nobody wrote proves nothing."""
    names = list(regions)
    if not names:
        return None
    counts = torch.stack([(up[n][regions[n]] == poison[n][regions[n]]).sum() for n in names]).tolist()
    sizes = [up[n][regions[n]].numel() for n in names]
    bad = [f"{n}: {c} of {s}" for n, c, s in zip(names, counts, sizes) if s and c > UNWRITTEN_LIMIT * s]
    return f"{where}: upstream left elements unwritten in its own regions ({', '.join(bad)})" if bad else None


def check_row(row: Row, mode: str) -> list:
    """Problems found (empty when everything agrees)."""
    problems = []
    where = f"{row.name} ({mode})"
    if "ref" in row.outputs:
        try:
            compare(row.outputs["ours"], row.outputs["ref"], where)
        except BenchMismatch as e:
            problems.append(str(e))
    if "upstream" in row.outputs:
        for msg in (
            compare_regions(row.outputs["ours"], row.outputs["upstream"], row.regions, where),
            unwritten(row.outputs["upstream"], row.poison, row.regions, where),
        ):
            if msg:
                problems.append(msg)
    if "gather" in row.outputs:  # a ceiling that computed something else would be no ceiling
        msg = compare_regions(row.outputs["ours"], row.outputs["gather"], row.regions, where, other="the bare gather")
        if msg:
            problems.append(msg)
    return problems


def _run(calls) -> None:
    for c in calls:
        c()


def host_times(row: Row, impls) -> dict:
    samples = {impl: [] for impl in impls}
    clock = time.perf_counter_ns
    for r in range(HOST_ROUNDS):
        for impl in impls if r % 2 == 0 else impls[::-1]:
            calls = row.calls[impl]
            for i in range(HOST_PER_ROUND):
                t0 = clock()
                for c in calls:
                    c()
                samples[impl].append((clock() - t0) / 1e3)
                if i % DRAIN_EVERY == DRAIN_EVERY - 1:
                    torch.cuda.synchronize()
        torch.cuda.synchronize()
    return samples


def replay_orders(names: list, rounds: int):
    """``rounds`` orders of ``names``: every rotation, forwards then backwards.
    Over whole cycles (a multiple of ``2 * len(names)`` rounds; the default 300
    is one for 2 or 3 implementations) each name takes each position equally
    often, and with up to 3 names also follows each other name equally often."""
    n = len(names)
    for r in range(rounds):
        rot = names[r % n:] + names[: r % n]
        yield rot if (r // n) % 2 == 0 else rot[::-1]


def measure_row(rows: Iterable[Row], timer: DeviceTimer, pool, replays: int = DEVICE_REPLAYS,
                layouts: int = 1) -> dict:
    """One row over ``layouts`` builds of it (``rows`` yields each when asked,
    after the previous one is measured): checks on every build, host times on
    the first, the device rounds split evenly between them and pooled."""
    result, impls = None, []
    host, dev, launch, paired = {}, {}, {}, []  # paired: each build's ours - upstream per round
    capture_errors = {}
    for k, row in zip(range(layouts), rows):
        if result is None:
            impls = [i for i in IMPLS if i in row.calls]
            result = {"case": row.name, "group": row.group, "params": row.params, "note": row.note, "impls": {},
                      "checks": {"eager": [], "graph": []}}
        row.repoison()
        for impl in impls:
            _run(row.calls[impl])
        torch.cuda.synchronize()
        result["checks"]["eager"] += check_row(row, "eager")
        if k == 0:
            gc.collect()
            gc.disable()  # collector pauses out of the host-time tails
            try:
                host = host_times(row, impls)
            finally:
                gc.enable()

        graphs = {}
        for impl in impls:
            try:
                graphs[impl] = graph_capture.capture(row.calls[impl], pool)
            except Exception as e:  # name it in the row; the other columns still count
                # The first line: CUDA errors append pages of generic advice.
                capture_errors[impl] = f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"
                # A capture that failed leaves its pool marked as recording; the
                # next capture would fail on it, so the rest of the row gets a new one.
                pool = torch.cuda.graph_pool_handle()
        torch.cuda.synchronize()
        if graphs:
            row.repoison()
            for g in graphs.values():
                g.replay()
            torch.cuda.synchronize()
            if set(graphs) == set(impls):
                result["checks"]["graph"] += check_row(row, "graph")
            # whole cycles of the rotation (2 x implementations rounds) in each
            # build, so no implementation holds a position more often than another
            cycle = 2 * len(graphs)
            layout_pairs = []
            for seq in replay_orders(list(graphs), -(-replays // (cycle * layouts)) * cycle):
                d, h = timer.time_replays([graphs[i] for i in seq])
                for impl, dv, hv in zip(seq, d, h):
                    dev.setdefault(impl, []).append(dv)
                    launch.setdefault(impl, []).append(hv)
                by_impl = dict(zip(seq, d))
                if "ours" in by_impl and "upstream" in by_impl:
                    layout_pairs.append(by_impl["ours"] - by_impl["upstream"])
            paired.append(layout_pairs)
        del graphs
    for impl in impls:
        result["impls"][impl] = {
            "host_us": stats(host[impl]),
            "device_us": stats(dev[impl]) if impl in dev else None,
            "launch_us": stats(launch[impl]) if impl in launch else None,
            "calls": len(row.calls[impl]),
        }
    if capture_errors:
        result["capture_errors"] = capture_errors
    result["ratio_ours_upstream"] = ratios(result["impls"])
    result["device_diff_us"] = paired_difference(*paired)
    if "gather" in result["impls"]:
        result["ratio_ours_gather"] = ratios(result["impls"], "gather")["device"]
    result["ok"] = not any(result["checks"].values())
    return result


def ratios(impls: dict, other: str = "upstream") -> dict:
    """ours / ``other`` medians (host, device, launch); None where one is missing."""
    out = {}
    for key, col in (("host", "host_us"), ("device", "device_us"), ("launch", "launch_us")):
        a = (impls.get("ours") or {}).get(col)
        b = (impls.get(other) or {}).get(col)
        out[key] = a["median"] / b["median"] if a and b and b["median"] > 0 else None
    return out


def first_call_seconds(per_bucket: list, device: torch.device) -> float:
    """Wall seconds to run every bucket's calls once, then drain the stream."""
    torch.cuda.synchronize(device)
    t0 = time.perf_counter()
    for calls in per_bucket:
        _run(calls)
    torch.cuda.synchronize(device)
    return time.perf_counter() - t0
