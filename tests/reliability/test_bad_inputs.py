"""The bad-input matrix (bad_input_table.py), run in a subprocess worker.

Every row must raise one of its exception types with a message naming the op
and the argument; a row that crashes the worker fails alone, reported with
the row it was on (see matrix_runner.py). Each op's unedited base call runs
first as a control and must succeed, writing what sgl_meta.reference writes,
so a row fails for its edit only.
"""

from __future__ import annotations

import pytest
import torch

import bad_input_table as table
from matrix_runner import run_rows, run_seed

HAS_CUDA = torch.cuda.is_available()
ROWS = table.ROWS
RUNNABLE = [r for r in ROWS if r.needs != "cuda" or HAS_CUDA]
CONTROLS = sorted({f"{r.base or r.op}/control" for r in RUNNABLE})


@pytest.fixture(scope="module")
def cpu_results(request):
    ids = CONTROLS + [r.id for r in RUNNABLE]
    return run_rows("bad_input_table", "cpu", ids, run_seed(request.config), compare=True)


@pytest.fixture(scope="module")
def cuda_results(request):
    """The same rows with the base call on the GPU (rows that move tensors to
    CUDA themselves excluded): the host checks must fire before any launch."""
    ids = CONTROLS + [r.id for r in RUNNABLE if r.needs != "cuda"]
    return run_rows("bad_input_table", "cuda", ids, run_seed(request.config), sync=True, compare=True)


DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]


def describe(rec: dict) -> str:
    if rec["event"] in ("crashed", "hung"):
        return f"the worker {rec['event']} on this row ({rec['exit']}); output tail:\n{rec['output']}"
    if rec["event"] == "raised":
        return f"{rec['type']}: {rec['message']}"
    return rec["event"] + (": " + rec.get("message", "") if "message" in rec else "")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("control", CONTROLS)
def test_base_call_is_valid(request, control, device):
    rec = request.getfixturevalue(f"{device}_results")[control]
    assert rec["event"] == "returned", f"the unedited base call must succeed; got {describe(rec)}"
    assert not rec["differs"], f"the base call differs from sgl_meta.reference: {rec['differs']}"
    assert rec["compared"] > 0, rec


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_input_raises_named_error(request, row, device):
    if row.needs == "cuda" and not HAS_CUDA:
        pytest.skip("needs a CUDA device")
    if row.needs == "cuda" and device == "cuda":
        pytest.skip("the row itself moves tensors to CUDA (runs in the cpu matrix)")
    rec = request.getfixturevalue(f"{device}_results")[row.id]
    assert rec["event"] == "raised", f"{row.id}: expected {[e.__name__ for e in row.raises]}, got {describe(rec)}"
    wanted = {e.__name__ for e in row.raises}
    assert wanted & set(rec["bases"]), f"{row.id}: expected {sorted(wanted)}, got {describe(rec)}"
    message = rec["message"]
    op = row.base or row.op
    if row.prefixed:
        assert message.startswith(f"sgl_meta.{row.op}: ") or message.startswith(f"sgl_meta.{op}: "), (
            f"{row.id}: message must start with 'sgl_meta.{row.op}: ', got {message!r}")
    else:
        assert row.op in message or op in message, f"{row.id}: message must name the op, got {message!r}"
    for part in row.names:
        assert part in message, f"{row.id}: message must contain {part!r}, got {message!r}"


def test_matrix_size():
    """The matrix stays a matrix: at least 40 bad calls across the ops."""
    assert len(ROWS) >= 40, len(ROWS)


def test_a_crashing_row_fails_alone(request):
    """The harness itself: rows that segfault / abort the worker are reported
    as crashed with their signal, and every other row still gets run."""
    import matrix_selftest_table as selftest

    got = run_rows("matrix_selftest_table", "cpu", [r.id for r in selftest.ROWS], run_seed(request.config))
    events = {k: v["event"] for k, v in got.items()}
    assert events == {
        "selftest/before": "raised",
        "selftest/segfault": "crashed",
        "selftest/between": "raised",
        "selftest/abort": "crashed",
        "selftest/after": "raised",
    }, events
    segv = got["selftest/segfault"]
    # the signal, or (under scripts/asan_cpu.sh) AddressSanitizer's SEGV report
    assert segv["exit"] == "killed by signal SIGSEGV" or "AddressSanitizer: SEGV" in segv["output"], segv
    assert "Segmentation fault" in segv["output"] or "AddressSanitizer" in segv["output"], segv["output"]
    assert got["selftest/abort"]["exit"] == "killed by signal SIGABRT", got["selftest/abort"]
