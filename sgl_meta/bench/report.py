"""Results out: environment record, the summary table (terminal and markdown), the JSON file."""

from __future__ import annotations

import json
import platform
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Optional

import numpy as np
import torch

import sgl_meta


def environment(device: torch.device) -> dict:
    """Where and with what the run happened."""
    info = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": device.type,
        "gpu": None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "numpy": np.__version__,
        "sgl_meta": sgl_meta.__version__,
        "sgl_meta_path": str(Path(sgl_meta.__file__).parent),
        # "-dirty" when tracked files differ from the commit: the numbers are then not that commit's
        "sgl_meta_commit": _run(["git", "-C", str(Path(sgl_meta.__file__).parent), "describe", "--always", "--dirty",
                                 "--abbrev=7"]),
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info["gpu"] = torch.cuda.get_device_name(device)
        info["driver"] = _run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"])  # one per host
        info["gpu_capability"] = f"{props.major}.{props.minor}"
        info["gpu_sms"] = props.multi_processor_count
        info["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
    return info


def _run(cmd: list):
    """First line of a command's output, or None when it is missing or fails."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return out.strip().splitlines()[0] if out.strip() else None


def environment_line(env: dict) -> str:
    """Date, device, driver, torch, Python and sgl_meta of a run, on one line (markdown headers)."""
    device = env.get("gpu") or f"CPU: {env.get('cpu')}"
    if env.get("driver"):
        device += f" (driver {env['driver']})"
    commit = f" ({env['sgl_meta_commit']})" if env.get("sgl_meta_commit") else ""
    return (f"{env.get('date', '?')} · {device} · torch {env.get('torch')} (CUDA {env.get('cuda')}) · "
            f"Python {env.get('python', '?')} · sgl_meta {env.get('sgl_meta')}{commit}")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def write_json(path: str, doc: dict) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc, indent=2, default=_jsonable) + "\n")


def _jsonable(x):
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return float(x)
    if isinstance(x, torch.device):
        return str(x)
    return str(x)


# -- the table ----------------------------------------------------------------


def _num(x) -> str:
    if x is None:
        return "-"
    if x >= 1e5:
        return f"{x:.2g}"
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.2f}"


def diff_cell(d: Optional[dict]) -> str:
    """A paired difference (``timing.paired_difference``): median [95% interval], us."""
    if not d:
        return "-"
    lo, hi = d["ci95"]
    return f"{d['median']:+.2f} [{lo:+.2f}, {hi:+.2f}]"


def _med_p99(s) -> str:
    return "-" if s is None else f"{_num(s['median'])} / {_num(s['p99'])}"


def _ratio(num, den) -> str:
    if not num or not den or den["median"] <= 0:
        return "-"
    r = num["median"] / den["median"]
    return f"{r:.0f}x" if r >= 100 else f"{r:.1f}x"


def _ratio_of(num, den) -> str:
    """``num / den`` of two medians, as a plain factor (``1.04x``)."""
    if not num or not den or den["median"] <= 0:
        return "-"
    return f"{num['median'] / den['median']:.2f}x"


def table_rows(doc: dict) -> tuple:
    """(header, groups): one group of rows (fused, reference, then any baselines,
    e.g. the bare gather) per preset and op. The fused row's "ref/fused" cell is
    the reference's time over the op's; a baseline's cell the fused op's time
    over the baseline's (device with graphs): 1.04x = 4% slower."""
    cuda = doc.get("graph_mode") is not None  # device columns
    header = ["preset", "op x calls/step", "impl", "host", "p99"]
    if cuda:
        header += ["dev", "p99"]
    header += ["host/step"] + (["dev/step", "launch/step"] if cuda else [])
    # The floor is a DRAM-traffic bound for the GPU; on CPU, caches make it loose
    # (it stays in the JSON).
    header += (["floor"] if cuda else []) + ["ref/fused host" + ("|dev" if cuda else ""), "checked"]
    groups = []
    for pr in doc["presets"]:
        if not pr["workloads"]:
            groups.append([[pr["preset"], "(none in build)"] + [""] * (len(header) - 2)])
            continue
        for w in pr["workloads"]:
            h, d = w["host_us_per_call"], w["device_us_per_call"]
            hs, ds = w["host_us_per_step"], w["device_us_per_step"]
            launch = w["graph_replay_host_us"]  # host cost of a step with its refreshes recorded in the graph
            floor = w["floor_us_per_call"].get("graph" if cuda else "eager")
            gain = _ratio(h["ref"], h["fused"])
            if cuda:
                gain += f"|{_ratio(d['ref'], d['fused'])}"
            rows = []
            for impl in w.get("impls", ("fused", "ref")):
                first = impl == "fused"
                row = [
                    pr["preset"] if first else "",
                    f"{w['label']} x{w['calls_per_step']}" if first else "",
                    impl,
                    _num(h[impl]["median"]),
                    _num(h[impl]["p99"]),
                ]
                if cuda:
                    row += [_num(d[impl]["median"]), _num(d[impl]["p99"])]
                row += [_num(hs[impl]["median"])] + ([_num(ds[impl]["median"]), _num(launch[impl]["median"])] if cuda else [])
                if cuda:
                    row += [(_num(floor["median"]) if floor else "-") if first else ""]
                if impl in ("fused", "ref"):
                    cell = gain if first else ""
                else:  # a baseline: fused / baseline
                    times = d if cuda else h
                    cell = f"fused/{impl} {_ratio_of(times['fused'], times[impl])}"
                row += [
                    cell,
                    str(w["steps_checked"]) if first else "",
                ]
                rows.append(row)
            groups.append(rows)
    return header, groups


def trace_notes(doc: dict) -> list:
    """What the trace table's columns mean for this run, in words, and what was left out."""
    graph_mode, cuda = doc.get("graph_mode"), doc.get("graph_mode") == "cuda"
    args, bw = doc.get("args", {}), doc["copy_bandwidth"]["bytes_per_s"]
    notes = []
    if doc.get("cpu_scaled"):
        notes.append("CPU-scaled run: " + doc["cpu_scaled"])
    if not cuda:
        notes.append(
            "No CUDA device: the CPU kernels run against the eager reference. Times are CPU wall times "
            "per call (the whole computation); ref/fused says how much longer PyTorch's eager CPU ops take "
            "than the op's CPU kernel, which says nothing about the GPU (no CUDA graphs, no device columns; "
            "GPU numbers: benchmarks/results/).")
    for pr in doc["presets"]:
        for w in pr["workloads"]:
            notes += [f"{pr['preset']} / {w['label']}: {n}" for n in w.get("notes", ())]
    missing = sorted({op for pr in doc["presets"] for op in pr["ops_not_in_build"]})
    if missing:
        notes.append(f"Not in this build: {', '.join(missing)}.")
    if graph_mode:
        notes.append(
            f"floor = bytes moved / measured copy bandwidth ({bw / 1e9:.0f} GB/s, read + write); scattered reads "
            "(page-boundary slots of req_to_token, full->SWA mapping entries) count one 64-byte DRAM access "
            "each (measured with ncu on an H200). Eager: bs = running requests, host-known max pages; graph: "
            "bucket, full width, live pages only.")
    else:
        notes.append("The floor (bytes moved / copy bandwidth) bounds GPU DRAM traffic; CPU caches make it "
                     "meaningless here, so it is only in the JSON.")
    if graph_mode == "emulated":
        notes.append("Emulated graphs (CPU self-test): 'dev' columns are wall times of eager replays of the graph-mode calls.")
    if cuda:
        notes.append("device = CUDA events around one graph replay (one decode step's calls / calls), L2 "
                     + ("flushed" if args.get("flush_l2", True) else "warm") + " before each replay; launch = host "
                     "time of the graph replay (the step's host cost with the refresh recorded in its graph).")
    return notes


def markdown(doc: dict) -> str:
    """The trace table as markdown, with the run's environment and notes."""
    header, groups = table_rows(doc)
    a = doc.get("args", {})
    lines = ["### sgl_meta bench: serving-trace replay, fused op vs eager reference", "",
             environment_line(doc.get("environment", {})), "",
             f"{a.get('steps')} steps (+{a.get('warmup')} warmup) per preset, max bs {a.get('max_bs')}, "
             f"seed {a.get('seed')}; us per call (median, p99) and per step (median).", "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for g in groups for r in g]
    lines += [""] + [f"- {n}" for n in trace_notes(doc)]
    return "\n".join(lines) + "\n"


def print_table(doc: dict, notes: list) -> None:
    header, groups = table_rows(doc)
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        rows = [r for g in groups for r in g]
        widths = [max(len(str(c)) for c in col) for col in zip(header, *rows)]
        for r in [header] + rows:
            print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
        for n in notes:
            print(n)
        return
    t = Table(
        title="sgl_meta bench: fused op vs eager reference, us per call (median, p99) and per step (median)",
        title_style="bold",
    )
    for i, h in enumerate(header):
        t.add_column(h, justify="left" if i < 3 else "right", no_wrap=True)
    for g in groups:
        for i, r in enumerate(g):
            t.add_row(*r, end_section=i == len(g) - 1)
    console = Console()
    if not console.is_terminal:
        console = Console(width=180)  # logs and pipes: do not squeeze the table to 80 columns
    console.print(t)
    for n in notes:
        console.print(n, style="dim", highlight=False)
