"""Results out: environment record, the summary table, the JSON file."""

from __future__ import annotations

import json
import platform
from datetime import datetime, timezone
from pathlib import Path

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
    }
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info["gpu"] = torch.cuda.get_device_name(device)
        info["gpu_capability"] = f"{props.major}.{props.minor}"
        info["gpu_sms"] = props.multi_processor_count
        info["gpu_memory_gib"] = round(props.total_memory / 2**30, 1)
    return info


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
    e.g. the bare gather) per preset and op. A baseline's "gain" cell is the
    fused op's time over the baseline's (device on CUDA): 1.04x = 4% slower."""
    cuda = doc.get("graph_mode") is not None  # device columns
    header = ["preset", "op x calls/step", "impl", "host", "p99"]
    if cuda:
        header += ["dev", "p99"]
    header += ["host/step"] + (["dev/step", "launch/step"] if cuda else [])
    # The floor is a DRAM-traffic bound for the GPU; on CPU, caches make it loose
    # (it stays in the JSON).
    header += (["floor"] if cuda else []) + ["gain host" + ("|dev" if cuda else ""), "checked"]
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
