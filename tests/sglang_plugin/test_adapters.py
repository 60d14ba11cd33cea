"""The adapters accept what SGLang 0.5.23's functions accept, beyond what its
own call sites pass today, with 0.5.23's results (no SGLang needed: the
expected values come from upstream_model.py)."""

from __future__ import annotations

import pytest
import torch

import scenarios
import upstream_model as model
from sgl_meta.sglang import adapters
from test_semantics import assert_same_tensors, to_device

DSA_PARAMS = list(scenarios.dsa_copy("decode", 0))
MULTI_PARAMS = list(scenarios.dsa_copy_multi("decode", 0))


def _seed(gen) -> int:
    return int(torch.randint(0, 2**31, (1,), generator=gen))


def run_both(fn_name, build, device, edit=lambda v: None, keywords=False):
    """0.5.23's model (on CPU) and our adapter (on `device`) on equal argument
    sets, after `edit`."""
    want, got = build(), build()
    edit(want)
    edit(got)
    got = to_device(got, device)
    for fn, values in ((getattr(model, fn_name), want), (getattr(adapters, fn_name), got)):
        if keywords:
            fn(**values)
        else:
            fn(*values.values())
    assert_same_tensors(got, want, fn_name)
    return got


# ---- update_trtllm_mha_graph_metadata -----------------------------------------------------
@pytest.mark.parametrize("ps", [1, 16])
def test_skip_page_table_still_translates_swa_out_cache_loc(gen, ps, device):
    """0.5.23 drops the page tables under skip_page_table but still writes
    swa_out_cache_loc when one is given (its call sites never give one)."""
    seed = _seed(gen)

    def build():
        v = scenarios.update("decode_swa", seed, page_size=ps)
        v["skip_page_table"] = True
        return v

    got = run_both("update_trtllm_mha_graph_metadata", build, device, keywords=True)
    assert (got["swa_out_cache_loc"][:9] != 0).any()  # it was written, not left as poison


def test_skip_page_table_ignores_given_tables(gen, device):
    """0.5.23 ignores page_table / swa_page_table under skip_page_table, even
    ones our op would reject (here: int64 tables)."""
    seed = _seed(gen)

    def build():
        v = scenarios.update("decode_swa", seed)
        v.update(skip_page_table=True, swa_out_cache_loc=None)
        v["page_table"] = v["page_table"].long()
        v["swa_page_table"] = v["swa_page_table"].long()
        return v

    run_both("update_trtllm_mha_graph_metadata", build, device, keywords=True)


# ---- fused_metadata_copy_cuda -------------------------------------------------------------
def _strided(t: torch.Tensor) -> torch.Tensor:
    """The same values, not contiguous (1-D: stride 2; 2-D: column-major)."""
    if t.dim() == 1:
        return torch.stack([t, torch.zeros_like(t)], 1).reshape(-1)[::2]
    return t.t().contiguous().t()


@pytest.mark.parametrize("name", sorted(scenarios.DSA))
def test_dsa_non_contiguous_sources(gen, name, device):
    """0.5.23 makes sources contiguous; the adapter reads them the same way."""
    seed = _seed(gen)

    def edit(v):
        for k in ("cu_seqlens_k_src", "page_indices_src", "dsa_cache_seqlens_src", "dsa_cu_seqlens_k_src",
                  "real_page_table_src"):
            if v[k] is not None:
                v[k] = _strided(v[k])
        assert not v["page_indices_src"].is_contiguous()

    run_both("fused_metadata_copy_cuda", lambda: scenarios.dsa_copy(name, seed), device, edit)


def test_dsa_larger_flashmla_metadata_destination(gen, device):
    seed = _seed(gen)

    def edit(v):
        v["flashmla_metadata_dst"] = torch.full((6, 8), 77, dtype=torch.int32)

    got = run_both("fused_metadata_copy_cuda", lambda: scenarios.dsa_copy("decode_real_flashmla", seed), device, edit)
    assert (got["flashmla_metadata_dst"].view(-1)[32:] == 77).all()


def test_dsa_unpaired_optionals_follow_their_source(gen, device):
    """0.5.23 copies the real table iff its source is given and FlashMLA iff
    flashmla_num_splits_src is: a lone destination (or metadata source) is ignored."""
    seed = _seed(gen)

    def edit(v):
        v["real_page_table_src"] = None
        v["flashmla_num_splits_src"] = None

    got = run_both("fused_metadata_copy_cuda", lambda: scenarios.dsa_copy("target_verify_real_flashmla", seed), device, edit)
    assert got["real_page_table_dst"] is not None


def test_dsa_decode_ignores_seqlens_expanded(gen, device):
    """DECODE never copies seqlens_expanded; SGLang passes the cache_seqlens
    buffers there (aliasing two destinations), and a missing or odd pair is fine too."""
    seed = _seed(gen)

    def edit(v):
        v["seqlens_expanded_src"] = None
        v["seqlens_expanded_dst"] = torch.zeros(3, dtype=torch.int32)

    run_both("fused_metadata_copy_cuda", lambda: scenarios.dsa_copy("decode_real", seed), device, edit)


@pytest.mark.parametrize("where", ["cache_seqlens_src", "cache_seqlens_dst"])
def test_dsa_dtype_error_uses_sglangs_wording(gen, where, device):
    """What SGLang's own dtype-validation test matches (source and destination)."""
    v = scenarios.dsa_copy("decode", _seed(gen))
    v[where] = v[where].long()
    v = to_device(v, device)
    with pytest.raises(RuntimeError, match="must have dtype int32") as err:
        adapters.fused_metadata_copy_cuda(*v.values())
    assert str(err.value).startswith(f"sgl_meta.fused_metadata_copy: {where} must have dtype int32 (torch.int32)")
    assert err.value.__context__ is None  # the op's own error, not a retry's


# ---- fused_metadata_copy_multi_cuda -------------------------------------------------------
@pytest.mark.parametrize("name", scenarios.DSA_MULTI)
def test_multi_non_contiguous_sources(gen, name, device):
    seed = _seed(gen)

    def edit(v):
        for k in ("cache_seqlens_src", "page_indices_src", "dsa_cu_seqlens_k_src", "real_page_table_src"):
            if v[k] is not None:
                v[k] = _strided(v[k])

    run_both("fused_metadata_copy_multi_cuda", lambda: scenarios.dsa_copy_multi(name, seed), device, edit)


def test_multi_real_table_needs_the_first_destination(gen, device):
    """0.5.23 copies the real table iff its source and real_page_table_dst0 are given."""
    seed = _seed(gen)

    def edit(v):
        v["real_page_table_dst0"] = None

    got = run_both("fused_metadata_copy_multi_cuda", lambda: scenarios.dsa_copy_multi("decode_real", seed), device, edit)
    assert got["real_page_table_dst1"] is not None


def test_multi_larger_flashmla_metadata_destinations(gen, device):
    seed = _seed(gen)

    def edit(v):
        for k in range(3):
            v[f"flashmla_metadata_dst{k}"] = torch.full((5, 8), 55, dtype=torch.int32)

    run_both("fused_metadata_copy_multi_cuda", lambda: scenarios.dsa_copy_multi("decode_real_flashmla", seed), device, edit)


def test_signatures_are_sglangs_parameter_lists():
    """The scenarios (and the adapters) list SGLang's parameters in order."""
    import inspect

    assert list(inspect.signature(adapters.fused_metadata_copy_cuda).parameters) == DSA_PARAMS
    assert list(inspect.signature(adapters.fused_metadata_copy_multi_cuda).parameters) == MULTI_PARAMS
