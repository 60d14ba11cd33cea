"""sgl_meta.sglang.dsa_spec: the DSA multi-step draft backend's per-step metadata copies
merged into one launch.

A stand-in for 0.5.23's ``DeepseekSparseAttnMultiStepBackend.init_forward_metadata_out_graph``
(its loop over the step backends: each backend's ``fused_metadata_copy_cuda`` call with the
precomputed sources, as ``_copy_base_replay_buffers`` makes it, then that backend reading
its own buffers, as its schedule refresh does) runs plain and under the AROUND hook, over
the copy row's adapter, on CPU tensors. SGLang's own DSA backend needs a GPU to build: the
step bench and tests/sglang_plugin/test_gpu_load_plugins.py run it there."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import torch

import sgl_meta
from sgl_meta import dsa_metadata_copy as dmc
from sgl_meta.sglang import adapters, dsa_spec
from dsa_metadata_copy_cases import DECODE, DsaCase, make_case
from kit_replay import OpCalls


def _metadata(dest: dict) -> SimpleNamespace:
    flashmla = None
    if dest["flashmla_num_splits_dst"] is not None:
        flashmla = SimpleNamespace(num_splits=dest["flashmla_num_splits_dst"],
                                   flashmla_metadata=dest["flashmla_metadata_dst"])
    return SimpleNamespace(
        cache_seqlens_int32=dest["cache_seqlens_dst"], cu_seqlens_k=dest["cu_seqlens_k_dst"],
        page_table_1=dest["page_table_1_dst"], dsa_cache_seqlens_int32=dest["dsa_cache_seqlens_dst"],
        dsa_seqlens_expanded=dest["seqlens_expanded_dst"], dsa_cu_seqlens_k=dest["dsa_cu_seqlens_k_dst"],
        real_page_table=dest["real_page_table_dst"], flashmla_metadata=flashmla)


class MultiStep:
    """0.5.23's multi-step loop: per step backend, its copy of the precomputed metadata,
    then a read of its own lengths (what its schedule refresh reads)."""

    def __init__(self, sources, dests, scalars, bs):
        self.sources, self.scalars = sources, scalars
        self.speculative_num_steps = len(dests) + 1
        self.attn_backends = [SimpleNamespace(experimental_kpool_metadata_fusion=False,
                                              decode_cuda_graph_metadata={bs: _metadata(d)}) for d in dests]
        self.dests, self.seen = dests, []

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        for d in self.dests:
            adapters.fused_metadata_copy_cuda(**self.sources, **d, **self.scalars)
            self.seen.append(d["cache_seqlens_dst"].clone())


def _world(case: DsaCase, seed: int, hooked: bool, edit=None):
    sources, dests, scalars = make_case(case, torch.Generator().manual_seed(seed), "cpu")
    multi = MultiStep(sources, dests, scalars, case.bs)
    if edit is not None:
        edit(multi)
    batch = SimpleNamespace(batch_size=case.bs)
    with OpCalls(adapters, ("_copy",)) as single, OpCalls(dmc, ("fused_metadata_copy_multi",)) as merged:
        if hooked:
            dsa_spec.multi_step_init_forward_metadata_out_graph(MultiStep.init_forward_metadata_out_graph, multi, batch)
        else:
            multi.init_forward_metadata_out_graph(batch)
    return multi, single.calls + merged.calls


def _same(a, b) -> None:
    for x, y in zip(a.dests, b.dests):
        for k in x:
            assert (x[k] is None) == (y[k] is None), k
            if x[k] is not None:
                assert torch.equal(x[k], y[k]), k
    assert all(torch.equal(x, y) for x, y in zip(a.seen, b.seen))


CASES = [DsaCase(mode=DECODE, bs=5, sets=2), DsaCase(mode=DECODE, bs=1, sets=4, real_page_table=False, flashmla=False),
         DsaCase(mode=DECODE, bs=33, sets=3, max_len=130)]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_the_step_copies_go_in_one_launch_and_write_what_each_copy_writes(case):
    plain, plain_calls = _world(case, 1, hooked=False)
    hooked, hooked_calls = _world(case, 1, hooked=True)
    _same(plain, hooked)
    assert plain_calls == ["_copy"] * case.sets
    assert hooked_calls == ["fused_metadata_copy_multi"]


def test_random_layouts_merge_alike():
    """Random tensor layouts (views into padded buffers), with and without the optional pairs."""
    rng = random.Random(3)
    for seed in range(8):
        case = DsaCase(mode=DECODE, bs=rng.choice([1, 4, 9]), sets=rng.choice([2, 3]), layout=None,
                       flashmla=rng.random() < 0.5, real_page_table=rng.random() < 0.5)
        plain, _ = _world(case, seed, hooked=False)
        hooked, calls = _world(case, seed, hooked=True)
        _same(plain, hooked)
        assert calls == ["fused_metadata_copy_multi"]


def test_other_sources_copy_as_before():
    """A backend whose copy gets other sources (here: a later one with its own lengths)
    is written by its own call, not by the merged launch."""
    case = DsaCase(mode=DECODE, bs=4, sets=2)
    sources, dests, scalars = make_case(case, torch.Generator().manual_seed(5), "cpu")
    other = {**sources, "cache_seqlens_src": sources["cache_seqlens_src"] + 1}
    multi = MultiStep(sources, dests, scalars, case.bs)

    def init(self, forward_batch, in_capture=False):
        for i, d in enumerate(self.dests):
            adapters.fused_metadata_copy_cuda(**(other if i == 1 else self.sources), **d, **self.scalars)

    with OpCalls(adapters, ("_copy",)) as single, OpCalls(dmc, ("fused_metadata_copy_multi",)) as merged:
        dsa_spec.multi_step_init_forward_metadata_out_graph(init, multi, SimpleNamespace(batch_size=case.bs))
    assert merged.calls == ["fused_metadata_copy_multi"] and single.calls == ["_copy"]
    bs = case.bs
    assert torch.equal(dests[1]["cache_seqlens_dst"][:bs], other["cache_seqlens_src"][:bs])
    assert torch.equal(dests[0]["cache_seqlens_dst"][:bs], sources["cache_seqlens_src"][:bs])


@pytest.mark.parametrize("why", ["capture", "kpool", "one step"])
def test_what_the_hook_leaves_to_sglang(why):
    case = DsaCase(mode=DECODE, bs=3, sets=1 if why == "one step" else 2)
    sources, dests, scalars = make_case(case, torch.Generator().manual_seed(7), "cpu")
    multi = MultiStep(sources, dests, scalars, case.bs)
    if why == "kpool":
        multi.attn_backends[1].experimental_kpool_metadata_fusion = True
    with OpCalls(adapters, ("_copy",)) as single, OpCalls(dmc, ("fused_metadata_copy_multi",)) as merged:
        dsa_spec.multi_step_init_forward_metadata_out_graph(
            MultiStep.init_forward_metadata_out_graph, multi, SimpleNamespace(batch_size=case.bs),
            in_capture=why == "capture")
    assert single.calls == ["_copy"] * case.sets and merged.calls == []
    assert dsa_spec._local.pending is None  # nothing left registered
