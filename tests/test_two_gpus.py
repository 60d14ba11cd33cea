"""Two GPUs: a CUDA graph captured on device 1 (tensor-parallel rank 1) and
replayed while device 0 is current, for the ops a decode graph records.

The other two-GPU tests (one per op file) check eager calls. Running the suite
with SGLMETA_TEST_CUDA=cuda:1 puts the op tests' tensors (the `device`
fixture and the CUDA-graph tests) on device 1 while device 0 stays current;
tests that spell "cuda" themselves (fake-tensor tracing, the device-assert
subprocesses, tests/reliability) stay on the current device.
"""

from __future__ import annotations

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from helpers import assert_same, capture_cuda_graph, poison_, run_on_copies
from kv_read_table_cases import KvCase, make_case as make_kv_case
from trtllm_mha_metadata_cases import MetaCase, make_case as make_mha_case

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.device_count() < 2, reason="needs two GPUs"),
]


def _replay_on_device_1(capture, refresh, check):
    """Capture with cuda:1 current, then refresh inputs, replay and check three
    times with cuda:0 current."""
    graph = capture_cuda_graph(capture, device="cuda:1")
    for _ in range(3):
        with torch.cuda.device(0):
            assert torch.cuda.current_device() == 0
            refresh()
            graph.replay()
            torch.cuda.synchronize(1)
            check()


@pytest.mark.parametrize("case", [MetaCase(bs=9, live_pages_only=True), MetaCase(bs=5, v2p=True, swa_v2p=True,
                                                                               unified=True, live_pages_only=True)],
                         ids=["static_pool", "unified_pool"])
def test_update_graph_on_device_1(case, gen):
    inputs, outputs, scalars = make_mha_case(case, gen, "cuda:1")
    static_in = {k: (None if v is None else v.clone()) for k, v in inputs.items()}
    static_out = {k: (None if v is None else v.clone()) for k, v in outputs.items()}
    before = {}

    def refresh():
        fresh, _, _ = make_mha_case(case, gen, "cuda:1")
        for k, v in fresh.items():
            if v is not None:
                static_in[k].copy_(v)
        for k, v in static_out.items():
            if v is not None:
                poison_(v, gen)
                before[k] = v.clone()
            else:
                before[k] = None

    def check():
        want = run_on_copies(reference.update_trtllm_mha_graph_metadata, static_in, before, scalars)
        assert_same(static_out, want, "update graph captured on cuda:1, replayed with cuda:0 current")

    _replay_on_device_1(lambda: sgl_meta.update_trtllm_mha_graph_metadata(**static_in, **static_out, **scalars),
                        refresh, check)


@pytest.mark.parametrize("form", ["table", "stream"])
def test_kv_read_graph_on_device_1(form, gen):
    case = KvCase(form=form)
    data = make_kv_case(case, gen, "cuda:1")
    buf = data.buffer.clone()
    kwargs = data.kwargs(buf)
    op = sgl_meta.kv_read_page_table if form == "table" else sgl_meta.kv_read_token_stream
    ref = reference.kv_read_page_table if form == "table" else reference.kv_read_token_stream
    state = {}

    def refresh():
        # New pages and a compaction (v2p moves them); the lengths and the
        # stream's CSR rows stay (its buffer is sized for them).
        fresh = make_kv_case(case, gen, "cuda:1")
        for k in ("req_to_token", "req_pool_indices", "v2p"):
            kwargs[k].copy_(fresh.inputs[k])
        poison_(buf, gen)
        state["before"] = buf.clone()

    def check():
        want = state["before"].clone()
        ref(**{**kwargs, "out": data.out_view(want)})
        assert torch.equal(buf.cpu(), want.cpu()), "kv read table graph captured on cuda:1, replayed with cuda:0 current"

    _replay_on_device_1(lambda: op(**kwargs), refresh, check)
