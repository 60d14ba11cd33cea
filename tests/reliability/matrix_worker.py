"""Subprocess worker: runs rows of a bad-input / hostile-value table, in order.

    python matrix_worker.py TABLE_MODULE DEVICE SEED [--sync]  < JSON list of row ids

For every row it prints ``@@MATRIX {"row": id, "event": "start"}`` *before*
calling the op and a result line after, flushing each: if the process dies
(segfault, abort, device trap), the parent knows which row it was on. Row ids
ending in ``/control`` run the op's unedited base call (it must succeed).
``--sync`` synchronizes the device after each call, so a device-side assert
surfaces on that row.
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


def main() -> int:
    table_name, device, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    sync = "--sync" in sys.argv[4:]
    table = importlib.import_module(table_name)
    rows = {row.id: row for row in table.ROWS}
    for row_id in json.loads(sys.stdin.read()):
        emit(row=row_id, event="start")
        try:
            gen = torch.Generator().manual_seed((seed * 1_000_003 + zlib.crc32(row_id.encode())) % 2**63)
            if row_id.endswith("/control"):
                op = row_id[: -len("/control")]
                kw = table.BASES[op](gen, device)
            else:
                row = rows[row_id]
                op = row.op
                kw = table.BASES[row.base or row.op](gen, device)
                row.edit(kw)
            fn = getattr(sgl_meta, op)
        except Exception:  # the table itself is broken: report, do not blame the op
            emit(row=row_id, event="setup_error", message=traceback.format_exc())
            continue
        try:
            fn(**kw)
            if sync and torch.cuda.is_available():
                torch.cuda.synchronize()
        except BaseException as err:  # noqa: BLE001  (report everything, incl. SystemExit)
            emit(row=row_id, event="raised", type=type(err).__name__,
                 bases=[c.__name__ for c in type(err).__mro__], message=str(err))
        else:
            emit(row=row_id, event="returned")
    if sync:  # after a device assert the CUDA teardown may hang or crash: skip it
        flush_c_stdio()
        sys.stdout.flush()
        os._exit(0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
