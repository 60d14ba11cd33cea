"""build_trtllm_mha_page_table: bad input raises a clear error."""

from __future__ import annotations

import pytest
import torch

import sgl_meta
from trtllm_mha_page_table_cases import PageTableCase, make_case

OP_NAME = "sgl_meta.build_trtllm_mha_page_table: "


def call_kwargs(gen, case=None):
    data = make_case(case or PageTableCase(bs=4, width=6, pool=5), gen, "cpu")
    return {**data.inputs, **data.views(data.buffers), "page_size": data.case.page_size}


def set_(**new):
    return lambda kw: kw.update(new)


def apply(name, fn):
    return lambda kw: kw.update({name: fn(kw[name])})


BAD = {
    "page_table int64": (apply("page_table", lambda t: t.long()), "page_table must have dtype int32 (torch.int32)"),
    "swa_page_table int64": (apply("swa_page_table", lambda t: t.long()), "swa_page_table must have dtype int32 (torch.int32)"),
    "req_to_token int64": (apply("req_to_token", lambda t: t.long()), "req_to_token must have dtype int32 (torch.int32)"),
    "req_pool_indices float": (apply("req_pool_indices", lambda t: t.float()),
                               "req_pool_indices must have dtype int32 or int64 (torch.int32 or torch.int64)"),
    "cache_seqlens int16": (apply("cache_seqlens", lambda t: t.short()),
                            "cache_seqlens must have dtype int32 or int64 (torch.int32 or torch.int64), got torch.int16"),
    "full_to_swa int16": (apply("full_to_swa", lambda t: t.short()),
                          "full_to_swa must have dtype int32 or int64 (torch.int32 or torch.int64), got torch.int16"),
    "page_table 1-D": (apply("page_table", lambda t: t[0]), "page_table must be 2-D"),
    "req_to_token 1-D": (apply("req_to_token", lambda t: t[0]), "req_to_token must be 2-D"),
    "cache_seqlens 2-D": (apply("cache_seqlens", lambda t: t[:, None]), "cache_seqlens must be 1-D"),
    "full_to_swa 2-D": (apply("full_to_swa", lambda t: t[None, :]), "full_to_swa must be 1-D"),
    "req_pool_indices short": (apply("req_pool_indices", lambda t: t[:3]),
                               "req_pool_indices.size(0) must be >= page_table.size(0) = 4, got 3"),
    "cache_seqlens short": (apply("cache_seqlens", lambda t: t[:2]),
                            "cache_seqlens.size(0) must be >= page_table.size(0) = 4, got 2"),
    "swa_page_table fewer rows": (apply("swa_page_table", lambda t: t[:3]),
                                  "swa_page_table.size(0) must be >= page_table.size(0) = 4"),
    "swa_page_table narrower": (apply("swa_page_table", lambda t: t[:, :5]),
                                "swa_page_table.size(1) must be >= page_table.size(1) = 6"),
    "page_table transposed": (apply("page_table", lambda t: t.t().contiguous().t()),
                              "page_table must have inner stride 1"),
    "page_table column step": (apply("page_table", lambda t: torch.zeros(4, 12, dtype=torch.int32)[:, ::2]),
                               "page_table must have inner stride 1, got stride(1) = 2"),
    "swa_page_table transposed": (apply("swa_page_table", lambda t: t.t().contiguous().t()),
                                  "swa_page_table must have inner stride 1"),
    "req_to_token transposed": (apply("req_to_token", lambda t: t.t().contiguous().t()),
                                "req_to_token must have inner stride 1"),
    "cache_seqlens strided": (apply("cache_seqlens", lambda t: t.repeat_interleave(2)[::2]),
                              "cache_seqlens must have inner stride 1"),
    "page_table rows overlap": (apply("page_table", lambda t: torch.zeros(1, 6, dtype=torch.int32).expand(4, 6)),
                                "page_table rows overlap: stride(0) = 0 < 6 columns written per row"),
    "swa_page_table rows overlap": (apply("swa_page_table", lambda t: torch.zeros(8 * 3, dtype=torch.int32).as_strided((4, 6), (3, 1))),
                                    "swa_page_table rows overlap: stride(0) = 3 < 6 columns written per row"),
    "page_size 0": (set_(page_size=0), "page_size must be >= 1, got 0"),
    "page_size negative": (set_(page_size=-64), "page_size must be >= 1, got -64"),
    "swa table without mapping": (set_(full_to_swa=None),
                                  "swa_page_table and full_to_swa must be given together (got swa_page_table, full_to_swa=None)"),
    "mapping without swa table": (set_(swa_page_table=None),
                                  "swa_page_table and full_to_swa must be given together (got swa_page_table=None, full_to_swa)"),
    "full_to_swa empty": (apply("full_to_swa", lambda t: t[:0]), "full_to_swa must not be empty"),
    "req_pool_indices too large": (apply("req_pool_indices", lambda t: t.fill_(5)),
                                   "req_pool_indices[0] = 5 is outside [0, req_to_token.size(0) = 5)"),
    "req_pool_indices negative": (apply("req_pool_indices", lambda t: t.fill_(-1)),
                                  "req_pool_indices[0] = -1 is outside [0, req_to_token.size(0) = 5)"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises(name, gen):
    change, message = BAD[name]
    kw = call_kwargs(gen)
    change(kw)
    with pytest.raises(RuntimeError, match=OP_NAME) as err:
        sgl_meta.build_trtllm_mha_page_table(**kw)
    assert message in str(err.value)


def test_bad_index_in_an_empty_row_still_raises_and_writes_nothing(gen):
    """Every row's index is checked, whatever its length, before any write."""
    kw = call_kwargs(gen)
    kw["cache_seqlens"][:] = 100
    kw["cache_seqlens"][3] = 0
    kw["req_pool_indices"][3] = 77
    before = kw["page_table"].clone(), kw["swa_page_table"].clone()
    with pytest.raises(RuntimeError, match=r"req_pool_indices\[3\] = 77 is outside"):
        sgl_meta.build_trtllm_mha_page_table(**kw)
    assert torch.equal(kw["page_table"], before[0])
    assert torch.equal(kw["swa_page_table"], before[1])


def test_bs0_with_valid_tensors_is_not_an_error(gen):
    kw = call_kwargs(gen, PageTableCase(bs=0))
    kw["req_pool_indices"].fill_(10**6)  # never read
    # the [0, W] outputs are views into poisoned buffers: those must keep every value
    buffers = {k: kw[k]._base for k in ("page_table", "swa_page_table")}
    before = {k: b.clone() for k, b in buffers.items()}
    assert all(b.numel() > 0 for b in before.values())
    sgl_meta.build_trtllm_mha_page_table(**kw)
    for k, b in buffers.items():
        assert torch.equal(b, before[k]), f"bs=0 wrote into {k}'s buffer"


def test_mixed_devices_named(gen):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    kw = call_kwargs(gen)
    kw = {k: (v.cuda() if isinstance(v, torch.Tensor) and k != "page_table" else v) for k, v in kw.items()}
    with pytest.raises(RuntimeError, match="page_table is on cpu but the other tensors are on cuda:0"):
        sgl_meta.build_trtllm_mha_page_table(**kw)
