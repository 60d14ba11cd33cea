"""scripts/kernel_report.py reads ptxas's and nvdisasm's output right: the
kernel's registers, stack and spills, and local memory counted in the kernel's
own body only (not in its out-of-line failure subroutines), on synthetic
compiler output in the tools' formats. Where nvcc and nvdisasm are there (the
dev extra brings nvdisasm), every kernel compiled for sm_90 keeps its values in
registers, but for the register-capped ones the report names."""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path

import pytest

SPEC = importlib.util.spec_from_file_location(
    "kernel_report", Path(__file__).resolve().parents[1] / "scripts" / "kernel_report.py")
report = importlib.util.module_from_spec(SPEC)
sys.modules.setdefault("kernel_report", report)  # dataclasses look their module up
SPEC.loader.exec_module(report)

PTXAS = """\
ptxas info    : Compiling entry function '_Z1kv' for 'sm_90'
ptxas info    : Function properties for _Z1kv$fail
    24 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Function properties for _Z1kv
    48 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers, 48 bytes cumulative stack size
ptxas info    : Compiling entry function '_Z1jv' for 'sm_90'
ptxas info    : Function properties for _Z1jv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, used 0 barriers
"""

SASS = """\
.text._Z1kv:
_Z1kv:
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/              @!P0 STL [R1+0x8], R2 ;
        /*0020*/                   LDG.E R4, desc[UR4][R2.64] ;
        /*0030*/                   LDL.LU R2, [R1+0x8] ;
        /*0040*/                   EXIT ;
$_Z1kv$fail:
        /*0050*/                   STL.128 [R1], R4 ;
        /*0060*/                   CALL.ABS.NOINC R8 ;
.text._Z1jv:
_Z1jv:
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   EXIT ;
"""


def test_registers_stack_and_spills_are_the_entry_functions():
    k = report.ptxas_facts(PTXAS)
    assert list(k) == ["_Z1kv", "_Z1jv"]
    assert (k["_Z1kv"].registers, k["_Z1kv"].stack, k["_Z1kv"].spill_stores) == (40, 48, 8)
    assert (k["_Z1jv"].registers, k["_Z1jv"].stack, k["_Z1jv"].spill_stores) == (12, 0, 0)


def test_local_memory_counts_in_the_body_only():
    k = report.ptxas_facts(PTXAS)
    report.sass_facts(SASS, k)
    assert k["_Z1kv"].local == [(0x10, "STL"), (0x30, "LDL.LU")]
    assert k["_Z1kv"].body_bytes == 0x50
    assert k["_Z1jv"].local == [] and k["_Z1jv"].body_bytes == 0x20


def _nvdisasm_found() -> bool:
    try:
        report.nvdisasm()
    except SystemExit:
        return False
    return True


@pytest.mark.skipif(shutil.which("nvcc") is None or not _nvdisasm_found(),
                    reason="needs nvcc and nvdisasm (pip install nvidia-cuda-nvdisasm)")
def test_kernels_keep_their_values_in_registers():
    kernels = [k for ks in report.report(report.families()).values() for k in ks]
    local = {k.name for k in kernels if report.touches_local(k)}
    assert local <= set(report.CAPPED), f"kernels that spill or touch local memory: {sorted(local - set(report.CAPPED))}"
    assert set(report.CAPPED) <= {k.name for k in kernels}, "a CAPPED kernel is gone: drop it from CAPPED"
