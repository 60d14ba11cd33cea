"""Run in a fresh interpreter by test_load_plugins.py: SGLang's own
``load_plugins()`` with sgl-meta installed, then a JSON report on stdout's last
line of what SGLang's names resolve to.

argv[1] = "before": import the TRT-LLM MHA backend (and the DSA metadata
manager) before the plugins load, so their ``from X import Y`` copies must be
rewritten by HookRegistry; "after": import them after, so they must bind
the replaced functions; "none": import no backend.
"""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import sys

BACKENDS = {
    "sglang.srt.layers.attention.trtllm_mha_backend": (
        "sglang.kernels.ops.attention.trtllm_mha_graph_metadata.update_trtllm_mha_graph_metadata",
        "sglang.kernels.ops.attention.trtllm_mha_page_table.build_trtllm_mha_page_table",
    ),
    "sglang.srt.layers.attention.dsa.dsa_metadata_manager": (
        "sglang.kernels.ops.attention.dsa.metadata.fused_dsa_decode_metadata",
        "sglang.kernels.ops.attention.dsa.metadata.fused_dsa_target_verify_metadata",
        "sglang.kernels.ops.attention.dsa.metadata.fused_dsa_draft_extend_metadata",
    ),
}


def describe(fn) -> dict:
    """What a name holds: SGLang's original, a HookRegistry wrapper around ours,
    or (class REPLACE: a stand-in for a Triton kernel) our class itself."""
    if isinstance(fn, type) and fn.__module__.startswith("sgl_meta."):
        return {"wrapped": True, "calls": f"{fn.__module__}.{fn.__qualname__}", "id": id(fn)}
    wrapped = getattr(fn, "__wrapped__", None)
    hook = inspect.getclosurevars(fn).nonlocals.get("hook") if wrapped is not None else None
    return {
        "wrapped": wrapped is not None,
        "calls": None if hook is None else f"{hook.__module__}.{hook.__qualname__}",
        "id": id(fn),
    }


def main(when: str) -> None:
    if when == "before":
        for module in BACKENDS:
            importlib.import_module(module)

    from sglang.srt.plugins import load_plugins

    print("CHILD: load_plugins", file=sys.stderr, flush=True)
    load_plugins()
    print("CHILD: loaded", file=sys.stderr, flush=True)

    if when == "after":
        for module in BACKENDS:
            importlib.import_module(module)

    from sgl_meta.sglang.hooks import HOOKS

    report = {"targets": {}, "bindings": {}}
    for hook in HOOKS:
        try:
            report["targets"][hook.target] = describe(pkgutil.resolve_name(hook.target))
        except Exception as err:  # reported, judged by the test
            report["targets"][hook.target] = {"error": f"{type(err).__name__}: {err}"}
    if when != "none":
        for module, targets in BACKENDS.items():
            mod = sys.modules[module]
            for target in targets:
                name = target.rsplit(".", 1)[-1]
                report["bindings"][f"{module}.{name}"] = describe(getattr(mod, name))
    # The DSA backend imports its copy functions inside the replay method: what
    # that statement binds now.
    from sglang.kernels.ops.attention.dsa.fused_metadata_copy import (
        fused_metadata_copy_cuda,
        fused_metadata_copy_multi_cuda,
    )

    report["bindings"]["function-level fused_metadata_copy_cuda"] = describe(fused_metadata_copy_cuda)
    report["bindings"]["function-level fused_metadata_copy_multi_cuda"] = describe(fused_metadata_copy_multi_cuda)
    report["cpu_call"] = cpu_call()
    print(json.dumps(report))


def cpu_call() -> object:
    """SGLang's own name for the page-table builder, called on CPU tensors:
    0.5.23's Triton kernel cannot run here, ours can (its CPU kernel)."""
    import torch

    fn = pkgutil.resolve_name("sglang.kernels.ops.attention.trtllm_mha_page_table.build_trtllm_mha_page_table")
    req_to_token = torch.arange(64, dtype=torch.int32).view(2, 32) + 100
    page_table = torch.full((2, 4), -7, dtype=torch.int32)
    try:
        fn(
            req_to_token=req_to_token,
            req_pool_indices=torch.tensor([1, 0]),
            cache_seqlens=torch.tensor([20, 5], dtype=torch.int32),
            page_table=page_table,
            page_size=8,
        )
    except Exception as err:
        return f"{type(err).__name__}: {err}"
    return page_table.tolist()


if __name__ == "__main__":
    main(sys.argv[1])
