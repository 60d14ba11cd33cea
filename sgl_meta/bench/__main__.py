"""``python -m sgl_meta.bench``: serving-trace replay benchmark with correctness check.

Exit status: 0 on success, 1 when a fused op's output differs from its eager
reference (the message names preset, op, step, tensor and first element) or,
with ``--upstream``, from SGLang's kernel on what that kernel defines, 2 on bad
arguments.

``--upstream [auto|PATH]`` adds the side-by-side comparison with SGLang 0.5.23's
own kernels (``sgl_meta/bench/upstream/``): ``auto`` uses the importable
``sglang`` package, PATH a site dir holding ``sglang/`` (e.g. a ``pip install
--target`` dir) or the sglang wheel itself. ``--preset none`` runs only that.
"""

from __future__ import annotations

import argparse
import sys

import torch

from .buckets import capture_batch_sizes
from .check import BenchMismatch
from .presets import ALIASES, PRESETS, resolve
from .report import environment, print_table, trace_notes, write_json
from .runner import Options, run_preset
from .timing import copy_bandwidth
from .trace import min_context_len

# Defaults sized for about a minute for all presets on an H200. The CPU kernels
# and the eager reference on CPU take milliseconds where the GPU takes
# microseconds, so on CPU the run is scaled down (fewer steps, buckets up to 32,
# contexts capped: narrower page tables, shorter requests) to seconds on two
# cores; the output says so.
GPU_DEFAULTS = dict(steps=1500, warmup=30, max_bs=256, context_len=None)
CPU_DEFAULTS = dict(steps=40, warmup=3, max_bs=32, context_len=8192)


def _int_list(text: str) -> list:
    try:
        vals = sorted({int(v) for v in text.split(",") if v.strip()})
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from e
    if not vals or vals[0] < 1:
        raise argparse.ArgumentTypeError("batch sizes must be >= 1")
    return vals


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m sgl_meta.bench",
        description="Replay a simulated continuous-batching decode trace through each sgl_meta "
        "op and its eager reference, side by side: host us per call, device us per call "
        "(CUDA-graph replays), bytes-moved floor, and a correctness check every step.",
        epilog="python -m sgl_meta.bench --sglang [--help]: SGLang's own decode-step metadata with the sgl-meta "
        "plugin off and on (needs a GPU and SGLang 0.5.23; docs/sglang_step.md).",
    )
    names = list(PRESETS) + list(ALIASES)
    p.add_argument("--preset", nargs="+", default=["all"], metavar="NAME",
                   help=f"model preset(s) of the trace replay: {', '.join(names)}, or none (default: all)")
    p.add_argument("--steps", type=int, help=f"measured decode steps per preset (default {GPU_DEFAULTS['steps']} on GPU, {CPU_DEFAULTS['steps']} on CPU)")
    p.add_argument("--warmup", type=int, help=f"unmeasured steps first (default {GPU_DEFAULTS['warmup']} GPU, {CPU_DEFAULTS['warmup']} CPU)")
    p.add_argument("--seed", type=int, default=0, help="trace and poison seed; same seed, same trace (default 0)")
    p.add_argument("--max-bs", type=int, help=f"largest batch / graph bucket (default {GPU_DEFAULTS['max_bs']} GPU, {CPU_DEFAULTS['max_bs']} CPU)")
    p.add_argument("--buckets", type=_int_list, help="explicit bucket list, e.g. 1,2,4,8; its largest is the max bs (default: SGLang's list up to --max-bs)")
    p.add_argument("--spec", action=argparse.BooleanOptionalAction, default=None,
                   help="speculative decoding on/off (default: per preset: gpt-oss, DeepSeek and Llama on FA3 on, Llama on TRT-LLM MHA off)")
    p.add_argument("--check-every", type=int, default=1, metavar="N", help="compare fused vs reference every N steps (default 1: every step)")
    p.add_argument("--context-len", type=int, help="override the presets' context length (smaller tables, for quick "
                   f"runs; default: the model's on GPU, {CPU_DEFAULTS['context_len']} on CPU)")
    p.add_argument("--flush-l2", action=argparse.BooleanOptionalAction, default=True,
                   help="flush L2 before each timed graph replay (default on)")
    p.add_argument("--device", choices=("auto", "cuda", "cpu"), default="auto", help="default: cuda when available")
    p.add_argument("--json", metavar="PATH", help="write results (environment, args, numbers) as JSON")
    p.add_argument("--plot", metavar="PATH", help="write a PNG: host/device us per call vs batch size (needs matplotlib)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--upstream", nargs="?", const="auto", metavar="auto|PATH",
                   help="also run SGLang 0.5.23's and vLLM 0.33's own kernels beside ours on the same inputs (host, "
                   "device, in-graph launch, cold start, outputs checked): auto = the installed sglang package; "
                   "PATH = a site dir holding sglang/ or the sglang wheel; vLLM's rows run where vllm 0.33.0 "
                   "imports (docs/vllm.md). Says what is missing (sglang, vllm, GPU, triton, tvm-ffi, nvcc) and "
                   "carries on without those rows")
    p.add_argument("--cold-start", action=argparse.BooleanOptionalAction, default=True,
                   help="with --upstream: time the first call over the bucket list with empty compile caches (default on)")
    p.add_argument("--markdown", metavar="PATH", help="with --upstream: write the side-by-side table as markdown")
    p.add_argument("--publish", metavar="DIR", help="write the published files into DIR (e.g. benchmarks/results): "
                   "<date>-<gpu>-bench.{json,md} for the trace replay, <date>-<gpu>-upstream.{json,md} with --upstream")
    p.add_argument("--replays", type=int, default=None, metavar="N",
                   help="with --upstream: timed graph replays per row and implementation (default 300)")
    p.add_argument("--rows", default=None, metavar="TEXT",
                   help="with --upstream: only the rows (and cold-start entries) whose name contains TEXT "
                   "(case-insensitive); the others are listed as not selected")
    p.add_argument("--layouts", type=int, default=None, metavar="N",
                   help="with --upstream: builds of each row at other addresses, the replays split between them "
                        "(default 8)")
    # Self-test of the checker: corrupt one fused output at this step.
    p.add_argument("--corrupt-fused", type=int, metavar="STEP", help=argparse.SUPPRESS)
    # CPU self-test of the graph-mode path: "graphs" that replay the calls eagerly.
    p.add_argument("--emulate-graphs", action="store_true", help=argparse.SUPPRESS)
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--sglang" in argv:  # its own options: python -m sgl_meta.bench --sglang --help
        from .sglang_step.cli import main as sglang_main

        return sglang_main([a for a in argv if a != "--sglang"])
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda: no CUDA device is available")
    if args.emulate_graphs and args.device != "cpu":
        parser.error("--emulate-graphs needs --device cpu")
    cuda = args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())
    device = torch.device("cuda", torch.cuda.current_device()) if cuda else torch.device("cpu")
    defaults = GPU_DEFAULTS if cuda else CPU_DEFAULTS
    steps = defaults["steps"] if args.steps is None else args.steps
    warmup = defaults["warmup"] if args.warmup is None else args.warmup
    if args.buckets and args.max_bs is not None and args.max_bs != max(args.buckets):
        parser.error(f"--buckets sets the largest batch ({max(args.buckets)}); --max-bs {args.max_bs} disagrees: "
                     "give one of them")
    max_bs = max(args.buckets) if args.buckets else (defaults["max_bs"] if args.max_bs is None else args.max_bs)
    context_len = defaults["context_len"] if args.context_len is None else args.context_len
    if steps < 1 or warmup < 0 or max_bs < 1 or args.check_every < 1 or (
            context_len is not None and context_len < 1):
        parser.error("--steps, --max-bs, --check-every, --context-len must be >= 1 and --warmup >= 0")
    if args.preset == ["none"]:
        if not args.upstream:
            parser.error("--preset none leaves nothing to run without --upstream")
        presets = []
    else:
        try:
            presets = resolve(args.preset)
        except ValueError as e:
            parser.error(str(e))
    for preset in presets if context_len is not None else []:
        need = min_context_len(preset, preset.spec if args.spec is None else args.spec)
        if context_len < need:
            parser.error(f"--context-len {context_len}: {preset.name} needs at least {need} tokens "
                         "(a prompt and an output token, and room for the draft tokens past the end)")
    if args.markdown and not args.upstream:
        parser.error("--markdown writes the --upstream table; add --upstream")
    if args.replays is not None and (args.replays < 1 or not args.upstream):
        parser.error("--replays N (N >= 1) sets the --upstream rows' replays; add --upstream")
    if args.rows is not None and not args.upstream:
        parser.error("--rows TEXT picks --upstream rows; add --upstream")
    if args.layouts is not None and (args.layouts < 1 or not args.upstream):
        parser.error("--layouts N (N >= 1) sets the --upstream rows' builds; add --upstream")
    if args.plot:
        from .plot import check_available

        check_available()

    opts = Options(
        presets=presets, steps=steps, warmup=warmup, seed=args.seed, max_bs=max_bs,
        buckets=args.buckets, check_every=args.check_every, spec=args.spec,
        context_len=context_len, flush_l2=args.flush_l2, device=device,
        progress=not args.no_progress, corrupt_fused=args.corrupt_fused,
        emulate_graphs=args.emulate_graphs, upstream=args.upstream,
    )
    env = environment(device)
    bw = copy_bandwidth(device)
    resolved = dict(vars(args), steps=steps, warmup=warmup, max_bs=max_bs, context_len=context_len,
                    preset=[p.name for p in presets])
    graph_mode = "cuda" if cuda else ("emulated" if args.emulate_graphs else None)
    doc = {"environment": env, "args": resolved, "copy_bandwidth": bw, "graph_mode": graph_mode,
           "presets": [], "ok": None}
    scaled = cpu_scaling(args, steps, warmup, max_bs, context_len) if not cuda and presets else None
    if scaled:
        doc["cpu_scaled"] = scaled
    print(
        f"sgl_meta bench on {env['gpu'] or 'CPU: ' + env['cpu']} | torch {env['torch']} | "
        f"{steps} steps (+{warmup} warmup) per preset | max bs {max_bs} | seed {args.seed} | "
        f"copy bandwidth {bw['bytes_per_s'] / 1e9:.0f} GB/s",
        file=sys.stderr,
    )
    if scaled:
        print(f"CPU-scaled run: {scaled}", file=sys.stderr)
    try:
        for preset in presets:
            res = run_preset(preset, opts, bw["bytes_per_s"])
            doc["presets"].append(res)
            if cuda:
                torch.cuda.empty_cache()  # next preset's buffers and graph pool start clean
            if "trace" in res:
                tr = res["trace"]
                print(
                    f"  {preset.name}: {res['wall_s']:.1f} s, {len(res['workloads'])} op(s), "
                    f"mean bs {tr['batch_size_mean']:.1f} (max {tr['batch_size_max']}), "
                    f"{tr['requests_finished']} requests finished, {res['graphs_captured']} graphs",
                    file=sys.stderr,
                )
            else:
                print(f"  {preset.name}: skipped ({res['skipped']})", file=sys.stderr)
    except BenchMismatch as e:
        doc["ok"], doc["error"] = False, str(e)
        print(f"\nFAILED: {e}", file=sys.stderr)
        if args.json:
            write_json(args.json, doc)
        return 1
    doc["ok"] = True
    if presets:
        print_table(doc, trace_notes(doc))
    if args.upstream:
        if not run_upstream_section(doc, args, device, max_bs):
            doc["ok"] = False
    if args.json:
        write_json(args.json, doc)
        print(f"wrote {args.json}", file=sys.stderr)
    if args.markdown:
        from .upstream.table import write_markdown

        write_markdown(args.markdown, doc)
        print(f"wrote {args.markdown}", file=sys.stderr)
    if args.publish:
        for path in publish_run(args.publish, doc, bool(presets), bool(args.upstream)):
            print(f"wrote {path}", file=sys.stderr)
    if args.plot and presets:
        from .plot import write_plot

        write_plot(args.plot, doc)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0 if doc["ok"] else 1


def cpu_scaling(args, steps: int, warmup: int, max_bs: int, context_len) -> str:
    """What a CPU run took smaller than the GPU defaults, in words (empty when nothing was)."""
    gpu = GPU_DEFAULTS
    parts = []
    if args.steps is None and steps < gpu["steps"]:
        parts.append(f"{steps} steps (+{warmup} warmup) per preset instead of {gpu['steps']}")
    if args.max_bs is None and not args.buckets and max_bs < gpu["max_bs"]:
        parts.append(f"buckets up to {max_bs} instead of {gpu['max_bs']}")
    if args.context_len is None and context_len:
        parts.append(f"contexts capped at {context_len:,} tokens instead of each model's "
                     "(narrower page tables, requests clipped)")
    if not parts:
        return ""
    return "; ".join(parts) + ". --steps, --max-bs and --context-len set them."


def publish_run(directory: str, doc: dict, trace: bool, upstream: bool) -> list:
    """The run as published files: the trace replay and the upstream comparison, each with its table."""
    from . import publish
    from .report import markdown
    from .upstream.table import markdown as upstream_markdown

    paths = []
    if trace:
        bench = {k: v for k, v in doc.items() if k != "upstream"}
        paths += publish.write(directory, "bench", bench, markdown(bench))
    if upstream:
        up = dict(doc, presets=[])
        paths += publish.write(directory, "upstream", up, upstream_markdown(up))
    return paths


def run_upstream_section(doc: dict, args, device, max_bs: int) -> bool:
    """The --upstream comparison into ``doc["upstream"]``; False when a check failed."""
    from .upstream.run import problems, run_upstream
    from .upstream.table import print_upstream

    buckets = args.buckets or capture_batch_sizes(max_bs, spec=True)
    up = run_upstream(args.upstream, device, seed=args.seed, buckets=buckets, cold_start=args.cold_start,
                      flush_l2=args.flush_l2, replays=args.replays, layouts=args.layouts, select=args.rows)
    doc["upstream"] = up
    print_upstream(up)
    bad = problems(up)
    if bad:
        doc["error"] = "upstream comparison: " + "\n".join(bad)
        print("\nFAILED: " + doc["error"], file=sys.stderr)
    return not bad


if __name__ == "__main__":
    sys.exit(main())
