import os
import random
import sys
import zlib

import pytest
import torch

import sgl_meta  # noqa: F401  (registers the ops)

# Fresh random inputs every run; the seed is printed so a failure can be replayed
# with SGLMETA_TEST_SEED=<seed>.
BASE_SEED = int(os.environ.get("SGLMETA_TEST_SEED", random.randrange(2**31)))
# Child processes and tests collected beside another conftest read it from here.
os.environ["SGLMETA_TEST_SEED"] = str(BASE_SEED)

HAS_CUDA = torch.cuda.is_available()


def _import_triton_interpreted() -> None:
    """Without a GPU every upstream Triton kernel the tests run is interpreted, and
    Triton decides at its first import whether its own @jit helpers (tl.cdiv, ...)
    are: imported plain, they refuse to be called from interpreted kernels. The
    first import happens here, under the interpreter switch, so it does not depend
    on which test file loads Triton first. (With a GPU the helpers must stay
    compilable: nothing is done.)"""
    if HAS_CUDA or "triton" in sys.modules:
        return
    from helpers import triton_interpreter

    with triton_interpreter():
        try:
            import triton.language  # noqa: F401
            # Gluon wraps those helpers when it is first imported (lazily, by a
            # kernel launch) and insists they be compiled unless the switch is on then.
            import triton.experimental.gluon  # noqa: F401
        except ImportError:
            pass


_import_triton_interpreted()
# SGLMETA_REQUIRE_GPU=1 (set by scripts/gpu_tests.sh, device_check.sh, sanitize.sh):
# a gpu-marked test that cannot run fails instead of skipping, so a GPU run on a
# machine without a usable device cannot pass by accident.
REQUIRE_GPU = os.environ.get("SGLMETA_REQUIRE_GPU", "") == "1"


def pytest_configure(config):
    # Also registered in pyproject.toml; repeated here so a copy of tests/ run
    # against an installed wheel (outside the source tree) knows the mark too.
    config.addinivalue_line("markers", "gpu: needs a CUDA device (skipped without one)")


def pytest_report_header(config):
    why = _test_cuda_missing()
    if not why:
        gpu = f"GPU tests on: {TEST_CUDA} (SGLMETA_TEST_CUDA)"
    elif REQUIRE_GPU:
        gpu = f"GPU tests: fail ({why}; SGLMETA_REQUIRE_GPU=1)"
    else:
        gpu = f"GPU tests: skipped ({why})"
    return [f"sgl_meta test seed: SGLMETA_TEST_SEED={BASE_SEED}", f"CUDA available: {HAS_CUDA}", gpu]


def _test_cuda_missing() -> str:
    """Why TEST_CUDA cannot be used here ("" when it can)."""
    if not HAS_CUDA:
        return "needs a CUDA device"
    index = torch.device(TEST_CUDA).index
    if index is not None and index >= torch.cuda.device_count():
        return f"SGLMETA_TEST_CUDA={TEST_CUDA} but this machine has {torch.cuda.device_count()} CUDA device(s)"
    return ""


def pytest_collection_modifyitems(config, items):
    why = _test_cuda_missing()
    if not why or REQUIRE_GPU:  # (required: pytest_runtest_setup fails them)
        return
    skip = pytest.mark.skip(reason=why)
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def pytest_runtest_setup(item):
    if REQUIRE_GPU and "gpu" in item.keywords:
        why = _test_cuda_missing()
        if why:
            pytest.fail(f"SGLMETA_REQUIRE_GPU=1 but {why}", pytrace=False)


# Outcomes of the gpu-marked tests, for the summary line scripts/gpu_tests.sh
# adds up: a GPU run in which no GPU test passed is a failed run.
GPU_OUTCOMES: dict = {}


def pytest_runtest_logreport(report):
    if "gpu" not in report.keywords:
        return
    if report.failed:
        GPU_OUTCOMES[report.nodeid] = "failed"
    elif report.skipped:
        GPU_OUTCOMES.setdefault(report.nodeid, "skipped")
    elif report.when == "call":
        GPU_OUTCOMES.setdefault(report.nodeid, "passed")


def pytest_terminal_summary(terminalreporter):
    if GPU_OUTCOMES:
        counts = [f"{sum(v == k for v in GPU_OUTCOMES.values())} {k}" for k in ("passed", "failed", "skipped")]
        terminalreporter.write_sep("-", "gpu-marked tests: " + ", ".join(counts))


from helpers import TEST_CUDA  # noqa: E402  (the device GPU tests use: see there)

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param(TEST_CUDA, id="cuda", marks=pytest.mark.gpu),
]


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture
def gen(request):
    """A torch.Generator seeded from the run seed and the test's id."""
    g = torch.Generator()
    g.manual_seed((BASE_SEED * 1_000_003 + zlib.crc32(request.node.nodeid.encode())) % 2**63)
    return g


@pytest.fixture(params=["fast", "dispatcher"])
def call_path(request, monkeypatch):
    """Runs a test once through the eager fast path (sgl_meta/_fast.py) and once
    through torch.ops (the fast path switched off): same results, same errors.
    Use with ``pytestmark = pytest.mark.usefixtures("call_path")``."""
    from sgl_meta import _fast

    if request.param == "fast" and not _fast.available:
        pytest.skip("this torch has no DLPack C exchange API (torch < 2.10)")
    monkeypatch.setattr(_fast, "enabled", request.param == "fast")
    return request.param
