"""Shared by the SGLang plugin tests: the hooks, their call sites in the
installed SGLang, and calling a function exactly as a call site does."""

from __future__ import annotations

import functools
import inspect

import pytest

import sglang_source
from sgl_meta.sglang.hooks import HOOKS, Hook, Skip, load

CURRENT = HOOKS[:4]
"""The rows of the first release (the TRT-LLM MHA and DSA copy ops): always usable."""


def hook_named(name: str) -> Hook:
    (hook,) = [h for h in HOOKS if h.target.endswith("." + name)]
    return hook


def require_sglang() -> None:
    why = sglang_source.why_not_installed()
    if why:
        pytest.skip(why)


def replacement_or_skip(hook: Hook):
    """Our replacement and its needs, or skip naming what is missing."""
    try:
        fn = load(hook.replacement)
    except Skip as why:
        pytest.skip(f"{hook.replacement}: {why} (the row activates when it lands)")
    for need in hook.needs:
        why = need.missing(cuda=False)  # CPU tensors need CPU kernels only
        if why:
            pytest.skip(f"{hook.replacement} needs {why}")
    return fn


@functools.lru_cache(maxsize=None)
def sites(target: str) -> tuple:
    return tuple(sglang_source.call_sites(target))


@functools.lru_cache(maxsize=None)
def upstream_signature(target: str) -> inspect.Signature:
    defn = sglang_source.find_definition(target)
    assert defn is not None, f"{target} is not defined in the installed SGLang"
    return sglang_source.signature_of(defn)


def call_as(site, signature: inspect.Signature, fn, values: dict) -> None:
    """``fn`` called with what ``site`` passes: its positional count (in the
    SGLang signature's order) and its keyword names, valued from ``values``."""
    names = list(signature.parameters)
    args = [values[p] for p in names[: site.positional]]
    kwargs = {k: values[k] for k in site.keywords}
    fn(*args, **kwargs)
