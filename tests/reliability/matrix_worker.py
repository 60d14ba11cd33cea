"""Subprocess worker: runs rows of a bad-input / hostile-value table, in order.

    python matrix_worker.py TABLE_MODULE DEVICE SEED [--sync] [--compare]  < JSON list of row ids

For every row it prints ``@@MATRIX {"row": id, "event": "start"}`` *before*
calling the op and a result line after, flushing each: if the process dies
(segfault, abort, device trap), the parent knows which row it was on. Row ids
ending in ``/control`` run the op's unedited base call (it must succeed).
``--sync`` synchronizes the device after each call, so a device-side assert
surfaces on that row. ``--compare``: a call that returns is replayed through
``sgl_meta.reference.<op>`` on CPU copies of its arguments as they were before
the call; the result line says how many tensors were compared (``compared``)
and which arguments came out different (``differs``), so "returned" alone never
passes for a call that wrote the wrong values.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import json
import sys
import traceback
import zlib
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent), str(HERE.parent.parent)]  # tables, tests/, repo

import torch  # noqa: E402

import sgl_meta  # noqa: E402,F401
from helpers import bits  # noqa: E402  (floating tensors compare bit for bit: a copied NaN is equal)


def emit(**record):
    flush_c_stdio()  # device printf output of the row first, in order
    print("@@MATRIX " + json.dumps(record), flush=True)


def flush_c_stdio():
    """Device-side printf (the op's assert message) goes through C stdio, which
    a pipe buffers fully: flush it now, the process may not exit cleanly."""
    try:
        ctypes.CDLL(None).fflush(None)
    except Exception:  # noqa: BLE001  (best effort)
        pass


def cpu_copy(value):
    """Deep CPU copy of a call's arguments (a dict of tensors, lists of tensors, scalars)."""
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().clone()
    if isinstance(value, (list, tuple)):
        return type(value)(cpu_copy(v) for v in value)
    if isinstance(value, dict):
        return {k: cpu_copy(v) for k, v in value.items()}
    return value


def _tensors(value) -> list:
    """(index, tensor) pairs of an argument: [(None, t)] for a tensor, one per
    tensor of a list, [] for anything else."""
    if isinstance(value, torch.Tensor):
        return [(None, value)]
    if isinstance(value, (list, tuple)):
        return [(i, v) for i, v in enumerate(value) if isinstance(v, torch.Tensor)]
    return []


def _same(a, b) -> bool:
    ta, tb = _tensors(a), _tensors(b)
    if not ta and not tb:
        return a == b
    return len(ta) == len(tb) and all(x.shape == y.shape and torch.equal(bits(x.cpu()), bits(y)) for (_, x), (_, y) in zip(ta, tb))


def compare_with_reference(op: str, kw: dict, before: dict, oracle_edit=None) -> dict:
    """Runs sgl_meta.reference.<op> on a copy of `before` (CPU copies of the
    arguments before the call) and compares every tensor argument of the op's
    call with it: outputs written alike, inputs untouched. `oracle_edit`
    (Row.oracle_edit) edits the reference's copy; an argument it changes is held
    to its value before the call instead."""
    want = cpu_copy(before)
    if oracle_edit:
        oracle_edit(want)
    edited = {k for k in want if not _same(want[k], before[k])}
    getattr(sgl_meta.reference, op)(**want)
    compared, differs = 0, []
    for name in want:
        expected = dict(_tensors(before[name] if name in edited else want[name]))
        for i, got in _tensors(kw[name]):
            compared += 1
            if i not in expected or not torch.equal(bits(got.cpu()), bits(expected[i])):
                differs.append(name if i is None else f"{name}[{i}]")
    return dict(compared=compared, differs=differs)


def main() -> int:
    table_name, device, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sync = "--sync" in sys.argv[4:]
    compare = "--compare" in sys.argv[4:]
    table = importlib.import_module(table_name)
    rows = {row.id: row for row in table.ROWS}
    for row_id in json.loads(sys.stdin.read()):
        emit(row=row_id, event="start")
        try:
            gen = torch.Generator().manual_seed((seed * 1_000_003 + zlib.crc32(row_id.encode())) % 2**63)
            row = rows.get(row_id)
            if row_id.endswith("/control"):
                op = row_id[: -len("/control")]
                kw = table.BASES[op](gen, device)
            else:
                op = row.op
                kw = table.BASES[row.base or row.op](gen, device)
                row.edit(kw)
            fn = getattr(torch.ops.sgl_meta if row is not None and row.dispatcher else sgl_meta, op)
        except Exception:  # the table itself is broken: report, do not blame the op
            emit(row=row_id, event="setup_error", message=traceback.format_exc())
            continue
        try:
            before = cpu_copy(kw) if compare else None
        except RuntimeError:  # meta tensors have no data to copy (such a call must raise anyway)
            before = None
        try:
            fn(**kw)
            if sync and torch.cuda.is_available():
                torch.cuda.synchronize()
        except BaseException as err:  # noqa: BLE001  (report everything, incl. SystemExit)
            emit(row=row_id, event="raised", type=type(err).__name__,
                 bases=[c.__name__ for c in type(err).__mro__], message=str(err))
            continue
        checks = dict(compared=0, differs=[]) if compare else {}
        if before is not None:
            try:
                checks = compare_with_reference(op, kw, before, getattr(rows.get(row_id), "oracle_edit", None))
            except Exception:  # noqa: BLE001  (the reference rejected the call: the row says so)
                checks["differs"] = ["the reference raised:\n" + traceback.format_exc()]
        emit(row=row_id, event="returned", **checks)
    if sync:  # after a device assert the CUDA teardown may hang or crash: skip it
        flush_c_stdio()
        sys.stdout.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
