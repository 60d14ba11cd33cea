"""A GPU run cannot pass without a GPU: SGLMETA_REQUIRE_GPU=1 (tests/conftest.py)
turns the skip of a gpu-marked test into a failure, and scripts/gpu_tests.sh /
device_check.sh refuse to start without CUDA. Checked where there is no GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the runs on a machine without CUDA")

# one CPU and one gpu-marked test
SELECTION = ["tests/test_trtllm_mha_metadata.py", "-k", "test_bs0_writes_nothing"]


def run(cmd, require: bool, **env):
    environ = {k: v for k, v in os.environ.items() if k != "SGLMETA_REQUIRE_GPU"}
    environ.update(env, **({"SGLMETA_REQUIRE_GPU": "1"} if require else {}))
    proc = subprocess.run(cmd, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def pytest_cmd(*args):
    return [sys.executable, "-m", "pytest", *SELECTION, "-p", "no:cacheprovider", *args]


def test_without_the_flag_gpu_tests_skip():
    rc, out = run(pytest_cmd(), require=False)
    assert rc == 0, out
    assert "GPU tests: skipped (needs a CUDA device)" in out, out
    assert "gpu-marked tests: 0 passed, 0 failed, 1 skipped" in out, out


def test_with_the_flag_gpu_tests_fail():
    rc, out = run(pytest_cmd(), require=True)
    assert rc == 1, out
    assert "GPU tests: fail (needs a CUDA device; SGLMETA_REQUIRE_GPU=1)" in out, out
    assert "SGLMETA_REQUIRE_GPU=1 but needs a CUDA device" in out, out
    assert "gpu-marked tests: 0 passed, 1 failed, 0 skipped" in out, out
    assert "1 passed" in out, out  # the CPU test still runs


@pytest.mark.parametrize("script", ["gpu_tests.sh", "device_check.sh"])
def test_runner_refuses_to_start_without_cuda(script, tmp_path):
    rc, out = run(["bash", f"scripts/{script}", "tests"], require=False, PYTHON=sys.executable, OUT=str(tmp_path))
    assert rc == 2, out
    assert "sees no CUDA device" in out, out


@pytest.mark.parametrize("path", ["tests/no_such_test.py", "benchmarks/results"])
def test_gpu_tests_names_a_path_with_no_test_file(path, tmp_path):
    rc, out = run(["bash", "scripts/gpu_tests.sh", "tests/test_kv_indices.py", path], require=False,
                  PYTHON=sys.executable, OUT=str(tmp_path))
    assert rc == 2, out
    assert f"{path} is no test file, nor a folder with one" in out, out


def test_every_gpu_test_file_of_an_op_is_in_a_sanitizer_chunk():
    """scripts/sanitize.sh runs what its chunks list: a new op's GPU tests must be in one. The files
    come from collecting the gpu-marked tests (a file's CUDA cases may come from the device fixture)."""
    import re

    chunks = re.search(r"declare -A CHUNKS=\((.*?)\n\)", (ROOT / "scripts" / "sanitize.sh").read_text(), re.S)
    listed = set(re.findall(r"tests/[\w/]+\.py", chunks.group(1)))
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py"))
    rc, out = run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                   *files], require=False)
    assert rc == 0, out
    gpu_files = {line.split("::")[0] for line in out.splitlines() if "::" in line}
    # timing, and a check of two GPUs together
    not_ops = {"tests/test_bench.py", "tests/test_bench_upstream.py", "tests/test_two_gpus.py"}
    assert len(gpu_files) > 10 and gpu_files - not_ops <= listed, sorted(gpu_files - not_ops - listed)
