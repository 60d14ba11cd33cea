"""vllm_prepare_pos_seq_lens / vllm_combine_sampled_and_draft_tokens /
vllm_prepare_step against vLLM 0.33's own Triton kernels (run on CPU by
Triton's interpreter, tests/vllm_upstream.py) and the eager references,
outputs poisoned first; hostile values; CUDA vs CPU and CUDA-graph replay."""

from __future__ import annotations

import pytest
import torch

import sgl_meta
import vllm_upstream
from helpers import TEST_CUDA, assert_same, capture_cuda_graph
from sgl_meta import reference
from test_vllm_block_table import _flat, _set, check_cuda_equals_cpu, run_all
from vllm_cases import (CombineCase, StepCase, clone_outputs, first_error, make_combine, make_step, pos_args,
                        prepare_step_args, refresh_step, to_device)

UP = vllm_upstream.load()
needs_upstream = pytest.mark.skipif(UP is None, reason=vllm_upstream.SKIP_REASON)

POS_OUT = ("pos", "seq_lens")
COMBINE_OUT = ("input_ids", "logits_indices")
STEP_OUT = ("pos", "seq_lens", "dst_block_tables", "slot_mappings")

POS_CASES = [
    StepCase(),
    StepCase(n=1),
    StepCase(n=0),
    StepCase(n=12, max_query=1500),
    StepCase(n=5, idx_dtype=torch.int32, qsl_dtype=torch.int64, computed_dtype=torch.int64, pos_dtype=torch.int32),
]


def check_three_ways(args, outs, op, ref, up, context):
    """op == reference on args; op == vLLM on args in vLLM's dtypes (int64
    idx_mapping and positions, int32 query_start_loc and num_computed_tokens)."""
    got, want, _ = run_all(args, outs, op, ref)
    assert_same(got, want, f"{context} vs reference")
    up_args = dict(args, idx_mapping=args["idx_mapping"].long(), query_start_loc=args["query_start_loc"].int(),
                   num_computed_tokens=args["num_computed_tokens"].int(), pos=args["pos"].long())
    theirs = run_all(up_args, outs, up, None)[0]
    assert_same(got, {k: v.to(got[k].dtype) for k, v in theirs.items()}, f"{context} vs vLLM")


def _up_pos(**kw):
    vllm_upstream.prepare_pos_seq_lens(UP, **kw)


@needs_upstream
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("case", POS_CASES, ids=lambda c: f"n{c.n}q{c.max_query}")
def test_pos_seq_lens_equal_vllm_and_reference(case, seed):
    args = pos_args(make_step(case, torch.Generator().manual_seed(seed)))
    check_three_ways(args, POS_OUT, sgl_meta.vllm_prepare_pos_seq_lens, reference.vllm_prepare_pos_seq_lens, _up_pos,
                     str(case))


def test_pos_no_request_rows_count_no_computed_tokens():
    args = pos_args(make_step(StepCase(n=6, no_request_rows=2), torch.Generator().manual_seed(1)))
    got, want, _ = run_all(args, POS_OUT, sgl_meta.vllm_prepare_pos_seq_lens, reference.vllm_prepare_pos_seq_lens)
    assert_same(got, want, "vs reference")
    qsl, idx = args["query_start_loc"], args["idx_mapping"]
    for b in (idx == -1).nonzero().flatten().tolist():
        assert got["seq_lens"][b] == qsl[b + 1] - qsl[b]
        assert got["pos"][qsl[b]:qsl[b + 1]].tolist() == list(range(int(qsl[b + 1] - qsl[b])))


def test_pos_seq_lens_takes_vllms_positional_arguments():
    """vLLM's call, ``prepare_pos_seq_lens(idx_mapping, query_start_loc,
    num_computed_tokens, pos, seq_lens)``, reaches the op unchanged."""
    args = pos_args(make_step(StepCase(n=5), torch.Generator().manual_seed(2)))
    by_kw, by_pos = ({k: v.clone() for k, v in args.items()} for _ in range(2))
    sgl_meta.vllm_prepare_pos_seq_lens(**by_kw)
    sgl_meta.vllm_prepare_pos_seq_lens(*(by_pos[k] for k in ("idx_mapping", "query_start_loc",
                                                              "num_computed_tokens", "pos", "seq_lens")))
    assert all(torch.equal(by_kw[k], by_pos[k]) for k in args)


COMBINE_CASES = [
    CombineCase(),
    CombineCase(n=1, steps=0),
    CombineCase(n=9, steps=5),
    CombineCase(n=7, steps=3, num_new_sampled=0),
    CombineCase(n=6, steps=2, last_2d=False, idx_dtype=torch.int32),
    CombineCase(n=40, steps=4),
]


def _up_combine(**kw):
    vllm_upstream.combine_sampled_and_draft_tokens(UP, **kw)


@needs_upstream
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("case", COMBINE_CASES, ids=lambda c: f"n{c.n}s{c.steps}k{c.num_new_sampled}")
def test_combine_equals_vllm_and_reference(case, seed):
    args = make_combine(case, torch.Generator().manual_seed(seed))
    got, want, _ = run_all(args, COMBINE_OUT, sgl_meta.vllm_combine_sampled_and_draft_tokens,
                           reference.vllm_combine_sampled_and_draft_tokens)
    assert_same(got, want, f"{case} vs reference")
    last = args["last_sampled_tokens"]
    up_args = dict(args, idx_mapping=args["idx_mapping"].long(), last_sampled_tokens=last if last.dim() == 2 else
                   last[:, None].contiguous())
    up = run_all(up_args, COMBINE_OUT, _up_combine, None)[0]
    assert_same(got, up, f"{case} vs vLLM")


def test_combine_no_request_rows_write_logits_indices_only():
    args = make_combine(CombineCase(n=8, no_request_rows=8), torch.Generator().manual_seed(2))
    got, want, _ = run_all(args, COMBINE_OUT, sgl_meta.vllm_combine_sampled_and_draft_tokens,
                           reference.vllm_combine_sampled_and_draft_tokens)
    assert_same(got, want, "vs reference")
    assert torch.equal(got["input_ids"], args["input_ids"])


STEP_CASES = [
    StepCase(),
    StepCase(n=1, groups=1),
    StepCase(n=0, groups=2, pad_rows=3),
    StepCase(n=8, groups=3, pad_rows=4),
    StepCase(n=8, groups=3, pad_rows=-2),
    StepCase(n=6, groups=4, cp_size=2, cp_rank=1, sliding=False),
    StepCase(n=6, groups=2, cp_size=4, cp_rank=3, cp_interleave=4, sliding=False),
    StepCase(n=5, groups=2, idx_dtype=torch.int32, qsl_dtype=torch.int64, computed_dtype=torch.int64,
             pos_dtype=torch.int32),
    StepCase(n=3, groups=0),
    StepCase(n=4, groups=2, max_query=1200),
]


def _up_step(*, mask_sliding_window, **kw):
    """vLLM's three kernels back to back, as GPUModelRunner runs them."""
    vllm_upstream.prepare_pos_seq_lens(UP, idx_mapping=kw["idx_mapping"], query_start_loc=kw["query_start_loc"],
                                       num_computed_tokens=kw["num_computed_tokens"], pos=kw["pos"],
                                       seq_lens=kw["seq_lens"])
    vllm_upstream.gather_block_tables(
        UP, idx_mapping=kw["idx_mapping"], src_block_tables=kw["src_block_tables"], num_blocks=kw["num_blocks"],
        dst_block_tables=kw["dst_block_tables"], num_rows=kw["num_rows"],
        num_computed_tokens=kw["num_computed_tokens"] if mask_sliding_window else None,
        sliding_window_reach=kw["sliding_window_reach"], block_sizes=kw["block_sizes"])
    vllm_upstream.compute_slot_mappings(
        UP, idx_mapping=kw["idx_mapping"], query_start_loc=kw["query_start_loc"], positions=kw["pos"],
        block_tables=kw["src_block_tables"], block_sizes=kw["block_sizes"],
        slot_mapping_enabled=kw["slot_mapping_enabled"], dcp_sharded=kw["dcp_sharded"],
        slot_mappings=kw["slot_mappings"], cp_rank=kw["cp_rank"], cp_size=kw["cp_size"],
        cp_interleave=kw["cp_interleave"])


@needs_upstream
@pytest.mark.parametrize("mask", [False, True])
@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("case", STEP_CASES, ids=lambda c: f"n{c.n}g{c.groups}cp{c.cp_size}x{c.cp_interleave}")
def test_prepare_step_equals_the_three_vllm_kernels_and_references(case, seed, mask):
    args = prepare_step_args(make_step(case, torch.Generator().manual_seed(seed)), mask=mask)
    check_three_ways(args, STEP_OUT, sgl_meta.vllm_prepare_step, reference.vllm_prepare_step, _up_step, str(case))


def test_prepare_step_equals_the_three_ops():
    for seed in range(5):
        case = StepCase(n=7, groups=3, no_request_rows=seed % 3, pad_rows=seed - 2)
        args = prepare_step_args(make_step(case, torch.Generator().manual_seed(seed)))
        fused = clone_outputs(args)
        sgl_meta.vllm_prepare_step(**fused)
        split = clone_outputs(args)
        sgl_meta.vllm_prepare_pos_seq_lens(idx_mapping=split["idx_mapping"], query_start_loc=split["query_start_loc"],
                                           num_computed_tokens=split["num_computed_tokens"], pos=split["pos"],
                                           seq_lens=split["seq_lens"])
        sgl_meta.vllm_gather_block_tables(
            idx_mapping=split["idx_mapping"], src_block_tables=split["src_block_tables"],
            num_blocks=split["num_blocks"], dst_block_tables=split["dst_block_tables"], num_rows=split["num_rows"],
            num_computed_tokens=split["num_computed_tokens"], sliding_window_reach=split["sliding_window_reach"],
            block_sizes=split["block_sizes"])
        sgl_meta.vllm_compute_slot_mappings(
            idx_mapping=split["idx_mapping"], query_start_loc=split["query_start_loc"], positions=split["pos"],
            block_tables=split["src_block_tables"], block_sizes=split["block_sizes"],
            slot_mapping_enabled=split["slot_mapping_enabled"], dcp_sharded=split["dcp_sharded"],
            slot_mappings=split["slot_mappings"], cp_rank=0, cp_size=1, cp_interleave=1)
        assert_same(_flat({k: fused[k] for k in STEP_OUT}), _flat({k: split[k] for k in STEP_OUT}), f"seed {seed}")


# ---- hostile values -------------------------------------------------------------
def _hostile(fn, args, names, edit, needle):
    edit(args)
    before = _flat({k: [t.clone() for t in args[k]] if isinstance(args[k], list) else args[k].clone() for k in names})
    err = first_error(fn, **args)
    assert err is not None and err.startswith(f"sgl_meta.{fn.__name__}: "), err
    assert needle in err, err
    assert_same(_flat({k: args[k] for k in names}), before, "written before the error")


@pytest.mark.parametrize("edit,needle", [
    (_set("idx_mapping", 0, 8), "idx_mapping[0] = 8 is outside [-1, 8)"),
    (_set("query_start_loc", 2, 0), "query_start_loc[2] = 0"),
    (_set("query_start_loc", 5, 10**7), "query_start_loc[5] = 10000000"),
    (lambda kw: kw["num_computed_tokens"].fill_(-1), "num_computed_tokens["),
    (lambda kw: kw["num_computed_tokens"].fill_(2**31 - 2), "does not fit int32 seq_lens"),
])
def test_pos_seq_lens_hostile_values(edit, needle):
    args = pos_args(make_step(StepCase(n=5), torch.Generator().manual_seed(4)))
    _hostile(sgl_meta.vllm_prepare_pos_seq_lens, args, POS_OUT, edit, needle)


@pytest.mark.parametrize("edit,needle", [
    (_set("idx_mapping", 0, 8), "idx_mapping[0] = 8 is outside"),
    (lambda kw: kw["num_blocks"].fill_(10**6), "num_blocks["),
    (lambda kw: kw["block_sizes"].fill_(0), "block_sizes[0] = 0 is < 1"),
    (lambda kw: kw["num_computed_tokens"].fill_(2**30), "reads block column"),
])
def test_prepare_step_hostile_values(edit, needle):
    args = prepare_step_args(make_step(StepCase(n=5, disabled=False), torch.Generator().manual_seed(4)))
    _hostile(sgl_meta.vllm_prepare_step, args, STEP_OUT, edit, needle)


@pytest.mark.parametrize("edit,needle", [
    (_set("idx_mapping", 0, 9), "idx_mapping[0] = 9 is outside [-1, 9)"),
    (_set("cu_num_logits", 2, 0), "must be non-negative, non-decreasing"),
    (lambda kw: kw["cu_num_logits"].add_(torch.arange(kw["cu_num_logits"].numel(), dtype=torch.int32) * 9),
     "logits, more than draft_tokens.size(1)"),
    (lambda kw: (kw["seq_lens"].fill_(10**6), kw["query_start_loc"].fill_(0)), "cannot hold its"),
    (lambda kw: (kw["seq_lens"].fill_(10**6), kw["cu_num_logits"].fill_(0)), "writes its last sampled token"),
])
def test_combine_hostile_values(edit, needle):
    args = make_combine(CombineCase(n=6, extra_reqs=3), torch.Generator().manual_seed(4))
    _hostile(sgl_meta.vllm_combine_sampled_and_draft_tokens, args, COMBINE_OUT, edit, needle)


def test_combine_rejects_num_new_sampled_tokens_2():
    args = make_combine(CombineCase(), torch.Generator().manual_seed(0))
    args["num_new_sampled_tokens"] = 2
    assert "num_new_sampled_tokens must be 0 or 1, got 2" in first_error(
        sgl_meta.vllm_combine_sampled_and_draft_tokens, **args)


def test_mask_without_reach_is_an_error():
    args = prepare_step_args(make_step(StepCase(), torch.Generator().manual_seed(0)))
    args["sliding_window_reach"] = None
    assert "mask_sliding_window=True needs sliding_window_reach" in first_error(sgl_meta.vllm_prepare_step, **args)


def test_outputs_must_not_alias_inputs():
    args = prepare_step_args(make_step(StepCase(), torch.Generator().manual_seed(0)))
    args["dst_block_tables"] = [args["src_block_tables"][0], *args["dst_block_tables"][1:]]
    assert "overlap in memory" in first_error(sgl_meta.vllm_prepare_step, **args)


# ---- GPU ------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("case", STEP_CASES)
def test_cuda_equals_cpu(case):
    check_cuda_equals_cpu(case, ((sgl_meta.vllm_prepare_step, prepare_step_args, STEP_OUT),
                                 (sgl_meta.vllm_prepare_pos_seq_lens, pos_args, POS_OUT)))


@pytest.mark.gpu
@pytest.mark.parametrize("case", COMBINE_CASES)
def test_combine_cuda_equals_cpu(case):
    for seed in range(3):
        args = make_combine(case, torch.Generator().manual_seed(seed))
        want = run_all(args, COMBINE_OUT, sgl_meta.vllm_combine_sampled_and_draft_tokens, None)[0]
        got = run_all(to_device(args, TEST_CUDA), COMBINE_OUT, sgl_meta.vllm_combine_sampled_and_draft_tokens,
                      None)[0]
        assert_same(got, want, f"{case} seed {seed}")


@pytest.mark.gpu
@pytest.mark.parametrize("mask", [False, True])
def test_prepare_step_cuda_graph_replays_new_values(mask):
    gen = torch.Generator().manual_seed(0)
    case = StepCase(n=9, groups=3, no_request_rows=2, pad_rows=3)
    step = to_device(make_step(case, gen), TEST_CUDA)
    args = prepare_step_args(step, mask=mask)
    graph = capture_cuda_graph(lambda: sgl_meta.vllm_prepare_step(**args))
    for _ in range(4):
        refresh_step(step, case, gen)
        want = run_all(prepare_step_args(to_device(step, "cpu"), mask=mask), STEP_OUT, reference.vllm_prepare_step,
                       None)[0]
        graph.replay()
        torch.cuda.synchronize()
        assert_same(_flat({k: step[k] for k in STEP_OUT}), want, "replay")


@pytest.mark.gpu
def test_combine_cuda_graph_replays_new_values():
    gen = torch.Generator().manual_seed(0)
    args = to_device(make_combine(CombineCase(n=12, steps=3), gen), TEST_CUDA)
    graph = capture_cuda_graph(lambda: sgl_meta.vllm_combine_sampled_and_draft_tokens(**args))
    for _ in range(4):  # new requests, prompts, sampled and draft tokens; same batch shape
        R = args["prefill_len"].numel()
        args["idx_mapping"].copy_(torch.randperm(R, generator=gen)[:12])
        args["prefill_len"].copy_(torch.randint(0, 60, (R,), generator=gen))
        args["last_sampled_tokens"].copy_(torch.randint(0, 2**40, (R, 1), generator=gen))
        args["draft_tokens"].copy_(torch.randint(0, 2**33, tuple(args["draft_tokens"].shape), generator=gen))
        for k in COMBINE_OUT:
            args[k].copy_(torch.randint(-(2**31), 2**31 - 1, tuple(args[k].shape), generator=gen))
        want = run_all(to_device(args, "cpu"), COMBINE_OUT, reference.vllm_combine_sampled_and_draft_tokens, None)[0]
        graph.replay()
        torch.cuda.synchronize()
        assert_same({k: args[k] for k in COMBINE_OUT}, want, "replay")
