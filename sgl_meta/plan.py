"""Bound calls: validate a call once, repeat it for a few microseconds of host time.

A server refreshes the same static buffers before every CUDA-graph replay. When
that refresh stays outside the graph, every call pays the dispatcher
(``torch.ops`` argument parsing, ``__torch_function__`` checks, stable-ABI
boxing: ~0.5 us per tensor argument) although nothing but the buffer *contents*
changes. :func:`bind` runs one call of an sgl_meta op through the dispatcher
with every host check, but instead of launching, it saves the validated launch;
the returned :class:`Plan` repeats exactly that launch with no argument
handling at all::

    refresh = sgl_meta.bind(
        sgl_meta.update_trtllm_mha_graph_metadata,
        req_pool_indices=req_pool_indices, seq_lens=seq_lens, ...,  # as for the op
    )
    for step in range(n):
        ...                 # write new values into seq_lens, req_pool_indices, ...
        refresh()           # same op, same buffers, current stream, no dispatcher

Contract (the plan holds raw device pointers):

* A plan binds **memory, not Python objects**: it keeps every bound tensor's
  storage alive (deleting your tensors cannot free memory it writes), and it
  reads and writes that memory on every call. Values may change between calls;
  shapes, scalars (``bs``, ``page_size``, ...) and the buffers themselves are
  fixed at :func:`bind` time: bind a new plan for a new ``bs``.
* Re-pointing a bound tensor (``t.set_(...)``, a ``resize_`` that reallocates)
  leaves the plan on the old memory. :meth:`Plan.check` detects that (it
  raises ``RuntimeError`` naming the argument); set ``SGL_META_CHECK_PLANS=1``
  to check on every call.
* Each call launches on the bound tensors' device, on that device's *current*
  stream, so plans can be recorded into CUDA graphs like the op. Device-side
  checks (hostile indices) run as in the op: a device assert on CUDA, a
  ``RuntimeError`` on CPU.
* Plans are for eager code and CUDA graphs; under ``torch.compile`` call the
  op itself (a plan is opaque to tracing).
"""

from __future__ import annotations

import ctypes
import inspect
import os
import weakref
from typing import Any, Callable

import torch

from . import _C

_lib = ctypes.CDLL(_C.__file__)
_lib.sgl_meta_plan_begin.restype = ctypes.c_int
_lib.sgl_meta_plan_begin.argtypes = []
_lib.sgl_meta_plan_end.restype = ctypes.c_void_p
_lib.sgl_meta_plan_end.argtypes = []
_lib.sgl_meta_plan_size.restype = ctypes.c_int64
_lib.sgl_meta_plan_size.argtypes = [ctypes.c_void_p]
# The hot call: one prebuilt ctypes argument and no argtypes (ctypes then
# skips its per-argument converters); PyDLL keeps the GIL so that the C side
# raises a failed launch as a Python RuntimeError itself.
_run = ctypes.PyDLL(_C.__file__).sgl_meta_plan_run
_run.restype = ctypes.c_int
_lib.sgl_meta_plan_free.restype = None
_lib.sgl_meta_plan_free.argtypes = [ctypes.c_void_p]

# The modules whose public functions are op wrappers / drop-ins that end in
# exactly one op call on the given tensors (nothing copied first): the only
# callables bind() accepts. (sgl_meta.reference runs eager torch ops, and the
# SGLang adapters may copy a source before the call: neither can be replayed.)
_OP_MODULES = frozenset({"sgl_meta.trtllm_mha_metadata", "sgl_meta.dsa_metadata_copy", "sgl_meta.dsa_metadata",
                         "sgl_meta.kv_read_table"})


def _tensors(name: str, value: Any):
    """(argument name, tensor) for a tensor or a list/tuple of tensors."""
    if isinstance(value, torch.Tensor):
        yield name, value
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            if isinstance(v, torch.Tensor):
                yield f"{name}[{i}]", v


class Plan:
    """A validated call of one sgl_meta op, repeated by calling the plan.

    Made by :func:`bind`; see the module docstring for the contract.
    """

    __slots__ = ("_handle", "_run", "_bound", "_storages", "_check", "op_name",
                 "num_launches", "__weakref__")

    def __init__(self, op_name: str, handle: int, bound: list):
        if not isinstance(handle, int) or not handle:
            raise TypeError("sgl_meta.Plan: plans are made by sgl_meta.bind(op, ...), not directly")
        self.op_name = op_name
        self._handle = ctypes.c_void_p(handle)
        self._run = _run
        # (name, tensor, data_ptr at bind time); the storages keep the memory
        # alive even if the tensors are later re-pointed.
        self._bound = bound
        self._storages = [t.untyped_storage() for _, t, _ in bound]
        self._check = os.environ.get("SGL_META_CHECK_PLANS", "0") == "1"
        self.num_launches = int(_lib.sgl_meta_plan_size(self._handle))
        weakref.finalize(self, _lib.sgl_meta_plan_free, self._handle)

    def __call__(self) -> None:
        """Repeat the bound launch (current stream of the bound device)."""
        if self._check:
            self.check()
        try:
            self._run(self._handle)
        except RuntimeError as err:
            msg = str(err)
            if not msg.startswith("sgl_meta."):
                msg = f"sgl_meta.{self.op_name} (bound call): {msg}"
            raise RuntimeError(msg) from None

    def check(self) -> None:
        """Raise if a bound tensor no longer points at the memory the plan uses."""
        for name, t, ptr in self._bound:
            if t.data_ptr() != ptr:
                raise RuntimeError(
                    f"sgl_meta.{self.op_name} (bound call): {name} was re-pointed to other "
                    "memory after bind() (set_/resize_); the plan still uses the old memory: "
                    "bind again"
                )

    def __repr__(self) -> str:
        return f"<sgl_meta.Plan {self.op_name}: {self.num_launches} launch(es), {len(self._bound)} tensors>"


def bind(op: Callable, /, *args, **kwargs) -> Plan:
    """Validate one call of an sgl_meta op and return a :class:`Plan` that repeats it.

    Args:
        op: a public sgl_meta wrapper or drop-in, e.g.
            :func:`sgl_meta.update_trtllm_mha_graph_metadata` or
            :func:`sgl_meta.fused_metadata_copy_cuda`.
        *args, **kwargs: exactly the arguments of that call.

    Every host-side check of the op runs now (the same errors as a direct
    call); nothing is written. Calling the plan then costs one C call (0.2-0.3 us
    on the H200 machine) and the kernel launch: 4.5-4.8 us per call there, where
    an empty kernel launched through ctypes took 3.9 us, against 11.3-25.9 us for
    the same calls through ``torch.ops`` in the same run
    (``benchmarks/bound_calls.py``, ``results/h200_2026-12-01/bound_calls.json``).

    Raises:
        TypeError: ``op`` is not an sgl_meta op wrapper.
        RuntimeError / ValueError / TypeError: as the op raises for these arguments.
    """
    if not inspect.isfunction(op) or op.__module__ not in _OP_MODULES or op.__name__.startswith("_"):
        raise TypeError(
            f"sgl_meta.bind: op must be one of sgl_meta's op wrappers or drop-ins (e.g. "
            f"sgl_meta.update_trtllm_mha_graph_metadata), got {op!r}"
        )
    try:
        named = inspect.signature(op).bind(*args, **kwargs).arguments
    except TypeError as err:
        raise TypeError(f"sgl_meta.bind: {op.__name__}: {err}") from None
    bound = [(n, t, t.data_ptr()) for key, v in named.items() for n, t in _tensors(key, v)]
    if _lib.sgl_meta_plan_begin():
        raise RuntimeError("sgl_meta.bind: this thread is already recording a plan (bind does not nest)")
    try:
        op(*args, **kwargs)
    except BaseException:
        _lib.sgl_meta_plan_free(_lib.sgl_meta_plan_end())
        raise
    return Plan(op.__name__, _lib.sgl_meta_plan_end(), bound)
