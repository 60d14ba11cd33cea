"""Inputs the reliability suite found failing, kept as fixed regression tests.

(The segfault found by the bad-input matrix -- page_size = 2**61 + 2**40,
max_seq_pages = 5 overflowing the req_to_token width check -- stays in
bad_input_table.py, which runs it in a subprocess.)
"""

from __future__ import annotations

import pytest
import torch

import sgl_meta
from sgl_meta import reference

IMPLS = [pytest.param(sgl_meta.update_trtllm_mha_graph_metadata, id="op"),
         pytest.param(reference.update_trtllm_mha_graph_metadata, id="reference")]


def one_row_call(slots, page_size, max_seq_pages, seq_len=5, live_pages_only=False, device="cpu"):
    i32 = dict(dtype=torch.int32, device=device)
    return dict(
        req_pool_indices=torch.zeros(1, dtype=torch.int64, device=device),
        seq_lens=torch.tensor([seq_len], **i32),
        req_to_token=torch.tensor([slots], **i32),
        cache_seqlens=torch.full((1,), 77, **i32),
        cu_seqlens_k=torch.full((2,), 77, **i32),
        page_table=torch.full((1, max(max_seq_pages, 1)), 77, **i32),
        bs=1, seqlen_offset=0, max_seq_pages=max_seq_pages, page_size=page_size,
        live_pages_only=live_pages_only,
    )


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("page_size", [2**31, 2**32, 2**62])
def test_page_size_past_int32_floors_like_int64(impl, page_size, device):
    """reference: floor_divide(int32 slots, page_size) kept int32 and wrapped the
    divisor (2**31 -> -2**31 flipped signs; 2**32 -> 0 raised ZeroDivisionError)."""
    for slot, page in [(5, 0), (-5, -1), (2**31 - 1, 0), (-(2**31), -1)]:
        kw = one_row_call([slot], page_size, 1, device=device)
        impl(**kw)
        assert kw["page_table"].tolist() == [[page]], (slot, page_size)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("page_size", [2**63 - 1, 2**63 - 2**31, 2**62 + 1])
def test_live_pages_ceil_does_not_overflow(impl, page_size, device):
    """ceil(len / page_size) was computed as (len + page_size - 1) // page_size,
    which overflows int64 for page sizes near 2**63: a live first page was left
    unwritten (CPU and CUDA kernels and the reference alike)."""
    kw = one_row_call([123], page_size, 1, seq_len=5, live_pages_only=True, device=device)
    impl(**kw)
    assert kw["page_table"].tolist() == [[0]]
    kw = one_row_call([123], page_size, 1, seq_len=0, live_pages_only=True, device=device)
    impl(**kw)
    assert kw["page_table"].tolist() == [[77]]  # no live page: untouched


def test_cpu_plus_meta_raises_instead_of_doing_nothing():
    """A call mixing CPU and meta tensors dispatched to the fake kernel, which
    returned without writing anything and without an error."""
    kw = one_row_call([1, 2, 3], 1, 3)
    kw["page_table"] = torch.empty((1, 3), dtype=torch.int32, device="meta")
    with pytest.raises(RuntimeError, match=r"sgl_meta\.update_trtllm_mha_graph_metadata: page_table is on meta"):
        sgl_meta.update_trtllm_mha_graph_metadata(**kw)


def test_all_meta_still_traces():
    """An all-meta call (what tracing does) runs the fake: no error, no output
    replaced or reshaped (a meta tensor has no values to check)."""
    kw = one_row_call([1, 2, 3], 1, 3)
    kw = {k: (v.to("meta") if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}
    before = {k: (v.shape, v.stride(), v.dtype) for k, v in kw.items() if isinstance(v, torch.Tensor)}
    assert sgl_meta.update_trtllm_mha_graph_metadata(**kw) is None
    for k, layout in before.items():
        assert kw[k].is_meta and (kw[k].shape, kw[k].stride(), kw[k].dtype) == layout, k


@pytest.mark.parametrize("name", ["req_pool_indices", "req_to_token", "cu_seqlens_k"])
def test_none_for_a_required_tensor_names_it(name):
    """None for a required tensor failed inside torch's stable-ABI boxing with
    "Not yet supported ScalarType 47", naming neither op nor argument."""
    kw = one_row_call([1, 2, 3], 1, 3)
    kw[name] = None
    with pytest.raises(TypeError, match=f"sgl_meta.update_trtllm_mha_graph_metadata: {name} must be a Tensor, got None"):
        sgl_meta.update_trtllm_mha_graph_metadata(**kw)


def test_none_page_table_without_skip_names_it():
    """page_table is optional in the schema since docs/operators/trtllm_mha_metadata.md (skip_page_table): None
    without skip_page_table is a named error, never a silent skip."""
    kw = one_row_call([1, 2, 3], 1, 3)
    kw["page_table"] = None
    with pytest.raises(RuntimeError, match="sgl_meta.update_trtllm_mha_graph_metadata: page_table is required"):
        sgl_meta.update_trtllm_mha_graph_metadata(**kw)


@pytest.mark.parametrize("impl", [pytest.param(sgl_meta.vllm_compute_slot_mappings, id="op"),
                                  pytest.param(reference.vllm_compute_slot_mappings, id="reference")])
def test_slot_mappings_ignore_the_block_size_of_a_group_not_read(impl):
    """reference: divided by every group's block size, and a disabled group's 0
    raised ZeroDivisionError where the op, which never reads it, writes the pads."""
    slot_mappings = torch.zeros(2, 2, dtype=torch.int64)
    impl(idx_mapping=torch.tensor([0]), query_start_loc=torch.tensor([0, 1], dtype=torch.int32),
         positions=torch.tensor([3]), block_tables=[torch.arange(4, dtype=torch.int32).view(1, 4),
                                                     torch.zeros(1, 4, dtype=torch.int32)],
         block_sizes=torch.tensor([2, 0], dtype=torch.int32), slot_mapping_enabled=torch.tensor([True, False]),
         dcp_sharded=torch.tensor([False, False]), slot_mappings=slot_mappings)
    assert slot_mappings.tolist() == [[3, -1], [-1, -1]]


@pytest.mark.parametrize("mapping", ["v2p", "swa_v2p", "swa_mapping"])
@pytest.mark.parametrize("impl", [pytest.param(sgl_meta.update_trtllm_mha_graph_metadata, id="op"),
                                  pytest.param(reference.update_trtllm_mha_graph_metadata, id="reference")])
def test_live_pages_only_reads_no_mapping_past_the_live_columns(impl, mapping):
    """reference: looked every column's slot up in the mapping, so a slot past a row's live
    pages that the mapping does not cover raised IndexError where the op, which reads no
    column past them, writes the live page."""
    kw = dict(req_pool_indices=torch.tensor([0]), seq_lens=torch.tensor([1], dtype=torch.int32),
              req_to_token=torch.tensor([[0, 7]], dtype=torch.int32), cache_seqlens=torch.zeros(1, dtype=torch.int32),
              cu_seqlens_k=torch.zeros(2, dtype=torch.int32), page_table=torch.full((1, 2), -9, dtype=torch.int32),
              bs=1, seqlen_offset=0, max_seq_pages=2, page_size=1, live_pages_only=True)
    swa = torch.full((1, 2), -9, dtype=torch.int32)
    if mapping == "v2p":
        kw["v2p"] = torch.arange(5)
    else:
        kw.update(v2p=torch.arange(5), swa_page_table=swa, **{mapping: torch.arange(5)})
    impl(**kw)
    assert kw["page_table"].tolist() == [[0, -9]]
    assert mapping == "v2p" or swa.tolist() == [[0, -9]]
