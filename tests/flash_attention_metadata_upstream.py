"""SGLang 0.5.23's own FlashAttention metadata functions, run on CPU tensors by
Triton's interpreter (``TRITON_INTERPRET=1``).

The installed ``sglang/kernels/ops/attention/metadata.py`` is loaded unmodified
from its file as a private module while the interpreter switch is on: Triton
picks the interpreter when a kernel is decorated, so the copy SGLang itself
imports (compiled kernels) is left alone. ``None`` when sglang or triton is
missing.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from types import ModuleType, SimpleNamespace
from typing import Optional

from helpers import triton_interpreter

_MODULE: Optional[SimpleNamespace] = None
FUNCTIONS = ("normal_decode_set_metadata", "draft_extend_set_metadata", "prepare_swa_spec_page_table_triton")


def _interpreted(fn):
    @functools.wraps(fn)
    def call(*args, **kwargs):
        with triton_interpreter():
            return fn(*args, **kwargs)

    return call


def upstream() -> Optional[SimpleNamespace]:
    """The three upstream functions (same signatures), interpreted; None if absent."""
    global _MODULE
    if _MODULE is not None:
        return _MODULE
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(spec.submodule_search_locations[0], "kernels", "ops", "attention", "metadata.py")
    if not os.path.exists(path) or importlib.util.find_spec("triton") is None:
        return None
    with triton_interpreter():
        module_spec = importlib.util.spec_from_file_location("_sglang_fa_metadata_interpreted", path)
        module: ModuleType = importlib.util.module_from_spec(module_spec)
        module_spec.loader.exec_module(module)
    _MODULE = SimpleNamespace(**{name: _interpreted(getattr(module, name)) for name in FUNCTIONS})
    return _MODULE
