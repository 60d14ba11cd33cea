"""The compiled extension: whether it is there (a clear error when it is not,
instead of Python's "cannot import name '_C' from partially initialized module")
and what it was built with, read from the binary itself."""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path


@functools.lru_cache(maxsize=1)
def _binary() -> ctypes.CDLL:
    """``sgl_meta._C`` opened for its ``extern "C"`` facts (csrc/build_info.cpp)."""
    from . import _C

    return ctypes.CDLL(_C.__file__)


@functools.lru_cache(maxsize=1)
def cuda_kernels() -> bool:
    """Whether ``sgl_meta._C`` was compiled with its CUDA kernels (False for a
    ``SGLMETA_CPU_ONLY=1`` build, or one made without nvcc or a CUDA torch).

    The dispatcher cannot tell: a CPU-only build registers the CUDA key too, so
    that a CUDA tensor gets sgl_meta's own "built without CUDA" error. The
    binary answers through ``sgl_meta_has_cuda_kernels`` (csrc/build_info.cpp).
    """
    return bool(_binary().sgl_meta_has_cuda_kernels())


@functools.lru_cache(maxsize=1)
def vllm_max_groups() -> int:
    """The most KV-cache groups one vLLM block-table call takes, read from the binary
    (``kVllmMaxGroups``: the kernels' per-group tables live in the launch parameters)."""
    try:
        return int(_binary().sgl_meta_vllm_max_groups())
    except AttributeError:
        raise ImportError(f"sgl_meta: the compiled extension {_binary()._name} is older than its Python files (it "
                          "has no sgl_meta_vllm_max_groups): rebuild it (`pip install --no-build-isolation -e .`)"
                          ) from None


def require_built_extension() -> None:
    """Import ``sgl_meta._C`` or explain why it is not there."""
    import torch  # noqa: F401  (the extension links against torch's libraries)

    try:
        from . import _C  # noqa: F401
    except ImportError:
        here = Path(__file__).resolve().parent
        if any(here.glob("_C*.so")) or any(here.glob("_C*.pyd")):
            raise  # built, but it does not load: the loader's own message says why
        source_tree = (here.parent / "setup.py").is_file()
        hint = (
            "This is the source tree (a checkout), and its extension is not built in place: "
            "it shadows any installed sgl_meta when Python runs from the checkout root. "
            "Run from another directory to use the installed package, or build in place with "
            "`pip install --no-build-isolation -e .` (or `bash scripts/test.sh`)."
            if source_tree
            else "Reinstall the sgl-meta wheel for this Python and torch."
        )
        raise ImportError(f"sgl_meta: the compiled extension sgl_meta/_C is missing in {here}. {hint}") from None
