"""The stand-in for SGLang's ``generate_draft_decode_kv_indices``
(sgl_meta/sglang/kernels.py): launched as SGLang's Triton and FlashInfer
multi-step draft backends launch the kernel, with FlashInfer's token blocks or without, it writes
what the kernel writes (SGLang's own kernel, interpreted, in a child process); every launch it
does not cover runs SGLang's kernel with the same arguments."""

from __future__ import annotations

import os

import pytest
import torch

from sgl_meta.sglang.kernels import DraftDecodeKvIndicesKernel
from helpers import interpreter_child
from stand_in_kit import Recorder


def _launch(gen, seqs=3, topk=2, steps=3, ps=16):
    r2t = torch.randint(0, 2**20, (6, 200), generator=gen, dtype=torch.int64).to(torch.int32)
    req = torch.randperm(6, generator=gen)[:seqs]
    lens = torch.randint(0, 100, (seqs,), generator=gen)
    positions = (lens + 1).repeat_interleave(topk)
    kv_indices = torch.full((steps, seqs * topk * 110), -7, dtype=torch.int64)
    kv_indptr = torch.zeros((steps, seqs * topk + 1), dtype=torch.int32)
    args = [req, r2t, lens, kv_indices, kv_indptr, positions, r2t.stride(0), kv_indices.shape[1],
            kv_indptr.shape[1], 4, 4, 8, ps, 0, 0]
    return (steps, seqs, topk), args


def test_launches_as_sglang_makes_them_equal_sglangs_kernel():
    pytest.importorskip("sglang.kernels.ops.speculative.cache_locs", reason="SGLang is not installed")
    pytest.importorskip("triton", reason="triton is not installed")
    seed = int(os.environ.get("SGLMETA_TEST_SEED", "0"))
    out = interpreter_child("sglang_plugin/draft_kv_indices_kernel_child.py", str(seed), "24", timeout=600)
    assert out.strip().endswith("ok 24"), out


def test_covered_launch_runs_ours(gen):
    grid, args = _launch(gen)
    sglang = Recorder()
    DraftDecodeKvIndicesKernel.bind(sglang)[grid](*args)
    assert sglang.launches == []
    kv_indices, kv_indptr, lens = args[3], args[4], args[2]
    assert kv_indptr[0, 1] == int(lens[0]) + 1 + 1  # positions[0] + 1 draft token
    assert kv_indices[0, 0] == args[1][args[0][0], 0]


@pytest.mark.parametrize("blocks", [1, 3])
def test_token_block_launches_run_ours(blocks, gen):
    """FlashInfer's token-block launch (NUM_STEPS > 0, grid[0] = NUM_STEPS * blocks) writes what the launch
    without token blocks writes."""
    grid, args = _launch(gen)
    want = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    DraftDecodeKvIndicesKernel.bind(Recorder())[grid](*want)
    sglang = Recorder()
    DraftDecodeKvIndicesKernel.bind(sglang)[(grid[0] * blocks, grid[1], grid[2])](*args, NUM_STEPS=grid[0])
    assert sglang.launches == []
    assert torch.equal(args[3], want[3]) and torch.equal(args[4], want[4])


@pytest.mark.parametrize("change", ["translate", "v2p", "entry_pages", "grid_2d", "callable_grid",
                                    "blocks_below_steps", "negative_num_steps", "negative_seqs", "steps_65", "topk_0", "topk_1025",
                                    "bounds_not_powers_of_two", "page_size_0", "req_0d", "kv_indices_int16",
                                    "req_to_token_int64", "row_stride_tensor", "indices_stride_float",
                                    "blocks_ragged",
                                    "row_stride", "indices_stride", "indptr_stride", "bs_upper", "iter_upper",
                                    "tokens_upper", "few_rows", "not_tensor"])
def test_uncovered_launches_run_sglangs_kernel(change, gen):
    grid, args = _launch(gen)
    kwargs = {}
    if change == "translate":
        kwargs = dict(TRANSLATE=True)
    elif change == "v2p":
        kwargs = dict(v2p=torch.arange(10))
    elif change == "entry_pages":
        kwargs = dict(ENTRY_PAGE_SIZE=16)
    elif change == "grid_2d":
        grid = grid[:2]
    elif change == "callable_grid":
        grid = lambda meta: (3, 3, 2)  # noqa: E731
    elif change == "blocks_below_steps":  # no whole token block per step
        grid, kwargs = (grid[0] - 1, grid[1], grid[2]), dict(NUM_STEPS=grid[0])
    elif change == "negative_num_steps":
        kwargs = dict(NUM_STEPS=-grid[0])
    elif change == "negative_seqs":  # SGLang's kernel launches no program
        grid = (grid[0], -1, grid[2])
    elif change == "steps_65":  # past what the op takes; SGLang's kernel runs it
        grid = (65, grid[1], grid[2])
    elif change == "topk_0":
        grid = (grid[0], grid[1], 0)
    elif change == "topk_1025":
        grid = (grid[0], grid[1], 1025)
    elif change == "bounds_not_powers_of_two":  # SGLang's kernel refuses to compile them
        args[9], args[10], args[11] = 3, 3, 6
    elif change == "page_size_0":
        args[12] = 0
    elif change == "req_0d":
        args[0] = args[0][0]
    elif change == "kv_indices_int16":
        args[3] = args[3].to(torch.int16)
    elif change == "req_to_token_int64":
        args[1] = args[1].long()
    elif change == "row_stride_tensor":
        args[6] = torch.tensor(args[6])
    elif change == "indices_stride_float":
        args[7] = float(args[7])
    elif change == "blocks_ragged":
        grid, kwargs = (grid[0] * 2 + 1, grid[1], grid[2]), dict(NUM_STEPS=grid[0])
    elif change == "row_stride":
        args[6] -= 1
    elif change == "indices_stride":
        args[7] = 5
    elif change == "indptr_stride":
        args[8] = 3
    elif change == "bs_upper":
        args[9] = 2
    elif change == "iter_upper":
        args[10] = 2
    elif change == "tokens_upper":
        args[11] = 4
    elif change == "few_rows":
        args[3] = args[3][:2]
        args[7] = args[3].stride(0)
    elif change == "not_tensor":
        args[0] = args[0].tolist()
    sglang = Recorder()
    before = args[3].clone()
    DraftDecodeKvIndicesKernel.bind(sglang)[grid](*args, **kwargs)
    assert len(sglang.launches) == 1
    got_grid, got_args, got_kwargs = sglang.launches[0]
    assert got_grid is grid and list(got_args) == args and got_kwargs == kwargs
    assert torch.equal(args[3], before)


def test_launch_options_run_sglangs_kernel(gen):
    grid, args = _launch(gen)
    sglang = Recorder()
    DraftDecodeKvIndicesKernel.bind(sglang)[grid](*args, num_warps=4)
    assert len(sglang.launches) == 1 and sglang.launches[0][2] == {"num_warps": 4}


def test_a_window_of_zero_or_less_is_none(gen):
    """SGLang's kernel reads window_size > 0 as a window: -1 (and its sinks) is no window."""
    grid, args = _launch(gen)
    none = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    DraftDecodeKvIndicesKernel.bind(Recorder())[grid](*none)
    args[13], args[14] = -1, 5
    sglang = Recorder()
    DraftDecodeKvIndicesKernel.bind(sglang)[grid](*args)
    assert sglang.launches == [] and torch.equal(args[3], none[3]) and torch.equal(args[4], none[4])


def test_covered_launch_with_a_hostile_length_names_the_op(gen):
    grid, args = _launch(gen)
    args[2][1] = 500  # past the req_to_token row (SGLang's kernel would read the next row)
    with pytest.raises(RuntimeError, match=r"sgl_meta\.build_draft_decode_kv_indices: request 1 .* reads past"):
        DraftDecodeKvIndicesKernel.bind(Recorder())[grid](*args)


def test_bound_class_keeps_the_name_and_wraps_sglangs_kernel():
    sglang = Recorder()
    bound = DraftDecodeKvIndicesKernel.bind(sglang)
    assert issubclass(bound, DraftDecodeKvIndicesKernel) and bound.__wrapped__ is sglang
    assert (bound.__module__, bound.__qualname__) == ("sgl_meta.sglang.kernels", "DraftDecodeKvIndicesKernel")


def test_signature_is_sglangs_kernels():
    """The check the plugin makes before it replaces the kernel (hooks.Hook.resolve)."""
    cache_locs = pytest.importorskip("sglang.kernels.ops.speculative.cache_locs", reason="SGLang is not installed")
    from sgl_meta.sglang.hooks import signature_mismatch

    kernel = cache_locs.generate_draft_decode_kv_indices
    assert signature_mismatch(getattr(kernel, "fn", kernel), DraftDecodeKvIndicesKernel) is None
