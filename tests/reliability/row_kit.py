"""Rows of the bad-input and hostile-value matrices, and the edits they apply
to the keyword arguments of a valid call (shared by every op's table)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch


@dataclass(frozen=True)
class Row:
    id: str
    op: str  # sgl_meta attribute called with the edited kwargs
    edit: Callable[[dict], None]
    names: tuple  # message substrings, besides the op name
    raises: tuple = (RuntimeError,)
    needs: str = "cpu"  # "cpu" or "cuda" (the row is skipped without a GPU)
    prefixed: bool = True  # message starts with "sgl_meta.<op>: "
    base: str = ""  # BASES key; default: the op name
    # A call that must pass is compared with sgl_meta.reference (matrix_worker.py
    # --compare); where the reference, which reads every column, cannot take a
    # hostile value the op must not read, this edit of the reference's copy
    # makes that value harmless. The op's output must then match anyway.
    oracle_edit: Callable[[dict], None] | None = None
    dispatcher: bool = False  # call torch.ops.sgl_meta.<op> (the dispatcher's path) instead


# ---- edits -------------------------------------------------------------------
def set_(**new):
    return lambda kw: kw.update(new)


def apply(name, fn):
    return lambda kw: kw.update({name: fn(kw[name])})


def at(name, index, value):
    """kw[name][index] = value (value first cast to the tensor's dtype)."""
    def edit(kw):
        kw[name][index] = value
    return edit


def hostile(op, id, edit, *names, raises=(RuntimeError,)):
    """A hostile-value row of ``op`` (id ``op/id``) whose message names ``names``."""
    return Row(id=f"{op}/{id}", op=op, edit=edit, names=names, raises=raises)


def derive(name, src, fn):
    """Adds argument `name` = fn(kw[src]) (a new optional input made from an
    existing one, so it lives on the base call's device)."""
    return lambda kw: kw.update({name: fn(kw[src])})


def drop(*names):
    def edit(kw):
        for n in names:
            kw.pop(n)
    return edit


def both(*edits):
    def edit(kw):
        for e in edits:
            e(kw)
    return edit


def to_device(device, *names):
    return lambda kw: kw.update({n: kw[n].to(device) for n in names})


def all_but(device, *keep):
    """Moves every tensor argument except `keep` to `device`."""
    def edit(kw):
        for k, v in list(kw.items()):
            if isinstance(v, torch.Tensor) and k not in keep:
                kw[k] = v.to(device)
    return edit


def overlapping_rows(t):
    """A view of t's shape whose rows overlap (row stride half the row)."""
    return t.as_strided(t.shape, (max(1, t.shape[1] // 2), 1))


def alias(name, onto, offset=0):
    """Makes `name` a view into `onto` (from element `offset` on, same shape as
    `name` had where `onto` is large enough; a 1-D view of a strided 2-D tensor
    takes its first row): two tensors of one call that share memory."""
    def edit(kw):
        src, dst = kw[name], kw[onto]
        if src.dim() == 1:
            flat = dst.reshape(-1) if dst.is_contiguous() else dst[0]
            n = min(src.numel(), flat.numel() - offset)
            kw[name] = flat[offset:offset + n]
        else:
            kw[name] = dst if dst.shape == src.shape else dst[: src.shape[0], : src.shape[1]]
    return edit
