"""update_trtllm_mha_graph_metadata_multi: K destination sets in one launch,
vs the eager reference (K single-set updates) and vs K calls of the single op."""

from __future__ import annotations

import random

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from helpers import TEST_CUDA, capture_cuda_graph, poison_
from trtllm_mha_metadata_cases import EDGE_CASES, OUTPUT_NAMES, MetaCase, make_multi_case

OP = torch.ops.sgl_meta.update_trtllm_mha_graph_metadata_multi.default
NAME = "sgl_meta.update_trtllm_mha_graph_metadata_multi"


def clone_outputs(outputs: dict) -> dict:
    return {k: (None if v is None else [t.clone() for t in v]) for k, v in outputs.items()}


def run(fn, inputs, outputs, scalars) -> dict:
    outs = clone_outputs(outputs)
    fn(**inputs, **outs, **scalars)
    return outs


def single_calls(inputs, outputs, scalars) -> dict:
    """The same sets written by K calls of the single op (what SGLang records today)."""
    outs = clone_outputs(outputs)
    for k, offset in enumerate(scalars["seqlen_offset"]):
        one = {name: (None if v is None else v[k]) for name, v in outs.items()}
        sgl_meta.update_trtllm_mha_graph_metadata(**inputs, **one, **{**scalars, "seqlen_offset": offset})
    return outs


def assert_sets_equal(got: dict, want: dict, context: str) -> None:
    for name in OUTPUT_NAMES:
        if want[name] is None:
            assert got[name] is None
            continue
        for k, (g, w) in enumerate(zip(got[name], want[name])):
            g, w = g.cpu(), w.cpu()
            if not torch.equal(g, w):
                at = tuple((g != w).nonzero()[0].tolist())
                raise AssertionError(f"{context}: {name}[{k}] differs first at {at}: got {g[at].item()}, "
                                     f"want {w[at].item()} ({int((g != w).sum())} elements)")


def check(case: MetaCase, offsets, gen, device):
    inputs, outputs, scalars = make_multi_case(case, offsets, gen, device)
    want = run(reference.update_trtllm_mha_graph_metadata_multi, inputs, outputs, scalars)
    got = run(sgl_meta.update_trtllm_mha_graph_metadata_multi, inputs, outputs, scalars)
    assert_sets_equal(got, want, f"{case} offsets {offsets}")
    assert_sets_equal(single_calls(inputs, outputs, scalars), got, "K single-op calls vs one multi call")
    return outputs, got


DRAFT_OFFSETS = {  # EAGLE draft steps offset step + 1; any int32 offsets whose lengths stay >= 0
    "k1": [1],
    "k3_draft": [1, 2, 3],
    "k4_draft": [1, 2, 3, 4],
    "k5_two_launches": [1, 2, 3, 4, 5],
    "k9_mixed": [0, -3, 7, 1, 1, 64, 2, -1, 5],
}


@pytest.mark.parametrize("offsets", sorted(DRAFT_OFFSETS))
@pytest.mark.parametrize("name", sorted(EDGE_CASES))
def test_edge_cases(name, offsets, gen, device):
    check(EDGE_CASES[name], DRAFT_OFFSETS[offsets], gen, device)


def test_bs0_writes_nothing(gen, device):
    outputs, got = check(MetaCase(bs=0), [1, 2, 3], gen, device)
    assert_sets_equal(got, outputs, "bs=0 must leave every set untouched")


@pytest.mark.parametrize("i", range(40))
def test_random(i, gen, device):
    from test_trtllm_mha_metadata import random_case

    rng = random.Random(int(torch.randint(0, 2**31, (1,), generator=gen)))
    k = rng.choice([1, 2, 3, 3, 4, 5, 8])
    offsets = [rng.choice([0, 1, 2, 3, 4, -2, 40]) for _ in range(k)]
    check(random_case(rng), offsets, gen, device)


def test_live_prefix_per_set(gen, device):
    """Each set writes its own live prefix (offsets differ by one step) and keeps
    its tail: set k's last live page can be a page the other sets do not write."""
    case = MetaCase(bs=12, page_size=4, max_seq_pages=40, live_pages_only=True, seqlen_offset=0)
    inputs, outputs, scalars = make_multi_case(case, [1, 2, 3], gen, device)
    got = run(sgl_meta.update_trtllm_mha_graph_metadata_multi, inputs, outputs, scalars)
    lens = inputs["seq_lens"][: case.bs].cpu().long()
    crossing = 0
    for k, off in enumerate([1, 2, 3]):
        live = ((lens + off).clamp(min=0) + 3) // 4
        for i in range(case.bs):
            n = min(int(live[i]), case.max_seq_pages)
            assert torch.equal(got["page_table"][k][i, n:].cpu(), outputs["page_table"][k][i, n:].cpu()), (k, i)
            crossing += k > 0 and n > min(int(((lens[i] + 1).clamp(min=0) + 3) // 4), case.max_seq_pages)
    assert crossing > 0, "test needs rows whose later steps cross a page boundary"


def test_errors_name_the_list_element(gen):
    inputs, outputs, scalars = make_multi_case(MetaCase(), [1, 2, 3], gen, "cpu")

    def call(**changes):
        kw = {**inputs, **clone_outputs(outputs), **scalars, **changes}
        sgl_meta.update_trtllm_mha_graph_metadata_multi(**kw)

    pt = outputs["page_table"]
    with pytest.raises(RuntimeError, match=rf"{NAME}: page_table\[2\].size\(1\) must be >= max_seq_pages"):
        call(page_table=[pt[0], pt[1], pt[2][:, :3]])
    with pytest.raises(RuntimeError, match=rf"{NAME}: cu_seqlens_k must hold 3 tensors"):
        call(cu_seqlens_k=outputs["cu_seqlens_k"][:2])
    with pytest.raises(RuntimeError, match=rf"{NAME}: seqlen_offset must hold 3 offsets"):
        call(seqlen_offset=[1, 2])
    with pytest.raises(RuntimeError, match=rf"{NAME}: swa_page_table must hold 3 tensors .*or none, got 2"):
        call(swa_page_table=outputs["swa_page_table"][:2])
    with pytest.raises(RuntimeError, match=rf"{NAME}: seqlen_offset\[1\] = 4294967296 is outside"):
        call(seqlen_offset=[1, 2**32, 3])
    with pytest.raises(RuntimeError, match=rf"{NAME}: cache_seqlens\[[02]\] and cache_seqlens\[[02]\] overlap in memory"):
        cs = outputs["cache_seqlens"]
        call(cache_seqlens=[cs[0], cs[1], cs[0]])
    with pytest.raises(RuntimeError, match=rf"{NAME}: page_table is required .*unless skip_page_table=True"):
        call(page_table=None)
    with pytest.raises(RuntimeError, match=rf"{NAME}: cache_seqlens must hold at least one tensor"):
        call(cache_seqlens=[], cu_seqlens_k=[], page_table=[], swa_page_table=[], swa_out_cache_loc=[],
             cu_seqlens_q=[], seqlen_offset=[])
    with pytest.raises(TypeError, match=rf"{NAME}: cu_seqlens_k\[1\] must be a Tensor, got None"):
        call(cu_seqlens_k=[outputs["cu_seqlens_k"][0], None, outputs["cu_seqlens_k"][2]])
    with pytest.raises(TypeError, match=rf"{NAME}: req_to_token must be a Tensor, got None"):
        call(req_to_token=None)


def test_cpu_hostile_value_raises_before_writing(gen):
    case = MetaCase(bs=6, n_out=6, swa_out_len=9)
    inputs, outputs, scalars = make_multi_case(case, [1, 2, 3], gen, "cpu")
    inputs["req_pool_indices"][3] = case.pool + 5
    outs = clone_outputs(outputs)
    with pytest.raises(RuntimeError, match=rf"{NAME}: req_pool_indices\[3\] = {case.pool + 5} is outside"):
        sgl_meta.update_trtllm_mha_graph_metadata_multi(**inputs, **outs, **scalars)
    assert_sets_equal(outs, outputs, "hostile request index: outputs must be untouched")


def positional(kwargs: dict) -> tuple:
    return tuple(
        (kwargs[a.name] if kwargs.get(a.name) is not None else ([] if a.type.kind() == "ListType" else None))
        if a.name in kwargs else a.default_value
        for a in OP._schema.arguments
    )


CASES = {
    "swa": (MetaCase(q_mode=1), [1, 2, 3]),
    "skip": (MetaCase(skip_page_table=True, tables_given=False), [1, 2]),
    "unified": (MetaCase(v2p=True, swa_v2p=True, unified=True, live_pages_only=True), [1, 2, 3]),
    "k5": (MetaCase(live_pages_only=True), [1, 2, 3, 4, 5]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_opcheck(name, gen, device):
    case, offsets = CASES[name]
    inputs, outputs, scalars = make_multi_case(case, offsets, gen, device)
    torch.library.opcheck(OP, positional({**inputs, **outputs, **scalars}))


@pytest.mark.parametrize("name", sorted(CASES))
def test_torch_compile_fullgraph(name, gen, device):
    case, offsets = CASES[name]
    inputs, outputs, scalars = make_multi_case(case, offsets, gen, device)
    want = run(reference.update_trtllm_mha_graph_metadata_multi, inputs, outputs, scalars)

    @torch.compile(fullgraph=True, dynamic=False)
    def refresh(**kw):
        sgl_meta.update_trtllm_mha_graph_metadata_multi(**kw)

    torch._dynamo.reset()
    got = run(refresh, inputs, outputs, scalars)
    assert_sets_equal(got, want, "torch.compile")


def test_fake_cuda_tracing_without_gpu(gen):
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.proxy_tensor import make_fx

    inputs, outputs, scalars = make_multi_case(MetaCase(), [1, 2, 3], gen, "cpu")
    flat = {**inputs, **outputs}
    with FakeTensorMode(allow_non_fake_inputs=False) as mode:
        def fake(v):
            if isinstance(v, list):
                return [mode.from_tensor(t).to("cuda") for t in v]
            return None if v is None else mode.from_tensor(v).to("cuda")

        fake_kw = {k: fake(v) for k, v in flat.items()}

        def fn(kw):
            sgl_meta.update_trtllm_mha_graph_metadata_multi(**kw, **scalars)
            return kw

        gm = make_fx(fn, tracing_mode="fake")(fake_kw)
    assert OP in [n.target for n in gm.graph.nodes if n.op == "call_function"]


GRAPH_CASES = {
    "draft_k3_swa": (MetaCase(bs=17, page_size=16, max_seq_pages=70, live_pages_only=True, pad_rows=4), [1, 2, 3]),
    "draft_k3_bs1": (MetaCase(bs=1, max_seq_pages=40, live_pages_only=True), [1, 2, 3]),
    "draft_k7_full_width": (MetaCase(bs=9, max_seq_pages=30), [1, 2, 3, 4, 5, 6, 7]),
    "unified_k3": (MetaCase(bs=33, max_seq_pages=20, v2p=True, swa_v2p=True, unified=True,
                            live_pages_only=True), [1, 2, 3]),
    "skip_k3": (MetaCase(bs=40, skip_page_table=True, tables_given=False), [1, 2, 3]),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(GRAPH_CASES))
def test_cuda_graph_capture_and_replay(name, gen):
    case, offsets = GRAPH_CASES[name]
    inputs, outputs, scalars = make_multi_case(case, offsets, gen, TEST_CUDA)
    static_in = {k: (None if v is None else v.clone()) for k, v in inputs.items()}
    static_out = clone_outputs(outputs)
    graph = capture_cuda_graph(
        lambda: sgl_meta.update_trtllm_mha_graph_metadata_multi(**static_in, **static_out, **scalars))
    for _ in range(3):
        fresh, _, _ = make_multi_case(case, offsets, gen, TEST_CUDA)
        for k, v in fresh.items():
            if v is not None:
                static_in[k].copy_(v)
        for v in static_out.values():
            for t in v or ():
                poison_(t, gen)
        before = clone_outputs(static_out)
        graph.replay()
        torch.cuda.synchronize()
        want = run(reference.update_trtllm_mha_graph_metadata_multi, static_in, before, scalars)
        assert_sets_equal(static_out, want, "CUDA graph replay")
