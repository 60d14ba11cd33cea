"""Host time of a bound call (sgl_meta.bind) vs the same op called directly (GPU).

    python benchmarks/bound_calls.py [--json PATH]

Per case: median wall time of one Python call over many calls (the device is
synchronised every 200 calls so the launch queue never fills): the op through
torch.ops, the op through the eager fast path where it has one (sgl_meta/_fast.py),
and the Plan returned by sgl_meta.bind for the same arguments; plus a Plan that
binds a bs == 0 call (no launch: the floor of the C call itself). With nvcc on
PATH it also compiles benchmarks/launch_floor.cu and times an empty kernel
launched through ctypes (parameter blocks of 64 / 512 / 2048 bytes): the floor
any launch from Python pays on that machine.
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import datetime
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the test case makers

import sgl_meta  # noqa: E402
from sgl_meta import _fast  # noqa: E402
from dsa_metadata_copy_cases import EDGE_CASES as DSA_COPY_CASES  # noqa: E402
from dsa_metadata_copy_cases import make_case as make_copy_case  # noqa: E402
from dsa_metadata_copy_cases import multi_lists  # noqa: E402
from trtllm_mha_metadata_cases import MetaCase, make_case as make_mha_case  # noqa: E402


def host_us(fn, n: int = 4000) -> float:
    for _ in range(200):
        fn()
    torch.cuda.synchronize()
    ts = []
    for i in range(n):
        t = time.perf_counter_ns()
        fn()
        ts.append(time.perf_counter_ns() - t)
        if i % 200 == 199:
            torch.cuda.synchronize()
    return statistics.median(ts) / 1000


def cases(device: str):
    gen = torch.Generator().manual_seed(0)
    inputs, outputs, scalars = make_mha_case(
        MetaCase(bs=256, max_seq_pages=2048, page_size=64, pool=260, live_pages_only=True, swa=False,
                 n_out=None, swa_out_len=None), gen, device)
    mha = {**inputs, **outputs, **scalars}
    yield "update_trtllm_mha_graph_metadata bs256 x 2048 pages", sgl_meta.update_trtllm_mha_graph_metadata, (), mha
    inputs1, outputs1, scalars1 = make_mha_case(
        MetaCase(bs=1, max_seq_pages=2048, page_size=64, pool=4, live_pages_only=True, swa=False,
                 n_out=None, swa_out_len=None), gen, device)
    yield ("update_trtllm_mha_graph_metadata bs1 (device time < host time)", sgl_meta.update_trtllm_mha_graph_metadata,
           (), {**inputs1, **outputs1, **scalars1})
    yield "update_trtllm_mha_graph_metadata bs0 (no launch)", sgl_meta.update_trtllm_mha_graph_metadata, (), {**mha, "bs": 0}
    sources, dests, sc = make_copy_case(DSA_COPY_CASES["realistic_decode"], gen, device)
    copy = {**sources, **dests[0], **sc}
    yield "fused_metadata_copy decode bs64 (real table + FlashMLA)", sgl_meta.fused_metadata_copy, (), copy
    case = dataclasses.replace(DSA_COPY_CASES["realistic_decode"], sets=3)
    sources, dests, sc = make_copy_case(case, gen, device)
    multi = {**sources, **multi_lists(dests), **sc}
    yield "fused_metadata_copy_multi decode bs64, K=3", sgl_meta.fused_metadata_copy_multi, (), multi


def launch_floor():
    """(case, host us) for benchmarks/launch_floor.cu through ctypes; nothing without nvcc."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        print("launch floor: nvcc not on PATH, skipped")
        return []
    src = Path(__file__).with_name("launch_floor.cu")
    so = Path(tempfile.mkdtemp()) / "launch_floor.so"
    cc = torch.cuda.get_device_capability()
    subprocess.run([nvcc, "-O3", "-shared", "-Xcompiler", "-fPIC", f"-arch=sm_{cc[0]}{cc[1]}", str(src),
                    "-o", str(so)], check=True)
    lib = ctypes.CDLL(str(so))
    out = [("ctypes call, no launch (floor_noop)", host_us(lib.floor_noop))]
    for size in (64, 512, 2048):
        out.append((f"ctypes + empty kernel launch, {size} B params", host_us(getattr(lib, f"floor_launch_{size}"))))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bound_calls.py: needs a CUDA device")
        return 0
    rows = []
    for name, op, a, kw in cases("cuda"):
        plan = sgl_meta.bind(op, *a, **kw)
        _fast.enabled = False
        direct = host_us(lambda: op(*a, **kw))
        _fast.enabled = _fast.available
        fast = host_us(lambda: op(*a, **kw)) if _fast.available and op.__module__ == "sgl_meta.dsa_metadata_copy" else None
        bound = host_us(plan)
        rows.append(dict(case=name, direct_us=direct, fast_path_us=fast, bound_us=bound, launches=plan.num_launches))
        fast_txt = f"fast path {fast:6.2f} us   " if fast is not None else ""
        print(f"{name:58s} torch.ops {direct:6.2f} us   {fast_txt}bound {bound:6.2f} us   ({plan.num_launches} launch)")
    for name, us in launch_floor():
        rows.append(dict(case=name, floor_us=us))
        print(f"{name:58s} {us:6.2f} us")
    env = dict(date=datetime.datetime.now().isoformat(timespec="seconds"), gpu=torch.cuda.get_device_name(),
               torch=torch.__version__, python=sys.version.split()[0])
    print(env)
    if args.json:
        args.json.write_text(json.dumps(dict(environment=env, rows=rows), indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
