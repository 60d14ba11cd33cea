"""Run in a child process with TRITON_INTERPRET=1 (test_draft_kv_indices_kernel.py):
SGLang 0.5.23's own ``generate_draft_decode_kv_indices`` (interpreted) against the
plugin's stand-in, launched as its Triton backend and its FlashInfer backend launch
it (one token block, ``NUM_STEPS = 0``, or ``NUM_STEPS`` = steps over 1 to 4 token
blocks per step), on poisoned buffers of their dtypes (int64 and int32 ids). The stand-in is bound to a kernel that fails if called:
each launch must be one ours covers. Prints "ok <cases>" or raises.

    python draft_kv_indices_kernel_child.py <seed> <cases>
"""

from __future__ import annotations

import os
import sys

assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"

import torch  # noqa: E402

from stand_in_kit import NotCalled  # noqa: E402

from sgl_meta.sglang.kernels import DraftDecodeKvIndicesKernel  # noqa: E402
from sglang.kernels.ops.speculative.cache_locs import generate_draft_decode_kv_indices  # noqa: E402
from sglang.srt.utils import next_power_of_2  # noqa: E402



def main() -> None:
    seed, cases = int(sys.argv[1]), int(sys.argv[2])
    gen = torch.Generator().manual_seed(seed)
    ours = DraftDecodeKvIndicesKernel.bind(NotCalled())

    def rand(lo, hi):
        return int(torch.randint(lo, hi + 1, (1,), generator=gen))

    for case in range(cases):
        caller = ("triton", "flashinfer", "flashinfer_blocks")[case % 3]
        blocks = rand(1, 4)
        seqs, topk, steps = rand(1, 6), (1, 2, 4)[rand(0, 2)], rand(1, 5)
        ps = (1, 16, 64)[rand(0, 2)]
        window, sink = ((0, 0), (0, 0), (32, 4))[rand(0, 2)]
        max_bs = seqs + rand(0, 3)  # the graph buffers' capacity
        ctx = rand(1, 400)
        pool, row = 9, ctx + topk * (-(-(ps - 1 + steps) // ps) * ps + steps)  # each chain's pages
        r2t = torch.randint(-5, 2**20, (pool, row), generator=gen, dtype=torch.int64).to(torch.int32)
        req = torch.randperm(pool, generator=gen)[:max_bs]
        lens = torch.randint(0, ctx + 1, (seqs,), generator=gen)
        positions = (lens + 1).repeat_interleave(topk)
        dtype = torch.int64 if caller == "triton" else torch.int32
        width = max_bs * topk * (ctx + steps)
        buffers = {}
        for who in ("sglang", "ours"):
            buffers[who] = (torch.full((steps, width), -7, dtype=dtype), torch.full((steps, max_bs * topk + 1), -7,
                                                                                  dtype=torch.int32))
            buffers[who][1][:, 0] = 0
        for kernel, (kv_indices, kv_indptr) in ((generate_draft_decode_kv_indices, buffers["sglang"]),
                                                (ours, buffers["ours"])):
            args = (req, r2t, lens, kv_indices, kv_indptr, positions, r2t.stride(0), kv_indices.shape[1],
                    kv_indptr.shape[1], next_power_of_2(seqs), next_power_of_2(steps), next_power_of_2(seqs * topk),
                    ps, window, sink)
            if caller == "triton":  # TritonMultiStepDraftBackend.common_template
                kernel[(steps, seqs, topk)](*args, ENTRY_PAGE_SIZE=1, v2p=None, TRANSLATE=False)
            elif caller == "flashinfer":  # FlashInferMultiStepDraftBackend.common_template, one token block
                kernel[(steps, seqs, topk)](*args, ENTRY_PAGE_SIZE=1, v2p=None, TRANSLATE=False, NUM_STEPS=0)
            else:  # the same, with token blocks
                kernel[(steps * blocks, seqs, topk)](*args, ENTRY_PAGE_SIZE=1, v2p=None, TRANSLATE=False,
                                                     NUM_STEPS=steps)
        for i, name in enumerate(("kv_indices", "kv_indptr")):
            mine, theirs = buffers["ours"][i], buffers["sglang"][i]
            if not torch.equal(mine, theirs):
                diff = (mine != theirs).nonzero().tolist()[:5]
                raise AssertionError(f"case {case} ({caller}, seqs {seqs}, topk {topk}, steps {steps}, page {ps}, "
                                     f"window {window}): {name} differs first at {diff}")
    print(f"ok {cases}")


if __name__ == "__main__":
    main()
