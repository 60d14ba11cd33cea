"""The eager fast path: plain eager calls skip the dispatcher's argument handling.

``torch.ops`` costs ~0.5 us per tensor argument before the kernel runs (Python
argument parsing, the dispatcher, stable-ABI boxing). Every op's public
function (``sgl_meta/_op.py``) first hands its arguments, as one tuple in
schema order, to the op's ``extern "C"`` entry of the extension
(``ctypes.PyDLL``: the GIL stays held), which reads each
tensor's metadata through PyTorch's DLPack C exchange API
(``torch.Tensor.__dlpack_c_exchange_api__``, no allocation) and runs the op's
own checks and launch: same checks, same error messages, same kernels
(``csrc/common/op_binding.h``).

The dispatcher path (``torch.ops.sgl_meta.*``) is taken instead whenever the
fast path could change what a caller sees: under ``torch.compile`` tracing,
while a TorchFunctionMode or TorchDispatchMode is active (make_fx, FakeTensorMode,
debug modes) or the autograd profiler records, for tensor subclasses, tensors
without data (functionalize's wrappers, ZeroTensor, a freed storage), devices
other than CPU / CUDA, a dtype no op description names (any but int32, int64,
bool, bfloat16, float16 and float32), None for a required tensor, or a scalar
that is not a plain int: the C entry declines and the op is called as before.
(DLPack does not carry PyTorch's lazy negative-view bit, which a tensor only
gets from the private ``torch._neg_view`` or, floating, as the imaginary part of
a conjugated complex tensor: such a tensor is read as its stored values.) Set
``SGLMETA_FAST_PATH=0`` to always take the dispatcher path; torch builds
without the exchange API (it appeared in torch 2.10) do so automatically.
"""

from __future__ import annotations

import ctypes
from typing import Callable

import torch

from . import _C, _env

_lib = ctypes.PyDLL(_C.__file__)
_lib.sgl_meta_fast_init.argtypes = [ctypes.py_object]
_lib.sgl_meta_fast_init.restype = ctypes.c_int

_switch = _env.lookup("FAST_PATH")
available: bool = (_switch is None or _switch[1] != "0") and _lib.sgl_meta_fast_init(torch.Tensor) == 0
"""Whether this process can take the fast path at all."""

enabled: bool = available
"""Switch read on every call (tests set it to False to exercise the dispatcher path)."""

_compiling = torch.compiler.is_compiling
_function_mode = torch._C._is_torch_function_mode_enabled
_dispatch_modes = torch._C._len_torch_dispatch_stack
_profiling = torch._C._autograd._profiler_enabled


def route(entry: str, slow: Callable[[tuple], None]) -> Callable[[tuple], None]:
    """The call of one op: its arguments (one tuple, schema order) to the fast
    entry ``entry``, or to ``slow`` (the dispatcher path) when that declines.

    The entry returns 0 when it ran the op, 1 to decline, and raises the op's
    own RuntimeError when a check fails.
    """
    if not available:
        return slow
    fast = getattr(_lib, entry)
    fast.argtypes = [ctypes.py_object]
    fast.restype = ctypes.c_int

    def call(args: tuple) -> None:
        if (not enabled or _compiling() or _function_mode() or _dispatch_modes() or _profiling()
                or fast(args)):
            slow(args)

    call.__name__ = call.__qualname__ = f"route({entry})"
    return call
