"""Import stubs for the attention libraries SGLang imports but this benchmark never runs.

SGLang's attention modules import ``sgl_kernel``, ``flashinfer``, ``deep_gemm`` and
``flash_mla`` at module level on CUDA machines. The metadata path measured here
calls none of them (the planners that do are left out, see ``backends.py``), so
where a library is absent it is replaced by a stub package: any attribute is a
class whose call raises :class:`StubCalled`, naming what was called. Classes
named ``*Wrapper`` (FlashInfer's planner/runner objects, which the backends
construct in ``__init__``) can be built, but every method of them raises.
A real, importable library is never shadowed.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types

ROOTS = ("sgl_kernel", "flashinfer", "deep_gemm", "flash_mla")
"""Top-level packages stubbed when they are not installed."""


ANSWERS = {
    # A capability query FlashInfer's backend asks while it is built: "grouped decode
    # kernels compiled for this head ratio" (yes: tensor-core decode stays off).
    "flashinfer.decode._grouped_size_compiled_for_decode_kernels": lambda *_args, **_kwargs: True,
    # Sizing queries for the TRT-LLM MLA/MHA multi-CTA counter workspace the backends allocate.
    "flashinfer.utils.get_device_sm_count": lambda device: _sm_count(device),
    "flashinfer.utils.get_trtllm_gen_multi_ctas_kv_counter_bytes": lambda bs, heads, sms: 4 * bs * heads,
    # The Triton backend asks whether to launch its kernels with programmatic dependent launch.
    "sgl_kernel.utils.is_arch_support_pdl": lambda *_args, **_kwargs: False,
    # DSA asks DeepGEMM for the SM count it plans its paged-MQA schedule over.
    "deep_gemm.get_num_sms": lambda: _sm_count(None),
}
"""Stubbed names that answer instead of raising: construction-time queries, no kernels."""


def _sm_count(device) -> int:
    import torch

    return torch.cuda.get_device_properties(device).multi_processor_count if torch.cuda.is_available() else 1


class StubCalled(RuntimeError):
    """A stubbed attention library was called: the measured path must not do that."""


def _raiser(name: str):
    def call(*_args, **_kwargs):
        raise StubCalled(f"{name} is a stub (sgl_meta.bench.sglang_step.stubs): the library is not installed")

    return call


class _StubMeta(type):
    def __call__(cls, *args, **kwargs):
        if not cls.__name__.endswith("Wrapper"):
            _raiser(cls.__qualname__)()
        return super().__call__(*args, **kwargs)

    def __getattr__(cls, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        name = f"{cls.__qualname__}.{attr}"
        return ANSWERS.get(name) or _raiser(name)


class _Stub(metaclass=_StubMeta):
    def __init__(self, *_args, **_kwargs):
        pass

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _raiser(f"{type(self).__qualname__}.{attr}")


class _StubModule(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        answer = ANSWERS.get(f"{self.__name__}.{attr}")
        if answer is not None:
            return answer
        stub = _StubMeta(attr, (_Stub,), {"__qualname__": f"{self.__name__}.{attr}", "__module__": self.__name__})
        setattr(self, attr, stub)
        return stub


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots: tuple):
        self.roots = roots

    def find_spec(self, fullname, path=None, target=None):
        if fullname.partition(".")[0] not in self.roots:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        module.__version__ = "0.0.0+stub"
        return module

    def exec_module(self, module):
        pass


def install(roots: tuple = ROOTS) -> list:
    """Stub each of ``roots`` that is not importable; the names stubbed."""
    missing = tuple(r for r in roots if r not in sys.modules and importlib.util.find_spec(r) is None)
    if missing and not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.append(_Finder(missing))
    return list(missing)
