"""Per-kernel facts from the compiler, without a GPU: registers, stack frame,
spills, the size of the kernel body's machine code (SASS) and the local-memory
loads and stores in that body.

    python scripts/kernel_report.py [family ...] [--arch sm_90] [--check]

Each ``csrc/<family>/kernel.cu`` is compiled to a cubin with the extension's
nvcc flags (``-Xptxas -v`` for registers, stack and spills) and disassembled
with nvdisasm (``$NVDISASM``, ``PATH``, or the ``nvidia-cuda-nvdisasm`` wheel).
The body is the kernel's own code, up to its first out-of-line subroutine (the
``SGL_FAILURE_PATH`` functions, 64-bit division helpers): local memory there is
paid on every launch (a spill, or an array the compiler could not keep in
registers), while a failure path's printf buffer is not. These kernels are
latency-bound: what sits between a load and the load that depends on it
counts. ``--check`` exits 1 when a body touches local memory or a kernel spills,
other than the kernels of CAPPED (tests/test_kernel_report.py runs the check).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CSRC = ROOT / "csrc"
NVCC_FLAGS = ["-O3", "-std=c++17", "-lineinfo"]  # setup.py's, less --threads
ENTRY = re.compile(r"Compiling entry function '(\S+)'")
PROPS = re.compile(r"Function properties for (\S+)")
FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
REGS = re.compile(r"Used (\d+) registers")
INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")
CAPPED = {
    "build_kv_indices_kernel": "32 registers (__launch_bounds__: 8 resident blocks of 256 threads an SM)",
    "kv_read_token_stream_kernel<long, true, false>": "32 registers (__launch_bounds__: 16 resident blocks of 128 "
                                                      "threads an SM)",
}
"""Kernels whose register cap, set for occupancy, costs a few bytes of local memory
in their body, and what the cap is; any other kernel that touches local memory fails
``--check``."""


@dataclass
class Kernel:
    name: str
    registers: int = 0
    stack: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    body_bytes: int = 0
    local: list = field(default_factory=list)  # (offset, instruction) of LDL / STL in the body


def nvdisasm() -> str:
    found = os.environ.get("NVDISASM") or shutil.which("nvdisasm")
    if not found:
        try:
            import nvidia

            for base in nvidia.__path__:
                hits = sorted(Path(base).glob("cu*/bin/nvdisasm"))
                if hits:
                    found = str(hits[-1])
        except ImportError:
            pass
    if not found:
        sys.exit("kernel_report: no nvdisasm (set NVDISASM, or pip install nvidia-cuda-nvdisasm)")
    return found


def _tool_env() -> dict:
    """The environment for the compiler and disassembler: without a preloaded sanitizer
    runtime (scripts/asan_cpu.sh runs the tests under one), which crashes nvcc."""
    return {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}


def compile_family(family: str, arch: str, out: Path) -> tuple[Path, str]:
    cubin = out / f"{family}.cubin"
    cmd = ["nvcc", *NVCC_FLAGS, f"-arch={arch}", f"-I{CSRC}", "-Xptxas", "-v", "-cubin",
           str(CSRC / family / "kernel.cu"), "-o", str(cubin)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=_tool_env())
    if proc.returncode != 0:
        sys.exit(f"kernel_report: nvcc failed for {family}:\n{proc.stderr[-3000:]}")
    return cubin, proc.stderr


def ptxas_facts(log: str) -> dict[str, Kernel]:
    kernels: dict[str, Kernel] = {}
    entry = props = None
    for line in log.splitlines():
        if m := ENTRY.search(line):
            entry = m.group(1)
            kernels[entry] = Kernel(entry)
        elif m := PROPS.search(line):
            props = m.group(1)
        elif (m := FRAME.search(line)) and props in kernels:
            k = kernels[props]
            k.stack, k.spill_stores, k.spill_loads = map(int, m.groups())
        elif (m := REGS.search(line)) and entry in kernels:
            kernels[entry].registers = int(m.group(1))
    return kernels


def sass_facts(sass: str, kernels: dict[str, Kernel]) -> None:
    current, first = None, None
    for line in sass.splitlines():
        label = line.strip()
        if label.endswith(":") and label[:-1] in kernels:
            current, first = kernels[label[:-1]], None
            continue
        if current is None:
            continue
        if line.startswith("$") or line.startswith(".text.") or line.lstrip().startswith(".section"):
            current = None
            continue
        if m := INSN.search(line):
            offset, op = int(m.group(1), 16), m.group(2)
            first = offset if first is None else first
            current.body_bytes = offset - first + 16
            if op.startswith(("LDL", "STL")):
                current.local.append((offset, op))


def demangle(names: list[str]) -> dict[str, str]:
    tool = shutil.which("c++filt")
    if not tool:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True,
                         env=_tool_env()).stdout.splitlines()
    short = [re.sub(r"^void |sgl_meta::|\(anonymous namespace\)::|\(.*\)$", "", o) for o in out]
    return dict(zip(names, short))


def families() -> list[str]:
    """Every csrc/<family> with a kernel.cu."""
    return sorted(d.name for d in CSRC.iterdir() if (d / "kernel.cu").exists())


def report(names: list[str], arch: str = "sm_90") -> dict[str, list[Kernel]]:
    """Per family, its kernels' facts, each ``Kernel.name`` demangled and shortened."""
    tool, out = nvdisasm(), {}
    with tempfile.TemporaryDirectory() as tmp:
        for family in names:
            cubin, log = compile_family(family, arch, Path(tmp))
            kernels = ptxas_facts(log)
            sass_facts(subprocess.run([tool, "-c", str(cubin)], capture_output=True, text=True, check=True,
                                      env=_tool_env()).stdout, kernels)
            short = demangle(list(kernels))
            for k in kernels.values():
                k.name = short[k.name]
            out[family] = list(kernels.values())
    return out


def touches_local(k: Kernel) -> bool:
    return bool(k.local or k.spill_stores)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("family", nargs="*", help="csrc/<family> (default: every family with a kernel.cu)")
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--check", action="store_true",
                   help="exit 1 on local memory in a body or a spill (kernels of CAPPED aside)")
    args = p.parse_args()
    bad = []
    for family, kernels in report(args.family or families(), args.arch).items():
        print(f"{family} ({args.arch})")
        print(f"  {'regs':>4} {'stack':>5} {'spill':>5} {'body B':>7} {'local':>5}  kernel")
        for k in kernels:
            print(f"  {k.registers:4d} {k.stack:5d} {k.spill_stores:5d} {k.body_bytes:7d} {len(k.local):5d}  {k.name}")
            if touches_local(k):
                bad.append(k.name)
    if bad:
        print(f"\n{len(bad)} kernel(s) touch local memory in their body or spill: {', '.join(bad)}")
        capped = [n for n in bad if n in CAPPED]
        if capped:
            print(f"register-capped (CAPPED): {', '.join(capped)}")
    return 1 if args.check and any(n not in CAPPED for n in bad) else 0


if __name__ == "__main__":
    sys.exit(main())
