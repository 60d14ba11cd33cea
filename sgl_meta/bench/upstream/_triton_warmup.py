"""A one-store Triton kernel, launched once before the cold-start timings.

Triton builds its CUDA driver helpers the first time any kernel launches in a
process (a one-off that a server pays once, whatever kernels it runs); running
this first keeps that out of the first family's cold-start number.
"""

import triton
import triton.language as tl


@triton.jit
def _store_one(ptr):
    tl.store(ptr, 1)


def warm_up(device) -> None:
    import torch

    x = torch.zeros(1, dtype=torch.int32, device=device)
    _store_one[(1,)](x)
    torch.cuda.synchronize(device)
