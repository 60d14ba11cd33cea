"""The side-by-side table: rich on the terminal, markdown for the published results.

    python -m sgl_meta.bench.upstream.table BENCH.json   # markdown of a saved run
"""

from __future__ import annotations

import json
import sys
from typing import Optional

from ..report import diff_cell, environment_line

COLS = ("host_us", "device_us", "launch_us")

LEGEND = (
    "host = median wall time of one direct Python call (outside a graph); device = median of "
    "CUDA-graph replays (CUDA events, L2 flushed before each; the implementations take turns in "
    "rotating order); launch = host time of "
    "`graph.replay()` with the refresh recorded in a graph (the per-step host cost in-graph); "
    "ratios are sgl_meta / upstream (below 1: sgl_meta is faster); sgl_meta - upstream device = the median of "
    "the per-round differences (both replayed in the same round) with its 95% bootstrap interval: an interval "
    "that holds 0 is a difference this run does not resolve."
)


def _us(s: Optional[dict]) -> str:
    if not s:
        return "-"
    x = s["median"]
    return f"{x:.0f}" if x >= 100 else f"{x:.1f}" if x >= 10 else f"{x:.2f}"


def _ratio(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:.2f}"


def _impl(row: dict, impl: str) -> dict:
    return row.get("impls", {}).get(impl) or {}


def check_text(row: dict) -> str:
    if "error" in row:
        return "error"
    if not row["ok"]:
        return "MISMATCH"
    text = "ok"
    if row.get("capture_errors"):
        text += " (no graph: " + ", ".join(row["capture_errors"]) + ")"
    return text


def row_cells(row: dict) -> list:
    """case, upstream host/dev/launch, ours host/dev/launch, ref host/dev, ratios host/dev, check."""
    up, ours, ref = _impl(row, "upstream"), _impl(row, "ours"), _impl(row, "ref")
    r = row.get("ratio_ours_upstream") or {}
    return [
        row["case"],
        *(_us(up.get(c)) for c in COLS),
        *(_us(ours.get(c)) for c in COLS),
        _us(ref.get("host_us")),
        _us(ref.get("device_us")),
        _ratio(r.get("host")),
        _ratio(r.get("device")),
        diff_cell(row.get("device_diff_us")),
        check_text(row),
    ]


HEADER = ["case", "upstream host", "dev", "launch", "ours host", "dev", "launch", "ref host", "dev",
          "ours/up host", "dev", "ours-up dev us [95%]", "check"]
COLD_HEADER = ["first call over the buckets", "calls/bucket", "upstream cold s", "warm s", "ours cold s", "warm s"]


def cold_cells(c: dict) -> list:
    up, ours = c.get("upstream") or {}, c.get("ours") or {}
    f = lambda d, k: "-" if k not in d else f"{d[k]:.3f}"  # noqa: E731
    if "skipped" in c:
        return [c["name"], "-", "skipped", "", "", ""]
    return [c["name"], str(c.get("calls_per_bucket", "-")), f(up, "cold_s"), f(up, "warm_s"),
            f(ours, "cold_s") if ours else "-", f(ours, "warm_s") if ours else "-"]


def _is_vllm(case: str) -> bool:
    """vLLM's rows are named "vLLM ..." (the rest are SGLang's)."""
    return str(case).startswith("vLLM ")


def notes(up: dict) -> list:
    out = []
    if not up.get("available"):
        n = len(up.get("skipped_rows", []))
        return [up.get("message", "Upstream comparison not run.") + f" ({n} rows not run.)"] + [
            f"Warning: {w}." for w in up.get("warnings", [])]
    for w in up.get("warnings", []):
        out.append(f"Warning: {w}.")
    if up.get("replays"):
        builds = f", split between {up['layouts']} builds of the row at other addresses" if up.get("layouts", 1) > 1 else ""
        out.append(f"Device medians over {up['replays']} replays per implementation and row (rounded up to whole "
                   f"rotation cycles){builds}.")
    cold = up.get("cold_start", [])
    if any(not _is_vllm(c["name"]) for c in cold):
        b = up["buckets"]
        out.append(f"Cold start: first call over {len(b)} CUDA-graph buckets ({b[0]}..{b[-1]}), empty Triton and "
                   "SGLang JIT caches, fresh module instances; warm = the same calls again.")
    for c in cold:
        if _is_vllm(c["name"]) and "buckets" in c:
            out.append(f"Cold start of the vLLM row: first call over vLLM's {c['buckets']} default CUDA-graph capture "
                       f"sizes (1..{c['max_bucket']}), empty Triton cache and fresh vLLM kernel objects; warm = the "
                       "same calls again.")
    for c in cold:
        if "skipped" in c:
            out.append(f"Cold start of {c['name']} skipped: {c['skipped']}.")
        elif "ours_missing" in c:
            out.append(f"Cold start of {c['name']}: ours {c['ours_missing']}.")
    by_reason: dict = {}
    for s in up.get("skipped_rows", []):
        by_reason.setdefault(s["reason"], []).append(s["case"])
    for reason, cases in by_reason.items():
        out.append(f"Not run ({reason}): {'; '.join(cases)}.")
    for r in up.get("rows", []):
        if r.get("note"):
            out.append(f"{r['case']}: {r['note']}.")
        gather = _impl(r, "gather").get("device_us")
        if gather and r.get("ratio_ours_gather"):
            out.append(f"{r['case']}: the bare gather of the same pages (the ceiling, same inputs and rotation) "
                       f"{_us(gather)} us device; sgl_meta / bare gather {r['ratio_ours_gather']:.2f}.")
        for impl, err in (r.get("capture_errors") or {}).items():
            out.append(f"{r['case']}: {impl} could not be captured in a CUDA graph ({err}).")
        if "error" in r:
            out.append(f"{r['case']}: {r['error']}")
    if up.get("tvm_ffi"):
        t = up["tvm_ffi"]
        out.append(f"tvm-ffi import {t['import_s']:.2f} s; torch tensors use its C DLPack exchange: {t['torch_c_dlpack']}.")
    return out


def print_upstream(up: dict) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        _print_plain(up)
        return
    console = Console()
    if not console.is_terminal:
        console = Console(width=200)
    if up.get("rows"):
        t = Table(title=f"sgl_meta vs SGLang {up.get('version')} kernels, same inputs: us per refresh (median)",
                  title_style="bold")
        for i, h in enumerate(HEADER):
            t.add_column(h, justify="left" if i == 0 else "right", no_wrap=True)
        group = None
        for r in up["rows"]:
            if group is not None and r["group"] != group:
                t.add_section()
            group = r["group"]
            t.add_row(*row_cells(r))
        console.print(t)
    if any("skipped" not in c for c in up.get("cold_start", [])):
        t = Table(title="Cold start", title_style="bold")
        for i, h in enumerate(COLD_HEADER):
            t.add_column(h, justify="left" if i == 0 else "right", no_wrap=True)
        for c in up["cold_start"]:
            t.add_row(*cold_cells(c))
        console.print(t)
    for n in ([LEGEND] if up.get("rows") else []) + _terminal_notes(up):
        console.print(n, style="dim", highlight=False)


def _terminal_notes(up: dict) -> list:
    """notes(), less the reasons a run that compared nothing has already logged line by line."""
    if up.get("available"):
        return notes(up)
    n = len(up.get("skipped_rows", []))
    return [f"Upstream comparison not run ({n} rows), for the reasons above."] + [
        f"Warning: {w}." for w in up.get("warnings", [])]


def _print_plain(up: dict) -> None:
    if up.get("rows"):
        rows = [HEADER] + [row_cells(r) for r in up["rows"]]
        widths = [max(len(str(c)) for c in col) for col in zip(*rows)]
        for r in rows:
            print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
    for n in _terminal_notes(up):
        print(n)


def markdown(doc: dict) -> str:
    """The side-by-side table as markdown (date, GPU, driver, torch, sglang)."""
    env, up = doc.get("environment", {}), doc.get("upstream") or {}
    tools = up.get("tools") or {}
    vllm_rows = any(_is_vllm(r.get("case", "")) for r in up.get("rows", []))
    sglang_rows = any(not _is_vllm(r.get("case", "")) for r in up.get("rows", []))
    engines = ([f"SGLang {up.get('version') or up.get('expected_version')}"] if sglang_rows or not vllm_rows else []) + (
        ["vLLM"] if vllm_rows else [])
    lines = [f"### sgl_meta vs {' and '.join(engines)} kernels, same run, same inputs", ""]
    lines.append(
        f"{environment_line(env)} · triton {tools.get('triton') or '-'} · sglang {up.get('version') or '-'} "
        f"({up.get('source') or 'not found'}) · apache-tvm-ffi {tools.get('apache-tvm-ffi') or '-'}"
    )
    lines.append("")
    if up.get("rows"):
        lines += [
            "| case | upstream host / device us | sgl_meta host / device us | in-graph launch us (upstream / sgl_meta) "
            "| sgl_meta / upstream host, device | sgl_meta - upstream device us [95%] | eager ref host / device us "
            "| check |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in up["rows"]:
            if "error" in r:
                lines.append(f"| {r['case']} | error | | | | | | {r['error']} |")
                continue
            u, o, e = _impl(r, "upstream"), _impl(r, "ours"), _impl(r, "ref")
            ratio = r["ratio_ours_upstream"]
            lines.append(
                f"| {r['case']} | {_us(u.get('host_us'))} / {_us(u.get('device_us'))} "
                f"| {_us(o.get('host_us'))} / {_us(o.get('device_us'))} "
                f"| {_us(u.get('launch_us'))} / {_us(o.get('launch_us'))} "
                f"| {_ratio(ratio['host'])}, {_ratio(ratio['device'])} | {diff_cell(r.get('device_diff_us'))} "
                f"| {_us(e.get('host_us'))} / {_us(e.get('device_us'))} | {check_text(r)} |"
            )
        lines.append("")
    cold = [c for c in up.get("cold_start", []) if "skipped" not in c]
    if cold:
        lines += ["| first call over the buckets, empty caches | upstream s (warm s) | sgl_meta s (warm s) |", "|---|---|---|"]
        for c in cold:
            u, o = c["upstream"], c.get("ours")
            ours = f"{o['cold_s']:.3f} ({o['warm_s']:.3f})" if o else "not in this build"
            lines.append(f"| {c['name']} | {u['cold_s']:.3f} ({u['warm_s']:.3f}) | {ours} |")
        lines.append("")
    lines += [LEGEND if up.get("rows") else ""] + [f"- {n}" for n in notes(up)]
    return "\n".join(lines).strip() + "\n"


def write_markdown(path: str, doc: dict) -> None:
    from pathlib import Path

    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(markdown(doc))


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m sgl_meta.bench.upstream.table BENCH.json", file=sys.stderr)
        return 2
    with open(argv[0]) as fh:
        sys.stdout.write(markdown(json.load(fh)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
