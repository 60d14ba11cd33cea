"""The benchmark's --upstream mode: finding SGLang, reporting what is missing, the
rows' plumbing on CPU (upstream stood in by our references), the writers.

Upstream's Triton and JIT kernels cannot launch without a GPU; the GPU test at
the end runs the real comparison when an installed sglang is importable.
"""

from __future__ import annotations

import importlib.util
import inspect
import json
import os
import subprocess
import sys
import zipfile

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from sgl_meta.bench import main
from sgl_meta.bench.report import write_json
from sgl_meta.bench.upstream import loader, rows_dsa, rows_mha
from sgl_meta.bench.upstream.fixtures import Context, RowSpec
from sgl_meta.bench.upstream.measure import check_row
from sgl_meta.bench.upstream.run import ROW_SPECS, problems, why_skipped
from sgl_meta.bench.upstream.table import markdown, write_markdown

VERSION_PY = "__version__ = version = '0.5.23'\n"


def installed_site():
    """The site dir of an importable sglang, or skip saying why."""
    loc = loader.locate("auto")
    if loc.site is None:
        pytest.skip(f"needs an installed sglang {loader.EXPECTED_VERSION} ({loc.problem})")
    return loc


def fake_site(root, version_py=VERSION_PY):
    """A site dir with every file the loader looks for (empty modules)."""
    site = root / "site"
    for rel, _, _ in loader.KERNEL_FILES.values():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text("")
    for rel in loader.JIT_SUPPORT_FILES:
        p = site / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith("include"):
            p.mkdir(exist_ok=True)
        else:
            p.write_text("")
    if version_py is not None:
        (site / "sglang" / "_version.py").write_text(version_py)
    return site


@pytest.fixture(autouse=True)
def _no_stub_left():
    yield
    loader.unstub()  # never leave the stubbed sglang tree to other tests


# -- locating the package ----------------------------------------------------------------


def test_locate_site_dir_and_package_dir(tmp_path):
    site = fake_site(tmp_path)
    loc = loader.locate(str(site))
    assert (loc.site, loc.source, loc.version, loc.problem) == (site.resolve(), "site dir", "0.5.23", None)
    loc = loader.locate(str(site / "sglang"))
    assert (loc.site, loc.source) == (site.resolve(), "package dir")
    loc = loader.locate(str(tmp_path / "nothing-here"))
    assert loc.site is None and loc.problem.startswith("no sglang:")


def test_locate_wheel_extracts_what_the_bench_reads(tmp_path):
    site = fake_site(tmp_path, version_py=None)  # version from the dist-info instead
    (site / "sglang" / "srt" / "utils").mkdir(parents=True)
    (site / "sglang" / "srt" / "utils" / "common.py").write_text("raise ImportError('the server')\n")
    whl = tmp_path / "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        for p in site.rglob("*"):
            if p.is_file():
                zf.write(p, p.relative_to(site).as_posix())
        zf.writestr("sglang-0.5.23.dist-info/METADATA", "Metadata-Version: 2.1\nName: sglang\nVersion: 0.5.23\n")
    loc = loader.locate(str(whl), cache_dir=tmp_path / "cache")
    assert loc.source == "wheel" and loc.version == "0.5.23" and loc.problem is None
    for rel, _, _ in loader.KERNEL_FILES.values():
        assert (loc.site / rel).is_file()
    assert not (loc.site / "sglang" / "srt" / "utils" / "common.py").exists()  # the server stays in the wheel
    assert loader.locate(str(whl), cache_dir=tmp_path / "cache").site == loc.site  # extracted once


def test_locate_auto_without_sglang(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(loader.importlib.util, "find_spec", lambda name, *a: None if name == "sglang" else real(name, *a))
    loc = loader.locate("auto")
    assert loc.site is None and "no sglang" in loc.problem and "--upstream PATH" in loc.problem


# -- what is missing -----------------------------------------------------------------------


def test_probe_names_every_missing_piece(tmp_path, monkeypatch):
    site = fake_site(tmp_path)
    (site / "sglang/kernels/ops/attention/dsa/fused_metadata_copy.py").unlink()
    monkeypatch.setattr(loader, "_has_module", lambda name: False)
    monkeypatch.setattr(loader.shutil, "which", lambda name: None)
    monkeypatch.setattr(loader, "cuda_home", lambda: None)
    p = loader.probe(loader.locate(str(site)), gpu=False)
    tri, jit = " | ".join(p.missing[loader.TRITON]), " | ".join(p.missing[loader.JIT])
    assert "no GPU" in tri and "no triton" in tri
    for piece in ("no GPU", "fused_metadata_copy.py", "no tvm-ffi", "no msgspec", "no nvcc", "no ninja", "no C++"):
        assert piece in jit
    assert not p.any_runnable and "skipped, no GPU" in p.summary()


def test_probe_warns_on_another_version(tmp_path):
    site = fake_site(tmp_path, version_py="__version__ = version = '0.6.0'\n")
    p = loader.probe(loader.locate(str(site)), gpu=True)
    assert any("0.6.0" in w and "0.5.23" in w for w in p.warnings)


def test_rows_skip_with_the_reason(tmp_path):
    p = loader.probe(loader.locate(str(tmp_path / "none")), gpu=True)
    assert "no sglang" in why_skipped(ROW_SPECS[0], p, None)
    spec = RowSpec(name="x", group="g", families=(), ours=("no_such_op",), build=None)
    assert "sgl_meta.no_such_op not in this build" in why_skipped(spec, p, None)


# -- the installed package (CI installs sglang 0.5.23 with --no-deps) ------------------------


def test_installed_sglang_has_every_kernel_file():
    loc = installed_site()
    assert loc.version == loader.EXPECTED_VERSION
    for rel, _, _ in loader.KERNEL_FILES.values():
        assert (loc.site / rel).is_file(), rel
    for rel in loader.JIT_SUPPORT_FILES:
        assert (loc.site / rel).exists(), rel


def test_triton_files_load_by_path_without_the_package():
    loc = installed_site()
    pytest.importorskip("triton", reason="the Triton kernel files import triton")
    k = loader.load(loader.probe(loc, gpu=True), families=(loader.TRITON,))
    assert not k.errors
    for rel, fam, fns in loader.KERNEL_FILES.values():
        if fam == loader.TRITON:
            for fn in fns:
                assert callable(getattr(k, fn)), fn
    # sglang's own __init__ (the server) never ran
    assert "sglang" not in sys.modules
    assert inspect.getsourcefile(k.update_trtllm_mha_graph_metadata).startswith(str(loc.site))


def test_jit_loader_imports_without_the_server():
    loc = installed_site()
    pytest.importorskip("msgspec", reason="SGLang's JIT build cache imports msgspec")
    loader.prepare_jit(loc.site)
    utils = sys.modules["sglang.kernels.jit.utils"]
    assert callable(utils.load_jit) and str(utils.KERNEL_PATH).startswith(str(loc.site))
    assert getattr(sys.modules["sglang"], loader._STUB_MARK)  # stub, not the server's __init__
    assert "sglang.srt.entrypoints" not in sys.modules
    loader.unstub()
    assert not any(n == "sglang" or n.startswith("sglang.") for n in sys.modules)


# -- the rows' plumbing on CPU ----------------------------------------------------------------


class FakeUpstream:
    """Upstream's kernels stood in by our eager references (upstream semantics:
    live pages, ``skip_page_table``, element 0 of the cumsums untouched). When the
    installed files load, every call's arguments are bound against the real
    upstream signature first."""

    def __init__(self, real=None, write=True):
        self.real, self.write = real, write

    def has(self, name):
        return hasattr(self, name)

    def _bind(self, name, kw):
        if self.real is not None and self.real.has(name):
            inspect.signature(getattr(self.real, name)).bind(**kw)

    def update_trtllm_mha_graph_metadata(self, **kw):
        self._bind("update_trtllm_mha_graph_metadata", kw)
        if not self.write:
            return
        if kw.pop("skip_page_table", False):
            bs, lens = kw["bs"], kw["seq_lens"][: kw["bs"]].to(torch.int32) + kw["seqlen_offset"]
            kw["cache_seqlens"][:bs] = lens
            kw["cu_seqlens_k"][1 : bs + 1] = torch.cumsum(lens, 0)
            return
        reference.update_trtllm_mha_graph_metadata(**kw, live_pages_only=True)

    def build_trtllm_mha_page_table(self, **kw):
        self._bind("build_trtllm_mha_page_table", kw)
        reference.build_trtllm_mha_page_table(**kw)

    def fused_metadata_copy_cuda(self, **kw):
        inspect.signature(sgl_meta.fused_metadata_copy_cuda).bind(**kw)  # upstream's exact signature
        reference.fused_metadata_copy(**kw)

    def fused_metadata_copy_multi_cuda(self, **kw):
        inspect.signature(sgl_meta.fused_metadata_copy_multi_cuda).bind(**kw)
        lists = {}
        for name in list(kw):
            if name[-1] in "012" and "_dst" in name:
                lists.setdefault(name[:-1], []).append(kw.pop(name))
        reference.fused_metadata_copy_multi(**kw, **lists)


def _real_upstream():
    try:
        loc = installed_site()
    except pytest.skip.Exception:
        return None
    if importlib.util.find_spec("triton") is None:
        return None
    return loader.load(loader.probe(loc, gpu=True), families=(loader.TRITON,))


@pytest.fixture
def small_shapes(monkeypatch):
    monkeypatch.setattr(rows_mha, "PAGES", 16)
    monkeypatch.setattr(rows_dsa, "TOPK", 64)
    monkeypatch.setattr(rows_dsa, "REAL_W", 32)


CPU_ROWS = [s for s in ROW_SPECS if s.group in ("mha", "dsa copy")]


@pytest.mark.parametrize("spec", CPU_ROWS, ids=[s.name for s in CPU_ROWS])
def test_row_plumbing_on_cpu(spec, small_shapes):
    ctx = Context(device=torch.device("cpu"), seed=5)
    row = spec.build(ctx, FakeUpstream(_real_upstream()))
    assert set(row.calls) == {"upstream", "ours", "ref"} and row.regions
    row.repoison()
    for calls in row.calls.values():
        for c in calls:
            c()
    assert check_row(row, "eager") == []
    # A wrong element inside upstream's region is caught and named...
    name = next(iter(row.regions))
    region = row.regions[name]
    inside = torch.zeros_like(row.outputs["ours"][name], dtype=torch.bool)
    inside[region] = True
    first = tuple(inside.nonzero()[0].tolist())
    row.outputs["upstream"][name][first] += 1
    found = check_row(row, "eager")
    assert len(found) == 1 and "ours differs from upstream" in found[0] and name in found[0]
    # ...while upstream's undefined elements (the poison) are not compared.
    row.outputs["upstream"][name][first] -= 1
    outside = (~inside).nonzero()
    if outside.numel():
        row.outputs["upstream"][name][tuple(outside[0].tolist())] += 1
        assert check_row(row, "eager") == []


def test_unwritten_upstream_region_is_reported(small_shapes):
    ctx = Context(device=torch.device("cpu"), seed=1)
    row = rows_mha.build_update(ctx, FakeUpstream(write=False), bs=8, swa=False, name="update")
    row.repoison()
    for calls in row.calls.values():
        for c in calls:
            c()
    found = check_row(row, "eager")
    assert any("left elements unwritten" in m for m in found)


# -- writers and the CLI -------------------------------------------------------------------------


def _stats(x):
    return {"median": x, "p99": x * 1.5, "mean": x, "n": 10}


def _doc():
    row = {
        "case": "update bs256", "group": "mha", "params": {"bs": 256}, "note": "", "ok": True,
        "checks": {"eager": [], "graph": []},
        "impls": {
            "upstream": {"host_us": _stats(23.0), "device_us": _stats(9.44), "launch_us": _stats(2.5), "calls": 1},
            "ours": {"host_us": _stats(11.1), "device_us": _stats(9.83), "launch_us": _stats(2.4), "calls": 1},
            "ref": {"host_us": _stats(300.0), "device_us": _stats(40.0), "launch_us": _stats(3.0), "calls": 1},
        },
        "ratio_ours_upstream": {"host": 11.1 / 23.0, "device": 9.83 / 9.44, "launch": 2.4 / 2.5},
    }
    bad = dict(row, case="DSA copy decode bs256", group="dsa copy", ok=False,
               checks={"eager": ["DSA copy: ours differs from upstream"], "graph": []},
               capture_errors={"upstream": "RuntimeError: no capture"})
    return {
        "environment": {"date": "2026-12-01T00:00:00+00:00", "gpu": "NVIDIA H200", "torch": "2.11.0", "cuda": "13.0",
                        "sgl_meta": "0.1.0"},
        "upstream": {
            "available": True, "version": "0.5.23", "expected_version": "0.5.23", "source": "site dir",
            "tools": {"triton": "3.6.0", "apache-tvm-ffi": "0.1.11"}, "warnings": [], "buckets": [1, 2, 4],
            "rows": [row, bad],
            "cold_start": [
                {"name": "TRT-LLM MHA update", "buckets": 3, "calls_per_bucket": 4,
                 "upstream": {"cold_s": 3.0, "warm_s": 0.01}, "ours": {"cold_s": 0.012, "warm_s": 0.01}},
                {"name": "DSA copy", "buckets": 3, "skipped": "no nvcc"},
            ],
            "skipped_rows": [{"case": "DSA generate decode bs1, K=1", "reason": "sgl_meta.fused_dsa_decode_metadata not in this build"}],
            "tvm_ffi": {"import_s": 0.2, "torch_c_dlpack": True},
        },
    }


def test_markdown_table(tmp_path):
    doc = _doc()
    md = markdown(doc)
    assert "2026-12-01" in md and "NVIDIA H200" in md and "torch 2.11.0" in md and "sglang 0.5.23" in md
    assert "| update bs256 | 23.0 / 9.44 | 11.1 / 9.83 | 2.50 / 2.40 | 0.48, 1.04 | 300 / 40.0 | ok |" in md
    assert "| DSA copy decode bs256 |" in md and "MISMATCH" in md
    assert "| TRT-LLM MHA update | 3.000 (0.010) | 0.012 (0.010) |" in md
    assert "Cold start of DSA copy skipped: no nvcc." in md
    assert "Not run (sgl_meta.fused_dsa_decode_metadata not in this build): DSA generate decode bs1, K=1." in md
    assert "could not be captured" in md
    path = tmp_path / "out" / "upstream.md"
    write_markdown(str(path), doc)
    assert path.read_text() == md
    write_json(str(tmp_path / "b.json"), doc)
    assert json.loads((tmp_path / "b.json").read_text())["upstream"]["rows"][0]["case"] == "update bs256"
    assert problems(doc["upstream"]) == ["DSA copy: ours differs from upstream"]


def test_markdown_cli(tmp_path):
    """``python -m sgl_meta.bench.upstream.table BENCH.json`` prints the markdown of a saved run."""
    path = tmp_path / "b.json"
    path.write_text(json.dumps(_doc()))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-m", "sgl_meta.bench.upstream.table", str(path)],
                         capture_output=True, text=True, check=True, env=env)
    assert out.stdout == markdown(_doc())


def test_cli_without_upstream_says_what_is_missing(tmp_path, capsys):
    js, md = tmp_path / "b.json", tmp_path / "b.md"
    code = main(["--device", "cpu", "--preset", "none", "--upstream", str(tmp_path / "no-such-site"),
                 "--json", str(js), "--markdown", str(md), "--no-progress"])
    assert code == 0
    up = json.loads(js.read_text())["upstream"]
    assert up["available"] is False and up["rows"] == [] and "no sglang" in up["message"]
    assert len(up["skipped_rows"]) == len(ROW_SPECS)
    err = capsys.readouterr()
    assert "no sglang" in err.err
    text = md.read_text()
    assert "Upstream comparison not run" in text and f"({len(ROW_SPECS)} rows not run.)" in text


def test_cli_trace_and_upstream_on_cpu(tmp_path):
    js = tmp_path / "b.json"
    code = main(["--device", "cpu", "--steps", "3", "--warmup", "1", "--max-bs", "4", "--context-len", "2048",
                 "--no-progress", "--preset", "llama-3.1-8b-p64", "--upstream", "--json", str(js)])
    doc = json.loads(js.read_text())
    assert code == 0 and doc["ok"] is True and doc["presets"][0]["workloads"]
    assert doc["upstream"]["available"] is False
    assert "no GPU" in doc["upstream"]["message"] or "no sglang" in doc["upstream"]["message"]


def test_cli_argument_errors(tmp_path):
    for args in (["--preset", "none"], ["--markdown", str(tmp_path / "x.md")]):
        with pytest.raises(SystemExit) as e:
            main(["--device", "cpu", *args])
        assert e.value.code == 2


# -- the real thing -----------------------------------------------------------------------------


@pytest.mark.gpu
def test_upstream_comparison_on_gpu(tmp_path):
    """Every row that can run here runs and agrees with upstream; cold start over two buckets."""
    installed_site()
    js = tmp_path / "up.json"
    code = main(["--preset", "none", "--upstream", "--buckets", "1,2", "--json", str(js),
                 "--markdown", str(tmp_path / "up.md"), "--no-progress"])
    up = json.loads(js.read_text())["upstream"]
    assert code == 0, up
    assert up["available"] and up["rows"]
    for r in up["rows"]:
        assert r["ok"], r
        assert r["impls"]["upstream"]["device_us"]["median"] > 0 and r["impls"]["ours"]["host_us"]["median"] > 0
    assert any("upstream" in c for c in up["cold_start"])
