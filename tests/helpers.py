"""Shared test helpers: poisoning, comparing, running an op on cloned outputs."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch


_BITS = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}


def bits(t: torch.Tensor) -> torch.Tensor:
    """``t`` as its bit patterns when floating (a NaN equals itself), else ``t``."""
    return t.view(_BITS[t.dtype]) if t.dtype.is_floating_point else t


def poison_like(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Random garbage of t's shape, dtype and device (never zeros): an element
    a kernel forgets to write, or writes when it should not, shows as a diff.
    Floating dtypes get random bit patterns (NaNs among them: compare with
    :func:`assert_same`, which compares bits)."""
    if t.dtype.is_floating_point:
        return poison_like(torch.empty(t.shape, dtype=_BITS[t.dtype], device=t.device), gen).view(t.dtype)
    info = torch.iinfo(t.dtype)
    lo, hi = max(info.min, -(2**31)), min(info.max, 2**31 - 1)
    return torch.randint(lo, hi, t.shape, generator=gen, dtype=torch.int64).to(t.dtype).to(t.device)


def poison_(t: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    return t.copy_(poison_like(t, gen))


def run_on_copies(fn, inputs: dict, outputs: dict, scalars: dict) -> dict:
    """Run fn(**inputs, **copies of outputs, **scalars); return the copies."""
    outs = {k: (None if v is None else v.clone()) for k, v in outputs.items()}
    fn(**inputs, **outs, **scalars)
    return outs


def assert_same(got: dict, want: dict, context: str = "") -> None:
    for name, w in want.items():
        g = got[name]
        if w is None:
            assert g is None
            continue
        g, w = bits(g.cpu()), bits(w.cpu())
        if not torch.equal(g, w):
            diff = (g != w).nonzero()
            first = tuple(diff[0].tolist())
            raise AssertionError(
                f"{context}: {name} differs at {diff.shape[0]} of {w.numel()} elements; "
                f"first at {first}: got {g[first].item()}, want {w[first].item()}"
            )


def assert_sets(got: list, want: list, context: str = "") -> None:
    """assert_same for each of a list of destination sets."""
    assert len(got) == len(want), (context, len(got), len(want))
    for i, (g, w) in enumerate(zip(got, want)):
        assert_same(g, w, f"{context} [set {i}]")


# The CUDA device the GPU tests put their tensors on: "cuda" (the current one),
# or e.g. SGLMETA_TEST_CUDA=cuda:1 on a two-GPU machine, to run the suite with
# the op tests' tensors on device 1 while device 0 stays current (tensor-parallel
# ranks see several GPUs). The `device` fixture hands it out; the CUDA-graph
# tests build their tensors on it and capture_cuda_graph captures on it.
TEST_CUDA = os.environ.get("SGLMETA_TEST_CUDA", "cuda")


def map_tensors(kw: dict, fn) -> dict:
    """``kw`` with ``fn`` applied to every tensor value and every tensor of a list value."""
    return {k: fn(v) if isinstance(v, torch.Tensor)
            else [fn(t) for t in v] if isinstance(v, list) and v and isinstance(v[0], torch.Tensor)
            else v for k, v in kw.items()}


def on_device(kw: dict, device) -> dict:
    return map_tensors(kw, lambda t: t.to(device))


def on_cuda(kw: dict) -> dict:
    """A call's tensors on the test GPU (TEST_CUDA)."""
    return on_device(kw, TEST_CUDA)


def capture_cuda_graph(call, device=None) -> "torch.cuda.CUDAGraph":
    """Warm `call` up on a side stream (as capture requires), then capture it,
    with `device` current (default TEST_CUDA); the caller's current device is
    current again afterwards, also for replays (a graph replays on its own)."""
    with torch.cuda.device(torch.device(device or TEST_CUDA)):
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            call()
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            call()
    return graph


@contextlib.contextmanager
def triton_interpreter():
    """TRITON_INTERPRET=1 for the duration (Triton reads it when it decorates a
    kernel, and in imports it makes on a first launch), then as it was."""
    previous = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    try:
        yield
    finally:
        if previous is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = previous


def interpreter_child(script, *args: str, timeout: int = 900) -> str:
    """Run ``script`` (tests/<name>.py) with ``args`` in a fresh interpreter with
    TRITON_INTERPRET=1, from the repository root; its stdout, or fail with its output."""
    here = Path(__file__).resolve().parent
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    proc = subprocess.run([sys.executable, str(here / script), *args], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=str(here.parent))
    if proc.returncode != 0:
        skip_on_interpreter_defect(proc.stderr)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def skip_on_interpreter_defect(stderr: str) -> None:
    """Skip the calling test where a child running upstream Triton kernels interpreted
    failed on Triton 3.6's interpreter under NumPy 2.4 and later: it turns a program-id
    value into a Python int with int(ndarray) (range() bounds in a kernel), which those
    NumPy versions refuse for one-element arrays; Triton 3.8's interpreter does not."""
    if "only 0-dimensional arrays can be converted to Python scalars" in stderr and "triton/runtime/interpreter" in stderr:
        import numpy
        import triton

        pytest.skip(f"triton {triton.__version__}'s interpreter cannot run the upstream kernels under numpy "
                    f"{numpy.__version__} (int() of a one-element array)")


def around_hooks() -> dict:
    """The SGLang plugin's AROUND rows: ``{target: (replacement, "AROUND")}``, what a
    module's hook-table test checks its own rows against."""
    from sgl_meta.sglang.hooks import HOOKS, load

    return {h.target: (load(h.replacement), h.kind) for h in HOOKS if h.kind == "AROUND"}
