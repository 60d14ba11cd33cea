"""Stand-ins for raw Triton kernels that SGLang launches itself, ``kernel[grid](...)``.

A hook row whose replacement is a :class:`KernelStandIn` subclass replaces such
a kernel through ``HookRegistry``'s class REPLACE: the module attribute and
every ``from X import Y`` copy become the class, bound to SGLang's kernel
(:meth:`KernelStandIn.bind`). ``Class[grid](*args, **kwargs)`` then runs our
op when the launch writes what the op's function form writes (the grid covers
every row and column, the strides are the tensors' own), and SGLang's kernel
otherwise. The arguments bind to the kernel's own parameters, checked against
the installed kernel's signature before the row is hooked.
"""

from __future__ import annotations

import functools
import inspect
import sys
from typing import Optional

import torch


class KernelStandIn:
    """Base of the stand-ins; a subclass sets ``__signature__`` (the kernel's
    parameters) and :meth:`run`, and may narrow :meth:`covers`."""

    original = None
    """SGLang's kernel, for the launches ours does not cover (set by :meth:`bind`)."""

    @classmethod
    def bind(cls, original) -> type:
        """A subclass that falls back to ``original`` (same name, module and signature)."""
        return type(cls.__name__, (cls,), {"original": original, "__module__": cls.__module__,
                                          "__qualname__": cls.__qualname__, "__doc__": cls.__doc__})

    def __class_getitem__(cls, grid):
        return functools.partial(cls._launch, grid)

    @classmethod
    def _launch(cls, grid, *args, **kwargs) -> None:
        bound = cls.__signature__.bind(*args, **kwargs)
        bound.apply_defaults()
        if cls.covers(grid, bound.arguments):
            cls.run(bound.arguments)
        elif cls.original is not None:
            cls.original[grid](*args, **kwargs)
        else:
            raise RuntimeError(f"sgl_meta: {cls.__name__} does not cover the launch {grid!r} and has no "
                               "SGLang kernel to fall back to (bind() was not called)")

    @classmethod
    def covers(cls, grid, args: dict) -> bool:
        raise NotImplementedError

    @classmethod
    def run(cls, args: dict) -> None:
        raise NotImplementedError


def _grid(grid) -> Optional[tuple[int, int, int]]:
    """A launch grid as three ints, or None (a callable grid: meta-parameter dependent)."""
    if isinstance(grid, int):
        grid = (grid,)
    if not isinstance(grid, (tuple, list)) or not 1 <= len(grid) <= 3 or not all(isinstance(g, int) for g in grid):
        return None
    return (tuple(grid) + (1, 1))[:3]


def _rows(t, dtypes=(torch.int32, torch.int64)) -> bool:
    return isinstance(t, torch.Tensor) and t.dim() == 1 and t.dtype in dtypes


def _table(t) -> bool:
    return isinstance(t, torch.Tensor) and t.dim() == 2 and t.dtype == torch.int32 and t.stride(1) == 1


_P = inspect.Parameter


def _params(*names: str, **defaults) -> inspect.Signature:
    return inspect.Signature([_P(n, _P.POSITIONAL_OR_KEYWORD) for n in names]
                             + [_P(n, _P.POSITIONAL_OR_KEYWORD, default=d) for n, d in defaults.items()])


class FlashmlaKvIndicesKernel(KernelStandIn):
    """``create_flashmla_kv_indices_triton`` (``sglang.kernels.ops.attention.kv_indices``),
    the FlashMLA / TRT-LLM MLA block table: :func:`sgl_meta.create_flashmla_kv_indices`
    for a launch as SGLang 0.5.23's backends make it (grid ``(bs, ceil(width /
    pages per CTA))``, ``req_to_token_ptr_stride`` and ``kv_indices_ptr_stride``
    the tensors' row strides); other launches run SGLang's kernel."""

    __signature__ = _params("req_to_token_ptr", "req_pool_indices_ptr", "page_kernel_lens_ptr", "kv_start_idx",
                            "kv_indices_ptr", "req_to_token_ptr_stride", "kv_indices_ptr_stride", PAGED_SIZE=64)

    TOKENS_PER_CTA = 4096
    """0.5.23's ``FLASHMLA_CREATE_KV_BLOCK_SIZE_TRITON``: the tokens one CTA covers (read from SGLang's
    module when bound)."""

    @classmethod
    def tokens_per_cta(cls) -> int:
        module = sys.modules.get(getattr(getattr(cls.original, "fn", None), "__module__", None) or "")
        value = getattr(module, "FLASHMLA_CREATE_KV_BLOCK_SIZE_TRITON", cls.TOKENS_PER_CTA)
        return int(getattr(value, "value", value))

    @classmethod
    def covers(cls, grid, a: dict) -> bool:
        g = _grid(grid)
        req_to_token, kv_indices, page = a["req_to_token_ptr"], a["kv_indices_ptr"], a["PAGED_SIZE"]
        if g is None or not (_table(req_to_token) and _table(kv_indices)):
            return False
        if not (_rows(a["req_pool_indices_ptr"]) and _rows(a["page_kernel_lens_ptr"])):
            return False
        start = a["kv_start_idx"]
        if not (start is None or _rows(start)):
            return False
        if not isinstance(page, int) or page < 1 or page & (page - 1) or page > cls.tokens_per_cta():
            return False
        pages_per_cta = cls.tokens_per_cta() // page
        return (a["req_to_token_ptr_stride"] == req_to_token.stride(0)
                and a["kv_indices_ptr_stride"] == kv_indices.stride(0)
                and g[0] == a["req_pool_indices_ptr"].numel() and g[2] == 1
                and g[1] * pages_per_cta >= kv_indices.shape[1])

    @classmethod
    def run(cls, a: dict) -> None:
        from ..kv_indices import create_flashmla_kv_indices

        create_flashmla_kv_indices(a["req_to_token_ptr"], a["req_pool_indices_ptr"], a["page_kernel_lens_ptr"],
                                   a["kv_start_idx"], a["kv_indices_ptr"], page_size=a["PAGED_SIZE"])
