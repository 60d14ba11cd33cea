"""SGLang's CUDA-graph batch-size buckets and padding a batch up to one.

SGLang captures one decode graph per batch size in a fixed list and replays the
smallest captured size that holds the running batch (``bisect_left``), padding the
tail rows. The default lists
(``sglang.srt.arg_groups.cuda_graph_hook.generate_decode_cuda_graph_batch_sizes``):

* no speculative decoding: ``[1, 2, 4, 8, 12] + range(16, 257, 8)``
  (then ``range(272, 512, 16)`` and ``range(512, max_bs + 1, 32)`` above 256),
* speculative decoding, denser at small sizes because each step carries several
  tokens per request: ``range(1, 9) + range(10, 33, 2) + range(40, 65, 4)
  + range(72, 257, 8)`` (then ``range(272, max_bs + 1, 16)``),

cut to ``<= max_bs`` with ``max_bs`` itself appended when missing.
"""

from __future__ import annotations

import bisect


def capture_batch_sizes(max_bs: int, spec: bool) -> list:
    """The batch sizes SGLang captures a graph for, up to ``max_bs``."""
    if max_bs < 1:
        raise ValueError(f"max_bs must be >= 1, got {max_bs}")
    if spec:
        sizes = (
            list(range(1, 9))
            + list(range(10, 33, 2))
            + list(range(40, 65, 4))
            + list(range(72, 257, 8))
            + list(range(272, max_bs + 1, 16))
        )
    else:
        sizes = (
            [1, 2, 4, 8, 12]
            + list(range(16, 257, 8))
            + list(range(272, 512, 16))
            + list(range(512, max_bs + 1, 32))
        )
    sizes = [b for b in sizes if b <= max_bs]
    if max_bs not in sizes:
        sizes.append(max_bs)
    return sizes


def pad_to_bucket(bs: int, buckets: list) -> int:
    """Smallest bucket ``>= bs`` (SGLang's ``bisect_left`` rule)."""
    i = bisect.bisect_left(buckets, bs)
    if i == len(buckets):
        raise ValueError(f"batch size {bs} exceeds the largest bucket {buckets[-1]}")
    return buckets[i]
