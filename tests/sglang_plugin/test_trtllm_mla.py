"""sgl_meta.sglang.trtllm_mla: TRT-LLM MLA's replay refresh (decode, target verify,
draft extend) and its multi-step draft decode in one launch each, against SGLang
0.5.23's own methods.

The worlds are SGLang's real ``TRTLLMMLABackend`` / ``TRTLLMMLAMultiStepDraftBackend``
built by the ``--sglang`` bench's builder (SGLang's attention test kit) on CPU
tensors, two alike from one seed. The one substitution in SGLang's world: its
Triton ``create_flashmla_kv_indices_triton`` (no GPU here) is the plugin's
stand-in, as the plugin's row makes it (tests/sglang_plugin/test_flashmla_kernel.py
checks it against SGLang's kernel). The hooked world wraps the methods with
HookRegistry's own AROUND wrapper. The backends import FlashInfer (stubbed by the
bench's stubs), so the worlds run in a child interpreter, which reports per scenario.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch

from sgl_meta import flash_attention_metadata as fam
from sgl_meta.sglang import trtllm_mla as mla
from child_report import child_report
from kit_replay import diff, replay_batch

CTX = 1024
MODES = ("decode", "target_verify", "draft_extend")


# ---- the child: SGLang's worlds -------------------------------------------------------


def _child_setup(device: str):
    from sgl_meta.bench.sglang_step import stubs

    stubs.install()
    from sglang.srt.layers.attention import trtllm_mla_backend as tmb
    from sglang.srt.plugins.hook_registry import HookType, _wrap_fn

    from sgl_meta.sglang.kernels import FlashmlaKvIndicesKernel

    launches = []
    kernel = tmb.create_flashmla_kv_indices_triton
    # On CPU the plugin's REPLACE row stands in for SGLang's Triton kernel; on a GPU it is SGLang's own.
    stand_in = FlashmlaKvIndicesKernel.bind(kernel) if device == "cpu" else kernel

    class Counted:  # launches counted
        def __getitem__(self, grid):
            launches.append(grid)
            return stand_in[grid]

    tmb.create_flashmla_kv_indices_triton = Counted()
    return tmb, HookType, _wrap_fn, launches


class Counter:
    """Calls of update_flash_attention_metadata: each call's (sets, tables, delta)."""

    def __init__(self):
        self.calls = []
        self.real = fam.update_flash_attention_metadata

    def __call__(self, **kw):
        self.calls.append([len(kw["cache_seqlens"]), len(kw["page_table"]), sorted(set(kw["seq_len_delta"]))])
        return self.real(**kw)


def _graphs(backend, bs):
    return [(i, b.decode_cuda_graph_metadata[bs]) for i, b in enumerate(getattr(backend, "attn_backends", [backend]))]


def _poison(backend, bs, seed):
    gen = torch.Generator().manual_seed(seed)
    for _, m in _graphs(backend, bs):
        for t in (m.seq_lens_k, m.global_seq_lens_k, m.block_kv_indices):
            if t is not None:
                t.copy_(torch.randint(-(2**31), 2**31 - 1, t.shape, generator=gen, dtype=torch.int64).to(t))
        m.max_seq_len_q = m.sum_seq_lens_q = -1


def _state(backend, bs):
    """Every buffer of each graph's metadata (whole: the table's dead columns too) and its host fields."""
    out = {}
    for i, m in _graphs(backend, bs):
        for name in ("seq_lens_k", "global_seq_lens_k", "block_kv_indices", "cu_seqlens_q", "seq_lens_q"):
            t = getattr(m, name)
            out[f"{i}.{name}"] = None if t is None else t.cpu()
        for name in ("max_seq_len_q", "sum_seq_lens_q", "max_seq_len_k"):
            out[f"{i}.{name}"] = getattr(m, name)
    return out


def _capture(tmb, backend, batch):
    """The capture-time prep (allocates ``decode_cuda_graph_metadata[bs]``). The
    multi-step backend's own capture path also runs FlashInfer's Triton draft
    indices, which no replay here reads: its step backends are captured one by
    one instead (tests/sglang_plugin/test_cpu_step.py runs the whole capture)."""
    if isinstance(backend, tmb.TRTLLMMLAMultiStepDraftBackend):
        from sglang.srt.model_executor.forward_batch_info import ForwardMode, build_inner_fb_view

        inner = build_inner_fb_view(batch, bs=batch.batch_size, forward_mode=ForwardMode.DECODE)
        for b in backend.attn_backends:
            b.init_forward_metadata_out_graph(inner, in_capture=True)
    else:
        backend.init_forward_metadata_out_graph(batch, in_capture=True)


def _run(tmb, wrap, HookType, launches, mode, bs, raw, seed, prep=None, replays=2, device="cpu"):
    """SGLang's world and the hooked one: capture, then replays; per world the calls made."""
    from sgl_meta.bench.sglang_step import backends

    targets = [(tmb.TRTLLMMLABackend, "_apply_cuda_graph_metadata", mla.apply_cuda_graph_metadata),
               (tmb.TRTLLMMLAMultiStepDraftBackend, "init_forward_metadata_out_graph",
                mla.multi_step_init_forward_metadata_out_graph)]
    plain = [cls.__dict__[name] for cls, name, _ in targets]
    results = []
    for hooked in (False, True):
        setup = backends.build("trtllm_mla", mode, bs, CTX, device, seed=seed)
        backend, batch = setup.backend, setup.batch
        _capture(tmb, backend, batch)
        if prep is not None:
            prep(backend)
        counter = Counter()
        fam.update_flash_attention_metadata = counter
        launches.clear()
        if hooked:
            for (cls, name, hook), fn in zip(targets, plain):
                setattr(cls, name, wrap(fn, hook, HookType.AROUND))
        try:
            states = []
            for k in range(replays):
                replay_batch(batch, raw, seed + 100 + k, CTX, whole_row=True)
                _poison(backend, bs, seed + 200 + k)
                backend.init_forward_metadata_out_graph(batch)
                states.append(_state(backend, bs))
        finally:
            for (cls, name, _), fn in zip(targets, plain):
                setattr(cls, name, fn)
            fam.update_flash_attention_metadata = counter.real
        results.append((states, counter.calls, len(launches)))
    (sa, ca, la), (sb, cb, lb) = results
    return {"diff": [d for x, y in zip(sa, sb) for d in diff(x, y)], "sglang_calls": ca, "hooked_calls": cb,
            "sglang_kernels": la, "hooked_kernels": lb, "compared": sum(len(s) for s in sa)}


def child_main(device: str = "cpu") -> None:
    tmb, HookType, wrap, launches = _child_setup(device)
    report = {}
    if device != "cpu":  # SGLang's own Triton kernel against the hooks, every mode
        for mode in MODES + ("draft_decode",):
            for bs, raw in ((1, 1), (33, 30)):
                report[f"{mode}-bs{bs}-raw{raw}"] = _run(tmb, wrap, HookType, launches, mode, bs, raw,
                                                          seed=bs * 10 + raw, device=device)
        print(json.dumps(report))
        return
    for mode in MODES + ("draft_decode",):
        for bs, raw in ((1, 1), (4, 4), (4, 2)):
            report[f"{mode}-bs{bs}-raw{raw}"] = _run(tmb, wrap, HookType, launches, mode, bs, raw,
                                                      seed=bs * 10 + raw)

    def translating(backend):
        for b in getattr(backend, "attn_backends", [backend]):
            b.kv_index_translator = SimpleNamespace(is_translating=True, reads_are_translated=True,
                                                    copy_page_table=lambda plan, out: out.fill_(5))

    for mode in ("decode", "draft_decode"):
        report[f"{mode}-translating"] = _run(tmb, wrap, HookType, launches, mode, 3, 3, seed=5, prep=translating)

    # Decode context parallelism, read through the backend module's own get_parallel.
    from sgl_meta.bench.sglang_step import backends

    backend = backends.build("trtllm_mla", "decode", 2, CTX, "cpu", seed=6).backend
    real = tmb.get_parallel
    report["dcp"] = {"off": mla.gathers_block_table(backend)}
    tmb.get_parallel = lambda: SimpleNamespace(dcp_enabled=True)
    try:
        report["dcp"]["on"] = mla.gathers_block_table(backend)
    finally:
        tmb.get_parallel = real
    print(json.dumps(report))


# ---- the tests ------------------------------------------------------------------------


def _why_not():
    try:
        import sglang  # noqa: F401
        import triton  # noqa: F401
    except ImportError as err:
        return f"sglang / triton not installed ({err})"
    return None


def _child(device: str) -> dict:
    why = _why_not()
    if why:
        pytest.skip(why)
    return child_report(["-c", f"import test_trtllm_mla as t; t.child_main({device!r})"])


@pytest.fixture(scope="module")
def report():
    return _child("cpu")


SIZES = ("bs1-raw1", "bs4-raw4", "bs4-raw2")


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("mode", MODES)
def test_refresh_in_one_launch_writes_what_sglang_writes(report, mode, size):
    r = report[f"{mode}-{size}"]
    assert r["diff"] == [] and r["compared"] > 0, r
    assert r["sglang_calls"] == [] and r["sglang_kernels"] == 2, r  # the kernel per replay, beside its copies
    verify = mode == "target_verify"
    want = [[2, 1, [4]]] if verify else [[1, 1, [0]]]  # verify: two length buffers over one table
    assert r["hooked_calls"] == want * 2 and r["hooked_kernels"] == 0, r


@pytest.mark.parametrize("size", SIZES)
def test_draft_decode_steps_in_one_launch_write_what_sglang_writes(report, size):
    r = report[f"draft_decode-{size}"]
    assert r["diff"] == [] and r["compared"] > 0, r
    assert r["sglang_calls"] == [] and r["sglang_kernels"] == 2 * 2, r  # K - 1 = 2 steps, each replay
    assert r["hooked_calls"] == [[2, 2, [0]]] * 2 and r["hooked_kernels"] == 0, r


@pytest.mark.parametrize("mode", ["decode", "draft_decode"])
def test_a_translating_pool_keeps_sglangs_path(report, mode):
    r = report[f"{mode}-translating"]
    assert r["diff"] == [] and r["compared"] > 0, r
    assert r["hooked_calls"] == r["sglang_calls"] == [] and r["hooked_kernels"] == r["sglang_kernels"] == 0, r


def test_decode_context_parallelism_is_not_covered(report):
    assert report["dcp"] == {"off": True, "on": False}


def test_hook_table():
    """The plugin's table registers both hooks of this module as AROUND hooks on these targets."""
    from helpers import around_hooks  # not at the top: child processes import this module without tests/

    assert around_hooks().items() >= {
        mla.APPLY_TARGET: (mla.apply_cuda_graph_metadata, "AROUND"),
        mla.MULTI_STEP_TARGET: (mla.multi_step_init_forward_metadata_out_graph, "AROUND"),
    }.items()


@pytest.mark.gpu
def test_on_the_gpu_against_sglangs_triton_kernel():
    """SGLang's world on the GPU runs its own Triton kernel: the hooks write what it writes."""
    report = _child("cuda")
    for case, r in report.items():
        assert r["diff"] == [] and r["compared"] > 0, (case, r)
        assert r["hooked_kernels"] == 0 and len(r["hooked_calls"]) == 2, (case, r)
