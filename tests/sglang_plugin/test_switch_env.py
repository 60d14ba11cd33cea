"""Our switch's name: ``SGLMETA_SGLANG_PLUGIN``, which SGLang leaves alone; the
old spellings still work, with our warning naming the new one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings

import pytest

import sglang_source
from sgl_meta import _env
from sgl_meta.sglang import plugin

NEW, OLD, SGLANG_SPELLING = "SGLMETA_SGLANG_PLUGIN", "SGL_META_SGLANG_PLUGIN", "SGLANG_META_SGLANG_PLUGIN"


@pytest.fixture
def clean_env(monkeypatch):
    for name in (NEW, OLD, SGLANG_SPELLING):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_new_name(clean_env):
    clean_env.setenv(NEW, "0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert plugin.inactive_reason() == f"{NEW}=0"


@pytest.mark.parametrize("old", [OLD, SGLANG_SPELLING])
def test_old_names_still_work_and_say_the_new_one(clean_env, old):
    """``SGL_META_`` (before the rename) and ``SGLANG_META_`` (where SGLang's own
    warning sends a user of the old name)."""
    clean_env.setenv(old, "off")
    with pytest.warns(FutureWarning) as record:
        assert plugin.inactive_reason() == f"{old}=off"
    assert {str(w.message) for w in record} == {f"{old} is deprecated, set {NEW} instead"}


def test_new_name_wins(clean_env):
    clean_env.setenv(OLD, "0")
    clean_env.setenv(NEW, "force")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _env.lookup("SGLANG_PLUGIN") == (NEW, "force")
        assert plugin.inactive_reason() is None


def test_unset(clean_env):
    assert _env.lookup("SGLANG_PLUGIN") is None


SGLANG_ENVIRON = """
import json, os, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    import sglang.srt.environ  # renames SGL_* variables at import, warning for each
print(json.dumps({"warnings": [str(w.message) for w in caught], "env": sorted(os.environ)}))
"""


def sglang_environ(name: str) -> dict:
    """SGLang's own env-var handling, in a fresh interpreter with ``name=0`` set."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGL_", "SGLMETA_", "SGLANG_META_"))}
    env[name] = "0"
    out = subprocess.run([sys.executable, "-c", SGLANG_ENVIRON], env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", [NEW, OLD])
def test_sglang_leaves_our_name_alone(name):
    """With the new name SGLang warns about nothing of ours and copies nothing;
    with the old one it does both (so this test would see a warning)."""
    why = sglang_source.why_not_installed()
    if why:
        pytest.skip(why)
    got = sglang_environ(name)
    ours = [w for w in got["warnings"] if "META" in w]
    renamed = [k for k in got["env"] if k.startswith("SGLANG_META_")]
    if name == NEW:
        assert ours == [] and renamed == [], got["warnings"]
    else:
        assert ours == [f"Environment variable {OLD} is deprecated, please use {SGLANG_SPELLING}"], got["warnings"]
        assert renamed == [SGLANG_SPELLING]
