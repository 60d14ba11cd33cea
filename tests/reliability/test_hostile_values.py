"""Hostile device values (hostile_table.py + a property test): never an
out-of-bounds access. CPU raises RuntimeError naming the op and argument; CUDA
trips a device-side assert naming the op (each row in its own process: the
assert poisons the CUDA context). Values the op must not read (past bs, past
the written length, dead columns) and -1 sentinels must not raise, and the
call must write exactly what sgl_meta.reference writes from the same arguments.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings

import hostile_table as table
from matrix_runner import run_each_alone, run_rows, run_seed
from stats import record

MUST_RAISE = [r for r in table.ROWS if r.raises]
MUST_PASS = [r for r in table.ROWS if not r.raises]


@pytest.fixture(scope="module")
def cpu_results(request):
    rows = [r.id for r in table.ROWS]
    return run_rows("hostile_table", "cpu", rows, run_seed(request.config), compare=True)


def assert_matches_reference(rec):
    """The call returned and wrote what sgl_meta.reference writes (matrix_worker.py --compare)."""
    assert rec["event"] == "returned", _verdict(rec)
    assert not rec["differs"], f"differs from the reference: {rec['differs']}"
    assert rec["compared"] > 0, rec


def _verdict(rec):
    if rec["event"] in ("crashed", "hung"):
        return f"the worker {rec['event']} ({rec['exit']}):\n{rec['output']}"
    return f"{rec['event']}: {rec.get('type', '')} {rec.get('message', '')}"


@pytest.mark.parametrize("row", MUST_RAISE, ids=[r.id for r in MUST_RAISE])
def test_cpu_rejects_hostile_value(cpu_results, row):
    rec = cpu_results[row.id]
    assert rec["event"] == "raised" and "RuntimeError" in rec["bases"], _verdict(rec)
    assert rec["message"].startswith(f"sgl_meta.{row.op}: "), rec["message"]
    for part in row.names:
        assert part in rec["message"], f"{part!r} not in {rec['message']!r}"


@pytest.mark.parametrize("row", MUST_PASS, ids=[r.id for r in MUST_PASS])
def test_cpu_ignores_unread_hostile_values(cpu_results, row):
    assert_matches_reference(cpu_results[row.id])


@pytest.fixture(scope="module")
def cuda_assert_results(request):
    """Every must-raise row in its own child process on the GPU (8 at a time)."""
    rows = [r.id for r in MUST_RAISE]
    return run_each_alone("hostile_table", "cuda", rows, run_seed(request.config), sync=True)


@pytest.mark.gpu
@pytest.mark.parametrize("row", MUST_RAISE, ids=[r.id for r in MUST_RAISE])
def test_cuda_hostile_value_trips_device_assert(cuda_assert_results, row):
    """The child runs the op on CUDA and synchronizes: a device-side assert
    whose printed message names the op, never a silent out-of-bounds access."""
    rec = cuda_assert_results[row.id]
    output = rec.get("output", "")
    assert rec["event"] in ("raised", "crashed"), f"expected a device-side assert, got {_verdict(rec)}"
    text = output + rec.get("message", "")
    # the first reports and the error at the end: a flood of reports hides neither
    shown = f"{rec['event']} ({rec.get('exit', rec.get('type', ''))}), {len(text)} chars:\n{text[:2000]}\n...\n{text[-2000:]}"
    assert "device-side assert" in text, f"no 'device-side assert' in {shown}"
    assert f"sgl_meta: {row.op}:" in text, f"the device message must name the op; {shown}"


@pytest.mark.gpu
def test_cuda_ignores_unread_hostile_values(request):
    rows = [r.id for r in MUST_PASS]
    got = run_rows("hostile_table", "cuda", rows, run_seed(request.config), sync=True, compare=True)
    bad = {}
    for row_id in rows:  # every row's verdict, not the first failure only
        try:
            assert_matches_reference(got[row_id])
        except AssertionError as err:
            bad[row_id] = str(err)
    assert not bad, bad


# ---- property: hostile values injected into valid random calls (CPU) ---------
from registry import HOSTILE  # noqa: E402


@pytest.mark.parametrize("entry", HOSTILE, ids=[e.name for e in HOSTILE])
def test_cpu_hostile_property(entry):
    """Random valid call + one injected hostile value: a value the op reads
    raises RuntimeError naming op and argument, with nothing written outside
    the output views; a value it must not read changes nothing at all."""
    @settings(max_examples=max(1, int(settings.default.max_examples * entry.weight)))
    @given(hostile=entry.cases())
    def prop(hostile):
        record(f"hostile:{entry.check(hostile)}", entry.name, "cpu")

    prop()
