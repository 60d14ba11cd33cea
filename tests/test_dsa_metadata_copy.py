"""fused_metadata_copy / fused_metadata_copy_multi: fused kernels vs the eager reference."""

from __future__ import annotations

import dataclasses
import inspect
import random

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from dsa_metadata_copy_cases import (
    DECODE,
    DRAFT_EXTEND,
    DST_FIELDS,
    EDGE_CASES,
    SRC_FIELDS,
    TARGET_VERIFY,
    DsaCase,
    clone_sets,
    make_case,
    multi_lists,
    random_case,
)
from helpers import TEST_CUDA, assert_sets, capture_cuda_graph, poison_

# Every test runs through the eager fast path and through torch.ops (conftest.py).
pytestmark = pytest.mark.usefixtures("call_path")

OP = torch.ops.sgl_meta.fused_metadata_copy.default
OP_MULTI = torch.ops.sgl_meta.fused_metadata_copy_multi.default
MODES = [DECODE, TARGET_VERIFY, DRAFT_EXTEND]


def run_single(fn, sources, dests, scalars):
    out = clone_sets(dests)
    fn(**sources, **out[0], **scalars)
    return out


def run_multi(fn, sources, dests, scalars):
    out = clone_sets(dests)
    fn(**sources, **multi_lists(out), **scalars)
    return out


def run_reference(sources, dests, scalars):
    out = clone_sets(dests)
    for d in out:
        reference.fused_metadata_copy(**sources, **d, **scalars)
    return out


def check_single(case: DsaCase, gen, device):
    sources, dests, scalars = make_case(dataclasses.replace(case, sets=1), gen, device)
    want = run_reference(sources, dests, scalars)
    got = run_single(sgl_meta.fused_metadata_copy, sources, dests, scalars)
    assert_sets(got, want, str(case))
    return dests, got


def check_multi(case: DsaCase, gen, device):
    sources, dests, scalars = make_case(case, gen, device)
    want = run_reference(sources, dests, scalars)
    got = run_multi(sgl_meta.fused_metadata_copy_multi, sources, dests, scalars)
    assert_sets(got, want, str(case))
    return dests, got


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases_single(name, gen, device):
    check_single(EDGE_CASES[name], gen, device)


@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases_multi(name, gen, device):
    check_multi(dataclasses.replace(EDGE_CASES[name], sets=3), gen, device)


OPTIONALS = {
    "all": dict(real_page_table=True, flashmla=True),
    "none": dict(real_page_table=False, flashmla=False),
    "real": dict(real_page_table=True, flashmla=False),
    "flashmla": dict(real_page_table=False, flashmla=True),
}


@pytest.mark.parametrize("optionals", sorted(OPTIONALS))
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k", [1, 2, 3, 5])
def test_multi_k_sets(k, mode, optionals, gen, device):
    case = DsaCase(mode=mode, sets=k, bs=6, max_len=130, max_seqlen_k=67, layout=None, **OPTIONALS[optionals])
    check_multi(case, gen, device)


@pytest.mark.parametrize("k", [16, 17, 33])
def test_multi_more_sets_than_one_launch(k, gen, device):
    """K > 16 destination sets take several launches; every set must be written."""
    check_multi(DsaCase(mode=TARGET_VERIFY, sets=k, bs=3, max_seqlen_k=20, layout=None), gen, device)


def test_multi_one_misaligned_set_among_aligned(gen, device):
    """One misaligned destination forces the scalar path for the whole launch."""
    case = DsaCase(sets=4, bs=9, max_len=256, layout="vec")
    sources, dests, scalars = make_case(case, gen, device)
    dests[2] = make_case(dataclasses.replace(case, sets=1, layout="offset"), gen, device)[1][0]
    want = run_reference(sources, dests, scalars)
    got = run_multi(sgl_meta.fused_metadata_copy_multi, sources, dests, scalars)
    assert_sets(got, want, "mixed alignment")


@pytest.mark.parametrize("i", range(40))
def test_random_single(i, gen, device):
    rng = random.Random(int(torch.randint(0, 2**31, (1,), generator=gen)))
    check_single(random_case(rng, sets=1), gen, device)


@pytest.mark.parametrize("i", range(40))
def test_random_multi(i, gen, device):
    rng = random.Random(int(torch.randint(0, 2**31, (1,), generator=gen)))
    check_multi(random_case(rng), gen, device)


@pytest.mark.parametrize("mode", MODES)
def test_bs0_writes_nothing(mode, gen, device):
    dests, got = check_single(DsaCase(mode=mode, bs=0), gen, device)
    assert_sets(got, dests, "bs=0 (single) must leave every output untouched")
    dests, got = check_multi(DsaCase(mode=mode, bs=0, sets=3), gen, device)
    assert_sets(got, dests, "bs=0 (multi) must leave every output untouched")


@pytest.mark.parametrize("mode", MODES)
def test_writes_exactly_the_regions(mode, gen, device):
    """Independent of the reference: the written region has the source values and
    everything else (element 0 of the cumsums, padding) keeps its poison."""
    case = DsaCase(mode=mode, bs=7, sets=2, layout=None)
    sources, dests, scalars = make_case(case, gen, device)
    got = run_multi(sgl_meta.fused_metadata_copy_multi, sources, dests, scalars)
    bs = case.bs
    rows = bs if mode == DECODE else sources["page_indices_src"].shape[0]
    cols = case.max_len if mode == DECODE else case.max_seqlen_k
    n = bs if mode == DECODE else scalars["seqlens_expanded_size"]
    for before, after in zip(dests, got):
        s, b, a = sources, before, after
        assert torch.equal(a["cache_seqlens_dst"][:bs], s["cache_seqlens_src"][:bs])
        assert torch.equal(a["cache_seqlens_dst"][bs:], b["cache_seqlens_dst"][bs:])
        assert a["cu_seqlens_k_dst"][0] == b["cu_seqlens_k_dst"][0]
        assert torch.equal(a["cu_seqlens_k_dst"][1 : bs + 1], s["cu_seqlens_k_src"][1 : bs + 1])
        assert torch.equal(a["cu_seqlens_k_dst"][bs + 1 :], b["cu_seqlens_k_dst"][bs + 1 :])
        assert torch.equal(a["page_table_1_dst"][:rows, :cols], s["page_indices_src"][:rows, :cols])
        assert torch.equal(a["page_table_1_dst"][:rows, cols:], b["page_table_1_dst"][:rows, cols:])
        assert torch.equal(a["page_table_1_dst"][rows:], b["page_table_1_dst"][rows:])
        assert a["dsa_cu_seqlens_k_dst"][0] == b["dsa_cu_seqlens_k_dst"][0]
        assert torch.equal(a["dsa_cu_seqlens_k_dst"][1 : n + 1], s["dsa_cu_seqlens_k_src"][1 : n + 1])
        assert torch.equal(a["dsa_cache_seqlens_dst"][n:], b["dsa_cache_seqlens_dst"][n:])
        rc = case.real_cols
        assert torch.equal(a["real_page_table_dst"][:rows, :rc], s["real_page_table_src"][:rows])
        assert torch.equal(a["real_page_table_dst"][:rows, rc:], b["real_page_table_dst"][:rows, rc:])
        assert torch.equal(a["flashmla_metadata_dst"], s["flashmla_metadata_src"])
        assert torch.equal(a["flashmla_num_splits_dst"][n + 1 :], b["flashmla_num_splits_dst"][n + 1 :])
        if mode != DECODE:
            S = scalars["seqlens_expanded_size"]
            assert torch.equal(a["seqlens_expanded_dst"][:S], s["seqlens_expanded_src"][:S])
            assert torch.equal(a["seqlens_expanded_dst"][S:], b["seqlens_expanded_dst"][S:])


def test_decode_ignores_seqlens_expanded(gen, device):
    case = DsaCase(expanded_in_decode=True, sets=2)
    sources, dests, scalars = make_case(case, gen, device)
    got = run_multi(sgl_meta.fused_metadata_copy_multi, sources, dests, scalars)
    for before, after in zip(dests, got):
        assert torch.equal(after["seqlens_expanded_dst"], before["seqlens_expanded_dst"])


# --- drop-in replacements (SGLang's exact Python signatures) ---

SEED_SINGLE_PARAMS = [
    *SRC_FIELDS,
    *DST_FIELDS,
    "forward_mode",
    "bs",
    "max_len",
    "max_seqlen_k",
    "seqlens_expanded_size",
]
_MULTI_SRC = [f for f in SRC_FIELDS if f != "seqlens_expanded_src"]
SEED_MULTI_PARAMS = [
    *_MULTI_SRC,
    *[f.replace("_src", f"_dst{i}").replace("page_indices", "page_table_1") for i in range(3) for f in _MULTI_SRC],
    "bs",
    "max_len",
    "seqlens_expanded_size",
]


def test_dropin_signatures_match_the_seed():
    single = inspect.signature(sgl_meta.fused_metadata_copy_cuda).parameters
    multi = inspect.signature(sgl_meta.fused_metadata_copy_multi_cuda).parameters
    assert list(single) == SEED_SINGLE_PARAMS
    assert list(multi) == SEED_MULTI_PARAMS
    for params in (single, multi):
        assert all(p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty for p in params.values())


@pytest.mark.parametrize("mode", MODES)
def test_dropin_single_positional(mode, gen, device):
    case = DsaCase(mode=mode, bs=5, layout=None)
    sources, dests, scalars = make_case(case, gen, device)
    want = run_reference(sources, dests, scalars)
    out = clone_sets(dests)
    kw = {**sources, **out[0], **{k: (-1 if v is None else v) for k, v in scalars.items()}}
    sgl_meta.fused_metadata_copy_cuda(*(kw[name] for name in SEED_SINGLE_PARAMS))
    assert_sets(out, want, "fused_metadata_copy_cuda")


@pytest.mark.parametrize("optionals", sorted(OPTIONALS))
def test_dropin_multi_positional(optionals, gen, device):
    case = DsaCase(sets=3, bs=6, max_len=96, layout=None, **OPTIONALS[optionals])
    sources, dests, scalars = make_case(case, gen, device)
    want = run_reference(sources, dests, scalars)
    out = clone_sets(dests)
    kw = {**sources, "bs": case.bs, "max_len": case.max_len, "seqlens_expanded_size": case.bs}
    for i, d in enumerate(out):
        kw.update({k.replace("_dst", f"_dst{i}"): v for k, v in d.items()})
    sgl_meta.fused_metadata_copy_multi_cuda(*(kw[name] for name in SEED_MULTI_PARAMS))
    assert_sets(out, want, "fused_metadata_copy_multi_cuda")


def test_dropin_multi_partial_optional_raises(gen):
    case = DsaCase(sets=3)
    sources, dests, _ = make_case(case, gen, "cpu")
    kw = {**sources, "bs": case.bs, "max_len": case.max_len, "seqlens_expanded_size": case.bs}
    for i, d in enumerate(dests):
        kw.update({k.replace("_dst", f"_dst{i}"): v for k, v in d.items()})
    kw["real_page_table_dst1"] = None
    with pytest.raises(ValueError, match="real_page_table_dst0, real_page_table_dst1 and real_page_table_dst2"):
        sgl_meta.fused_metadata_copy_multi_cuda(*(kw[name] for name in SEED_MULTI_PARAMS))


# --- torch.library / torch.compile / CUDA graphs ---


def positional_args(op, sources, dest_fields, scalars):
    """The op's arguments in schema order (Python wrapper conventions applied)."""
    kw = {**sources, **dest_fields, **{k: (-1 if v is None else v) for k, v in scalars.items()}}
    if op is OP_MULTI:
        kw.update({k: ([] if kw[k] is None else kw[k]) for k in DST_FIELDS})
    return tuple(kw[a.name] for a in op._schema.arguments)


@pytest.mark.parametrize("mode", MODES)
def test_opcheck_single(mode, gen, device):
    sources, dests, scalars = make_case(DsaCase(mode=mode, layout=None), gen, device)
    torch.library.opcheck(OP, positional_args(OP, sources, dests[0], scalars))


@pytest.mark.parametrize("optionals", ["all", "none"])
@pytest.mark.parametrize("mode", MODES)
def test_opcheck_multi(mode, optionals, gen, device):
    case = DsaCase(mode=mode, sets=3, layout=None, **OPTIONALS[optionals])
    sources, dests, scalars = make_case(case, gen, device)
    torch.library.opcheck(OP_MULTI, positional_args(OP_MULTI, sources, multi_lists(dests), scalars))


@pytest.mark.parametrize("mode", [DECODE, TARGET_VERIFY])
def test_torch_compile_fullgraph_single(mode, gen, device):
    sources, dests, scalars = make_case(DsaCase(mode=mode), gen, device)
    want = run_reference(sources, dests, scalars)

    @torch.compile(fullgraph=True, dynamic=False)
    def refresh(**kw):
        sgl_meta.fused_metadata_copy(**kw)

    torch._dynamo.reset()
    got = run_single(refresh, sources, dests, scalars)
    assert_sets(got, want, "torch.compile single")


@pytest.mark.parametrize("optionals", ["all", "none"])
@pytest.mark.parametrize("mode", [DECODE, DRAFT_EXTEND])
def test_torch_compile_fullgraph_multi(mode, optionals, gen, device):
    case = DsaCase(mode=mode, sets=3, **OPTIONALS[optionals])
    sources, dests, scalars = make_case(case, gen, device)
    want = run_reference(sources, dests, scalars)

    @torch.compile(fullgraph=True, dynamic=False)
    def refresh(**kw):
        sgl_meta.fused_metadata_copy_multi(**kw)

    torch._dynamo.reset()
    got = run_multi(refresh, sources, dests, scalars)
    assert_sets(got, want, "torch.compile multi")


def test_torch_compile_fullgraph_dropin_multi(gen, device):
    case = DsaCase(sets=3)
    sources, dests, scalars = make_case(case, gen, device)
    want = run_reference(sources, dests, scalars)
    out = clone_sets(dests)
    kw = {**sources, "bs": case.bs, "max_len": case.max_len, "seqlens_expanded_size": case.bs}
    for i, d in enumerate(out):
        kw.update({k.replace("_dst", f"_dst{i}"): v for k, v in d.items()})
    args = [kw[name] for name in SEED_MULTI_PARAMS]
    torch._dynamo.reset()
    torch.compile(sgl_meta.fused_metadata_copy_multi_cuda, fullgraph=True, dynamic=False)(*args)
    assert_sets(out, want, "torch.compile fused_metadata_copy_multi_cuda")


@pytest.mark.parametrize("multi", [False, True], ids=["single", "multi"])
def test_fake_cuda_tracing_without_gpu(multi, gen):
    """The CUDA schema path traces with fake CUDA tensors (no GPU needed)."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    case = DsaCase(mode=TARGET_VERIFY, sets=3 if multi else 1)
    sources, dests, scalars = make_case(case, gen, "cpu")
    flat = {**sources, **{f"{k}#{i}": v for i, d in enumerate(dests) for k, v in d.items()}}
    names = [k for k, v in flat.items() if v is not None]
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        fake = [mode.from_tensor(flat[k]).to("cuda") for k in names]

        def fn(*tensors):
            got = dict.fromkeys(flat)
            got.update(zip(names, tensors))
            src = {k: got[k] for k in SRC_FIELDS}
            sets = [{k: got[f"{k}#{i}"] for k in DST_FIELDS} for i in range(case.sets)]
            if multi:
                sgl_meta.fused_metadata_copy_multi(**src, **multi_lists(sets), **scalars)
            else:
                sgl_meta.fused_metadata_copy(**src, **sets[0], **scalars)
            return tensors

        gm = make_fx(fn, tracing_mode="fake")(*fake)
    targets = [n.target for n in gm.graph.nodes if n.op == "call_function"]
    assert (OP_MULTI if multi else OP) in targets
    assert all(t.device.type == "cuda" for t in fake)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("multi", [False, True], ids=["single", "multi"])
def test_cuda_graph_capture_and_replay(multi, mode, gen):
    case = DsaCase(mode=mode, bs=16, sets=3 if multi else 1, max_len=2048, max_seqlen_k=2048, real_cols=32)
    sources, dests, scalars = make_case(case, gen, TEST_CUDA)
    static_src = dict(sources)
    static_dst = clone_sets(dests)
    call = (
        (lambda: sgl_meta.fused_metadata_copy_multi(**static_src, **multi_lists(static_dst), **scalars))
        if multi
        else (lambda: sgl_meta.fused_metadata_copy(**static_src, **static_dst[0], **scalars))
    )
    graph = capture_cuda_graph(call)
    for _ in range(3):  # new source values, new poison in the destinations
        for v in static_src.values():
            if v is not None:
                poison_(v, gen)
        for d in static_dst:
            for v in d.values():
                if v is not None:
                    poison_(v, gen)
        before = clone_sets(static_dst)
        graph.replay()
        torch.cuda.synchronize()
        want = run_reference(static_src, before, scalars)
        assert_sets(static_dst, want, "CUDA graph replay")


@pytest.mark.gpu
@pytest.mark.parametrize("multi", [False, True], ids=["single", "multi"])
def test_runs_on_the_tensors_device_not_the_current_one(multi, gen):
    if torch.cuda.device_count() < 2:
        pytest.skip("needs two GPUs")
    case = DsaCase(mode=TARGET_VERIFY, sets=2 if multi else 1)
    sources, dests, scalars = make_case(case, gen, "cuda:1")
    want = run_reference(sources, dests, scalars)
    with torch.cuda.device(0):
        if multi:
            got = run_multi(sgl_meta.fused_metadata_copy_multi, sources, dests, scalars)
        else:
            got = run_single(sgl_meta.fused_metadata_copy, sources, dests, scalars)
    assert_sets(got, want, "cuda:1")
