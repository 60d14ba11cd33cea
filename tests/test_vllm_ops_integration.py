"""The vllm_* ops through every calling path: the eager fast path and
torch.ops (same results, same errors), torch.library.opcheck, and
torch.compile(fullgraph=True), on CPU and (marked gpu) CUDA."""

from __future__ import annotations

import pytest
import torch

import sgl_meta
from helpers import assert_same
from sgl_meta import reference
from test_vllm_block_table import _flat, run_all
from vllm_cases import (CombineCase, StepCase, clone_outputs, first_error, gather_args, make_combine, make_step,
                        pos_args, prepare_step_args, slot_args, to_device)

STEP = StepCase(n=6, groups=3, no_request_rows=1, pad_rows=2)


def _calls():
    step = make_step(STEP, torch.Generator().manual_seed(7))
    combine = make_combine(CombineCase(n=6), torch.Generator().manual_seed(7))
    return [
        ("vllm_compute_slot_mappings", slot_args(step), ("slot_mappings",)),
        ("vllm_gather_block_tables", gather_args(step), ("dst_block_tables",)),
        ("vllm_prepare_pos_seq_lens", pos_args(step), ("pos", "seq_lens")),
        ("vllm_prepare_step", prepare_step_args(step), ("pos", "seq_lens", "dst_block_tables", "slot_mappings")),
        ("vllm_combine_sampled_and_draft_tokens", combine, ("input_ids", "logits_indices")),
    ]


NAMES = [c[0] for c in _calls()]


def _call(name, device):
    for n, args, outs in _calls():
        if n == name:
            return to_device(args, device), outs
    raise KeyError(name)


@pytest.mark.usefixtures("call_path")
@pytest.mark.parametrize("name", NAMES)
def test_both_call_paths_equal_the_reference(name, device):
    args, outs = _call(name, device)
    got, want, _ = run_all(args, outs, getattr(sgl_meta, name), getattr(reference, name))
    assert_same(got, want, name)


@pytest.mark.usefixtures("call_path")
def test_both_call_paths_raise_the_same_errors():
    args, _ = _call("vllm_prepare_step", "cpu")
    args["slot_mapping_enabled"] = args["slot_mapping_enabled"].int()
    assert "slot_mapping_enabled must have dtype bool (torch.bool), got torch.int32" in first_error(
        sgl_meta.vllm_prepare_step, **args)
    args, _ = _call("vllm_gather_block_tables", "cpu")
    args["dst_block_tables"] = args["dst_block_tables"][:2]
    assert "dst_block_tables must hold 3 tensors" in first_error(sgl_meta.vllm_gather_block_tables, **args)


@pytest.mark.parametrize("name", NAMES)
def test_opcheck(name, device):
    args, _ = _call(name, device)
    op = getattr(torch.ops.sgl_meta, name).default
    kw = clone_outputs(args)
    torch.library.opcheck(op, tuple(kw[a.name] if a.name in kw else a.default_value for a in op._schema.arguments))


def test_torch_compile_fullgraph(device):
    args, outs = _call("vllm_prepare_step", device)
    want = run_all(args, outs, reference.vllm_prepare_step, None)[0]
    kw = clone_outputs(args)
    names = [n for n, v in kw.items() if isinstance(v, (torch.Tensor, list))]
    scalars = {n: v for n, v in kw.items() if n not in names}

    @torch.compile(fullgraph=True, dynamic=False)
    def step(**tensors):
        sgl_meta.vllm_prepare_step(**tensors, **scalars)

    torch._dynamo.reset()
    step(**{n: kw[n] for n in names})
    assert_same(_flat({k: kw[k] for k in outs}), want, "torch.compile")
