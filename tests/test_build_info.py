"""``sgl_meta._build.cuda_kernels()`` tells what the binary was built with."""

from __future__ import annotations

from pathlib import Path

from sgl_meta import _C, _build


def test_cuda_kernels_matches_the_binary():
    """True iff the binary carries device code (an ``.nv_fatbin`` section, which
    only nvcc-compiled kernels put there). The dispatcher cannot tell: a CPU-only
    build registers the CUDA key too."""
    assert _build.cuda_kernels() == (b".nv_fatbin" in Path(_C.__file__).read_bytes())
