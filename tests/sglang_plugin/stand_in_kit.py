"""Doubles for SGLang's raw Triton kernels, bound under the plugin's stand-ins
(sgl_meta/sglang/kernels.py) in their tests."""

from __future__ import annotations


class Recorder:
    """Stands for SGLang's kernel: records each launch ``(grid, args, kwargs)``."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        return lambda *args, **kwargs: self.launches.append((grid, args, kwargs))


class NotCalled:
    """Stands for SGLang's kernel where every launch must be one the stand-in covers."""

    def __getitem__(self, grid):
        raise AssertionError(f"SGLang's kernel ran for the launch {grid}: ours should cover it")
