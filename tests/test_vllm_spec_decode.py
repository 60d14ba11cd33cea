"""vllm_prepare_decode_inputs against vLLM 0.33's own ``_prepare_decode_inputs_kernel``
(run on CPU by Triton's interpreter, tests/vllm_upstream.py) and the eager
reference, outputs poisoned first; CUDA vs CPU and CUDA-graph replay."""

from __future__ import annotations

import pytest
import torch

import sgl_meta
import vllm_upstream
from helpers import TEST_CUDA, assert_same, capture_cuda_graph
from sgl_meta import reference
from vllm_cases import DecodeInputsCase, call_on_copies, clone_outputs, first_error, make_decode_inputs, to_device

UP = vllm_upstream.load()
needs_upstream = pytest.mark.skipif(UP is None, reason="vLLM 0.33 sources or Triton not found")

OUT = ("input_ids", "positions", "sample_src_positions", "query_start_loc", "seq_lens")
CASES = [
    DecodeInputsCase(),
    DecodeInputsCase(n=0),
    DecodeInputsCase(n=1, max_num_reqs=1, steps=1),
    DecodeInputsCase(n=7, near_limit=True),
    DecodeInputsCase(n=5, advance=False, near_limit=True),
    DecodeInputsCase(n=300, max_num_reqs=512, draft_dtype=torch.int32, lens_dtype=torch.int64),
]


def _run(fn, args):
    return call_on_copies(fn, args, OUT)


def _up(**kw):
    vllm_upstream.prepare_decode_inputs(UP, **kw)


@needs_upstream
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"n{c.n}r{c.max_num_reqs}a{int(c.advance)}l{int(c.near_limit)}")
def test_equals_vllm_and_reference(case, seed):
    args = make_decode_inputs(case, torch.Generator().manual_seed(seed))
    got = _run(sgl_meta.vllm_prepare_decode_inputs, args)
    assert_same(got, _run(reference.vllm_prepare_decode_inputs, args), f"{case} vs reference")
    up = dict(args, draft_tokens=args["draft_tokens"].long(), target_seq_lens=args["target_seq_lens"].int(),
              num_rejected=args["num_rejected"].int())
    assert_same(got, _run(_up, up), f"{case} vs vLLM")


def test_one_d_draft_tokens_and_positional_call():
    args = make_decode_inputs(DecodeInputsCase(n=4), torch.Generator().manual_seed(1))
    want = _run(reference.vllm_prepare_decode_inputs, args)
    kw = clone_outputs(dict(args, draft_tokens=args["draft_tokens"][:, 0].contiguous()), OUT)
    sgl_meta.vllm_prepare_decode_inputs(*kw.values())
    assert_same({k: kw[k] for k in OUT}, want, "1-D draft tokens")


@pytest.mark.parametrize("n", [1, 2, 6])
def test_strided_draft_columns_as_vllm_passes_them(n):
    """Column 0 of vLLM's [max_num_reqs, steps] buffer (a strided 1-D view), and a
    transposed 2-D buffer: read through stride(0) alone."""
    args = make_decode_inputs(DecodeInputsCase(n=n, steps=4), torch.Generator().manual_seed(n))
    want = _run(reference.vllm_prepare_decode_inputs, args)
    column = args["draft_tokens"][:, 0]
    assert n == 1 or not column.is_contiguous()
    assert_same(_run(sgl_meta.vllm_prepare_decode_inputs, dict(args, draft_tokens=column)), want, "column view")
    transposed = args["draft_tokens"].t().contiguous().t()
    assert_same(_run(sgl_meta.vllm_prepare_decode_inputs, dict(args, draft_tokens=transposed)), want, "transposed")
    if UP is not None:
        assert_same(_run(_up, dict(args, draft_tokens=column)), want, "vLLM on the column view")


def test_an_output_over_a_strided_draft_element_is_refused():
    buf = torch.zeros(6, 4, dtype=torch.int64)
    args = make_decode_inputs(DecodeInputsCase(n=6), torch.Generator().manual_seed(9))
    args["draft_tokens"] = buf[:, 0]
    args["positions"] = buf.view(-1)[4:12]  # elements 4 and 8: rows 1 and 2 of the column
    err = first_error(sgl_meta.vllm_prepare_decode_inputs, **args)
    assert err is not None and "overlap in memory" in err, err


def test_in_place_values_advance_once_per_call():
    args = make_decode_inputs(DecodeInputsCase(n=3, max_model_len=10**6), torch.Generator().manual_seed(2))
    before = args["sample_src_positions"].clone(), args["positions"].clone()
    sgl_meta.vllm_prepare_decode_inputs(**args)
    sgl_meta.vllm_prepare_decode_inputs(**args)
    assert torch.equal(args["sample_src_positions"][:3], before[0][:3] + 2)
    assert torch.equal(args["positions"][:3], before[1][:3] + 2)
    assert torch.equal(args["positions"][3:], before[1][3:])


@pytest.mark.parametrize("edit,message", [
    (dict(max_num_reqs=3), "max_num_reqs must be >= draft_tokens.size(0) = 6, got 3"),
    (dict(max_model_len=0), "max_model_len = 0 is outside [1, 2147483647]"),
    ("seq_lens short", "seq_lens.size(0) must be >= max_num_reqs = 10"),
    ("positions int32", "positions must have dtype int64"),
    ("input_ids is seq_lens", "overlap in memory"),
])
def test_bad_arguments_are_named(edit, message):
    args = make_decode_inputs(DecodeInputsCase(), torch.Generator().manual_seed(3))
    if edit == "seq_lens short":
        args["seq_lens"] = args["seq_lens"][:9]
    elif edit == "positions int32":
        args["positions"] = args["positions"].int()
    elif edit == "input_ids is seq_lens":
        args["input_ids"] = args["seq_lens"]
    else:
        args.update(edit)
    err = first_error(sgl_meta.vllm_prepare_decode_inputs, **args)
    assert err is not None and "vllm_prepare_decode_inputs" in err and message in err, err


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"n{c.n}r{c.max_num_reqs}a{int(c.advance)}l{int(c.near_limit)}")
def test_cuda_equals_cpu(case):
    for seed in range(3):
        args = make_decode_inputs(case, torch.Generator().manual_seed(seed))
        want = _run(sgl_meta.vllm_prepare_decode_inputs, args)
        got = _run(sgl_meta.vllm_prepare_decode_inputs, to_device(args, TEST_CUDA))
        assert_same(got, want, f"{case} seed {seed}")


@pytest.mark.gpu
def test_cuda_graph_replays_new_values():
    gen = torch.Generator().manual_seed(0)
    case = DecodeInputsCase(n=48, max_num_reqs=64)
    args = to_device(make_decode_inputs(case, gen), TEST_CUDA)
    graph = capture_cuda_graph(lambda: sgl_meta.vllm_prepare_decode_inputs(**args))
    for _ in range(4):  # new drafts, lengths and rejections; each replay advances the in-place values once
        new = make_decode_inputs(case, gen)
        for k in ("draft_tokens", "target_seq_lens", "num_rejected", "positions", "sample_src_positions"):
            args[k].copy_(new[k])
        want = _run(reference.vllm_prepare_decode_inputs, to_device(args, "cpu"))
        graph.replay()
        torch.cuda.synchronize()
        assert_same({k: args[k] for k in OUT}, want, "replay")
