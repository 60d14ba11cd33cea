"""The hook tests' SGLang worlds run in a fresh interpreter (SGLang's modules are
stubbed or patched there, and the plugin must not load itself): this runs one and
returns the JSON report on its stdout's last line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import sgl_meta

HERE = Path(__file__).resolve().parent


def child_report(args: list, timeout: int = 900, **env_extra: str) -> dict:
    """``python <args>`` with this directory and sgl_meta importable, no plugin of
    SGLang's loading itself (the child applies the hooks it tests), ``env_extra``
    set; its report."""
    env = {k: v for k, v in os.environ.items() if k != "SGLANG_PLUGINS" and not k.endswith("_SGLANG_PLUGIN")}
    env.update(SGLMETA_SGLANG_PLUGIN="0", **env_extra)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(sgl_meta.__file__).resolve().parents[1]), str(HERE),
                                         env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        from helpers import skip_on_interpreter_defect  # (the parent's path; children import this module too)

        skip_on_interpreter_defect(done.stderr)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def module_child_report(module: str) -> dict:
    """The report of ``module``'s ``child_main()`` (a test module of this directory),
    run as :func:`child_report` runs it; skips the calling test where SGLang is not
    installed."""
    import pytest

    try:
        import sglang  # noqa: F401
    except ImportError as err:
        pytest.skip(f"sglang not installed ({err})")
    return child_report(["-c", f"import {module} as t; t.child_main()"])
