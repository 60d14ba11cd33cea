"""The interface every benchmarked op implements, and shared helpers.

A workload is one line of the results table: one fused op, measured against its
eager reference on the same inputs. It owns

* static input buffers sized for the largest bucket (``fill`` writes a step's
  inputs into them, padding rows up to the bucket like SGLang's graph runner),
* one set of output buffers per (implementation, mode): ``fused``/``ref`` x
  ``eager``/``graph`` (graph only with CUDA), poisoned with the same random
  values so that an element one side writes and the other does not shows up,
* the calls one decode step makes (``calls``), for an eager step (unpadded
  ``bs`` and the scalars a server derives on the host from ``seq_lens_cpu``) or
  for graph capture (the bucket size and scalars fixed for every replay),
* the bytes those calls must move at least (``bytes_moved``).

Adding an op: subclass, set ``op``/``backend``, implement the five methods,
append the class to ``workloads.REGISTRY``.

Baselines: a workload may time more implementations beside the two
(``baselines``, e.g. ``"gather"``, the bare gather of the same pages, or an
upstream kernel slotted in on the same inputs). Each gets its own output set
(same starting poison) and graphs, and its own rows in the table; those in
``checked_baselines`` must match the reference in graph mode too.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

import sgl_meta
from sgl_meta import reference

from ..presets import Preset
from ..trace import ServingTrace, Step

IMPLS = ("fused", "ref")
# Bytes of DRAM traffic one scattered 4- or 8-byte read costs: ncu on an H200
# counted 524,750 page-boundary gathers reading 33.6 MB from DRAM, i.e. 64 B
# each (a pair of 32-byte sectors), so that is the floor. Not a bound when a
# kernel's second-level gathers hit L2 (v2p sectors are read about twice at
# bs 256): the 8192-page p16 page table can run under it.
SECTOR = 64


@dataclass
class BenchContext:
    """What a workload needs to set itself up."""

    preset: Preset
    spec: bool
    device: torch.device
    max_bs: int
    trace: ServingTrace
    seed: int
    graphs: bool  # CUDA: also keep graph-mode output sets
    upstream: Optional[str] = None  # --upstream spec: workloads that can time SGLang's kernel beside ours

    @property
    def modes(self) -> tuple:
        return ("eager", "graph") if self.graphs else ("eager",)


class Workload:
    """Base class; see the module docstring."""

    op: str = ""  # the fused op's public name in ``sgl_meta``
    label: str = ""  # short name for the table
    backend: str = ""  # the preset backend it serves
    needs_spec: bool = False  # only meaningful with speculative decoding

    @classmethod
    def available(cls) -> bool:
        """The fused op (and its reference) exist in this build."""
        return hasattr(sgl_meta, cls.op) and hasattr(reference, cls.op)

    @classmethod
    def applies(cls, ctx: BenchContext) -> bool:
        return ctx.preset.backend == cls.backend and (ctx.spec or not cls.needs_spec)

    def __init__(self, ctx: BenchContext):
        self.ctx = ctx
        self.device = ctx.device
        self._poison_gen = torch.Generator(device=ctx.device)
        self._poison_gen.manual_seed(ctx.seed * 7919 + zlib.crc32(self.op.encode()))
        self.out: dict = {}  # (impl, mode) -> {name: tensor}

    # -- to implement -------------------------------------------------------

    refreshes: tuple = ()  # names of the calls one step makes, in order
    baselines: tuple = ()  # extra implementations timed beside IMPLS (see the module docstring)
    checked_baselines: tuple = ()  # baselines whose graph-mode outputs must equal the reference's

    @property
    def impls(self) -> tuple:
        """Every implementation this workload times: IMPLS, then its baselines."""
        return IMPLS + tuple(self.baselines)

    def fill(self, step: Step, bucket: int) -> None:
        """Write ``step``'s inputs into the static buffers, rows ``bs..bucket`` padded."""
        raise NotImplementedError

    def calls(self, impl: str, bs: int, step: Optional[Step]) -> list:
        """Zero-argument callables, one per refresh. ``step`` given: eager call
        with host-known scalars; ``step`` None: graph capture for bucket ``bs``."""
        raise NotImplementedError

    def bytes_moved(self, step: Step, bucket: int, mode: str) -> int:
        """Least bytes one step's calls read + write in ``mode``."""
        raise NotImplementedError

    # -- shared helpers ------------------------------------------------------

    @property
    def calls_per_step(self) -> int:
        return len(self.refreshes)

    def outputs(self, impl: str, mode: str) -> dict:
        return self.out[(impl, mode)]

    def _make_outputs(self, shapes: dict) -> None:
        """Allocate every (impl, mode) output set from ``{name: (shape, dtype)}``;
        all sets of a mode (fused, reference, baselines) start from identical poison."""
        for mode in self.ctx.modes:
            fused = {name: self._poison(shape, dtype) for name, (shape, dtype) in shapes.items()}
            self.out[("fused", mode)] = fused
            for impl in self.impls[1:]:
                self.out[(impl, mode)] = {k: v.clone() for k, v in fused.items()}

    def _poison(self, shape, dtype) -> torch.Tensor:
        info = torch.iinfo(dtype)
        lo, hi = max(info.min, -(2**31)), min(info.max, 2**31 - 1)
        return torch.randint(lo, hi, shape, dtype=dtype, device=self.device, generator=self._poison_gen)

    def _h2d(self, dst: torch.Tensor, values: np.ndarray, n: int, pad) -> None:
        """``dst[:n] = values`` then ``pad`` up to ``n`` (values may be shorter)."""
        host = np.full(n, pad, dtype=values.dtype)
        host[: len(values)] = values
        dst[:n].copy_(torch.from_numpy(host), non_blocking=False)


def gather_sectors(pages: np.ndarray, page_size: int, itemsize: int = 4) -> np.ndarray:
    """DRAM access units (``SECTOR`` bytes) touched reading one ``itemsize`` element every ``page_size``
    elements, ``pages`` times per row: one sector per read once the stride
    reaches a sector, else the contiguous span."""
    stride = page_size * itemsize
    if stride >= SECTOR:
        return pages
    return -(-(pages * stride) // SECTOR)


def live_pages(lens: np.ndarray, page_size: int, width: int) -> np.ndarray:
    """``min(ceil(max(len, 0) / page_size), width)`` per row (int64)."""
    lens = np.maximum(lens.astype(np.int64), 0)
    return np.minimum(-(-lens // page_size), width)


Call = Callable[[], None]
