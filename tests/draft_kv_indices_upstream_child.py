"""Run in a child process with TRITON_INTERPRET=1 (tests/test_build_draft_decode_kv_indices.py):
SGLang 0.5.23's own generate_draft_decode_kv_indices on CPU, launched as its
Triton and FlashInfer multi-step draft backends launch it, against
build_draft_decode_kv_indices on the same poisoned buffers. Prints "ok <cases>"
or raises.

    python tests/draft_kv_indices_upstream_child.py <seed> <cases> [<site dir>]
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"

import torch  # noqa: E402

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]
import sgl_meta  # noqa: E402
from draft_kv_indices_cases import Case, clone_outputs, make  # noqa: E402


def main() -> None:
    seed, cases = int(sys.argv[1]), int(sys.argv[2])
    if len(sys.argv) > 3:
        sys.path.insert(0, sys.argv[3])
    from sglang.kernels.ops.speculative.cache_locs import generate_draft_decode_kv_indices as upstream

    gen = torch.Generator().manual_seed(seed)
    rnd = torch.Generator().manual_seed(seed + 1)

    def pick(*options):
        return options[int(torch.randint(0, len(options), (1,), generator=rnd))]

    def npow2(n: int) -> int:
        return 1 << (n - 1).bit_length() if n > 1 else 1

    for n in range(cases):
        window = pick(0, 0, 0, 16, 100)
        case = Case(bs=pick(1, 2, 5, 9), topk=pick(1, 1, 2, 4), num_steps=pick(1, 2, 3, 5),
                    page_size=pick(1, 1, 4, 16, 64), window_size=window, sink_size=pick(0, 4) if window else 0,
                    max_len=pick(1, 40, 300, 700), index64=pick(False, True), out64=pick(False, True),
                    indptr64=pick(False, True))
        kw = make(case, gen, "cpu")
        for k in ("kv_indices", "kv_indptr"):
            kw[k] = kw[k][: case.num_steps].contiguous()
        up, ours = clone_outputs(kw), clone_outputs(kw)
        num_seqs, topk, K = case.bs, case.topk, case.num_steps
        blocks = pick(0, 0, 1, 3)  # 0: the NUM_STEPS=0 launch (Triton backend), else FlashInfer's token blocks
        grid = (K * max(blocks, 1), num_seqs, topk)
        upstream[grid](
            up["req_pool_indices"], up["req_to_token"], up["seq_lens"], up["kv_indices"], up["kv_indptr"],
            up["positions"], up["req_to_token"].stride(0), up["kv_indices"].shape[1], up["kv_indptr"].shape[1],
            npow2(num_seqs), npow2(K), npow2(num_seqs * topk), case.page_size, case.window_size, case.sink_size,
            NUM_STEPS=K if blocks else 0)
        sgl_meta.build_draft_decode_kv_indices(**ours)
        for k in ("kv_indices", "kv_indptr"):
            if not torch.equal(ours[k], up[k]):
                diff = (ours[k] != up[k]).nonzero()
                first = tuple(diff[0].tolist())
                raise AssertionError(f"{case}, blocks {blocks}: {k} differs at {diff.shape[0]} elements, first "
                                     f"{first}: ours {ours[k][first].item()}, upstream {up[k][first].item()}")
    print(f"ok {cases}")


if __name__ == "__main__":
    main()
