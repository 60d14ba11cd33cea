"""The Triton-backend hooks of sgl_meta/sglang/kv_indices.py over stand-ins of
SGLang's backend and translator: what they write equals SGLang's own sequence
(``kv_indptr[1:] = cumsum``, the gather ``pack_read_stream`` makes, the split
counts), buffer for buffer, and every case they do not cover runs SGLang's
method. (test_call_sites.py checks the targets and signatures in the installed
SGLang.)"""

from __future__ import annotations

import types

import pytest
import torch

from sgl_meta import reference
from sgl_meta.sglang import kv_indices as hooks


class Table(types.SimpleNamespace):
    pass


class Translator:
    def __init__(self, table: Table, page_size: int = 1):
        self.table, self.page_size, self.calls = table, page_size, []

    def read_source(self, plan, *, req_pool_indices, bs, kind):
        self.calls.append((plan, bs, kind))
        t = self.table
        return Table(ids=t.ids, row_ids=req_pool_indices if t.row_ids is None else t.row_ids,
                     row_stride=t.ids.stride(0), entry_page_size=t.entry_page_size, v2p=t.v2p)


class Mode:
    def __init__(self, decode: bool):
        self.decode = decode

    def is_decode_or_idle(self):
        return self.decode


def _backend(gen, source: str, bs: int = 5):
    pool, width = 9, 96
    ps = 16
    r2t = torch.randint(-1, 2**20, (pool, width), generator=gen, dtype=torch.int64).to(torch.int32)
    if source == "table":
        table = Table(ids=torch.randint(0, 500, (bs + 3, 8), generator=gen, dtype=torch.int64).to(torch.int32),
                      row_ids=torch.arange(bs + 3), entry_page_size=ps, v2p=None)
    elif source == "v2p":
        r2t = torch.randint(0, 40 * ps, (pool, width), generator=gen, dtype=torch.int64).to(torch.int32)
        table = Table(ids=r2t, row_ids=None, entry_page_size=1, v2p=torch.randperm(40, generator=gen))
    else:
        table = Table(ids=r2t, row_ids=None, entry_page_size=1, v2p=None)
    b = types.SimpleNamespace(
        kv_index_translator=Translator(table, ps), kv_indptr=torch.zeros(bs + 4, dtype=torch.int32),
        cuda_graph_kv_indices=torch.full((bs * 128,), -7, dtype=torch.int64),
        cuda_graph_num_kv_splits=torch.full((bs + 2,), -7, dtype=torch.int32),
        cuda_graph_uneven_batch=torch.full((1,), -7, dtype=torch.int32), dcp_size=1, sliding_window_size=None,
        enable_deterministic=False, static_kv_splits=False, device_core_count=132, num_head=32, num_kv_head=8,
        max_kv_splits=8)
    req = torch.randperm(pool, generator=gen)[:bs]
    lens = torch.randint(1, 8 * ps + 1 if source == "table" else width + 1, (bs,), generator=gen)
    return b, req, lens


def _sglang_sequence(b, bs, seq_lens, req, kv_indices, kv_indptr, splits: bool):
    """What SGLang 0.5.23 runs: cumsum into kv_indptr[1:], then pack_read_stream's
    gather (its reference), then get_num_kv_splits_triton (our reference's counts)."""
    kv_indptr[1:] = torch.cumsum(seq_lens, dim=0)
    src = b.kv_index_translator.read_source(None, req_pool_indices=req, bs=bs, kind="FULL")
    if src.v2p is not None:
        reference.kv_read_token_stream(req_to_token=src.ids, req_pool_indices=src.row_ids[:bs], seq_lens=seq_lens,
                                       indptr=kv_indptr, out=kv_indices, page_size=b.kv_index_translator.page_size,
                                       v2p=src.v2p)
    else:
        reference.create_flashinfer_kv_indices(src.ids, src.row_ids[:bs], seq_lens, kv_indptr, None, kv_indices,
                                               src.entry_page_size)
    if splits:
        reference.build_kv_indices(req_to_token=src.ids, req_pool_indices=src.row_ids[:bs], seq_lens=seq_lens,
                                   kv_indptr=kv_indptr.clone(), kv_indices=kv_indices.clone(), write_indptr=True,
                                   entry_page_size=src.entry_page_size, v2p=src.v2p,
                                   page_size=b.kv_index_translator.page_size,
                                   num_kv_splits=b.cuda_graph_num_kv_splits[:bs],
                                   uneven_batch=b.cuda_graph_uneven_batch, num_head=b.num_head,
                                   num_kv_head=b.num_kv_head, max_kv_splits=b.max_kv_splits,
                                   device_core_count=b.device_core_count)


@pytest.fixture(autouse=True)
def _no_sglang_import(monkeypatch):
    monkeypatch.setattr(hooks, "_full_kind", lambda: "FULL")


def _never(*args, **kwargs):
    raise AssertionError("SGLang's method ran")


@pytest.mark.parametrize("source", ["verbatim", "table", "v2p"])
def test_fill_equals_sglangs_sequence(source, gen):
    b, req, lens = _backend(gen, source)
    bs = lens.numel()
    want = types.SimpleNamespace(**{k: v.clone() for k, v in vars(b).items() if isinstance(v, torch.Tensor)})
    _sglang_sequence(b, bs, lens, req, want.cuda_graph_kv_indices, want.kv_indptr[: bs + 1], splits=False)
    got = hooks.fill_kv_indptr_and_indices(_never, b, None, bs, lens, req, b.cuda_graph_kv_indices)
    assert got.data_ptr() == b.kv_indptr.data_ptr()
    assert torch.equal(b.kv_indptr, want.kv_indptr) and torch.equal(b.cuda_graph_kv_indices, want.cuda_graph_kv_indices)


@pytest.mark.parametrize("source", ["verbatim", "table", "v2p"])
def test_decode_replay_equals_sglangs_sequence(source, gen):
    b, req, lens = _backend(gen, source)
    bs = lens.numel()
    want = types.SimpleNamespace(**{k: v.clone() for k, v in vars(b).items() if isinstance(v, torch.Tensor)})
    ref_backend = types.SimpleNamespace(**{**vars(b), **vars(want)})
    _sglang_sequence(ref_backend, bs, lens, req, want.cuda_graph_kv_indices, want.kv_indptr[: bs + 1], splits=True)
    hooks.apply_cuda_graph_metadata(_never, b, None, bs, torch.cat([req, req[:2]]), torch.cat([lens, lens[:2]]),
                                    Mode(True), None)
    for k in ("kv_indptr", "cuda_graph_kv_indices", "cuda_graph_num_kv_splits", "cuda_graph_uneven_batch"):
        assert torch.equal(getattr(b, k), getattr(want, k)), k


@pytest.mark.parametrize("change", ["verify", "spec", "dcp", "window", "static", "deterministic", "no_cores"])
def test_uncovered_replays_run_sglangs_method(change, gen):
    b, req, lens = _backend(gen, "verbatim")
    mode = Mode(change != "verify")
    spec = object() if change == "spec" else None
    setattr(b, *{"dcp": ("dcp_size", 2), "window": ("sliding_window_size", 128), "static": ("static_kv_splits", True),
                 "deterministic": ("enable_deterministic", True), "no_cores": ("device_core_count", 0)}.get(
        change, ("dcp_size", 1)))
    ran = []
    hooks.apply_cuda_graph_metadata(lambda *a: ran.append(a), b, None, lens.numel(), req, lens, mode, spec)
    assert len(ran) == 1


def test_fill_without_translator_or_strided_source_runs_sglangs_method(gen):
    b, req, lens = _backend(gen, "verbatim")
    ran = []
    b.kv_index_translator.table.ids = b.kv_index_translator.table.ids[:, ::2]
    hooks.fill_kv_indptr_and_indices(lambda *a: ran.append(a), b, None, lens.numel(), lens, req,
                                     b.cuda_graph_kv_indices)
    b.kv_index_translator = None
    hooks.fill_kv_indptr_and_indices(lambda *a: ran.append(a), b, None, lens.numel(), lens, req,
                                     b.cuda_graph_kv_indices)
    assert len(ran) == 2
