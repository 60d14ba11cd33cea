"""The ``--upstream`` mode: find SGLang, cold start, then every row; the JSON section.

Rows whose ``sgl_meta`` function this build lacks are listed as skipped ("not
in this build"). A missing piece upstream (no sglang, no GPU, no
triton, no tvm-ffi, ...) skips the rows that need it, said plainly; the rest of
the run carries on.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from typing import Optional

import torch

import sgl_meta

from ..timing import DeviceTimer
from . import loader, rows_dsa, rows_kv, rows_mha
from . import rows_flash_attention_metadata
from . import rows_kv_indices
from . import rows_vllm
from .coldstart import fresh_caches, run_cold_start
from .fixtures import Context, RowSpec
from .measure import DEVICE_REPLAYS, LAYOUTS, first_call_seconds, measure_row

ROW_SPECS = rows_mha.ROWS + rows_dsa.ROWS + rows_dsa.GEN_ROWS + rows_kv.ROWS
ROW_SPECS += rows_flash_attention_metadata.ROWS
ROW_SPECS += rows_kv_indices.ROWS
ROW_SPECS += rows_vllm.ROWS  # vLLM 0.33's own functions: run whenever vllm imports, with or without sglang
ROW_SIZE = 256  # the largest batch a row uses


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def builds(spec: RowSpec, ctx: Context, kernels):
    """The row, built afresh each time it is asked for again, behind a buffer
    of another size: its buffers, each implementation's own among them, land
    at other addresses. A few-microsecond row moves by up to 0.4 us between
    runs with one set of addresses (which side's buffers sit where); over
    several, that pools instead of deciding the run."""
    rng = random.Random(f"{ctx.seed}:{spec.name}")
    yield spec.build(ctx, kernels)
    while True:
        ctx.drop()
        pages = rng.randrange(1, 1 << 14)
        ctx.fixture("layout_shift", lambda c: torch.empty(pages * 4096, dtype=torch.uint8, device=c.device))
        yield spec.build(ctx, kernels)


def why_skipped(spec: RowSpec, probe: loader.Probe, kernels: Optional[loader.Kernels]) -> Optional[str]:
    """The reason a row cannot run here, or None."""
    missing = [m for fam in spec.families for m in probe.missing.get(fam, [])]
    if missing:
        return "; ".join(dict.fromkeys(missing))
    absent = [fn for fn in spec.ours if not hasattr(sgl_meta, fn)]
    if absent:
        return f"sgl_meta.{', sgl_meta.'.join(absent)} not in this build"
    if kernels is not None:
        gone = [fn for fn in spec.upstream if not kernels.has(fn)]
        if gone:
            return "upstream " + ", ".join(gone) + " not loaded"
    return None


def run_upstream(
    spec: str,
    device: torch.device,
    *,
    seed: int = 0,
    buckets: Optional[list] = None,
    cold_start: bool = True,
    flush_l2: bool = True,
    replays: Optional[int] = None,
    layouts: Optional[int] = None,
    select: Optional[str] = None,
    log=_log,
) -> dict:
    """Run the comparison; returns the ``upstream`` section of the bench JSON.
    ``replays``: timed graph replays per row and implementation (None: DEVICE_REPLAYS),
    split between ``layouts`` builds of each row (None: LAYOUTS). ``select``: only
    the rows and cold-start entries whose name contains it (case-insensitive)."""
    picked = (lambda name: True) if select is None else (lambda name: select.lower() in name.lower())
    replays = replays or DEVICE_REPLAYS
    layouts = layouts or LAYOUTS
    t_start = time.perf_counter()
    loc = loader.locate(spec)
    probe = loader.probe(loc, gpu=device.type == "cuda")
    doc = {
        "requested": spec,
        "site": str(loc.site) if loc.site else None,
        "source": loc.source or None,
        "version": loc.version,
        "expected_version": loader.EXPECTED_VERSION,
        "tools": probe.tools,
        "missing": probe.missing,
        "warnings": probe.warnings,
        "available": False,
        "ok": None,
        "buckets": buckets,
        "replays": replays,
        "layouts": layouts,
        "select": select,
        "cold_start": [],
        "rows": [],
        "skipped_rows": [],
    }
    log("upstream: " + (f"sglang {loc.version} from {loc.site} ({loc.source})" if loc.site else loc.problem))
    for w in probe.warnings:
        log(f"upstream: warning: {w}")
    kernels = None
    if probe.any_runnable:
        if probe.runnable(loader.JIT):
            try:
                doc["tvm_ffi"] = loader.import_tvm_ffi()
            except Exception as e:  # e.g. a wheel for another Python
                probe.missing[loader.JIT].append(f"tvm-ffi does not import: {type(e).__name__}: {e}")
        kernels = loader.load(probe)
        for fam, errors in kernels.errors.items():
            probe.missing[fam].extend(errors)
    log("upstream: " + probe.summary())
    vllm_reason = rows_vllm.why_not_on(device)
    probe.missing[rows_vllm.FAMILY] = [vllm_reason] if vllm_reason else []
    flashinfer_reason = None if vllm_reason else rows_vllm.why_no_flashinfer()
    probe.missing[rows_vllm.FLASHINFER] = [flashinfer_reason] if flashinfer_reason else []
    log("upstream: vLLM rows: " + (vllm_reason or f"vllm {rows_vllm.VLLM_VERSION}")
        + (f"; its FlashInfer rows: {flashinfer_reason}" if flashinfer_reason else ""))
    if not probe.any_runnable and vllm_reason:
        doc["message"] = "Upstream comparison not run: " + probe.summary() + " | vLLM rows: " + vllm_reason
        doc["skipped_rows"] = [{"case": s.name, "reason": why_skipped(s, probe, None)} for s in ROW_SPECS]
        return doc

    doc["available"] = True
    ctx = Context(device=device, seed=seed, max_bs=max([ROW_SIZE] + list(buckets or [])))
    with tempfile.TemporaryDirectory(prefix="sgl_meta_upstream_") as root:
        if cold_start and buckets and kernels is not None:
            doc["cold_start"] = run_cold_start(probe, ctx, buckets, kernels, root=root, log=log, picked=picked)
        if cold_start and not vllm_reason and picked("vllm"):
            doc["cold_start"].append(rows_vllm.cold_start(ctx, root, log, first_call_seconds, fresh_caches))
        timer = DeviceTimer(device, flush_l2)
        pool = torch.cuda.graph_pool_handle()
        group = None
        for spec_ in ROW_SPECS:
            if spec_.group != group:
                ctx.drop()  # one family's buffers at a time
                group = spec_.group
            reason = why_skipped(spec_, probe, kernels) if picked(spec_.name) else f"not selected (--rows {select})"
            if reason:
                doc["skipped_rows"].append({"case": spec_.name, "reason": reason})
                continue
            try:
                res = measure_row(builds(spec_, ctx, kernels), timer, pool, replays, layouts)
            except Exception as e:  # one broken row must not hide the others
                res = {"case": spec_.name, "group": spec_.group, "ok": False, "error": f"{type(e).__name__}: {e}"}
            if "capture_errors" in res or "error" in res:  # that pool may be left recording (measure_row)
                pool = torch.cuda.graph_pool_handle()
            doc["rows"].append(res)
            log("  " + _row_line(res))
        ctx.drop()
    doc["ok"] = all(r.get("ok") for r in doc["rows"])
    doc["wall_s"] = time.perf_counter() - t_start
    return doc


def _row_line(res: dict) -> str:
    if "error" in res:
        return f"{res['case']}: ERROR {res['error']}"
    r = res["ratio_ours_upstream"]
    fmt = lambda x: "-" if x is None else f"{x:.2f}"  # noqa: E731
    status = "checked ok" if res["ok"] else "MISMATCH"
    if res.get("capture_errors"):
        status += ", no graph for " + ", ".join(res["capture_errors"])
    return f"{res['case']}: ours/upstream host {fmt(r['host'])}, device {fmt(r['device'])}, {status}"


def problems(doc: dict) -> list:
    """Every check problem and row error of a finished comparison (for the exit status)."""
    out = []
    for r in doc.get("rows", []):
        if "error" in r:
            out.append(f"{r['case']}: {r['error']}")
        for msgs in r.get("checks", {}).values():
            out.extend(msgs)
    return out
