"""The FlashMLA replay hook (sgl_meta/sglang/flashmla.py) without SGLang: what it
writes and hands the planner on the path it covers, and that every other case runs
SGLang's method untouched. (With SGLang's own backends: test_cpu_step.py on CPU,
test_gpu_load_plugins.py on the GPU.)"""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest
import torch

from sgl_meta.sglang import flashmla

MODULE = "sgl_meta_test_flashmla_backend"
PAGE = 64
CTX = 1024


class Metadata:
    def __init__(self, flashmla_metadata, num_splits, block_kv_indices, seq_lens_k):
        self.flashmla_metadata, self.num_splits = flashmla_metadata, num_splits
        self.block_kv_indices, self.seq_lens_k = block_kv_indices, seq_lens_k


@pytest.fixture
def module():
    """Stands in for 0.5.23's flashmla_backend module: the names the hook reads from it."""
    m = types.ModuleType(MODULE)
    m.PAGE_SIZE, m.FlashMLADecodeMetadata, m.logger = PAGE, Metadata, SimpleNamespace(warning=lambda msg: None)
    m.planned = []

    def get_mla_metadata(cache_seqlens, heads, one, is_fp8_kvcache):
        m.planned.append((cache_seqlens.clone(), heads))
        return torch.full((4, 8), 3, dtype=torch.int32), torch.arange(cache_seqlens.numel() + 1, dtype=torch.int32)

    m.get_mla_metadata = get_mla_metadata
    m.dcp = False
    m.get_parallel = lambda: SimpleNamespace(dcp_enabled=m.dcp)  # decode context parallelism, as 0.5.23 reads it
    sys.modules[MODULE] = m
    yield m
    del sys.modules[MODULE]


@pytest.fixture
def original(module):
    calls = []

    def _apply_decode_target_verify_metadata(self, plan, bs, req_pool_indices, seq_lens, seq_lens_cpu, forward_mode):
        calls.append(bs)

    _apply_decode_target_verify_metadata.__module__ = MODULE
    _apply_decode_target_verify_metadata.calls = calls
    return _apply_decode_target_verify_metadata


def mode(name):
    return SimpleNamespace(is_target_verify=lambda: name == "target_verify",
                           is_draft_extend_v2=lambda: name == "draft_extend")


class Backend(SimpleNamespace):
    """A FlashMLABackend's attributes, its class in the module above."""


Backend.__module__ = MODULE


def backend(gen, max_bs=4):
    return Backend(
        req_to_token=torch.randint(0, 2**20, (6, CTX), generator=gen, dtype=torch.int64).to(torch.int32),
        page_size=PAGE, num_draft_tokens=3, num_q_heads=16, is_fp8_kvcache=False,
        cuda_graph_kv_indices=torch.full((max_bs, (CTX + PAGE) // PAGE), 1, dtype=torch.int32),
        cuda_graph_mla_metadata=torch.zeros(8, 8, dtype=torch.int32),
        cuda_graph_num_splits=torch.zeros(max_bs + 1, dtype=torch.int32),
        cuda_graph_mla_metadata_view=None, cuda_graph_num_splits_view=None,
        cuda_graph_draft_extend_seq_lens_k=torch.ones(max_bs, dtype=torch.int32),
        kv_index_translator=SimpleNamespace(is_translating=False), forward_metadata=None)


@pytest.mark.parametrize("name", ["decode", "target_verify", "draft_extend"])
def test_covered_replay_writes_table_and_lengths_and_plans_on_them(name, module, original, gen):
    b = backend(gen)
    bs, req = 3, torch.tensor([4, 0, 2, 5])
    seq_lens = torch.tensor([1, 700, 64, 9])
    flashmla.apply_decode_target_verify_metadata(original, b, None, bs, req, seq_lens, seq_lens.clone(), mode(name))
    assert original.calls == []
    delta = 3 if name == "target_verify" else 0
    lens = seq_lens[:bs] + delta
    (planned, heads), = module.planned
    assert planned.dtype == torch.int32 and planned.tolist() == lens.tolist()
    assert heads == (1 if name == "decode" else 3) * 16
    table = b.cuda_graph_kv_indices
    for i in range(bs):
        pages = -(-int(lens[i]) // PAGE)
        want = (b.req_to_token[req[i], torch.arange(pages) * PAGE] // PAGE).tolist()
        assert table[i, :pages].tolist() == want and (table[i, pages:] == 1).all()
    assert (table[bs:] == 1).all()
    m = b.forward_metadata
    assert m.block_kv_indices.shape == (bs, -(-int(lens.max()) // PAGE))
    assert m.num_splits.tolist() == list(range(bs + 1)) and (m.flashmla_metadata == 3).all()
    if name == "draft_extend":
        assert m.seq_lens_k.data_ptr() == b.cuda_graph_draft_extend_seq_lens_k.data_ptr()
        assert m.seq_lens_k.tolist() == lens.tolist()
    else:
        assert m.seq_lens_k is None and (b.cuda_graph_draft_extend_seq_lens_k == 1).all()


def test_without_the_host_lengths_the_table_is_whole(module, original, gen):
    b = backend(gen)
    flashmla.apply_decode_target_verify_metadata(original, b, None, 2, torch.tensor([1, 2]), torch.tensor([5, 6]),
                                                 None, mode("decode"))
    assert b.forward_metadata.block_kv_indices.shape == (2, b.cuda_graph_kv_indices.shape[1])


@pytest.mark.parametrize("case", ["translating", "dcp", "no_page_size", "no_table", "table_int64", "page_32",
                                  "no_planner_buffers", "extend_lengths_int64"])
def test_uncovered_replay_runs_sglangs_method(case, module, original, gen):
    b = backend(gen)
    name = "draft_extend" if case == "extend_lengths_int64" else "decode"
    if case == "translating":
        b.kv_index_translator = SimpleNamespace(is_translating=True)
    elif case == "dcp":
        module.dcp = True
    elif case == "no_page_size":  # a module without it: not 0.5.23's
        del module.PAGE_SIZE
    elif case == "no_table":
        b.cuda_graph_kv_indices = None
    elif case == "table_int64":
        b.cuda_graph_kv_indices = b.cuda_graph_kv_indices.long()
    elif case == "page_32":
        b.page_size = 32
    elif case == "no_planner_buffers":
        b.cuda_graph_num_splits = None
    elif case == "extend_lengths_int64":
        b.cuda_graph_draft_extend_seq_lens_k = b.cuda_graph_draft_extend_seq_lens_k.long()
    before = b.cuda_graph_kv_indices.clone() if isinstance(b.cuda_graph_kv_indices, torch.Tensor) else None
    flashmla.apply_decode_target_verify_metadata(original, b, None, 2, torch.tensor([1, 2]), torch.tensor([5, 6]),
                                                 None, mode(name))
    assert original.calls == [2] and module.planned == [] and b.forward_metadata is None
    if before is not None:
        assert torch.equal(b.cuda_graph_kv_indices, before)
