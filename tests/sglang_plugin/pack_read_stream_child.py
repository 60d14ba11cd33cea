"""Run in a child process with TRITON_INTERPRET=1 (test_kv_indices_hooks.py): SGLang
0.5.23's own ``KVIndexTranslator.pack_read_stream`` on a static pool (its
``create_flashinfer_kv_indices_triton`` gather, interpreted) against the plugin's
AROUND hook on the same translator and poisoned buffers. Prints "ok <cases>" or raises.

    python pack_read_stream_child.py <seed> <cases>
"""

from __future__ import annotations

import os
import sys

assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"

import torch  # noqa: E402

from sgl_meta.sglang import kv_indices as hooks  # noqa: E402
from sglang.srt.mem_cache.kv_index_translator import KVIndexTranslator  # noqa: E402


def main() -> None:
    seed, cases = int(sys.argv[1]), int(sys.argv[2])
    gen = torch.Generator().manual_seed(seed)
    original = KVIndexTranslator.pack_read_stream
    for case in range(cases):
        pool, width, bs = 12, int(torch.randint(8, 300, (1,), generator=gen)), int(torch.randint(1, 7, (1,), generator=gen))
        r2t = torch.randint(-1, 4000, (pool, width), generator=gen, dtype=torch.int64).to(torch.int32)
        translator = KVIndexTranslator(req_to_token=r2t, token_to_kv_pool_allocator=object(),
                                       token_to_kv_pool=object(), page_size=1, device="cpu")
        req = torch.randperm(pool, generator=gen)[:bs]
        window = case % 3 == 1
        start = torch.randint(0, 5, (bs,), generator=gen) if window else None
        lens = torch.randint(0, width - (5 if window else 0) + 1, (bs,), generator=gen)
        indptr = torch.zeros(bs + 1, dtype=torch.int32)
        indptr[1:] = torch.cumsum(lens, 0)
        mapping = torch.randint(-1, 9000, (4000,), generator=gen, dtype=torch.int64) if case % 3 == 2 else None
        out_dtype = torch.int64 if case % 2 else torch.int32
        theirs = torch.full((int(indptr[-1]) + 3,), -7, dtype=out_dtype)
        ours = theirs.clone()
        blocks = 1 + case % 2
        kw = dict(req_pool_indices=req, seq_lens=lens, indptr=indptr, kv_start_idx=start, token_mapping=mapping,
                  num_token_blocks=blocks)
        want = original(translator, None, out=theirs, **kw)
        got = hooks.pack_read_stream(lambda *a, **k: (_ for _ in ()).throw(AssertionError("SGLang's method ran")),
                                     translator, None, out=ours, **kw)
        if got != want or not torch.equal(ours, theirs):
            diff = (ours != theirs).nonzero().flatten().tolist()[:5]
            raise AssertionError(f"case {case} (bs {bs}, width {width}, window {window}, mapping {mapping is not None}, "
                                 f"{out_dtype}): returned {got} vs {want}; first differing elements {diff}")
    print(f"ok {cases}")


if __name__ == "__main__":
    main()
