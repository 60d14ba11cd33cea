"""Build sgl_meta._C: the operator library (LibTorch stable ABI + Python abi3).

Environment switches:
  SGLMETA_CPU_ONLY=1      build only the CPU kernels (also automatic with no nvcc
                           or a CPU-only torch)
  TORCH_CUDA_ARCH_LIST     GPU targets; default covers Turing .. Blackwell, e.g.
                           TORCH_CUDA_ARCH_LIST=9.0 for a fast local build
  MAX_JOBS                 parallel compile jobs (ninja)
  SGLMETA_LOCAL_VERSION   appended as a PEP 440 local version, e.g. cu130
"""

import os
import sysconfig
from pathlib import Path

# torch's extension builder takes CUDA_HOME from `which nvcc` when unset, which
# finds a /usr/local/bin symlink on some machines and then misses libcudart.
if "CUDA_HOME" not in os.environ and Path("/usr/local/cuda/bin/nvcc").exists():
    os.environ["CUDA_HOME"] = "/usr/local/cuda"

import torch  # noqa: E402
from setuptools import setup  # noqa: E402
from torch.utils.cpp_extension import (  # noqa: E402
    CUDA_HOME,
    BuildExtension,
    CppExtension,
    CUDAExtension,
)

# Absolute: PEP 517 front ends run this file as "setup.py", and ninja compiles
# from the build folder, where a relative include dir would miss csrc/.
ROOT = Path(__file__).resolve().parent
CSRC = ROOT / "csrc"

# Every target nvcc 13 still supports that a server GPU may be: T4, A100, A10/A40,
# L4/L40, H100/H200, B200, RTX PRO 6000 Blackwell; PTX of the newest for the rest.
DEFAULT_ARCH_LIST = "7.5;8.0;8.6;8.9;9.0;10.0;12.0+PTX"

# Stable-ABI floor: the binary uses only shims present in torch 2.10, so it loads
# in every torch >= 2.10. (py_limited_api=True below makes torch define
# Py_LIMITED_API=0x030A0000: Python 3.10's stable C API only, so one cp310-abi3
# wheel serves every CPython >= 3.10.)
TORCH_TARGET_VERSION = "0x020a000000000000"


def want_cuda() -> bool:
    if os.environ.get("SGLMETA_CPU_ONLY", "0") == "1":
        return False
    return CUDA_HOME is not None and torch.version.cuda is not None


def version() -> str:
    base = (ROOT / "sgl_meta" / "VERSION").read_text().strip()
    local = os.environ.get("SGLMETA_LOCAL_VERSION", "").strip()
    return f"{base}+{local}" if local else base


def extension():
    with_cuda = want_cuda()
    sources = sorted(str(p.relative_to(ROOT)) for p in CSRC.rglob("*.cpp"))
    macros = [("TORCH_TARGET_VERSION", TORCH_TARGET_VERSION)]
    cxx = ["-O3", "-std=c++17"]
    if not with_cuda:
        return CppExtension(
            "sgl_meta._C",
            sources,
            include_dirs=[str(CSRC)],
            define_macros=macros,
            extra_compile_args={"cxx": cxx},
            py_limited_api=True,
        )
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", DEFAULT_ARCH_LIST)
    sources += sorted(str(p.relative_to(ROOT)) for p in CSRC.rglob("*.cu"))
    macros += [("USE_CUDA", None), ("SGL_META_WITH_CUDA", None)]
    nvcc = ["-O3", "-std=c++17", "-lineinfo", "--threads=0"]
    return CUDAExtension(
        "sgl_meta._C",
        sources,
        include_dirs=[str(CSRC)],
        define_macros=macros,
        extra_compile_args={"cxx": cxx, "nvcc": nvcc},
        py_limited_api=True,
    )


class BuildExt(BuildExtension.with_options(use_ninja=True)):
    def build_extensions(self):
        # A CPython built with an rpath to its own lib dir (pyenv does this) puts
        # -Wl,-rpath,<prefix>/lib into LDSHARED. The limited-API extension never
        # links libpython, so that would only leave the build machine's path in
        # the wheel as a dangling RPATH.
        own_rpath = f"-Wl,-rpath,{sysconfig.get_config_var('LIBDIR')}"
        for attr in ("linker_so", "linker_so_cxx"):
            if hasattr(self.compiler, attr):
                setattr(self.compiler, attr, [a for a in getattr(self.compiler, attr) if a != own_rpath])
        super().build_extensions()


setup(
    version=version(),
    ext_modules=[extension()],
    cmdclass={"build_ext": BuildExt},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)
