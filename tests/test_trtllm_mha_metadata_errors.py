"""update_trtllm_mha_graph_metadata: bad input raises a clear error."""

from __future__ import annotations

import pytest
import torch

import sgl_meta
from trtllm_mha_cases import MetaCase, make_case


def call_with(gen, change, case=None):
    inputs, outputs, scalars = make_case(case or MetaCase(q_mode=1), gen, "cpu")
    kw = {**inputs, **outputs, **scalars}
    change(kw)
    sgl_meta.update_trtllm_mha_graph_metadata(**kw)


def set_(**new):
    return lambda kw: kw.update(new)


def apply(name, fn):
    return lambda kw: kw.update({name: fn(kw[name])})


BAD = {
    "page_table int64": (apply("page_table", lambda t: t.long()), "page_table must have dtype torch.int32"),
    "req_to_token int64": (apply("req_to_token", lambda t: t.long()), "req_to_token must have dtype torch.int32"),
    "seq_lens float": (apply("seq_lens", lambda t: t.float()), "seq_lens must have dtype torch.int32 or torch.int64"),
    "swa_mapping int32": (apply("swa_mapping", lambda t: t.int()), "swa_mapping must have dtype torch.int64"),
    "page_table 1-D": (apply("page_table", lambda t: t.flatten()), "page_table must be 2-D"),
    "cache_seqlens short": (apply("cache_seqlens", lambda t: t[:2]), "cache_seqlens.size(0) must be >= bs"),
    "cu_seqlens_k short": (apply("cu_seqlens_k", lambda t: t[:5]), "cu_seqlens_k.size(0) must be >= bs + 1"),
    "page_table narrow": (apply("page_table", lambda t: t[:, :3]), "page_table.size(1) must be >= max_seq_pages"),
    "page_table transposed": (apply("page_table", lambda t: t.t().contiguous().t()), "page_table must have inner stride 1"),
    "req_to_token too short": (apply("req_to_token", lambda t: t[:, :5]), "req_to_token.size(1) > (max_seq_pages - 1) * page_size"),
    "negative bs": (set_(bs=-1), "bs must be >= 0"),
    "negative max_seq_pages": (set_(max_seq_pages=-2), "max_seq_pages must be >= 0"),
    "page_size 0": (set_(page_size=0), "page_size must be >= 1"),
    "bad q_mode": (set_(q_mode=3), "q_mode must be 0"),
    "cumsum without qlens": (set_(qlens=None), "qlens is required when q_mode = 1"),
    "q_mode without cu_seqlens_q": (set_(cu_seqlens_q=None), "cu_seqlens_q is required"),
    "swa table without mapping": (set_(swa_mapping=None), "swa_mapping is required"),
    "mapping without swa outputs": (
        set_(swa_page_table=None, swa_out_cache_loc=None),
        "swa_mapping was given but neither",
    ),
    "req_pool_indices out of range": (
        apply("req_pool_indices", lambda t: t.fill_(1000)),
        "req_pool_indices[0] = 1000 is outside [0, 11)",
    ),
    "out_cache_loc out of range": (
        apply("out_cache_loc", lambda t: t.fill_(2**40)),
        "out_cache_loc[0] = 1099511627776 is outside",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_input_raises(name, gen):
    change, message = BAD[name]
    with pytest.raises(RuntimeError, match="sgl_meta.update_trtllm_mha_graph_metadata: ") as err:
        call_with(gen, change)
    assert message in str(err.value)


def test_mixed_devices_named(gen):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device")
    with pytest.raises(RuntimeError, match="page_table is on cpu"):
        call_with(gen, lambda kw: kw.update({k: v.cuda() for k, v in kw.items()
                                            if isinstance(v, torch.Tensor) and k != "page_table"}))
