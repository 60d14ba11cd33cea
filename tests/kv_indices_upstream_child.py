"""Run in a child process with TRITON_INTERPRET=1 (tests/test_kv_indices.py):
SGLang 0.5.23's own Triton kernels on CPU, launched as its callers launch
them, against build_kv_indices and the function forms on the same poisoned
buffers. Prints "ok <cases>" or raises.

    python tests/kv_indices_upstream_child.py <seed> <cases> [<site dir>]
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from pathlib import Path

assert os.environ.get("TRITON_INTERPRET") == "1", "run with TRITON_INTERPRET=1"

import torch  # noqa: E402

sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent)]
import sgl_meta  # noqa: E402
from kv_indices_cases import Case, clone_outputs, make  # noqa: E402


def load(site: Path, rel: str, name: str):
    spec = importlib.util.spec_from_file_location(name, site / rel)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def equal(got: dict, want: dict, what: str, case) -> None:
    for k, w in want.items():
        if not isinstance(w, torch.Tensor):
            continue
        if not torch.equal(got[k], w):
            diff = (got[k] != w).nonzero()
            first = diff[0].tolist()
            raise AssertionError(f"{what}, {case}: {k} differs at {diff.shape[0]} elements, first {first}: "
                                 f"ours {got[k][tuple(first)].item()}, upstream {w[tuple(first)].item()}")


def main() -> None:
    seed, cases = int(sys.argv[1]), int(sys.argv[2])
    if len(sys.argv) > 3:
        site = Path(sys.argv[3])
    else:
        site = Path(importlib.util.find_spec("sglang").submodule_search_locations[0]).parent
    kvi = load(site, "sglang/kernels/ops/attention/kv_indices.py", "upstream_kv_indices")
    meta = load(site, "sglang/kernels/ops/attention/metadata.py", "upstream_attention_metadata")
    gen = torch.Generator().manual_seed(seed)
    rnd = torch.Generator().manual_seed(seed + 1)

    def pick(*options):
        return options[int(torch.randint(0, len(options), (1,), generator=rnd))]

    n = 0
    for _ in range(cases):
        E = pick(1, 1, 4, 16, 64)
        case = Case(bs=pick(1, 3, 8, 17), pool=20, width=pick(40, 130, 600) if E == 1 else pick(3, 9, 20),
                    entry_page_size=E, kv_start=pick(False, True), token_mapping=pick(False, True),
                    index64=pick(False, True), out64=pick(False, True), gaps=pick(False, True))
        # 1. create_flashinfer_kv_indices_triton as KVIndexTranslator.pack_read_stream launches it.
        kw = make(case, gen, "cpu")
        up, ours = clone_outputs(kw), clone_outputs(kw)
        blocks = pick(1, 1, 3)
        kvi.create_flashinfer_kv_indices_triton[(case.bs, blocks)](
            up["req_to_token"], up["req_pool_indices"], up["seq_lens"], up["kv_indptr"], up["kv_start_idx"],
            up["kv_indices"], up["req_to_token"].stride(0), ENTRY_PAGE_SIZE=E, TOKEN_BLOCK_PARALLEL=blocks > 1,
            token_mapping=up.get("token_mapping"))
        sgl_meta.create_flashinfer_kv_indices(
            ours["req_to_token"], ours["req_pool_indices"], ours["seq_lens"], ours["kv_indptr"],
            ours["kv_start_idx"], ours["kv_indices"], E, ours.get("token_mapping"))
        equal(ours, up, "create_flashinfer_kv_indices", case)

        # 2. FlashInfer decode (call_begin_forward): kv_indptr[1:bs+1] = cumsum, then the stream.
        case2 = dataclasses.replace(case, write_indptr=True, gaps=False, token_mapping=False)
        kw = make(case2, gen, "cpu")
        kw["kv_indptr"][0] = 0  # upstream's buffer starts zeroed; ours writes [0]
        up, ours = clone_outputs(kw), clone_outputs(kw)
        bs = case2.bs
        up["kv_indptr"][1: bs + 1] = torch.cumsum(up["seq_lens"], dim=0)
        kvi.create_flashinfer_kv_indices_triton[(bs, 1)](
            up["req_to_token"], up["req_pool_indices"], up["seq_lens"], up["kv_indptr"][: bs + 1],
            up["kv_start_idx"], up["kv_indices"], up["req_to_token"].stride(0), ENTRY_PAGE_SIZE=E)
        sgl_meta.build_kv_indices(**{k: v for k, v in ours.items()})
        equal(ours, up, "FlashInfer decode sequence", case2)

        # 3. Triton backend decode: cumsum + stream + get_num_kv_splits_triton.
        case3 = dataclasses.replace(case2, entry_page_size=1, width=pick(40, 300), splits=True, zero_lens=False)
        kw = make(case3, gen, "cpu")
        kw["kv_indptr"][0] = 0
        up, ours = clone_outputs(kw), clone_outputs(kw)
        bs = case3.bs
        up["kv_indptr"][1: bs + 1] = torch.cumsum(up["seq_lens"], dim=0)
        kvi.create_flashinfer_kv_indices_triton[(bs, 1)](
            up["req_to_token"], up["req_pool_indices"], up["seq_lens"], up["kv_indptr"][: bs + 1],
            up["kv_start_idx"], up["kv_indices"], up["req_to_token"].stride(0))
        g = up["num_group"]
        meta.get_num_kv_splits_triton[(1,)](
            up["num_kv_splits"][: bs * g], up["seq_lens"], bs, g, up["num_head"], up["num_kv_head"],
            up["max_kv_splits"], up["device_core_count"], MAX_NUM_SEQ=256 if bs < 256 else 1 << (bs - 1).bit_length(),
            uneven_batch_ptr=up["uneven_batch"])
        sgl_meta.build_kv_indices(**ours)
        equal(ours, up, "Triton backend decode sequence", case3)

        # 3b. Its sliding-window stream (update_sliding_window_buffer, then the window's split counts).
        case3b = dataclasses.replace(case3, kv_start=False, token_mapping=pick(False, True))
        kw = make(case3b, gen, "cpu")
        kw["kv_indptr"][0] = 0
        kw.pop("uneven_batch")
        window = pick(1, 7, 50, 10**6)
        up, ours = clone_outputs(kw), clone_outputs(kw)
        bs = case3b.bs
        window_lens = torch.minimum(up["seq_lens"], torch.tensor(window))
        up["kv_indptr"][1: bs + 1] = torch.cumsum(window_lens, dim=0)
        kvi.create_flashinfer_kv_indices_triton[(bs, 1)](
            up["req_to_token"], up["req_pool_indices"], window_lens, up["kv_indptr"][: bs + 1],
            up["seq_lens"] - window_lens, up["kv_indices"], up["req_to_token"].stride(0),
            token_mapping=up.get("token_mapping"))
        meta.get_num_kv_splits_triton[(1,)](
            up["num_kv_splits"][:bs], window_lens, bs, 1, up["num_head"], up["num_kv_head"], up["max_kv_splits"],
            up["device_core_count"], MAX_NUM_SEQ=256 if bs < 256 else 1 << (bs - 1).bit_length())
        sgl_meta.build_kv_indices(**{**ours, "num_group": 1}, sliding_window=window)
        equal(ours, up, "Triton backend sliding-window stream", (case3b, window))

        # 4. create_flashmla_kv_indices_triton as the TRT-LLM MLA / FlashMLA backends launch it.
        ps = pick(1, 16, 64)
        width_pages = pick(1, 5, 12)
        pool, row = 12, width_pages * ps + pick(0, 3 * ps)
        r2t = torch.randint(0, 2**31 - 1, (pool, row), generator=gen, dtype=torch.int64).to(torch.int32)
        if ps > 1:  # (a negative slot reads page 0: upstream's truncation agrees for -1 when page_size > 1)
            r2t[torch.randint(0, 9, (pool, row), generator=gen) == 0] = -1
        bsm = pick(1, 4, 11)
        req = torch.randperm(pool, generator=gen)[:bsm].to(pick(torch.int32, torch.int64))
        start = None
        if pick(False, True):
            start = torch.randint(0, row - (width_pages - 1) * ps, (bsm,), generator=gen).to(req.dtype)
        room = [min(width_pages * ps, row - (0 if start is None else int(s))) for s in
                (start if start is not None else [0] * bsm)]
        lens = torch.tensor([int(torch.randint(0, r + 1, (1,), generator=gen)) for r in room]).to(req.dtype)
        table = torch.randint(-(2**31), 2**31 - 1, (bsm + 2, width_pages), generator=gen, dtype=torch.int64)
        table = table.to(torch.int32)
        up_t, ours_t = table.clone(), table.clone()
        kvi.create_flashmla_kv_indices_triton[(bsm, kvi.get_num_kv_index_blocks_flashmla(width_pages, ps))](
            r2t, req, lens, start, up_t, r2t.stride(0), up_t.stride(0), PAGED_SIZE=ps)
        sgl_meta.create_flashmla_kv_indices(r2t, req, lens, start, ours_t, ps)
        equal({"t": ours_t}, {"t": up_t}, "create_flashmla_kv_indices", (ps, width_pages, row, bsm))
        n += 1
    print(f"ok {n}")


if __name__ == "__main__":
    main()
