"""The SGLang plugin and the FlashAttention backend: after SGLang's own
``load_plugins()``, the names ``flashattention_backend.py`` imported from
``sglang.kernels.ops.attention.metadata`` call ours, and the backend's own methods
(``_set_decode_page_metadata``, ``_init_sliding_window_attn_spec_metadata``) run
our kernels on CPU tensors (0.5.23's Triton kernels cannot run without a GPU).

Fresh interpreters (HookRegistry is process-global): the backend imported before
the plugins load (its ``from X import Y`` copies must be rewritten) and after.
``sgl_kernel`` (a CUDA-only package SGLang's backend imports at module level) is
stubbed in the child: the test reads names and calls our CPU kernels only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest

import sgl_meta

CHILD = textwrap.dedent('''
    import inspect, json, sys, types
    stub = types.ModuleType("sgl_kernel")
    stub.merge_state_v2 = lambda *a, **k: None
    sys.modules["sgl_kernel"] = stub
    BACKEND = "sglang.srt.layers.attention.flashattention_backend"
    if sys.argv[1] == "before":
        __import__(BACKEND)
    from sglang.srt.plugins import load_plugins
    load_plugins()
    import importlib
    from types import SimpleNamespace as NS
    import torch
    from sgl_meta import reference
    fb = importlib.import_module(BACKEND)

    def calls(fn):
        hook = inspect.getclosurevars(fn).nonlocals.get("hook") if hasattr(fn, "__wrapped__") else None
        return None if hook is None else f"{hook.__module__}.{hook.__qualname__}"

    report = {"bindings": {n: calls(getattr(fb, n)) for n in (
        "normal_decode_set_metadata", "draft_extend_set_metadata", "prepare_swa_spec_page_table_triton")}}

    # _set_decode_page_metadata: SGLang's decode/draft-decode/verify call site, delta 2, SWA by token mapping.
    g = torch.Generator().manual_seed(0)
    bs, ps, pages = 3, 4, 6
    req_to_token = torch.randint(0, 500, (4, pages * ps), generator=g, dtype=torch.int32)
    mapping = torch.randint(0, 900, (500,), generator=g)
    this = NS(kv_index_translator=NS(reads_are_translated=False), req_to_token=req_to_token, max_num_pages=pages,
              page_size=ps, use_sliding_window_kv_pool=True, token_to_kv_pool=NS(full_to_swa_index_mapping=mapping))
    def fresh():
        return NS(cache_seqlens_int32=torch.full((bs,), -7, dtype=torch.int32),
                  cu_seqlens_k=torch.full((bs + 1,), -7, dtype=torch.int32),
                  page_table=torch.full((bs, pages), -7, dtype=torch.int32),
                  swa_page_table=torch.full((bs, pages), -7, dtype=torch.int32))
    rpi, seq = torch.tensor([2, 0, 3]), torch.tensor([5, 0, 19], dtype=torch.int32)
    got, want = fresh(), fresh()
    fb.FlashAttentionBackend._set_decode_page_metadata(this, None, got, rpi, seq, 2)
    reference.normal_decode_set_metadata(want.cache_seqlens_int32, want.cu_seqlens_k, want.page_table,
                                         req_to_token, rpi, pages, seq, 2, ps, want.swa_page_table,
                                         full_to_swa_index_mapping=mapping)
    report["decode"] = all(torch.equal(getattr(got, k), getattr(want, k)) for k in vars(want))

    # _init_sliding_window_attn_spec_metadata: the topk > 1 SWA table (page size 1).
    R = 2
    meta = NS(cache_seqlens_int32=torch.tensor([3, 5], dtype=torch.int32), max_seq_len_k=5,
              page_table=torch.randint(0, 99, (2, 7), generator=g, dtype=torch.int32))
    expand = NS(cache_seqlens_int32=torch.tensor([1, 2, 2, 1], dtype=torch.int32), cu_seqlens_q=None,
                page_table=torch.randint(100, 199, (4, 2), generator=g, dtype=torch.int32))
    this = NS(page_size=1, speculative_num_draft_tokens=R, use_sliding_window_kv_pool=False)
    fb.FlashAttentionBackend._init_sliding_window_attn_spec_metadata(this, meta, expand)
    dst = torch.zeros(4, 7, dtype=torch.int32)
    reference.prepare_swa_spec_page_table_triton(dst, meta.page_table, expand.page_table,
                                                 meta.cache_seqlens_int32, expand.cache_seqlens_int32, R)
    report["swa_spec"] = torch.equal(meta.swa_spec_metadata.page_table, dst)
    print(json.dumps(report))
''')


def _why_not():
    try:
        import sglang  # noqa: F401
        import triton  # noqa: F401
    except ImportError as err:
        return f"sglang / triton not installed ({err})"
    if not [ep for ep in metadata.entry_points(group="sglang.srt.plugins") if ep.name == "sgl_meta"]:
        return "sgl-meta is not pip-installed here (its entry point lives in the package metadata): pip install -e ."
    return None


@pytest.fixture(scope="module", params=["before", "after"])
def report(request):
    why = _why_not()
    if why:
        pytest.skip(why)
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_PLUGINS" and not k.endswith("_SGLANG_PLUGIN")}
    env["SGLMETA_SGLANG_PLUGIN"] = "force"
    env["PYTHONPATH"] = os.pathsep.join([str(Path(sgl_meta.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-c", CHILD, request.param], env=env, capture_output=True, text=True,
                          timeout=900)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_backend_names_call_ours(report):
    for name, got in report["bindings"].items():
        assert got == f"sgl_meta.flash_attention_metadata.{name}", (name, got)


def test_decode_call_site_runs_our_kernel(report):
    assert report["decode"] is True


def test_swa_spec_call_site_runs_our_kernel(report):
    assert report["swa_spec"] is True
