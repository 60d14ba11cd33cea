"""SGLang's own ``load_plugins()`` finds sgl-meta's entry point and applies its
hooks, in fresh interpreters (HookRegistry is process-global state).

Children run in parallel: the plugin forced on with the backends imported
before the plugins load; the default switch with the backends imported after;
our switch off (by its name, and by its old name); SGLang's allow-list without
us; and ``python -m sgl_meta.sglang`` (forced, by default, and with a package
SGLang imports made uninstallable).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest

import sgl_meta
import torch

import sglang_source
from sgl_meta import _build
from sgl_meta.sglang.hooks import HOOKS
from sglang_calls import CURRENT

CHILD = Path(__file__).with_name("load_plugins_child.py")
BY_NAME = {h.target.rsplit(".", 1)[-1]: h for h in HOOKS}
SWITCH = "SGLMETA_SGLANG_PLUGIN"
# pygments: a package SGLang's modules import (through IPython) that torch does not need.
WITHOUT_PYGMENTS = "import sys; sys.modules['pygments'] = None; from sgl_meta.sglang.__main__ import main; main()"
RUNS = {
    "forced": ([str(CHILD), "before"], {SWITCH: "force"}),
    "default": ([str(CHILD), "after"], {}),
    "ours_off": ([str(CHILD), "none"], {SWITCH: "0"}),
    "ours_off_old_name": ([str(CHILD), "none"], {"SGL_META_SGLANG_PLUGIN": "0"}),
    "not_allowed": ([str(CHILD), "none"], {"SGLANG_PLUGINS": "someone_else"}),
    "cli": (["-m", "sgl_meta.sglang"], {SWITCH: "force", "SGLANG_PLUGINS": "x,sgl_meta"}),
    "cli_default": (["-m", "sgl_meta.sglang"], {}),
    "cli_missing_dependency": (["-c", WITHOUT_PYGMENTS], {SWITCH: "force"}),
}
CLI_RUNS = ("cli", "cli_default", "cli_missing_dependency")


def why_cannot_run():
    why = sglang_source.why_not_installed()
    if why:
        return why
    eps = [ep for ep in metadata.entry_points(group="sglang.srt.plugins") if ep.name == "sgl_meta"]
    if not eps:
        return "sgl-meta is not pip-installed here (its entry point lives in the package metadata): pip install -e ."
    return None


@pytest.fixture(scope="module")
def runs():
    why = why_cannot_run()
    if why:
        pytest.skip(why)
    procs = {}
    for name, (argv, extra) in RUNS.items():
        env = {k: v for k, v in os.environ.items() if k != "SGLANG_PLUGINS" and not k.endswith("_SGLANG_PLUGIN")}
        env.update(extra)
        # This sgl_meta, not whichever copy is pip-installed (a script's sys.path[0] is its folder).
        env["PYTHONPATH"] = os.pathsep.join([str(Path(sgl_meta.__file__).resolve().parents[1]), env.get("PYTHONPATH", "")])
        procs[name] = subprocess.Popen(
            [sys.executable, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"{name}: child failed ({proc.returncode}):\n{stderr[-4000:]}"
        out[name] = (stdout if name in CLI_RUNS else json.loads(stdout.strip().splitlines()[-1]), stderr)
    return out


def our_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("sgl-meta ")]


def active_by_default() -> bool:
    return _build.cuda_kernels() and torch.cuda.is_available()


def usable(hook) -> bool:
    """Whether this sgl-meta can serve the row (its drop-in and API are here) and
    SGLang's module of it imports here."""
    from sgl_meta.sglang.hooks import Skip, load

    try:
        load(hook.replacement)
    except Skip:
        return False
    return all(n.missing(cuda=False) is None for n in hook.needs) and missing_dependency(hook) is None


def missing_dependency(hook):
    """Why SGLang's module of the row does not import here for want of a package it
    needs (flashattention_backend imports sgl_kernel, a CUDA-only package), or None."""
    from sgl_meta.sglang.hooks import Skip

    try:
        hook.original()
    except Skip as why:
        return str(why) if "which is not installed" in str(why) else None
    return None


def ours(hook) -> str:
    return hook.replacement.replace(":", ".")


def test_forced_plugin_hooks_every_row_it_can(runs):
    """Rows whose sgl-meta side is here are hooked, the others left alone; the
    four of the first release are always here."""
    report, stderr = runs["forced"]
    assert all(usable(h) for h in CURRENT)
    for hook in HOOKS:
        got = report["targets"][hook.target]
        if not usable(hook):
            assert not got.get("wrapped"), hook.target
            continue
        assert got == {**got, "wrapped": True, "calls": ours(hook)}, (hook.target, got)


def test_backend_module_copies_are_rewritten(runs):
    """trtllm_mha_backend did ``from X import Y`` before the plugins loaded:
    HookRegistry rewrote its copy; the DSA backend's function-level import
    binds the replacement."""
    for run in ("forced",) + (("default",) if active_by_default() else ()):
        report, _ = runs[run]
        for key, got in report["bindings"].items():
            hook = BY_NAME[key.rsplit(" ", 1)[-1].rsplit(".", 1)[-1]]
            assert got["calls"] == (ours(hook) if usable(hook) else None), (run, key, got)


def test_sglang_name_runs_our_kernel(runs):
    """SGLang's own name for the page-table builder, called on CPU tensors,
    runs our CPU kernel (0.5.23's Triton kernel cannot run without a GPU)."""
    report, _ = runs["forced"]
    assert report["cpu_call"] == [[16, 17, 18, -7], [12, -7, -7, -7]], report["cpu_call"]


def test_one_log_line_naming_what_it_replaced(runs):
    _, stderr = runs["forced"]
    lines = our_lines(stderr)
    assert len(lines) == 1, stderr[-3000:]
    assert "SGLang plugin: replaces SGLang's " in lines[0]
    line, _, where = lines[0].rpartition(" [sgl_meta from ")
    assert where.rstrip("]") == str(Path(sgl_meta.__file__).resolve().parent), lines[0]  # which copy is hooked
    done = line.split("SGLang plugin: ", 1)[1].split("; not hooked:")[0]
    said = {verb: names.split(", ") for verb, _, names in (part.partition(" SGLang's ") for part in done.split("; "))}
    assert said == {
        "replaces": [h.name for h in HOOKS if usable(h) and h.kind == "REPLACE"],
        "wraps": [h.name for h in HOOKS if usable(h) and h.kind == "AROUND"],
    }, lines[0]


def test_default_switch_follows_the_build(runs):
    report, stderr = runs["default"]
    lines = our_lines(stderr)
    assert len(lines) == 1, stderr[-3000:]
    wrapped = {t for t, d in report["targets"].items() if d.get("wrapped")}
    if active_by_default():
        assert "replaces" in lines[0], lines[0]
        assert wrapped == {h.target for h in HOOKS if usable(h)}
    else:
        why = "no CUDA device is visible" if _build.cuda_kernels() else "built without CUDA kernels"
        assert "inactive" in lines[0] and why in lines[0], lines[0]
        assert wrapped == set()


@pytest.mark.parametrize("run,name", [("ours_off", SWITCH), ("ours_off_old_name", "SGL_META_SGLANG_PLUGIN")])
def test_our_switch_turns_it_off(runs, run, name):
    """The switch, and its old name (with our warning naming the new one)."""
    report, stderr = runs[run]
    lines = our_lines(stderr)
    assert len(lines) == 1 and "inactive" in lines[0] and f"{name}=0" in lines[0], stderr[-3000:]
    assert not any(d.get("wrapped") for d in report["targets"].values())
    deprecated = f"{name} is deprecated, set {SWITCH} instead"
    assert (deprecated in stderr) == (name != SWITCH), stderr[-3000:]


def test_sglang_allow_list_turns_it_off(runs):
    report, stderr = runs["not_allowed"]
    assert our_lines(stderr) == [], stderr[-3000:]
    assert not any(d.get("wrapped") for d in report["targets"].values())


def test_every_target_resolves_in_installed_sglang(runs):
    """Every row's SGLang path exists (imported for real, not just read)."""
    report, _ = runs["not_allowed"]
    absent = {h.target for h in HOOKS if missing_dependency(h)}
    errors = {t: d["error"] for t, d in report["targets"].items() if "error" in d and t not in absent}
    assert not errors, errors


def test_cli_lists_every_row(runs):
    """``python -m sgl_meta.sglang`` says, per row, what the plugin would do."""
    stdout, _ = runs["cli"]
    lines = stdout.splitlines()
    # First which sgl_meta it is, then one line per row: REPLACE rows "replaces", AROUND rows "wraps".
    assert lines[0] == f"sgl-meta {sgl_meta.__version__} at {Path(sgl_meta.__file__).resolve().parent}", stdout
    # Forced: it says so first (the checks it skipped).
    assert lines[1] == (f"note: {SWITCH}=force: the hooks below apply without the check for CUDA kernels and a "
                        "visible GPU"), stdout
    lines = lines[2:]
    assert len(lines) == len(HOOKS), stdout
    for hook, line in zip(sorted(HOOKS, key=usable, reverse=True), lines):
        verb = hook.verb if usable(hook) else "keeps"
        assert line.startswith(f"{verb:<8} {hook.target}"), (line, hook.target)


def test_cli_by_default_says_why_it_would_not_hook_here(runs):
    """Unforced: without CUDA kernels it stops there; without a GPU it says so
    and still reports every row."""
    stdout, _ = runs["cli_default"]
    lines = stdout.splitlines()[1:]
    if not _build.cuda_kernels():
        assert lines == [f"inactive: sgl-meta was built without CUDA kernels; {SWITCH}=force hooks anyway"], stdout
        return
    if not torch.cuda.is_available():
        assert lines[0].startswith("note: inactive here, no CUDA device is visible"), stdout
        lines = lines[1:]
    assert len(lines) == len(HOOKS), stdout
    for hook, line in zip(sorted(HOOKS, key=usable, reverse=True), lines):
        assert line.startswith(("replaces ", "wraps ") if usable(hook) else "keeps "), (line, hook.target)


def test_cli_names_a_missing_dependency(runs):
    """A package SGLang's modules import is not installed: the rows say which
    and how to install it, not that the target is missing from SGLang."""
    stdout, _ = runs["cli_missing_dependency"]
    keeps = [line for line in stdout.splitlines() if line.startswith("keeps ")]
    assert keeps, stdout
    for line in keeps:
        assert "needs pygments, which is not installed (pip install \"sglang==0.5.23\"" in line, line
        assert "not in this SGLang" not in line, line
