"""What the compiled extension was built with, read from the binary itself."""

from __future__ import annotations

import ctypes
import functools


@functools.lru_cache(maxsize=1)
def cuda_kernels() -> bool:
    """Whether ``sgl_meta._C`` was compiled with its CUDA kernels (False for a
    ``SGLMETA_CPU_ONLY=1`` build, or one made without nvcc or a CUDA torch).

    The dispatcher cannot tell: a CPU-only build registers the CUDA key too, so
    that a CUDA tensor gets sgl_meta's own "built without CUDA" error. The
    binary answers through ``sgl_meta_has_cuda_kernels`` (csrc/build_info.cpp).
    """
    from . import _C

    return bool(ctypes.CDLL(_C.__file__).sgl_meta_has_cuda_kernels())
