"""build_draft_decode_kv_indices: the op (CPU and CUDA) vs the eager reference
vs the contract in plain Python, and (in a TRITON_INTERPRET=1 child) vs SGLang
0.5.23's own generate_draft_decode_kv_indices launched as its Triton and
FlashInfer multi-step draft backends launch it."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from draft_kv_indices_cases import OUTPUTS, SENTINEL, Case, clone_outputs, formula, make
from helpers import TEST_CUDA, assert_same, capture_cuda_graph, interpreter_child, on_cuda, on_device

HERE = Path(__file__).resolve().parent

CASES = {
    "one_branch": Case(),
    "one_request": Case(bs=1, max_len=2000),
    "topk4": Case(topk=4),
    "topk4_pages_of_64": Case(topk=4, page_size=64, num_steps=5),
    "topk2_pages_of_16_int64": Case(topk=2, page_size=16, index64=True, out64=True, indptr64=True),
    "pages_topk1": Case(page_size=64),
    "window": Case(window_size=50, sink_size=4, topk=2),
    "window_no_sink": Case(window_size=16, page_size=16, topk=3),
    "one_step": Case(num_steps=1, topk=3),
    "many_requests": Case(bs=300, pool=310, max_len=40, topk=2),
    "no_tokens": Case(max_len=0, topk=2),
}


def run(fn, kw: dict) -> dict:
    kw = clone_outputs(kw)
    fn(**kw)
    return kw


def assert_outputs_equal(got: dict, want: dict, context: str) -> None:
    assert_same({k: got[k] for k in OUTPUTS}, {k: want[k] for k in OUTPUTS}, context)


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_vs_reference_vs_contract(name, gen, device):
    kw = make(CASES[name], gen, device)
    before = {k: v.clone() for k, v in kw.items() if isinstance(v, torch.Tensor) and k not in OUTPUTS}
    got = run(sgl_meta.build_draft_decode_kv_indices, kw)
    assert_outputs_equal(got, run(reference.build_draft_decode_kv_indices, kw), f"op vs reference, {name}")
    assert_outputs_equal(got, formula(kw), f"op vs the contract, {name}")
    for k, v in before.items():
        assert torch.equal(kw[k], v), f"input {k} changed"
    # The unused step row, kv_indptr[:, 0] and everything past the last branch keep the poison.
    assert (got["kv_indices"][-1] == SENTINEL).all() and (got["kv_indptr"][:, 0] == SENTINEL).all()
    assert (got["kv_indptr"][:, CASES[name].bs * CASES[name].topk + 1:] == SENTINEL).all()


@pytest.mark.parametrize("seed", range(4))
def test_random_cases(seed, gen, device):
    rnd = torch.Generator().manual_seed(seed)

    def pick(*options):
        return options[int(torch.randint(0, len(options), (1,), generator=rnd))]

    for _ in range(6):
        window = pick(0, 0, 8, 100)
        case = Case(bs=pick(1, 3, 17, 130), pool=140, topk=pick(1, 2, 4, 8), num_steps=pick(1, 2, 4, 7),
                    page_size=pick(1, 4, 64), window_size=window, sink_size=pick(0, 3) if window else 0,
                    max_len=pick(0, 5, 60, 500), index64=pick(False, True), out64=pick(False, True),
                    indptr64=pick(False, True))
        kw = make(case, gen, device)
        got = run(sgl_meta.build_draft_decode_kv_indices, kw)
        assert_outputs_equal(got, run(reference.build_draft_decode_kv_indices, kw), f"op vs reference, {case}")
        if case.bs * case.max_len <= 20_000:
            assert_outputs_equal(got, formula(kw), f"op vs the contract, {case}")


@pytest.mark.parametrize("bs, topk, max_len, heads", [(1, 1, 3000, (32, 8)), (17, 4, 500, (64, 64)),
                                                      (130, 2, 40, (16, 2)), (3, 8, 0, (8, 1))])
def test_split_counts_as_build_kv_indices_writes_them(bs, topk, max_len, heads, gen, device):
    """num_kv_splits: what build_kv_indices (checked against SGLang's get_num_kv_splits_triton) writes with
    num_group = topk from the same lengths, in the same launch as the ids; the rest of the buffer untouched."""
    kw = make(Case(bs=bs, pool=bs + 3, topk=topk, max_len=max_len, page_size=16), gen, device)
    scalars = dict(num_head=heads[0], num_kv_head=heads[1], max_kv_splits=16, device_core_count=132)
    kw.update(num_kv_splits=torch.full((bs * topk + 3,), SENTINEL, dtype=torch.int32, device=device), **scalars)
    got = run(sgl_meta.build_draft_decode_kv_indices, {**kw})
    want = torch.full_like(kw["num_kv_splits"], SENTINEL)
    sgl_meta.build_kv_indices(req_to_token=kw["req_to_token"], req_pool_indices=kw["req_pool_indices"],
                              seq_lens=kw["seq_lens"], kv_indptr=torch.zeros(bs + 1, dtype=torch.int64, device=device),
                              kv_indices=torch.zeros(bs * kw["req_to_token"].shape[1], dtype=torch.int32,
                                                     device=device),
                              write_indptr=True, num_kv_splits=want, num_group=topk, **scalars)
    assert torch.equal(kw["num_kv_splits"], want), (kw["num_kv_splits"], want)
    ref = {**kw, "num_kv_splits": torch.full_like(want, SENTINEL)}
    run(reference.build_draft_decode_kv_indices, ref)
    assert torch.equal(ref["num_kv_splits"], want)
    assert_outputs_equal(got, formula(kw), "ids with split counts")


@pytest.mark.parametrize("scalar, value", [("topk", 0), ("num_steps", 0), ("num_steps", 65), ("page_size", 0),
                                           ("window_size", -1), ("sink_size", -1), ("num_kv_head", 2)])
def test_scalars_out_of_range_raise_in_op_and_reference_alike(scalar, value, gen):
    kw = make(Case(topk=2), gen, "cpu")
    kw[scalar] = value
    message = rf"sgl_meta.build_draft_decode_kv_indices: {scalar} = {value} is outside \["
    for fn in (sgl_meta.build_draft_decode_kv_indices, reference.build_draft_decode_kv_indices):
        with pytest.raises(RuntimeError, match=message):
            run(fn, kw)


def test_empty_batch_writes_nothing(gen, device):
    kw = make(Case(bs=0), gen, device)
    got = run(sgl_meta.build_draft_decode_kv_indices, kw)
    assert (got["kv_indices"] == SENTINEL).all() and (got["kv_indptr"] == SENTINEL).all()


def test_row_of_a_strided_table(gen, device):
    """kv_indices and kv_indptr as rows of larger buffers (SGLang's [steps, width] buffers, its slices)."""
    kw = make(Case(topk=2, page_size=16), gen, device)
    wide = torch.full((kw["kv_indices"].shape[0], kw["kv_indices"].shape[1] + 9), SENTINEL,
                      dtype=kw["kv_indices"].dtype, device=device)
    kw["kv_indices"] = wide[:, 4: 4 + kw["kv_indices"].shape[1]]
    got = run(sgl_meta.build_draft_decode_kv_indices, kw)
    assert_outputs_equal(got, formula(kw), "strided rows")


@pytest.mark.parametrize("what, message", [
    ("req", r"req_pool_indices\[1\] = 12 is outside \[0, req_to_token.size\(0\) = 12\)"),
    ("len", r"seq_lens\[1\] = -3 is negative or does not fit int32"),
    ("row", r"request 1 \(seq_lens = .*\) reads past its req_to_token row"),
    ("out", r"request \d+'s ids of the last step end past kv_indices.size\(1\)"),
    ("positions", r"positions\[2\] = -1 is negative or does not fit int32"),
    ("indptr", r"kv_indptr's last value .* does not fit kv_indptr \(int32\)"),
])
def test_hostile_values_raise_before_writing(what, message, gen):
    case = Case(topk=2, page_size=16)
    kw = make(case, gen, "cpu")
    if what == "req":
        kw["req_pool_indices"][1] = case.pool
    elif what == "len":
        kw["seq_lens"][1] = -3
    elif what == "row":
        kw["seq_lens"][1] = kw["req_to_token"].shape[1] - 1
    elif what == "out":
        kw["kv_indices"] = kw["kv_indices"][:, :40]
    elif what == "positions":
        kw["positions"][2] = -1
    else:
        kw["positions"][:] = 2**31 - 1
    for fn in (sgl_meta.build_draft_decode_kv_indices, reference.build_draft_decode_kv_indices):
        got = clone_outputs(kw)
        with pytest.raises(RuntimeError, match="sgl_meta.build_draft_decode_kv_indices: " + message):
            fn(**got)
        assert (got["kv_indices"] == SENTINEL).all() and (got["kv_indptr"] == SENTINEL).all()


@pytest.mark.parametrize("change, message", [
    (dict(topk=0), r"topk = 0 is outside \[1, 1024\]"),
    (dict(num_steps=65), r"num_steps = 65 is outside \[1, 64\]"),
    (dict(page_size=0), r"page_size = 0 is outside"),
    (dict(window_size=-1), r"window_size = -1 is outside"),
    (dict(kv_indices="short"), r"kv_indices.size\(0\) must be >= num_steps = 3, got 2"),
    (dict(kv_indptr="narrow"), r"kv_indptr.size\(1\) must be >= req_pool_indices.numel\(\) \* topk \+ 1 = 11"),
    (dict(positions="short"), r"positions.size\(0\) must be >= req_pool_indices.numel\(\) \* topk = 10"),
    (dict(kv_indices="float"), r"kv_indices"),
    (dict(kv_indptr="alias"), r"overlap|share"),
])
def test_bad_arguments_name_the_argument(change, message, gen):
    kw = make(Case(topk=2), gen, "cpu")
    for k, v in change.items():
        if v == "short":
            kw[k] = kw[k][:2] if k == "kv_indices" else kw[k][:9]
        elif v == "narrow":
            kw[k] = kw[k][:, :10]
        elif v == "float":
            kw[k] = kw[k].float()
        elif v == "alias":  # kv_indptr inside kv_indices
            kw["kv_indptr"] = kw["kv_indices"][:, :11]
        else:
            kw[k] = v
    with pytest.raises(RuntimeError, match="sgl_meta.build_draft_decode_kv_indices: .*" + message):
        sgl_meta.build_draft_decode_kv_indices(**kw)


@pytest.mark.parametrize("case", [Case(topk=2, page_size=4), Case(window_size=8, sink_size=2, out64=True)])
def test_opcheck(case, gen, device):
    """The schema, fake and both dispatch paths agree (torch.library.opcheck)."""
    torch.library.opcheck(torch.ops.sgl_meta.build_draft_decode_kv_indices.default, (), make(case, gen, device))


def test_torch_compile_traces_it(gen):
    kw = make(Case(topk=2, page_size=4), gen, "cpu")
    want = run(reference.build_draft_decode_kv_indices, kw)
    got = clone_outputs(kw)

    @torch.compile(fullgraph=True, backend="eager")
    def step(**t):
        sgl_meta.build_draft_decode_kv_indices(**t)

    step(**got)
    assert_outputs_equal(got, want, "torch.compile")


def test_equals_sglang_triton_kernel_in_the_interpreter():
    """SGLang 0.5.23's own kernel (TRITON_INTERPRET=1, CPU), both launch forms, on the same poisoned buffers."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or importlib.util.find_spec("triton") is None:
        pytest.skip("needs the installed sglang 0.5.23 and triton")
    site = Path(spec.submodule_search_locations[0]).parent
    if not (site / "sglang/kernels/ops/speculative/cache_locs.py").is_file():
        pytest.skip("this sglang has no kernels/ops/speculative/cache_locs.py (0.5.23's layout)")
    seed = int(os.environ.get("SGLMETA_TEST_SEED", "0")) or 12345
    assert "ok 30" in interpreter_child("draft_kv_indices_upstream_child.py", str(seed), "30", str(site))


# ---- GPU ----------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_vs_cpu(name, gen):
    kw = make(CASES[name], gen, "cpu")
    cpu = run(sgl_meta.build_draft_decode_kv_indices, kw)
    assert_outputs_equal(run(sgl_meta.build_draft_decode_kv_indices, on_cuda(kw)), cpu, f"CUDA vs CPU, {name}")


@pytest.mark.gpu
def test_cuda_split_counts_vs_cpu(gen):
    kw = make(Case(bs=70, pool=80, topk=4, max_len=3000, page_size=64), gen, "cpu")
    kw.update(num_kv_splits=torch.full((70 * 4 + 2,), SENTINEL, dtype=torch.int32), num_head=32, num_kv_head=8,
              max_kv_splits=16, device_core_count=132)
    cpu = run(sgl_meta.build_draft_decode_kv_indices, {**kw, "num_kv_splits": kw["num_kv_splits"].clone()})
    cuda = on_cuda({**kw, "num_kv_splits": kw["num_kv_splits"].clone()})
    got = run(sgl_meta.build_draft_decode_kv_indices, cuda)
    assert_outputs_equal(got, cpu, "CUDA vs CPU with split counts")
    want = kw["num_kv_splits"].clone()
    sgl_meta.build_draft_decode_kv_indices(**{**kw, "num_kv_splits": want})
    assert torch.equal(cuda["num_kv_splits"].cpu(), want)


@pytest.mark.gpu
def test_cuda_long_context(gen):
    """One request of 128k tokens (the Triton backend's serial walk): the blocks split the prefix."""
    case = Case(bs=1, max_len=131072, pool=2, topk=2, page_size=64, num_steps=3)
    kw = make(case, gen, "cpu")
    cpu = run(sgl_meta.build_draft_decode_kv_indices, kw)
    assert_outputs_equal(run(sgl_meta.build_draft_decode_kv_indices, on_cuda(kw)), cpu, "CUDA vs CPU, 128k")


@pytest.mark.gpu
@pytest.mark.parametrize("case", [Case(bs=2500, pool=2600, max_len=60, topk=2, page_size=16),
                                  Case(bs=1100, pool=1200, max_len=900, topk=3, window_size=40, sink_size=3),
                                  Case(bs=700, pool=800, max_len=2000, num_steps=5, index64=True, out64=True)],
                         ids=["three_chunks", "two_chunks_window", "more_requests_than_blocks"])
def test_cuda_batches_past_one_chunk(case, gen):
    """More requests than a block holds at once (1024: the lengths scanned in chunks) or than the grid has
    blocks (each block then writes the chains of several)."""
    kw = make(case, gen, "cpu")
    cpu = run(sgl_meta.build_draft_decode_kv_indices, kw)
    assert_outputs_equal(run(sgl_meta.build_draft_decode_kv_indices, on_cuda(kw)), cpu, f"CUDA vs CPU, bs {case.bs}")


@pytest.mark.gpu
@pytest.mark.parametrize("case", [Case(bs=5, pool=8, max_len=9000, window_size=3000, sink_size=1500, topk=2,
                                       page_size=16),
                                  Case(bs=40, pool=48, max_len=5000, window_size=2100, sink_size=1030, out64=True)],
                         ids=["sink_past_a_tile", "sink_ends_mid_tile"])
def test_cuda_window_tiles(case, gen):
    """Windows whose sink and recent tokens span several of a warp's 1024-token tiles: tiles all sink, a tile
    where the sink ends, tiles all recent."""
    kw = make(case, gen, "cpu")
    cpu = run(sgl_meta.build_draft_decode_kv_indices, kw)
    assert_outputs_equal(run(sgl_meta.build_draft_decode_kv_indices, on_cuda(kw)), cpu, f"CUDA vs CPU, {case}")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["one_branch", "topk4_pages_of_64", "window"])
def test_cuda_graph_replays_with_new_lengths(name, gen):
    case = CASES[name]
    live = make(case, gen, TEST_CUDA)
    # make() sizes kv_indices for its own lengths; the replays' fresh lengths may need more (each branch
    # writes at most max_len + num_steps ids), and an overflow is a device assert, not this test's subject.
    room = case.bs * case.topk * (case.max_len + case.num_steps) + 13
    live["kv_indices"] = torch.full((case.num_steps + 1, room), SENTINEL, dtype=live["kv_indices"].dtype,
                                    device=TEST_CUDA)
    graph = capture_cuda_graph(lambda: sgl_meta.build_draft_decode_kv_indices(**live))
    for _ in range(3):
        fresh = make(case, gen, "cpu")
        for k in ("seq_lens", "req_pool_indices", "req_to_token", "positions"):
            live[k].copy_(fresh[k])
        for k in OUTPUTS:
            live[k].fill_(SENTINEL)
        want = formula(on_device(live, "cpu"))
        graph.replay()
        torch.cuda.synchronize()
        assert_outputs_equal(live, want, f"graph replay, {name}")


def _tripped(script: str) -> str:
    """The output of ``script`` run in a child process (a device assert poisons the CUDA context), which must fail."""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    return out


@pytest.mark.gpu
def test_hostile_request_in_a_later_chunk_trips_device_assert():
    """Request 1500 of 1600 (the second chunk of lengths) outside req_to_token: the block holding it names it."""
    script = textwrap.dedent(
        """
        import torch, sgl_meta
        bs = 1600
        r2t = torch.arange(bs * 64, dtype=torch.int32, device="cuda").view(bs, 64)
        req = torch.arange(bs, device="cuda")
        req[1500] = bs
        lens = torch.full((bs,), 20, device="cuda")
        pos = lens + 1
        out = torch.zeros(2, bs * 30, dtype=torch.int32, device="cuda")
        ptr = torch.zeros(2, bs + 1, dtype=torch.int32, device="cuda")
        sgl_meta.build_draft_decode_kv_indices(req_to_token=r2t, req_pool_indices=req, seq_lens=lens, positions=pos,
                                               kv_indices=out, kv_indptr=ptr, topk=1, num_steps=2)
        torch.cuda.synchronize()
        """
    )
    out = _tripped(script)
    assert "req_pool_indices[1500] = 1600 is outside" in out, out


@pytest.mark.gpu
@pytest.mark.parametrize("what", ["req", "len", "row", "out", "positions"])
def test_hostile_values_trip_device_assert(what):
    script = textwrap.dedent(
        f"""
        import torch, sgl_meta
        what = "{what}"
        r2t = torch.arange(4 * 64, dtype=torch.int32, device="cuda").view(4, 64)
        req = torch.tensor([1, 4 if what == "req" else 2], device="cuda")
        lens = torch.tensor([3, -2 if what == "len" else (63 if what == "row" else 20)], device="cuda")
        pos = torch.tensor([3, 3, -1 if what == "positions" else 20, 20], device="cuda")
        out = torch.zeros(2, 20 if what == "out" else 100, dtype=torch.int32, device="cuda")
        ptr = torch.zeros(2, 5, dtype=torch.int32, device="cuda")
        sgl_meta.build_draft_decode_kv_indices(req_to_token=r2t, req_pool_indices=req, seq_lens=lens, positions=pos,
                                               kv_indices=out, kv_indptr=ptr, topk=2, num_steps=2)
        torch.cuda.synchronize()
        """
    )
    out = _tripped(script)
    assert "sgl_meta: build_draft_decode_kv_indices" in out, out
