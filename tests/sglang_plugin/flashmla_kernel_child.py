"""Run in a child process with TRITON_INTERPRET=1 (test_flashmla_kernel.py): SGLang
0.5.23's own ``create_flashmla_kv_indices_triton`` (interpreted) against the
plugin's stand-in, launched as each of SGLang's backends launches it, on
poisoned buffers. The stand-in is bound to a kernel that fails if called: each
launch must be one ours covers. Prints "ok <cases>" or raises.

    python flashmla_kernel_child.py <seed> <cases>
"""

from __future__ import annotations

import os
import sys

assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"

import torch  # noqa: E402

from stand_in_kit import NotCalled  # noqa: E402

from sgl_meta.sglang.kernels import FlashmlaKvIndicesKernel  # noqa: E402
from sglang.kernels.ops.attention.kv_indices import (  # noqa: E402
    create_flashmla_kv_indices_triton,
    get_num_kv_index_blocks_flashmla,
)



def main() -> None:
    seed, cases = int(sys.argv[1]), int(sys.argv[2])
    gen = torch.Generator().manual_seed(seed)
    ours = FlashmlaKvIndicesKernel.bind(NotCalled())

    def rand(lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=gen))

    for case in range(cases):
        caller = ("trtllm_mla", "flashmla", "start")[case % 3]
        ps = 64 if caller == "flashmla" else (16, 32, 64, 128)[rand(0, 3)]
        width = rand(1, 300)  # block-table columns (max_blocks)
        bs, pool = rand(1, 6), 9
        row = width * ps + rand(0, 2 * ps)
        r2t = torch.randint(0, 2**20, (pool, row), generator=gen, dtype=torch.int64).to(torch.int32)
        req = torch.randperm(pool, generator=gen)[:bs].to(torch.int64 if case % 2 else torch.int32)
        start = torch.randint(0, ps + 1, (bs,), generator=gen, dtype=torch.int64) if caller == "start" else None
        room = row - (start if start is not None else torch.zeros(bs, dtype=torch.int64))
        lens = torch.stack([torch.randint(0, int(min(r, width * ps)) + 1, (1,), generator=gen)[0] for r in room])
        lens = lens.to(torch.int32) if case % 4 < 2 else lens
        theirs = torch.full((bs + 2, width), -7, dtype=torch.int32)  # rows past bs stay poisoned
        mine = theirs.clone()
        grid = (bs, get_num_kv_index_blocks_flashmla(width, ps))
        for kernel, table in ((create_flashmla_kv_indices_triton, theirs), (ours, mine)):
            out = table[:bs]
            if caller == "flashmla":  # flashmla_backend: the default PAGED_SIZE, the table's own row stride
                kernel[grid](r2t, req, lens, None, out, r2t.stride(0), out.stride(0))
            else:  # trtllm_mla_backend: max_blocks as the stride, PAGED_SIZE by keyword
                kernel[grid](r2t, req, lens, start, out, r2t.stride(0), width, PAGED_SIZE=ps)
        if not torch.equal(mine, theirs):
            diff = (mine != theirs).nonzero().tolist()[:5]
            raise AssertionError(f"case {case} ({caller}, bs {bs}, width {width}, page {ps}): first differing "
                                 f"elements {diff}")
    print(f"ok {cases}")


if __name__ == "__main__":
    main()
