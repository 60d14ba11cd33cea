"""The cold-start entries of ``python -m sgl_meta.bench --upstream`` for the FlashAttention,
Triton / FlashInfer and FlashMLA families on CPU: each bucket's calls, SGLang 0.5.23's own
kernels (Triton's interpreter) beside ours, write the same values where upstream defines
them (the GPU run times the first call)."""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch

import sgl_meta
from flash_attention_metadata_upstream import upstream as fa_upstream
from helpers import triton_interpreter
from sgl_meta.bench.upstream import coldstart, rows_flash_attention_metadata, rows_kv_indices
from sgl_meta.bench.upstream.fixtures import Context, live_cols

BUCKETS = (1, 3, 64, 300)  # the kv-indices fixture holds at least 64 requests; past 256 the split kernel widens


class _Interpreted:
    """A ``kernel[grid](...)`` launch run under Triton's interpreter."""

    def __init__(self, kernel):
        self.kernel = kernel

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            with triton_interpreter():
                self.kernel[grid](*args, **kwargs)

        return launch


def _kv_upstream():
    spec = importlib.util.find_spec("sglang")
    if spec is None or importlib.util.find_spec("triton") is None or fa_upstream() is None:
        return None
    root = os.path.join(spec.submodule_search_locations[0], "kernels", "ops", "attention")
    kernels = {}
    with triton_interpreter():
        for rel, names in (("kv_indices.py", (rows_kv_indices.FLASHINFER, rows_kv_indices.FLASHMLA)),
                           ("metadata.py", (rows_kv_indices.SPLITS,))):
            s = importlib.util.spec_from_file_location(f"_sglang_cold_{rel[:-3]}", os.path.join(root, rel))
            m = importlib.util.module_from_spec(s)
            s.loader.exec_module(m)
            kernels.update({n: _Interpreted(getattr(m, n)) for n in names})
    fa = fa_upstream()
    return type("Upstream", (), {**kernels, "normal_decode_set_metadata": staticmethod(fa.normal_decode_set_metadata),
                                 "draft_extend_set_metadata": staticmethod(fa.draft_extend_set_metadata)})()


UP = _kv_upstream()
SPECS = {s.name: s for s in coldstart.COLD}
pytestmark = pytest.mark.skipif(UP is None, reason="sglang 0.5.23 / triton not installed")


@pytest.fixture
def ctx(monkeypatch):
    monkeypatch.setattr(rows_flash_attention_metadata, "PAGES", 16)
    monkeypatch.setattr(rows_kv_indices, "PAGES", 12)
    return Context(device=torch.device("cpu"), seed=11, max_bs=max(BUCKETS))


def _run(spec, ctx, b):
    for impl, fns in (("upstream", UP), ("ours", sgl_meta)):
        for call in spec.calls(ctx, fns, impl, b):
            call()


def _live_prefix(lens, page_size, pages, rows):
    return torch.arange(pages)[None, :] < live_cols(lens, page_size, pages)[:rows, None]


def test_flash_attention_eagle_step(ctx):
    spec = SPECS["FlashAttention EAGLE step (2 draft decodes, verify, draft extend)"]
    fa = rows_flash_attention_metadata
    for b in BUCKETS:
        _run(spec, ctx, b)
        f = fa._fixture(ctx)
        up, ours = f.out["upstream"], f.out["ours"]
        # set 0 last written by the draft extend (delta 0) over the decode's delta-1 prefix
        for k, delta in enumerate((1, 2, 4)):
            assert torch.equal(ours[f"cache_seqlens{k}"][:b], up[f"cache_seqlens{k}"][:b]), (b, k)
            if k:  # the draft steps' and verify's deltas, as the backend's replays pass them
                assert torch.equal(ours[f"cache_seqlens{k}"][:b], f.lens[:b] + delta), (b, k)
            assert torch.equal(ours[f"cu_seqlens_k{k}"][: b + 1], up[f"cu_seqlens_k{k}"][: b + 1]), (b, k)
            live = _live_prefix(f.lens[:b] + delta, fa.PAGE_SIZE, fa.PAGES, b)
            assert torch.equal(ours[f"page_table{k}"][:b][live], up[f"page_table{k}"][:b][live]), (b, k)
        assert torch.equal(ours["cu_seqlens_q"][: b + 1], up["cu_seqlens_q"][: b + 1]), b
        assert torch.equal(ours["cache_seqlens0"][:b], f.lens[:b]), b  # the draft extend's, not the decode's


def test_triton_decode_stream(ctx):
    spec = SPECS["Triton decode kv_indptr + kv_indices + split counts (FlashInfer's: the first two)"]
    for b in BUCKETS:
        _run(spec, ctx, b)
        f = ctx.fixture("kv_stream_cold", rows_kv_indices.ColdStreamFixture)
        up, ours = f.out["upstream"], f.out["ours"]
        tokens = int(f.lens[:b].long().sum())
        assert torch.equal(ours["kv_indptr"][: b + 1], up["kv_indptr"][: b + 1]), b
        assert torch.equal(ours["kv_indices"][:tokens], up["kv_indices"][:tokens]), b
        assert torch.equal(ours["num_kv_splits"][:b], up["num_kv_splits"][:b]), b
        assert torch.equal(ours["uneven_batch"], up["uneven_batch"]), b
        assert ours["kv_indices"][:tokens].ne(f.out.poison["kv_indices"][:tokens]).any()


def test_flashmla_block_table(ctx):
    spec = SPECS["FlashMLA / TRT-LLM MLA block table"]
    for b in BUCKETS:
        _run(spec, ctx, b)
        f = rows_kv_indices._fixture(ctx)
        up, ours = f.out["upstream"]["table"], f.out["ours"]["table"]
        live = _live_prefix(f.lens[:b], rows_kv_indices.PAGE_SIZE, rows_kv_indices.PAGES, b)
        assert live.any() and torch.equal(ours[:b][live], up[:b][live]), b
        if b < max(BUCKETS):  # the bucket's rows only
            assert torch.equal(ours[b:], f.out.poison["table"][b:]) and torch.equal(up[b:], ours[b:]), b
        f.out.repoison(["table"])
