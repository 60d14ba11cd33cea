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

from ..kv_indices import build_draft_decode_kv_indices, create_flashmla_kv_indices


class KernelStandIn:
    """Base of the stand-ins; a subclass sets ``__signature__`` (the kernel's
    parameters) and :meth:`run`, and may narrow :meth:`covers`."""

    original = None
    """SGLang's kernel, for the launches ours does not cover (set by :meth:`bind`)."""

    @classmethod
    def bind(cls, original) -> type:
        """A subclass that falls back to ``original`` (same name, module and signature)."""
        # __wrapped__: what it stands in for, as HookRegistry's function wrappers
        # carry it (the step bench's plugin switch finds the plugin's values by it).
        return type(cls.__name__, (cls,), {"original": original, "__module__": cls.__module__,
                                          "__qualname__": cls.__qualname__, "__doc__": cls.__doc__,
                                          "__wrapped__": original, **cls.constants(original)})

    @classmethod
    def constants(cls, original) -> dict:
        """Class attributes read once from SGLang's kernel when bound."""
        return {}

    def __class_getitem__(cls, grid):
        return functools.partial(cls._launch, grid)

    @classmethod
    def _launch(cls, grid, *args, **kwargs) -> None:
        # The host time of a launch adds to the op's: the call SGLang makes
        # (positional, then keywords of later parameters) binds with set and
        # dict operations, not inspect's binding.
        if cls.original is not None and (not kwargs.keys() <= cls._name_set or cls.declines(kwargs)):
            # Launch options (num_warps, num_stages, ...), arguments of another version, or a launch
            # form ours leaves to SGLang: SGLang's kernel, without binding the arguments first.
            cls.original[grid](*args, **kwargs)
            return
        if len(args) < len(cls._names) and kwargs.keys() <= cls._after[len(args)]:
            arguments = dict(cls._defaults)
            arguments.update(zip(cls._names, args))
            arguments.update(kwargs)
            if len(arguments) != len(cls._names):  # a required argument missing: inspect's error
                cls.__signature__.bind(*args, **kwargs)
        else:
            bound = cls.__signature__.bind(*args, **kwargs)
            bound.apply_defaults()
            arguments = bound.arguments
        if cls.covers(grid, arguments):
            cls.run(grid, arguments)
        elif cls.original is not None:
            cls.original[grid](*args, **kwargs)
        else:
            raise RuntimeError(f"sgl_meta: {cls.__name__} does not cover the launch {grid!r} and has no "
                               "SGLang kernel to fall back to (bind() was not called)")

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        params = cls.__signature__.parameters.values()
        cls._names = tuple(p.name for p in params)
        cls._name_set = frozenset(cls._names)
        cls._after = tuple(frozenset(cls._names[n:]) for n in range(len(cls._names)))  # keywords after n positionals
        cls._defaults = {p.name: p.default for p in params if p.default is not p.empty}

    @classmethod
    def declines(cls, kwargs: dict) -> bool:
        """A launch SGLang's kernel runs whatever its other arguments, told by its keywords alone
        (checked before the arguments bind: the launch then costs what SGLang's own does)."""
        return False

    @classmethod
    def covers(cls, grid, args: dict) -> bool:
        raise NotImplementedError

    @classmethod
    def run(cls, grid, args: dict) -> None:
        """Our op for a launch :meth:`covers` accepted."""
        raise NotImplementedError


def _grid(grid) -> Optional[tuple]:
    """A launch grid as a tuple of 1 to 3 ints, or None (a callable grid: meta-parameter dependent)."""
    if type(grid) is tuple and len(grid) == 3 and type(grid[0]) is int and type(grid[1]) is int \
            and type(grid[2]) is int:
        return grid
    if type(grid) is int:
        return (grid,)
    if type(grid) not in (tuple, list) or not 1 <= len(grid) <= 3 or not all(type(g) is int for g in grid):
        return None
    return tuple(grid)


_P = inspect.Parameter
_I32 = 2**31 - 1
_INDEX = (torch.int32, torch.int64)


def _power_of_two(n) -> bool:
    return type(n) is int and n >= 1 and n & (n - 1) == 0


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

    tokens_per_cta = 4096
    """0.5.23's ``FLASHMLA_CREATE_KV_BLOCK_SIZE_TRITON``, the tokens one CTA covers (read from SGLang's
    module when bound)."""

    @classmethod
    def constants(cls, original) -> dict:
        module = sys.modules.get(getattr(getattr(original, "fn", None), "__module__", None) or "")
        value = getattr(module, "FLASHMLA_CREATE_KV_BLOCK_SIZE_TRITON", cls.tokens_per_cta)
        return {"tokens_per_cta": int(getattr(value, "value", value))}

    @classmethod
    def covers(cls, grid, a: dict) -> bool:
        """The grid reaches every row and column of the table and the strides are the tensors' own
        (the op checks the arguments themselves and names what is wrong)."""
        g, page = _grid(grid), a["PAGED_SIZE"]
        if g is None or type(page) is not int or page < 1 or page & (page - 1) or page > cls.tokens_per_cta:
            return False
        req_to_token, req, out = a["req_to_token_ptr"], a["req_pool_indices_ptr"], a["kv_indices_ptr"]
        try:
            return (a["req_to_token_ptr_stride"] == req_to_token.stride(0)
                    and a["kv_indices_ptr_stride"] == out.stride(0) and out.dim() == 2
                    and g[0] == req.numel() and (len(g) < 3 or g[2] == 1)
                    and (g[1] if len(g) > 1 else 1) * (cls.tokens_per_cta // page) >= out.shape[1])
        except (AttributeError, TypeError, IndexError, RuntimeError):  # not tensors of these shapes
            return False

    @classmethod
    def run(cls, grid, a: dict) -> None:
        create_flashmla_kv_indices(a["req_to_token_ptr"], a["req_pool_indices_ptr"], a["page_kernel_lens_ptr"],
                                   a["kv_start_idx"], a["kv_indices_ptr"], page_size=a["PAGED_SIZE"])


def _draft_steps(grid: tuple, num_steps: int) -> int:
    """The draft steps of a launch: the grid's first extent, or with token blocks
    (``NUM_STEPS`` > 0) ``NUM_STEPS`` where that extent is a whole number of blocks per
    step (0, which no launch ours covers, otherwise)."""
    if num_steps == 0:
        return grid[0]
    return num_steps if num_steps > 0 and grid[0] >= num_steps and grid[0] % num_steps == 0 else 0


class DraftDecodeKvIndicesKernel(KernelStandIn):
    """``generate_draft_decode_kv_indices`` (``sglang.kernels.ops.speculative.cache_locs``),
    EAGLE multi-step draft decode's per-step ``kv_indices`` / ``kv_indptr``:
    :func:`sgl_meta.build_draft_decode_kv_indices` for the launches SGLang 0.5.23's Triton,
    FlashInfer and FlashInfer MLA multi-step draft backends make over a static pool: grid
    ``(steps, requests, topk)`` with ``NUM_STEPS`` 0 (one program walks a request's whole
    prefix per step and branch), or FlashInfer's token-block launch, grid
    ``(NUM_STEPS * blocks, requests, topk)`` (the same outputs, long prefixes spread over
    512-token programs); the strides the tensors' own, the power-of-two bounds at least the
    counts they bound, a token-granular source without ``v2p``. Other launches run SGLang's
    kernel: the unified pool's translated sources, a token-block grid that is not a whole
    number of blocks per step."""

    __signature__ = _params("req_pool_indices", "req_to_token", "paged_kernel_lens", "kv_indices", "kv_indptr",
                            "positions", "row_stride", "kv_indices_stride", "kv_indptr_stride", "bs_upper",
                            "iter_upper", "num_tokens_upper", "page_size", window_size=0, sink_size=0, NUM_STEPS=0,
                            ENTRY_PAGE_SIZE=1, v2p=None, TRANSLATE=False)

    @classmethod
    def covers(cls, grid, a: dict) -> bool:
        """A launch ours writes exactly as SGLang's kernel does, with arguments the op accepts (where the
        op would refuse what SGLang's kernel runs, or SGLang's would refuse to compile, SGLang's runs)."""
        g = _grid(grid)
        if g is None or len(g) != 3 or type(a["NUM_STEPS"]) is not int:
            return False
        steps, seqs, topk = _draft_steps(g, a["NUM_STEPS"]), g[1], g[2]
        if not (1 <= steps <= 64 and seqs >= 0 and 1 <= topk <= 1024):
            return False
        if a["ENTRY_PAGE_SIZE"] != 1 or a["TRANSLATE"] or a["v2p"] is not None:
            return False
        # tl.arange over each bound: SGLang's kernel compiles powers of two only.
        if not (_power_of_two(a["bs_upper"]) and _power_of_two(a["iter_upper"])
                and _power_of_two(a["num_tokens_upper"])):
            return False
        page, window, sink = a["page_size"], a["window_size"], a["sink_size"]
        if not (type(page) is int and type(window) is int and type(sink) is int and 1 <= page <= _I32
                and window <= _I32 and (window <= 0 or 0 <= sink <= _I32)):  # (a window <= 0 is none, sinks unread)
            return False
        if not (type(a["row_stride"]) is int and type(a["kv_indices_stride"]) is int
                and type(a["kv_indptr_stride"]) is int):
            return False
        r2t, req, lens, pos = a["req_to_token"], a["req_pool_indices"], a["paged_kernel_lens"], a["positions"]
        out, indptr = a["kv_indices"], a["kv_indptr"]
        try:
            return (r2t.dtype == torch.int32 and r2t.dim() == 2 and req.dtype in _INDEX and req.dim() == 1
                    and lens.dtype in _INDEX and lens.dim() == 1 and pos.dtype in _INDEX and pos.dim() == 1
                    and out.dtype in _INDEX and out.dim() == 2 and indptr.dtype in _INDEX and indptr.dim() == 2
                    and a["row_stride"] == r2t.stride(0)
                    and a["kv_indices_stride"] == out.stride(0) and a["kv_indptr_stride"] == indptr.stride(0)
                    and out.shape[0] >= steps and indptr.shape[0] >= steps and req.numel() >= seqs
                    and a["bs_upper"] >= seqs and a["iter_upper"] >= steps and a["num_tokens_upper"] >= seqs * topk)
        except (AttributeError, TypeError, IndexError, RuntimeError):  # not tensors of these shapes
            return False

    @classmethod
    def run(cls, grid, a: dict) -> None:
        g = _grid(grid)
        steps, seqs, topk = _draft_steps(g, a["NUM_STEPS"]), g[1], g[2]
        req = a["req_pool_indices"]
        build_draft_decode_kv_indices(
            req_to_token=a["req_to_token"], req_pool_indices=req if req.numel() == seqs else req[:seqs],
            seq_lens=a["paged_kernel_lens"], positions=a["positions"], kv_indices=a["kv_indices"],
            kv_indptr=a["kv_indptr"], topk=topk, num_steps=steps, page_size=a["page_size"],
            window_size=max(a["window_size"], 0), sink_size=a["sink_size"] if a["window_size"] > 0 else 0)
