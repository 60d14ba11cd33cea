"""Where the vLLM plugin tests find vLLM 0.33.0: the installed package (the
overlay venv of scripts/setup_vllm_env.sh) for the child processes, the sdist's
tests for the GPU run, and sgl-meta's entry point for vLLM's loader."""

from __future__ import annotations

import importlib.util
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Optional

import sgl_meta

WANTED_VERSION = "0.33.0"
SETUP = "scripts/setup_vllm_env.sh, then run these tests with .venv-vllm/bin/python -m pytest tests/vllm_plugin"
REPO = Path(sgl_meta.__file__).resolve().parents[1]


def why_not_installed() -> Optional[str]:
    """Why vLLM 0.33.0 cannot be imported here, or None (cheap: no import)."""
    if importlib.util.find_spec("vllm") is None:
        return f"vllm=={WANTED_VERSION} is not importable in this interpreter ({SETUP})"
    try:
        version = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return f"vllm has no package metadata here ({SETUP})"
    if version != WANTED_VERSION:
        return f"installed vllm is {version}; these tests are written for {WANTED_VERSION}"
    return None


def sdist_tests() -> Optional[Path]:
    """vLLM 0.33.0's unpacked sdist (its tests/), ``$SGLMETA_VLLM_SDIST``."""
    root = os.environ.get("SGLMETA_VLLM_SDIST")
    if not root or not (Path(root) / "tests" / "v1" / "worker" / "test_gpu_block_table.py").is_file():
        return None
    return Path(root)


def entry_point_path() -> list[str]:
    """Extra ``sys.path`` entries that give vLLM's loader our entry point: none
    when the installed sgl-meta declares it, else a folder with only package
    metadata that declares it (what ``pip install -e .`` of this tree writes)."""
    declared = [ep for ep in metadata.entry_points(group="vllm.general_plugins") if ep.name == "sgl_meta"]
    if declared:
        return []
    folder = Path(tempfile.mkdtemp(prefix="sglmeta-vllm-ep-"))
    info = folder / "sgl_meta_vllm_entry-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sgl-meta-vllm-entry\nVersion: 0\n")
    (info / "entry_points.txt").write_text("[vllm.general_plugins]\nsgl_meta = sgl_meta.vllm.plugin:register\n")
    return [str(folder)]


FLASHINFER_STUB = Path(__file__).with_name("import_stubs")
"""A ``flashinfer`` that only imports (import_stubs/flashinfer/): vLLM's FlashInfer
backend module imports it at the top, the CPU tests run that module's Triton kernel."""


def child_env(*, flashinfer_stub: bool = False, **extra: str) -> dict[str, str]:
    """The environment of a child interpreter: this sgl_meta first on its path,
    our entry point visible, no inherited plugin switches; with
    ``flashinfer_stub``, :data:`FLASHINFER_STUB` on the path too."""
    env = {k: v for k, v in os.environ.items() if k != "VLLM_PLUGINS" and not k.endswith("_VLLM_PLUGIN")}
    stub = [str(FLASHINFER_STUB)] if flashinfer_stub else []
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *stub, *entry_point_path(), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env
