"""The FlashAttention rows of ``python -m sgl_meta.bench --upstream`` on CPU, at small
shapes: SGLang 0.5.23's own functions (Triton's interpreter) beside ours and the
reference, every element upstream defines equal (the GPU run times them)."""

from __future__ import annotations

import pytest
import torch

from flash_attention_metadata_upstream import upstream
from sgl_meta.bench.upstream import rows_flash_attention_metadata as rows
from sgl_meta.bench.upstream.fixtures import Context
from sgl_meta.bench.upstream.measure import check_row
from sgl_meta.bench.upstream.run import ROW_SPECS

UP = upstream()


def test_rows_are_registered():
    assert all(spec in ROW_SPECS for spec in rows.ROWS)


@pytest.mark.skipif(UP is None, reason="sglang 0.5.23 / triton not installed")
@pytest.mark.parametrize("spec", rows.ROWS, ids=[s.name for s in rows.ROWS])
def test_row_on_cpu(spec, monkeypatch):
    monkeypatch.setattr(rows, "PAGES", 16)
    monkeypatch.setattr(rows, "PAGE1_WIDTH", 96)
    ctx = Context(device=torch.device("cpu"), seed=3, max_bs=256)
    row = spec.build(ctx, UP)
    assert {"upstream", "ours", "ref"} <= set(row.calls) and row.regions
    row.repoison()
    for calls in row.calls.values():
        for c in calls:
            c()
    assert check_row(row, "eager") == []
    name = next(iter(row.regions))  # a wrong element inside upstream's region is caught
    inside = torch.zeros_like(row.outputs["ours"][name], dtype=torch.bool)
    inside[row.regions[name]] = True
    first = tuple(inside.nonzero()[0].tolist())
    row.outputs["upstream"][name][first] += 1
    assert len(check_row(row, "eager")) == 1


@pytest.mark.parametrize("spec", [s for s in rows.ROWS if "page size 1" in s.name], ids=lambda s: s.name)
def test_page1_rows_call_as_the_backend_replays(spec, monkeypatch):
    """FlashAttentionBackend's decode replay: page size 1, seq_len_delta 0 and its static width
    (max_num_pages), whatever the batch's lengths."""
    monkeypatch.setattr(rows, "PAGE1_WIDTH", 96)
    up = type("Up", (), {"normal_decode_set_metadata": staticmethod(lambda *a, **k: None)})()
    row = spec.build(Context(device=torch.device("cpu"), seed=3, max_bs=256), up)
    (call,) = row.calls["ours"]
    assert call.args[5] == 96 and call.args[7] == 0 and call.args[8] == 1  # max_seq_pages, seq_len_delta, page_size
    call()
    assert torch.equal(row.outputs["ours"]["cache_seqlens"], call.args[6].to(torch.int32))
    assert row.outputs["ours"]["page_table"].shape[1] == 96
