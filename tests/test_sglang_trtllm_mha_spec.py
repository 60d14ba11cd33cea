"""sgl_meta.sglang.trtllm_mha_spec: the one-launch replacements of SGLang 0.5.23's
multi-step draft and ragged verify metadata paths, against stand-in backends.

The stand-ins carry the attributes 0.5.23's TRTLLMHAAttnBackend has and run
0.5.23's logic (as read from sglang/srt/layers/attention/trtllm_mha_backend.py
and speculative/ragged_verify.py) through sgl_meta's eager references: the
original of each hook. The hook must leave every buffer exactly as the original
does, set the same forward_metadata, and fall back to the original whenever a
case is not covered.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import pytest
import torch

from sgl_meta import reference
from sgl_meta.sglang import trtllm_mha_spec as spec
from helpers import around_hooks, poison_

PS, MAX_PAGES, POOL, MAX_BS = 16, 24, 40, 16


class SpecInfo:
    def __init__(self, draft=True):
        self.draft = draft
        self.ragged_verify_layout = None

    def is_draft_input(self):
        return self.draft


class Translator:
    def __init__(self, translating=False):
        self.is_translating = translating


class TRTLLMHAAttnBackend:
    """The parts of 0.5.23's backend the two paths use (same attribute names)."""

    def __init__(self, pool, step_id, swa, unified, device, gen):
        self.req_to_token = pool["req_to_token"]
        self.page_size = PS
        self.max_num_pages = MAX_PAGES
        self.speculative_step_id = step_id
        self.kv_index_translator = pool["translator"]
        self._swa_kv_pool = SimpleNamespace(full_to_swa_index_mapping=pool["mapping"]) if swa else None
        self._swa_full_to_swa_mapping = pool["mapping"] if swa and not unified else None
        self.use_sliding_window_kv_pool = swa
        self.forward_metadata = None
        i32 = dict(dtype=torch.int32, device=device)
        rnd = lambda *shape, dtype=torch.int32: poison_(torch.empty(shape, dtype=dtype, device=device), gen)  # noqa: E731
        self.cuda_graph_swa_out_cache_loc = rnd(MAX_BS * 4, dtype=torch.int64) if swa else None
        buffers = dict(cache_seqlens=rnd(MAX_BS), cu_seqlens_k=rnd(MAX_BS + 1), cu_seqlens_q=torch.arange(MAX_BS + 1, **i32),
                       page_table=rnd(MAX_BS, MAX_PAGES), swa_page_table=rnd(MAX_BS, MAX_PAGES) if swa else None)
        # 0.5.23 allocates these with torch.zeros and never writes index 0 (its
        # kernels and cumsum copies write [1:]); sgl_meta writes the same 0 there.
        buffers["cu_seqlens_k"][0] = 0
        buffers["cu_seqlens_q"][0] = 0
        self.buffers = buffers
        self.decode_cuda_graph_metadata = {}
        for bs in (1, 3, 8, 16):
            self.decode_cuda_graph_metadata[bs] = SimpleNamespace(
                cache_seqlens_int32=buffers["cache_seqlens"][:bs],
                cu_seqlens_q=buffers["cu_seqlens_q"][: bs + 1],
                cu_seqlens_k=buffers["cu_seqlens_k"][: bs + 1],
                page_table=buffers["page_table"][:bs, :],
                swa_page_table=None if buffers["swa_page_table"] is None else buffers["swa_page_table"][:bs, :],
                swa_out_cache_loc=None if not swa else self.cuda_graph_swa_out_cache_loc[: bs * 4],
            )

    # -- 0.5.23 draft decode: _apply_cuda_graph_metadata for DECODE with spec_info
    def init_forward_metadata_in_graph(self, forward_batch):
        self._apply_cuda_graph_metadata(
            bs=forward_batch.batch_size, req_pool_indices=forward_batch.req_pool_indices,
            seq_lens=forward_batch.seq_lens, spec_info=forward_batch.spec_info,
            out_cache_loc=forward_batch.out_cache_loc)

    def _apply_cuda_graph_metadata(self, bs, req_pool_indices, seq_lens, spec_info, out_cache_loc=None):
        assert spec_info is not None
        metadata = self.decode_cuda_graph_metadata[bs]
        unified = self.kv_index_translator.is_translating
        reference.update_trtllm_mha_graph_metadata(
            req_pool_indices=req_pool_indices[:bs], seq_lens=seq_lens[:bs], req_to_token=self.req_to_token,
            cache_seqlens=metadata.cache_seqlens_int32, cu_seqlens_k=metadata.cu_seqlens_k,
            page_table=None if unified else metadata.page_table, bs=bs, seqlen_offset=self.speculative_step_id + 1,
            max_seq_pages=self.max_num_pages, page_size=self.page_size, swa_mapping=self._swa_full_to_swa_mapping,
            swa_page_table=None if unified else metadata.swa_page_table, out_cache_loc=out_cache_loc,
            swa_out_cache_loc=None if unified else metadata.swa_out_cache_loc,
            live_pages_only=True,  # 0.5.23's kernel writes live pages only
            skip_page_table=unified,
        )
        self.forward_metadata = metadata

    # -- 0.5.23 ragged verify (out of graph)
    def _fill_page_table_device(self, metadata, req_pool_indices, cache_seqlens):
        has_swa = self._swa_kv_pool is not None
        reference.build_trtllm_mha_page_table(
            self.req_to_token, req_pool_indices, cache_seqlens, metadata.page_table, self.page_size,
            metadata.swa_page_table if has_swa else None,
            self._swa_kv_pool.full_to_swa_index_mapping if has_swa else None)

    def _write_ragged_verify_graph_metadata(self, metadata, forward_batch, ragged_layout, bs, in_capture=False):
        seq_lens = forward_batch.seq_lens[:bs]
        padded = ragged_layout.padded_to_bucket(padded_bs=bs).verify_lens
        cache = (seq_lens + padded).to(torch.int32)
        metadata.cache_seqlens_int32.copy_(cache)
        metadata.cu_seqlens_q.copy_(torch.nn.functional.pad(torch.cumsum(padded, 0, dtype=torch.int32), (1, 0)))
        metadata.cu_seqlens_k[1:].copy_(torch.cumsum(metadata.cache_seqlens_int32, dim=0, dtype=torch.int32))
        self._fill_page_table_device(metadata, forward_batch.req_pool_indices[:bs], metadata.cache_seqlens_int32)
        if self.use_sliding_window_kv_pool and forward_batch.out_cache_loc is not None:
            n = forward_batch.out_cache_loc.shape[0]
            self.cuda_graph_swa_out_cache_loc[n:].zero_()
            if in_capture:
                self.cuda_graph_swa_out_cache_loc[:n].zero_()
            else:  # the plan's SLIDING_WINDOW write ids on a static pool
                mapping = self._swa_kv_pool.full_to_swa_index_mapping
                self.cuda_graph_swa_out_cache_loc[:n].copy_(mapping[forward_batch.out_cache_loc])


class TRTLLMHAAttnMultiStepDraftBackend:
    def __init__(self, backends):
        self.attn_backends = backends
        self.speculative_num_steps = len(backends) + 1

    def init_forward_metadata_in_graph(self, forward_batch):
        assert forward_batch.spec_info is not None and forward_batch.spec_info.is_draft_input()
        inner = SimpleNamespace(batch_size=forward_batch.batch_size, req_pool_indices=forward_batch.req_pool_indices,
                                seq_lens=forward_batch.seq_lens, out_cache_loc=forward_batch.out_cache_loc,
                                spec_info=forward_batch.spec_info)
        for i in range(self.speculative_num_steps - 1):
            self.attn_backends[i].init_forward_metadata_in_graph(inner)


class RaggedLayout:
    """0.5.23's RaggedVerifyLayout.padded_to_bucket rule: padding rows share the
    tokens left to the graph's bucket (one more for the first `rem`); without
    padding rows the last real row takes them."""

    def __init__(self, verify_lens, graph_num_tokens):
        self.verify_lens = verify_lens.to(torch.int32)
        self.graph_num_tokens = graph_num_tokens

    @property
    def bs(self):
        return int(self.verify_lens.shape[0])

    def padded_to_bucket(self, *, padded_bs):
        lens = self.verify_lens.tolist()
        left = self.graph_num_tokens - sum(lens)
        pads = padded_bs - len(lens)
        if pads:
            lens += [left // pads + (i < left % pads) for i in range(pads)]
        else:
            lens[-1] += left
        return SimpleNamespace(verify_lens=torch.tensor(lens, dtype=torch.int32, device=self.verify_lens.device))


def make_pool(gen, device, unified=False):
    slots = POOL * MAX_PAGES * PS
    mapping = torch.randint(0, 4 * slots, (slots + 1,), generator=gen, dtype=torch.int64)
    mapping[0] = 0  # the reserved sink slot
    mapping[-1] = -1  # 0.5.23's sentinel: mapping[-1] for a -1 location
    return dict(
        req_to_token=torch.randint(0, slots, (POOL, MAX_PAGES * PS), generator=gen, dtype=torch.int32).to(device),
        mapping=mapping.to(device),
        translator=Translator(unified),
    )


def make_batch(gen, device, bs, raw_bs=None, out_tokens=4, max_len=MAX_PAGES * PS - 8):
    raw_bs = raw_bs or bs
    out = torch.randint(1, POOL * MAX_PAGES * PS, (bs * out_tokens,), generator=gen)
    out[torch.rand(out.shape, generator=gen) < 0.1] = -1
    out[raw_bs * out_tokens:] = 0  # padded rows write the sink
    return SimpleNamespace(
        batch_size=bs,
        req_pool_indices=torch.randperm(POOL, generator=gen)[:bs].to(device),
        seq_lens=torch.randint(1, max_len, (bs,), generator=gen).to(device),
        out_cache_loc=out.to(device),
        spec_info=SpecInfo(),
    )


def buffers_of(backends):
    return [{**b.buffers, "swa_out": b.cuda_graph_swa_out_cache_loc} for b in backends]


def assert_same_buffers(got, want, context):
    for k, (g, w) in enumerate(zip(got, want)):
        for name in w:
            if w[name] is None:
                continue
            assert torch.equal(g[name].cpu(), w[name].cpu()), f"{context}: backend {k} {name} differs"


# ---- multi-step draft ------------------------------------------------------------------


def multi_step_setup(gen, device, steps=4, swa=True, unified=False, bs=8, raw_bs=None):
    pool = make_pool(gen, device, unified)
    backends = [TRTLLMHAAttnBackend(pool, i, swa, unified, device, gen) for i in range(steps - 1)]
    return TRTLLMHAAttnMultiStepDraftBackend(backends), make_batch(gen, device, bs, raw_bs)


MULTI_CASES = {
    "eagle_k4_swa": dict(steps=4),
    "eagle_k4_no_swa": dict(steps=4, swa=False),
    "k2_one_step": dict(steps=2),
    "k6_two_launches": dict(steps=6, bs=16),
    "bs1": dict(steps=4, bs=1),
    "padded_rows": dict(steps=4, bs=8, raw_bs=5),
    "unified_pool": dict(steps=4, unified=True),
    "unified_swa": dict(steps=4, unified=True, swa=True),
}


@pytest.mark.parametrize("name", sorted(MULTI_CASES))
def test_multi_step_matches_the_per_step_loop(name, gen, device):
    owner, fb = multi_step_setup(gen, device, **MULTI_CASES[name])
    twin = copy.deepcopy(owner)
    owner.init_forward_metadata_in_graph(fb)  # 0.5.23: one update per draft step
    calls = []

    def original(self, forward_batch):
        calls.append(1)
        return TRTLLMHAAttnMultiStepDraftBackend.init_forward_metadata_in_graph(self, forward_batch)

    spec.multi_step_draft_init_forward_metadata_in_graph(original, twin, fb)
    assert not calls, "a covered case must not fall back to the original"
    assert_same_buffers(buffers_of(twin.attn_backends), buffers_of(owner.attn_backends), name)
    for b, ref_b in zip(twin.attn_backends, owner.attn_backends):
        assert b.forward_metadata is b.decode_cuda_graph_metadata[fb.batch_size]
        assert ref_b.forward_metadata is ref_b.decode_cuda_graph_metadata[fb.batch_size]


def _fallback_cases():
    def subclass(owner, fb):
        sub = type("TRTLLMHAAttnBackendSub", (TRTLLMHAAttnBackend,), {})
        owner.attn_backends[1].__class__ = sub

    def hooked_method(owner, fb):
        fn = TRTLLMHAAttnBackend._apply_cuda_graph_metadata

        def wrapper(*a, **k):
            return fn(*a, **k)

        wrapper.__wrapped__ = fn
        wrapper.__qualname__ = fn.__qualname__
        cls = type("TRTLLMHAAttnBackend", (TRTLLMHAAttnBackend,), {"_apply_cuda_graph_metadata": wrapper})
        for b in owner.attn_backends:
            b.__class__ = cls

    def two_pools(owner, fb):
        owner.attn_backends[2].req_to_token = owner.attn_backends[2].req_to_token.clone()

    def mixed_swa(owner, fb):
        meta = owner.attn_backends[0].decode_cuda_graph_metadata[fb.batch_size]
        meta.swa_out_cache_loc = None

    def swa_without_mapping(owner, fb):
        for b in owner.attn_backends:
            b._swa_full_to_swa_mapping = None

    def no_spec_info(owner, fb):
        fb.spec_info = None

    def not_draft_input(owner, fb):
        fb.spec_info = SpecInfo(draft=False)

    def uncaptured_bs(owner, fb):
        fb.batch_size = 5

    return dict(subclass=subclass, hooked_method=hooked_method, two_pools=two_pools, mixed_swa=mixed_swa,
                swa_without_mapping=swa_without_mapping, no_spec_info=no_spec_info, not_draft_input=not_draft_input,
                uncaptured_bs=uncaptured_bs)


FALLBACKS = _fallback_cases()


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_multi_step_falls_back_when_not_covered(name, gen):
    owner, fb = multi_step_setup(gen, "cpu")
    FALLBACKS[name](owner, fb)
    seen = []

    def original(self, forward_batch):
        seen.append((self, forward_batch))
        return "original"

    assert spec.multi_step_draft_init_forward_metadata_in_graph(original, owner, fb) == "original"
    assert seen == [(owner, fb)]


# ---- ragged verify ----------------------------------------------------------------------


def ragged_setup(gen, device, bs=8, raw_bs=None, swa=True, graph_tokens=None, unified=False):
    pool = make_pool(gen, device, unified)
    backend = TRTLLMHAAttnBackend(pool, 0, swa, unified, device, gen)
    metadata = backend.decode_cuda_graph_metadata[bs]  # bound like target_verify_metadata[bs]
    raw_bs = raw_bs or bs
    verify = torch.randint(1, 5, (raw_bs,), generator=gen)
    graph_tokens = graph_tokens or int(verify.sum()) + 3
    layout = RaggedLayout(verify.to(device), graph_tokens)
    fb = make_batch(gen, device, bs, raw_bs, out_tokens=4, max_len=MAX_PAGES * PS - 40)
    fb.out_cache_loc = fb.out_cache_loc[:graph_tokens]
    return backend, metadata, fb, layout


RAGGED_CASES = {
    "padded_bucket_swa": dict(bs=8, raw_bs=5),
    "no_padding_rows": dict(bs=8),
    "no_swa": dict(bs=8, raw_bs=6, swa=False),
    "bs1": dict(bs=1),
    "bs16": dict(bs=16, raw_bs=11),
}


@pytest.mark.parametrize("name", sorted(RAGGED_CASES))
def test_ragged_verify_matches_the_eager_path(name, gen, device):
    backend, metadata, fb, layout = ragged_setup(gen, device, **RAGGED_CASES[name])
    twin = copy.deepcopy((backend, fb, layout))
    tb, tfb, tlayout = twin
    bs = fb.batch_size
    backend._write_ragged_verify_graph_metadata(metadata, fb, layout, bs)
    calls = []

    def original(*a, **k):
        calls.append(1)
        return TRTLLMHAAttnBackend._write_ragged_verify_graph_metadata(*a, **k)

    spec.ragged_verify_write_graph_metadata(original, tb, tb.decode_cuda_graph_metadata[bs], tfb, tlayout, bs)
    assert not calls, "a covered case must not fall back to the original"
    assert_same_buffers(buffers_of([tb]), buffers_of([backend]), name)


def test_ragged_verify_falls_back_when_not_covered(gen):
    for change in ("capture", "unified", "subclass", "swa_without_mapping"):
        backend, metadata, fb, layout = ragged_setup(gen, "cpu", unified=change == "unified")
        if change == "subclass":
            backend.__class__ = type("Other", (TRTLLMHAAttnBackend,), {})
        if change == "swa_without_mapping":
            backend._swa_full_to_swa_mapping = None
        seen = []

        def original(*a, **k):
            seen.append(k.get("in_capture"))
            return "original"

        got = spec.ragged_verify_write_graph_metadata(original, backend, metadata, fb, layout, fb.batch_size,
                                                      in_capture=change == "capture")
        assert got == "original" and seen == [change == "capture"], change


def test_hook_table():
    """The plugin's table registers both functions (and the unified pool's two)
    as AROUND hooks on these targets (other backends' rows besides)."""
    from sgl_meta.sglang import trtllm_mha_unified as unified
    assert around_hooks().items() >= {
        spec.MULTI_STEP_TARGET: (spec.multi_step_draft_init_forward_metadata_in_graph, "AROUND"),
        spec.RAGGED_VERIFY_TARGET: (spec.ragged_verify_write_graph_metadata, "AROUND"),
        unified.APPLY_TARGET: (unified.apply_cuda_graph_metadata, "AROUND"),
        unified.OUT_GRAPH_TARGET: (unified.init_forward_metadata_out_graph, "AROUND"),
    }.items()


def test_module_does_not_import_sglang():
    import subprocess
    import sys

    code = ("import sys, sgl_meta.sglang.trtllm_mha_spec, sgl_meta.sglang.trtllm_mha_unified; "
            "assert 'sglang' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
