"""The EAGLE CSR hooks of sgl_meta/sglang/eagle_csr.py against SGLang 0.5.23's own
``generate_attn_arg_prefill`` methods (verify and draft extend), over the
translator stand-in of test_kv_indices_hooks.py: the same ``kv_indices``,
``cum_kv_seq_len``, ``qo_indptr`` and mask, and SGLang's method alone wherever
the hooks do not cover the call."""

from __future__ import annotations

import types

import pytest
import torch

from sgl_meta.sglang import eagle_csr
from test_kv_indices_hooks import OWN_PLAN, PackingTranslator, _backend

DRAFT = 4


def _methods():
    info = pytest.importorskip("sglang.srt.speculative.eagle_info", reason="SGLang is not installed")
    return {"verify": (info.EagleVerifyInput.generate_attn_arg_prefill, eagle_csr.verify_attn_arg_prefill),
            "draft_extend": (info.EagleDraftExtendInput.generate_attn_arg_prefill,
                             eagle_csr.draft_extend_attn_arg_prefill)}


def _world(gen, source: str, mode: str, bs: int = 5, mask_short: bool = False, device="cpu"):
    b, req, lens = _backend(gen, source, bs)
    table = b.kv_index_translator.table
    table = type(table)(**{k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in vars(table).items()})
    translator = PackingTranslator(table, b.kv_index_translator.page_size)
    req, lens = req.to(device), lens.to(device)
    if mode == "verify":
        lens = (lens - DRAFT).clamp(min=0)  # 0.5.23 widens them by the draft tokens
        need = int(lens.sum()) * DRAFT + DRAFT * DRAFT * bs
        mask = torch.rand(need - 1 if mask_short else need + 3, generator=gen) < 0.5
        spec = types.SimpleNamespace(draft_token_num=DRAFT, custom_mask=mask.to(device))
    else:
        spec = types.SimpleNamespace(num_correct_drafts=torch.zeros(bs, dtype=torch.int32, device=device),
                                     num_tokens_per_req=DRAFT)
    return spec, translator, req, lens


def _call(fn, spec, translator, req, lens, **kw):
    args = dict(req_pool_indices=req, paged_kernel_lens=lens, paged_kernel_lens_sum=int(lens.sum()),
                translator=translator, plan=OWN_PLAN)
    args.update(kw)
    return fn(spec, **args)


@pytest.mark.parametrize("source", ["req_to_token", "table", "v2p"])
@pytest.mark.parametrize("mode", ["verify", "draft_extend"])
def test_equals_sglangs_method(mode, source, gen, device):
    original, hook = _methods()[mode]
    spec, translator, req, lens = _world(gen, source, mode, device=device)
    want = _call(original, spec, translator, req, lens)
    got = _call(lambda *a, **k: hook(original, *a, **k), spec, translator, req, lens)
    assert len(got) == len(want) == 4 and got[0].device == want[0].device
    for name, x, y in zip(("kv_indices", "cum_kv_seq_len", "qo_indptr"), got, want):
        assert x.dtype == y.dtype and x.shape == y.shape and torch.equal(x, y), name
    assert got[3] is want[3]  # verify: the spec's own mask; draft extend: None


@pytest.mark.parametrize("change", ["sliding_window_kind", "unknown_keyword", "host_sum_missing", "short_mask",
                                    "lengths_per_token", "empty_batch", "no_query_tokens"])
@pytest.mark.parametrize("mode", ["verify", "draft_extend"])
def test_uncovered_runs_sglangs_method(mode, change, gen):
    _, hook = _methods()[mode]
    if change == "short_mask" and mode != "verify":
        pytest.skip("only verify grows a mask")
    spec, translator, req, lens = _world(gen, "req_to_token", mode, mask_short=change == "short_mask")
    kw: dict = {}
    if change == "sliding_window_kind":
        from sglang.srt.mem_cache.kv_loc_plan import IdSpaceKind

        kw["kind"] = IdSpaceKind.SLIDING_WINDOW
    elif change == "unknown_keyword":
        kw["kv_start_idx"] = torch.zeros_like(lens)
    elif change == "host_sum_missing":
        kw["paged_kernel_lens_sum"] = None
    elif change == "lengths_per_token":
        lens = lens.repeat(2)
    elif change == "no_query_tokens":  # (0.5.23's arange raises on a step of 0, walks back on a negative one)
        setattr(spec, "draft_token_num" if mode == "verify" else "num_tokens_per_req", 0)
    elif change == "empty_batch":  # 0.5.23's cum_kv_seq_len is zeros: [0] = 0 even then
        req, lens = req[:0], lens[:0]
        if mode == "draft_extend":
            spec.num_correct_drafts = spec.num_correct_drafts[:0]
    seen = []

    def sglang(self, **kwargs):
        seen.append(kwargs)
        return "sglang"

    assert _call(lambda *a, **k: hook(sglang, *a, **k), spec, translator, req, lens, **kw) == "sglang"
    assert len(seen) == 1 and all(seen[0][k] is v for k, v in kw.items())
    assert translator.calls == []  # nothing of ours read the source
