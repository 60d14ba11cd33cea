"""Random and edge-case inputs for fused_dsa_metadata (docs/operators/dsa_metadata.md)."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from dsa_metadata_copy_cases import LAYOUTS, _alloc, _to_device, clone_sets  # noqa: F401  (re-exported)
from helpers import poison_like
from sgl_meta import FORWARD_MODE_DECODE, FORWARD_MODE_DRAFT_EXTEND, FORWARD_MODE_TARGET_VERIFY

DECODE, TARGET_VERIFY, DRAFT_EXTEND = FORWARD_MODE_DECODE, FORWARD_MODE_TARGET_VERIFY, FORWARD_MODE_DRAFT_EXTEND
MODES = (DECODE, TARGET_VERIFY, DRAFT_EXTEND)
LISTS = ("cache_seqlens", "cu_seqlens_k", "seqlens_expanded", "dsa_cache_seqlens", "dsa_cu_seqlens_k",
         "page_table_1", "real_page_table", "paged_mqa_ctx_lens_2d")



@dataclass
class GenCase:
    mode: int = DECODE
    bs: int = 5
    sets: int = 1  # K
    width: int = 70  # max_seqlen_k
    ctx_extra: int = 3  # req_to_token columns past the width (never read)
    pool: int = 9
    page_size: int = 4
    topk: int = 16
    next_n: int = 3  # TARGET_VERIFY draft tokens; DRAFT_EXTEND max extend length
    lens: str = "mixed"  # "mixed" | "short" | "near_width" | "full" | "zero" | "past" (negative: an error)
    total: str = "sum"  # DRAFT_EXTEND total_len: "sum" | "less" | "more" | "zero" | "static"
    padded_rows: bool = True  # DRAFT_EXTEND: some rows with seq < extend length
    page_table_1: bool = True
    real_page_table: bool = True
    paged_mqa: bool = True  # TARGET_VERIFY only
    layout: str | None = "vec"  # None: random per tensor
    r2t_layout: str = "vec"
    pad_rows: int = 2  # destination rows past n
    pad_cols: int = 3  # destination columns past what a row can hold
    extra_len: int = 2  # 1-D destinations: elements past what is written
    index_dtype: torch.dtype | None = None  # seq_lens / req_pool_indices / extend_seq_lens; None: random


def _lens(c: GenCase, rng: random.Random, n: int) -> list:
    w = c.width
    pick = {
        "short": lambda: rng.randint(1, max(1, w // 4)),
        "near_width": lambda: rng.randint(max(0, w - c.next_n - 2), w + 2),
        "full": lambda: w,
        "zero": lambda: 0,
        "past": lambda: rng.randint(w, 3 * w + 10),
    }
    if c.lens == "mixed":
        kinds = ["short", "short", "near_width", "full", "zero", "zero", "past"]
        return [pick[rng.choice(kinds)]() for _ in range(n)]
    return [pick[c.lens]() for _ in range(n)]


def make_case(c: GenCase, gen: torch.Generator, device: str):
    """Returns (inputs, dest_sets, scalars): input tensors and scalars as the
    keyword wrapper takes them, and K dicts of poisoned destination tensors
    (None = field absent)."""
    rng = random.Random(int(torch.randint(0, 2**31, (1,), generator=gen)))
    lay = (lambda: rng.choice(LAYOUTS)) if c.layout is None else (lambda: c.layout)
    idx = c.index_dtype or rng.choice([torch.int32, torch.int64])
    bs = c.bs
    seq = _lens(c, rng, bs)
    ext = None
    total_len = None
    static = False
    if c.mode == DRAFT_EXTEND:
        static = c.total == "static"
        if static:
            ext = [c.next_n] * bs
        else:
            ext = [rng.randint(0, c.next_n) for _ in range(bs)]
        if c.padded_rows and bs:
            for r in rng.sample(range(bs), k=max(1, bs // 3)):  # seq below the extend length
                seq[r] = rng.randint(0, max(0, ext[r] - 1))
        s = sum(ext)
        total_len = {"sum": s, "static": s, "less": max(0, s - rng.randint(1, 3)), "more": s + rng.randint(1, 4),
                     "zero": 0}[c.total]
    n = bs if c.mode == DECODE else bs * c.next_n if c.mode == TARGET_VERIFY else (total_len if bs else 0)
    real_cols = -(-c.width // c.page_size)

    r2t = _alloc((c.pool, c.width + c.ctx_extra), c.r2t_layout, gen)
    r2t.copy_(torch.randint(-3, 1 << 24, r2t.shape, generator=gen, dtype=torch.int32))
    inputs = dict(
        seq_lens=torch.tensor(seq + [rng.randint(-9, 10**6)], dtype=idx),  # one hostile value past bs
        req_pool_indices=torch.tensor([rng.randrange(c.pool) for _ in range(bs)] + [10**6], dtype=idx),
        req_to_token=r2t,
        extend_seq_lens=(torch.tensor(ext + [-(10**6)], dtype=idx) if ext is not None else None),
    )

    def vec(length):
        t = _alloc((length,), lay(), gen)
        return t

    def mat(rows, cols):
        return _alloc((rows, cols), lay(), gen)

    e = c.extra_len
    sets = []
    for _ in range(c.sets):
        d = dict(
            cache_seqlens=vec(bs + e),
            cu_seqlens_k=vec(bs + 1 + e),
            seqlens_expanded=vec(n + e) if c.mode != DECODE else None,
            dsa_cache_seqlens=vec(n + e),
            dsa_cu_seqlens_k=vec(n + 1 + e),
            page_table_1=mat(n + c.pad_rows, c.width + c.pad_cols) if c.page_table_1 else None,
            # (at page size 1 a lone real table is an error: test_dsa_metadata_errors)
            real_page_table=(mat(n + c.pad_rows, real_cols + c.pad_cols)
                             if c.real_page_table and (c.page_size > 1 or c.page_table_1) else None),
            paged_mqa_ctx_lens_2d=(mat(bs + c.pad_rows, c.next_n + c.pad_cols)
                                   if c.paged_mqa and c.mode == TARGET_VERIFY else None),
        )
        for v in d.values():  # poison in place, keeping each view's layout
            if v is not None:
                v.copy_(poison_like(v, gen))
        sets.append(d)
    scalars = dict(forward_mode=c.mode, bs=bs, max_seqlen_k=c.width, dsa_index_topk=c.topk,
                   page_size=c.page_size, next_n=c.next_n if c.mode == TARGET_VERIFY else rng.choice([None, 7]),
                   total_len=total_len, static_extend_len=static)

    def to(t):
        return None if t is None else _to_device(t, device) if t.dtype == torch.int32 else t.to(device)

    inputs = {k: to(v) for k, v in inputs.items()}
    sets = [{k: to(v) for k, v in d.items()} for d in sets]
    return inputs, sets, scalars


def lists_of(sets) -> dict:
    """Destination sets -> the op's keyword lists (None for an absent field)."""
    return {k: (None if sets[0][k] is None else [d[k] for d in sets]) for k in LISTS}


EDGE_CASES = {
    "decode": GenCase(),
    "verify": GenCase(mode=TARGET_VERIFY),
    "draft_extend": GenCase(mode=DRAFT_EXTEND),
    "decode_bs1": GenCase(bs=1),
    "verify_bs1": GenCase(mode=TARGET_VERIFY, bs=1, next_n=1),
    "draft_extend_bs1": GenCase(mode=DRAFT_EXTEND, bs=1),
    "draft_extend_static": GenCase(mode=DRAFT_EXTEND, total="static", bs=6),
    "draft_extend_total_less": GenCase(mode=DRAFT_EXTEND, total="less", bs=7),
    "draft_extend_total_more": GenCase(mode=DRAFT_EXTEND, total="more", bs=7),
    "draft_extend_total_zero": GenCase(mode=DRAFT_EXTEND, total="zero"),
    "draft_extend_no_padded_rows": GenCase(mode=DRAFT_EXTEND, padded_rows=False),
    "draft_extend_seq_zero": GenCase(mode=DRAFT_EXTEND, lens="zero", padded_rows=False),
    "verify_near_width": GenCase(mode=TARGET_VERIFY, lens="near_width", next_n=4),
    "decode_near_width": GenCase(lens="near_width"),
    "lengths_past_width": GenCase(mode=TARGET_VERIFY, lens="past"),
    "zero_lengths_verify": GenCase(lens="zero", mode=TARGET_VERIFY),
    "full_width": GenCase(lens="full", width=64),
    "page_size_1": GenCase(page_size=1),
    "page_size_1_verify": GenCase(page_size=1, mode=TARGET_VERIFY),
    "page_size_1_draft_extend": GenCase(page_size=1, mode=DRAFT_EXTEND),
    "page_size_not_power_of_2": GenCase(page_size=6, mode=TARGET_VERIFY),
    "page_size_past_width": GenCase(page_size=1000),
    "no_page_table_1": GenCase(page_table_1=False),
    "no_page_table_1_verify": GenCase(page_table_1=False, mode=TARGET_VERIFY),
    "no_page_tables": GenCase(page_table_1=False, real_page_table=False, mode=DRAFT_EXTEND),
    "no_real_page_table": GenCase(real_page_table=False),
    "verify_no_paged_mqa": GenCase(mode=TARGET_VERIFY, paged_mqa=False),
    "topk_zero": GenCase(topk=0),
    "topk_large": GenCase(topk=2**31 - 1, mode=TARGET_VERIFY),
    "width_zero": GenCase(width=0, mode=TARGET_VERIFY),
    "width_one": GenCase(width=1, lens="full"),
    "odd_layouts": GenCase(layout="odd", r2t_layout="odd", mode=TARGET_VERIFY, width=61),
    "offset_layouts": GenCase(layout="offset", r2t_layout="offset", mode=DRAFT_EXTEND, width=64),
    "mixed_layouts": GenCase(layout=None, r2t_layout="contig", bs=11, width=128),
    "no_padding": GenCase(pad_rows=0, pad_cols=0, extra_len=0, ctx_extra=0, mode=TARGET_VERIFY),
    "int32_indices": GenCase(index_dtype=torch.int32, mode=DRAFT_EXTEND),
    "int64_indices": GenCase(index_dtype=torch.int64, mode=DRAFT_EXTEND),
    # Past one CUDA unit (2048 columns) and one scan tile (1024 requests / rows).
    "wide_rows": GenCase(bs=3, width=5000, lens="near_width", page_size=64, topk=2048, mode=TARGET_VERIFY),
    "wide_rows_real_only": GenCase(bs=3, width=70000, lens="near_width", page_size=64, page_table_1=False),
    "many_requests": GenCase(bs=1100, width=40, next_n=1, lens="short"),
    "many_verify_rows": GenCase(mode=TARGET_VERIFY, bs=300, next_n=4, width=40),
    "many_draft_rows": GenCase(mode=DRAFT_EXTEND, bs=1030, next_n=2, width=24, total="more"),
    # The scans' shapes: one warp up to 32 requests (verify: expanded rows), the block from 33.
    "warp_scan_decode": GenCase(bs=32, pool=40),
    "block_scan_decode": GenCase(bs=33, pool=40),
    "warp_scan_verify": GenCase(mode=TARGET_VERIFY, bs=8, next_n=4),
    "block_scan_verify": GenCase(mode=TARGET_VERIFY, bs=11, next_n=3, pool=12),
    "warp_scan_draft_extend": GenCase(mode=DRAFT_EXTEND, bs=32, pool=40, total="more"),
    "block_scan_draft_extend": GenCase(mode=DRAFT_EXTEND, bs=33, pool=40, total="more"),
    # The page blocks' shapes at a request or two: 16-byte vectors with pages
    # taken from them (page 4), page-only units, the general direct path (page 2,
    # unaligned rows) and draft-extend rows after another request's.
    "one_request_page_4": GenCase(bs=1, width=3000, page_size=4, lens="full"),
    "one_request_real_only": GenCase(bs=1, width=3000, page_size=8, lens="full", page_table_1=False),
    "one_request_page_2": GenCase(bs=1, width=3000, page_size=2, lens="full"),
    "one_request_unaligned": GenCase(bs=1, width=3000, page_size=64, lens="full", layout="offset"),
    "two_requests_draft_extend": GenCase(mode=DRAFT_EXTEND, bs=2, width=3000, page_size=64, lens="full"),
    # DeepSeek-V3.2: top-k 2048, physical page 64, MTP 4 draft tokens.
    "realistic_decode": GenCase(bs=16, width=8192, page_size=64, topk=2048, lens="mixed", pool=40),
    "realistic_verify": GenCase(mode=TARGET_VERIFY, bs=8, width=4096, page_size=64, topk=2048, next_n=4),
    "realistic_draft_extend": GenCase(mode=DRAFT_EXTEND, bs=8, width=4096, page_size=64, topk=2048, next_n=4,
                                      total="static"),
}


def random_case(rng: random.Random, sets: int | None = None) -> GenCase:
    mode = rng.choice(MODES)
    return GenCase(
        mode=mode,
        bs=rng.choice([1, 2, 3, 7, 16, 33, 64]),
        sets=sets if sets is not None else rng.choice([1, 2, 3, 5]),
        width=rng.choice([0, 1, 4, 9, 64, 127, 256, 2049]),
        ctx_extra=rng.choice([0, 1, 5]),
        pool=rng.choice([1, 4, 70]),
        page_size=rng.choice([1, 2, 3, 16, 64, 100]),
        topk=rng.choice([0, 5, 64, 2048]),
        next_n=rng.choice([1, 2, 4]),
        lens=rng.choice(["mixed", "mixed", "short", "near_width", "past"]),
        total=rng.choice(["sum", "sum", "static", "less", "more", "zero"]),
        padded_rows=rng.random() < 0.7,
        page_table_1=rng.random() < 0.8,
        real_page_table=rng.random() < 0.8,
        paged_mqa=rng.random() < 0.7,
        layout=rng.choice([None, None, "vec", "odd", "offset", "contig"]),
        r2t_layout=rng.choice(["vec", "odd", "offset", "contig"]),
        pad_rows=rng.choice([0, 3]),
        pad_cols=rng.choice([0, 2, 8]),
        extra_len=rng.choice([0, 3]),
    )
