"""sgl_meta.sglang.flash_attention_spec: FA3's top-k > 1 target-verify refresh
(both halves of its metadata) in two launches, against SGLang 0.5.23's own code.

The worlds are SGLang's real ``FlashAttentionBackend`` with EAGLE top-k 4, built
by the ``--sglang`` bench's builder (SGLang's attention test kit) on CPU tensors,
two alike from one seed. The one substitution in SGLang's world: its Triton
``build_trtllm_mha_page_table`` (no GPU here) is the plugin's drop-in, as the
plugin's row makes it (checked against 0.5.23's kernel in
tests/test_trtllm_mha_page_table.py). The hooked world wraps
``_apply_cuda_graph_metadata`` with HookRegistry's own AROUND wrapper. The worlds
run in a child interpreter (``flashattention_backend`` imports ``sgl_kernel``,
stubbed there), which reports per scenario.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

import sgl_meta
from sgl_meta import flash_attention_metadata as fam
from sgl_meta.sglang import flash_attention_spec as spec
from child_report import module_child_report
from kit_replay import OpCalls, fa3_child, replay_batch, uncovered_runs, worlds_report

CTX = 1024
LABEL = "fa3_topk4"  # the step bench's label: FA3 built with EAGLE top-k 4
TOPK = 4


# ---- the child: SGLang's worlds -------------------------------------------------------


def _mask(batch, gen, ones: bool, requests: int) -> torch.Tensor:
    """The verify tree mask of the first ``requests`` requests: per request, ``n`` rows of
    ``seq + n`` entries (a padded batch's mask covers its real requests only)."""
    n = TOPK
    size = int((batch.seq_lens[:requests] + n).sum()) * n
    return torch.ones(size, dtype=torch.bool) if ones else torch.rand(size, generator=gen) < 0.5


def _poison(backend, bs, gen):
    for name, t in _buffers(backend, bs).items():
        t.copy_(torch.randint(-(2**31), 2**31 - 1, t.shape, generator=gen, dtype=torch.int64).to(t.dtype))
        if name.endswith("cu_seqlens_k"):
            t[0] = 0  # 0 since allocation: 0.5.23 never writes it


def _buffers(backend, bs) -> dict:
    normal = backend.target_verify_metadata_topk_normal[bs]
    expand = backend.target_verify_metadata_topk_expand[bs]
    return {"cache_seqlens": normal.cache_seqlens_int32, "cu_seqlens_k": normal.cu_seqlens_k,
            "page_table": normal.page_table, "expand.cache_seqlens": expand.cache_seqlens_int32,
            "expand.cu_seqlens_k": expand.cu_seqlens_k, "expand.page_table": expand.page_table}


def _state(backend, bs) -> dict:
    out = {name: t.clone() for name, t in _buffers(backend, bs).items()}
    out["forward_metadata"] = backend.forward_metadata is backend.target_verify_metadata_topk_normal[bs]
    out["expand"] = backend.forward_metadata_spec_decode_expand is backend.target_verify_metadata_topk_expand[bs]
    out["max_seq_len_k"] = backend.forward_metadata.max_seq_len_k
    return out


def _run(fb, wrap, HookType, bs, raw, seed, padded_positions=False, ones=False, change=None, replays=2):
    """A top-k > 1 verify replay prep in SGLang's world and the hooked one."""
    from sgl_meta.bench.sglang_step import backends

    B = fb.FlashAttentionBackend
    name = "_apply_cuda_graph_metadata"
    plain = B.__dict__[name]
    results = []
    for hooked in (False, True):
        setup = backends.build(LABEL, "target_verify", bs, CTX, "cpu", seed=seed)
        backend, batch = setup.backend, setup.batch
        assert backend.topk == TOPK and backend.speculative_num_draft_tokens == TOPK
        backend.init_forward_metadata_out_graph(batch, in_capture=True)
        if change is not None:
            change(backend)
        if hooked:
            setattr(B, name, wrap(plain, spec.apply_cuda_graph_metadata, HookType.AROUND))
        try:
            states = []
            with OpCalls(fam, ("update_flash_attention_metadata", "flash_attention_verify_expand")) as calls:
                for k in range(replays):
                    replay_batch(batch, raw, seed + 100 + k, CTX, whole_row=k == 1)
                    gen = torch.Generator().manual_seed(seed + 300 + k)
                    batch.spec_info.custom_mask = _mask(batch, gen, ones, raw if padded_positions else bs)
                    batch.spec_info.positions = batch.positions[: raw * TOPK] if padded_positions else batch.positions
                    _poison(backend, bs, gen)
                    # What another mode's replay leaves: the refresh must set both itself.
                    backend.forward_metadata = backend.forward_metadata_spec_decode_expand = None
                    backend.init_forward_metadata_out_graph(batch)
                    states.append(_state(backend, bs))
        finally:
            setattr(B, name, plain)
        results.append((states, calls.calls))
    return worlds_report(results)


def child_main() -> None:
    fb, wrap, HookType = fa3_child()
    fb.build_trtllm_mha_page_table = sgl_meta.build_trtllm_mha_page_table  # the plugin's REPLACE row
    report = {}
    for bs, raw in ((1, 1), (4, 4), (4, 2)):
        report[f"verify-bs{bs}-raw{raw}"] = _run(fb, wrap, HookType, bs, raw, seed=bs * 10 + raw)
    report["verify-padded-positions"] = _run(fb, wrap, HookType, 4, 2, seed=3, padded_positions=True)
    report["verify-all-visible"] = _run(fb, wrap, HookType, 3, 3, seed=4, ones=True)

    def translating(backend):
        backend.kv_index_translator = SimpleNamespace(is_translating=True, reads_are_translated=True,
                                                      copy_page_table=None)

    def swa(backend):
        backend.has_swa = True

    report.update(uncovered_runs(lambda change: _run(fb, wrap, HookType, 2, 2, seed=5, change=change),
                                 {"translating": translating, "swa": swa}))
    print(json.dumps(report))


# ---- the tests ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report():
    return module_child_report("test_flash_attention_verify")


VERIFY = ["verify-bs1-raw1", "verify-bs4-raw4", "verify-bs4-raw2", "verify-padded-positions", "verify-all-visible"]


@pytest.mark.parametrize("case", VERIFY)
def test_topk_verify_refresh_in_two_launches_writes_what_sglang_writes(report, case):
    r = report[case]
    assert r["diff"] == [] and r["compared"] > 0, r
    assert r["sglang_calls"] == [], r  # SGLang's world: its page-table builder and eager ops only
    assert r["hooked_calls"] == ["update_flash_attention_metadata", "flash_attention_verify_expand"] * 2, r


def test_uncovered_pools_keep_sglangs_ops(report):
    r = report["uncovered-swa"]
    assert "error" in r or (r["hooked_calls"] == r["sglang_calls"] == [] and r["diff"] == []), r
    r = report["uncovered-translating"]
    assert "error" in r or (r["hooked_calls"] == r["sglang_calls"] == [] and r["diff"] == []), r


# ---- in-process units ------------------------------------------------------------------


def _covered(mask=None, encoder_lens=None, **changes):
    backend = SimpleNamespace(topk=4, has_swa=False, speculative_num_draft_tokens=4, page_size=64,
                              kv_index_translator=SimpleNamespace(reads_are_translated=False))
    for key, value in changes.items():
        setattr(backend, key, value)
    mode = SimpleNamespace(is_target_verify=lambda: True)
    info = SimpleNamespace(custom_mask=torch.ones(8, dtype=torch.bool) if mask is None else mask,
                           positions=torch.zeros(4))
    return spec._verify_topk_covered(backend, encoder_lens, mode, info)


@pytest.mark.parametrize("changes, covered", [
    ({}, True),
    ({"topk": 1}, False),
    ({"has_swa": True}, False),
    ({"kv_index_translator": SimpleNamespace(reads_are_translated=True)}, False),
    ({"speculative_num_draft_tokens": 65}, False),
    ({"page_size": 48}, False),
    ({"mask": torch.ones(8, dtype=torch.uint8)}, False),
    ({"mask": torch.ones(4, 2, dtype=torch.bool)}, False),
    ({"mask": torch.ones(16, dtype=torch.bool)[::2]}, False),
    ({"encoder_lens": torch.ones(2, dtype=torch.int32)}, False),
])
def test_what_the_verify_hook_covers(changes, covered):
    assert _covered(**changes) is covered
