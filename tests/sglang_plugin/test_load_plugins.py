"""SGLang's own ``load_plugins()`` finds sgl-meta's entry point and applies its
hooks, in fresh interpreters (HookRegistry is process-global state).

Four children, run in parallel: the plugin forced on with the backends imported
before the plugins load; the default switch with the backends imported after;
our switch off; and SGLang's allow-list without us.
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
from sgl_meta.sglang.hooks import HOOKS
from sglang_calls import CURRENT

CHILD = Path(__file__).with_name("load_plugins_child.py")
BY_NAME = {h.target.rsplit(".", 1)[-1]: h for h in HOOKS}
RUNS = {
    "forced": ([str(CHILD), "before"], {"SGL_META_SGLANG_PLUGIN": "force"}),
    "default": ([str(CHILD), "after"], {}),
    "ours_off": ([str(CHILD), "none"], {"SGL_META_SGLANG_PLUGIN": "0"}),
    "not_allowed": ([str(CHILD), "none"], {"SGLANG_PLUGINS": "someone_else"}),
    "cli": (["-m", "sgl_meta.sglang"], {"SGL_META_SGLANG_PLUGIN": "force", "SGLANG_PLUGINS": "x,sgl_meta"}),
}


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
        env = {k: v for k, v in os.environ.items() if k not in ("SGL_META_SGLANG_PLUGIN", "SGLANG_PLUGINS")}
        env.update(extra)
        procs[name] = subprocess.Popen(
            [sys.executable, *argv], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=900)
        assert proc.returncode == 0, f"{name}: child failed ({proc.returncode}):\n{stderr[-4000:]}"
        out[name] = (stdout if name == "cli" else json.loads(stdout.strip().splitlines()[-1]), stderr)
    return out


def our_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("sgl-meta ")]


def has_cuda_kernels() -> bool:
    return torch._C._dispatch_has_kernel_for_dispatch_key("sgl_meta::update_trtllm_mha_graph_metadata", "CUDA")


def usable(hook) -> bool:
    """Whether this sgl-meta can serve the row (its drop-in and API are here)."""
    from sgl_meta.sglang.hooks import Skip, load

    try:
        load(hook.replacement)
    except Skip:
        return False
    return all(n.missing(cuda=False) is None for n in hook.needs)


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
            assert not got["wrapped"], hook.target
            continue
        assert got == {**got, "wrapped": True, "calls": ours(hook)}, (hook.target, got)


def test_backend_module_copies_are_rewritten(runs):
    """trtllm_mha_backend did ``from X import Y`` before the plugins loaded:
    HookRegistry rewrote its copy; the DSA backend's function-level import
    binds the replacement."""
    for run in ("forced",) + (("default",) if has_cuda_kernels() else ()):
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
    replaced = line.split("replaces SGLang's ", 1)[1].split("; not hooked:")[0].split(", ")
    assert replaced == [h.name for h in HOOKS if usable(h)], lines[0]


def test_default_switch_follows_the_build(runs):
    report, stderr = runs["default"]
    lines = our_lines(stderr)
    assert len(lines) == 1, stderr[-3000:]
    wrapped = {t for t, d in report["targets"].items() if d.get("wrapped")}
    if has_cuda_kernels():
        assert "replaces" in lines[0], lines[0]
        assert wrapped == {h.target for h in HOOKS if usable(h)}
    else:
        assert "inactive" in lines[0] and "no CUDA kernels" in lines[0], lines[0]
        assert wrapped == set()


def test_our_switch_turns_it_off(runs):
    report, stderr = runs["ours_off"]
    lines = our_lines(stderr)
    assert len(lines) == 1 and "inactive" in lines[0] and "SGL_META_SGLANG_PLUGIN=0" in lines[0], stderr[-3000:]
    assert not any(d.get("wrapped") for d in report["targets"].values())


def test_sglang_allow_list_turns_it_off(runs):
    report, stderr = runs["not_allowed"]
    assert our_lines(stderr) == [], stderr[-3000:]
    assert not any(d.get("wrapped") for d in report["targets"].values())


def test_every_target_resolves_in_installed_sglang(runs):
    """Every row's SGLang path exists (imported for real, not just read)."""
    report, _ = runs["not_allowed"]
    errors = {t: d["error"] for t, d in report["targets"].items() if "error" in d}
    assert not errors, errors


def test_cli_lists_every_row(runs):
    """``python -m sgl_meta.sglang`` says, per row, what the plugin would do."""
    stdout, _ = runs["cli"]
    lines = stdout.splitlines()
    # First which sgl_meta it is (and, without a GPU, a note saying so), then one line per row.
    assert lines[0] == f"sgl-meta {sgl_meta.__version__} at {Path(sgl_meta.__file__).resolve().parent}", stdout
    if not torch.cuda.is_available():
        assert lines[1].startswith("note: no CUDA device is visible here"), stdout
    lines = [line for line in lines if line.startswith(("replaces ", "keeps "))]
    assert len(lines) == len(HOOKS), stdout
    for hook, line in zip(sorted(HOOKS, key=usable, reverse=True), lines):
        verb = "replaces" if usable(hook) else "keeps   "
        assert line.startswith(f"{verb} {hook.target}"), (line, hook.target)
