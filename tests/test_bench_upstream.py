"""The benchmark's --upstream mode: finding SGLang, reporting what is missing, the
rows' plumbing on CPU (upstream stood in by our references), the writers.

Upstream's Triton and JIT kernels cannot launch without a GPU; the GPU test at
the end runs the real comparison when an installed sglang is importable.
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import json
import sys
import zipfile

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from sgl_meta.bench import main
from sgl_meta.bench.report import write_json
from sgl_meta.bench.upstream import loader, rows_dsa, rows_kv, rows_kv_indices, rows_mha
from sgl_meta.bench.upstream.fixtures import Context, RowSpec
from sgl_meta.bench.upstream.measure import check_row
from sgl_meta.bench.upstream.run import ROW_SPECS, problems, why_skipped
from sgl_meta.bench.upstream.table import markdown, print_upstream, write_markdown

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
    assert "sgl_meta.no_such_op not in this build" == why_skipped(spec, p, None)


# -- the installed package (CI installs sglang 0.5.23 with --no-deps) ------------------------


def test_installed_sglang_has_every_kernel_file():
    loc = installed_site()
    assert loc.version == loader.EXPECTED_VERSION
    for rel, _, _ in loader.KERNEL_FILES.values():
        assert (loc.site / rel).is_file(), rel
    for rel in loader.JIT_SUPPORT_FILES:
        assert (loc.site / rel).exists(), rel


@pytest.fixture
def fresh_sglang_modules(monkeypatch):
    """The loader's promise is about a process that has not imported sglang: hide any
    sglang modules an earlier test imported (the plugin tests use SGLang's classes
    in-process) for this test; monkeypatch puts them back after it."""
    for name in [n for n in sys.modules if n == "sglang" or n.startswith("sglang.")]:
        monkeypatch.delitem(sys.modules, name)


@pytest.mark.usefixtures("fresh_sglang_modules")
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


@pytest.mark.usefixtures("fresh_sglang_modules")
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

    modules: dict = {}
    errors: dict = {}

    def has(self, name):
        return hasattr(self, name)

    def adopt(self, other, keys):
        pass

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
        lists = {k: (None if all(t is None for t in v) else v) for k, v in lists.items()}
        reference.fused_metadata_copy_multi(**kw, **lists)

    def build_kv_read_table(self, **kw):
        self._bind("build_kv_read_table", kw)
        emulate_kv_read(**kw)

    def build_kv_read_table_packed(self, **kw):
        self._bind("build_kv_read_table_packed", kw)
        emulate_kv_read(**kw)

    def fused_dsa_decode_metadata(self, **kw):
        self._bind("fused_dsa_decode_metadata", kw)
        emulate_dsa_generator(0, block=128, **kw)

    def fused_dsa_target_verify_metadata(self, **kw):
        self._bind("fused_dsa_target_verify_metadata", kw)
        emulate_dsa_generator(1, block=128, **kw)


def emulate_kv_read(*, req_to_token, req_pool_indices, seq_lens, v2p, page_size, out, max_pages=None,
                    indptr=None, max_tokens=None, seq_len_delta=0, zero_tail=False, kv_start_idx=None):
    """The read tables' values (docs/operators/kv_read_table.md) in torch: page table or token stream."""
    ps = page_size
    for b in range(req_pool_indices.numel()):
        row = req_to_token[int(req_pool_indices[b])]
        n = int(seq_lens[b]) + seq_len_delta
        pos = torch.arange(n) if indptr is not None else torch.arange(min(-(-n // ps), max_pages)) * ps
        tok = row[torch.div(pos, ps, rounding_mode="floor") * ps].to(torch.int64)
        entry = v2p[torch.where(tok < 0, 0, torch.div(tok, ps, rounding_mode="floor"))].clamp(min=0)
        if indptr is not None:
            start = int(indptr[b])
            out[start : start + n] = (entry * ps + pos % ps).to(out.dtype)
        else:
            out[b, : pos.numel()] = entry.to(out.dtype)
    return out


def emulate_dsa_generator(mode, *, block, seq_lens, req_pool_indices, req_to_token, cache_seqlens, cu_seqlens_k,
                          page_table_1, dsa_cache_seqlens, dsa_cu_seqlens_k, real_page_table, bs, dsa_index_topk,
                          physical_page_size, max_len=None, max_seqlen_k=None, next_n=1, seqlens_expanded=None,
                          paged_mqa_ctx_lens_2d=None):
    """The DSA generators' values (docs/operators/dsa_metadata.md) in torch: page rows written in
    whole ``block``-column blocks (upstream: 128) or exactly (``block=1``)."""
    width = max_len if mode == 0 else max_seqlen_k
    q = 1 if mode == 0 else next_n
    seq = seq_lens[:bs].to(torch.int32)
    cache = seq + (0 if mode == 0 else next_n)
    cache_seqlens[:bs] = cache
    cu_seqlens_k[0] = 0
    cu_seqlens_k[1 : bs + 1] = torch.cumsum(cache, 0)
    expanded = (seq[:, None] + torch.arange(1, q + 1, dtype=torch.int32)).reshape(-1) if mode else seq
    if mode:
        seqlens_expanded[: bs * q] = expanded
    dsa = torch.clamp(expanded, max=dsa_index_topk)
    dsa_cache_seqlens[: bs * q] = dsa
    dsa_cu_seqlens_k[0] = 0
    dsa_cu_seqlens_k[1 : bs * q + 1] = torch.cumsum(dsa, 0)
    ps = physical_page_size
    for r in range(bs * q):
        kv = int(cache[r // q])
        cols = min(-(-kv // block) * block, width)
        vals = req_to_token[int(req_pool_indices[r // q]), :cols]
        if page_table_1 is not None:
            page_table_1[r, :cols] = vals
        real_page_table[r, : -(-cols // ps)] = torch.div(vals[::ps], ps, rounding_mode="floor")


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
    monkeypatch.setattr(rows_dsa, "CONTEXT", 1024)
    monkeypatch.setattr(rows_dsa, "REAL_W", 16)
    # The DSA generators, until they land: ours stood in by an exact live-prefix
    # emulation (upstream's is written in whole 128-column blocks).
    for mode, name in rows_dsa.GEN.items():
        if not hasattr(sgl_meta, name):
            monkeypatch.setattr(sgl_meta, name, functools.partial(emulate_dsa_generator, mode, block=1), raising=False)
    monkeypatch.setattr(rows_kv, "PAGES", 16)
    for name in (rows_kv.TABLE, rows_kv.PACKED):  # likewise the read tables
        if not hasattr(sgl_meta, name):
            monkeypatch.setattr(sgl_meta, name, emulate_kv_read, raising=False)


GEN_ON_CPU = ("DSA generate decode bs1, K=1", "DSA generate decode bs64, K=2", "DSA generate decode bs64, K=5",
              "DSA generate verify bs64 x 4, K=1")  # K < 3, K >= 3 with a remainder, verify
CPU_ROWS = [s for s in ROW_SPECS if s.group in ("mha", "dsa copy", "kv read") or s.name in GEN_ON_CPU]


@pytest.mark.parametrize("spec", CPU_ROWS, ids=[s.name for s in CPU_ROWS])
def test_row_plumbing_on_cpu(spec, small_shapes):
    ctx = Context(device=torch.device("cpu"), seed=5)
    row = spec.build(ctx, FakeUpstream(_real_upstream()))
    assert {"upstream", "ours"} <= set(row.calls) and row.regions
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
    # The KV rows' bare gather (the ceiling) must compute the same table, or it is no ceiling.
    assert ("gather" in row.calls) == (spec.group == "kv read")
    if "gather" in row.calls:
        row.outputs["gather"][name][first] += 1
        found = check_row(row, "eager")
        assert len(found) == 1 and "ours differs from the bare gather" in found[0]


DRAFT_ROWS = [s for s in ROW_SPECS if s.upstream == (rows_kv_indices.DRAFT,)]


class CpuDraftKernel:
    """SGLang's draft-decode kernel on CPU for the rows' plumbing: either launch form (``NUM_STEPS`` 0,
    or token blocks), SGLang's argument order, our op behind it (the plugin's stand-in's run)."""

    def __class_getitem__(cls, grid):
        from sgl_meta.sglang.kernels import DraftDecodeKvIndicesKernel as K

        def launch(*args, NUM_STEPS=0, **kwargs):
            K.run((NUM_STEPS or grid[0], grid[1], grid[2]), {**K._defaults, **dict(zip(K._names, args)), **kwargs})

        return launch


@pytest.mark.parametrize("spec", DRAFT_ROWS, ids=[s.name for s in DRAFT_ROWS])
def test_draft_rows_plumbing_on_cpu(spec, monkeypatch):
    """The draft-decode rows on small rows, upstream's launch stood in by :class:`CpuDraftKernel`: every call
    wired, the regions what upstream writes."""
    monkeypatch.setattr(rows_kv_indices, "PAGES", 12)
    up = type("Up", (), {rows_kv_indices.DRAFT: CpuDraftKernel, "has": lambda self, n: True})()
    row = spec.build(Context(device=torch.device("cpu"), seed=5), up)
    assert {"upstream", "ours", "ref"} <= set(row.calls)
    row.repoison()
    for calls in row.calls.values():
        for c in calls:
            c()
    assert check_row(row, "eager") == []
    row.outputs["upstream"]["kv_indptr"][-1, -1] += 1  # the last branch's end, inside the region
    found = check_row(row, "eager")
    assert len(found) == 1 and "kv_indptr" in found[0]


class CpuFlashinferKernel:
    """SGLang's ``create_flashinfer_kv_indices_triton`` on CPU for the rows' plumbing: its argument
    order, the eager reference behind it."""

    def __class_getitem__(cls, grid):
        def launch(req_to_token, req_pool_indices, lens, kv_indptr, kv_start_idx, kv_indices, stride):
            assert stride == req_to_token.stride(0) and grid == (req_pool_indices.numel(), 1)
            reference.create_flashinfer_kv_indices(req_to_token, req_pool_indices, lens, kv_indptr, kv_start_idx,
                                                   kv_indices)

        return launch


class CpuSplitsKernel:
    """SGLang's ``get_num_kv_splits_triton`` on CPU for the rows' plumbing: its argument order, the
    reference's counts (held to SGLang's kernel by the GPU rows)."""

    def __class_getitem__(cls, grid):
        def launch(num_kv_splits, lens, bs, num_group, num_head, num_kv_head, max_kv_splits, cores, MAX_NUM_SEQ,
                   uneven_batch_ptr=None):
            assert grid == (1,) and MAX_NUM_SEQ >= bs
            counts, uneven = reference.kv_indices._splits(lens.long(), bs, num_group, num_head, num_kv_head,
                                                          max_kv_splits, cores)
            num_kv_splits[: bs * num_group].copy_(counts.repeat_interleave(num_group))
            if uneven_batch_ptr is not None:
                uneven_batch_ptr[:1].copy_(uneven.reshape(1))

        return launch


STREAM_ROWS = [s for s in ROW_SPECS
               if set(s.upstream) <= {rows_kv_indices.FLASHINFER, rows_kv_indices.SPLITS}
               and rows_kv_indices.FLASHINFER in s.upstream]


@pytest.mark.parametrize("spec", STREAM_ROWS, ids=[s.name for s in STREAM_ROWS])
def test_stream_rows_plumbing_on_cpu(spec, monkeypatch):
    """The FlashInfer and Triton rows of kv_indptr + kv_indices (with the split counts, the verify
    and draft-extend companions, the sliding window) on small rows, upstream's gather and split
    counts stood in by :class:`CpuFlashinferKernel` and :class:`CpuSplitsKernel`, its torch ops as
    SGLang runs them: every output equal on its region."""
    monkeypatch.setattr(rows_kv_indices, "PAGES", 12)
    up = type("Up", (), {rows_kv_indices.FLASHINFER: CpuFlashinferKernel, rows_kv_indices.SPLITS: CpuSplitsKernel,
                         "has": lambda self, n: True})()
    row = spec.build(Context(device=torch.device("cpu"), seed=5), up)
    row.repoison()
    for calls in row.calls.values():
        for c in calls:
            c()
    assert check_row(row, "eager") == []
    if "mask_indptr" in row.outputs["upstream"]:
        row.outputs["upstream"]["mask_indptr"][-1] += 1
        found = check_row(row, "eager")
        assert len(found) == 1 and "mask_indptr" in found[0]


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
        "device_diff_us": {"median": 0.39, "ci95": [0.31, 0.45], "n": 300},
    }
    kv = dict(row, case="KV read table bs256", group="kv read",
              impls=dict(row["impls"], gather={"host_us": _stats(60.0), "device_us": _stats(9.2), "launch_us": None,
                                               "calls": 1}),
              ratio_ours_gather=9.83 / 9.2)
    bad = dict(row, case="DSA copy decode bs256", group="dsa copy", ok=False,
               checks={"eager": ["DSA copy: ours differs from upstream"], "graph": []},
               capture_errors={"upstream": "RuntimeError: no capture"})
    return {
        "environment": {"date": "2026-12-01T00:00:00+00:00", "gpu": "NVIDIA H200", "torch": "2.11.0", "cuda": "13.0",
                        "sgl_meta": "0.1.0"},
        "upstream": {
            "available": True, "version": "0.5.23", "expected_version": "0.5.23", "source": "site dir",
            "tools": {"triton": "3.6.0", "apache-tvm-ffi": "0.1.11"}, "warnings": [], "buckets": [1, 2, 4],
            "rows": [row, kv, bad],
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
    assert ("| update bs256 | 23.0 / 9.44 | 11.1 / 9.83 | 2.50 / 2.40 | 0.48, 1.04 | +0.39 [+0.31, +0.45] "
            "| 300 / 40.0 | ok |") in md
    assert "| DSA copy decode bs256 |" in md and "MISMATCH" in md
    assert "| TRT-LLM MHA update | 3.000 (0.010) | 0.012 (0.010) |" in md
    assert "Cold start of DSA copy skipped: no nvcc." in md
    assert "Not run (sgl_meta.fused_dsa_decode_metadata not in this build): DSA generate decode bs1, K=1." in md
    assert "could not be captured" in md
    assert ("KV read table bs256: the bare gather of the same pages (the ceiling, same inputs and rotation) "
            "9.20 us device; sgl_meta / bare gather 1.07.") in md
    path = tmp_path / "out" / "upstream.md"
    write_markdown(str(path), doc)
    assert path.read_text() == md
    write_json(str(tmp_path / "b.json"), doc)
    assert json.loads((tmp_path / "b.json").read_text())["upstream"]["rows"][0]["case"] == "update bs256"
    assert problems(doc["upstream"]) == ["DSA copy: ours differs from upstream"]


def test_markdown_cli(tmp_path, capsys):
    """``python -m sgl_meta.bench.upstream.table BENCH.json`` prints the markdown of a saved run."""
    from sgl_meta.bench.upstream import table

    path = tmp_path / "b.json"
    path.write_text(json.dumps(_doc()))
    assert table.main([str(path)]) == 0
    assert capsys.readouterr().out == markdown(_doc())
    assert table.main([]) == 2


def test_cli_without_upstream_says_what_is_missing(tmp_path, capsys):
    js, md = tmp_path / "b.json", tmp_path / "b.md"
    code = main(["--device", "cpu", "--preset", "none", "--upstream", str(tmp_path / "no-such-site"),
                 "--json", str(js), "--markdown", str(md), "--no-progress"])
    assert code == 0
    up = json.loads(js.read_text())["upstream"]
    assert up["available"] is False and up["rows"] == [] and "no sglang" in up["message"]
    assert len(up["skipped_rows"]) == len(ROW_SPECS)
    out = capsys.readouterr()
    assert "no sglang" in out.err
    # the reasons are logged once; the table's place says how many rows they cost
    assert "no sglang" not in out.out and f"not run ({len(ROW_SPECS)} rows)" in out.out
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
    for args in (["--preset", "none"], ["--markdown", str(tmp_path / "x.md")], ["--replays", "5"],
                 ["--upstream", "--replays", "0"], ["--layouts", "2"], ["--upstream", "--layouts", "0"],
                 ["--rows", "DSA"]):
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


@pytest.fixture
def emulated(tmp_path, monkeypatch, small_shapes):
    """run_upstream on CPU: upstream stood in by the references (the draft kernel by
    :class:`CpuDraftKernel`), CUDA graphs by eager replays, events by wall clocks; the site dir."""
    from sgl_meta.bench import graphs as graph_capture
    from sgl_meta.bench.timing import WallTimer
    from sgl_meta.bench.upstream import _triton_warmup, measure, run

    site = fake_site(tmp_path)
    fake = FakeUpstream(_real_upstream())
    setattr(fake, rows_kv_indices.DRAFT, CpuDraftKernel)

    def probe(loc, gpu=None):
        return loader.Probe(location=loc, gpu=True, tools={}, missing={loader.TRITON: [], loader.JIT: []})

    monkeypatch.setattr(loader, "probe", probe)
    monkeypatch.setattr(loader, "load", lambda *a, **k: fake)
    monkeypatch.setattr(loader, "import_tvm_ffi", lambda: {"import_s": 0.0, "torch_c_dlpack": True})
    monkeypatch.setattr(_triton_warmup, "warm_up", lambda device: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "graph_pool_handle", lambda: None)
    monkeypatch.setattr(measure.graph_capture, "capture", lambda calls, pool: graph_capture.EmulatedGraph(calls))
    monkeypatch.setattr(run, "DeviceTimer", lambda device, flush: WallTimer())
    monkeypatch.setattr(measure, "HOST_ROUNDS", 2)
    monkeypatch.setattr(measure, "HOST_PER_ROUND", 4)
    monkeypatch.setattr(rows_kv_indices, "PAGES", 12)
    return site


def test_whole_mode_emulated_on_cpu(emulated, monkeypatch, capsys):
    """run_upstream end to end, emulated on CPU, so the orchestration (cold start, rows,
    checks, table) runs here as it will on the GPU."""
    from sgl_meta.bench.upstream import run

    site = emulated
    # One row of each group (CPU time).
    specs = [s for s in ROW_SPECS if s.name in (
        "update bs1", "page-table builder bs1", "DSA copy verify bs64 x 4", "DSA generate decode bs1, K=5",
        "KV read table bs256 x 2048 pages of 64 (v2p)")]
    monkeypatch.setattr(run, "ROW_SPECS", specs)
    real_builds = run.builds
    built = []
    monkeypatch.setattr(run, "builds", lambda spec, ctx, kernels: (built.append(spec.name) or row
                                                                     for row in real_builds(spec, ctx, kernels)))
    up = run.run_upstream(str(site), torch.device("cpu"), buckets=[1, 2], replays=3, layouts=2, log=lambda msg: None)
    assert up["available"] and up["ok"], problems(up)
    assert up["replays"] == 3 and up["layouts"] == 2
    assert built == [n for s in specs for n in [s.name] * 2]  # each row built twice, no more
    assert [r["case"] for r in up["rows"]] == [s.name for s in specs]
    for r in up["rows"]:
        assert {"upstream", "ours"} <= set(r["impls"]) and r["ok"] and not r["checks"]["graph"]
        assert r["ratio_ours_upstream"]["host"] > 0 and r["impls"]["ours"]["launch_us"]["median"] > 0
        # one pair per round: 3 replays make one whole rotation cycle (2 rounds per implementation) in each build
        assert r["device_diff_us"]["n"] == 2 * 2 * len(r["impls"]) and len(r["device_diff_us"]["builds"]) == 2
    # DSA generate K=5: ours writes the five graphs in one call (fused_dsa_metadata).
    assert up["rows"][3]["impls"]["ours"]["calls"] == 1 and up["rows"][3]["impls"]["upstream"]["calls"] == 1
    assert up["skipped_rows"] == []
    cold = {c["name"]: c for c in up["cold_start"]}
    mha = cold["TRT-LLM MHA update, EAGLE step (2 draft decodes, verify, draft extend; SWA)"]
    assert mha["calls_per_bucket"] == 4 and mha["upstream"]["cold_s"] > 0 and mha["ours"]["cold_s"] > 0
    assert cold["DSA copy (decode, verify, multi K=3)"]["calls_per_bucket"] == 3
    assert cold["DSA generators (decode + verify)"]["calls_per_bucket"] == 2
    assert cold["KV read table (v2p)"]["calls_per_bucket"] == 1
    draft = cold["EAGLE draft decode kv indices (Triton backend's launch, 3 steps)"]
    assert draft["calls_per_bucket"] == 1 and draft["upstream"]["cold_s"] > 0 and draft["ours"]["cold_s"] > 0
    # The stand-in upstream has none of these kernels: each entry says so and the run goes on
    # (tests/test_bench_cold_start.py runs their calls against SGLang's own kernels).
    for name in ("FlashAttention EAGLE step (2 draft decodes, verify, draft extend)",
                 "Triton decode kv_indptr + kv_indices + split counts (FlashInfer's: the first two)",
                 "FlashMLA / TRT-LLM MLA block table"):
        assert cold[name]["skipped"].startswith("upstream not loaded") and "ours" not in cold[name]
    md = markdown({"environment": {}, "upstream": up})
    assert "| update bs1 |" in md and "| TRT-LLM MHA update, EAGLE step" in md
    print_upstream(up)  # the rich table renders
    assert "ours host" in capsys.readouterr().out


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_replay_orders_balance_positions(n):
    """Every implementation takes every position equally often over whole
    cycles (no position bias in the device medians), and with the bench's three
    (upstream, ours, eager) also follows each other one equally often."""
    from collections import Counter

    from sgl_meta.bench.upstream.measure import replay_orders

    names = [f"impl{i}" for i in range(n)]
    orders = list(replay_orders(names, 2 * n * 5))
    assert len(orders) == 2 * n * 5 and all(sorted(o) == names for o in orders)
    positions = Counter((name, pos) for o in orders for pos, name in enumerate(o))
    assert set(positions.values()) == {10}
    follows = Counter((a, b) for o in orders for a, b in zip(o, o[1:]))
    if n <= 3:
        assert len(set(follows.values())) <= 1 and len(follows) == n * (n - 1)


def test_paired_difference_resolves_a_shift_below_the_spread():
    """A 0.05 us shift under 0.5 us of round-to-round noise shared by both
    sides: the medians' ratio cannot tell, the per-round difference can; with
    no shift the interval holds 0."""
    import numpy as np

    from sgl_meta.bench.timing import paired_difference

    rng = np.random.default_rng(7)
    shared = rng.normal(4.5, 0.5, 1000)
    own = lambda: rng.normal(0.0, 0.02, 1000)  # noqa: E731
    d = paired_difference((shared + 0.05 + own()) - (shared + own()))
    assert d["n"] == 1000 and d["ci95"][0] <= d["median"] <= d["ci95"][1]
    assert 0.0 < d["ci95"][0] and abs(d["median"] - 0.05) < 0.01
    same = paired_difference((shared + own()) - (shared + own()))
    assert same["ci95"][0] < 0.0 < same["ci95"][1]
    assert paired_difference([]) is None


def test_paired_difference_interval_covers_the_spread_between_builds():
    """Builds whose buffers sit elsewhere differ by more than their rounds do
    (+-0.3 us against 0.02): the interval resamples builds, so a run of
    builds centred on 0 does not claim a difference; one build's rounds alone
    would."""
    import numpy as np

    from sgl_meta.bench.timing import paired_difference

    rng = np.random.default_rng(3)
    offsets = [0.3, -0.3, 0.25, -0.2, 0.1, -0.15, 0.0, -0.05]
    builds = [off + rng.normal(0.0, 0.02, 250) for off in offsets]
    d = paired_difference(*builds)
    assert d["n"] == 2000 and len(d["builds"]) == 8 and abs(d["builds"][0] - 0.3) < 0.01
    assert d["ci95"][0] < 0.0 < d["ci95"][1] and d["ci95"][1] - d["ci95"][0] > 0.1
    one = paired_difference(builds[0])
    assert one["ci95"][0] > 0.25


def test_rows_picks_rows_and_cold_start_by_name(emulated, monkeypatch):
    from sgl_meta.bench.upstream import run

    up = run.run_upstream(str(emulated), torch.device("cpu"), buckets=[1, 2], replays=3, layouts=1,
                          select="eagle DRAFT decode", log=lambda msg: None)
    draft = [s.name for s in ROW_SPECS if s.upstream == (rows_kv_indices.DRAFT,)]
    assert [r["case"] for r in up["rows"]] == draft and up["ok"], problems(up)
    assert {r["case"] for r in up["skipped_rows"]} == {s.name for s in ROW_SPECS} - set(draft)
    assert all(r["reason"] == "not selected (--rows eagle DRAFT decode)" for r in up["skipped_rows"])
    assert [c["name"] for c in up["cold_start"]] == ["EAGLE draft decode kv indices (Triton backend's launch, 3 steps)"]
