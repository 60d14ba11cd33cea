"""The length contract every op follows, as the references check it.

A length lies in ``[0, 2**31 - 1]`` (the range of the int32 length outputs); a
negative one, or one whose result (a length plus its offsets, a running sum of
lengths) does not fit, is an error. The ops raise ``RuntimeError`` on CPU and
trip a device assert on CUDA; the references raise the same ``RuntimeError``
(same message) on CPU, so they stay oracles for these inputs. On other devices
they check nothing: a check would read device values on the host, and the
references stay capturable.
"""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import torch

INT32_MAX = 2**31 - 1


def on_host(t: torch.Tensor) -> bool:
    return t.device.type == "cpu"


def fail(op: str, what: str, value, out: str = "") -> None:
    """Raises "sgl_meta.<op>: <what> = <value> is negative" or "... does not fit int32 <out>"."""
    why = "is negative" if isinstance(value, int) and value < 0 else f"does not fit int32{' ' + out if out else ''}"
    raise RuntimeError(f"sgl_meta.{op}: {what} = {value} {why}")


def fits(v: int) -> bool:
    return 0 <= v <= INT32_MAX


def check_length(op: str, what: str, v: int, out: str = "") -> None:
    if not fits(v):
        fail(op, what, v, out)


class RunningSum:
    """A running sum of lengths that must stay within int32: add() raises
    "<terms>[0..i] summed (<sum>[i + 1]) = v does not fit int32 <out>"."""

    def __init__(self, op: str, terms: str, sum_name: str, out: str = ""):
        self.op, self.terms, self.sum_name, self.out, self.total = op, terms, sum_name, out, 0

    def add(self, i: int, v: int) -> None:
        self.total += v
        if self.total > INT32_MAX:
            fail(self.op, f"{self.terms}[0..{i}] summed ({self.sum_name}[{i + 1}])", self.total, self.out)


def values(t: Optional[torch.Tensor], n: int) -> list:
    """The first n values of a 1-D tensor as Python ints (zeros for None)."""
    return [0] * n if t is None else [int(v) for v in t[:n].tolist()]


def check_trtllm_mha(op: str, *, seq_lens, bs: int, offsets: Sequence[int], seqlen_offsets=None,
                     qlens=None, q_cumsum: bool = False, multi: bool = False) -> None:
    """update_trtllm_mha_graph_metadata(_multi), in the CPU kernel's order: per
    row seq_lens, qlens and their running sum, then every set's cache length
    and its running sum."""
    if bs <= 0 or not on_host(seq_lens):
        return

    def of_set(name: str, s: int) -> str:
        return f"{name}[{s}]" if multi else name

    seq, row_off, q = values(seq_lens, bs), values(seqlen_offsets, bs), values(qlens if q_cumsum else None, bs)
    q_sum = RunningSum(op, "qlens", "cu_seqlens_q", "cu_seqlens_q")
    k_sums = [RunningSum(op, of_set("cache_seqlens", s), of_set("cu_seqlens_k", s), of_set("cu_seqlens_k", s))
              for s in range(len(offsets))]
    for i in range(bs):
        check_length(op, f"seq_lens[{i}]", seq[i], "cache_seqlens")
        if q_cumsum:
            check_length(op, f"qlens[{i}]", q[i], "cu_seqlens_q")
            q_sum.add(i, q[i])
        for s, off in enumerate(offsets):
            length = seq[i] + row_off[i] + off
            if fits(length):
                k_sums[s].add(i, length)
                continue
            what = f"seq_lens[{i}]" + (f" + seqlen_offsets[{i}]" if seqlen_offsets is not None else "")
            what += " + " + of_set("seqlen_offset", s)
            if -(2**63) <= length < 2**63:
                fail(op, what, length, of_set("cache_seqlens", s))
            # past int64 the kernel gives the terms (and their sign decides)
            raise RuntimeError(f"sgl_meta.{op}: {what} = {seq[i]} + {row_off[i]} + {off} "
                               + ("is negative" if row_off[i] < 0 else f"does not fit int32 {of_set('cache_seqlens', s)}"))


def check_rows(op: str, lengths: torch.Tensor, n: int, name: str,
               window: Optional[Callable[[int], int]] = None, window_what: str = "", window_out: str = "") -> None:
    """lengths[0..n) each in [0, 2**31 - 1] (``name[i] = v ...``), and, with
    `window`, window(v) too (``name[i] + <window_what> = w ... <window_out>``)."""
    if n <= 0 or not on_host(lengths):
        return
    for i, v in enumerate(values(lengths, n)):
        check_length(op, f"{name}[{i}]", v)
        if window is not None:
            check_length(op, f"{name}[{i}] + {window_what}", window(v), window_out)
