"""sgl_meta.sglang.trtllm_mha_unified: the unified pool's page tables in the
recorded update, against SGLang 0.5.23's own out-of-graph path.

Runs SGLang's real classes on CPU tensors: ``TRTLLMHAAttnBackend`` and
``TRTLLMHAAttnMultiStepDraftBackend`` (built with ``object.__new__`` plus the
attributes their ``__init__`` sets; their own ``init_cuda_graph_state``,
``_build_cuda_graph_metadata``, ``init_forward_metadata_out_graph``,
``_apply_cuda_graph_metadata``), ``KVIndexTranslator`` / ``KVLocPlan`` (their
own ``copy_page_table`` / ``read_table``, whose ``build_kv_read_table`` has a
CPU path) and HookRegistry's own AROUND wrapper. The one substitution in
SGLang's world: its Triton ``update_trtllm_mha_graph_metadata`` (no GPU here)
is the plugin's adapter, as the plugin's first hook row makes it; that adapter
is checked against a model of 0.5.23's kernel in test_semantics.py.

A "replay" is the out-of-graph prep then the in-graph body again on the same
static buffers (what ``graph.replay()`` re-executes). Each world's page tables
are poisoned before every prep; tables are compared on what the attention
kernels read: rows < the captured bs, pages < ceil(cache_seqlens / page_size).
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import pytest
import torch

from helpers import poison_
from sglang_calls import require_sglang
from sgl_meta.sglang import trtllm_mha_spec as spec
from sgl_meta.sglang import trtllm_mha_unified as unified

PS, CTX, POOL, NV = 4, 64, 10, 48  # page size, req_to_token width, rows, virtual pages
MAX_PAGES = CTX // PS
MAX_BS, MAX_TOKENS = 8, 64
DRAFT_TOKENS, STEPS = 3, 3  # verify window; draft decode window (K = 3: two step backends)


@pytest.fixture(scope="module")
def sg():
    require_sglang()
    from sglang.srt.layers.attention import trtllm_mha_backend as mha
    from sglang.srt.mem_cache.kv_index_translator import KVIndexTranslator
    from sglang.srt.mem_cache.kv_loc_plan import IdSpace, IdSpaceKind
    from sglang.srt.model_executor.forward_batch_info import ForwardMode
    from sglang.srt.plugins.hook_registry import HookType, _wrap_fn

    from sgl_meta.sglang.adapters import update_trtllm_mha_graph_metadata as adapter

    return SimpleNamespace(mha=mha, KVIndexTranslator=KVIndexTranslator, IdSpace=IdSpace, Kind=IdSpaceKind,
                           ForwardMode=ForwardMode, HookType=HookType, wrap=_wrap_fn, adapter=adapter)


@pytest.fixture(autouse=True)
def sglang_update_on_cpu(sg, monkeypatch):
    """SGLang's Triton update -> the plugin's adapter (what its first row does)."""
    monkeypatch.setattr(sg.mha, "update_trtllm_mha_graph_metadata", sg.adapter)


@contextlib.contextmanager
def hooked(sg):
    """The plugin's AROUND hooks, wrapped by HookRegistry's own wrapper."""
    B, M = sg.mha.TRTLLMHAAttnBackend, sg.mha.TRTLLMHAAttnMultiStepDraftBackend
    rows = [(B, "_apply_cuda_graph_metadata", unified.apply_cuda_graph_metadata),
            (B, "init_forward_metadata_out_graph", unified.init_forward_metadata_out_graph),
            (M, "init_forward_metadata_in_graph", spec.multi_step_draft_init_forward_metadata_in_graph)]
    saved = [(cls, name, cls.__dict__[name]) for cls, name, _ in rows]
    try:
        for cls, name, ours in rows:
            setattr(cls, name, sg.wrap(cls.__dict__[name], ours, sg.HookType.AROUND))
        yield
    finally:
        for cls, name, fn in saved:
            setattr(cls, name, fn)


# ---- a unified pool ------------------------------------------------------------------


def make_pool(sg, gen, swa: bool, mode: str = "unified"):
    """req_to_token of virtual slots (row 0 the zero padding row, a few -1), v2p /
    swa_v2p with the sink at virtual page 0, freed (-1) pages, the -1 sentinel."""
    vpages = torch.randint(1, NV, (POOL, MAX_PAGES), generator=gen)
    r2t = (vpages.repeat_interleave(PS, 1) * PS + torch.arange(CTX) % PS).to(torch.int32)
    r2t[0] = 0
    r2t[3, 8] = -1  # a -1 at a page's first slot: virtual page 0
    r2t[5, 0] = -1

    def table(free_share):
        t = torch.randperm(4 * NV, generator=gen)[: NV + 1].to(torch.int64) + 1
        t[torch.rand(NV + 1, generator=gen) < free_share] = -1
        t[0], t[-1] = 0, -1
        return t

    v2p, swa_v2p = table(0.1), table(0.4)
    t = object.__new__(sg.KVIndexTranslator)
    t.req_to_token, t.page_size, t.device = r2t, PS, "cpu"
    t.is_translating = mode != "static"
    t.defer_read_translate = mode == "dcp"
    t._capture_page_size, t._full_v2p_table, t._translate_full = PS, v2p, None
    t._rows = torch.arange(POOL, dtype=torch.int64)

    def write(table):
        return lambda ids: table[ids.clamp(min=0) // PS].clamp(min=0) * PS + ids % PS

    read = mode in ("unified", "no_swa_space")
    t._spaces = {sg.Kind.FULL: sg.IdSpace(key=(sg.Kind.FULL, 1), write=write(v2p) if t.is_translating else None,
                                          read_v2p=v2p if read else None)}
    if swa and mode != "no_swa_space":
        t._spaces[sg.Kind.SLIDING_WINDOW] = sg.IdSpace(key=(sg.Kind.SLIDING_WINDOW, 1), write=write(swa_v2p),
                                                       read_v2p=swa_v2p if read else None)
    return SimpleNamespace(r2t=r2t, v2p=v2p, swa_v2p=swa_v2p, translator=t)


def make_backend(sg, pool, swa: bool, step: int = 0, encoder: bool = False, static_mapping=None):
    b = object.__new__(sg.mha.TRTLLMHAAttnBackend)
    b.req_to_token, b.page_size, b.max_num_pages, b.device = pool.r2t, PS, MAX_PAGES, "cpu"
    b.speculative_num_draft_tokens, b.speculative_step_id, b.topk = DRAFT_TOKENS, step, 1
    b.target_verify_metadata = {}
    b._swa_kv_pool = SimpleNamespace(full_to_swa_index_mapping=static_mapping) if swa else None
    b.use_sliding_window_kv_pool = swa
    b._swa_full_to_swa_mapping = static_mapping
    b.expand_encoder_only_verify = encoder
    b.kv_index_translator = pool.translator
    b.forward_metadata = None
    b.is_xqa_impl = False
    b.init_cuda_graph_state(MAX_BS, MAX_TOKENS)
    return b


class Spec:
    """The attributes 0.5.23 reads off a spec input here."""

    def __init__(self, draft: bool, tokens_per_req: int):
        self.draft = draft
        self.ragged_verify_layout = None
        self.draft_token_num = DRAFT_TOKENS
        self.num_tokens_per_req = tokens_per_req

    def is_draft_input(self):
        return self.draft


MODES = {  # name: (ForwardMode attribute, spec input?, tokens written per request)
    "decode": ("DECODE", None, 1),
    "draft_decode": ("DECODE", True, STEPS),
    "target_verify": ("TARGET_VERIFY", False, DRAFT_TOKENS),
    "draft_extend": ("DRAFT_EXTEND_V2", True, 2),
}


def batch(sg, mode: str, bs: int, rpi, seq_lens, out_cache_loc):
    fm, draft, per_req = MODES[mode]
    spec_info = None if draft is None else Spec(draft, per_req)
    positions = torch.zeros(bs * (1 if mode in ("decode", "draft_decode") else per_req), dtype=torch.int64)
    return SimpleNamespace(batch_size=bs, forward_mode=getattr(sg.ForwardMode, fm), spec_info=spec_info,
                           req_pool_indices=rpi, seq_lens=seq_lens, seq_lens_cpu=seq_lens.clone(),
                           seq_lens_sum=int(seq_lens.sum()),
                           out_cache_loc=out_cache_loc, positions=positions, encoder_lens=None)


def read_extent(mode: str) -> int:  # 0.5.23's window_read_extent for these batches
    return {"decode": 0, "draft_decode": STEPS, "target_verify": DRAFT_TOKENS, "draft_extend": 2}[mode]


class World:
    """One backend (or a multi-step draft backend over K - 1 of them), its static
    graph inputs, and the graph's capture and replays."""

    def __init__(self, sg, pool, mode, bs, swa, encoder=False, static_mapping=None):
        self.sg, self.pool, self.mode, self.bs = sg, pool, mode, bs
        per_req = MODES[mode][2]
        self.rpi = torch.zeros(MAX_BS, dtype=torch.int64)
        self.seq = torch.ones(MAX_BS, dtype=torch.int64)  # 0.5.23's seq_len_fill_value for trtllm_mha
        self.loc = torch.zeros(bs * per_req, dtype=torch.int64)
        if mode == "draft_decode":
            self.steps = [make_backend(sg, pool, swa, step=i, static_mapping=static_mapping) for i in range(STEPS - 1)]
            self.runner = object.__new__(sg.mha.TRTLLMHAAttnMultiStepDraftBackend)
            self.runner.attn_backends, self.runner.speculative_num_steps, self.runner.topk = self.steps, STEPS, 1
        else:
            self.steps = [make_backend(sg, pool, swa, encoder=encoder, static_mapping=static_mapping)]
            self.runner = self.steps[0]

    def fb(self):
        return batch(self.sg, self.mode, self.bs, self.rpi[: self.bs], self.seq[: self.bs], self.loc)

    def capture_fb(self):
        fb = self.fb()
        self.pool.translator.bind_runner_slots(fb)  # as the graph runner binds its capture batch
        return fb

    def capture(self, gen):
        fb = self.capture_fb()
        self.runner.init_forward_metadata_out_graph(fb, in_capture=True)
        self.runner.init_forward_metadata_in_graph(fb)

    def metas(self):
        return [b.forward_metadata for b in self.steps]

    def replay(self, live_rpi, live_seq, seed):
        raw = live_rpi.numel()
        self.rpi.zero_()[:raw] = live_rpi
        self.seq.fill_(1)[:raw] = live_seq
        per_req = MODES[self.mode][2]
        window = torch.stack([self.pool.r2t[r, s: s + per_req] for r, s in zip(live_rpi.tolist(), live_seq.tolist())])
        plan = self.pool.translator.plan(req_pool_indices=live_rpi, seq_lens=live_seq, seq_lens_cpu=live_seq.clone(),
                                         write_virtual=window.reshape(-1).to(torch.int64),
                                         read_extent=read_extent(self.mode))
        self.loc.zero_()[: raw * per_req] = plan.write_ids(self.pool.translator)
        fb = self.fb()
        plan.bind_replay(fb, self.pool.translator, slots=self.loc)
        g = torch.Generator().manual_seed(seed)
        for b in self.steps:  # the same poison in both worlds
            for meta in b.decode_cuda_graph_metadata, b.target_verify_metadata, getattr(b, "draft_extend_metadata", {}):
                for key in ("page_table", "page_table_draft_decode", "swa_page_table", "swa_page_table_draft_decode",
                            "encoder_page_table"):
                    if meta.get(key) is not None:
                        poison_(meta[key], g)
        self.runner.init_forward_metadata_out_graph(fb)
        self.runner.init_forward_metadata_in_graph(fb)  # graph.replay()
        return plan


def live_batch(gen, raw, mode):
    rows = torch.randperm(POOL - 1, generator=gen)[:raw] + 1
    seq = torch.randint(1, CTX - read_extent(mode) - 1, (raw,), generator=gen)
    return rows, seq


def assert_same_reads(a: World, b: World, tables=("page_table", "swa_page_table")):
    """Equal metadata on everything the attention kernels read."""
    compared = 0
    for ma, mb, sa, sb in zip(a.metas(), b.metas(), a.steps, b.steps):
        for name in ("cache_seqlens_int32", "cu_seqlens_k", "cu_seqlens_q"):
            assert torch.equal(getattr(ma, name), getattr(mb, name)), name
        if getattr(ma, "swa_out_cache_loc", None) is not None:  # SGLang's own out-of-graph write, both worlds
            assert torch.equal(sa.cuda_graph_swa_out_cache_loc, sb.cuda_graph_swa_out_cache_loc)
        pairs = [(getattr(ma, t), getattr(mb, t), ma.cache_seqlens_int32) for t in tables]
        if getattr(ma, "encoder_page_table", None) is not None:
            assert torch.equal(ma.encoder_cache_seqlens, mb.encoder_cache_seqlens)
            pairs.append((ma.encoder_page_table, mb.encoder_page_table, ma.encoder_cache_seqlens))
        for ta, tb, lens in pairs:
            assert (ta is None) == (tb is None)
            if ta is None:
                continue
            for r in range(ta.shape[0]):
                n = min(-(-int(lens[r]) // PS), MAX_PAGES)
                assert torch.equal(ta[r, :n], tb[r, :n]), (r, n, ta[r, :n], tb[r, :n])
                compared += n
    assert compared > 0 or not tables


def run_pair(sg, gen, mode, swa, raw, bs, encoder=False, replays=2, same_batch=False):
    """SGLang's world and the hooked one over one pool; the v2p tables compacted
    (rewritten in place, req_to_token unchanged) between replays."""
    pool = make_pool(sg, gen, swa)
    a, b = World(sg, pool, mode, bs, swa, encoder), World(sg, pool, mode, bs, swa, encoder)
    a.capture(gen)
    with hooked(sg):
        b.capture(gen)
    rows, seq = live_batch(gen, raw, mode)
    for k in range(replays):
        if k and not same_batch:
            rows, seq = live_batch(gen, raw, mode)
        a.replay(rows, seq, seed=k)
        with hooked(sg):
            calls = spy_copies(pool.translator)
            plan = b.replay(rows, seq, seed=k)
            del pool.translator.copy_page_table
        assert_same_reads(a, b)
        yield a, b, plan, calls
        # compaction: pages move, v2p / swa_v2p rewritten in place (same storage)
        for t in (pool.v2p, pool.swa_v2p):
            moved = t[1:-1].clone()
            live = moved >= 0
            moved[live] = moved[live][torch.randperm(int(live.sum()), generator=gen)] + 1000
            t[1:-1] = moved


def spy_copies(translator):
    calls = []
    real = type(translator).copy_page_table.__get__(translator)

    def spy(plan, *, out, **kw):
        calls.append(kw.get("kind"))
        return real(plan, out=out, **kw)

    translator.copy_page_table = spy
    return calls


# ---- the unified pool: ours equals SGLang's on what kernels read --------------------


@pytest.mark.parametrize("swa", [False, True], ids=["full", "swa"])
@pytest.mark.parametrize("raw,bs", [(3, 3), (3, 5)], ids=["unpadded", "padded"])
@pytest.mark.parametrize("mode", list(MODES))
def test_unified_tables_built_in_graph_equal_sglangs(sg, gen, mode, swa, raw, bs):
    for a, b, plan, calls in run_pair(sg, gen, mode, swa, raw, bs):
        assert calls == [], "the hooked prep still rebuilt a table the recorded update writes"
        for m in b.metas():
            assert getattr(m, unified.RECORDED) is True
            assert not hasattr(a.metas()[0], unified.RECORDED)
        # padded rows: the sink, as SGLang's table has them
        for m in b.metas():
            assert (m.page_table[raw:bs, :1] == 0).all()
        # a later reader of the iteration builds its own table: the same values
        assert plan.has_read_table(sg.Kind.FULL, reader=b.pool.translator) is False
        table = b.pool.translator.read_table(plan, rows=raw)
        for r in range(raw):
            n = -(-(int(plan.seq_lens[r]) + plan.read_extent) // PS)
            want = b.pool.v2p[(b.pool.r2t[plan.req_pool_indices[r], : n * PS: PS].clamp(min=0) // PS)].clamp(min=0)
            assert torch.equal(table.ids[r, :n], want.to(torch.int32))


def test_target_verify_encoder_only_rows_follow_the_in_graph_tables(sg, gen):
    for _ in run_pair(sg, gen, "target_verify", swa=False, raw=2, bs=4, encoder=True):
        pass


def test_compaction_is_seen_by_the_recorded_call(sg, gen):
    """The recorded call holds the allocator's v2p tensors themselves: a page move
    (v2p rewritten in place, req_to_token unchanged) reaches the next replay."""
    seen = []
    for a, b, plan, _ in run_pair(sg, gen, "decode", swa=True, raw=3, bs=4, replays=2, same_batch=True):
        m = b.metas()[0]
        # every live column of both tables (a row's first page alone may be freed
        # in both v2p tables: seen with SGLMETA_TEST_SEED=340499393)
        cols = [-(-int(n) // PS) for n in m.cache_seqlens_int32[:3]]
        seen.append(torch.cat([t[r, : cols[r]] for t in (m.page_table, m.swa_page_table) for r in range(3)]))
    # every live page moved (to a physical id > 1000): the second replay reads the new ids
    moved = [(int(x), int(y)) for x, y in zip(seen[0], seen[1]) if int(x) > 0]
    assert moved and all(y > 1000 for _, y in moved)


def test_the_recorded_tables_are_the_translators_own(sg, gen, monkeypatch):
    pool = make_pool(sg, gen, swa=True)
    w = World(sg, pool, "decode", 2, swa=True)
    got = []
    monkeypatch.setattr(unified, "update_trtllm_mha_graph_metadata", lambda **kw: got.append(kw))
    with hooked(sg):
        w.capture(gen)
    (kw,) = got
    assert kw["v2p"] is pool.translator.space(sg.Kind.FULL).read_v2p is pool.v2p
    assert kw["swa_v2p"] is pool.translator.space(sg.Kind.SLIDING_WINDOW).read_v2p is pool.swa_v2p
    assert kw["page_table"] is w.metas()[0].page_table and kw["live_pages_only"] is True


# ---- fall-backs: SGLang's behaviour untouched ---------------------------------------


def outcome(fn):
    try:
        fn()
        return None
    except AssertionError as err:
        return str(err)


@pytest.mark.parametrize("pool_mode", ["dcp", "no_swa_space"])
@pytest.mark.parametrize("mode", ["decode", "target_verify"])
def test_reads_that_stay_virtual_keep_sglangs_path(sg, gen, pool_mode, mode):
    """DCP (read_v2p None: 0.5.23's copy_page_table asserts) and an SWA table
    without the sliding-window sub-pool's v2p: the hooks call SGLang's methods."""
    pool = make_pool(sg, gen, swa=True, mode=pool_mode)
    a, b = World(sg, pool, mode, 3, swa=True), World(sg, pool, mode, 3, swa=True)
    want = outcome(lambda: a.runner.init_forward_metadata_out_graph(a.capture_fb(), in_capture=True))
    with hooked(sg):
        got = outcome(lambda: b.runner.init_forward_metadata_out_graph(b.capture_fb(), in_capture=True))
        b.runner.init_forward_metadata_in_graph(b.capture_fb())
    a.runner.init_forward_metadata_in_graph(a.capture_fb())
    assert got == want and want is not None  # 0.5.23 asserts in copy_page_table
    assert not hasattr(b.metas()[0], unified.RECORDED)
    assert_same_reads(a, b, tables=())


@pytest.mark.parametrize("swa", [False, True], ids=["full", "swa"])
@pytest.mark.parametrize("mode", list(MODES))
def test_static_pool_keeps_sglangs_path(sg, gen, mode, swa):
    """Not translating: every buffer exactly as SGLang's methods leave it."""
    pool = make_pool(sg, gen, swa, mode="static")
    mapping = torch.randint(0, 4 * CTX, (NV * PS + 1,), generator=gen)
    ws = []
    for hook in (False, True):
        w = World(sg, pool, mode, 4, swa, static_mapping=mapping if swa else None)
        with hooked(sg) if hook else contextlib.nullcontext():
            w.capture(gen)
            rows, seq = live_batch(torch.Generator().manual_seed(7), 3, mode)
            w.replay(rows, seq, seed=1)
        ws.append(w)
    for ma, mb in zip(ws[0].metas(), ws[1].metas()):
        assert not hasattr(mb, unified.RECORDED)
        for name in ("cache_seqlens_int32", "cu_seqlens_k", "cu_seqlens_q", "page_table", "swa_page_table"):
            ta, tb = getattr(ma, name), getattr(mb, name)
            assert (ta is None and tb is None) or torch.equal(ta, tb), name


def test_ragged_verify_records_nothing_and_keeps_the_rebuild(sg, gen):
    pool = make_pool(sg, gen, swa=False)
    w = World(sg, pool, "target_verify", 2, swa=False)
    w.capture(gen)
    meta = w.metas()[0]
    fb = w.fb()
    fb.spec_info.ragged_verify_layout = object()
    calls = []
    unified.apply_cuda_graph_metadata(lambda *a: calls.append(a), w.steps[0], 2, fb.req_pool_indices, fb.seq_lens,
                                      fb.forward_mode, fb.spec_info, None)
    assert len(calls) == 1 and not hasattr(meta, unified.RECORDED)
    unified.mark(meta)  # even a marked metadata: a ragged batch's prep rebuilds its tables
    proxy = unified._SkipRecordedTables(pool.translator, w.steps[0], fb)
    assert not proxy._recorded(meta.page_table, sg.Kind.FULL)
    fb.spec_info.ragged_verify_layout = None
    assert proxy._recorded(meta.page_table, sg.Kind.FULL)
    assert not proxy._recorded(meta.page_table[:1], sg.Kind.FULL)  # only the metadata's own table


def test_a_foreign_wrapper_keeps_the_multi_step_loop(sg):
    """spec's one-launch draft hook accepts our own wrapper on _apply_cuda_graph_metadata, no other."""
    B = sg.mha.TRTLLMHAAttnBackend
    fn = B.__dict__["_apply_cuda_graph_metadata"]
    ours = sg.wrap(fn, unified.apply_cuda_graph_metadata, sg.HookType.AROUND)
    theirs = sg.wrap(fn, lambda original, *a, **k: original(*a, **k), sg.HookType.AROUND)
    assert spec._wrapped_by_us_only(ours) and spec._wrapped_by_us_only(fn)
    assert not spec._wrapped_by_us_only(theirs)
    assert not spec._wrapped_by_us_only(sg.wrap(ours, lambda original, *a, **k: original(*a, **k), sg.HookType.AROUND))


def test_a_static_pool_backend_settles_on_sglangs_method(sg, gen):
    """After its first eager call, a backend over a pool that does not translate
    calls SGLang's method directly (the hook's wrapper leaves its per-replay path);
    a translating one keeps the hook."""
    name = "init_forward_metadata_out_graph"
    calls = []
    for mode in ("static", "unified"):
        w = World(sg, make_pool(sg, gen, swa=False, mode=mode), "decode", 2, swa=False)
        with hooked(sg):
            w.capture(gen)
            hook = sg.mha.TRTLLMHAAttnBackend.__dict__[name]
            original = hook.__wrapped__
            backend = w.steps[0]
            calls.append((mode, name in backend.__dict__))
            if mode == "static":
                assert backend.__dict__[name].__func__ is original
                w.replay(*live_batch(torch.Generator().manual_seed(3), 2, "decode"), seed=2)
    assert calls == [("static", True), ("unified", False)]


def test_a_foreign_wrapper_keeps_the_out_graph_hook_in_place(sg, gen):
    """Another plugin's AROUND wrapper outside ours: the backend keeps calling through it."""
    B = sg.mha.TRTLLMHAAttnBackend
    name = "init_forward_metadata_out_graph"
    seen = []
    with hooked(sg):
        ours = B.__dict__[name]
        B.init_forward_metadata_out_graph = sg.wrap(
            ours, lambda original, *a, **k: (seen.append(1), original(*a, **k))[1], sg.HookType.AROUND)
        try:
            w = World(sg, make_pool(sg, gen, swa=False, mode="static"), "decode", 2, swa=False)
            w.capture(gen)
            w.runner.init_forward_metadata_out_graph(w.fb())
        finally:
            B.init_forward_metadata_out_graph = ours
    assert name not in w.steps[0].__dict__ and len(seen) == 2
