"""vllm_prepare_decode_inputs and vllm_update_draft_inputs against vLLM 0.33's own
``_prepare_decode_inputs_kernel`` and ``_update_draft_inputs_kernel`` (run on CPU
by Triton's interpreter, tests/vllm_upstream.py) and the eager references,
outputs poisoned first; CUDA vs CPU and CUDA-graph replay."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import sgl_meta
import vllm_upstream
from helpers import TEST_CUDA, assert_same, capture_cuda_graph
from sgl_meta import reference
from vllm_cases import (DecodeInputsCase, DraftInputsCase, call_on_copies, clone_outputs, first_error,
                        make_decode_inputs, make_draft_inputs, storage_of, strided_copy, strided_to, to_device)

UP = vllm_upstream.load()
needs_upstream = pytest.mark.skipif(UP is None, reason=vllm_upstream.SKIP_REASON)

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


def test_numpy_scalars_are_taken_as_python_ones():
    """A numpy bool for a bool argument, as numpy integers for ints: the same writes."""
    gen = torch.Generator().manual_seed(4)
    args = make_decode_inputs(DecodeInputsCase(n=3, advance=True), gen)
    plain = {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in args.items()}
    numpy_args = {**args, "advance_draft_positions": np.bool_(args["advance_draft_positions"]),
                  "max_num_reqs": np.int64(args["max_num_reqs"])}
    sgl_meta.vllm_prepare_decode_inputs(**plain)
    sgl_meta.vllm_prepare_decode_inputs(**numpy_args)
    for k, v in plain.items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(v, numpy_args[k]), k
    with pytest.raises(TypeError, match="advance_draft_positions must be a bool, got numpy.float64"):
        sgl_meta.vllm_prepare_decode_inputs(**{**args, "advance_draft_positions": np.float64(1.0)})


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


# ---- vllm_update_draft_inputs -------------------------------------------------------

DRAFT_OUT = ("output_draft_tokens", "next_input_hidden_states", "input_ids", "positions", "seq_lens",
             "sample_src_positions")
DRAFT_CASES = [
    DraftInputsCase(),
    DraftInputsCase(n=0),
    DraftInputsCase(n=1, steps=1, step=0),  # one draft step: the token only
    DraftInputsCase(step=2),  # the last step: the token only
    DraftInputsCase(step=0, near_limit=True),  # the clamps
    DraftInputsCase(n=5, advance=False, near_limit=True),  # Gemma 4 MTP: positions and lengths stay
    DraftInputsCase(n=7, hidden=37, dtype=torch.float16, src_pad=3, dst_pad=5),  # odd rows: 2-byte words
    DraftInputsCase(n=4, hidden=4100, dtype=torch.float32, src_offset=1),  # past one pass of the block
    DraftInputsCase(n=3, steps=2, step=3, cols=5, out_pad=2),  # a step past the speculative steps: the token only
    DraftInputsCase(n=3, steps=4, step=1, cols=5, out_pad=2, draft_dtype=torch.int32, step_dtype=torch.int32,
                    step_shape=(1,)),
    DraftInputsCase(n=40, hidden=4096, max_model_len=2**31 - 1, near_limit=True),
    DraftInputsCase(n=2, hidden=0),
]


def _draft_id(c: DraftInputsCase) -> str:
    return f"n{c.n}s{c.step}of{c.steps}h{c.hidden}{str(c.dtype)[6:]}a{int(c.advance)}l{int(c.near_limit)}"


def _run_draft(fn, args: dict) -> dict:
    """``fn(**args)`` on copies of the outputs' whole storages; those storages after
    the call (an element written outside a view shows)."""
    kw = dict(args, **{k: strided_copy(args[k]) for k in DRAFT_OUT})
    fn(**kw)
    return {k: storage_of(kw[k]).cpu() for k in DRAFT_OUT}


def _up_draft(**kw):
    vllm_upstream.update_draft_inputs(UP, **kw)


@needs_upstream
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("case", DRAFT_CASES, ids=_draft_id)
def test_update_draft_inputs_equals_vllm_and_reference(case, seed):
    args = make_draft_inputs(case, torch.Generator().manual_seed(seed))
    got = _run_draft(sgl_meta.vllm_update_draft_inputs, args)
    assert_same(got, _run_draft(reference.vllm_update_draft_inputs, args), f"{case} vs reference")
    # vLLM's dtypes: int64 tokens and step (the kernel stores the token into int64 and int32 buffers)
    up = dict(args, draft_tokens=args["draft_tokens"].long(), current_draft_step=args["current_draft_step"].long())
    assert_same(got, _run_draft(_up_draft, up), f"{case} vs vLLM")


def test_update_draft_inputs_writes_what_the_formula_says():
    """The semantics written out, element by element, on one case."""
    case = DraftInputsCase(n=3, steps=4, step=1, hidden=5, dtype=torch.float32, max_model_len=100)
    args = make_draft_inputs(case, torch.Generator().manual_seed(4))
    args["positions"][:3] = torch.tensor([7, 98, 99])
    args["seq_lens"][:3] = torch.tensor([8, 99, 100], dtype=torch.int32)
    args["draft_tokens"][:] = torch.tensor([5, 2**32 + 6, -1])
    before = {k: storage_of(args[k]).clone() for k in DRAFT_OUT}
    sgl_meta.vllm_update_draft_inputs(**args)
    assert args["output_draft_tokens"][:3, 1].tolist() == [5, 2**32 + 6, -1]
    assert args["input_ids"][:3].tolist() == [5, 6, -1]
    assert args["positions"][:3].tolist() == [8, 99, 99]
    assert args["seq_lens"][:3].tolist() == [9, 100, 100]
    assert torch.equal(args["sample_src_positions"], before["sample_src_positions"] + (torch.arange(6) < 3))
    h = args["hidden_states"][:3].view(torch.int32)
    assert torch.equal(args["next_input_hidden_states"][:3].view(torch.int32), h)
    table = before["output_draft_tokens"].view(6, 4)
    assert torch.equal(args["output_draft_tokens"][:, [0, 2, 3]], table[:, [0, 2, 3]])
    assert torch.equal(args["output_draft_tokens"][3:], table[3:])


def test_update_draft_inputs_in_place_values_advance_once_per_call():
    args = make_draft_inputs(DraftInputsCase(n=3, max_model_len=10**6), torch.Generator().manual_seed(2))
    before = {k: args[k].clone() for k in ("sample_src_positions", "positions", "seq_lens")}
    sgl_meta.vllm_update_draft_inputs(**args)
    sgl_meta.vllm_update_draft_inputs(**args)
    for k, v in before.items():
        assert torch.equal(args[k][:3], v[:3] + 2), k
        assert torch.equal(args[k][3:], v[3:]), k


def test_update_draft_inputs_positional_call():
    args = make_draft_inputs(DraftInputsCase(n=4), torch.Generator().manual_seed(1))
    want = _run_draft(reference.vllm_update_draft_inputs, args)
    kw = dict(args, **{k: strided_copy(args[k]) for k in DRAFT_OUT})
    sgl_meta.vllm_update_draft_inputs(*kw.values())
    assert_same({k: storage_of(kw[k]) for k in DRAFT_OUT}, want, "positional")


@pytest.mark.parametrize("step", [-1, 3, 2**40])
@pytest.mark.parametrize("path", ["fast", "torch.ops"])
def test_update_draft_inputs_rejects_a_step_outside_the_table_before_writing(step, path, monkeypatch):
    from sgl_meta import _fast

    monkeypatch.setattr(_fast, "enabled", path == "fast")
    args = make_draft_inputs(DraftInputsCase(steps=3, step=step), torch.Generator().manual_seed(5))
    before = {k: storage_of(args[k]).clone() for k in DRAFT_OUT}
    err = first_error(sgl_meta.vllm_update_draft_inputs, **args)
    assert err == (f"sgl_meta.vllm_update_draft_inputs: current_draft_step = {step} is outside [0, 3) "
                   "(output_draft_tokens.size(1))"), err
    assert_same({k: storage_of(args[k]) for k in DRAFT_OUT}, before, "after a rejected call")
    ref_err = first_error(reference.vllm_update_draft_inputs, **args)
    assert ref_err == err


def test_update_draft_inputs_reads_no_step_without_requests():
    args = make_draft_inputs(DraftInputsCase(n=0, step=-5), torch.Generator().manual_seed(6))
    want = _run_draft(reference.vllm_update_draft_inputs, args)
    assert_same(_run_draft(sgl_meta.vllm_update_draft_inputs, args), want, "n = 0")


@pytest.mark.parametrize("edit,message", [
    ("hidden dtypes differ", "next_input_hidden_states must have the dtype of hidden_states (torch.bfloat16), "
                             "got torch.float16"),
    ("hidden float64", "hidden_states must have dtype bfloat16, float16 or float32"),
    ("next hidden too narrow", "next_input_hidden_states.size(1) must be >= hidden_states.size(1) = 64, got 63"),
    ("hidden rows short", "hidden_states.size(0) must be >= draft_tokens.size(0) = 6, got 5"),
    ("hidden column step", "hidden_states must have inner stride 1"),
    ("step of two elements", "current_draft_step must hold one element, got 2"),
    ("step float", "current_draft_step must have dtype int32 or int64"),
    ("draft_tokens 2-D", "draft_tokens must be 1-D, got 2-D"),
    ("output int32", "output_draft_tokens must have dtype int64"),
    ("output rows overlap", "output_draft_tokens rows overlap"),
    (dict(num_speculative_steps=0), "num_speculative_steps must be >= 1, got 0"),
    (dict(max_model_len=2**31), "max_model_len = 2147483648 is outside [1, 2147483647]"),
    ("next hidden is hidden", "next_input_hidden_states (written) and hidden_states (read) overlap in memory"),
    ("input_ids inside seq_lens", "overlap in memory (distinct outputs of one call must not alias)"),
    ("positions is the step", "positions (written) and current_draft_step (read) overlap in memory"),
])
def test_update_draft_inputs_bad_arguments_are_named(edit, message):
    args = make_draft_inputs(DraftInputsCase(), torch.Generator().manual_seed(3))
    edits = {
        "hidden dtypes differ": lambda a: a.update(next_input_hidden_states=a["next_input_hidden_states"].half()),
        "hidden float64": lambda a: a.update(hidden_states=a["hidden_states"].double()),
        "next hidden too narrow": lambda a: a.update(next_input_hidden_states=a["next_input_hidden_states"][:, :63]),
        "hidden rows short": lambda a: a.update(hidden_states=a["hidden_states"][:5]),
        "hidden column step": lambda a: a.update(hidden_states=a["hidden_states"].repeat(1, 2)[:, ::2]),
        "step of two elements": lambda a: a.update(current_draft_step=torch.tensor([1, 1])),
        "step float": lambda a: a.update(current_draft_step=torch.tensor(1.0)),
        "draft_tokens 2-D": lambda a: a.update(draft_tokens=a["draft_tokens"][:, None]),
        "output int32": lambda a: a.update(output_draft_tokens=a["output_draft_tokens"].int()),
        "output rows overlap": lambda a: a.update(output_draft_tokens=torch.zeros(3, dtype=torch.int64).expand(9, 3)),
        "next hidden is hidden": lambda a: a.update(next_input_hidden_states=a["hidden_states"]),
        "input_ids inside seq_lens": lambda a: a.update(input_ids=a["seq_lens"]),
        "positions is the step": lambda a: a.update(current_draft_step=a["positions"][:1].view(())),
    }
    if isinstance(edit, dict):
        args.update(edit)
    else:
        edits[edit](args)
    err = first_error(sgl_meta.vllm_update_draft_inputs, **args)
    assert err is not None and err.startswith("sgl_meta.vllm_update_draft_inputs: ") and message in err, err


def test_update_draft_inputs_opcheck(device):
    args = strided_to(make_draft_inputs(DraftInputsCase(n=5, hidden=24), torch.Generator().manual_seed(8)), device)
    op = torch.ops.sgl_meta.vllm_update_draft_inputs.default
    torch.library.opcheck(op, tuple(args[a.name] for a in op._schema.arguments))


def test_update_draft_inputs_torch_compile_fullgraph(device):
    """Traced with its fake (the mutations from the schema), run with the step of the moment."""
    args = strided_to(make_draft_inputs(DraftInputsCase(n=5, steps=4, hidden=24), torch.Generator().manual_seed(9)),
                      device)
    tensors = {k: v for k, v in args.items() if isinstance(v, torch.Tensor)}
    scalars = {k: v for k, v in args.items() if k not in tensors}

    @torch.compile(fullgraph=True, dynamic=False)
    def update(**kw):
        sgl_meta.vllm_update_draft_inputs(**kw, **scalars)

    torch._dynamo.reset()
    for step in (1, 3, 2):
        args["current_draft_step"].fill_(step)
        want = _run_draft(reference.vllm_update_draft_inputs, strided_to(args, "cpu"))
        update(**tensors)
        assert_same({k: storage_of(args[k]).cpu() for k in DRAFT_OUT}, want, f"torch.compile, step {step}")


@pytest.mark.gpu
@pytest.mark.parametrize("case", DRAFT_CASES, ids=_draft_id)
def test_update_draft_inputs_cuda_equals_cpu(case):
    for seed in range(3):
        args = make_draft_inputs(case, torch.Generator().manual_seed(seed))
        want = _run_draft(sgl_meta.vllm_update_draft_inputs, args)
        got = _run_draft(sgl_meta.vllm_update_draft_inputs, strided_to(args, TEST_CUDA))
        assert_same(got, want, f"{case} seed {seed}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize("hidden", [1, 3, 4, 8, 4096, 7168])
@pytest.mark.parametrize("offsets", [(0, 0), (1, 0), (0, 2), (4, 4)])
def test_update_draft_inputs_cuda_every_copy_word(dtype, hidden, offsets):
    """Rows whose addresses allow 16-, 8-, 4- or 2-byte words, one pass or more."""
    case = DraftInputsCase(n=5, hidden=hidden, dtype=dtype, src_offset=offsets[0], dst_offset=offsets[1],
                           src_pad=hidden % 3, dst_pad=1)
    args = make_draft_inputs(case, torch.Generator().manual_seed(hidden))
    want = _run_draft(reference.vllm_update_draft_inputs, args)
    assert_same(_run_draft(sgl_meta.vllm_update_draft_inputs, strided_to(args, TEST_CUDA)), want, str(case))


@pytest.mark.gpu
def test_update_draft_inputs_cuda_graph_replays_each_step():
    """The draft loop as vLLM runs it in one graph: current_draft_step changes
    between replays (fill_ outside the graph); each replay reads the step of the
    moment and writes its column, the last step its tokens only."""
    gen = torch.Generator().manual_seed(0)
    case = DraftInputsCase(n=48, steps=4, step=1, hidden=4096)
    host = make_draft_inputs(case, gen)
    args = strided_to(host, TEST_CUDA)
    graph = capture_cuda_graph(lambda: sgl_meta.vllm_update_draft_inputs(**args))
    for step in (1, 2, 3, 0, 3):
        new = make_draft_inputs(case, gen)
        for k in ("draft_tokens", "hidden_states", "positions", "seq_lens", "sample_src_positions"):
            args[k].copy_(new[k].to(TEST_CUDA))
        args["current_draft_step"].fill_(step)
        want = _run_draft(reference.vllm_update_draft_inputs, strided_to(args, "cpu"))
        graph.replay()
        torch.cuda.synchronize()
        assert_same({k: storage_of(args[k]).cpu() for k in DRAFT_OUT}, want, f"replay at step {step}")
