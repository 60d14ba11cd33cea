"""A device-independent description of one op call, for differential tests.

Every tensor argument is a :class:`Strided` view (size, stride, storage offset)
into its own flat *base* buffer. Moving a case to a device moves the bases and
re-creates the same views there (``Tensor.to`` would make padded views
contiguous and hide stride bugs). Outputs are compared base against base, so a
write outside an output view (a padding column, a row past ``bs``, the storage
before the offset) shows as a changed element, and inputs are checked to be
left untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import torch

from helpers import bits


@dataclass
class Strided:
    base: torch.Tensor  # flat, contiguous
    size: tuple
    stride: tuple
    offset: int = 0

    def view(self, base: torch.Tensor) -> torch.Tensor:
        return base.as_strided(self.size, self.stride, self.offset)


def strided(values: torch.Tensor, gen: torch.Generator, *, lead: int = 0, row_pad: int = 0,
            tail: int = 0, filler: torch.Tensor | None = None) -> Strided:
    """Places ``values`` (1-D or 2-D) at storage offset ``lead`` of a fresh base,
    with ``row_pad`` extra elements per row and ``tail`` elements after it. The
    padding is random garbage (``filler`` if given) that must never be read."""
    values = values.contiguous()
    if values.dim() == 0:  # a device scalar (e.g. vLLM's current_draft_step)
        size, stride, span = (), (), 1
    elif values.dim() == 1:
        size, stride, span = tuple(values.shape), (1,), values.numel()
    else:
        rows, cols = values.shape
        row_stride = cols + row_pad
        size, stride = (rows, cols), (row_stride, 1)
        span = (rows - 1) * row_stride + cols if rows > 0 else 0
    total = lead + span + tail
    base = garbage(total, values.dtype, gen) if filler is None else filler.expand(total).clone()
    s = Strided(base, size, stride, lead)
    s.view(base).copy_(values)
    return s


def garbage(n: int, dtype: torch.dtype, gen: torch.Generator) -> torch.Tensor:
    """Random values over the dtype's range (int64 capped at +-2**62), never all
    zeros: the poison of outputs and of padding that must not be read. Floating
    dtypes get random bit patterns (NaNs and infinities among them: the ops copy
    such values, bit for bit; :func:`compare` compares bits)."""
    if dtype.is_floating_point:
        return garbage(n, torch.int16 if dtype.itemsize == 2 else torch.int32, gen).view(dtype)
    info = torch.iinfo(dtype)
    lo, hi = max(info.min, -(2**62)), min(info.max, 2**62)
    return torch.randint(lo, hi, (n,), generator=gen, dtype=torch.int64).to(dtype)


@dataclass
class Case:
    """One call: ``args`` maps argument names to Strided (or list of Strided),
    scalars or None; ``outputs`` names the written arguments."""

    args: dict
    outputs: tuple
    note: str = ""
    extra: dict = field(default_factory=dict)  # strategy-specific facts (for events)

    def bases(self) -> dict:
        return {k: _map(v, lambda s: s.base) for k, v in self.args.items() if _has_tensor(v)}

    def materialize(self, device: str) -> tuple[dict, dict]:
        """Fresh copies of every base on ``device`` and the call's kwargs viewing them."""
        bases = {k: _map(v, lambda s: s.base.to(device, copy=True)) for k, v in self.args.items()
                 if _has_tensor(v)}
        kwargs = {}
        for k, v in self.args.items():
            if _has_tensor(v):
                kwargs[k] = _zip_map(v, bases[k], lambda s, b: s.view(b))
            else:
                kwargs[k] = v
        return kwargs, bases

    def run(self, fn: Callable[..., Any], device: str) -> dict:
        """fn(**kwargs) on fresh device copies; returns every base (moved to CPU)."""
        kwargs, bases = self.materialize(device)
        fn(**kwargs)
        return {k: _map(v, lambda b: b.cpu()) for k, v in bases.items()}

    def describe(self) -> str:
        parts = []
        for k, v in self.args.items():
            if isinstance(v, Strided):
                parts.append(f"{k}={_desc(v)}")
            elif isinstance(v, list):
                parts.append(f"{k}=[{', '.join(_desc(s) for s in v)}]")
            else:
                parts.append(f"{k}={v!r}")
        return (self.note + ": " if self.note else "") + ", ".join(parts)


def _desc(s: Strided) -> str:
    return f"{str(s.base.dtype)[6:]}{list(s.size)}/st{list(s.stride)}+{s.offset}"


def _has_tensor(v) -> bool:
    return isinstance(v, Strided) or (isinstance(v, list) and bool(v) and isinstance(v[0], Strided))


def _map(v, fn):
    return [fn(x) for x in v] if isinstance(v, list) else fn(v)


def _zip_map(v, w, fn):
    return [fn(x, y) for x, y in zip(v, w)] if isinstance(v, list) else fn(v, w)


def compare(case: Case, got: dict, want: dict, context: str) -> None:
    """Element-for-element (bit-for-bit) equality of every base; names the first difference."""
    for name in want:
        g_list, w_list = got[name], want[name]
        if not isinstance(w_list, list):
            g_list, w_list = [g_list], [w_list]
        for j, (g, w) in enumerate(zip(g_list, w_list)):
            g, w = bits(g), bits(w)
            if torch.equal(g, w):
                continue
            diff = (g != w).nonzero().flatten()
            at = int(diff[0])
            role = "output" if name in case.outputs else "input (must stay untouched)"
            label = f"{name}[{j}]" if isinstance(got[name], list) else name
            raise AssertionError(
                f"{context}: {role} {label} differs at {diff.numel()} of {w.numel()} base "
                f"elements; first at base[{at}]: got {g[at].item()}, want {w[at].item()}\n"
                f"case: {case.describe()}"
            )


def length_contract_error(case: Case, reference: Callable) -> Optional[str]:
    """The message the CPU reference raises when the call's lengths break the
    length contract (a length or a sum of lengths outside [0, 2**31 - 1]),
    else None. The strategies draw such lengths on purpose."""
    try:
        case.run(reference, "cpu")
    except RuntimeError as err:
        if str(err).startswith("sgl_meta."):
            return str(err)
        raise
    return None


def check_differential(case: Case, op: Callable, reference: Callable, device: str) -> None:
    """The op on ``device`` and the reference on CPU, from identical poisoned
    buffers, must leave every buffer identical; inputs must stay untouched.
    Lengths that break the length contract: on CPU the op must raise the
    reference's error and write nothing; on CUDA the call is not made (the op
    would trip a device assert: tests/test_hostile_lengths.py runs those)."""
    broken = length_contract_error(case, reference)
    if broken is not None:
        if device == "cpu":
            kwargs, bases = case.materialize("cpu")
            before = {k: _map(v, lambda b: b.clone()) for k, v in bases.items()}
            try:
                op(**kwargs)
            except RuntimeError as err:  # the same error (a drop-in names itself, not the op it wraps)
                assert str(err).split(": ", 1)[1] == broken.split(": ", 1)[1], \
                    f"op: {err}\nreference: {broken}\ncase: {case.describe()}"
            else:
                raise AssertionError(f"no error, the reference raised {broken}\ncase: {case.describe()}")
            compare(case, bases, before, "after a rejected call (nothing written)")
        return
    want = case.run(reference, "cpu")
    got = case.run(op, device)
    compare(case, got, want, f"{device} op vs CPU reference")
    inputs_before = {k: v for k, v in case.bases().items() if k not in case.outputs}
    compare(case, {k: got[k] for k in inputs_before}, inputs_before, "inputs after the op")


def outside_views_unchanged(case: Case, after: dict, before: dict, context: str) -> None:
    """Inputs entirely, and every output base element outside its view, are as
    before the call: a failed call may have written part of its outputs, but
    nothing outside them (the memory-safety half a test can see)."""
    for name, b in before.items():
        a = after[name]
        pairs = zip(a, b, case.args[name]) if isinstance(b, list) else [(a, b, case.args[name])]
        for got, want, s in pairs:
            got = got.cpu()
            if name in case.outputs:
                inside = torch.zeros(want.numel(), dtype=torch.bool)
                inside[torch.arange(want.numel()).as_strided(s.size, s.stride, s.offset).flatten()] = True
                got, want = got[~inside], want[~inside]
            if not torch.equal(bits(got), bits(want)):
                raise AssertionError(f"{context}: {name} changed outside what the op may write\n"
                                     f"case: {case.describe()}")
