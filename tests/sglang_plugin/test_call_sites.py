"""Every hook's SGLang target exists in the installed 0.5.23, has the signature
our replacement was written for, and every call SGLang makes of it (read from
its source with ast) binds to our replacement."""

from __future__ import annotations

import pytest

from sgl_meta.sglang.hooks import HOOKS, signature_mismatch
from sglang_calls import replacement_or_skip, require_sglang, sites, upstream_signature

IDS = [h.target.rsplit(".", 1)[-1] for h in HOOKS]


@pytest.mark.parametrize("hook", HOOKS, ids=IDS)
def test_target_is_defined_in_installed_sglang(hook):
    require_sglang()
    upstream_signature(hook.target)  # asserts the def is there


@pytest.mark.parametrize("hook", HOOKS, ids=IDS)
def test_signature_is_the_one_ours_takes(hook):
    require_sglang()
    ours = replacement_or_skip(hook)
    theirs = upstream_signature(hook.target)
    why = signature_mismatch(_fake(theirs), ours, around=hook.kind == "AROUND")
    assert why is None, f"{hook.target}: {why}"


@pytest.mark.parametrize("hook", [h for h in HOOKS if h.kind == "AROUND"],
                         ids=[i for h, i in zip(HOOKS, IDS) if h.kind == "AROUND"])
def test_around_target_has_no_decorator(hook):
    """The plugin registers AROUND hooks through hooks.deferring, which reads a ``__wrapped__``
    on SGLang's function as another plugin's wrapper inside ours: a decorator of SGLang's own
    (functools.wraps sets it) would turn the hook off."""
    require_sglang()
    from sglang_source import find_definition

    assert find_definition(hook.target).node.decorator_list == [], hook.target


def _fake(signature):
    def f(*args, **kwargs):
        pass

    f.__signature__ = signature
    return f


@pytest.mark.parametrize("hook", HOOKS, ids=IDS)
def test_sglang_calls_it(hook):
    """Guards the binding test below against passing on zero call sites."""
    require_sglang()
    assert sites(hook.target), f"no call of {hook.target} found in the installed SGLang"


@pytest.mark.parametrize("hook", HOOKS, ids=IDS)
def test_every_call_site_binds_to_ours(hook):
    require_sglang()
    ours = replacement_or_skip(hook)
    import inspect

    signature = inspect.signature(ours)
    extra = 1 if hook.kind == "AROUND" else 0  # an AROUND hook gets SGLang's function first
    takes_kwargs = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    for site in sites(hook.target):
        # **kwargs passed on binds to ours only if ours takes **kwargs; *args cannot be checked statically
        assert not site.unpacked or (site.kwargs_only and takes_kwargs), f"{site}: unpacked arguments ours may not take"
        try:
            signature.bind(*range(site.positional + extra), **{k: None for k in site.keywords})
        except TypeError as err:
            raise AssertionError(f"{site}: {err}") from None
