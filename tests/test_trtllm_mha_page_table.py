"""build_trtllm_mha_page_table: fused kernel vs the eager reference."""

from __future__ import annotations

import dataclasses
import inspect
import random
import subprocess
import sys
import textwrap

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from helpers import TEST_CUDA, assert_same, capture_cuda_graph, poison_
from trtllm_mha_page_table_cases import EDGE_CASES, PAGE_SIZES, CaseData, PageTableCase, make_case

OP = torch.ops.sgl_meta.build_trtllm_mha_page_table.default


def check_case(case: PageTableCase, gen, device) -> tuple[CaseData, dict]:
    data = make_case(case, gen, device)
    want = data.run(reference.build_trtllm_mha_page_table)
    got = data.run(sgl_meta.build_trtllm_mha_page_table)
    assert_same(got, want, context=str(case))
    assert_untouched_outside_live(data, got)
    return data, got


def assert_untouched_outside_live(data: CaseData, got: dict) -> None:
    """Independently of the reference: only [r, :n_r] of each view changed."""
    c, o = data.case, data.case.offset
    for name, buf in got.items():
        if buf is None:
            continue
        before, after = data.buffers[name].cpu(), buf.cpu()
        written = torch.zeros(before.shape, dtype=torch.bool)
        for r, n in enumerate(data.live_pages()):
            written[o + r, o : o + n] = True
        changed = before != after
        stray = changed & ~written
        assert not stray.any(), f"{name}: wrote outside the live pages at {stray.nonzero()[0].tolist()}"


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases(name, gen, device):
    check_case(EDGE_CASES[name], gen, device)


@pytest.mark.parametrize("page_size", PAGE_SIZES)
@pytest.mark.parametrize("swa", [False, True], ids=["full", "swa"])
def test_page_sizes(page_size, swa, gen, device):
    check_case(PageTableCase(bs=7, page_size=page_size, width=300 // page_size + 3, swa=swa), gen, device)


def test_bs0_writes_nothing(gen, device):
    data, got = check_case(PageTableCase(bs=0), gen, device)
    assert_same(got, data.buffers, "bs=0 must leave every buffer untouched")


def random_case(rng: random.Random) -> PageTableCase:
    page_size = rng.choice([1, 2, 3, 16, 32, 64, 100, 128, 256])
    width = rng.choice([0, 1, 3, 17, 64, 130, 600])
    short = lambda: rng.randrange(1, max(2, width * page_size + 50))  # noqa: E731
    ctx = rng.choice([None, None, None, 0, 1, short(), short()])
    return PageTableCase(
        bs=rng.choice([0, 1, 2, 3, 7, 16, 33, 129]),
        width=width,
        page_size=page_size,
        ctx=ctx,
        extra_cols=rng.choice([0, 1, 9]),
        row_pad=rng.choice([0, 5]),
        pool=rng.choice([1, 4, 33]),
        offset=rng.choice([0, 2]),
        pad_rows=rng.choice([0, 3]),
        pad_cols=rng.choice([0, 2]),
        index_dtype=rng.choice([torch.int32, torch.int64]),
        seqlen_dtype=rng.choice([torch.int32, torch.int64]),
        swa=rng.random() < 0.6,
        swa_size=rng.choice([None, 1, 7, 10**6]),
        negative_slots=rng.random() < 0.7,
        prefill=rng.choice([None, None, -1]),
        mapping_dtype=rng.choice([torch.int32, torch.int64]),
    )


@pytest.mark.parametrize("i", range(80))
def test_random(i, gen, device):
    rng = random.Random(int(torch.randint(0, 2**31, (1,), generator=gen)))
    check_case(random_case(rng), gen, device)


# Upstream-like decode batches: a req_to_token pool of `ctx`-token rows, a table
# as wide as the context (max_num_pages), lengths at most ctx / 8, prefilled -1.
@pytest.mark.parametrize("ctx", [2048, 4096, 131072])
@pytest.mark.parametrize("bs", [1, 7, 32])
@pytest.mark.parametrize("page_size", [1, 64])
def test_upstream_shapes(ctx, bs, page_size, gen, device):
    width = -(-ctx // page_size)
    case = PageTableCase(
        bs=bs, width=width, page_size=page_size, ctx=ctx, row_pad=0, pool=bs + 3, offset=0,
        pad_rows=1, pad_cols=0, min_len=1, max_len=ctx // 8, prefill=-1, negative_slots=False,
        swa=bs != 32,
    )
    data, got = check_case(case, gen, device)
    for name, buf in got.items():
        if buf is None:
            continue
        for r, n in enumerate(data.live_pages()):
            assert n >= 1
            assert bool((buf[r, n:] == -1).all()), f"{name} row {r}: -1 tail overwritten"
        assert bool((buf[bs:] == -1).all()), f"{name}: padded rows overwritten"


def test_floor_division_and_swa_negative_slots(device):
    """A negative slot reads full_to_swa[0] (SGLang's builder clamps it there); a
    slot past the mapping is an error (tests/test_hostile_lengths.py)."""
    req_to_token = torch.tensor([[-1, 5, -64, 7, -65, 0, 63, 2, 9, 9, 11, 1]], dtype=torch.int32)
    full_to_swa = torch.full((64,), 21, dtype=torch.int64)
    full_to_swa[0] = 10
    t = lambda x, dt=torch.int32: torch.tensor(x, dtype=dt, device=device)  # noqa: E731
    page_table = t([[99] * 8])
    swa_page_table = t([[99] * 8])
    sgl_meta.build_trtllm_mha_page_table(
        req_to_token.to(device), t([0], torch.int64), t([11]), page_table, 2,
        swa_page_table, full_to_swa.to(device),
    )
    # slots at page starts: -1, -64, -65, 63, 9, 11 (6 pages of 11 tokens)
    assert page_table.tolist() == [[-1, -32, -33, 31, 4, 5, 99, 99]]  # floor, not trunc
    # max(slot, 0): 0, 0, 0, 63, 9, 11 -> 10, 10, 10, 21, 21, 21 -> // 2
    assert swa_page_table.tolist() == [[5, 5, 5, 10, 10, 10, 99, 99]]


def test_swa_sentinels_floor(device):
    """A -1 (or any negative) mapping value gives floor(value / page_size)."""
    req_to_token = torch.tensor([[0, 0, 1, 1, 2, 2]], dtype=torch.int32, device=device)
    full_to_swa = torch.tensor([-1, -3, 5], dtype=torch.int64, device=device)
    swa = torch.full((1, 3), 7, dtype=torch.int32, device=device)
    pt = torch.full((1, 3), 7, dtype=torch.int32, device=device)
    lens = torch.tensor([6], dtype=torch.int64, device=device)
    idx = torch.zeros(1, dtype=torch.int32, device=device)
    sgl_meta.build_trtllm_mha_page_table(req_to_token, idx, lens, pt, 2, swa, full_to_swa)
    assert pt.tolist() == [[0, 0, 1]]
    assert swa.tolist() == [[-1, -2, 2]]


def test_positional_and_keyword_calls_agree(gen, device):
    data = make_case(PageTableCase(bs=6, width=12), gen, device)
    kw = data.run(sgl_meta.build_trtllm_mha_page_table)

    def positional(req_to_token, req_pool_indices, cache_seqlens, full_to_swa, page_table,
                   swa_page_table, page_size):
        sgl_meta.build_trtllm_mha_page_table(
            req_to_token, req_pool_indices, cache_seqlens, page_table, page_size,
            swa_page_table, full_to_swa,
        )

    assert_same(data.run(positional), kw, "positional call")
    assert list(inspect.signature(sgl_meta.build_trtllm_mha_page_table).parameters) == [
        "req_to_token", "req_pool_indices", "cache_seqlens", "page_table", "page_size",
        "swa_page_table", "full_to_swa",
    ]


def test_opcheck(gen, device):
    data = make_case(PageTableCase(bs=6, width=10, offset=0, pad_rows=0, pad_cols=0), gen, device)
    kwargs = {**data.inputs, **data.views(data.buffers), "page_size": data.case.page_size}
    names = [a.name for a in OP._schema.arguments]
    torch.library.opcheck(OP, tuple(kwargs[n] for n in names))


def test_torch_compile_fullgraph(gen, device):
    """Compiled with the output views taken inside the graph (mutation through a view)."""
    case = PageTableCase(bs=6, width=10, prefill=-1)
    data = make_case(case, gen, device)
    want = data.run(reference.build_trtllm_mha_page_table)
    o = case.offset

    @torch.compile(fullgraph=True, dynamic=False)
    def refresh(req_to_token, req_pool_indices, cache_seqlens, full_to_swa, pt_buf, swa_buf):
        sgl_meta.build_trtllm_mha_page_table(
            req_to_token, req_pool_indices, cache_seqlens, pt_buf[o : o + case.bs, o : o + case.width],
            case.page_size, swa_page_table=swa_buf[o : o + case.bs, o : o + case.width],
            full_to_swa=full_to_swa,
        )

    torch._dynamo.reset()
    got = {k: v.clone() for k, v in data.buffers.items()}
    refresh(**data.inputs, pt_buf=got["page_table"], swa_buf=got["swa_page_table"])
    assert_same(got, want, "torch.compile")


def test_fake_cuda_tracing_without_gpu(gen):
    """The CUDA schema path traces with fake CUDA tensors (no GPU needed)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    data = make_case(PageTableCase(offset=0, pad_rows=0, pad_cols=0), gen, "cpu")
    tensors = {**data.inputs, **data.buffers}
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fake = {k: mode.from_tensor(v).to("cuda") for k, v in tensors.items()}

        def fn(*args):
            kw = dict(zip(fake.keys(), args))
            sgl_meta.build_trtllm_mha_page_table(**kw, page_size=data.case.page_size)
            return args

        gm = make_fx(fn, tracing_mode="fake")(*fake.values())
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert OP in targets
    assert all(v.device.type == "cuda" for v in fake.values())


@pytest.mark.gpu
@pytest.mark.parametrize("swa", [False, True, torch.int32], ids=["full", "swa", "swa_int32"])
def test_cuda_graph_capture_and_replay(swa, gen):
    dtype = torch.int32 if swa is torch.int32 else torch.int64
    case = PageTableCase(bs=17, page_size=16, width=70, pool=23, swa=bool(swa), swa_size=500, mapping_dtype=dtype)
    data = make_case(case, gen, TEST_CUDA)
    static_in = {k: (None if v is None else v.clone()) for k, v in data.inputs.items()}
    static_buf = {k: (None if v is None else v.clone()) for k, v in data.buffers.items()}
    views = data.views(static_buf)

    def call():
        sgl_meta.build_trtllm_mha_page_table(**static_in, **views, page_size=case.page_size)

    graph = capture_cuda_graph(call)
    for _ in range(3):  # new lengths, indices and slots; new poison in the buffers
        fresh = make_case(case, gen, TEST_CUDA)
        for k, v in fresh.inputs.items():
            if v is not None:
                static_in[k].copy_(v)
        for v in static_buf.values():
            if v is not None:
                poison_(v, gen)
        replayed = CaseData(static_in, {k: (None if v is None else v.clone()) for k, v in static_buf.items()}, case)
        graph.replay()
        torch.cuda.synchronize()
        want = replayed.run(reference.build_trtllm_mha_page_table)
        assert_same(static_buf, want, "CUDA graph replay")
        assert_untouched_outside_live(replayed, static_buf)


@pytest.mark.gpu
def test_runs_on_the_tensors_device_not_the_current_one(gen):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    data = make_case(PageTableCase(), gen, "cuda:1")
    want = data.run(reference.build_trtllm_mha_page_table)
    with torch.cuda.device(0):
        got = data.run(sgl_meta.build_trtllm_mha_page_table)
    assert_same(got, want, "cuda:1")


@pytest.mark.gpu
def test_bad_request_index_trips_device_assert():
    """In a child process: a device assert poisons the CUDA context."""
    script = textwrap.dedent(
        """
        import torch, sgl_meta
        r2t = torch.zeros(4, 64, dtype=torch.int32, device="cuda")
        idx = torch.tensor([1, 4], dtype=torch.int64, device="cuda")
        lens = torch.tensor([0, 0], dtype=torch.int32, device="cuda")  # checked whatever the length
        pt = torch.zeros(2, 4, dtype=torch.int32, device="cuda")
        sgl_meta.build_trtllm_mha_page_table(r2t, idx, lens, pt, 16)
        torch.cuda.synchronize()
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "build_trtllm_mha_page_table" in out, out
    assert "req_pool_indices" in out, out
