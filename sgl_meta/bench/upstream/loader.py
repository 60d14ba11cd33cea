"""Find SGLang's own metadata kernels in an installed ``sglang`` (or its wheel) and load them.

The benchmark compares against the kernels users actually run, so they are read
from the package itself, file by file, never from a copy in this repository:

* the Triton kernels (TRT-LLM MHA update and page-table builder, the three DSA
  metadata generators, the unified pool's read tables) are plain modules that
  import only ``torch``/``triton``: each file is executed on its own with
  ``importlib`` (``spec_from_file_location``), so ``sglang/__init__.py``, which
  pulls in the whole server, never runs; the speculative-decoding kernels'
  file also imports the server's platform checks and ``next_power_of_2``
  (``sglang.srt.utils``), given by a stand-in while it loads;
* the DSA copy is CUDA compiled at first use through SGLang's JIT loader
  (``sglang.kernels.jit.utils.load_jit``: a generated ``build.ninja`` run by the
  ``ninja`` binary with ``nvcc`` and ``c++``, linked against ``apache-tvm-ffi``,
  loaded with ``tvm_ffi.load_module``; its build cache key needs ``msgspec``).
  That loader imports ``sglang.kernels.jit.utils`` by absolute name, which
  needs ``sglang.srt.environ`` (standard library only) and two helpers of the
  server's ``sglang.srt.utils.common`` (``is_cuda``, ``get_cuda_version``).
  The parent packages whose ``__init__`` drags in the server (``sglang``,
  ``sglang.kernels``, ``sglang.srt.utils``) are entered into ``sys.modules``
  as bare package stubs pointing at the installed directories, and the two
  helpers come from a five-line stand-in; every other module, the CUDA source
  and the headers are the installed files, unmodified.

``locate`` resolves ``--upstream auto`` (the importable ``sglang``, found with
``importlib.util.find_spec``, which does not execute it), a site directory (the
folder holding ``sglang/``, e.g. a ``pip install --target`` dir), the package
directory itself, or a wheel file (the kernel files are extracted to a cache
folder). ``probe`` says, per kernel family, what is missing (no sglang, no GPU,
no triton, no tvm-ffi, no msgspec, no nvcc, no ninja, no C++ compiler).
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.metadata
import importlib.util
import itertools
import os
import re
import shutil
import sys
import tempfile
import time
import types
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

EXPECTED_VERSION = "0.5.23"
TRITON = "triton"
JIT = "jit"
FAMILIES = (TRITON, JIT)

# Kernel module key -> (file inside the site dir, family, functions the bench calls).
KERNEL_FILES = {
    "trtllm_mha_graph_metadata": (
        "sglang/kernels/ops/attention/trtllm_mha_graph_metadata.py",
        TRITON,
        ("update_trtllm_mha_graph_metadata",),
    ),
    "trtllm_mha_page_table": (
        "sglang/kernels/ops/attention/trtllm_mha_page_table.py",
        TRITON,
        ("build_trtllm_mha_page_table",),
    ),
    "dsa_metadata": (
        "sglang/kernels/ops/attention/dsa/metadata.py",
        TRITON,
        ("fused_dsa_decode_metadata", "fused_dsa_target_verify_metadata", "fused_dsa_draft_extend_metadata"),
    ),
    "kv_read_table": (
        "sglang/kernels/ops/kvcache/kv_read_table.py",
        TRITON,
        ("build_kv_read_table", "build_kv_read_table_packed"),
    ),
    "flash_attention_metadata": (
        "sglang/kernels/ops/attention/metadata.py",
        TRITON,
        ("normal_decode_set_metadata", "draft_extend_set_metadata", "prepare_swa_spec_page_table_triton"),
    ),
    "kv_indices": (
        "sglang/kernels/ops/attention/kv_indices.py",
        TRITON,
        ("create_flashinfer_kv_indices_triton", "create_flashmla_kv_indices_triton"),
    ),
    "speculative_cache_locs": (
        "sglang/kernels/ops/speculative/cache_locs.py",
        TRITON,
        ("generate_draft_decode_kv_indices",),
    ),
    "attention_metadata_splits": (
        "sglang/kernels/ops/attention/metadata.py",
        TRITON,
        ("get_num_kv_splits_triton",),
    ),
    "fused_metadata_copy": (
        "sglang/kernels/ops/attention/dsa/fused_metadata_copy.py",
        JIT,
        ("fused_metadata_copy_cuda", "fused_metadata_copy_multi_cuda"),
    ),
}
# Kernel files that import platform helpers from the server's ``sglang.srt.utils``.
_SERVER_UTILS = {"speculative_cache_locs"}
# What the JIT path reads besides the kernel module.
JIT_SUPPORT_FILES = (
    "sglang/kernels/jit/__init__.py",
    "sglang/kernels/jit/utils/__init__.py",
    "sglang/kernels/jit/utils/compile/loader.py",
    "sglang/kernels/jit/csrc/elementwise/fused_metadata_copy.cuh",
    "sglang/kernels/jit/include",
    "sglang/srt/environ.py",
)
# Wheel members extracted for --upstream WHEEL (everything the two families read).
WHEEL_PREFIXES = ("sglang/kernels/", "sglang/srt/environ.py", "sglang/_version.py", "sglang/version.py")

# Parents whose __init__ imports the server; entered as bare package stubs.
_STUB_PACKAGES = ("sglang", "sglang.kernels", "sglang.srt.utils")
_STUB_MARK = "__sgl_meta_upstream_stub__"


@dataclass
class Location:
    """Where the upstream package was found (``site`` holds ``sglang/``)."""

    requested: str
    site: Optional[Path] = None
    source: str = ""  # "installed package", "site dir", "package dir", "wheel"
    version: Optional[str] = None
    problem: Optional[str] = None  # why no package was found


def locate(spec: str = "auto", cache_dir: Optional[Path] = None) -> Location:
    """Resolve ``--upstream`` (``auto``, a site dir, a ``sglang/`` dir or a wheel)."""
    loc = Location(requested=spec)
    if spec == "auto":
        try:
            found = importlib.util.find_spec("sglang")
        except (ImportError, ValueError) as e:  # a broken or stubbed entry in sys.modules
            found, loc.problem = None, f"no sglang: find_spec failed ({e})"
        if found is None:
            loc.problem = loc.problem or (
                "no sglang: no importable `sglang` package (install it with "
                f"`pip install --no-deps sglang=={EXPECTED_VERSION}`, or pass --upstream PATH "
                "with a site dir or the wheel)"
            )
            return loc
        pkg = Path(found.origin).parent if found.origin else Path(list(found.submodule_search_locations)[0])
        loc.site, loc.source = pkg.parent, "installed package"
    else:
        path = Path(spec).expanduser()
        if path.is_file() and path.suffix == ".whl":
            try:
                loc.site, loc.source = _extract_wheel(path, cache_dir), "wheel"
            except (OSError, zipfile.BadZipFile) as e:
                loc.problem = f"no sglang: cannot read wheel {path}: {e}"
                return loc
        elif (path / "sglang").is_dir():
            loc.site, loc.source = path, "site dir"
        elif path.name == "sglang" and (path / "kernels").is_dir():
            loc.site, loc.source = path.parent, "package dir"
        else:
            loc.problem = f"no sglang: {path} is neither a wheel, a site dir holding sglang/, nor the sglang/ package"
            return loc
    loc.site = loc.site.resolve()
    loc.version = read_version(loc.site)
    return loc


def read_version(site: Path) -> Optional[str]:
    """The package version from ``sglang/_version.py``, else its dist-info."""
    try:
        text = (site / "sglang" / "_version.py").read_text()
        m = re.search(r"""^__version__\s*=.*?['"]([^'"]+)['"]""", text, re.M)
        if m:
            return m.group(1)
    except OSError:
        pass
    for meta in sorted(site.glob("sglang-*.dist-info/METADATA")):
        m = re.search(r"^Version:\s*(\S+)", meta.read_text(errors="replace"), re.M)
        if m:
            return m.group(1)
    return None


def _extract_wheel(wheel: Path, cache_dir: Optional[Path]) -> Path:
    """Extract the members the bench reads into ``cache_dir/<wheel stem>``, once."""
    root = Path(cache_dir) if cache_dir else Path(tempfile.gettempdir()) / "sgl_meta_upstream"
    st = wheel.stat()
    dest = root / f"{wheel.stem}-{st.st_size}"
    done = dest / ".extracted"
    if done.exists():
        return dest
    with zipfile.ZipFile(wheel) as zf:
        members = [n for n in zf.namelist() if n.startswith(WHEEL_PREFIXES) or n.endswith(".dist-info/METADATA")]
        zf.extractall(dest, members)
    done.write_text(str(wheel) + "\n")
    return dest


# -- what is there -------------------------------------------------------------


def cuda_home() -> Optional[Path]:
    """The CUDA toolkit root with ``bin/nvcc`` and a linkable ``libcudart``.

    SGLang's JIT resolves ``CUDA_HOME``/``CUDA_PATH``, else the parent of the
    ``nvcc`` on ``PATH``, and links ``-L<home>/lib64 -lcudart``; an ``nvcc`` that
    is a wrapper script outside the toolkit (``/usr/local/bin/nvcc``) would give
    a home without ``lib64``, so the candidates are checked for the library.
    """
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates += [str(Path(nvcc).parent.parent), str(Path(os.path.realpath(nvcc)).parent.parent)]
    candidates.append("/usr/local/cuda")
    for c in candidates:
        if not c:
            continue
        home = Path(c)
        if (home / "bin" / "nvcc").exists() and list((home / "lib64").glob("libcudart.so*")):
            return home
    return None


def _dist_version(*names: str) -> Optional[str]:
    for n in names:
        try:
            return importlib.metadata.version(n)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _has_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


@dataclass
class Probe:
    """What the two kernel families need, and what is missing for each."""

    location: Location
    gpu: bool
    tools: dict = field(default_factory=dict)  # name -> version / path, or None
    missing: dict = field(default_factory=dict)  # family -> [reasons]
    warnings: list = field(default_factory=list)

    def runnable(self, family: str) -> bool:
        return not self.missing.get(family)

    @property
    def any_runnable(self) -> bool:
        return any(self.runnable(f) for f in FAMILIES)

    def summary(self) -> str:
        """One line per family: what runs, or what is missing."""
        parts = []
        for fam in FAMILIES:
            label = "Triton kernels" if fam == TRITON else "DSA copy (tvm-ffi JIT)"
            parts.append(f"{label}: " + ("ok" if self.runnable(fam) else "skipped, " + "; ".join(self.missing[fam])))
        return " | ".join(parts)


def probe(location: Location, gpu: Optional[bool] = None) -> Probe:
    """Check the files and tools each family needs (imports nothing heavy)."""
    if gpu is None:
        import torch

        gpu = torch.cuda.is_available()
    p = Probe(location=location, gpu=gpu)
    home = cuda_home()
    p.tools = {
        "triton": _dist_version("triton") if _has_module("triton") else None,
        "apache-tvm-ffi": _dist_version("apache-tvm-ffi") if _has_module("tvm_ffi") else None,
        "msgspec": _dist_version("msgspec") if _has_module("msgspec") else None,
        "cuda_home": str(home) if home else None,
        "ninja": shutil.which("ninja"),
        "c++": shutil.which(os.environ.get("CXX", "c++")),
    }
    common = []
    if location.problem:
        common.append(location.problem)
    if not gpu:
        common.append("no GPU: SGLang's Triton and JIT kernels need a CUDA device")
    for fam in FAMILIES:
        p.missing[fam] = list(common)
    site = location.site
    if site is not None:
        for key, (rel, fam, _) in KERNEL_FILES.items():
            if not (site / rel).is_file():
                p.missing[fam].append(f"no {rel} in {site}")
        for rel in JIT_SUPPORT_FILES:
            if not (site / rel).exists():
                p.missing[JIT].append(f"no {rel} in {site}")
        if location.version and location.version != EXPECTED_VERSION:
            p.warnings.append(f"sglang {location.version} found, the comparison is written against {EXPECTED_VERSION}")
    if not p.tools["triton"]:
        p.missing[TRITON].append("no triton")
    if not p.tools["apache-tvm-ffi"]:
        p.missing[JIT].append("no tvm-ffi (apache-tvm-ffi==0.1.11)")
    elif p.tools["apache-tvm-ffi"] != "0.1.11":
        p.warnings.append(f"apache-tvm-ffi {p.tools['apache-tvm-ffi']} (sglang {EXPECTED_VERSION} pins 0.1.11)")
    if not p.tools["msgspec"]:
        p.missing[JIT].append("no msgspec (SGLang's JIT build cache needs it)")
    if not home:
        p.missing[JIT].append("no nvcc (CUDA toolkit with bin/nvcc and lib64/libcudart; set CUDA_HOME)")
    if not p.tools["ninja"]:
        p.missing[JIT].append("no ninja binary on PATH")
    if not p.tools["c++"]:
        p.missing[JIT].append("no C++ compiler (c++ or $CXX)")
    return p


# -- loading ---------------------------------------------------------------------


class Kernels:
    """One loaded set of upstream kernel functions (``kernels.<name>``), or None
    where a family could not be loaded (``errors[family]`` says why)."""

    def __init__(self, tag: str):
        self.tag = tag
        self.modules: dict = {}
        self.errors: dict = {}

    def has(self, name: str) -> bool:
        return getattr(self, name, None) is not None

    def adopt(self, other: "Kernels", keys) -> None:
        """Take ``other``'s modules for ``keys`` (e.g. a cold-start instance that
        has compiled them already, so the rows do not compile them again)."""
        for key in keys:
            if key in other.modules:
                self.modules[key] = other.modules[key]
                for fn in KERNEL_FILES[key][2]:
                    setattr(self, fn, getattr(other, fn, None))


_counter = itertools.count()


def load(probe_result: Probe, families=FAMILIES, tag: Optional[str] = None) -> Kernels:
    """Execute the kernel files of the runnable ``families`` as fresh modules.

    Every call makes new module objects (new Triton ``JITFunction``s with empty
    in-memory caches, a new ``cache_once`` for the JIT modules): with fresh
    ``TRITON_CACHE_DIR``/``SGLANG_JIT_CACHE_DIR`` that is a cold start.
    """
    site = probe_result.location.site
    tag = tag or f"k{next(_counter)}"
    k = Kernels(tag)
    for key, (rel, fam, fns) in KERNEL_FILES.items():
        if fam not in families or not probe_result.runnable(fam):
            continue
        try:
            if fam == JIT:
                prepare_jit(site)
            if key in _SERVER_UTILS:
                with _server_utils(site):
                    mod = _exec_file(site / rel, f"_sgl_meta_upstream.{tag}.{key}")
            else:
                mod = _exec_file(site / rel, f"_sgl_meta_upstream.{tag}.{key}")
        except Exception as e:  # report and carry on with what loaded
            k.errors.setdefault(fam, []).append(f"loading {rel} failed: {type(e).__name__}: {e}")
            continue
        k.modules[key] = mod
        for fn in fns:
            setattr(k, fn, getattr(mod, fn, None))
    return k


def _exec_file(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # Triton and inspect look modules up by name
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return mod


_jit_site: Optional[Path] = None
_jit_import_s: Optional[float] = None


def prepare_jit(site: Path) -> None:
    """Make ``sglang.kernels.jit.utils`` importable from ``site`` without the server."""
    global _jit_site
    if _jit_site == site:
        return
    existing = sys.modules.get("sglang")
    if existing is not None and not getattr(existing, _STUB_MARK, False):
        # A real sglang is imported already: its own jit utils are the ones to use.
        pkg = Path(getattr(existing, "__file__", "") or "").parent
        if pkg.parent.resolve() != site:
            raise RuntimeError(f"a different sglang ({pkg}) is imported already in this process")
        _jit_site = site
        return
    unstub()
    if "CUDA_HOME" not in os.environ and "CUDA_PATH" not in os.environ and cuda_home() is not None:
        os.environ["CUDA_HOME"] = str(cuda_home())  # see cuda_home(): the JIT links lib64/libcudart
    for name in _STUB_PACKAGES:
        _stub_package(name, site / Path(*name.split(".")))
    sys.modules["sglang.srt.utils.common"] = _server_helpers()
    import sglang.kernels.jit.utils  # noqa: F401  (the installed file, through the stubs)

    _jit_site = site


def unstub() -> None:
    """Drop the stubbed ``sglang`` tree (and everything imported under it) from ``sys.modules``."""
    global _jit_site
    root = sys.modules.get("sglang")
    if root is None or not getattr(root, _STUB_MARK, False):
        return
    for name in [n for n in sys.modules if n == "sglang" or n.startswith("sglang.")]:
        del sys.modules[name]
    _jit_site = None


def _stub_package(name: str, path: Path) -> None:
    mod = types.ModuleType(name, f"Package stub ({path}): its __init__ is not executed by sgl_meta.bench.upstream.")
    spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
    spec.submodule_search_locations = [str(path)]
    mod.__spec__, mod.__path__, mod.__package__ = spec, [str(path)], name
    setattr(mod, _STUB_MARK, True)
    sys.modules[name] = mod


def _server_helpers() -> types.ModuleType:
    """``is_cuda`` and ``get_cuda_version``: what the JIT loader imports from the
    server's utility module (which itself needs the whole server's dependencies)."""
    import torch

    mod = types.ModuleType("sglang.srt.utils.common", "Stand-in for the two helpers SGLang's JIT loader uses.")
    mod.is_cuda = lambda: torch.cuda.is_available() and torch.version.cuda is not None
    mod.get_cuda_version = lambda: tuple(int(x) for x in torch.version.cuda.split(".")) if torch.version.cuda else (0, 0)
    setattr(mod, _STUB_MARK, True)
    return mod


def next_power_of_2(n: int) -> int:
    """The server's ``next_power_of_2``: the bounds SGLang's callers pass its Triton kernels."""
    return 1 << (n - 1).bit_length() if n > 0 else 1


@contextlib.contextmanager
def _server_utils(site: Path):
    """``sglang.srt.utils`` while a kernel file imports it: the platform checks
    and ``next_power_of_2`` (the server's module needs the whole server). Where
    a real sglang is imported already, its own module serves; the stand-ins
    leave ``sys.modules`` as they found it."""
    import torch

    if "sglang.srt.utils" in sys.modules and not getattr(sys.modules["sglang.srt.utils"], _STUB_MARK, False):
        yield
        return
    cuda = torch.cuda.is_available() and torch.version.cuda is not None
    utils = types.ModuleType("sglang.srt.utils", "Stand-in for the platform helpers a kernel file imports.")
    for name in ("is_cpu", "is_hip", "is_musa", "is_npu", "is_xpu"):
        setattr(utils, name, lambda: False)
    utils.is_cuda = lambda: cuda
    utils.next_power_of_2 = next_power_of_2
    setattr(utils, _STUB_MARK, True)
    added = []
    for name in ("sglang", "sglang.srt"):
        if name not in sys.modules:
            _stub_package(name, site / Path(*name.split(".")))
            added.append(name)
    saved = sys.modules.get("sglang.srt.utils")
    sys.modules["sglang.srt.utils"] = utils
    try:
        yield
    finally:
        if saved is None:
            del sys.modules["sglang.srt.utils"]
        else:
            sys.modules["sglang.srt.utils"] = saved
        for name in added:
            sys.modules.pop(name, None)


def import_tvm_ffi() -> dict:
    """Import tvm-ffi once, timed (its first import may build a DLPack addon);
    reports whether torch tensors take tvm-ffi's fast C exchange path."""
    global _jit_import_s
    import torch

    t0 = time.perf_counter()
    import tvm_ffi  # noqa: F401

    if _jit_import_s is None:
        _jit_import_s = time.perf_counter() - t0
    return {
        "import_s": _jit_import_s,
        "torch_c_dlpack": hasattr(torch.Tensor, "__dlpack_c_exchange_api__"),
    }
