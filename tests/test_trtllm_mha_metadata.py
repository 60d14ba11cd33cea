"""update_trtllm_mha_graph_metadata: fused kernel vs the eager reference."""

from __future__ import annotations

import dataclasses
import random

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from helpers import TEST_CUDA, assert_same, capture_cuda_graph, poison_, run_on_copies
from trtllm_mha_metadata_cases import EDGE_CASES, MetaCase, make_case

OP = torch.ops.sgl_meta.update_trtllm_mha_graph_metadata.default


def check_case(case: MetaCase, gen, device):
    inputs, outputs, scalars = make_case(case, gen, device)
    want = run_on_copies(reference.update_trtllm_mha_graph_metadata, inputs, outputs, scalars)
    got = run_on_copies(sgl_meta.update_trtllm_mha_graph_metadata, inputs, outputs, scalars)
    assert_same(got, want, context=str(case))
    return outputs, got


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases(name, gen, device):
    check_case(EDGE_CASES[name], gen, device)


def test_bs0_writes_nothing(gen, device):
    outputs, got = check_case(MetaCase(bs=0), gen, device)
    assert_same(got, outputs, "bs=0 must leave every output untouched")


def random_case(rng: random.Random) -> MetaCase:
    unified = rng.random() < 0.2
    return MetaCase(
        bs=rng.choice([0, 1, 2, 3, 7, 16, 33, 129, 200]),
        page_size=rng.choice([1, 2, 5, 16, 64, 128]),
        max_seq_pages=rng.choice([0, 1, 3, 17, 64, 130]),
        extra_cols=rng.choice([0, 1, 9]),
        row_pad=rng.choice([0, 5]),
        pool=rng.choice([1, 4, 33]),
        pad_rows=rng.choice([0, 3]),
        pad_cols=rng.choice([0, 2]),
        index_dtype=rng.choice([torch.int32, torch.int64]),
        seqlen_dtype=rng.choice([torch.int32, torch.int64]),
        swa=rng.random() < 0.6,
        n_out=rng.choice([None, 0, 1, 40]),
        swa_out_len=rng.choice([None, 0, 3, 64, 1000]),
        q_mode=rng.choice([0, 1, 2]),
        q_stride=rng.choice([1, 4]),
        seqlen_offset=rng.choice([0, 1, 2, -3]),
        live_pages_only=rng.random() < 0.5,
        negative_slots=rng.random() < 0.7,
        mapping_dtype=rng.choice([torch.int32, torch.int64]),
        skip_page_table=rng.random() < 0.2,
        tables_given=rng.random() < 0.5,
        lone_mapping=rng.random() < 0.5,
        row_offsets=rng.choice([None, None, torch.int32, torch.int64]),
        ragged_verify=rng.random() < 0.5,
        v2p=rng.random() < 0.3,
        swa_v2p=unified or rng.random() < 0.3,
        unified=unified,
    )


@pytest.mark.parametrize("i", range(60))
def test_random(i, gen, device):
    rng = random.Random(int(torch.randint(0, 2**31, (1,), generator=gen)))
    check_case(random_case(rng), gen, device)


# The seqlens-only launch picks its kernel by bs (one row per thread up to 256
# rows, tiles past it): every q_mode, per-row offsets and both dtypes on each side.
@pytest.mark.parametrize("bs", [1, 31, 32, 33, 255, 256, 257, 600])
@pytest.mark.parametrize("q_mode", [0, 1, 2])
def test_seqlens_only_batch_boundaries(bs, q_mode, gen, device):
    for offsets, dtype in ((None, torch.int32), (torch.int64, torch.int64)):
        check_case(MetaCase(bs=bs, pool=bs + 1, q_mode=q_mode, skip_page_table=True, tables_given=False,
                            row_offsets=offsets, ragged_verify=offsets is not None, seqlen_dtype=dtype,
                            max_seq_pages=3), gen, device)


def test_live_pages_only_keeps_tail(gen, device):
    case = MetaCase(live_pages_only=True, bs=8, max_seq_pages=50, page_size=4)
    inputs, outputs, scalars = make_case(case, gen, device)
    got = run_on_copies(sgl_meta.update_trtllm_mha_graph_metadata, inputs, outputs, scalars)
    lens = (inputs["seq_lens"][: case.bs].long() + case.seqlen_offset).clamp(min=0)
    live = ((lens + case.page_size - 1) // case.page_size).clamp(max=case.max_seq_pages)
    for i in range(case.bs):
        n = int(live[i])
        for name in ("page_table", "swa_page_table"):
            assert torch.equal(got[name][i, n:], outputs[name][i, n:]), (name, i)
    assert int(live.min()) < case.max_seq_pages, "test needs a row with a dead tail"


def test_floor_division_of_negative_slots(device):
    req_to_token = torch.tensor([[-1, 5, -64, 7, -65, 0, 63, 2]], dtype=torch.int32, device=device)
    kw = dict(
        req_pool_indices=torch.zeros(1, dtype=torch.int64, device=device),
        seq_lens=torch.tensor([8], dtype=torch.int32, device=device),
        req_to_token=req_to_token,
        cache_seqlens=torch.full((1,), 99, dtype=torch.int32, device=device),
        cu_seqlens_k=torch.full((2,), 99, dtype=torch.int32, device=device),
        page_table=torch.full((1, 4), 99, dtype=torch.int32, device=device),
        bs=1, seqlen_offset=0, max_seq_pages=4, page_size=2,
    )
    sgl_meta.update_trtllm_mha_graph_metadata(**kw)
    assert kw["page_table"].tolist() == [[-1, -32, -33, 31]]  # floor, not trunc


def positional(kwargs: dict) -> tuple:
    """The schema's positional arguments, defaults where kwargs has none."""
    return tuple(kwargs[a.name] if a.name in kwargs else a.default_value for a in OP._schema.arguments)


OPCHECK_CASES = {
    "cumsum": MetaCase(q_mode=1),
    "skip_tables_none": MetaCase(q_mode=1, skip_page_table=True, tables_given=False),
    "lone_mapping_int32": MetaCase(swa=False, lone_mapping=True, mapping_dtype=torch.int32),
    "ragged_verify": MetaCase(row_offsets=torch.int32, ragged_verify=True, q_mode=1, live_pages_only=True),
    "unified": MetaCase(v2p=True, swa_v2p=True, unified=True, live_pages_only=True),
}


@pytest.mark.parametrize("name", sorted(OPCHECK_CASES))
def test_opcheck(name, gen, device):
    inputs, outputs, scalars = make_case(OPCHECK_CASES[name], gen, device)
    torch.library.opcheck(OP, positional({**inputs, **outputs, **scalars}))


COMPILE_CASES = {
    "strided_live": MetaCase(q_mode=2, live_pages_only=True),
    "skip_tables_none": MetaCase(q_mode=1, skip_page_table=True, tables_given=False),
    "lone_mapping_int32": MetaCase(swa=False, lone_mapping=True, mapping_dtype=torch.int32),
    "ragged_verify": MetaCase(row_offsets=torch.int64, ragged_verify=True, q_mode=1, live_pages_only=True),
    "unified": MetaCase(v2p=True, swa_v2p=True, unified=True, live_pages_only=True),
}


@pytest.mark.parametrize("name", sorted(COMPILE_CASES))
def test_torch_compile_fullgraph(name, gen, device):
    case = COMPILE_CASES[name]
    inputs, outputs, scalars = make_case(case, gen, device)
    want = run_on_copies(reference.update_trtllm_mha_graph_metadata, inputs, outputs, scalars)

    @torch.compile(fullgraph=True, dynamic=False)
    def refresh(**kw):
        sgl_meta.update_trtllm_mha_graph_metadata(**kw)

    torch._dynamo.reset()
    got = run_on_copies(refresh, inputs, outputs, scalars)
    assert_same(got, want, "torch.compile")


def test_fake_cuda_tracing_without_gpu(gen):
    """The CUDA schema path traces with fake CUDA tensors (no GPU needed)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    inputs, outputs, scalars = make_case(MetaCase(), gen, "cpu")
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fake = {k: (mode.from_tensor(v).to("cuda") if isinstance(v, torch.Tensor) else v)
                for k, v in {**inputs, **outputs}.items()}

        def fn(*tensors):
            kw = dict(zip(fake.keys(), tensors))
            sgl_meta.update_trtllm_mha_graph_metadata(**kw, **scalars)
            return tensors

        gm = make_fx(fn, tracing_mode="fake")(*fake.values())
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert OP in targets
    assert all(v is None or v.device.type == "cuda" for v in fake.values())


GRAPH_CASES = {
    "cumsum": MetaCase(bs=17, page_size=16, max_seq_pages=70, q_mode=1, pad_rows=4),
    "skip_tables_none": MetaCase(bs=17, q_mode=1, skip_page_table=True, tables_given=False),
    "skip_bs1": MetaCase(bs=1, skip_page_table=True, tables_given=False),
    "skip_bs300": MetaCase(bs=300, pool=301, q_mode=1, skip_page_table=True),
    "lone_mapping_int32_live": MetaCase(bs=9, swa=False, lone_mapping=True, mapping_dtype=torch.int32,
                                        live_pages_only=True),
    "swa_int32_mapping": MetaCase(bs=9, mapping_dtype=torch.int32, live_pages_only=True),
    "ragged_verify": MetaCase(bs=17, max_seq_pages=40, row_offsets=torch.int32, ragged_verify=True, q_mode=1,
                              live_pages_only=True, seqlen_offset=0),
    "ragged_verify_bs64": MetaCase(bs=64, pool=65, max_seq_pages=20, row_offsets=torch.int64, ragged_verify=True,
                                   q_mode=1, live_pages_only=True, seqlen_offset=0),
    "unified": MetaCase(bs=17, max_seq_pages=40, v2p=True, swa_v2p=True, unified=True, live_pages_only=True),
    "unified_bs1": MetaCase(bs=1, max_seq_pages=40, v2p=True, swa_v2p=True, unified=True, live_pages_only=True),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(GRAPH_CASES))
def test_cuda_graph_capture_and_replay(name, gen):
    case = GRAPH_CASES[name]
    inputs, outputs, scalars = make_case(case, gen, TEST_CUDA)
    static_in = {k: (None if v is None else v.clone()) for k, v in inputs.items()}
    static_out = {k: (None if v is None else v.clone()) for k, v in outputs.items()}
    graph = capture_cuda_graph(lambda: sgl_meta.update_trtllm_mha_graph_metadata(**static_in, **static_out, **scalars))
    for _ in range(3):  # new values in the static inputs, new poison in the outputs
        fresh, _, _ = make_case(case, gen, TEST_CUDA)
        for k, v in fresh.items():
            if v is not None:
                static_in[k].copy_(v)
        for v in static_out.values():
            if v is not None:
                poison_(v, gen)
        before = {k: (None if v is None else v.clone()) for k, v in static_out.items()}
        graph.replay()
        torch.cuda.synchronize()
        want = run_on_copies(reference.update_trtllm_mha_graph_metadata, static_in, before, scalars)
        assert_same(static_out, want, "CUDA graph replay")


@pytest.mark.gpu
def test_runs_on_the_tensors_device_not_the_current_one(gen):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    inputs, outputs, scalars = make_case(MetaCase(), gen, "cuda:1")
    want = run_on_copies(reference.update_trtllm_mha_graph_metadata, inputs, outputs, scalars)
    with torch.cuda.device(0):
        got = run_on_copies(sgl_meta.update_trtllm_mha_graph_metadata, inputs, outputs, scalars)
    assert_same(got, want, "cuda:1")


@pytest.mark.parametrize("hostile", ["req_pool_indices", "out_cache_loc", "swa_slot"])
def test_cpu_hostile_value_raises_before_writing(hostile, gen):
    """A hostile device value raises on CPU and leaves every output untouched."""
    case = MetaCase(bs=6, n_out=6, swa_out_len=9)
    inputs, outputs, scalars = make_case(case, gen, "cpu")
    if hostile == "req_pool_indices":
        inputs["req_pool_indices"][3] = case.pool + 5
    elif hostile == "out_cache_loc":
        inputs["out_cache_loc"][4] = inputs["swa_mapping"].numel() + 7
    else:  # a gathered slot of the last row past the SWA mapping
        row = int(inputs["req_pool_indices"][case.bs - 1])
        inputs["req_to_token"][row, 0] = inputs["swa_mapping"].numel()
    outs = {k: (None if v is None else v.clone()) for k, v in outputs.items()}
    with pytest.raises(RuntimeError, match="sgl_meta.update_trtllm_mha_graph_metadata: .* is outside"):
        sgl_meta.update_trtllm_mha_graph_metadata(**inputs, **outs, **scalars)
    assert_same(outs, outputs, f"hostile {hostile}: outputs must be untouched")


def test_skip_page_table_touches_only_seqlens(gen, device):
    """skip_page_table: tables and swa_out_cache_loc untouched, hostile indices
    and slots unread (the unified pool passes live buffers it refreshes itself)."""
    case = MetaCase(skip_page_table=True, q_mode=1, bs=7)
    inputs, outputs, scalars = make_case(case, gen, device)
    inputs["req_pool_indices"].fill_(10**6)  # never read
    inputs["req_to_token"].fill_(2**31 - 1)
    got = run_on_copies(sgl_meta.update_trtllm_mha_graph_metadata, inputs, outputs, scalars)
    for name in ("page_table", "swa_page_table", "swa_out_cache_loc"):
        assert torch.equal(got[name], outputs[name]), name
    lens = (inputs["seq_lens"][: case.bs].long() + case.seqlen_offset).to(torch.int32)
    assert torch.equal(got["cache_seqlens"][: case.bs], lens)
    assert got["cu_seqlens_k"][: case.bs + 1].tolist() == [0] + torch.cumsum(lens, 0).tolist()


def test_page_table_none_needs_skip(gen, device):
    inputs, outputs, scalars = make_case(MetaCase(swa=False, n_out=None, swa_out_len=None), gen, device)
    outputs["page_table"] = None
    with pytest.raises(RuntimeError, match="page_table is required .*unless skip_page_table=True"):
        sgl_meta.update_trtllm_mha_graph_metadata(**inputs, **outputs, **scalars)


def test_sglang_0_5_23_call_shapes(gen, device):
    """The keyword sets SGLang 0.5.23's _apply_cuda_graph_metadata passes: unified
    pool (page_table=None, skip_page_table=True, a lone swa_mapping) and static pool."""
    for unified in (True, False):
        case = MetaCase(swa=False, lone_mapping=True, n_out=6, swa_out_len=None, live_pages_only=True)
        inputs, outputs, scalars = make_case(case, gen, device)
        if unified:
            outputs.update(page_table=None, swa_page_table=None, swa_out_cache_loc=None)
        scalars["skip_page_table"] = unified
        want = run_on_copies(reference.update_trtllm_mha_graph_metadata, inputs, outputs, scalars)
        got = run_on_copies(sgl_meta.update_trtllm_mha_graph_metadata, inputs, outputs, scalars)
        assert_same(got, want, f"unified={unified}")


def test_ragged_verify_geometry(gen, device):
    """Independently of the reference: SGLang 0.5.23's ragged verify geometry
    (build_ragged_target_verify_geometry + build_trtllm_mha_page_table's live
    prefix) from one call with per-row offsets and q_mode=CUMSUM."""
    case = MetaCase(bs=6, row_offsets=torch.int32, ragged_verify=True, q_mode=1, live_pages_only=True,
                    seqlen_offset=0, swa=False, n_out=None, swa_out_len=None, negative_slots=False)
    inputs, outputs, scalars = make_case(case, gen, device)
    got = run_on_copies(sgl_meta.update_trtllm_mha_graph_metadata, inputs, outputs, scalars)
    bs, ps = case.bs, case.page_size
    verify = inputs["seqlen_offsets"][:bs].cpu().long()
    cache = (inputs["seq_lens"][:bs].cpu().long() + verify).to(torch.int32)
    assert torch.equal(got["cache_seqlens"][:bs].cpu(), cache)
    assert got["cu_seqlens_k"][: bs + 1].tolist() == [0] + torch.cumsum(cache.long(), 0).tolist()
    assert got["cu_seqlens_q"][: bs + 1].tolist() == [0] + torch.cumsum(verify, 0).tolist()
    r2t = inputs["req_to_token"].cpu()
    for i in range(bs):
        n = min(-(-max(int(cache[i]), 0) // ps), case.max_seq_pages)
        row = int(inputs["req_pool_indices"][i])
        want = (r2t[row, : n * ps : ps].long() // ps).to(torch.int32)
        assert torch.equal(got["page_table"][i, :n].cpu(), want), i
        assert torch.equal(got["page_table"][i, n:].cpu(), outputs["page_table"][i, n:].cpu()), i


def test_unified_pool_tables_like_kv_read_table(gen, device):
    """Independently of the reference, SGLang 0.5.23's kv_read_table formula:
    entry = max(v2p[slot // ps], 0), a negative slot reads virtual page 0."""
    ps = 4
    r2t = torch.tensor([[-1, 0, 0, 0, 9, 0, 0, 0, 12, 0, 0, 0, 5, 0, 0, 0, -7]], dtype=torch.int32)
    v2p = torch.tensor([30, -1, 17, 8], dtype=torch.int64)  # vpage 0 (sink) -> 30, freed page -> 0
    swa_v2p = torch.tensor([-1, 6, 2, 11], dtype=torch.int64)
    t = lambda x, dt=torch.int32: torch.tensor(x, dtype=dt, device=device)  # noqa: E731
    pt, swa = t([[99] * 6]), t([[99] * 6])
    sgl_meta.update_trtllm_mha_graph_metadata(
        req_pool_indices=t([0], torch.int64), seq_lens=t([17]), req_to_token=r2t.to(device),
        cache_seqlens=t([0]), cu_seqlens_k=t([0, 0]), page_table=pt, swa_page_table=swa, bs=1,
        seqlen_offset=0, max_seq_pages=5, page_size=ps, v2p=v2p.to(device), swa_v2p=swa_v2p.to(device),
        live_pages_only=True,
    )
    # slots -1, 9, 12, 5, -7 -> vpages 0, 2, 3, 1, 0
    assert pt.tolist() == [[30, 17, 8, 0, 30, 99]]
    assert swa.tolist() == [[0, 2, 11, 6, 0, 99]]


@pytest.mark.parametrize("which", ["v2p", "swa_v2p"])
def test_cpu_vpage_outside_table_raises_before_writing(which, gen):
    case = MetaCase(v2p=True, swa_v2p=True, unified=True, bs=6)
    inputs, outputs, scalars = make_case(case, gen, "cpu")
    row = int(inputs["req_pool_indices"][case.bs - 1])
    inputs["req_to_token"][row, 0] = inputs[which].numel() * case.page_size  # one page past the table
    if which == "swa_v2p":  # the full table covers it: only swa_v2p is short
        inputs["v2p"] = torch.cat([inputs["v2p"], inputs["v2p"]])
    outs = {k: (None if v is None else v.clone()) for k, v in outputs.items()}
    with pytest.raises(RuntimeError, match=rf"virtual page .* is outside \[0, {inputs[which].numel()}\) \({which}.numel\(\)\)"):
        sgl_meta.update_trtllm_mha_graph_metadata(**inputs, **outs, **scalars)
    assert_same(outs, outputs, f"hostile {which}: outputs must be untouched")
