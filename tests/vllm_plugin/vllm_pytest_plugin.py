"""A pytest plugin (``-p vllm_pytest_plugin``) for running vLLM 0.33.0's own unit
tests with sgl-meta's vLLM plugin installed: vLLM's ``load_general_plugins()``
runs before collection, every replacement must be in place, and the calls our
ops receive are counted and printed at the end (``SGLMETA_OP_CALLS {json}``),
so a run where vLLM's code never reached our ops is visible."""

from __future__ import annotations

import collections
import json

CALLS: collections.Counter = collections.Counter()


def _count(module, name):
    original = getattr(module, name)

    def counted(*args, **kwargs):
        CALLS[name] += 1
        return original(*args, **kwargs)

    setattr(module, name, counted)


def pytest_configure(config):
    from vllm.plugins import load_general_plugins

    from sgl_meta.vllm import plugin, replacements

    load_general_plugins()
    # The rows vLLM's block-table and input-batch tests reach; the FlashInfer
    # row needs flashinfer, which a machine running these tests may lack.
    exercised = [t for t in plugin.TARGETS if t.target.startswith("vllm.v1.worker.gpu.")]
    missing = [t for t in exercised if t.target not in plugin._installed]
    if missing:
        raise RuntimeError(f"sgl-meta's vLLM plugin left alone: {[t.name for t in missing]} (see its log line)")
    for name in ("vllm_compute_slot_mappings", "vllm_gather_block_tables"):
        _count(replacements._bt, name)
    for name in ("vllm_prepare_pos_seq_lens", "vllm_combine_sampled_and_draft_tokens"):
        _count(replacements._ib, name)


def pytest_unconfigure(config):
    print(f"\nSGLMETA_OP_CALLS {json.dumps(dict(CALLS))}", flush=True)
