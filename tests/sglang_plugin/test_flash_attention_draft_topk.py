"""sgl_meta.sglang.flash_attention_spec: FA3's multi-step draft decode with top-k > 1
(every step's prefix and draft halves) in one launch, against SGLang 0.5.23's own code.

The worlds are SGLang's real ``FlashAttentionMultiStepBackend`` with EAGLE top-k 4 and 3
steps (two step backends), built by the ``--sglang`` bench's builder (SGLang's attention
test kit) on CPU tensors, two alike from one seed. The one substitution in SGLang's world:
its ``draft_decode_set_expand_metadata`` runs as written, without ``torch.compile`` (the
function ``torch.compile`` wraps; compiling it takes a C++ toolchain and changes nothing it
writes). The hooked world wraps ``init_forward_metadata_out_graph`` with HookRegistry's own
AROUND wrapper. The worlds run in a child interpreter (``flashattention_backend`` imports
``sgl_kernel``, stubbed there), which reports per scenario.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from sgl_meta import flash_attention_metadata as fam
from sgl_meta.sglang import flash_attention_spec as spec
from child_report import module_child_report
from kit_replay import OpCalls, fa3_child, replay_batch, uncovered_runs, worlds_report

CTX = 1024
LABEL = "fa3_topk4"  # the step bench's label: FA3 built with EAGLE top-k 4
TOPK, STEPS = 4, 3


# ---- the child: SGLang's worlds -------------------------------------------------------


def _halves(step, bs):
    return step.draft_decode_metadata_topk_normal[bs], step.draft_decode_metadata_topk_expand[bs]


def _poison(multi, bs, gen):
    for step in multi.attn_backends:
        for m in _halves(step, bs):
            for t in (m.cache_seqlens_int32, m.page_table):
                t.copy_(torch.randint(-(2**31), 2**31 - 1, t.shape, generator=gen, dtype=torch.int64).to(t.dtype))


def _state(multi, batch, bs) -> dict:
    """What FA3's two passes read: the prefix lengths and the pages they cover, the draft
    rows' lengths and tables; the host field and the metadata pair each step sets."""
    out = {}
    for i, step in enumerate(multi.attn_backends):
        normal, expand = _halves(step, bs)
        lens = normal.cache_seqlens_int32[:bs].clone()
        out[f"{i}.cache_seqlens"] = lens
        for b in range(bs):
            out[f"{i}.page_table[{b}]"] = normal.page_table[b, : max(int(lens[b]), 0) // step.page_size].clone()
        out[f"{i}.expand.cache_seqlens"] = expand.cache_seqlens_int32[: bs * TOPK].clone()
        out[f"{i}.expand.page_table"] = expand.page_table[: bs * TOPK].clone()
        out[f"{i}.max_seq_len_k"] = normal.max_seq_len_k
        out[f"{i}.pair"] = (step.forward_metadata is normal, step.forward_metadata_spec_decode_expand is expand)
    return out


def _draft_slots(batch, gen, page_size, raw):
    """Each branch's steps from its request's offset in a fresh page on, now and then a
    jump to another page; rows past ``raw`` as the runner pads them (slot 0)."""
    bs = batch.batch_size
    pages = torch.randint(20, 200, (bs, TOPK, 1), generator=gen)
    offset = (batch.seq_lens % page_size).view(bs, 1, 1)
    jump = (torch.rand(bs, TOPK, STEPS, generator=gen) < 0.2).long().cumsum(2) * page_size * 3
    loc = pages * page_size + offset + torch.arange(STEPS) + jump
    loc[raw:] = 0
    return loc.view(-1)


def _run(fb, wrap, HookType, bs, raw, seed, page_size=64, change=None, replays=2):
    """A top-k > 1 draft-decode replay prep in SGLang's world and the hooked one."""
    from sgl_meta.bench.sglang_step import backends

    M = fb.FlashAttentionMultiStepBackend
    name = "init_forward_metadata_out_graph"
    plain = M.__dict__[name]
    results = []
    for hooked in (False, True):
        default, backends.PAGE_SIZE = backends.PAGE_SIZE, page_size  # the builder's page size
        try:
            setup = backends.build(LABEL, "draft_decode", bs, CTX, "cpu", seed=seed)
        finally:
            backends.PAGE_SIZE = default
        multi, batch = setup.backend, setup.batch
        assert multi.topk == TOPK and len(multi.attn_backends) == STEPS - 1
        assert all(step.page_size == page_size for step in multi.attn_backends)
        multi.init_forward_metadata_out_graph(batch, in_capture=True)
        if change is not None:
            change(multi, batch)
        if hooked:
            setattr(M, name, wrap(plain, spec.multi_step_init_forward_metadata_out_graph, HookType.AROUND))
        try:
            states = []
            with OpCalls(fam, ("update_flash_attention_metadata", "flash_attention_draft_decode_topk")) as calls:
                for k in range(replays):
                    replay_batch(batch, raw, seed + 100 + k, CTX, whole_row=k == 1)
                    gen = torch.Generator().manual_seed(seed + 300 + k)
                    batch.out_cache_loc.copy_(_draft_slots(batch, gen, page_size, raw))
                    _poison(multi, bs, gen)
                    for step in multi.attn_backends:  # what another mode's replay leaves
                        step.forward_metadata = step.forward_metadata_spec_decode_expand = None
                    multi.init_forward_metadata_out_graph(batch)
                    states.append(_state(multi, batch, bs))
        finally:
            setattr(M, name, plain)
        results.append((states, calls.calls))
    return worlds_report(results)


def child_main() -> None:
    fb, wrap, HookType = fa3_child()
    fb.draft_decode_set_expand_metadata = fb.draft_decode_set_expand_metadata._torchdynamo_orig_callable
    report = {}
    for bs, raw, page_size in ((1, 1, 64), (4, 4, 64), (4, 2, 16), (3, 3, 1), (4, 2, 1)):
        report[f"draft-bs{bs}-raw{raw}-page{page_size}"] = _run(fb, wrap, HookType, bs, raw, bs * 10 + raw,
                                                                page_size)

    def host_lengths(multi, batch):  # max_seq_len_k from the host lengths where a step asks for them
        for step in multi.attn_backends:
            step.needs_cpu_seq_lens = True

    report["draft-host-lengths"] = _run(fb, wrap, HookType, 4, 3, seed=9, change=host_lengths)

    def translating(multi, batch):
        for step in multi.attn_backends:
            step.kv_index_translator = SimpleNamespace(is_translating=True, reads_are_translated=True)

    def step_order(multi, batch):
        multi.attn_backends[1].speculative_step_id = 0  # a step that is not the one its place says

    report.update(uncovered_runs(lambda change: _run(fb, wrap, HookType, 2, 2, seed=5, change=change),
                                 {"translating": translating, "step-order": step_order}))
    print(json.dumps(report))


# ---- the tests ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report():
    return module_child_report("test_flash_attention_draft_topk")


DRAFT = ["draft-bs1-raw1-page64", "draft-bs4-raw4-page64", "draft-bs4-raw2-page16", "draft-bs3-raw3-page1",
         "draft-bs4-raw2-page1", "draft-host-lengths"]


@pytest.mark.parametrize("case", DRAFT)
def test_topk_draft_decode_in_one_launch_writes_what_sglang_writes(report, case):
    r = report[case]
    assert r["diff"] == [] and r["compared"] > 0, r
    assert r["sglang_calls"] == [], r  # SGLang's world: its eager ops only
    assert r["hooked_calls"] == ["flash_attention_draft_decode_topk"] * 2, r


@pytest.mark.parametrize("case", ["uncovered-translating", "uncovered-step-order"])
def test_uncovered_worlds_keep_sglangs_ops(report, case):
    r = report[case]
    assert "error" in r or (r["hooked_calls"] == r["sglang_calls"] == [] and r["diff"] == []), r


# ---- in-process units ------------------------------------------------------------------


def test_what_the_draft_hook_covers():
    """Only a replay prep (not capture) of a draft batch whose out_cache_loc has every
    branch's steps; the step backends' own checks need SGLang's class (the child above)."""
    batch = SimpleNamespace(encoder_lens=None, batch_size=2, out_cache_loc=torch.zeros(2 * TOPK * STEPS),
                            spec_info=SimpleNamespace(is_draft_input=lambda: True))
    multi = SimpleNamespace(speculative_num_steps=STEPS, topk=TOPK, attn_backends=[])
    assert not spec._draft_topk_covered(multi, batch, in_capture=True)
    assert not spec._draft_topk_covered(multi, batch, in_capture=False)  # no step backends
    multi.topk = 1
    assert not spec._draft_topk_covered(multi, batch, in_capture=False)
