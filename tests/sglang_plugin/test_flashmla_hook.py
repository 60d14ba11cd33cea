"""The FlashMLA replay hooks (sgl_meta/sglang/flashmla.py) without SGLang: what they
write and hand the planner on the paths they cover (one refresh; every draft step's in
one launch), and that every other case runs SGLang's method untouched. (With SGLang's
own backends: test_cpu_step.py on CPU, test_gpu_load_plugins.py on the GPU.)"""

from __future__ import annotations

import sys
import types
from types import SimpleNamespace

import pytest
import torch

from sgl_meta import flash_attention_metadata as fam
from sgl_meta.sglang import flashmla
from helpers import around_hooks

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


class FlashMLABackend(SimpleNamespace):
    """A FlashMLABackend's attributes and the names of its replay methods, its class in the module above."""

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        raise AssertionError("not called by the hooks")

    def _apply_decode_target_verify_metadata(self, *args):
        raise AssertionError("not called by the hooks")


FlashMLABackend.__module__ = MODULE


def backend(gen, max_bs=4, req_to_token=None):
    return FlashMLABackend(
        req_to_token=req_to_token if req_to_token is not None
        else torch.randint(0, 2**20, (6, CTX), generator=gen, dtype=torch.int64).to(torch.int32),
        page_size=PAGE, num_draft_tokens=3, num_q_heads=16, is_fp8_kvcache=False,
        cuda_graph_kv_indices=torch.full((max_bs, (CTX + PAGE) // PAGE), 1, dtype=torch.int32),
        cuda_graph_mla_metadata=torch.zeros(8, 8, dtype=torch.int32),
        cuda_graph_num_splits=torch.zeros(max_bs + 1, dtype=torch.int32),
        cuda_graph_mla_metadata_view=None, cuda_graph_num_splits_view=None,
        cuda_graph_draft_extend_seq_lens_k=torch.ones(max_bs, dtype=torch.int32),
        kv_index_translator=SimpleNamespace(is_translating=False), forward_metadata=None)


def check_table(b, req, lens, bs):
    table = b.cuda_graph_kv_indices
    for i in range(bs):
        pages = -(-int(lens[i]) // PAGE)
        want = (b.req_to_token[req[i], torch.arange(pages) * PAGE] // PAGE).tolist()
        assert table[i, :pages].tolist() == want and (table[i, pages:] == 1).all()
    assert (table[bs:] == 1).all()


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
    check_table(b, req, lens, bs)
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


def test_graph_state_reallocated_for_more_rows_gets_a_longer_length_buffer(module, original, gen):
    """SGLang may allocate the graph state again with a larger max_bs (a recapture): the hook's own length
    buffer follows the table."""
    b = backend(gen, max_bs=2)
    flashmla.apply_decode_target_verify_metadata(original, b, None, 2, torch.tensor([1, 2]), torch.tensor([5, 6]),
                                                 None, mode("decode"))
    b.cuda_graph_kv_indices = torch.full((6, (CTX + PAGE) // PAGE), 1, dtype=torch.int32)
    b.cuda_graph_num_splits = torch.zeros(7, dtype=torch.int32)
    req, lens = torch.tensor([4, 0, 2, 5, 1]), torch.tensor([1, 700, 64, 9, 3])
    flashmla.apply_decode_target_verify_metadata(original, b, None, 5, req, lens, None, mode("decode"))
    assert original.calls == [] and module.planned[-1][0].tolist() == lens.tolist()
    check_table(b, req, lens, 5)


@pytest.mark.parametrize("case", ["translating", "dcp", "no_page_size", "no_table", "table_int64", "page_32",
                                  "no_planner_buffers", "extend_lengths_int64", "extend_lengths_short"])
def test_uncovered_replay_runs_sglangs_method(case, module, original, gen):
    b = backend(gen)
    name = "draft_extend" if case.startswith("extend_") else "decode"
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
    elif case == "extend_lengths_short":  # fewer rows than the batch: SGLang's copy_ decides
        b.cuda_graph_draft_extend_seq_lens_k = b.cuda_graph_draft_extend_seq_lens_k[:1]
    before = b.cuda_graph_kv_indices.clone() if isinstance(b.cuda_graph_kv_indices, torch.Tensor) else None
    flashmla.apply_decode_target_verify_metadata(original, b, None, 2, torch.tensor([1, 2]), torch.tensor([5, 6]),
                                                 None, mode(name))
    assert original.calls == [2] and module.planned == [] and b.forward_metadata is None
    if before is not None:
        assert torch.equal(b.cuda_graph_kv_indices, before)


# ---- the multi-step draft backend ------------------------------------------------------------------


def multi(gen, steps=3):
    r2t = torch.randint(0, 2**20, (6, CTX), generator=gen, dtype=torch.int64).to(torch.int32)
    return SimpleNamespace(speculative_num_steps=steps, attn_backends=[backend(gen, req_to_token=r2t)
                                                                       for _ in range(steps - 1)])


def batch(bs=3):
    seq_lens = torch.tensor([1, 700, 64, 9])[:bs]
    return SimpleNamespace(batch_size=bs, req_pool_indices=torch.tensor([4, 0, 2, 5])[:bs], seq_lens=seq_lens,
                           seq_lens_cpu=seq_lens.clone(), spec_info=object())


@pytest.fixture
def multi_original(module):
    calls = []

    def init_forward_metadata_out_graph(self, forward_batch, in_capture=False):
        calls.append(in_capture)

    init_forward_metadata_out_graph.__module__ = MODULE
    init_forward_metadata_out_graph.calls = calls
    return init_forward_metadata_out_graph


def test_multi_step_writes_every_step_in_one_launch(module, multi_original, gen, monkeypatch):
    m, fb = multi(gen), batch()
    launches = []
    real = fam.update_flash_attention_metadata
    monkeypatch.setattr(fam, "update_flash_attention_metadata",
                        lambda **kw: (launches.append(len(kw["page_table"])), real(**kw))[1])
    flashmla.multi_step_init_forward_metadata_out_graph(multi_original, m, fb)
    assert multi_original.calls == [] and launches == [2] and len(module.planned) == 2
    for b in m.attn_backends:
        check_table(b, fb.req_pool_indices, fb.seq_lens, 3)
        assert b.forward_metadata.block_kv_indices.shape == (3, -(-700 // PAGE))
        assert b.forward_metadata.seq_lens_k is None
    for planned, heads in module.planned:
        assert planned.tolist() == fb.seq_lens.tolist() and heads == 16


@pytest.mark.parametrize("case", ["capture", "no_spec_info", "one_step", "other_class", "other_pool", "other_width",
                                  "translating_step", "shared_table"])
def test_multi_step_falls_back_to_sglangs_method(case, module, multi_original, gen):
    m, fb = multi(gen, steps=2 if case == "one_step" else 3), batch()
    if case == "no_spec_info":
        fb.spec_info = None
    elif case == "one_step":
        m.speculative_num_steps = 1
    elif case == "other_class":
        m.attn_backends[1] = SimpleNamespace(**vars(m.attn_backends[1]))
    elif case == "other_pool":
        m.attn_backends[1].req_to_token = m.attn_backends[1].req_to_token.clone()
    elif case == "other_width":
        m.attn_backends[1].cuda_graph_kv_indices = m.attn_backends[1].cuda_graph_kv_indices[:, :-1].contiguous()
    elif case == "translating_step":
        m.attn_backends[1].kv_index_translator = SimpleNamespace(is_translating=True)
    elif case == "shared_table":  # one launch cannot write one table twice: SGLang's loop
        m.attn_backends[1].cuda_graph_kv_indices = m.attn_backends[0].cuda_graph_kv_indices
    flashmla.multi_step_init_forward_metadata_out_graph(multi_original, m, fb, in_capture=case == "capture")
    assert multi_original.calls == [case == "capture"] and module.planned == []
    assert all((b.cuda_graph_kv_indices == 1).all() for b in m.attn_backends)


def test_hook_table():
    """The plugin's table registers both hooks of this module as AROUND hooks on these targets."""
    assert around_hooks().items() >= {
        flashmla.TARGET: (flashmla.apply_decode_target_verify_metadata, "AROUND"),
        flashmla.MULTI_STEP_TARGET: (flashmla.multi_step_init_forward_metadata_out_graph, "AROUND"),
    }.items()
