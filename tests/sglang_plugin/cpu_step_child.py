"""Run in a fresh interpreter by test_cpu_step.py (TRITON_INTERPRET=1, no GPU): points
of the ``--sglang`` bench on CPU tensors, plugin off and on through the bench's own
step loop, with the hooks of the backends measured applied by hand (the plugin
stays inactive without a GPU): FlashInfer (planner left out) in decode, target
verify, draft extend and its multi-step draft decode, FlashInfer MLA (planner left
out) in decode, target verify and draft decode, FlashMLA in every mode (its
planner left out), the Triton backend's target verify and draft extend, and the Triton and
TRT-LLM MLA multi-step draft decodes
(the scheduler's page size published; the Triton backend told of 132 SMs, so its split counts take
get_num_kv_splits_triton), the Triton backend's decode, FA3 in every mode at page sizes 64 and 1 (its
function drop-ins swapped into the backend's module, as the plugin's REPLACE rows do), FA3's top-k 4 target
verify and draft decode, and DSA's multi-step draft decode (off: SGLang's eager generator and
copy fallbacks, which it takes without CUDA). A JSON report on stdout's last line: per
point the buffer differences, how many snapshots were compared, and how many of
our launches each side made."""

from __future__ import annotations

import json

from sgl_meta.bench.sglang_step import backends, points, stubs
from sgl_meta.bench.sglang_step.cli import compare
from sgl_meta.bench.sglang_step.measure import Plan, run
from sgl_meta.bench.sglang_step.plugin_switch import Switch

POINTS = [("flashinfer", m) for m in ("decode", "target_verify", "draft_extend", "draft_decode")] + [
    ("flashinfer_mla", m) for m in ("decode", "target_verify", "draft_decode")] + [
    ("triton", m) for m in points.MODES] + [
    ("trtllm_mla", "draft_decode")] + [("flashmla", m) for m in points.MODES] + [
    ("fa3", m) for m in points.MODES] + [("fa3_page1", m) for m in points.MODES] + [
    ("fa3_topk4", "target_verify"),
    ("fa3_topk4", "draft_decode"), ("dsa", "draft_decode"), ("dsa_fp8", "draft_decode")]
HOOKED = {"flashinfer", "flashinfer_mla", "trtllm_mla", "fa3", "fa3_page1", "fa3_topk4", "triton", "flashmla", "dsa",
          "dsa_fp8"}
# The function drop-ins the FA3 backend imports by name (the plugin's REPLACE rows).
FA3_FUNCTIONS = ("normal_decode_set_metadata", "draft_extend_set_metadata", "prepare_swa_spec_page_table_triton")


def main() -> None:
    stubs.install()
    from sglang.srt.layers.attention import attention_registry
    from sglang.srt.layers.attention import dsa_backend as db
    from sglang.srt.layers.attention import flashattention_backend as fab
    from sglang.srt.layers.attention import flashinfer_backend as fb
    from sglang.srt.layers.attention import flashinfer_mla_backend as fimb
    from sglang.srt.layers.attention import flashmla_backend as fmb
    from sglang.srt.layers.attention import triton_backend as tb
    from sglang.srt.layers.attention import trtllm_mla_backend as tmb
    from sglang.srt.plugins.hook_registry import HookType, _wrap_fn
    from sglang.srt.speculative import eagle_info

    from sgl_meta import flash_attention_metadata, trtllm_mha_page_table
    from sgl_meta.sglang import dsa_spec, eagle_csr, flash_attention_spec, flashmla, kernels, kv_indices, trtllm_mla

    attention_registry.get_device_capability = lambda *a, **k: (9, 0)  # FA3 is built for SM 8.x / 9.x
    tb.get_device_core_count = lambda *a, **k: 132  # the Triton backend's split counts: get_num_kv_splits_triton

    targets = [(fb.FlashInferIndicesUpdaterDecode, "call_begin_forward", kv_indices.flashinfer_decode_call_begin_forward),
               (fb.FlashInferMultiStepDraftBackend, "__init__", kv_indices.flashinfer_multi_step_draft_init),
               (fimb.FlashInferMLAIndicesUpdaterDecode, "call_begin_forward",
                kv_indices.flashinfer_mla_decode_call_begin_forward),
               (eagle_info.EagleVerifyInput, "generate_attn_arg_prefill", eagle_csr.verify_attn_arg_prefill),
               (eagle_info.EagleDraftExtendInput, "generate_attn_arg_prefill", eagle_csr.draft_extend_attn_arg_prefill),
               (tb.TritonAttnBackend, "_fill_kv_indptr_and_indices", kv_indices.fill_kv_indptr_and_indices),
               (tb.TritonAttnBackend, "_apply_cuda_graph_metadata", kv_indices.apply_cuda_graph_metadata),
               (tb.TritonAttnBackend, "_update_target_verify_buffers", kv_indices.update_target_verify_buffers),
               (tb.TritonAttnBackend, "_update_draft_extend_buffers", kv_indices.update_draft_extend_buffers),
               (tb.TritonMultiStepDraftBackend, "init_forward_metadata_out_graph",
                kv_indices.multi_step_draft_init_forward_metadata_out_graph),
               (tmb.TRTLLMMLABackend, "_apply_cuda_graph_metadata", trtllm_mla.apply_cuda_graph_metadata),
               (fmb.FlashMLABackend, "_apply_decode_target_verify_metadata", flashmla.apply_decode_target_verify_metadata),
               (fmb.FlashMLAMultiStepDraftBackend, "init_forward_metadata_out_graph",
                flashmla.multi_step_init_forward_metadata_out_graph),
               (tmb.TRTLLMMLAMultiStepDraftBackend, "init_forward_metadata_out_graph",
                trtllm_mla.multi_step_init_forward_metadata_out_graph),
               (fab.FlashAttentionBackend, "_apply_cuda_graph_metadata", flash_attention_spec.apply_cuda_graph_metadata),
               (fab.FlashAttentionMultiStepBackend, "init_forward_metadata_out_graph",
                flash_attention_spec.multi_step_init_forward_metadata_out_graph),
               (db.DeepseekSparseAttnMultiStepBackend, "init_forward_metadata_out_graph",
                dsa_spec.multi_step_init_forward_metadata_out_graph)]
    changes = [(cls, name, cls.__dict__[name], _wrap_fn(cls.__dict__[name], hook, HookType.AROUND))
               for cls, name, hook in targets]
    calls = []

    def counted(fn):  # a drop-in's launch, counted as our own
        return lambda *a, **k: (calls.append(switch.state), fn(*a, **k))[1]

    changes += [(fab, name, getattr(fab, name), counted(getattr(flash_attention_metadata, name)))
                for name in FA3_FUNCTIONS]
    changes.append((fab, "build_trtllm_mha_page_table", fab.build_trtllm_mha_page_table,
                    counted(trtllm_mha_page_table.build_trtllm_mha_page_table)))
    # The draft-decode kernel, a module attribute of both multi-step backends (the class REPLACE).
    draft_kernel = tb.generate_draft_decode_kv_indices
    bound = kernels.DraftDecodeKvIndicesKernel.bind(draft_kernel)
    changes += [(module, "generate_draft_decode_kv_indices", draft_kernel, bound) for module in (tb, fb, fimb)]
    table_kernel = fmb.create_flashmla_kv_indices_triton  # FlashMLA's block table (the hooked class REPLACE)
    changes.append((fmb, "create_flashmla_kv_indices_triton", table_kernel,
                    kernels.FlashmlaKvIndicesKernel.bind(table_kernel)))
    switch = Switch(changes)
    switch.state = "off"
    for module, name in ((kv_indices, "build_kv_indices"), (eagle_csr, "build_kv_indices"),
                         (flash_attention_metadata, "update_flash_attention_metadata"),
                         (flash_attention_metadata, "flash_attention_verify_expand"),
                         (flash_attention_metadata, "flash_attention_draft_decode_topk"),
                         (kernels, "build_draft_decode_kv_indices"), (kv_indices, "build_draft_decode_kv_indices"),
                         (kernels, "create_flashmla_kv_indices"), (dsa_spec._dsa, "fused_dsa_metadata")):
        real = getattr(module, name)
        # Tagged "+q" when the call writes qo_indptr: a verify or draft-extend hook's own launch.
        setattr(module, name, lambda *a, _real=real, **k: (
            calls.append(switch.state + ("+q" if k.get("qo_indptr") is not None else "")), _real(*a, **k))[1])
    report = {}
    # (backend, mode, bs, context, max_len): every point at two sizes, and FA3 at page size 1 with requests
    # far shorter than its width (--max-len).
    sizes = [(b, m, bs, ctx, None) for b, m in POINTS for bs, ctx in ((1, 2048), (3, 1024))]
    sizes += [("fa3_page1", m, 3, 4096, 600) for m in ("decode", "target_verify")]
    for backend, mode, bs, ctx, max_len in sizes:
        off = backends.build(backend, mode, bs, ctx, "cpu", seed=7, max_len=max_len)
        switch.on()  # (FlashInfer's draft backend keeps the module's kernel when built)
        on = backends.build(backend, mode, bs, ctx, "cpu", seed=7, max_len=max_len)
        switch.off()
        calls.clear()
        result = run(off, on, switch, Plan(check_steps=3, warmup=0, steps=1, profile_steps=1, builds=1))
        snaps = result["off"]["snapshots"]
        lens = off.batch.seq_lens_cpu
        assert max_len is None or int(lens.max()) <= max_len < ctx, (lens, max_len)
        report[f"{backend}-{mode}-bs{bs}" + ("-short" if max_len else "")] = {
            "diffs": compare(result["off"], result["on"]), "compared": len(snaps), "keys": sorted(snaps[0]),
            "ours_off": sum(c.startswith("off") for c in calls), "ours_on": sum(c.startswith("on") for c in calls),
            "ours_on_qo": calls.count("on+q")}
        switch.off()
    print(json.dumps(report))


if __name__ == "__main__":
    main()
