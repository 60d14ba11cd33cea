"""README's quick start runs as pasted, prints what its comments say, and its check can fail."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sgl_meta.reference

ROOT = Path(__file__).resolve().parents[1]


def quick_start() -> str:
    """The first python block under README's "## Quick start" heading."""
    text = (ROOT / "README.md").read_text()
    section = text.split("\n## Quick start\n", 1)[1].split("\n## ", 1)[0]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


def expected_prints(code: str) -> list:
    """The values the block's print lines promise in their trailing comments."""
    return [line.split("#", 1)[1].strip() for line in code.splitlines() if line.startswith("print(")]


def test_quick_start_runs_as_pasted(tmp_path):
    code = quick_start()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               CUDA_VISIBLE_DEVICES="")
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    assert run.stdout.splitlines() == expected_prints(code)


def test_quick_start_check_catches_a_reference_that_writes_nothing(monkeypatch):
    """The outputs are compared with a reference that started from poison, so a
    reference (or op) that wrote nothing cannot pass."""
    monkeypatch.setattr(sgl_meta.reference, "update_trtllm_mha_graph_metadata", lambda **kw: None)
    with pytest.raises(AssertionError):
        exec(compile(quick_start(), "README.md", "exec"), {})
