"""A table whose rows kill the worker on purpose: proves the matrix reports a
crash as a failed row (with the signal) and still runs the rows after it."""

from __future__ import annotations

import ctypes
import os

from bad_input_table import BASES  # noqa: F401  (the worker looks up BASES here)
from row_kit import Row, set_

OP = "update_trtllm_mha_graph_metadata"


def segfault(kw):
    ctypes.string_at(0)  # reads address 0: SIGSEGV


def abort(kw):
    os.abort()


ROWS = [
    Row("selftest/before", OP, set_(bs=-1), ("bs must be >= 0",)),
    Row("selftest/segfault", OP, segfault, ()),
    Row("selftest/between", OP, set_(page_size=0), ("page_size must be >= 1",)),
    Row("selftest/abort", OP, abort, ()),
    Row("selftest/after", OP, set_(q_mode=7), ("q_mode must be 0",)),
]
