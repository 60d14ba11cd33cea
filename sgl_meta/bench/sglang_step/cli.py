"""``python -m sgl_meta.bench --sglang``: SGLang's own decode-step metadata, plugin off then on.

For each backend the plugin serves (``points.BACKENDS``), in decode, target verify,
draft extend and draft decode, the real SGLang 0.5.23 backend is built through its attention test kit
(``sglang.test.kits.attention_unittest``) at serving sizes, its CUDA-graph
metadata captured, and each replay step timed (``measure.py``): SGLang's own kernels and sgl-meta's
hooks in the same process, step by step in turn (``plugin_switch.py``). The buffers the attention kernels read are compared
between the two after each check step; a difference fails the run (exit 1).

Where the attention libraries (sgl_kernel, flashinfer, deep_gemm, flash_mla) are
not installed they are import stubs that raise if called (``stubs.py``): the
measured path calls none of them. Their planners that the metadata path would
call are left out of both sides (``backends.py``).
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import traceback

import torch

from ..report import environment, write_json
from . import points, stubs, table, why_not_here
from .plugin_switch import Switch

# backends and measure import SGLang: loaded once the run is known to be possible
# (and after stubs.install()), so --help and argument errors need neither.


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m sgl_meta.bench --sglang", description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", nargs="+", choices=points.BACKENDS, default=list(points.BACKENDS),
                   help="SGLang attention backends to build (default: all; fa3_page1 is FA3 at page size 1, its "
                        "default; fa3_topk4 is FA3 with EAGLE top-k 4)")
    p.add_argument("--mode", nargs="+", choices=points.MODES, default=list(points.MODES),
                   help="forward modes whose replay steps are timed (default: all)")
    p.add_argument("--sizes", type=_sizes, default=points.SIZES,
                   help="bs:context,... (default 1:131072,64:32768,256:8192); each context past the "
                        f"{points.HEADROOM} tokens a run grows requests by")
    p.add_argument("--max-len", type=_max_len, metavar="TOKENS",
                   help="draw the requests' lengths as for a context of TOKENS (the upper half of it; the point's "
                        "context where that is shorter) while each backend keeps the point's context: a "
                        "long-context model serving shorter requests, where FA3 at page size 1 refreshes its whole "
                        "static width (default: the point's context)")
    p.add_argument("--steps", type=int, default=100, help="timed replay steps per point and side (default 100)")
    p.add_argument("--builds", type=int, default=4,
                   help="builds of each point, its buffers at other addresses, the steps split between them "
                        "(default 4)")
    p.add_argument("--control", action="store_true",
                   help="both sides run SGLang's own code (the plugin's attributes switched step by step as in a "
                        "measured run, to SGLang's values on both): on - off measures the bench's own error")
    p.add_argument("--merge", nargs="+", metavar="JSON",
                   help="no run: combine the JSON of runs of disjoint parts of the grid (same GPU, build and plan) "
                        "into one table, rows in grid order")
    p.add_argument("--json", metavar="PATH", help="write environment, grid and numbers as JSON")
    p.add_argument("--markdown", metavar="PATH", help="write the table as markdown")
    p.add_argument("--publish", metavar="DIR",
                   help="write the published pair <date>-<gpu>-sglang-step.{json,md} (with --max-len N: "
                        "sglang-step-max-len-N) into DIR (e.g. benchmarks/results), once the whole grid is measured "
                        "or merged")
    return p


def _sizes(text: str) -> tuple:
    """``bs:context,...`` as ((bs, context), ...): bs >= 1, each context past points.HEADROOM."""
    out = []
    for item in text.split(","):
        parts = item.split(":")
        try:
            bs, context = (int(v) for v in parts)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{item!r} is not bs:context (two integers)") from None
        if bs < 1 or context <= points.HEADROOM:
            raise argparse.ArgumentTypeError(f"{item!r}: bs must be >= 1 and the context past "
                                             f"{points.HEADROOM} tokens")
        out.append((bs, context))
    return tuple(out)


def _max_len(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value <= points.HEADROOM:
        raise argparse.ArgumentTypeError(f"must exceed the {points.HEADROOM} tokens a run grows each request by, "
                                         f"got {value}")
    return value


def run_points(grid, device: str, plan, switch, log, done=lambda out: None) -> dict:
    """Each point built ``plan.builds`` times, each time twice alike (plugin off,
    plugin on) behind a spacer of random size (so that the buffers sit at other
    addresses), and measured; ``done(results so far)`` after each point."""
    from . import backends
    from .measure import merge, run

    rng = random.Random(0)
    out = {}
    for point in grid:
        builds = []
        try:
            for _ in range(plan.builds):
                spacer = torch.empty(rng.randrange(1, 1 << 20) * 64, dtype=torch.uint8, device=device)
                off, on = _build_pair(backends, point, device, switch, plan.max_len)
                builds.append(run(off, on, switch, plan.per_build()))
                off = on = spacer = None
                _release(device)
            out[point] = merge(builds)
        except Exception as err:  # one point's failure is reported in its row; the rest still run
            out[point] = {"error": f"{type(err).__name__}: {err}"}
            log(traceback.format_exc())
        off = on = spacer = builds = None
        _release(device)
        log(f"  {point}: {out[point].get('error', 'done')}")
        done(out)
    return out


def _build_pair(backends, point, device: str, switch, max_len=None) -> tuple:
    """The point built with SGLang's attributes, then with the plugin's. A module
    the first build imports copies SGLang's function by name (and a backend may
    keep it at construction): the switch records such copies before it turns
    the plugin on, so that the second build gets the plugin's."""
    switch.off()
    off = backends.build(*point, device=device, max_len=max_len)
    switch.refresh()
    switch.on()
    on = backends.build(*point, device=device, max_len=max_len)
    switch.refresh()
    return off, on


def _release(device: str) -> None:
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def compare(off: dict, on: dict) -> list:
    """Where the buffers differ between the sides: ``["step k: name ..."]``."""
    diffs = []
    for k, (a, b) in enumerate(zip(off["snapshots"], on["snapshots"])):
        for name in a:
            if name not in b:
                diffs.append(f"step {k}: {name} missing with the plugin on")
            elif a[name].shape != b[name].shape or not torch.equal(a[name], b[name]):
                diffs.append(f"step {k}: {name} differs")
    return diffs


SAME_RUN = ("gpu", "driver", "torch", "cuda", "python", "sgl_meta_commit")
"""Environment fields every merged part must share (the date may differ)."""


def _plan(doc: dict) -> dict:
    """A run's plan, ``control`` and ``max_len`` at their defaults where the plan has none (a measured
    run's, lengths as for each point's context)."""
    return {"control": False, "max_len": None, **doc["plan"]}


def merge_runs(docs: list) -> dict:
    """Runs of disjoint parts of the grid as one document: the first's environment,
    plan and plugin line, every row in grid order, the left-out lines of all."""
    first = docs[0]
    for doc in docs[1:]:
        for key in SAME_RUN:
            if doc["environment"].get(key) != first["environment"].get(key):
                raise ValueError(f"--merge: the runs differ in {key}: {first['environment'].get(key)!r}, "
                                 f"{doc['environment'].get(key)!r}")
        if _plan(doc) != _plan(first):
            raise ValueError(f"--merge: the runs differ in their plan: {first['plan']}, {doc['plan']}")
    rows, seen = [], set()
    for doc in docs:
        for row in doc["rows"]:
            key = (row["backend"], row["mode"], row["bs"], row["context"])
            if key in seen:
                raise ValueError(f"--merge: {key} is in more than one run")
            seen.add(key)
            rows.append(row)
    order = {b: i for i, b in enumerate(points.BACKENDS)}, {m: i for i, m in enumerate(points.MODES)}
    rows.sort(key=lambda r: (order[0].get(r["backend"], len(order[0])), order[1].get(r["mode"], len(order[1])),
                             r["bs"]))
    left_out = list(dict.fromkeys(line for doc in docs for line in doc.get("left_out", [])))
    return {**first, "left_out": left_out, "rows": rows}


def _write(args, doc: dict, final: bool = True) -> str:
    text = table.markdown(doc)
    if args.publish and final:
        from ..publish import write

        max_len = doc["plan"].get("max_len")
        write(args.publish, f"sglang-step-max-len-{max_len}" if max_len else "sglang-step", doc, text)
    if args.json:
        write_json(args.json, doc)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")
    return text


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.merge:
        docs = []
        for path in args.merge:
            with open(path) as f:
                docs.append(json.load(f))
        try:
            doc = merge_runs(docs)
        except ValueError as err:
            print(f"python -m sgl_meta.bench --sglang {err}", file=sys.stderr)
            return 2
        print(_write(args, doc))
        return 1 if any(r.get("equal") is False for r in doc["rows"]) else 0
    why = why_not_here()
    if why:
        print(f"python -m sgl_meta.bench --sglang: {why}.", file=sys.stderr)
        return 2
    device = "cuda"
    stubbed = stubs.install()
    from . import backends
    from .measure import Plan

    grid = points.grid(args.backend, args.mode, args.sizes)
    plan = Plan(steps=args.steps, builds=args.builds, control=args.control, max_len=args.max_len)
    one = plan.per_build()
    if args.builds < 1 or args.steps < 1 or points.growth(one.steps, one.check_steps + one.warmup) > points.HEADROOM:
        print(f"python -m sgl_meta.bench --sglang: --steps {args.steps} over --builds {args.builds} grows each "
              f"request past the {points.HEADROOM} tokens a point leaves for it (or is not positive): fewer steps "
              f"per build", file=sys.stderr)
        return 2

    def log(line):
        print(line, file=sys.stderr, flush=True)

    switch, hooks = Switch.apply()
    if args.control:
        switch = switch.control()
    log(f"plugin: {', '.join(hooks['hooked'])} ({len(switch)} attributes switched"
        f"{', to SGLang values on both sides: a control run' if args.control else ''}); {len(grid)} points")
    env = environment(torch.device(device))
    state = {"failed": False}

    def report(results: dict) -> None:
        # Rewritten after every point, so a run stopped early keeps what it measured.
        rows = [_row(p, results[p]) for p in grid if p in results]
        state["failed"] = any(r["equal"] is False for r in rows)
        left_out = backends.LEFT_OUT + list(points.NOT_MEASURED.values())
        doc = {"environment": env, "stubbed": stubbed, "plugin": hooks, "left_out": left_out,
               "plan": vars(plan), "rows": rows}
        text = _write(args, doc, final=len(rows) == len(grid))
        if len(rows) == len(grid):
            print(text)

    run_points(grid, device, plan, switch, log, done=report)
    return 1 if state["failed"] else 0


def _row(point, result: dict) -> dict:
    a, b = result.get("off", result), result.get("on", result)
    diffs = compare(a, b) if "error" not in result else []
    return {"backend": point[0], "mode": point[1], "bs": point[2], "context": point[3],
            "off": a.get("metrics"), "on": b.get("metrics"), "on_minus_off": result.get("on_minus_off", {}),
            "error": result.get("error"),
            "equal": None if "error" in result else not diffs, "diffs": diffs[:20]}
