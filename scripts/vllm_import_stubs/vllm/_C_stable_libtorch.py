"""Stand-in for vLLM's compiled ops module on a GPU machine that cannot receive it.

vLLM 0.33.0's ``_C_stable_libtorch.abi3.so`` is 92 MB (64 MB as xz), more than one
device carry holds (scripts/pack_vllm.sh). ``vllm/platforms/cuda.py`` imports it at the
top, and what the carry runs (vLLM's Model Runner V2 block tables and input batch, their
Triton kernels, vLLM's unit tests of them) calls only these of its ops:

* ``get_cuda_view_from_cpu_tensor``: a CUDA tensor over a pinned host tensor's memory
  (``UvaBuffer``); with unified addressing, pinned host memory is mapped into the device
  at the same address, so the view is that pointer seen as device memory, kept alive by
  the host tensor;
* the CUTLASS capability queries that fp8 / MoE modules evaluate at import: answered
  "not supported", so nothing reaches a CUTLASS kernel.

Any other ``torch.ops._C`` op stays missing and fails by name. ``vllm_flash_attn/_vllm_fa2_C.py``
beside this file stands in for the flash-attention extension the same way.
"""

import torch

_TYPESTR = {
    torch.bool: "|b1", torch.uint8: "|u1", torch.int8: "|i1", torch.int16: "<i2",
    torch.int32: "<i4", torch.int64: "<i8", torch.float16: "<f2", torch.float32: "<f4",
    torch.float64: "<f8",
}


class _PinnedView:
    def __init__(self, cpu: torch.Tensor):
        if not cpu.is_pinned():
            raise ValueError("get_cuda_view_from_cpu_tensor: the tensor must be in pinned memory")
        if cpu.dtype not in _TYPESTR:
            raise TypeError(f"get_cuda_view_from_cpu_tensor: dtype {cpu.dtype} has no array-interface type")
        self.host = cpu  # the memory's owner, released with the view
        size = cpu.element_size()
        self.__cuda_array_interface__ = {
            "shape": tuple(cpu.shape),
            "strides": tuple(s * size for s in cpu.stride()),
            "typestr": _TYPESTR[cpu.dtype],
            "data": (cpu.data_ptr(), False),
            "version": 3,
        }


_lib = torch.library.Library("_C", "FRAGMENT")
_lib.define("get_cuda_view_from_cpu_tensor(Tensor cpu_tensor) -> Tensor")
_lib.impl("get_cuda_view_from_cpu_tensor", lambda t: torch.as_tensor(_PinnedView(t), device="cuda"), "CPU")
for _name in ("cutlass_scaled_mm_supports_fp8", "cutlass_scaled_mm_supports_block_fp8", "cutlass_group_gemm_supported"):
    _lib.define(f"{_name}(int cuda_device_capability) -> bool")
    _lib.impl(_name, lambda capability: False, "CompositeExplicitAutograd")
