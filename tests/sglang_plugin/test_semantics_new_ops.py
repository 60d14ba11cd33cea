"""The rows whose drop-ins came with the DSA-generation and KV-read-table ops,
called the way SGLang 0.5.23 calls them:

* ``build_kv_read_table`` / ``_packed``: against 0.5.23's own CPU path of the
  same functions (plain torch code in its ``kv_read_table.py``, loaded by path
  from the installed package, no Triton launched);
* the three DSA generators: against ``sgl_meta.reference`` (their eager
  0.5.23 semantics, which tests/test_dsa_metadata.py checks against an
  independent model of 0.5.23's kernels, tests/dsa_metadata_upstream_model.py).
"""

from __future__ import annotations

import importlib.util
import inspect

import pytest
import torch

import sglang_source
from sglang_calls import call_as, hook_named, replacement_or_skip, require_sglang, sites, upstream_signature
from test_semantics import applies, assert_same_tensors, to_device


# ---- KV read tables -----------------------------------------------------------------------
def upstream_kv_read_table():
    """0.5.23's kv_read_table.py as a module (it imports only torch and triton)."""
    path = sglang_source.sglang_root() / "kernels" / "ops" / "kvcache" / "kv_read_table.py"
    spec = importlib.util.spec_from_file_location("_sglang_0_5_23_kv_read_table", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def kv_values(seed: int, packed: bool, delta: int, start: bool, out_dtype=torch.int32) -> dict:
    """A unified pool: virtual slots (some -1), v2p with freed (-1) rows."""
    g = torch.Generator().manual_seed(seed)
    ps, bs, pool, ctx, vpages = 4, 5, 7, 48, 40

    def ints(lo, hi, shape, dtype=torch.int64):
        return torch.randint(lo, hi, shape, generator=g, dtype=torch.int64).to(dtype)

    r2t = ints(0, vpages * ps, (pool, ctx), torch.int32)
    r2t[ints(0, pool, (6,)), ints(0, ctx, (6,))] = -1
    v2p = ints(0, 100, (vpages,))
    v2p[ints(0, vpages, (5,))] = -1
    seq_lens = ints(0, ctx - 8, (bs,))
    seq_lens[0] = 0
    values = dict(req_to_token=r2t, req_pool_indices=ints(0, pool, (bs,)), seq_lens=seq_lens, v2p=v2p, page_size=ps)
    if packed:
        starts = ints(0, 8, (bs,)) if start else None
        indptr = torch.nn.functional.pad(seq_lens.cumsum(0), (1, 0)).to(torch.int32)
        total = int(indptr[-1]) + 6
        values.update(indptr=indptr, max_tokens=total, out=ints(-(2**31), 2**31 - 1, (total,), out_dtype),
                      kv_start_idx=starts)
    else:
        max_pages = (ctx - 1) // ps
        values.update(max_pages=max_pages, out=ints(-(2**31), 2**31 - 1, (bs + 2, max_pages + 3), torch.int32),
                      seq_len_delta=delta, zero_tail=bool(delta % 2))
    return values


KV_CASES = [
    pytest.param("build_kv_read_table", dict(packed=False, delta=d, start=False), id=f"table-delta{d}")
    for d in (0, 3)
] + [
    pytest.param("build_kv_read_table_packed", dict(packed=True, delta=0, start=s, out_dtype=dt),
                 id=f"packed-{'start' if s else 'nostart'}-{str(dt)[6:]}")
    for s in (False, True)
    for dt in (torch.int32, torch.int64)
]


@pytest.mark.parametrize("fn_name,opts", KV_CASES)
def test_kv_read_tables_match_0_5_23s_own_cpu_path(fn_name, opts, gen, device):
    require_sglang()
    hook = hook_named(fn_name)
    ours = replacement_or_skip(hook)
    theirs = getattr(upstream_kv_read_table(), fn_name)
    signature = upstream_signature(hook.target)
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    found = sites(hook.target)
    assert found, hook.target
    for site in found:
        want, got = kv_values(seed, **opts), to_device(kv_values(seed, **opts), device)
        assert applies(site, signature, want), site
        call_as(site, signature, theirs, want)
        call_as(site, signature, ours, got)
        assert_same_tensors(got, want, f"{site}, {fn_name} {opts}")


# ---- DSA metadata generators --------------------------------------------------------------
DSA_GEN = {
    "fused_dsa_decode_metadata": 0,
    "fused_dsa_target_verify_metadata": 1,
    "fused_dsa_draft_extend_metadata": 2,
}


def dsa_values(name: str, gen: torch.Generator, paged: bool) -> dict:
    """One destination set as SGLang's DSA backend passes it (dsa_metadata_cases.make_case)."""
    from dsa_metadata_cases import GenCase, make_case

    mode = DSA_GEN[name]
    case = GenCase(mode=mode, bs=6, width=90, page_size=4, paged_mqa=paged,
                   total="static" if mode == 2 else "sum")  # SGLang's draft extend: static lengths
    inputs, (dests,), scalars = make_case(case, gen, "cpu")
    total = scalars["total_len"] or 0
    values = dict(inputs, **dests, bs=case.bs, max_len=case.width, max_seqlen_k=case.width,
                  dsa_index_topk=case.topk, physical_page_size=case.page_size, next_n=case.next_n,
                  total_len=total, max_extend_len=case.next_n, max_total_len=max(total, 1),
                  static_extend_len=scalars["static_extend_len"])
    return values


def _clone(values: dict) -> dict:
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in values.items()}


@pytest.mark.parametrize("paged", [True, False], ids=["paged_mqa", "no_paged_mqa"])
@pytest.mark.parametrize("name", sorted(DSA_GEN))
def test_dsa_generators_match_the_reference_at_every_call_site(name, paged, gen, device):
    require_sglang()
    hook = hook_named(name)
    ours = replacement_or_skip(hook)
    from sgl_meta import reference

    signature = upstream_signature(hook.target)
    values = dsa_values(name, gen, paged)
    if "paged_mqa_ctx_lens_2d" not in inspect.signature(ours).parameters:
        values.pop("paged_mqa_ctx_lens_2d", None)
    usable = [s for s in sites(hook.target) if applies(s, signature, values)]
    if not usable:
        pytest.skip(f"no 0.5.23 call of {name} passes this combination (paged_mqa_ctx_lens_2d={paged})")
    for site in usable:
        want, got = _clone(values), to_device(_clone(values), device)
        call_as(site, signature, getattr(reference, name), want)
        call_as(site, signature, ours, got)
        assert_same_tensors(got, want, f"{site}, {name}")
