"""vllm_compute_slot_mappings / vllm_gather_block_tables against vLLM 0.33's own
Triton kernels (run on CPU by Triton's interpreter, tests/vllm_upstream.py)
and the eager references, outputs poisoned first; hostile values; CUDA vs CPU
and CUDA-graph replay."""

from __future__ import annotations

import pytest
import torch

import sgl_meta
import vllm_upstream
from helpers import TEST_CUDA, assert_same, capture_cuda_graph
from sgl_meta import reference
from vllm_cases import StepCase, clone_outputs, first_error, gather_args, make_step, refresh_step, slot_args, to_device

UP = vllm_upstream.load()
needs_upstream = pytest.mark.skipif(UP is None, reason=vllm_upstream.SKIP_REASON)

SLOT_OUT = ("slot_mappings",)
GATHER_OUT = ("dst_block_tables",)


def _outputs(kw, names):
    return {k: kw[k] for k in names}


def _flat(outs: dict) -> dict:
    flat = {}
    for k, v in outs.items():
        if isinstance(v, list):
            flat.update({f"{k}[{i}]": t for i, t in enumerate(v)})
        else:
            flat[k] = v
    return flat


def run_all(args: dict, names, op, ref, up=None):
    """(op's outputs, reference's, upstream's or None), each on its own copies."""
    results = []
    for fn in (op, ref, up):
        if fn is None:
            results.append(None)
            continue
        kw = clone_outputs(args, names)
        fn(**kw)
        results.append(_flat(_outputs(kw, names)))
    return results


def _up_slots(**kw):
    vllm_upstream.compute_slot_mappings(UP, **kw)


def _up_gather(**kw):
    vllm_upstream.gather_block_tables(UP, **kw)


SLOT_CASES = [
    StepCase(),
    StepCase(n=1, groups=1, pad_tokens=0),
    StepCase(n=0, groups=2),
    StepCase(n=9, groups=3, no_request_rows=3),
    StepCase(n=7, groups=4, cp_size=2, cp_rank=1),
    StepCase(n=7, groups=3, cp_size=4, cp_rank=2, cp_interleave=2),
    StepCase(n=6, groups=2, cp_size=3, cp_rank=0, cp_interleave=5),
    StepCase(n=5, groups=2, idx_dtype=torch.int32, qsl_dtype=torch.int64, pos_dtype=torch.int32),
    StepCase(n=4, groups=5, max_query=1100),  # one block's threads loop over a long prefill
]


@needs_upstream
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("case", SLOT_CASES, ids=lambda c: f"n{c.n}g{c.groups}cp{c.cp_size}x{c.cp_interleave}")
def test_slot_mappings_equal_vllm_and_reference(case, seed):
    gen = torch.Generator().manual_seed(seed)
    args = slot_args(make_step(case, gen))
    if case.idx_dtype != torch.int64 or case.pos_dtype != torch.int64:
        up_args = dict(args, idx_mapping=args["idx_mapping"].long(), positions=args["positions"].long(),
                       query_start_loc=args["query_start_loc"].int())
    else:
        up_args = args
    got, want, _ = run_all(args, SLOT_OUT, sgl_meta.vllm_compute_slot_mappings,
                           reference.vllm_compute_slot_mappings)
    up = run_all(up_args, SLOT_OUT, _up_slots, None)[0]
    assert_same(got, want, f"{case} vs reference")
    assert_same(got, up, f"{case} vs vLLM")
    # the padded tail and the -1 rows are PAD; untouched elsewhere means written
    sm = got["slot_mappings"]
    n_tok = int(args["query_start_loc"][case.n])
    assert (sm[:, n_tok:] == -1).all()


GATHER_CASES = [
    StepCase(),
    StepCase(n=1, groups=1, pad_rows=0),
    StepCase(n=0, groups=2, pad_rows=4),  # a dummy step: every row zeroed
    StepCase(n=8, groups=3, pad_rows=5),
    StepCase(n=8, groups=3, pad_rows=-3),  # fewer rows than requests: the rest untouched
    StepCase(n=6, groups=4, sliding=True, idx_dtype=torch.int32, computed_dtype=torch.int64),
    StepCase(n=5, groups=2, max_context=5000),  # rows wider than one block of threads
]


@needs_upstream
@pytest.mark.parametrize("mask", [False, True])
@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("case", GATHER_CASES, ids=lambda c: f"n{c.n}g{c.groups}rows{c.n + c.pad_rows}")
def test_gather_equals_vllm_and_reference(case, seed, mask):
    gen = torch.Generator().manual_seed(seed)
    args = gather_args(make_step(case, gen), mask=mask)
    up_args = dict(args, idx_mapping=args["idx_mapping"].long())
    if mask:
        up_args["num_computed_tokens"] = args["num_computed_tokens"].int()
    got, want, _ = run_all(args, GATHER_OUT, sgl_meta.vllm_gather_block_tables, reference.vllm_gather_block_tables)
    up = run_all(up_args, GATHER_OUT, _up_gather, None)[0]
    assert_same(got, want, f"{case} vs reference")
    assert_same(got, up, f"{case} vs vLLM")


def test_gather_no_request_rows_are_zeroed_and_wider_destinations():
    gen = torch.Generator().manual_seed(5)
    args = gather_args(make_step(StepCase(n=7, groups=3, no_request_rows=3, wide_dst=5), gen))
    got, want, _ = run_all(args, GATHER_OUT, sgl_meta.vllm_gather_block_tables, reference.vllm_gather_block_tables)
    assert_same(got, want, "vs reference")
    idx = args["idx_mapping"]
    for g in range(3):
        dst = got[f"dst_block_tables[{g}]"]
        assert (dst[:7][idx == -1] == 0).all()
        assert (dst[7: args["num_rows"]] == 0).all()


def test_slot_mappings_without_tokens_are_all_padding():
    """No request and no token (positions empty) but padded slot mappings: the op
    and the reference fill every column with pad_id."""
    kw = dict(idx_mapping=torch.empty(0, dtype=torch.int64), query_start_loc=torch.zeros(1, dtype=torch.int32),
              positions=torch.empty(0, dtype=torch.int64), block_tables=[torch.zeros(2, 4, dtype=torch.int32)] * 2,
              block_sizes=torch.ones(2, dtype=torch.int32), slot_mapping_enabled=torch.ones(2, dtype=torch.bool),
              dcp_sharded=torch.zeros(2, dtype=torch.bool), pad_id=-5)
    for fn in (sgl_meta.vllm_compute_slot_mappings, reference.vllm_compute_slot_mappings):
        out = torch.full((2, 3), 7, dtype=torch.int64)
        fn(**kw, slot_mappings=out)
        assert (out == -5).all(), (fn, out)


def test_masking_nulls_the_blocks_below_the_window():
    bs, reach = 4, 10
    src = torch.arange(1, 21, dtype=torch.int32).view(1, 20)
    dst = torch.full((1, 20), -7, dtype=torch.int32)
    sgl_meta.vllm_gather_block_tables(
        idx_mapping=torch.tensor([0]), src_block_tables=[src], num_blocks=torch.tensor([[9]], dtype=torch.int32),
        dst_block_tables=[dst], num_rows=1, num_computed_tokens=torch.tensor([30], dtype=torch.int32),
        sliding_window_reach=torch.tensor([reach], dtype=torch.int32), block_sizes=torch.tensor([bs], dtype=torch.int32))
    null = (30 - reach) // bs  # 5 blocks wholly below position 20
    assert dst[0, :null].tolist() == [0] * null
    assert dst[0, null:9].tolist() == list(range(null + 1, 10))
    assert dst[0, 9:].tolist() == [-7] * 11


def test_slot_formula_by_hand_with_context_parallelism():
    # cp_size 2, interleave 1, block 4: a virtual block of 8 positions alternates ranks
    table = torch.tensor([[10, 11, 12, 13]], dtype=torch.int32)
    pos = torch.arange(16)
    for rank in (0, 1):
        sm = torch.full((1, 16), 99, dtype=torch.int64)
        sgl_meta.vllm_compute_slot_mappings(
            idx_mapping=torch.tensor([0]), query_start_loc=torch.tensor([0, 16], dtype=torch.int32), positions=pos,
            block_tables=[table], block_sizes=torch.tensor([4], dtype=torch.int32),
            slot_mapping_enabled=torch.tensor([True]), dcp_sharded=torch.tensor([True]), slot_mappings=sm,
            cp_rank=rank, cp_size=2)
        want = []
        for p in range(16):
            v, o = divmod(p, 8)
            if o % 2 != rank:
                want.append(-1)
                continue
            lp = v * 4 + o // 2
            want.append(int(table[0, lp // 4]) * 4 + lp % 4)
        assert sm[0].tolist() == want


def test_no_groups_is_a_no_op():
    idx = torch.tensor([0, 1])
    sgl_meta.vllm_compute_slot_mappings(
        idx_mapping=idx, query_start_loc=torch.tensor([0, 1, 2], dtype=torch.int32), positions=torch.zeros(2).long(),
        block_tables=[], block_sizes=torch.zeros(0, dtype=torch.int32), slot_mapping_enabled=torch.zeros(0).bool(),
        dcp_sharded=torch.zeros(0).bool(), slot_mappings=torch.zeros(0, 4, dtype=torch.int64))
    sgl_meta.vllm_gather_block_tables(idx_mapping=idx, src_block_tables=[], num_blocks=torch.zeros(0, 2).int(),
                                      dst_block_tables=[], num_rows=2)


# ---- hostile values: CPU raises naming the op and argument, nothing written ----
def _hostile(edit, needle, fn=sgl_meta.vllm_compute_slot_mappings, make=slot_args, names=SLOT_OUT):
    gen = torch.Generator().manual_seed(11)
    args = make(make_step(StepCase(n=5, groups=2, disabled=False), gen))
    edit(args)
    before = {k: [t.clone() for t in v] if isinstance(v, list) else v.clone() for k, v in _outputs(args, names).items()}
    err = first_error(fn, **args)
    assert err is not None and err.startswith(f"sgl_meta.{fn.__name__}: "), err
    assert needle in err, err
    for k, v in before.items():
        assert_same(_flat({k: args[k]}), _flat({k: v}), "written before the error")


def _set(name, i, value):
    def edit(kw):
        kw[name][i] = value
    return edit


@pytest.mark.parametrize("edit,needle", [
    (_set("idx_mapping", 2, 8), "idx_mapping[2] = 8 is outside [-1, 8)"),
    (_set("idx_mapping", 0, -2), "idx_mapping[0] = -2 is outside"),
    (_set("query_start_loc", 3, 0), "query_start_loc[3] = 0 is negative, decreasing"),
    (_set("query_start_loc", 5, 10**6), "query_start_loc[5] = 1000000"),
    (_set("query_start_loc", 0, -1), "query_start_loc[0] = -1"),
    (_set("positions", 0, -3), "positions[0] = -3 is negative"),
    (_set("positions", 1, 2**40), "reads block column"),
    (_set("block_sizes", 1, 0), "block_sizes[1] = 0 is < 1"),
])
def test_slot_mappings_hostile_values(edit, needle):
    _hostile(edit, needle)


@pytest.mark.parametrize("edit,needle", [
    (_set("idx_mapping", 1, 99), "idx_mapping[1] = 99 is outside"),
    (lambda kw: kw["num_blocks"][0].fill_(10**6), "num_blocks[0, "),
    (lambda kw: kw["num_blocks"][1].fill_(-1), "num_blocks[1, "),
    (lambda kw: kw["num_computed_tokens"].fill_(-5), "num_computed_tokens["),
    (lambda kw: (kw["block_sizes"].fill_(0), kw["sliding_window_reach"].fill_(3)), "block_sizes[0] = 0 is < 1"),
])
def test_gather_hostile_values(edit, needle):
    _hostile(edit, needle, sgl_meta.vllm_gather_block_tables, gather_args, GATHER_OUT)


def test_values_that_are_not_read_are_not_errors():
    gen = torch.Generator().manual_seed(3)
    step = make_step(StepCase(n=4, groups=2, pad_rows=0), gen)
    args = slot_args(step)
    args["positions"][int(args["query_start_loc"][4]):] = -(2**40)  # past the real tokens
    args["idx_mapping"][1] = -1  # its tokens are PAD: nothing of the row is read
    sgl_meta.vllm_compute_slot_mappings(**args)
    g = gather_args(step, mask=False)
    g["num_computed_tokens"] = None
    g["block_sizes"] = torch.zeros(2, dtype=torch.int32)  # not read without masking
    sgl_meta.vllm_gather_block_tables(**g)


# ---- GPU ---------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("case", SLOT_CASES + GATHER_CASES)
def test_cuda_equals_cpu(case):
    check_cuda_equals_cpu(case, ((sgl_meta.vllm_compute_slot_mappings, slot_args, SLOT_OUT),
                                 (sgl_meta.vllm_gather_block_tables, gather_args, GATHER_OUT)))


def check_cuda_equals_cpu(case, calls) -> None:
    """Each ``(op, args of a step, outputs)`` of ``calls`` gives on CUDA what it
    gives on CPU, on three steps of ``case``."""
    for seed in range(3):
        step = make_step(case, torch.Generator().manual_seed(seed))
        for fn, make, names in calls:
            want = run_all(make(step), names, fn, None)[0]
            got = run_all(make(to_device(step, TEST_CUDA)), names, fn, None)[0]
            assert_same(got, want, f"{fn.__name__} {case} seed {seed}")


@pytest.mark.gpu
def test_cuda_graph_replays_new_values():
    gen = torch.Generator().manual_seed(0)
    case = StepCase(n=6, groups=3, no_request_rows=2)
    step = to_device(make_step(case, gen), TEST_CUDA)
    sa, ga = slot_args(step), gather_args(step)
    graph = capture_cuda_graph(lambda: (sgl_meta.vllm_compute_slot_mappings(**sa),
                                        sgl_meta.vllm_gather_block_tables(**ga)))
    for _ in range(4):  # new values in the same buffers
        refresh_step(step, case, gen)
        host = to_device(step, "cpu")
        want = {**run_all(slot_args(host), SLOT_OUT, reference.vllm_compute_slot_mappings, None)[0],
                **run_all(gather_args(host), GATHER_OUT, reference.vllm_gather_block_tables, None)[0]}
        graph.replay()
        torch.cuda.synchronize()
        assert_same(_flat({k: step[k] for k in SLOT_OUT + GATHER_OUT}), want, "replay")
