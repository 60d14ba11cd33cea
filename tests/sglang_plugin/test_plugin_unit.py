"""The plugin's own logic, without SGLang: the hook table's checks, the
switches, the one log line, and that sgl_meta never imports sglang."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest
import torch

from sgl_meta import _build
from sgl_meta.sglang import __main__ as cli
from sgl_meta.sglang import plugin
from sgl_meta.sglang.hooks import HOOKS, CudaKernel, Hook, Keywords, Skip, load, signature_mismatch

HAS_CUDA_KERNELS = _build.cuda_kernels()
ACTIVE_BY_DEFAULT = HAS_CUDA_KERNELS and torch.cuda.is_available()


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
        g = h = f
    """))
    (tmp_path / "plug_ours.py").write_text(textwrap.dedent("""
        def f(x, *, y=0):
            return "ours"
        def g(x, *, y=1):
            return "ours"
        def around(original, x, *, y=0):
            return original(x, y=y)
    """))
    (tmp_path / "plug_broken.py").write_text("import plug_dependency_that_is_missing\n")
    (tmp_path / "plug_pkg").mkdir()
    (tmp_path / "plug_pkg" / "__init__.py").write_text("")
    (tmp_path / "plug_pkg" / "target.py").write_text("from plug_pkg import inner\ndef f(x, *, y=0):\n    pass\n")
    (tmp_path / "plug_pkg" / "inner.py").write_text("import plug_dependency_that_is_missing.sub\n")
    (tmp_path / "plug_pkg" / "fails.py").write_text("raise ImportError('cannot import name x from y')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield
    for name in ("plug_upstream", "plug_ours", "plug_broken", "plug_pkg", "plug_pkg.target", "plug_pkg.inner", "plug_pkg.fails"):
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


def test_cuda_kernel_need(monkeypatch):
    assert CudaKernel("no_such_op").missing() == "torch.ops.sgl_meta.no_such_op is not in this sgl-meta"
    why = CudaKernel("fused_metadata_copy").missing()
    assert (why is None) == HAS_CUDA_KERNELS, why
    assert CudaKernel("fused_metadata_copy").missing(cuda=False) is None  # the forced plugin
    # A CPU-only build registers the CUDA dispatch key too: the build's own answer decides.
    monkeypatch.setattr(_build, "cuda_kernels", lambda: False)
    assert CudaKernel("fused_metadata_copy").missing() == "sgl-meta was built without CUDA kernels"
    assert CudaKernel("fused_metadata_copy").missing(cuda=False) is None


def test_check_order_and_reasons(fake_modules):
    ok = Hook("plug_upstream.f", "plug_ours:f")
    assert ok.check()(1) == "ours"
    with pytest.raises(Skip, match="not in this SGLang"):
        Hook("plug_upstream.no_such_function", "plug_ours:f").check()
    with pytest.raises(Skip, match="signature differs from ours: default of 'y' is 0, ours 1"):
        Hook("plug_upstream.f", "plug_ours:g").check()
    with pytest.raises(Skip, match="does not take"):
        Hook("plug_upstream.f", "plug_ours:f", (Keywords("plug_ours:f", ("z",)),)).check()
    with pytest.raises(Skip, match="not in this SGLang"):
        Hook("plug_pkg.no_such_module.f", "plug_ours:f").check()
    # Ours is looked at first: a row whose drop-in is missing never imports SGLang's module.
    with pytest.raises(Skip, match="plug_missing is not in this sgl-meta"):
        Hook("module_that_must_not_be_imported.f", "plug_missing:f").check()
    assert "module_that_must_not_be_imported" not in sys.modules


@pytest.mark.parametrize("target,importer", [("plug_broken.f", "plug_broken"), ("plug_pkg.target.f", "plug_pkg.inner")])
def test_missing_dependency_is_not_a_missing_target(fake_modules, target, importer):
    """The target exists; a module it imports is not installed: say which, and
    how to install it (not "not in this SGLang")."""
    with pytest.raises(Skip) as err:
        Hook(target, "plug_ours:f").check()
    why = str(err.value)
    assert why.startswith(f"SGLang's module {importer} needs plug_dependency_that_is_missing, which is not installed ("), why
    assert 'pip install "sglang' in why and "docs/sglang.md" in why, why
    assert "not in this SGLang" not in why


def test_module_that_fails_to_import_is_not_a_missing_target(fake_modules):
    with pytest.raises(Skip, match=r"^SGLang's module plug_pkg.fails does not import here \(ImportError: cannot import"):
        Hook("plug_pkg.fails.f", "plug_ours:f").check()


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
    assert plugin.inactive_reason() == f"SGLMETA_SGLANG_PLUGIN={value}"


@pytest.mark.parametrize("value", ["bogus", "disble", "2"])
def test_unknown_switch_value_is_off(monkeypatch, value):
    """A typo in our switch keeps SGLang's kernels and says why."""
    monkeypatch.setenv(plugin.ENV, value)
    why = plugin.inactive_reason()
    assert why is not None and f"SGLMETA_SGLANG_PLUGIN={value!r} is not one of" in why


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
    assert (why is None) == ACTIVE_BY_DEFAULT, why
    if why:
        assert ("built without CUDA kernels" in why or "no CUDA device" in why) and "SGLMETA_SGLANG_PLUGIN=force" in why


def test_build_without_cuda_kernels_is_inactive(registry, monkeypatch, capsys):
    """A CPU-only build does nothing and says why: in SGLang's log and in
    ``python -m sgl_meta.sglang`` (which then looks at no SGLang module)."""
    monkeypatch.delenv(plugin.ENV, raising=False)
    monkeypatch.setattr(_build, "cuda_kernels", lambda: False)
    want = "sgl-meta was built without CUDA kernels; SGLMETA_SGLANG_PLUGIN=force hooks anyway"
    assert plugin.inactive_reason() == want
    assert plugin.inactive_reason(device=False) == want
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    plugin.register()
    assert registry == []
    (line,) = capsys.readouterr().err.splitlines()
    assert f"SGLang plugin: inactive, SGLang keeps its own kernels ({want})" in line
    cli.main()
    assert capsys.readouterr().out.splitlines()[1:] == [f"inactive: {want}"]


@pytest.mark.parametrize("value, names", [("", None), ("x, sgl_meta", {"x", "sgl_meta"}), ("  ", set()),
                                          (",sgl_meta,", {"sgl_meta"})])
def test_report_reads_sglang_plugins_as_sglang_does(value, names, monkeypatch, capsys):
    """SGLang strips the names and drops empty ones; an empty value allows every
    plugin, one of spaces none. The report says so without looking further."""
    assert cli.allowed_plugins(value) == names
    if names is None or "sgl_meta" in names:
        return
    monkeypatch.setenv("SGLANG_PLUGINS", value)
    cli.main()
    assert "inactive: SGLANG_PLUGINS does not name sgl_meta" in capsys.readouterr().out


def test_without_sglang_the_report_is_one_line(monkeypatch, capsys):
    """``python -m sgl_meta.sglang`` where SGLang is not installed: one line
    saying so, not a row per hook each failing its import."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.delenv(plugin.ENV, raising=False)
    monkeypatch.setattr(_build, "cuda_kernels", lambda: True)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sglang" else real(name, *a))
    monkeypatch.delitem(sys.modules, "sglang", raising=False)
    assert plugin.inactive_reason(device=False) == "sglang is not installed"
    cli.main()
    assert capsys.readouterr().out.splitlines()[1:] == ["inactive: sglang is not installed"]


def test_no_visible_gpu_is_inactive(monkeypatch):
    """CUDA kernels but no GPU: inactive; the report (``device=False``) goes on."""
    monkeypatch.delenv(plugin.ENV, raising=False)
    monkeypatch.setattr(_build, "cuda_kernels", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert plugin.inactive_reason() == (
        "no CUDA device is visible (torch.cuda.is_available() is False); SGLMETA_SGLANG_PLUGIN=force hooks anyway"
    )
    assert plugin.inactive_reason(device=False) is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert plugin.inactive_reason() is None


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


def test_log_line_says_replaces_and_wraps(fake_modules, registry, monkeypatch, capsys):
    """REPLACE rows are "replaced", AROUND rows (ours calls SGLang's) "wrapped"."""
    monkeypatch.setenv(plugin.ENV, "force")
    monkeypatch.setattr(plugin, "HOOKS", (
        Hook("plug_upstream.f", "plug_ours:f"),
        Hook("plug_upstream.g", "plug_ours:around", kind="AROUND"),
        Hook("plug_upstream.h", "plug_ours:f"),
    ))
    (line,) = _register_line(monkeypatch, capsys)
    assert ": replaces SGLang's f, h; wraps SGLang's g [sgl_meta from " in line, line
    assert [kind for _, _, kind in registry] == ["replace", "around", "replace"]
    monkeypatch.setattr(plugin, "HOOKS", (Hook("plug_upstream.g", "plug_ours:around", kind="AROUND"),))
    (line,) = _register_line(monkeypatch, capsys)
    assert ": wraps SGLang's g [sgl_meta from " in line and "replaces" not in line, line


@pytest.mark.parametrize("doc", ["README.md", "docs/sglang.md"])
def test_documented_log_line_names_every_hook(doc):
    """The line the docs quote is the one a build whose every hook applies prints."""
    text = (Path(__file__).parents[2] / doc).read_text()
    quoted = [line.split(" SGLang plugin: ", 1)[1].rpartition(" [sgl_meta from ")[0] for line in text.splitlines()
              if line.startswith("sgl-meta ") and " SGLang plugin: replaces " in line]
    replaces = ", ".join(h.name for h in HOOKS if h.kind == "REPLACE")
    wraps = ", ".join(h.name for h in HOOKS if h.kind == "AROUND")
    assert quoted == [f"replaces SGLang's {replaces}; wraps SGLang's {wraps}"], doc


def _register_line(monkeypatch, capsys) -> list[str]:
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    plugin.register()
    return capsys.readouterr().err.splitlines()


def test_register_inactive_registers_nothing(registry, monkeypatch, capsys):
    monkeypatch.setenv(plugin.ENV, "0")
    monkeypatch.setattr(logging.getLogger(), "handlers", [])
    plugin.register()
    assert registry == []
    (line,) = capsys.readouterr().err.splitlines()
    assert "SGLang plugin: inactive, SGLang keeps its own kernels (SGLMETA_SGLANG_PLUGIN=0)" in line


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


def test_a_missing_gpu_library_is_not_sent_to_the_cpu_only_set():
    """sgl_kernel & co. are not in the CPU-only set: the hint must not promise them."""
    from sgl_meta.sglang.hooks import import_failure

    err = ModuleNotFoundError("No module named 'sgl_kernel'", name="sgl_kernel")
    why = import_failure(err)
    assert "needs sgl_kernel, which is not installed (a GPU library of SGLang's" in why, why
    assert 'pip install "sglang' not in why, why


def _registry_wrapper(original, hook):
    """A wrapper as HookRegistry's _wrap_fn makes one for an AROUND hook."""
    import functools

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        return hook(original, *args, **kwargs)

    wrapper.__wrapped__ = original
    return wrapper


def test_another_plugins_hook_inside_ours_runs_instead_of_ours(caplog):
    from sgl_meta.sglang.hooks import deferring, hook_of

    calls = []

    def sglangs(self, x):
        calls.append(("sglang", x))

    def theirs(original, self, x):  # another plugin's AROUND hook, registered before ours
        calls.append(("theirs", x))
        return original(self, x + 1)

    def ours(original, self, x):
        calls.append(("ours", x))

    registered = deferring(ours, "Backend.method")
    _registry_wrapper(sglangs, registered)(None, 1)  # SGLang's own function inside: ours runs
    assert calls == [("ours", 1)]
    calls.clear()
    with caplog.at_level(logging.WARNING, logger="sgl_meta.sglang.hooks"):
        for x in (1, 5):
            _registry_wrapper(_registry_wrapper(sglangs, theirs), registered)(None, x)
    assert calls == [("theirs", 1), ("sglang", 2), ("theirs", 5), ("sglang", 6)]
    assert [r.getMessage() for r in caplog.records] == [  # once
        "sgl-meta: another plugin's hook on SGLang's Backend.method sits inside ours: its chain runs, ours does not"]
    assert hook_of(_registry_wrapper(sglangs, registered)) is ours  # our identity checks see our function


def test_the_plugin_registers_its_around_hooks_deferring(monkeypatch):
    from sgl_meta.sglang import plugin

    registered = []
    fake = types.SimpleNamespace(HookRegistry=types.SimpleNamespace(register=lambda t, fn, kind: registered.append(
        (t, fn, kind))), HookType=types.SimpleNamespace(REPLACE="REPLACE", AROUND="AROUND"))
    monkeypatch.setitem(sys.modules, "sglang.srt.plugins.hook_registry", fake)
    rows = [h for h in plugin.HOOKS if h.kind == "AROUND"][:1] + [h for h in plugin.HOOKS if h.kind == "REPLACE"][:1]
    monkeypatch.setattr(plugin, "plan", lambda: ([(h, object()) for h in rows], []))
    plugin._hook()
    assert [getattr(fn, "defers_to_inner_hooks", False) for _, fn, _ in registered] == [True, False]


@pytest.mark.parametrize("argv, code", [(["--help"], 0), (["--bogus"], 2), (["sglang"], 2)])
def test_report_takes_no_options(argv, code, capsys):
    """``--help`` prints what the report is; anything else is refused, not ignored."""
    with pytest.raises(SystemExit) as e:
        cli.main(argv)
    assert e.value.code == code
    out = capsys.readouterr()
    assert ("what the SGLang plugin would do" in out.out) if code == 0 else ("unrecognized arguments" in out.err)
