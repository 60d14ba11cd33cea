"""What a user sees when the compiled extension is not where Python looks."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import sgl_meta


def test_an_unbuilt_source_tree_says_what_happened_and_what_to_do(tmp_path):
    # A checkout whose extension was never built in place, run from its root
    # (e.g. after `pip install .`): the source tree shadows any installed package.
    package = Path(sgl_meta.__file__).parent
    shutil.copytree(package, tmp_path / "sgl_meta", ignore=shutil.ignore_patterns("_C*.so", "__pycache__"))
    (tmp_path / "setup.py").write_text("")
    # -S with site-packages on the path: no .pth hooks, so an editable install
    # of this checkout cannot hand over its own extension.
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    done = subprocess.run([sys.executable, "-S", "-c", "import sgl_meta"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode != 0
    assert "ImportError: sgl_meta: the compiled extension sgl_meta/_C is missing" in done.stderr
    assert "shadows any installed sgl_meta" in done.stderr
    assert "partially initialized module" not in done.stderr
