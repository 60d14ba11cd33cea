"""vllm_copy_page_indices against vLLM 0.33's own ``_copy_page_indices_kernel``
(run on CPU by Triton's interpreter, tests/vllm_upstream.py) and the eager
reference, outputs poisoned first; hostile values; CUDA vs CPU and CUDA-graph
replay."""

from __future__ import annotations

import pytest
import torch

import sgl_meta
import vllm_upstream
from helpers import TEST_CUDA, assert_same, capture_cuda_graph
from sgl_meta import reference
from vllm_cases import CopyPagesCase, call_on_copies, first_error, make_copy_pages, to_device

UP = vllm_upstream.load()
needs_upstream = pytest.mark.skipif(UP is None, reason=vllm_upstream.SKIP_REASON)

OUT = ("page_indices",)
CASES = [
    CopyPagesCase(),
    CopyPagesCase(n=0),
    CopyPagesCase(n=1, width=1, empty_rows=0),
    CopyPagesCase(n=1, width=3000, empty_rows=0),  # a row longer than a pass of the CUDA block
    CopyPagesCase(n=40, width=33, empty_rows=5, extra_rows=0, tail=0),
    CopyPagesCase(n=9, width=600, cu_dtype=torch.int64),
]


def _run(fn, args):
    return call_on_copies(fn, args, OUT)


def _up(**kw):
    vllm_upstream.copy_page_indices(UP, **kw)


@needs_upstream
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"n{c.n}w{c.width}")
def test_equals_vllm_and_reference(case, seed):
    args = make_copy_pages(case, torch.Generator().manual_seed(seed))
    got = _run(sgl_meta.vllm_copy_page_indices, args)
    assert_same(got, _run(reference.vllm_copy_page_indices, args), f"{case} vs reference")
    assert_same(got, _run(_up, dict(args, cu_num_blocks=args["cu_num_blocks"].int())), f"{case} vs vLLM")


def test_positional_call_and_untouched_tail():
    args = make_copy_pages(CopyPagesCase(n=5, tail=7), torch.Generator().manual_seed(3))
    before = args["page_indices"].clone()
    sgl_meta.vllm_copy_page_indices(args["page_indices"], args["block_table"], args["cu_num_blocks"])
    end = int(args["cu_num_blocks"][-1])
    assert torch.equal(args["page_indices"][end:], before[end:])
    for r in range(5):
        s, e = int(args["cu_num_blocks"][r]), int(args["cu_num_blocks"][r + 1])
        assert torch.equal(args["page_indices"][s:e], args["block_table"][r, : e - s])


def test_strided_block_table_rows():
    args = make_copy_pages(CopyPagesCase(n=6, width=20), torch.Generator().manual_seed(4))
    wide = torch.zeros(args["block_table"].shape[0], 50, dtype=torch.int32)
    wide[:, 7:27] = args["block_table"]
    got = _run(sgl_meta.vllm_copy_page_indices, dict(args, block_table=wide[:, 7:27]))
    assert_same(got, _run(reference.vllm_copy_page_indices, args), "strided rows")


@pytest.mark.parametrize("edit,message", [
    (lambda a: a["cu_num_blocks"].__setitem__(2, 0), "must be non-negative, non-decreasing"),
    (lambda a: a["cu_num_blocks"].__setitem__(0, -1), "cu_num_blocks[0] = -1"),
    (lambda a: a["cu_num_blocks"].__setitem__(-1, 10**6), "within page_indices"),
    (lambda a: a["cu_num_blocks"].__setitem__(slice(1, None), 17), "span at most block_table.size(1) = 16"),
])
def test_hostile_cu_num_blocks_raise_before_writing(edit, message):
    args = make_copy_pages(CopyPagesCase(n=6, width=16, empty_rows=0), torch.Generator().manual_seed(5))
    edit(args)
    before = args["page_indices"].clone()
    err = first_error(sgl_meta.vllm_copy_page_indices, **args)
    assert err is not None and "vllm_copy_page_indices" in err and message in err, err
    assert torch.equal(args["page_indices"], before)


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"n{c.n}w{c.width}")
def test_cuda_equals_cpu(case):
    for seed in range(3):
        args = make_copy_pages(case, torch.Generator().manual_seed(seed))
        want = _run(sgl_meta.vllm_copy_page_indices, args)
        got = _run(sgl_meta.vllm_copy_page_indices, to_device(args, TEST_CUDA))
        assert_same(got, want, f"{case} seed {seed}")


@pytest.mark.gpu
def test_cuda_graph_replays_new_values():
    gen = torch.Generator().manual_seed(0)
    case = CopyPagesCase(n=32, width=64, tail=0)
    args = to_device(make_copy_pages(case, gen), TEST_CUDA)
    args["page_indices"] = torch.zeros(32 * 64, dtype=torch.int32, device=TEST_CUDA)
    graph = capture_cuda_graph(lambda: sgl_meta.vllm_copy_page_indices(**args))
    for _ in range(4):  # new tables and block counts, same batch size
        new = make_copy_pages(case, gen)
        args["block_table"].copy_(new["block_table"])
        args["cu_num_blocks"].copy_(new["cu_num_blocks"])
        args["page_indices"].copy_(torch.randint(-(2**31), 2**31 - 1, (32 * 64,), generator=gen, dtype=torch.int32))
        want = _run(reference.vllm_copy_page_indices, to_device(args, "cpu"))
        graph.replay()
        torch.cuda.synchronize()
        assert_same({k: args[k] for k in OUT}, want, "replay")
