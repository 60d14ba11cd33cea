"""The Triton-backend hooks of sgl_meta/sglang/kv_indices.py over stand-ins of
SGLang's backend and translator: what they write equals SGLang's own sequence
(``kv_indptr[1:] = cumsum``, the gather ``pack_read_stream`` makes, the split
counts), buffer for buffer, and every case they do not cover runs SGLang's
method. (test_call_sites.py checks the targets and signatures in the installed
SGLang.)"""

from __future__ import annotations

import importlib.util
import os
import types

import pytest
import torch

from sgl_meta import reference
from sgl_meta.sglang import kv_indices as hooks
from helpers import interpreter_child


class Table(types.SimpleNamespace):
    pass


OWN_PLAN = types.SimpleNamespace(is_read_by=lambda reader: True)
"""The batch's plan, over this reader's rows (0.5.23 asserts that before a v2p gather)."""


class Translator:
    window_kv_kind = "FULL"  # a pool without an SWA sub-pool of its own

    def __init__(self, table: Table, page_size: int = 1):
        self.table, self.page_size, self.calls = table, page_size, []
        self.tables = {}  # kind -> its own table (the FULL one: ``table``)

    def read_source(self, plan, *, req_pool_indices, bs, kind):
        self.calls.append((plan, bs, kind))
        t = self.tables.get(kind, self.table)
        # the plan's table (row_ids given) and a v2p read hold physical ids; req_to_token itself does not
        return Table(ids=t.ids, row_ids=req_pool_indices if t.row_ids is None else t.row_ids,
                     row_stride=t.ids.stride(0), entry_page_size=t.entry_page_size, v2p=t.v2p,
                     is_translated=t.v2p is not None or t.row_ids is not None)

    def _reads_translated(self, kind) -> bool:
        return self.tables.get(kind, self.table).v2p is not None

    def pack_read_stream(self, plan, *, req_pool_indices, seq_lens, indptr, out, kv_start_idx=None, kind="FULL",
                         token_mapping=None, **_):
        """0.5.23's gather branch over the stand-in's source (the reference gather)."""
        src = self.read_source(plan, req_pool_indices=req_pool_indices, bs=seq_lens.numel(), kind=kind)
        assert src.v2p is None
        reference.create_flashinfer_kv_indices(src.ids, src.row_ids[: seq_lens.numel()], seq_lens, indptr,
                                               kv_start_idx, out, src.entry_page_size, token_mapping)
        return token_mapping is not None


class Mode:
    def __init__(self, decode: bool):
        self.decode = decode

    def is_decode_or_idle(self):
        return self.decode


_WIDTH, _PS = 96, 16  # the fake pool's req_to_token width and page size


def _longest_row(source: str) -> int:
    """_backend's longest draw: 8 pages of its table, else the req_to_token width."""
    return 8 * _PS if source == "table" else _WIDTH


def _backend(gen, source: str, bs: int = 5):
    pool, width = 9, _WIDTH
    ps = _PS
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
    lens = torch.randint(1, _longest_row(source) + 1, (bs,), generator=gen)
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
    got = hooks.fill_kv_indptr_and_indices(_never, b, OWN_PLAN, bs, lens, req, b.cuda_graph_kv_indices)
    assert got.data_ptr() == b.kv_indptr.data_ptr()
    assert torch.equal(b.kv_indptr, want.kv_indptr) and torch.equal(b.cuda_graph_kv_indices, want.cuda_graph_kv_indices)


@pytest.mark.parametrize("source", ["verbatim", "table", "v2p"])
def test_decode_replay_equals_sglangs_sequence(source, gen):
    b, req, lens = _backend(gen, source)
    bs = lens.numel()
    want = types.SimpleNamespace(**{k: v.clone() for k, v in vars(b).items() if isinstance(v, torch.Tensor)})
    ref_backend = types.SimpleNamespace(**{**vars(b), **vars(want)})
    _sglang_sequence(ref_backend, bs, lens, req, want.cuda_graph_kv_indices, want.kv_indptr[: bs + 1], splits=True)
    hooks.apply_cuda_graph_metadata(_never, b, OWN_PLAN, bs, torch.cat([req, req[:2]]), torch.cat([lens, lens[:2]]),
                                    Mode(True), None)
    for k in ("kv_indptr", "cuda_graph_kv_indices", "cuda_graph_num_kv_splits", "cuda_graph_uneven_batch"):
        assert torch.equal(getattr(b, k), getattr(want, k)), k


class BaseSwaPool:
    """Stand-in of SGLang's BaseSWAKVPool: ids gathered from it are translated afterwards."""


class SwaPool(BaseSwaPool):
    """Stand-in of SGLang's SWAKVPool: its full-to-SWA mapping fuses into the gather."""

    def __init__(self, mapping):
        self.full_to_swa_index_mapping = mapping


def _window_backend(gen, source: str, pool: str, window: int):
    b, req, lens = _backend(gen, source)
    longest = _longest_row(source)
    if window < longest:  # a row past the window, whatever the draw
        lens[0] = int(torch.randint(window + 1, longest + 1, (1,), generator=gen))
    return _with_window(b, gen, pool, window, lens.numel()), req, lens


def _with_window(b, gen, pool: str, window: int, bs: int):
    """``b`` with a sliding window whose layers read a table of their own (the
    translator's SLIDING_WINDOW kind: another req_to_token, same shape), its
    graph buffers poisoned."""
    t = b.kv_index_translator
    t.window_kv_kind = "SLIDING_WINDOW"
    t.tables["SLIDING_WINDOW"] = Table(**{**vars(t.table), "ids": torch.randint(-1, 2**20, t.table.ids.shape,
                                                                             generator=gen).to(torch.int32)})
    mapping = torch.randint(-1, 2**20, (2**20,), generator=gen)
    b.__dict__.update(sliding_window_size=window, window_kv_indptr=torch.zeros(bs + 4, dtype=torch.int32),
                      cuda_graph_window_kv_indices=torch.full((bs * 128,), -7, dtype=torch.int64),
                      cuda_graph_window_num_kv_splits=torch.full((bs + 2,), -7, dtype=torch.int32),
                      cuda_graph_window_kv_offsets=torch.full((bs + 2,), -7, dtype=torch.int32),
                      token_to_kv_pool={"static": object(), "swa": SwaPool(mapping),
                                        "base_swa": BaseSwaPool()}[pool])
    return b


@pytest.fixture
def swa_pools(monkeypatch):
    """The stand-in pool classes wherever SGLang's are tested (the hook and 0.5.23's function)."""
    monkeypatch.setattr(hooks, "_swa_pool_classes", lambda: (BaseSwaPool, SwaPool))
    tb = pytest.importorskip("sglang.srt.layers.attention.triton_backend")
    monkeypatch.setattr(tb, "BaseSWAKVPool", BaseSwaPool)
    monkeypatch.setattr(tb, "SWAKVPool", SwaPool)
    return tb


@pytest.mark.parametrize("source, pool, window", [("verbatim", "static", 40), ("verbatim", "swa", 40),
                                                  ("table", "static", 20), ("verbatim", "swa", 10**6)])
def test_sliding_window_decode_replay_equals_sglangs_sequence(source, pool, window, gen, swa_pools):
    """0.5.23's own update_sliding_window_buffer (its minimum, cumsum, start and
    pack_read_stream call, the gather the reference's) and the window's split
    counts, against the hook's second launch; the full stream as without a window."""
    b, req, lens = _window_backend(gen, source, pool, window)
    bs = lens.numel()
    want = types.SimpleNamespace(**{k: v.clone() for k, v in vars(b).items() if isinstance(v, torch.Tensor)})
    ref_backend = types.SimpleNamespace(**{**vars(b), **vars(want)})
    _sglang_sequence(ref_backend, bs, lens, req, want.cuda_graph_kv_indices, want.kv_indptr[: bs + 1], splits=True)
    _, _, window_lens, _ = swa_pools.update_sliding_window_buffer(
        want.window_kv_indptr, b.kv_index_translator, OWN_PLAN, req, window, lens, bs,
        token_to_kv_pool=b.token_to_kv_pool, window_kv_indices=want.cuda_graph_window_kv_indices)
    src = b.kv_index_translator.read_source(None, req_pool_indices=req, bs=bs, kind="SLIDING_WINDOW")
    reference.build_kv_indices(req_to_token=src.ids, req_pool_indices=src.row_ids[:bs], seq_lens=window_lens,
                               kv_indptr=torch.zeros(bs + 1, dtype=torch.int64),
                               kv_indices=torch.zeros(10**4, dtype=torch.int64), write_indptr=True,
                               entry_page_size=src.entry_page_size,
                               num_kv_splits=want.cuda_graph_window_num_kv_splits[:bs], num_head=b.num_head,
                               num_kv_head=b.num_kv_head, max_kv_splits=b.max_kv_splits,
                               device_core_count=b.device_core_count)
    assert bool((window_lens < lens).any()) == (window < 10**6), (window_lens, lens)  # the window cuts rows
    hooks.apply_cuda_graph_metadata(_never, b, OWN_PLAN, bs, torch.cat([req, req[:2]]), torch.cat([lens, lens[:2]]),
                                    Mode(True), None)
    for k in ("kv_indptr", "cuda_graph_kv_indices", "cuda_graph_num_kv_splits", "cuda_graph_uneven_batch",
              "window_kv_indptr", "cuda_graph_window_kv_indices", "cuda_graph_window_num_kv_splits"):
        assert torch.equal(getattr(b, k), getattr(want, k)), k


@pytest.mark.parametrize("change", ["verify", "spec", "dcp", "window_translated_after", "window_v2p",
                                    "window_mapping_over_table", "static", "deterministic", "no_cores"])
def test_uncovered_replays_run_sglangs_method(change, gen, swa_pools, monkeypatch):
    """Uncovered, SGLang's method runs: among them a window over a pool that
    translates its ids after the gather (BaseSWAKVPool without a mapping), a
    window read through v2p (0.5.23 builds a translated read table) and a static
    SWA pool's mapping over the plan's translated table (0.5.23 asserts)."""
    if change.startswith("window"):
        source = {"window_v2p": "v2p", "window_mapping_over_table": "table"}.get(change, "verbatim")
        b, req, lens = _window_backend(gen, source, {"window_translated_after": "base_swa",
                                                     "window_mapping_over_table": "swa"}.get(change, "static"), 40)
        t = b.kv_index_translator
        t.tables["SLIDING_WINDOW"] = t.table
        monkeypatch.setattr(OWN_PLAN, "has_read_table", lambda kind, reader: False, raising=False)
    else:
        b, req, lens = _backend(gen, "verbatim")
    mode = Mode(change != "verify")
    spec = object() if change == "spec" else None
    setattr(b, *{"dcp": ("dcp_size", 2), "static": ("static_kv_splits", True),
                 "deterministic": ("enable_deterministic", True), "no_cores": ("device_core_count", 0)}.get(
        change, ("dcp_size", 1)))
    ran = []
    hooks.apply_cuda_graph_metadata(lambda *a: ran.append(a), b, OWN_PLAN, lens.numel(), req, lens, mode, spec)
    assert len(ran) == 1


def _verify_backend(gen, source: str = "verbatim"):
    b, req, lens = _backend(gen, source)
    bs = lens.numel()
    b.__dict__.update(qo_indptr=torch.full((bs + 4,), -7), mask_indptr=torch.full((bs + 4,), -7), skip_prefill=False,
                      _verify_mask=None, window_kv_indptr=None, _target_verify_num_tokens_per_req=lambda spec: 4)
    return b, req, lens


@pytest.mark.parametrize("source", ["verbatim", "table", "v2p"])
def test_target_verify_equals_sglangs_sequence(source, gen):
    """0.5.23's _update_target_verify_buffers without a custom mask: qo_indptr by
    arange, the fill, mask_indptr[1:bs+1] = cumsum(n * (seq_lens + n))."""
    b, req, lens = _verify_backend(gen, source)
    bs, n = lens.numel(), 4
    want = types.SimpleNamespace(**{k: v.clone() for k, v in vars(b).items() if isinstance(v, torch.Tensor)})
    want.qo_indptr[: bs + 1] = torch.arange(0, (1 + bs) * n, step=n)
    _sglang_sequence(b, bs, lens, req, want.cuda_graph_kv_indices, want.kv_indptr[: bs + 1], splits=False)
    want.mask_indptr[1 : bs + 1] = torch.cumsum(n * (lens + n), dim=0)
    want.mask_indptr[0] = 0  # (SGLang's buffer is allocated zeroed)
    got = hooks.update_target_verify_buffers(_never, b, OWN_PLAN, bs, lens, None, req)
    assert [t.data_ptr() for t in got[:4:3]] == [b.qo_indptr.data_ptr(), b.mask_indptr.data_ptr()]
    assert got[2] is None and got[4:] == (None, None, None, None)
    for k in ("qo_indptr", "kv_indptr", "mask_indptr", "cuda_graph_kv_indices"):
        assert torch.equal(getattr(b, k), getattr(want, k)), k




class DraftExtendMode:
    def __init__(self, v2: bool):
        self.v2 = v2

    def is_draft_extend_v2(self):
        return self.v2


def _draft_extend_backend(gen, source: str = "verbatim"):
    b, req, lens = _backend(gen, source)
    bs = lens.numel()
    b.__dict__.update(qo_indptr=torch.full((bs + 4,), -7, dtype=torch.int32), num_draft_tokens=4,
                      speculative_num_steps=2)
    return b, req, lens


@pytest.mark.parametrize("source", ["verbatim", "table", "v2p"])
@pytest.mark.parametrize("extend", ["tensor", "none", "v1"])
def test_draft_extend_equals_sglangs_sequence(source, extend, gen):
    """0.5.23's _update_draft_extend_buffers: qo_indptr by arange (num_draft_tokens
    per request in draft extend v2, else steps + 1), kv_lens = clamp(seq_lens -
    extend_seq_lens, min=0) (zeros without the tensor), then the fill over the
    padded seq_lens' first bs."""
    b, req, lens = _draft_extend_backend(gen, source)
    bs = lens.numel()
    padded = torch.cat([lens, torch.ones(2, dtype=lens.dtype)])
    ext = torch.randint(0, 9, (bs + 2,), generator=gen, dtype=torch.int32)
    ext[0] = int(lens[0]) + 3  # past its row's length: clamped to 0
    spec = None if extend == "none" else types.SimpleNamespace(extend_seq_lens_tensor=ext)
    n = 3 if extend == "v1" else 4
    want = types.SimpleNamespace(**{k: v.clone() for k, v in vars(b).items() if isinstance(v, torch.Tensor)})
    want.qo_indptr[: bs + 1] = torch.arange(0, bs * n + 1, step=n, dtype=torch.int32)
    e = ext[:bs] if spec is not None else torch.zeros(bs, dtype=torch.int32)
    kv_lens = torch.clamp(padded[:bs] - e, min=0).to(torch.int32)
    _sglang_sequence(b, bs, kv_lens, req, want.cuda_graph_kv_indices, want.kv_indptr[: bs + 1], splits=False)
    got = hooks.update_draft_extend_buffers(_never, b, OWN_PLAN, bs, padded, DraftExtendMode(extend != "v1"), spec,
                                            req)
    assert [t.data_ptr() for t in got[:2]] == [b.qo_indptr.data_ptr(), b.kv_indptr.data_ptr()] and got[2] == n
    for k in ("qo_indptr", "kv_indptr", "cuda_graph_kv_indices"):
        assert torch.equal(getattr(b, k), getattr(want, k)), k


@pytest.mark.parametrize("v2", [True, False])
def test_draft_extend_equals_sglangs_own_method(v2, gen):
    """SGLang 0.5.23's _update_draft_extend_buffers itself (its qo_indptr, its
    clamp of seq_lens - extend_seq_lens) over the stand-in backend, its fill
    taken by the fill hook (held to SGLang's sequence above): extend lengths
    from 0 to past the row's length, padded rows, int64 seq_lens."""
    tb = pytest.importorskip("sglang.srt.layers.attention.triton_backend", reason="SGLang is not installed")
    b, req, lens = _draft_extend_backend(gen)
    bs = lens.numel()
    padded = torch.cat([lens, torch.ones(3, dtype=lens.dtype)])
    ext = torch.randint(0, 12, (bs + 3,), generator=gen, dtype=torch.int32)
    ext[1] = int(lens[1]) + 1  # past its row's length: an empty prefix
    spec = types.SimpleNamespace(extend_seq_lens_tensor=ext)
    theirs = types.SimpleNamespace(**{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in vars(b).items()})
    theirs.device = "cpu"
    theirs._fill_kv_indptr_and_indices = lambda *a: hooks.fill_kv_indptr_and_indices(_never, theirs, *a)
    want = tb.TritonAttnBackend._update_draft_extend_buffers(theirs, OWN_PLAN, bs, padded, DraftExtendMode(v2), spec,
                                                            req)
    got = hooks.update_draft_extend_buffers(_never, b, OWN_PLAN, bs, padded, DraftExtendMode(v2), spec, req)
    assert got[2] == want[2] and all(torch.equal(g, w) for g, w in zip(got[:2], want[:2]))
    for k in ("qo_indptr", "kv_indptr", "cuda_graph_kv_indices"):
        assert torch.equal(getattr(b, k), getattr(theirs, k)), k


@pytest.mark.parametrize("pool", ["static", "swa"])
@pytest.mark.parametrize("mode", ["verify", "extend"])
def test_sliding_window_verify_and_draft_extend_equal_sglangs_sequence(mode, pool, gen, swa_pools):
    """With a sliding window, 0.5.23's own update_sliding_window_buffer after the
    fill (over the lengths in verify, the prefix lengths in draft extend; its
    window starts into cuda_graph_window_kv_offsets[:bs]) against the hook's
    second launch; the returned tuple as 0.5.23's."""
    b, req, lens = _verify_backend(gen) if mode == "verify" else _draft_extend_backend(gen)
    bs, n = lens.numel(), 4
    # past the window after any extend length (< 9)
    lens[0] = int(torch.randint(40, _longest_row("verbatim") + 1, (1,), generator=gen))
    _with_window(b, gen, pool, 30, bs)
    want = types.SimpleNamespace(**{k: v.clone() for k, v in vars(b).items() if isinstance(v, torch.Tensor)})
    ext = torch.randint(0, 9, (bs,), generator=gen, dtype=torch.int32)
    spec = types.SimpleNamespace(extend_seq_lens_tensor=ext) if mode == "extend" else None
    kv_lens = lens if mode == "verify" else torch.clamp(lens - ext, min=0).to(torch.int32)
    if mode == "verify":
        want.qo_indptr[: bs + 1] = torch.arange(0, (1 + bs) * n, step=n)
        want.mask_indptr[1: bs + 1] = torch.cumsum(n * (lens + n), dim=0)
        want.mask_indptr[0] = 0
    else:
        want.qo_indptr[: bs + 1] = torch.arange(0, bs * n + 1, step=n, dtype=torch.int32)
    _sglang_sequence(b, bs, kv_lens, req, want.cuda_graph_kv_indices, want.kv_indptr[: bs + 1], splits=False)
    _, _, window_lens, starts = swa_pools.update_sliding_window_buffer(
        want.window_kv_indptr, b.kv_index_translator, OWN_PLAN, req, 30, kv_lens, bs,
        token_to_kv_pool=b.token_to_kv_pool, window_kv_indices=want.cuda_graph_window_kv_indices)
    want.cuda_graph_window_kv_offsets[:bs] = starts
    assert bool((window_lens < kv_lens).any())  # the window cuts rows
    if mode == "verify":
        got = hooks.update_target_verify_buffers(_never, b, OWN_PLAN, bs, lens, None, req)
        assert got[4].data_ptr() == b.window_kv_indptr.data_ptr() and got[4].numel() == bs + 1
        assert got[5] is b.cuda_graph_window_kv_indices and got[6] is b.cuda_graph_window_num_kv_splits
        assert got[7] is b.cuda_graph_window_kv_offsets
    else:
        got = hooks.update_draft_extend_buffers(_never, b, OWN_PLAN, bs, lens, DraftExtendMode(True), spec, req)
        assert got[2] == n
    for k in ("qo_indptr", "kv_indptr", "cuda_graph_kv_indices", "window_kv_indptr", "cuda_graph_window_kv_indices",
              "cuda_graph_window_kv_offsets", "cuda_graph_window_num_kv_splits"):
        assert torch.equal(getattr(b, k), getattr(want, k)), k


@pytest.mark.parametrize("case", ["verify_int32", "verify_int64", "extend_v2", "extend_v1", "extend_no_spec",
                                  "extend_no_tensor"])
def test_sliding_window_verify_and_draft_extend_equal_sglangs_own_methods(case, gen, swa_pools):
    """With a sliding window, SGLang 0.5.23's _update_target_verify_buffers and
    _update_draft_extend_buffers themselves (its update_sliding_window_buffer, the
    window starts into its int32 offsets buffer) over the stand-in backend, their
    full-stream fill taken by the fill hook: every buffer and the returned tuple
    equal, padded rows, int32 and int64 lengths, extend lengths absent."""
    b, req, lens = _verify_backend(gen) if case.startswith("verify") else _draft_extend_backend(gen)
    bs = lens.numel()
    # past the window after any extend length (< 12)
    lens[0] = int(torch.randint(40, _longest_row("verbatim") + 1, (1,), generator=gen))
    _with_window(b, gen, "swa", 25, bs)
    if case.startswith("verify"):
        b.mask_indptr[0] = 0  # SGLang's buffer is allocated zeroed and only ours writes [0] (the same 0)
    lens = lens.to(torch.int32) if case == "verify_int32" else lens
    padded = torch.cat([lens, torch.ones(3, dtype=lens.dtype)])
    ext = torch.randint(0, 12, (bs + 3,), generator=gen, dtype=torch.int32)
    spec = {"extend_no_spec": None,
            "extend_no_tensor": types.SimpleNamespace(extend_seq_lens_tensor=None)}.get(
        case, types.SimpleNamespace(extend_seq_lens_tensor=ext, custom_mask=None))
    theirs = types.SimpleNamespace(**{k: (v.clone() if isinstance(v, torch.Tensor) else v) for k, v in vars(b).items()})
    theirs.device = "cpu"
    theirs._fill_kv_indptr_and_indices = lambda *a: hooks.fill_kv_indptr_and_indices(_never, theirs, *a)
    if case.startswith("verify"):
        want = swa_pools.TritonAttnBackend._update_target_verify_buffers(theirs, OWN_PLAN, bs, lens, None, req)
        got = hooks.update_target_verify_buffers(_never, b, OWN_PLAN, bs, lens, None, req)
    else:
        mode = DraftExtendMode(case != "extend_v1")
        want = swa_pools.TritonAttnBackend._update_draft_extend_buffers(theirs, OWN_PLAN, bs, padded, mode, spec, req)
        got = hooks.update_draft_extend_buffers(_never, b, OWN_PLAN, bs, padded, mode, spec, req)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert (g is None and w is None) or (g == w if isinstance(w, int) else torch.equal(g, w)), (g, w)
    for k in ("qo_indptr", "kv_indptr", "mask_indptr", "cuda_graph_kv_indices", "window_kv_indptr",
              "cuda_graph_window_kv_indices", "cuda_graph_window_kv_offsets", "cuda_graph_window_num_kv_splits"):
        if hasattr(b, k):
            assert torch.equal(getattr(b, k), getattr(theirs, k)), k


@pytest.mark.parametrize("mode,change", [
    ("verify", "window_translated_after"), ("verify", "skip_prefill"), ("verify", "no_mask_buffer"),
    ("verify", "strided_source"), ("verify", "two_dim_lens"), ("extend", "window_translated_after"),
    ("extend", "no_qo_buffer"), ("extend", "strided_source"), ("extend", "two_dim_lens")])
def test_uncovered_verify_and_draft_extend_run_sglangs_method(mode, change, gen, swa_pools):
    b, req, lens = _verify_backend(gen) if mode == "verify" else _draft_extend_backend(gen)
    if change == "window_translated_after":  # a BaseSWAKVPool: SGLang translates the gathered window ids
        _with_window(b, gen, "base_swa", 64, lens.numel())
    elif change == "skip_prefill":
        b.skip_prefill = True
    elif change in ("no_mask_buffer", "no_qo_buffer"):
        setattr(b, "mask_indptr" if change == "no_mask_buffer" else "qo_indptr", None)
    elif change == "strided_source":
        b.kv_index_translator.table.ids = b.kv_index_translator.table.ids[:, ::2]
    else:
        lens = lens[None]
    ran = []
    if mode == "verify":
        hooks.update_target_verify_buffers(lambda *a: ran.append(a), b, OWN_PLAN, req.numel(), lens, None, req)
    else:
        hooks.update_draft_extend_buffers(lambda *a: ran.append(a), b, OWN_PLAN, req.numel(), lens,
                                          DraftExtendMode(True), None, req)
    assert len(ran) == 1


def test_fill_without_translator_or_strided_source_runs_sglangs_method(gen):
    b, req, lens = _backend(gen, "verbatim")
    ran = []
    b.kv_index_translator.table.ids = b.kv_index_translator.table.ids[:, ::2]
    hooks.fill_kv_indptr_and_indices(lambda *a: ran.append(a), b, OWN_PLAN, lens.numel(), lens, req,
                                     b.cuda_graph_kv_indices)
    b.kv_index_translator = None
    hooks.fill_kv_indptr_and_indices(lambda *a: ran.append(a), b, OWN_PLAN, lens.numel(), lens, req,
                                     b.cuda_graph_kv_indices)
    assert len(ran) == 2


# -- KVIndexTranslator.pack_read_stream (the FlashInfer backends' gather) --------


class PackTranslator(Translator):
    """pack_read_stream's collaborators: whether reads are translated, the plan's
    table, the source of a gather."""

    def __init__(self, table: Table, translated_reads: bool = False):
        super().__init__(table)
        self.translated_reads = translated_reads

    def _reads_translated(self, kind):
        return self.translated_reads

    def read_source(self, plan, *, req_pool_indices, bs, kind):
        src = super().read_source(plan, req_pool_indices=req_pool_indices, bs=bs, kind=kind)
        src.is_translated = self.table.entry_page_size > 1
        return src


class Plan:
    def __init__(self, has_table: bool):
        self.has_table = has_table

    def has_read_table(self, kind, reader):
        return self.has_table


def _pack_case(gen, source: str, bs: int = 6, window: bool = False, mapping: bool = False):
    b, req, lens = _backend(gen, source, bs)
    t = b.kv_index_translator.table
    translator = PackTranslator(t, translated_reads=source == "table")
    indptr = torch.zeros(bs + 1, dtype=torch.int32)
    indptr[1:] = torch.cumsum(lens, 0) + torch.arange(1, bs + 1) * 3  # slack between rows, as a padded stream has
    start = torch.randint(0, 9, (bs,), generator=gen) if window else None
    if window and source != "table":
        lens = torch.minimum(lens, torch.full_like(lens, t.ids.shape[1] - 9))
    token_mapping = torch.randint(-1, 5000, (2**20 + 1,), generator=gen, dtype=torch.int64) if mapping else None
    out = torch.full((int(indptr[-1]) + 5,), -7, dtype=torch.int32)
    return translator, req, lens, indptr, start, token_mapping, out


@pytest.mark.parametrize("source, window, mapping", [("verbatim", False, False), ("verbatim", True, False),
                                                     ("verbatim", False, True), ("table", False, False),
                                                     ("table", True, False)])
def test_pack_read_stream_gather_equals_sglangs(source, window, mapping, gen):
    translator, req, lens, indptr, start, mapping_t, out = _pack_case(gen, source, window=window, mapping=mapping)
    want = out.clone()
    src = translator.read_source(None, req_pool_indices=req, bs=lens.numel(), kind="FULL")
    reference.create_flashinfer_kv_indices(src.ids, src.row_ids[: lens.numel()], lens, indptr, start, want,
                                           src.entry_page_size, mapping_t)
    got = hooks.pack_read_stream(_never, translator, Plan(has_table=True), req_pool_indices=req, seq_lens=lens,
                                 indptr=indptr, out=out, kv_start_idx=start, kind="FULL", token_mapping=mapping_t)
    assert torch.equal(out, want)
    assert got == (source == "table" or mapping)  # what SGLang returns: whether the ids are physical


@pytest.mark.parametrize("change", ["table_to_build", "v2p", "strided", "mapping_on_translated", "int64_ids",
                                    "short_rows"])
def test_pack_read_stream_runs_sglangs_method_where_ours_does_not_cover(change, gen):
    source = {"table_to_build": "table", "v2p": "v2p", "mapping_on_translated": "table"}.get(change, "verbatim")
    translator, req, lens, indptr, start, _, out = _pack_case(gen, source)
    plan = Plan(has_table=change != "table_to_build")
    mapping = torch.zeros(4, dtype=torch.int64) if change == "mapping_on_translated" else None
    t = translator.table
    if change == "strided":
        t.ids = t.ids[:, ::2]
    if change == "int64_ids":
        t.ids = t.ids.long()
    if change == "short_rows":
        req = req[:2]
    ran = []
    before = out.clone()
    got = hooks.pack_read_stream(lambda *a, **k: ran.append((a, k)) or "theirs", translator, plan,
                                 req_pool_indices=req, seq_lens=lens, indptr=indptr, out=out, kind="FULL",
                                 token_mapping=mapping)
    assert got == "theirs" and len(ran) == 1 and torch.equal(out, before)
    assert ran[0][1]["kind"] == "FULL" and ran[0][1]["token_mapping"] is mapping


def test_pack_read_stream_default_kind_is_sglangs():
    pytest.importorskip("sglang.srt.mem_cache.kv_loc_plan")
    from sglang.srt.mem_cache.kv_loc_plan import IdSpaceKind

    assert hooks.FULL_KIND == IdSpaceKind.FULL and not (hooks.FULL_KIND != IdSpaceKind.FULL)
    assert hooks.FULL_KIND != IdSpaceKind.SLIDING_WINDOW
    seen = []
    hooks.pack_read_stream(lambda *a, **k: seen.append(k["kind"]) or True, PackTranslator(Table(), True),
                           Plan(has_table=False), req_pool_indices=torch.zeros(1, dtype=torch.int64),
                           seq_lens=torch.ones(1, dtype=torch.int64), indptr=torch.zeros(2, dtype=torch.int32),
                           out=torch.zeros(1, dtype=torch.int32))
    assert seen == [IdSpaceKind.FULL]


def test_pack_read_stream_equals_sglangs_own_method_in_the_interpreter():
    """SGLang 0.5.23's real KVIndexTranslator (a static pool) and its
    pack_read_stream (the Triton gather interpreted, on CPU) against the hook on
    the same translator and poisoned buffers: windows, token mappings, int32 and
    int64 streams, 1-D and 2-D grids."""
    if importlib.util.find_spec("sglang") is None or importlib.util.find_spec("triton") is None:
        pytest.skip("needs the installed sglang 0.5.23 and triton")
    seed = int(os.environ.get("SGLMETA_TEST_SEED", "0")) or 12345
    out = interpreter_child("sglang_plugin/pack_read_stream_child.py", str(seed), "24")
    assert "ok 24" in out, out


# ---- FlashInfer decode: call_begin_forward over a prebuilt kv_indptr / kv_indices pair ----


class PackingTranslator(Translator):
    """A translator whose pack_read_stream is the gather 0.5.23's makes (its reference)."""

    reads_are_translated = False
    needs_read_translate = False

    def pack_read_stream(self, plan, *, req_pool_indices, seq_lens, indptr, out, kv_start_idx=None, kind=None,
                         num_token_blocks=1, kv_lens_sum=None):
        bs = int(seq_lens.numel())
        src = self.read_source(plan, req_pool_indices=req_pool_indices, bs=bs, kind=kind)
        if src.v2p is not None:
            reference.kv_read_token_stream(req_to_token=src.ids, req_pool_indices=src.row_ids[:bs], seq_lens=seq_lens,
                                           indptr=indptr, out=out, page_size=self.page_size, v2p=src.v2p)
        else:
            reference.create_flashinfer_kv_indices(src.ids, src.row_ids[:bs], seq_lens, indptr, kv_start_idx, out,
                                                   src.entry_page_size)
        return False


class GraphWrapper:
    """FlashInfer's CUDA-graph decode wrapper as call_begin_forward uses it: its static
    index buffer, and begin_forward (the planner, left out) recording what it was given."""

    is_cuda_graph_enabled = True

    def __init__(self, out):
        self._paged_kv_indices_buf, self.planned = out, []

    def begin_forward(self, *args, **kwargs):
        self.planned.append(([a.clone() if isinstance(a, torch.Tensor) else a for a in args], kwargs))


def _flashinfer_world(gen, source: str, bs: int = 5, device="cpu"):
    b, req, lens = _backend(gen, source, bs)
    table = b.kv_index_translator.table
    table = Table(**{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in vars(table).items()})
    updater = types.SimpleNamespace(
        attn_backend=types.SimpleNamespace(kv_index_translator=PackingTranslator(table, b.kv_index_translator.page_size)),
        _swa_kv_pool=None, kv_last_page_len=torch.ones(bs + 4, dtype=torch.int32, device=device), num_qo_heads=8,
        num_kv_heads=1, head_dim=64, data_type=torch.bfloat16, q_data_type=torch.bfloat16)
    kv_indptr = torch.full((bs + 4,), -7, dtype=torch.int32, device=device)
    kv_indptr[0] = 0  # 0.5.23 allocates it zeroed and never writes element 0
    wrapper = GraphWrapper(torch.full((bs * 160,), -7, dtype=torch.int32, device=device))
    return updater, wrapper, kv_indptr, req.to(device), lens.to(device)


@pytest.mark.parametrize("source", ["req_to_token", "table", "v2p"])
def test_flashinfer_decode_equals_sglangs_call_begin_forward(source, gen, device):
    fb = pytest.importorskip("sglang.srt.layers.attention.flashinfer_backend", reason="SGLang is not installed")
    original = fb.FlashInferIndicesUpdaterDecode.call_begin_forward
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    worlds = []
    for hooked in (False, True):
        updater, wrapper, kv_indptr, req, lens = _flashinfer_world(torch.Generator().manual_seed(seed), source,
                                                                   device=device)
        call = (lambda *a, **k: hooks.flashinfer_decode_call_begin_forward(original, *a, **k)) if hooked else original
        call(updater, wrapper, lens, int(lens.sum()), kv_indptr, None, None, None, plan=OWN_PLAN, req_pool_indices=req)
        worlds.append((kv_indptr, wrapper))
    (indptr_a, wrap_a), (indptr_b, wrap_b) = worlds
    assert torch.equal(indptr_a, indptr_b)
    assert torch.equal(wrap_a._paged_kv_indices_buf, wrap_b._paged_kv_indices_buf)
    (args_a, kw_a), (args_b, kw_b) = wrap_a.planned[0], wrap_b.planned[0]  # the planner saw the same arguments
    assert len(wrap_a.planned) == len(wrap_b.planned) == 1 and kw_a == kw_b and len(args_a) == len(args_b)
    for x, y in zip(args_a, args_b):
        assert torch.equal(x, y) if isinstance(x, torch.Tensor) else x == y


@pytest.mark.parametrize("change", ["prebuilt_spec", "sliding_window", "window_start", "eager_wrapper"])
def test_flashinfer_decode_uncovered_runs_sglangs_method(change, gen):
    updater, wrapper, kv_indptr, req, lens = _flashinfer_world(gen, "req_to_token")
    spec, swa, start = None, False, None
    if change == "prebuilt_spec":
        spec = types.SimpleNamespace(kv_indptr=kv_indptr[:6], kv_indices=wrapper._paged_kv_indices_buf)
    elif change == "sliding_window":
        swa = True
    elif change == "window_start":
        start = torch.zeros_like(lens)
    else:
        wrapper.is_cuda_graph_enabled = False
    seen = []

    def sglang(self, *args, **kwargs):
        seen.append(args[5])  # spec_info, as it reached SGLang's method
        return "sglang"

    got = hooks.flashinfer_decode_call_begin_forward(sglang, updater, wrapper, lens, int(lens.sum()), kv_indptr, start,
                                                     spec, None, swa, plan=OWN_PLAN, req_pool_indices=req)
    assert got == "sglang" and seen == [spec]
    assert (kv_indptr[1:] == -7).all() and (wrapper._paged_kv_indices_buf == -7).all()  # nothing of ours ran


@pytest.mark.parametrize("outer", ["ours", "another_plugin"])
def test_flashinfer_draft_step_updaters_call_sglangs_method_directly(outer):
    registry = pytest.importorskip("sglang.srt.plugins.hook_registry", reason="SGLang is not installed")
    calls = []

    class Updater:  # FlashInfer's decode updater, its call_begin_forward hooked as load_plugins() does
        def call_begin_forward(self, *args, **kwargs):
            calls.append("sglang")

    sglangs = Updater.__dict__["call_begin_forward"]
    hooked = registry._wrap_fn(sglangs, hooks.flashinfer_decode_call_begin_forward, registry.HookType.AROUND)
    if outer == "another_plugin":
        hooked = registry._wrap_fn(hooked, lambda original, *a, **k: original(*a, **k), registry.HookType.AROUND)
    Updater.call_begin_forward = hooked

    def sglang_init(self, model_runner, topk, speculative_num_steps):
        self.attn_backends = [types.SimpleNamespace(indices_updater_decode=Updater())
                              for _ in range(speculative_num_steps - 1)]

    draft = types.SimpleNamespace()
    hooks.flashinfer_multi_step_draft_init(sglang_init, draft, None, 1, 3)
    assert len(draft.attn_backends) == 2
    for backend in draft.attn_backends:
        method = backend.indices_updater_decode.call_begin_forward
        if outer == "ours":  # bound to SGLang's method: no wrapper of ours on the draft steps
            assert method.__func__ is sglangs and method.__self__ is backend.indices_updater_decode
        else:  # another plugin's wrapper stays in the path, and with it ours
            assert "call_begin_forward" not in vars(backend.indices_updater_decode)
    assert Updater.call_begin_forward is hooked  # the decode backend's own updaters keep the hook
    if outer == "ours":
        draft.attn_backends[0].indices_updater_decode.call_begin_forward("any", "arguments")
        assert calls == ["sglang"]


# ---- FlashInfer MLA decode: the same prebuilt-pair branch ----


class MlaWrapper:
    """FlashInfer's MLA wrapper as the decode updater uses it: plan (left out) records its arguments."""

    def __init__(self):
        self.planned = []

    def plan(self, *args):
        self.planned.append([a.clone() if isinstance(a, torch.Tensor) else a for a in args])


def _mla_world(gen, source: str, device, bs: int = 5):
    updater, _, kv_indptr, req, lens = _flashinfer_world(gen, source, bs, device=device)
    updater = types.SimpleNamespace(attn_backend=updater.attn_backend, num_local_heads=16, kv_lora_rank=512,
                                    qk_rope_head_dim=64, scaling=0.125, data_type=torch.bfloat16)
    fast = dict(kv_indices=torch.full((bs * 160,), -7, dtype=torch.int32, device=device),
                qo_indptr_cpu=torch.arange(bs + 1, dtype=torch.int32),
                kv_indptr_cpu=torch.cat([torch.zeros(1, dtype=torch.int64), lens.cpu().cumsum(0)]).to(torch.int32),
                kv_len_arr_cpu=lens.cpu().to(torch.int32))
    return updater, kv_indptr, req, lens, fast


def _mla_module(monkeypatch, dcp: bool = False):
    m = pytest.importorskip("sglang.srt.layers.attention.flashinfer_mla_backend", reason="SGLang is not installed")
    monkeypatch.setattr(m, "get_parallel", lambda: types.SimpleNamespace(dcp_enabled=dcp, attn_dcp_size=2 if dcp else 1))
    return m


@pytest.mark.parametrize("replay", [True, False], ids=["replay", "eager"])
@pytest.mark.parametrize("source", ["req_to_token", "table", "v2p"])
def test_flashinfer_mla_decode_equals_sglangs_call_begin_forward(source, replay, gen, device, monkeypatch):
    m = _mla_module(monkeypatch)
    if not replay and torch.device(device).type != "cuda":
        pytest.skip("0.5.23 allocates the eager kv_indices on 'cuda'")
    original = m.FlashInferMLAIndicesUpdaterDecode.call_begin_forward
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    worlds = []
    for hooked in (False, True):
        updater, kv_indptr, req, lens, fast = _mla_world(torch.Generator().manual_seed(seed), source, device)
        wrapper = MlaWrapper()
        call = (lambda *a, **k: hooks.flashinfer_mla_decode_call_begin_forward(original, *a, **k)) if hooked else original
        call(updater, wrapper, lens, int(lens.sum()), torch.arange(8, dtype=torch.int32, device=device), kv_indptr,
             replay, None, plan=OWN_PLAN, req_pool_indices=req, **(fast if replay else {}))
        worlds.append((kv_indptr, fast["kv_indices"], wrapper.planned))
    (indptr_a, out_a, plan_a), (indptr_b, out_b, plan_b) = worlds
    assert torch.equal(indptr_a, indptr_b) and torch.equal(out_a, out_b)
    assert len(plan_a) == len(plan_b) == 1 and len(plan_a[0]) == len(plan_b[0])
    for x, y in zip(plan_a[0], plan_b[0]):  # the planner saw the same arguments (kv_indices included)
        assert (x.dtype == y.dtype and torch.equal(x, y)) if isinstance(x, torch.Tensor) else x == y


@pytest.mark.parametrize("change", ["prebuilt_spec", "dcp", "translating_pool"])
def test_flashinfer_mla_decode_uncovered_runs_sglangs_method(change, gen, monkeypatch):
    _mla_module(monkeypatch, dcp=change == "dcp")
    updater, kv_indptr, req, lens, fast = _mla_world(gen, "req_to_token", torch.device("cpu"))
    spec = None
    if change == "prebuilt_spec":
        spec = types.SimpleNamespace(kv_indptr=kv_indptr[:6], kv_indices=fast["kv_indices"])
    elif change == "translating_pool":
        updater.attn_backend.kv_index_translator.needs_read_translate = True
    seen = []

    def sglang(self, *args, **kwargs):
        seen.append(args[6])  # spec_info, as it reached SGLang's method
        return "sglang"

    sglang.__module__ = "sglang.srt.layers.attention.flashinfer_mla_backend"
    got = hooks.flashinfer_mla_decode_call_begin_forward(sglang, updater, MlaWrapper(), lens, int(lens.sum()),
                                                         torch.arange(8, dtype=torch.int32), kv_indptr, True, spec,
                                                         plan=OWN_PLAN, req_pool_indices=req, **fast)
    assert got == "sglang" and seen == [spec]
    assert (kv_indptr[1:] == -7).all() and (fast["kv_indices"] == -7).all()  # nothing of ours ran


def test_a_v2p_source_under_another_plan_runs_sglangs_method(gen):
    """0.5.23's pack_read_stream asserts that a translating reader gathers through the
    plan over its own rows; the hooks leave such a call to it (so that it says so)."""
    updater, wrapper, kv_indptr, req, lens = _flashinfer_world(gen, "v2p")
    seen = []
    other = types.SimpleNamespace(is_read_by=lambda reader: False)
    hooks.flashinfer_decode_call_begin_forward(lambda *a, **k: seen.append(k["plan"]), updater, wrapper, lens,
                                               int(lens.sum()), kv_indptr, None, None, None, plan=other,
                                               req_pool_indices=req)
    assert seen == [other] and (kv_indptr[1:] == -7).all()


class DraftTranslator(Translator):
    def read_source(self, plan, *, req_pool_indices, bs, kind="FULL"):  # the draft backend passes no kind
        return super().read_source(plan, req_pool_indices=req_pool_indices, bs=bs, kind=kind)


def _draft_world(gen, bs: int = 4, topk: int = 2, steps: int = 3, source: str = "verbatim"):
    """A TritonMultiStepDraftBackend as its replay prep reads it, and a batch (chains within the rows)."""
    r2t = torch.randint(-1, 2**20, (9, 200), generator=gen, dtype=torch.int64).to(torch.int32)
    table = Table(ids=r2t, row_ids=None, entry_page_size=1, v2p=torch.arange(40) if source == "v2p" else None)
    if source == "entry_pages":
        table.entry_page_size = 16
    last = types.SimpleNamespace(cuda_graph_num_kv_splits=torch.full((bs * topk + 3,), -7, dtype=torch.int32),
                                 enable_deterministic=False, static_kv_splits=False, device_core_count=132,
                                 dcp_size=1, num_head=32, num_kv_head=8, max_kv_splits=8,
                                 use_sliding_window_kv_pool=False)
    b = types.SimpleNamespace(attn_backends=[last] * (steps - 1), kv_index_translator=DraftTranslator(table),
                              cuda_graph_kv_indices=torch.full((steps, bs * topk * 210), -7, dtype=torch.int64),
                              kv_indptr=torch.zeros((steps, bs * topk + 1), dtype=torch.int32), topk=topk,
                              speculative_num_steps=steps, page_size=1, draft_window_size=0, draft_sink_size=0,
                              window_rail=False)
    lens = torch.randint(1, 150, (bs,), generator=gen)
    batch = types.SimpleNamespace(batch_size=bs, kv_loc_plan=None, req_pool_indices=torch.randperm(9, generator=gen)[:bs],
                                  seq_lens=lens, positions=(lens + 1).repeat_interleave(topk))
    return b, batch


def test_triton_multi_step_draft_equals_the_kernel_then_the_split_counts(gen):
    """Every step's kv_indices and kv_indptr (generate_draft_decode_kv_indices) and the last step backend's split
    counts (get_num_kv_splits with num_group = topk) in one call of ours."""
    b, batch = _draft_world(gen)
    last, bs, topk = b.attn_backends[-1], batch.batch_size, b.topk
    want = {"kv_indices": b.cuda_graph_kv_indices.clone(), "kv_indptr": b.kv_indptr.clone(),
            "splits": last.cuda_graph_num_kv_splits.clone()}
    reference.build_draft_decode_kv_indices(
        req_to_token=b.kv_index_translator.table.ids, req_pool_indices=batch.req_pool_indices,
        seq_lens=batch.seq_lens, positions=batch.positions, kv_indices=want["kv_indices"], kv_indptr=want["kv_indptr"],
        topk=topk, num_steps=3, num_kv_splits=want["splits"][: bs * topk], num_head=32, num_kv_head=8,
        max_kv_splits=8, device_core_count=132)
    hooks.multi_step_draft_init_forward_metadata_out_graph(_never, b, batch)
    assert torch.equal(b.cuda_graph_kv_indices, want["kv_indices"]) and torch.equal(b.kv_indptr, want["kv_indptr"])
    assert torch.equal(last.cuda_graph_num_kv_splits, want["splits"])
    assert (want["splits"][bs * topk:] == -7).all() and (want["splits"][: bs * topk] != -7).all()


@pytest.mark.parametrize("change", ["capture", "window_rail", "swa_pool", "dcp", "static", "deterministic", "no_cores",
                                    "v2p", "entry_pages"])
def test_triton_multi_step_draft_uncovered_runs_sglangs_method(change, gen):
    b, batch = _draft_world(gen, source=change if change in ("v2p", "entry_pages") else "verbatim")
    last = b.attn_backends[-1]
    edits = {"window_rail": (b, "window_rail", True), "swa_pool": (last, "use_sliding_window_kv_pool", True),
             "dcp": (last, "dcp_size", 2), "static": (last, "static_kv_splits", True),
             "deterministic": (last, "enable_deterministic", True), "no_cores": (last, "device_core_count", 0)}
    if change in edits:
        setattr(*edits[change])
    before = b.cuda_graph_kv_indices.clone()
    ran = []
    hooks.multi_step_draft_init_forward_metadata_out_graph(lambda *a, **k: ran.append((a, k)), b, batch,
                                                           in_capture=change == "capture")
    assert len(ran) == 1 and ran[0][1] == {"in_capture": change == "capture"}
    assert torch.equal(b.cuda_graph_kv_indices, before)
