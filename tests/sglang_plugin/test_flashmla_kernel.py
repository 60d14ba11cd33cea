"""The stand-in for SGLang's ``create_flashmla_kv_indices_triton``
(sgl_meta/sglang/kernels.py): launched as SGLang's FlashMLA and TRT-LLM MLA
backends launch the kernel, it writes what the kernel writes (SGLang's own
kernel, interpreted, in a child process); every launch it does not cover runs
SGLang's kernel with the same arguments. (test_call_sites.py checks the target,
its signature and every call site in the installed SGLang.)"""

from __future__ import annotations

import os

import pytest
import torch

from sgl_meta.sglang.kernels import FlashmlaKvIndicesKernel
from helpers import interpreter_child
from stand_in_kit import Recorder


def _launch_args(gen, bs=3, width=10, ps=64):
    r2t = torch.randint(0, 2**20, (6, width * ps), generator=gen, dtype=torch.int64).to(torch.int32)
    req = torch.randperm(6, generator=gen)[:bs]
    lens = torch.randint(0, width * ps + 1, (bs,), generator=gen, dtype=torch.int64).to(torch.int32)
    out = torch.full((bs, width), -7, dtype=torch.int32)
    return r2t, req, lens, out


def test_launches_as_sglang_makes_them_equal_sglangs_kernel():
    pytest.importorskip("sglang.kernels.ops.attention.kv_indices", reason="SGLang is not installed")
    seed = int(os.environ.get("SGLMETA_TEST_SEED", "0"))
    out = interpreter_child("sglang_plugin/flashmla_kernel_child.py", str(seed), "24", timeout=600)
    assert out.strip().endswith("ok 24"), out


def test_covered_launch_runs_ours(gen):
    r2t, req, lens, out = _launch_args(gen)
    sglang = Recorder()
    FlashmlaKvIndicesKernel.bind(sglang)[(3, 1)](r2t, req, lens, None, out, r2t.stride(0), 10, PAGED_SIZE=64)
    assert sglang.launches == []
    for i in range(3):
        n = (int(lens[i]) + 63) // 64
        want = r2t[req[i], : n * 64 : 64] // 64
        assert torch.equal(out[i, :n], want) and bool((out[i, n:] == -7).all()), i


@pytest.mark.parametrize("change", ["grid_rows", "grid_cols", "grid_z", "callable_grid", "table_stride",
                                    "out_stride", "page_not_pow2", "page_past_cta", "not_tensor"])
def test_uncovered_launches_run_sglangs_kernel(change, gen):
    r2t, req, lens, out = _launch_args(gen)
    grid, page = (3, 1), 64
    stride_in, stride_out = r2t.stride(0), 10
    if change == "grid_rows":
        grid = (2, 1)
    elif change == "grid_cols":
        r2t, req, lens, out = _launch_args(gen, width=100)  # 100 pages need 2 CTAs of 64
        stride_in, stride_out = r2t.stride(0), 100
    elif change == "grid_z":
        grid = (3, 1, 2)
    elif change == "callable_grid":
        grid = lambda meta: (3, 1)  # noqa: E731
    elif change == "table_stride":
        stride_in = r2t.stride(0) - 64
    elif change == "out_stride":
        stride_out = 5
    elif change == "page_not_pow2":
        page = 48
    elif change == "page_past_cta":
        page = 8192
    elif change == "not_tensor":
        req = req.tolist()
    sglang = Recorder()
    before = out.clone()
    args = (r2t, req, lens, None, out, stride_in, stride_out)
    FlashmlaKvIndicesKernel.bind(sglang)[grid](*args, PAGED_SIZE=page)
    assert len(sglang.launches) == 1
    got_grid, got_args, got_kwargs = sglang.launches[0]
    assert got_grid is grid and got_args == args and got_kwargs == {"PAGED_SIZE": page}
    assert torch.equal(out, before)


def test_covered_launch_with_a_wrong_dtype_names_the_op_and_argument(gen):
    r2t, req, lens, out = _launch_args(gen)
    sglang = Recorder()
    with pytest.raises(RuntimeError, match=r"sgl_meta\.create_flashmla_kv_indices: kv_indices must have dtype int32"):
        FlashmlaKvIndicesKernel.bind(sglang)[(3, 1)](r2t, req, lens, None, out.to(torch.int64), r2t.stride(0), 10)
    assert sglang.launches == []


def test_unbound_stand_in_names_the_launch_it_cannot_take(gen):
    r2t, req, lens, out = _launch_args(gen)
    with pytest.raises(RuntimeError, match=r"FlashmlaKvIndicesKernel does not cover the launch \(2, 1\)"):
        FlashmlaKvIndicesKernel[(2, 1)](r2t, req, lens, None, out, r2t.stride(0), 10)


def test_bound_class_keeps_the_name_the_plugin_reports():
    bound = FlashmlaKvIndicesKernel.bind(Recorder())
    assert issubclass(bound, FlashmlaKvIndicesKernel) and bound is not FlashmlaKvIndicesKernel
    assert (bound.__module__, bound.__qualname__) == ("sgl_meta.sglang.kernels", "FlashmlaKvIndicesKernel")
