"""The plugin's own logic, without SGLang: the hook table's checks, the
switches, the one log line, and that sgl_meta never imports sglang."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import types

import pytest
import torch

from sgl_meta.sglang import plugin
from sgl_meta.sglang.hooks import HOOKS, CudaKernel, Hook, Keywords, Skip, load, signature_mismatch

HAS_CUDA_KERNELS = torch._C._dispatch_has_kernel_for_dispatch_key(
    "sgl_meta::update_trtllm_mha_graph_metadata", "CUDA"
)


# ---- signature_mismatch -------------------------------------------------------------------
def theirs(a, b, *, c, d=0, e=None):
    pass


def same(a, b, *, c, d=0, e=None):
    pass


def same_plus_optional(a, b, *, c, d=0, e=None, f=False):
    pass


def renamed(a, x, *, c, d=0, e=None):
    pass


def keyword_made_positional(a, b, c, d=0, e=None):
    pass


def other_default(a, b, *, c, d=1, e=None):
    pass


def dropped_default(a, b, *, c, d, e=None):
    pass


def extra_required(a, b, *, c, d=0, e=None, f):
    pass


def missing_last(a, b, *, c, d=0):
    pass


@pytest.mark.parametrize(
    "ours,why",
    [
        (same, None),
        (same_plus_optional, None),
        (renamed, "parameter 1 is positional or keyword 'b', ours positional or keyword 'x'"),
        (keyword_made_positional, "parameter 2 is keyword-only 'c', ours positional or keyword 'c'"),
        (other_default, "default of 'd' is 0, ours 1"),
        (dropped_default, "default of 'd'"),
        (extra_required, "ours requires parameter 'f'"),
        (missing_last, "ours lacks parameter 'e'"),
    ],
    ids=lambda v: getattr(v, "__name__", "why"),
)
def test_signature_mismatch(ours, why):
    got = signature_mismatch(theirs, ours)
    assert (got is None) if why is None else (got is not None and why in got), got


def around_same(original, a, b, *, c, d=0, e=None):
    pass


def test_signature_mismatch_around():
    """An AROUND hook takes SGLang's function first, then SGLang's parameters."""
    assert signature_mismatch(theirs, around_same, around=True) is None
    assert signature_mismatch(theirs, same, around=True) is not None


# ---- load / needs / check -----------------------------------------------------------------
@pytest.fixture
def fake_modules(tmp_path, monkeypatch):
    """Importable modules written for a test: an 'upstream' and 'ours' pair."""
    (tmp_path / "plug_upstream.py").write_text(textwrap.dedent("""
        def f(x, *, y=0):
            return "upstream"
    """))
    (tmp_path / "plug_ours.py").write_text(textwrap.dedent("""
        def f(x, *, y=0):
            return "ours"
        def g(x, *, y=1):
            return "ours"
    """))
    (tmp_path / "plug_broken.py").write_text("import plug_dependency_that_is_missing\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in ("plug_upstream", "plug_ours", "plug_broken"):
        sys.modules.pop(name, None)


def test_load_skips_what_this_sgl_meta_lacks():
    with pytest.raises(Skip, match="sgl_meta.not_a_module is not in this sgl-meta"):
        load("sgl_meta.not_a_module:f")
    with pytest.raises(Skip, match="sgl_meta.trtllm_mha_metadata.not_a_function is not in this sgl-meta"):
        load("sgl_meta.trtllm_mha_metadata:not_a_function")


def test_load_reports_a_broken_dependency_as_an_error(fake_modules):
    """A module of ours that exists but cannot import is a bug, not a missing row."""
    with pytest.raises(ModuleNotFoundError, match="plug_dependency_that_is_missing"):
        load("plug_broken:f")
    usable, skipped = plugin.plan((Hook("plug_upstream.f", "plug_broken:f"),))
    assert usable == [] and "ModuleNotFoundError" in skipped[0][1]


def test_keywords_need():
    assert Keywords("sgl_meta.trtllm_mha_metadata:update_trtllm_mha_graph_metadata", ("live_pages_only",)).missing() is None
    why = Keywords("sgl_meta.trtllm_mha_metadata:update_trtllm_mha_graph_metadata", ("no_such_flag",)).missing()
    assert why == "sgl_meta.trtllm_mha_metadata.update_trtllm_mha_graph_metadata does not take no_such_flag (older sgl-meta)"


def test_cuda_kernel_need():
    assert CudaKernel("no_such_op").missing() == "torch.ops.sgl_meta.no_such_op is not in this sgl-meta"
    why = CudaKernel("fused_metadata_copy").missing()
    assert (why is None) == HAS_CUDA_KERNELS, why
    assert CudaKernel("fused_metadata_copy").missing(cuda=False) is None  # the forced plugin


def test_check_order_and_reasons(fake_modules):
    ok = Hook("plug_upstream.f", "plug_ours:f")
    assert ok.check()(1) == "ours"
    with pytest.raises(Skip, match="not in this SGLang"):
        Hook("plug_upstream.no_such_function", "plug_ours:f").check()
    with pytest.raises(Skip, match="signature differs from ours: default of 'y' is 0, ours 1"):
        Hook("plug_upstream.f", "plug_ours:g").check()
    with pytest.raises(Skip, match="does not take"):
        Hook("plug_upstream.f", "plug_ours:f", (Keywords("plug_ours:f", ("z",)),)).check()
    # Ours is looked at first: a row whose drop-in is missing never imports SGLang's module.
    with pytest.raises(Skip, match="plug_missing is not in this sgl-meta"):
        Hook("module_that_must_not_be_imported.f", "plug_missing:f").check()
    assert "module_that_must_not_be_imported" not in sys.modules


def test_table_rows_are_well_formed():
    targets = [h.target for h in HOOKS]
    assert len(set(targets)) == len(targets), "one row per SGLang target"
    for hook in HOOKS:
        assert hook.target.startswith("sglang.") and hook.replacement.startswith("sgl_meta."), hook
        assert hook.kind in ("REPLACE", "AROUND"), hook
        module, _, attr = hook.replacement.partition(":")
        assert module and attr, hook.replacement


# ---- switches -----------------------------------------------------------------------------
@pytest.mark.parametrize("value", ["0", "off", "False", "no"])
def test_our_switch_off(monkeypatch, value):
    monkeypatch.setenv(plugin.ENV, value)
    assert plugin.inactive_reason() == f"SGL_META_SGLANG_PLUGIN={value}"


@pytest.mark.parametrize("value", ["bogus", "disble", "2"])
def test_unknown_switch_value_is_off(monkeypatch, value):
    """A typo in our switch keeps SGLang's kernels and says why."""
    monkeypatch.setenv(plugin.ENV, value)
    why = plugin.inactive_reason()
    assert why is not None and f"SGL_META_SGLANG_PLUGIN={value!r} is not one of" in why


def test_force_skips_the_cuda_check(monkeypatch):
    monkeypatch.setenv(plugin.ENV, "force")
    assert plugin.inactive_reason() is None


@pytest.mark.parametrize("value", [None, "1", "auto"])
def test_default_follows_the_build(monkeypatch, value):
    if value is None:
        monkeypatch.delenv(plugin.ENV, raising=False)
    else:
        monkeypatch.setenv(plugin.ENV, value)
    why = plugin.inactive_reason()
    assert (why is None) == HAS_CUDA_KERNELS, why
    if why:
        assert "no CUDA kernels" in why and "SGL_META_SGLANG_PLUGIN=force" in why


# ---- register() against a stand-in HookRegistry -------------------------------------------
@pytest.fixture
def registry(monkeypatch):
    """A stand-in for sglang.srt.plugins.hook_registry recording registrations."""
    calls = []

    class HookType:
        REPLACE = "replace"
        AROUND = "around"

    class HookRegistry:
        @classmethod
        def register(cls, target, hook, hook_type):
            calls.append((target, hook, hook_type))

    mod = types.ModuleType("sglang.srt.plugins.hook_registry")
    mod.HookRegistry, mod.HookType = HookRegistry, HookType
    for name in ("sglang", "sglang.srt", "sglang.srt.plugins"):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    monkeypatch.setitem(sys.modules, "sglang.srt.plugins.hook_registry", mod)
    return calls


def test_register_registers_usable_rows_and_says_so_once(fake_modules, registry, monkeypatch, capsys):
    monkeypatch.setenv(plugin.ENV, "force")
    monkeypatch.setattr(plugin, "HOOKS", (
        Hook("plug_upstream.f", "plug_ours:f"),
        Hook("plug_upstream.f2", "plug_ours:f"),
        Hook("plug_upstream.f3", "sgl_meta.not_yet:f"),
    ))
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    plugin.register()
    from plug_ours import f

    assert registry == [("plug_upstream.f", f, "replace")]
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("sgl-meta ") and "SGLang plugin: replaces SGLang's f; not hooked: " in lines[0]
    assert "f2 (not in this SGLang" in lines[0] and "f3 (sgl_meta.not_yet is not in this sgl-meta)" in lines[0]


def test_register_inactive_registers_nothing(registry, monkeypatch, capsys):
    monkeypatch.setenv(plugin.ENV, "0")
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    plugin.register()
    assert registry == []
    (line,) = capsys.readouterr().err.splitlines()
    assert "SGLang plugin: inactive, SGLang keeps its own kernels (SGL_META_SGLANG_PLUGIN=0)" in line


def test_announce_uses_logging_once_configured(caplog, capsys):
    with caplog.at_level(logging.INFO, logger="sgl_meta.sglang.plugin"):
        plugin.announce("sgl-meta test line")
    assert [r.getMessage() for r in caplog.records] == ["sgl-meta test line"]
    assert capsys.readouterr().err == ""


# ---- import hygiene -----------------------------------------------------------------------
def test_sgl_meta_never_imports_sglang():
    """``import sgl_meta`` (and the plugin's own modules) leave sglang unimported;
    run in a fresh interpreter, where nothing else could have imported it."""
    code = (
        "import sys, sgl_meta, sgl_meta.sglang, sgl_meta.sglang.hooks, sgl_meta.sglang.plugin, "
        "sgl_meta.sglang.adapters\n"
        "bad = sorted(m for m in sys.modules if m == 'sglang' or m.startswith('sglang.'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, env=_child_env())


def _child_env():
    import os

    import sgl_meta

    env = dict(os.environ)
    root = str(__import__("pathlib").Path(sgl_meta.__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join([root, env.get("PYTHONPATH", "")])
    return env
