"""sgl_meta.sglang.flash_attention_spec: FA3's multi-step draft decode prep and its
draft-extend refresh in one launch each, against SGLang 0.5.23's own code.

The worlds are SGLang's real ``FlashAttentionMultiStepBackend`` over real
``FlashAttentionBackend`` step backends, built by the ``--sglang`` bench's
builder (SGLang's attention test kit: mock model runner, ``ForwardBatch``,
``EagleDraftInput``) on CPU tensors, two alike from one seed. The one
substitution in SGLang's world: its Triton ``normal_decode_set_metadata`` (no GPU
here) is the plugin's drop-in, as the plugin's row makes it (that drop-in is
checked against 0.5.23's kernel in tests/test_flash_attention_metadata.py).
The hooked world wraps the multi-step method with HookRegistry's own AROUND
wrapper. ``flashattention_backend`` imports ``sgl_kernel`` (CUDA only), stubbed
by the bench's stubs: so the worlds run in a child interpreter, which reports
per scenario.
"""

from __future__ import annotations

import json
import types
from types import SimpleNamespace

import pytest
import torch

from sgl_meta import flash_attention_metadata as fam
from sgl_meta.sglang import flash_attention_spec as spec
from child_report import child_report
from kit_replay import diff, replay_batch

CTX = 1024


# ---- the child: SGLang's worlds -------------------------------------------------------


def _child_setup():
    from sgl_meta.bench.sglang_step import stubs

    stubs.install()
    from sglang.srt.layers.attention import flashattention_backend as fb
    from sglang.srt.plugins.hook_registry import HookType, _wrap_fn

    fb.normal_decode_set_metadata = fam.normal_decode_set_metadata  # the plugin's REPLACE row
    return fb, HookType, _wrap_fn


class Counter:
    """Calls of update_flash_attention_metadata (the drop-in's and the hook's), each set's delta."""

    def __init__(self):
        self.calls = []
        self.real = fam.update_flash_attention_metadata

    def __call__(self, **kw):
        self.calls.append(list(kw["seq_len_delta"]))
        return self.real(**kw)


def _world(steps: int, bs: int, swa: bool, seed: int):
    from sgl_meta.bench.sglang_step import backends
    from sglang.srt.layers.attention.flashattention_backend import FlashAttentionMultiStepBackend

    setup = backends.build("fa3", "draft_decode", bs, CTX, "cpu", seed=seed)
    multi = FlashAttentionMultiStepBackend(setup.backend.model_runner, topk=1, speculative_num_steps=steps)
    gen = torch.Generator().manual_seed(seed)
    if swa:
        slots = int(multi.attn_backends[0].req_to_token.max()) + 1
        mapping = torch.randperm(4 * slots, generator=gen)[:slots].to(torch.int64)
        for i, b in enumerate(multi.attn_backends):
            b.use_sliding_window_kv_pool = True
            b.token_to_kv_pool = SimpleNamespace(full_to_swa_index_mapping=mapping)
            # The plan's sliding-window write ids (the kit's pool has no such sub-pool);
            # SGLang's own loop copies them into cuda_graph_swa_out_cache_loc.
            ids = torch.randint(0, 4 * slots, (bs,), generator=torch.Generator().manual_seed(seed + i))
            b._get_swa_write_locations = lambda _fb, ids=ids: ids
    backends.leave_out_scheduler(multi.attn_backends)
    multi.init_cuda_graph_state(max_bs=bs, max_num_tokens=setup.batch.input_ids.numel())
    return multi, setup.batch


def _state(multi, bs):
    """Every tensor each step backend's graph state holds, and what it set."""
    out = {}
    for i, b in enumerate(multi.attn_backends):
        for key, t in b.decode_cuda_graph_metadata.items():
            if isinstance(t, torch.Tensor):
                out[f"step{i}.{key}"] = t.clone()
        if getattr(b, "cuda_graph_swa_out_cache_loc", None) is not None:
            out[f"step{i}.swa_out_cache_loc"] = b.cuda_graph_swa_out_cache_loc.clone()
        meta = b.forward_metadata
        out[f"step{i}.forward_metadata"] = meta is b.decode_cuda_graph_metadata.get(bs)
        out[f"step{i}.expand"] = b.forward_metadata_spec_decode_expand
        out[f"step{i}.max_seq_len_k"] = getattr(meta, "max_seq_len_k", None)
    return out


def _poison(multi, seed):
    gen = torch.Generator().manual_seed(seed)
    for b in multi.attn_backends:
        for t in b.decode_cuda_graph_metadata.values():
            if isinstance(t, torch.Tensor) and t.dtype == torch.int32 and t.dim() == 2:
                t.copy_(torch.randint(-(2**31), 2**31 - 1, t.shape, generator=gen, dtype=torch.int64).to(t.dtype))


def _run(fb, wrap, HookType, steps, bs, raw, swa, seed, hook=None, in_capture=False, replays=2, prep=None):
    """SGLang's world and the hooked one: capture, then replays; per world the op's calls."""
    M = fb.FlashAttentionMultiStepBackend
    name = "init_forward_metadata_out_graph"
    plain = M.__dict__[name]
    results = []
    for hooked in (False, True):
        multi, batch = _world(steps, bs, swa, seed)
        multi.init_forward_metadata_out_graph(batch, in_capture=True)
        if prep is not None:
            prep(multi)
        counter = Counter()
        fam.update_flash_attention_metadata = counter
        if hooked:
            setattr(M, name, wrap(plain, hook or spec.multi_step_init_forward_metadata_out_graph, HookType.AROUND))
        try:
            states, error = [], None
            for k in range(replays):
                replay_batch(batch, raw, seed + 100 + k, CTX)
                _poison(multi, seed + 200 + k)
                try:
                    multi.init_forward_metadata_out_graph(batch, in_capture=in_capture)
                except Exception as err:  # noqa: BLE001 -- the same error in both worlds
                    error = f"{type(err).__name__}: {err}"
                states.append(_state(multi, bs))
        finally:
            setattr(M, name, plain)
            fam.update_flash_attention_metadata = counter.real
        results.append((states, counter.calls, error))
    (sa, ca, ea), (sb, cb, eb) = results
    return {"diff": [d for x, y in zip(sa, sb) for d in diff(x, y)], "sglang_calls": ca, "hooked_calls": cb,
            "sglang_error": ea, "hooked_error": eb, "compared": sum(len(s) for s in sa)}


def _foreign(original, *args, **kwargs):
    return original(*args, **kwargs)


def child_main() -> None:
    fb, HookType, wrap = _child_setup()
    report = {}
    for steps in (3, 5):
        for bs, raw in ((1, 1), (4, 4), (4, 2)):
            for swa in (False, True):
                report[f"replay-steps{steps}-bs{bs}-raw{raw}-{'swa' if swa else 'full'}"] = _run(
                    fb, wrap, HookType, steps, bs, raw, swa, seed=steps * 100 + bs * 10 + raw)
    report["capture"] = _run(fb, wrap, HookType, 4, 3, 3, True, seed=5, in_capture=True, replays=1)
    report["single_step"] = _run(fb, wrap, HookType, 2, 3, 3, False, seed=6)

    # Another plugin's AROUND wrapper on a step method: SGLang's loop, one launch per step.
    B = fb.FlashAttentionBackend
    saved = B.__dict__["_set_decode_page_metadata"]
    B._set_decode_page_metadata = wrap(saved, _foreign, HookType.AROUND)
    try:
        report["foreign_step_wrapper"] = _run(fb, wrap, HookType, 4, 3, 3, False, seed=7)
    finally:
        B._set_decode_page_metadata = saved

    # Our own draft-extend wrapper on _apply_cuda_graph_metadata: still one launch for the steps.
    saved = B.__dict__["_apply_cuda_graph_metadata"]
    B._apply_cuda_graph_metadata = wrap(saved, spec.apply_cuda_graph_metadata, HookType.AROUND)
    try:
        report["our_apply_wrapper"] = _run(fb, wrap, HookType, 4, 3, 3, False, seed=13)
    finally:
        B._apply_cuda_graph_metadata = saved

    # A step raises after the first step's call: what SGLang launched is written, the error propagates.
    def drop_last_graph(multi):
        multi.attn_backends[-1].decode_cuda_graph_metadata.pop(3)

    report["step_raises"] = _run(fb, wrap, HookType, 4, 3, 3, False, seed=8, prep=drop_last_graph)

    # Top-k > 1 step backends: SGLang's topk > 1 draft path, original alone.
    def topk2(multi):
        for b in multi.attn_backends:
            b.topk = 2

    report["covered_topk2"] = _covered_after(fb, topk2)

    def translating(multi):
        for b in multi.attn_backends:
            b.kv_index_translator = SimpleNamespace(is_translating=True, reads_are_translated=True)

    report["covered_translating"] = _covered_after(fb, translating)
    report["covered_plain"] = _covered_after(fb, lambda multi: None)

    for bs, raw in ((1, 1), (4, 4), (4, 2)):
        for lens in ("tensor", "host", "none"):
            report[f"extend-bs{bs}-raw{raw}-{lens}"] = _run_extend(fb, wrap, HookType, bs, raw, seed=bs * 10 + raw,
                                                                   lens=lens)
    report["extend-no-host-lens"] = _run_extend(fb, wrap, HookType, 3, 3, seed=11, host_lens=False)
    report["extend-swa"] = _run_extend(fb, wrap, HookType, 3, 3, seed=12, swa="other")
    for bs, raw in ((1, 1), (4, 2)):
        report[f"extend-swa-pool-bs{bs}-raw{raw}"] = _run_extend(fb, wrap, HookType, bs, raw, seed=14 + bs, swa="pool")
    print(json.dumps(report))


def _extend_state(backend, setup) -> dict:
    """What the draft-extend refresh leaves: the buffers the attention kernels read
    (live pages of the table) and the host fields it sets."""
    out = {}
    for name, (t, live) in setup.read_buffers().items():
        if live is None:
            out[name] = t.clone()
        else:
            cols = torch.arange(t.shape[1])[None, :] < live[:, None]
            out[name] = torch.where(cols, t, 0)
    meta = backend.forward_metadata
    if getattr(meta, "swa_page_table", None) is not None:  # live pages, as the page table's
        lens = meta.cache_seqlens_int32[: setup.bs].to(torch.int64)
        t = meta.swa_page_table[: setup.bs]
        cols = torch.arange(t.shape[1])[None, :] < ((lens + backend.page_size - 1) // backend.page_size)[:, None]
        out["swa_page_table"] = torch.where(cols, t, 0)
    out["forward_metadata"] = meta is backend.draft_extend_metadata.get(setup.bs)
    out["expand"] = backend.forward_metadata_spec_decode_expand
    out["max_seq_len_k"] = getattr(meta, "max_seq_len_k", None)
    out["max_seq_len_q"] = getattr(meta, "max_seq_len_q", None)
    return out


def _run_extend(fb, wrap, HookType, bs, raw, seed, lens="tensor", swa=None, host_lens=True, replays=2):
    """A draft-extend replay prep in SGLang's world and the hooked one. ``lens``:
    where the spec's extend lengths live (``tensor``, ``host``, ``none``: 0.5.23's
    three sources); ``host_lens``: the batch carries seq_lens_cpu; ``swa``: a
    sliding-window pool whose translation is ``"pool"`` (0.5.23's ``SWAKVPool``
    method over a mapping with its -1 sentinel) or ``"other"`` (another function)."""
    from sgl_meta.bench.sglang_step import backends
    from sglang.srt.layers.attention import attention_registry

    # The registry asks the device for SM 8.x / 9.x before it builds FA3 (none here).
    attention_registry.get_device_capability = lambda *a, **k: (9, 0)
    B = fb.FlashAttentionBackend
    name = "_apply_cuda_graph_metadata"
    plain = B.__dict__[name]
    results = []
    for hooked in (False, True):
        setup = backends.build("fa3", "draft_extend", bs, CTX, "cpu", seed=seed)
        backend, batch = setup.backend, setup.batch
        if swa:  # a sliding-window pool by token mapping, as in _world
            from sglang.srt.mem_cache.swa_memory_pool import SWAKVPool

            slots = int(backend.req_to_token.max()) + 1
            mapping = torch.randperm(4 * slots, generator=torch.Generator().manual_seed(seed))[:slots]
            mapping = torch.cat([mapping, torch.tensor([-1])])  # the pool's sentinel: -1 stays -1
            ids = torch.randint(0, 4 * slots, (bs * 4,), generator=torch.Generator().manual_seed(seed))
            backend.use_sliding_window_kv_pool = True
            pool = SimpleNamespace(full_to_swa_index_mapping=mapping)
            pool.translate_loc_from_full_to_swa = (types.MethodType(SWAKVPool.translate_loc_from_full_to_swa, pool)
                                                   if swa == "pool" else lambda loc: mapping[loc])
            backend.token_to_kv_pool = pool
            backend._get_swa_write_locations = lambda _fb: ids
            backend.init_cuda_graph_state(max_bs=bs, max_num_tokens=batch.input_ids.numel())
        backend.init_forward_metadata_out_graph(batch, in_capture=True)
        counter = Counter()
        fam.update_flash_attention_metadata = counter
        if hooked:
            setattr(B, name, wrap(plain, spec.apply_cuda_graph_metadata, HookType.AROUND))
        try:
            states, host = [], batch.seq_lens_cpu
            for k in range(replays):
                batch.seq_lens_cpu = host
                replay_batch(batch, raw, seed + 100 + k, CTX)
                gen = torch.Generator().manual_seed(seed + 300 + k)
                ext = torch.randint(1, 5, (bs,), generator=gen, dtype=torch.int32)
                info = batch.spec_info
                info.extend_seq_lens_tensor = ext if lens == "tensor" else None
                info.extend_seq_lens_cpu = ext.tolist() if lens in ("tensor", "host") else None
                if not host_lens:
                    batch.seq_lens_cpu = None
                meta = backend.draft_extend_metadata[bs]
                for t in (meta.cache_seqlens_int32, meta.cu_seqlens_k, meta.cu_seqlens_q, meta.page_table,
                          *([meta.swa_page_table] if meta.swa_page_table is not None else [])):
                    t.copy_(torch.randint(-(2**31), 2**31 - 1, t.shape, generator=gen).to(t.dtype))
                for t in (meta.cu_seqlens_k, meta.cu_seqlens_q):  # 0 since allocation: 0.5.23 never writes it
                    t[0] = 0
                meta.max_seq_len_k = meta.max_seq_len_q = -1
                backend.init_forward_metadata_out_graph(batch)
                states.append(_extend_state(backend, setup))
        finally:
            setattr(B, name, plain)
            fam.update_flash_attention_metadata = counter.real
        results.append((states, counter.calls))
    (sa, ca), (sb, cb) = results
    return {"diff": [d for x, y in zip(sa, sb) for d in diff(x, y)], "sglang_calls": ca, "hooked_calls": cb,
            "compared": sum(len(s) for s in sa), "keys": sorted(sa[0])}


def _covered_after(fb, change) -> dict:
    multi, batch = _world(4, 2, False, 9)
    multi.init_forward_metadata_out_graph(batch, in_capture=True)
    change(multi)
    enc = SimpleNamespace(**{**vars(batch), "encoder_lens": torch.ones(2, dtype=torch.int32)})
    return {"replay": spec.covered(multi, batch, False), "capture": spec.covered(multi, batch, True),
            "encoder": spec.covered(multi, enc, False)}


# ---- the tests ------------------------------------------------------------------------


def _why_not():
    try:
        import sglang  # noqa: F401
        import triton  # noqa: F401
    except ImportError as err:
        return f"sglang / triton not installed ({err})"
    return None


@pytest.fixture(scope="module")
def report():
    why = _why_not()
    if why:
        pytest.skip(why)
    return child_report(["-c", "import test_flash_attention_spec as t; t.child_main()"])


REPLAYS = [f"replay-steps{s}-bs{bs}-raw{raw}-{p}" for s in (3, 5) for bs, raw in ((1, 1), (4, 4), (4, 2))
           for p in ("full", "swa")]


@pytest.mark.parametrize("case", REPLAYS)
def test_one_launch_writes_what_sglangs_loop_writes(report, case):
    r = report[case]
    steps = int(case.split("-")[1][5:])
    assert r["diff"] == [] and r["compared"] > 0, r
    assert r["sglang_error"] is None and r["hooked_error"] is None, r
    deltas = list(range(1, steps))
    assert r["sglang_calls"] == [[d] for d in deltas] * 2  # K - 1 launches per replay
    assert r["hooked_calls"] == [deltas] * 2  # one, with every step's delta


@pytest.mark.parametrize("case", ["capture", "single_step", "foreign_step_wrapper"])
def test_uncovered_cases_keep_sglangs_launches(report, case):
    r = report[case]
    assert r["diff"] == [] and r["compared"] > 0, r
    assert r["hooked_calls"] == r["sglang_calls"] and r["sglang_calls"], r
    assert all(len(c) == 1 for c in r["hooked_calls"])


def test_our_draft_extend_wrapper_keeps_the_one_launch(report):
    r = report["our_apply_wrapper"]
    assert r["diff"] == [] and r["compared"] > 0, r
    assert r["hooked_calls"] == [[1, 2, 3]] * 2, r


def test_a_step_that_raises_leaves_what_sglang_leaves(report):
    r = report["step_raises"]
    assert r["sglang_error"] is not None and r["hooked_error"] == r["sglang_error"], r
    assert r["diff"] == [], r
    assert r["hooked_calls"] == r["sglang_calls"] == [[1], [2]] * 2, r


def test_coverage_of_the_real_backends(report):
    assert report["covered_plain"] == {"replay": True, "capture": False, "encoder": False}
    for case in ("covered_topk2", "covered_translating"):
        assert report[case] == {"replay": False, "capture": False, "encoder": False}, case


EXTENDS = [f"extend-bs{bs}-raw{raw}-{lens}" for bs, raw in ((1, 1), (4, 4), (4, 2))
           for lens in ("tensor", "host", "none")] + ["extend-no-host-lens"]


@pytest.mark.parametrize("case", EXTENDS)
def test_draft_extend_refresh_in_one_launch_writes_what_sglang_writes(report, case):
    r = report[case]
    assert r["diff"] == [] and r["compared"] > 0, r
    assert r["sglang_calls"] == [] and r["hooked_calls"] == [[0], [0]], r  # one launch per replay


@pytest.mark.parametrize("case", ["extend-swa-pool-bs1-raw1", "extend-swa-pool-bs4-raw2"])
def test_draft_extend_over_sglangs_sliding_window_pool_in_one_launch(report, case):
    r = report[case]
    assert r["diff"] == [] and r["compared"] > 0 and "swa_page_table" in r["keys"], r
    assert r["sglang_calls"] == [] and r["hooked_calls"] == [[0], [0]], r


def test_draft_extend_over_another_sliding_window_translation_keeps_sglangs_ops(report):
    r = report["extend-swa"]
    assert r["diff"] == [] and r["compared"] > 0, r
    assert r["sglang_calls"] == r["hooked_calls"] == [], r


# ---- in-process units: the deferral and the merge ------------------------------------


def _decode_args(gen, delta, bs=3, pages=6, ps=4, swa=False, rpi=None, seq=None, r2t=None):
    out = dict(cache_seqlens_int32=torch.zeros(bs, dtype=torch.int32),
               cu_seqlens_k=torch.zeros(bs + 1, dtype=torch.int32),
               page_table=torch.zeros(bs, pages, dtype=torch.int32),
               req_to_token=r2t, req_pool_indices=rpi, max_seq_pages=pages, seq_lens=seq,
               seq_len_delta=delta, page_size=ps)
    if swa:
        out.update(swa_page_table=torch.zeros(bs, pages, dtype=torch.int32),
                   full_to_swa_index_mapping=torch.randperm(200, generator=gen))
    return out


def _inputs(gen):
    return dict(r2t=torch.randint(0, 100, (5, 24), generator=gen, dtype=torch.int32),
                rpi=torch.tensor([4, 0, 2, 1]), seq=torch.tensor([3, 9, 14, 1]))


def test_the_decode_dropin_defers_only_while_collecting(gen):
    shared = _inputs(gen)
    args = _decode_args(gen, 2, rpi=shared["rpi"][:3], seq=shared["seq"][:3], r2t=shared["r2t"])
    fam.deferred_decode.calls = calls = []
    try:
        fam.normal_decode_set_metadata(**args)
    finally:
        fam.deferred_decode.calls = None
    assert len(calls) == 1 and calls[0]["seq_len_delta"] == [2] and calls[0]["bs"] == 3
    assert (args["cache_seqlens_int32"] == 0).all()  # nothing written yet
    fam.normal_decode_set_metadata(**args)
    assert torch.equal(args["cache_seqlens_int32"], (shared["seq"][:3] + 2).to(torch.int32))


@pytest.mark.parametrize("swa", [False, True])
def test_merged_sets_equal_the_calls_one_by_one(gen, swa):
    shared = _inputs(gen)
    mapping = torch.randperm(200, generator=gen)
    want, got, collected = [], [], []
    for d in (1, 2, 3):
        # each step slices the batch anew: the same views, other objects
        a = _decode_args(gen, d, swa=swa, rpi=shared["rpi"][:3], seq=shared["seq"][:3], r2t=shared["r2t"])
        if swa:
            a["full_to_swa_index_mapping"] = mapping
        b = {k: v.clone() if isinstance(v, torch.Tensor) and v is not mapping and k not in ("req_to_token",) else v
             for k, v in a.items()}
        b["req_pool_indices"], b["seq_lens"] = shared["rpi"][:3], shared["seq"][:3]
        fam.normal_decode_set_metadata(**a)
        want.append(a)
        got.append(b)
        fam.deferred_decode.calls = collected
        try:
            fam.normal_decode_set_metadata(**b)
        finally:
            fam.deferred_decode.calls = None
    merged = spec._merged(collected)
    assert merged is not None and merged["seq_len_delta"] == [1, 2, 3]
    spec._launch(collected)
    for a, b in zip(want, got):
        for k in ("cache_seqlens_int32", "cu_seqlens_k", "page_table", "swa_page_table"):
            if k in a:
                assert torch.equal(a[k], b[k]), k


def test_calls_that_differ_or_share_outputs_are_not_merged(gen):
    shared = _inputs(gen)
    calls = []
    fam.deferred_decode.calls = calls
    try:
        for d, rows in ((1, 3), (2, 2)):  # another batch view
            fam.normal_decode_set_metadata(**_decode_args(gen, d, bs=rows, rpi=shared["rpi"][:rows],
                                                          seq=shared["seq"][:rows], r2t=shared["r2t"]))
    finally:
        fam.deferred_decode.calls = None
    assert spec._merged(calls) is None
    same = [dict(calls[0]), dict(calls[0], seq_len_delta=[5])]
    assert spec._merged(same) is None  # one output set twice: SGLang's order decides
    other = dict(calls[0], req_to_token=shared["r2t"].clone(), cache_seqlens=[torch.zeros(3, dtype=torch.int32)],
                 cu_seqlens_k=[torch.zeros(4, dtype=torch.int32)], page_table=[torch.zeros(3, 6, dtype=torch.int32)])
    assert spec._merged([calls[0], other]) is None


def test_a_nested_or_uncovered_call_runs_the_original():
    seen = []

    def original(self, fb, in_capture=False):
        seen.append(in_capture)

    fam.deferred_decode.calls = []
    try:
        spec.multi_step_init_forward_metadata_out_graph(original, SimpleNamespace(), SimpleNamespace(), True)
    finally:
        fam.deferred_decode.calls = None
    spec.multi_step_init_forward_metadata_out_graph(original, SimpleNamespace(), SimpleNamespace(spec_info=None))
    assert seen == [True, False]


def test_hook_table():
    """The plugin's table registers both hooks of this module as AROUND hooks on these targets."""
    from helpers import around_hooks  # not at the top: child processes import this module without tests/

    assert around_hooks().items() >= {
        spec.MULTI_STEP_TARGET: (spec.multi_step_init_forward_metadata_out_graph, "AROUND"),
        spec.APPLY_TARGET: (spec.apply_cuda_graph_metadata, "AROUND"),
    }.items()
