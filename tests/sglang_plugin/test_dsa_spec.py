"""The DSA multi-step draft-decode hook (sgl_meta/sglang/dsa_spec.py) without SGLang: what it
writes into every step's buffers, that it then runs each step's own replay method with the copy
left out (and puts the copy back), and that every case it does not cover runs SGLang's method
untouched. (With SGLang's own backends: test_cpu_step.py on CPU, test_gpu_load_plugins.py on
the GPU.)"""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest
import torch

from sgl_meta import reference
from sgl_meta.sglang import dsa_spec

MODULE = "sgl_meta_test_dsa_backend"
POOL, CTX, TOPK = 12, 640, 96


@pytest.fixture
def module():
    """Stands in for 0.5.23's dsa_backend module: the forward-mode enum the hook reads from it."""
    m = types.ModuleType(MODULE)
    m.ForwardMode = SimpleNamespace(DECODE="DECODE")
    sys.modules[MODULE] = m
    yield m
    del sys.modules[MODULE]


# 0.5.23's step backend: its class and the mixins its replay path comes from, by name.
class DSAMetadataManagementMixin:
    def _copy_base_replay_buffers(self, bs, metadata, precomputed, forward_mode):
        raise AssertionError("the merged launch replaces the copy")


class DeepseekSparseAttnBackendMTPPrecomputeMixin:
    def _precompute_replay_metadata(self, *args, **kwargs):
        raise AssertionError("the merged launch replaces the precompute")

    def _precompute_decode_mode(self, *args, **kwargs):
        raise AssertionError("the merged launch replaces the precompute")


class DeepseekSparseAttnBackendKPoolMixin:
    def _update_kpool_metadata_from_precomputed(self, metadata, precomputed, forward_mode):
        assert self.dsa_index_kpool <= 1


class DeepseekSparseAttnBackend(DSAMetadataManagementMixin, DeepseekSparseAttnBackendKPoolMixin,
                                DeepseekSparseAttnBackendMTPPrecomputeMixin):
    def __init__(self, **kw):
        self.__dict__.update(kw)
        self.finished, self.planned, self.prefill_impl_set = [], [], 0

    def set_dsa_prefill_impl(self, forward_batch=None):
        self.prefill_impl_set += 1

    def _compute_flashmla_metadata(self, cache_seqlens, seq_len_q):
        """FlashMLA's planner as 0.5.23 calls it (a stand-in: a schedule and the lengths, shifted)."""
        self.planned.append((cache_seqlens.clone(), seq_len_q))
        return SimpleNamespace(flashmla_metadata=torch.full((4, 8), 3, dtype=torch.int32),
                               num_splits=torch.nn.functional.pad(cache_seqlens + 1, (1, 0)))

    def init_forward_metadata_replay_cuda_graph_from_precomputed(self, bs, precomputed, forward_mode):
        self.set_dsa_prefill_impl(forward_batch=None)
        metadata = self.decode_cuda_graph_metadata[bs]
        self._copy_base_replay_buffers(bs, metadata, precomputed, forward_mode)
        self._update_kpool_metadata_from_precomputed(metadata, precomputed, forward_mode)
        self.finished.append((bs, forward_mode, metadata.cache_seqlens_int32[:bs].clone()))
        self.forward_metadata = metadata


def graph(rows: int, page_size: int) -> SimpleNamespace:
    """One step's decode graph buffers for ``rows`` requests, poisoned."""
    full = lambda *shape: torch.full(shape, -7, dtype=torch.int32)  # noqa: E731
    return SimpleNamespace(cache_seqlens_int32=full(rows), cu_seqlens_k=full(rows + 1),
                           dsa_cache_seqlens_int32=full(rows), dsa_cu_seqlens_k=full(rows + 1),
                           page_table_1=full(rows, CTX), real_page_table=full(rows, -(-CTX // page_size)),
                           flashmla_metadata=SimpleNamespace(flashmla_metadata=full(4, 8), num_splits=full(rows + 1)))


def world(steps=3, bs=3, page_size=64, seed=0, **step_kw):
    gen = torch.Generator().manual_seed(seed)
    req_to_token = torch.randint(0, 50_000, (POOL, CTX), generator=gen, dtype=torch.int32)
    backends = [DeepseekSparseAttnBackend(
        req_to_token=req_to_token, physical_page_size=page_size, dsa_index_topk=TOPK, dsa_index_kpool=1,
        experimental_kpool_metadata_fusion=False, dsa_decode_impl="flashmla_sparse",
        decode_cuda_graph_metadata={bs: graph(bs, page_size)}) for _ in range(steps - 1)]
    for b in backends:
        b.__dict__.update(step_kw)
    multi = SimpleNamespace(speculative_num_steps=steps, attn_backends=backends)
    batch = SimpleNamespace(batch_size=bs, seq_lens=torch.randint(1, CTX + 1, (bs,), generator=gen),
                            req_pool_indices=torch.randperm(POOL, generator=gen)[:bs])
    return multi, batch


def original_of(calls):
    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        calls.append(in_capture)

    init_forward_metadata_out_graph.__module__ = MODULE
    return init_forward_metadata_out_graph


def expected(multi, batch, page_size):
    bs = batch.batch_size
    want = graph(bs, page_size)
    reference.fused_dsa_metadata(
        seq_lens=batch.seq_lens, req_pool_indices=batch.req_pool_indices,
        req_to_token=multi.attn_backends[0].req_to_token, cache_seqlens=[want.cache_seqlens_int32],
        cu_seqlens_k=[want.cu_seqlens_k], dsa_cache_seqlens=[want.dsa_cache_seqlens_int32],
        dsa_cu_seqlens_k=[want.dsa_cu_seqlens_k], page_table_1=[want.page_table_1],
        real_page_table=[want.real_page_table] if page_size > 1 else [], forward_mode=0, bs=bs,
        max_seqlen_k=CTX, dsa_index_topk=TOPK, page_size=page_size)
    return want


@pytest.mark.parametrize("decode", ["flashmla_sparse", "flashmla_kv"])
@pytest.mark.parametrize("steps", [2, 3, 4, 5])
@pytest.mark.parametrize("page_size", [1, 64])
def test_every_step_written_in_one_launch_then_finished_as_sglang_does(module, monkeypatch, steps, page_size, decode):
    """Up to 3 speculative steps 0.5.23 finishes every step with its replay method; from 4 on its multi
    copy writes the first three, which get only their forward_metadata (dsa_backend.py)."""
    multi, batch = world(steps=steps, page_size=page_size, seed=steps * 100 + page_size, dsa_decode_impl=decode)
    launches = []
    real = dsa_spec._dsa.fused_dsa_metadata
    monkeypatch.setattr(dsa_spec._dsa, "fused_dsa_metadata", lambda **kw: (launches.append(kw), real(**kw))[1])
    calls = []
    dsa_spec.multi_step_init_forward_metadata_out_graph(original_of(calls), multi, batch)
    assert calls == [] and len(launches) == 1 and len(launches[0]["cache_seqlens"]) == steps - 1
    want = expected(multi, batch, page_size)
    for i, b in enumerate(multi.attn_backends):
        got = b.decode_cuda_graph_metadata[batch.batch_size]
        for name in ("cache_seqlens_int32", "cu_seqlens_k", "dsa_cache_seqlens_int32", "dsa_cu_seqlens_k",
                     "page_table_1", "real_page_table"):
            assert torch.equal(getattr(got, name), getattr(want, name)), name
        if steps > 3 and i < 3:  # written by 0.5.23's multi copy: not finished by the replay method
            assert b.finished == [] and b.prefill_impl_set == 1
        else:
            assert [f[:2] for f in b.finished] == [(batch.batch_size, "DECODE")] and b.prefill_impl_set == 1
            assert torch.equal(b.finished[0][2], want.cache_seqlens_int32)  # the rest ran after the launch
        assert b.forward_metadata is got and "_copy_base_replay_buffers" not in vars(b)
        planned = got.flashmla_metadata
        if decode == "flashmla_kv":  # planned once, on the lengths written, into every step
            assert torch.equal(planned.num_splits, torch.nn.functional.pad(want.dsa_cache_seqlens_int32 + 1, (1, 0)))
            assert torch.equal(planned.flashmla_metadata, torch.full((4, 8), 3, dtype=torch.int32))
        else:
            assert (planned.num_splits == -7).all() and (planned.flashmla_metadata == -7).all()
    lead = multi.attn_backends[0]
    assert [len(b.planned) for b in multi.attn_backends] == [int(decode == "flashmla_kv")] + [0] * (steps - 2)
    if decode == "flashmla_kv":
        assert torch.equal(lead.planned[0][0], want.dsa_cache_seqlens_int32) and lead.planned[0][1] == 1


@pytest.mark.parametrize("case", ["capture", "kpool", "kpool fusion", "flashmla_kv without its tensors",
                                  "flashmla_kv in one step", "one step", "no graph", "shared buffers", "other pools",
                                  "subclass", "patched copy"])
def test_what_it_does_not_cover_runs_sglangs_method(module, case):
    multi, batch = world(**({"dsa_index_kpool": 4} if case == "kpool" else
                            {"experimental_kpool_metadata_fusion": True} if case == "kpool fusion" else
                            {"dsa_decode_impl": "flashmla_kv"} if case.startswith("flashmla_kv") else {}),
                         steps=2 if case == "one step" else 3)
    first, last = multi.attn_backends[0], multi.attn_backends[-1]
    if case == "one step":
        multi.speculative_num_steps = 1
    elif case == "flashmla_kv without its tensors":
        last.decode_cuda_graph_metadata[batch.batch_size].flashmla_metadata = None
    elif case == "flashmla_kv in one step":
        first.dsa_decode_impl = "flashmla_sparse"
    elif case == "no graph":
        last.decode_cuda_graph_metadata = {}
    elif case == "shared buffers":
        last.decode_cuda_graph_metadata = first.decode_cuda_graph_metadata
    elif case == "other pools":
        last.req_to_token = last.req_to_token.clone()
    elif case == "subclass":
        last.__class__ = type("DeepseekSparseAttnBackendV2", (DeepseekSparseAttnBackend,), {})
    elif case == "patched copy":
        last._copy_base_replay_buffers = lambda *args: None
    calls = []
    before = [b.decode_cuda_graph_metadata.get(batch.batch_size) for b in multi.attn_backends]
    snapshot = [None if m is None else m.page_table_1.clone() for m in before]
    dsa_spec.multi_step_init_forward_metadata_out_graph(original_of(calls), multi, batch,
                                                        in_capture=case == "capture")
    assert calls == [case == "capture"]
    for m, s in zip(before, snapshot):
        assert m is None or torch.equal(m.page_table_1, s)
    assert all(b.finished == [] for b in multi.attn_backends)


class Recording(DeepseekSparseAttnBackend):
    """A step that records what 0.5.23's multi-step method asks of it (its precompute a stand-in)."""

    def _precompute_replay_metadata(self, bs, req_pool_indices, seq_lens, seq_lens_cpu, forward_mode):
        t = torch.zeros(1, dtype=torch.int32)
        return SimpleNamespace(cache_seqlens=t, cu_seqlens_k=t, page_indices=t, dsa_cache_seqlens=t,
                               dsa_cu_seqlens_k=t, real_page_table=None, flashmla_metadata=None, max_len=1,
                               seqlens_expanded_size=bs)

    def init_forward_metadata_replay_cuda_graph_from_precomputed(self, bs, precomputed, forward_mode):
        self.finished.append((bs, str(forward_mode), None))
        self.forward_metadata = self.decode_cuda_graph_metadata[bs]


Recording.__name__ = Recording.__qualname__ = "DeepseekSparseAttnBackend"
# (the owners' names, as 0.5.23's layout has them: the hook checks them)
Recording._precompute_replay_metadata.__qualname__ = (
    "DeepseekSparseAttnBackendMTPPrecomputeMixin._precompute_replay_metadata")
Recording.init_forward_metadata_replay_cuda_graph_from_precomputed.__qualname__ = (
    "DeepseekSparseAttnBackend.init_forward_metadata_replay_cuda_graph_from_precomputed")


@pytest.mark.parametrize("steps", [2, 3, 4, 5, 6])
def test_the_steps_finished_by_the_replay_method_are_sglangs(module, monkeypatch, steps):
    """0.5.23's own multi-step method, run over recording steps, finishes the same steps with their
    replay method as the hook does (and gives every step its forward_metadata)."""
    pytest.importorskip("sglang")
    from sglang.kernels.ops.attention.dsa import fused_metadata_copy
    from sglang.srt.layers.attention.dsa_backend import DeepseekSparseAttnMultiStepBackend

    multi_copies = []
    monkeypatch.setattr(fused_metadata_copy, "fused_metadata_copy_multi_cuda", lambda *a: multi_copies.append(a))
    sides = []
    for run in ("sglang", "ours"):
        multi, batch = world(steps=steps)
        batch.seq_lens_cpu = batch.seq_lens.clone()
        for b in multi.attn_backends:
            b.__class__ = Recording
        if run == "sglang":
            DeepseekSparseAttnMultiStepBackend.init_forward_metadata_out_graph(multi, batch)
        else:
            calls = []
            dsa_spec.multi_step_init_forward_metadata_out_graph(original_of(calls), multi, batch)
            assert calls == []
        sides.append([(len(b.finished), b.forward_metadata is b.decode_cuda_graph_metadata[batch.batch_size])
                      for b in multi.attn_backends])
    assert sides[0] == sides[1], sides
    assert len(multi_copies) == (steps > 3)  # 0.5.23 took its multi-copy path, not its fallback loop
