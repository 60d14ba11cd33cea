"""Run in a fresh interpreter by test_flashinfer_step.py (TRITON_INTERPRET=1, no GPU):
the ``--sglang`` bench's FlashInfer points (decode, target verify, draft extend) on
CPU tensors, plugin off and on through the bench's own step loop, with the
FlashInfer hooks applied by hand (the plugin stays inactive without a GPU). A JSON
report on stdout's last line: per point the buffer differences and how many
snapshots were compared."""

from __future__ import annotations

import json

import torch

from sgl_meta.bench.sglang_step import backends, stubs
from sgl_meta.bench.sglang_step.cli import compare
from sgl_meta.bench.sglang_step.measure import Plan, run
from sgl_meta.bench.sglang_step.plugin_switch import Switch


def main() -> None:
    stubs.install()
    from sglang.srt.layers.attention import flashinfer_backend as fb
    from sglang.srt.plugins.hook_registry import HookType, _wrap_fn
    from sglang.srt.speculative import eagle_info

    from sgl_meta.sglang import eagle_csr, kv_indices

    targets = [(fb.FlashInferIndicesUpdaterDecode, "call_begin_forward", kv_indices.flashinfer_decode_call_begin_forward),
               (eagle_info.EagleVerifyInput, "generate_attn_arg_prefill", eagle_csr.verify_attn_arg_prefill),
               (eagle_info.EagleDraftExtendInput, "generate_attn_arg_prefill", eagle_csr.draft_extend_attn_arg_prefill)]
    changes = [(cls, name, cls.__dict__[name], _wrap_fn(cls.__dict__[name], hook, HookType.AROUND))
               for cls, name, hook in targets]
    switch = Switch(changes)
    switch.state = "off"
    calls = []
    for module in (kv_indices, eagle_csr):  # count our launches: the hooks must take these points
        real = module.build_kv_indices
        module.build_kv_indices = lambda *a, _real=real, **k: (calls.append(switch.state), _real(*a, **k))[1]
    report = {}
    for mode in ("decode", "target_verify", "draft_extend"):
        for bs, ctx in ((1, 2048), (3, 1024)):
            off = backends.build("flashinfer", mode, bs, ctx, "cpu", seed=7)
            on = backends.build("flashinfer", mode, bs, ctx, "cpu", seed=7)
            calls.clear()
            result = run(off, on, switch, Plan(check_steps=3, warmup=0, steps=1, profile_steps=1, builds=1))
            snaps = result["off"]["snapshots"]
            report[f"{mode}-bs{bs}"] = {"diffs": compare(result["off"], result["on"]), "compared": len(snaps),
                                        "keys": sorted(snaps[0]), "indices": int(snaps[-1]["kv_indices"].numel()),
                                        "ours_off": calls.count("off"), "ours_on": calls.count("on")}
            switch.off()
    print(json.dumps(report))


if __name__ == "__main__":
    torch.manual_seed(0)
    main()
