"""Import stub for FlashInfer, for the CPU tests only: the children of
tests/vllm_plugin/ that run vLLM's FlashInfer backend on CPU tensors put this
folder on PYTHONPATH (``vllm_env.child_env(flashinfer_stub=True)``). It is not
part of the sgl_meta package and is on no path a vLLM server imports from,
where vLLM would take it for the real package.

``vllm/v1/attention/backends/flashinfer.py`` imports FlashInfer's wrappers and
functions at the top, and the tests need only its Triton kernel
``_copy_page_indices_kernel`` and the metadata builder's host code. Every name
asked of this package or its submodules is a stand-in that raises when called
(a class for a capitalized name, since vLLM's annotations combine them with
``|``), so nothing here can pass for FlashInfer's kernels.
"""


def _missing(name: str):
    raise RuntimeError(f"flashinfer import stub (tests/vllm_plugin/import_stubs): {name} is not FlashInfer's")


def __getattr__(name: str):
    if name.startswith("__"):
        raise AttributeError(name)
    if name[:1].isupper():
        return type(name, (), {"__init__": lambda self, *args, **kwargs: _missing(name)})

    def stand_in(*args, **kwargs):
        _missing(name)

    stand_in.__name__ = name
    return stand_in
