"""Inputs the rows share, output sets poisoned alike for every implementation,
and the ``Row`` every row builder returns.

Inputs are built on the device once per family and sliced per row:

* ``paged_pool``: a ``req_to_token`` whose rows are shuffled whole pages (ids
  from 1; page 0 is padding), so page-boundary slots are scattered the way a
  long-running server's allocator leaves them;
* lengths: ``uniform_lengths`` (the fixed-shape cases of
  ``benchmarks/op_shapes.py``) or ``trace_lengths`` (the serving trace's
  log-normal prompt and output lengths, for the DSA generator rows).

Every implementation writes its own copy of each output, all starting from the
same random poison, so an element one side writes and the other does not shows
up in the checks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from ..trace import LengthModel

# "gather": the bare gather of the same addresses (``sgl_meta.bench.bare_gather``),
# the KV read rows' ceiling; only those rows have it.
IMPLS = ("upstream", "ours", "ref", "gather")
OUTPUT_IMPLS = IMPLS[:3]  # the output sets a fixture makes unless it asks for more


def generator(device: torch.device, seed: int) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def paged_pool(rows: int, pages: int, page_size: int, device, gen) -> torch.Tensor:
    """int32 ``[rows, pages * page_size]``: row r holds pages ``perm[r]`` (distinct,
    >= 1), token t of a page at slot ``page * page_size + t``."""
    perm = torch.randperm(rows * pages, device=device, generator=gen).add_(1).view(rows, pages)
    base = (perm * page_size).to(torch.int32)
    offs = torch.arange(page_size, dtype=torch.int32, device=device)
    return (base.unsqueeze(-1) + offs).view(rows, pages * page_size)


def request_rows(n: int, device, gen) -> torch.Tensor:
    """int32 ``[n]``: rows ``1..n`` of the pool in shuffled order (row 0 is padding)."""
    return (torch.randperm(n, device=device, generator=gen) + 1).to(torch.int32)


def request_pool(n: int, pages: int, page_size: int, device, gen) -> tuple:
    """``(req_to_token, req_pool_indices)`` of ``n`` running requests: a ``paged_pool``
    of ``n + 1`` rows and its ``request_rows``."""
    return paged_pool(n + 1, pages, page_size, device, gen), request_rows(n, device, gen)


def uniform_lengths(n: int, lo: int, hi: int, device, gen) -> torch.Tensor:
    """int32 ``[n]`` uniform in ``[lo, hi]``."""
    return torch.randint(lo, hi + 1, (n,), dtype=torch.int32, device=device, generator=gen)


def trace_lengths(n: int, cap: int, device, seed: int, lengths: LengthModel = LengthModel()) -> torch.Tensor:
    """int32 ``[n]`` KV lengths of running requests as the serving trace draws them:
    a log-normal prompt plus a uniform share of a log-normal output, capped."""
    g = torch.Generator().manual_seed(seed)
    prompt = torch.empty(n, dtype=torch.float64).log_normal_(math.log(lengths.prompt_median), lengths.prompt_sigma, generator=g)
    output = torch.empty(n, dtype=torch.float64).log_normal_(math.log(lengths.output_median), lengths.output_sigma, generator=g)
    done = torch.rand(n, dtype=torch.float64, generator=g)
    lens = (prompt + done * output).round().clamp(1, cap)
    return lens.to(torch.int32).to(device)


def live_cols(lens: torch.Tensor, per_col: int, width: int) -> torch.Tensor:
    """int64 columns of a row holding ``lens`` tokens, ``per_col`` tokens a column, capped at ``width``."""
    lens = lens.to(torch.int64).clamp(min=0)
    return torch.minimum((lens + per_col - 1) // per_col, torch.full_like(lens, width))


def prefix_mask(cols: torch.Tensor, shape: tuple) -> torch.Tensor:
    """bool ``shape``: row r's first ``cols[r]`` columns (rows past ``cols`` none)."""
    rows, width = shape
    mask = torch.zeros(shape, dtype=torch.bool, device=cols.device)
    n = min(rows, cols.numel())
    mask[:n] = torch.arange(width, device=cols.device) < cols[:n, None]
    return mask


class OutputSets:
    """One set of output buffers per implementation, ``{name: (shape, dtype)}``,
    all filled with the same random poison (kept, for ``repoison``)."""

    def __init__(self, shapes: dict, device, gen, impls=OUTPUT_IMPLS):
        self.poison = {}
        for name, (shape, dtype) in shapes.items():
            info = torch.iinfo(dtype)
            lo, hi = max(info.min, -(2**31)), min(info.max, 2**31 - 1)
            self.poison[name] = torch.randint(lo, hi, shape, dtype=dtype, device=device, generator=gen)
        self.sets = {impl: {n: p.clone() for n, p in self.poison.items()} for impl in impls}

    def __getitem__(self, impl: str) -> dict:
        return self.sets[impl]

    def repoison(self, names=None) -> None:
        for impl_set in self.sets.values():
            for n in names or impl_set:
                impl_set[n].copy_(self.poison[n])


@dataclass
class Row:
    """One line of the side-by-side table.

    ``calls[impl]``: the zero-argument calls one refresh of this case makes
    (upstream: its whole path, e.g. generator + K copies). ``outputs[impl]``:
    the buffers they write (whole buffers; ours vs ref compares all of them).
    ``regions``: for each compared output, the elements upstream defines (a
    tuple of slices or a bool mask of the buffer's shape); ours vs upstream
    compares those only. ``repoison`` puts the poison back before a check.
    """

    name: str
    group: str
    params: dict
    calls: dict
    outputs: dict
    regions: dict
    poison: dict
    repoison: Callable[[], None]
    note: str = ""


def make_row(out: OutputSets, names: list, *, name: str, group: str, params: dict, calls: dict, regions: dict,
             note: str = "") -> Row:
    """The ``Row`` of ``calls`` writing the outputs ``names`` of ``out``; a row whose
    op has no eager reference yet still runs (ours vs upstream) and says so."""
    if "ref" not in calls:
        note = "; ".join(filter(None, ["no eager reference in this build", note]))
    outputs = {impl: {n: out[impl][n] for n in names} for impl in calls}
    return Row(name=name, group=group, params=params, calls=calls, outputs=outputs, regions=regions,
               poison=out.poison, repoison=lambda: out.repoison(names), note=note)


@dataclass
class RowSpec:
    """A row to build when its pieces exist: ``ours`` names the sgl_meta functions
    it needs (a row for an op this build lacks is listed as skipped), and
    ``build(ctx, kernels)`` makes the ``Row``."""

    name: str
    group: str
    families: tuple  # loader.TRITON / loader.JIT: the upstream kernel families it runs
    ours: tuple
    build: Callable
    upstream: tuple = ()  # upstream functions it needs


@dataclass
class Context:
    """Per-run state the row builders share: device, seed, lazily built fixtures."""

    device: torch.device
    seed: int
    max_bs: int = 256
    fixtures: dict = field(default_factory=dict)

    def fixture(self, key: str, factory: Callable):
        if key not in self.fixtures:
            self.fixtures[key] = factory(self)
        return self.fixtures[key]

    def drop(self, key: Optional[str] = None) -> None:
        """Free a family's fixtures (all when ``key`` is None) before the next family."""
        if key is None:
            self.fixtures.clear()
        else:
            self.fixtures.pop(key, None)
        if self.device.type == "cuda":
            torch.cuda.empty_cache()
