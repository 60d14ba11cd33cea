"""Our replacements, called the way SGLang 0.5.23's call sites call them, give
0.5.23's results element for element (upstream_model.py, run on CPU), and leave
every element 0.5.23 leaves alone: on CPU tensors, and on CUDA tensors (gpu)."""

from __future__ import annotations

import pytest
import torch

import scenarios
import upstream_model
from sglang_calls import call_as, hook_named, replacement_or_skip, require_sglang, sites, upstream_signature

CASES = [
    ("update_trtllm_mha_graph_metadata", scenarios.update, sorted(scenarios.UPDATE), (1, 16, 64)),
    ("build_trtllm_mha_page_table", scenarios.page_table, scenarios.PAGE_TABLE, (1, 16, 64)),
    ("fused_metadata_copy_cuda", scenarios.dsa_copy, sorted(scenarios.DSA), (None,)),
    ("fused_metadata_copy_multi_cuda", scenarios.dsa_copy_multi, scenarios.DSA_MULTI, (None,)),
]
PARAMS = [
    pytest.param(fn, make, name, ps, id=f"{fn}-{name}" + ("" if ps is None else f"-ps{ps}"))
    for fn, make, names, sizes in CASES
    for name in names
    for ps in sizes
]


def _build(make, name, seed, ps):
    return make(name, seed) if ps is None else make(name, seed, page_size=ps)


def to_device(values: dict, device: str) -> dict:
    """The same arguments on `device`, aliases kept (one copy per tensor)."""
    moved: dict[int, torch.Tensor] = {}
    out = {}
    for k, v in values.items():
        if isinstance(v, torch.Tensor):
            v = moved.setdefault(id(v), v.to(device))
        out[k] = v
    return out


def assert_same_tensors(got: dict, want: dict, context: str) -> None:
    for key, w in want.items():
        if not isinstance(w, torch.Tensor):
            continue
        g = got[key].cpu()
        if not torch.equal(g, w):
            where = (g != w).nonzero()[0].tolist()
            raise AssertionError(
                f"{context}: {key} differs from 0.5.23 at {len(where) and tuple(where)}: "
                f"ours {g[tuple(where)].item()}, 0.5.23 {w[tuple(where)].item()}"
            )


def applies(site, signature, values: dict) -> bool:
    """The scenario is one this call site can make: every parameter the site
    leaves out keeps its default there."""
    passed = set(list(signature.parameters)[: site.positional]) | set(site.keywords)
    for p in signature.parameters.values():
        if p.name not in passed:
            v = values[p.name]
            if p.default is p.empty or not (v is p.default or (not isinstance(v, torch.Tensor) and v == p.default)):
                return False
    return True


@pytest.mark.parametrize("fn_name,make,name,ps", PARAMS)
def test_matches_0_5_23_at_every_call_site(fn_name, make, name, ps, gen, device):
    require_sglang()
    hook = hook_named(fn_name)
    ours = replacement_or_skip(hook)
    model = getattr(upstream_model, fn_name)
    signature = upstream_signature(hook.target)
    found = sites(hook.target)
    assert found, f"no call site of {hook.target} found in the installed SGLang"
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    values = _build(make, name, seed, ps)
    usable = [s for s in found if applies(s, signature, values)]
    assert usable, f"scenario {name} matches none of SGLang's calls: {[str(s) for s in found]}"
    for site in usable:
        want, got = _build(make, name, seed, ps), to_device(_build(make, name, seed, ps), device)
        call_as(site, signature, model, want)
        call_as(site, signature, ours, got)
        assert_same_tensors(got, want, f"{site}, scenario {name}")
