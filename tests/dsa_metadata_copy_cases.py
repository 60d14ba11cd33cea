"""Random and edge-case inputs for fused_metadata_copy / fused_metadata_copy_multi."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from sgl_meta import FORWARD_MODE_DECODE, FORWARD_MODE_DRAFT_EXTEND, FORWARD_MODE_TARGET_VERIFY

from helpers import poison_like

DECODE, TARGET_VERIFY, DRAFT_EXTEND = FORWARD_MODE_DECODE, FORWARD_MODE_TARGET_VERIFY, FORWARD_MODE_DRAFT_EXTEND

# Memory layouts a tensor can be given in. "vec": row strides a multiple of 4
# elements, 16-byte aligned start (int4 stores / loads); "odd": odd row strides
# (every other row misaligned); "offset": a view starting one element in
# (misaligned start); "contig": plain contiguous (row stride = cols, as
# upstream's `req_to_token[idx, :max_len].contiguous()`). A misaligned
# destination puts its field on the 1-element path; a misaligned source only
# narrows that unit's loads (CUDA).
LAYOUTS = ("vec", "odd", "offset", "contig")

SRC_FIELDS = (
    "cache_seqlens_src",
    "cu_seqlens_k_src",
    "page_indices_src",
    "dsa_cache_seqlens_src",
    "seqlens_expanded_src",
    "dsa_cu_seqlens_k_src",
    "real_page_table_src",
    "flashmla_num_splits_src",
    "flashmla_metadata_src",
)
DST_FIELDS = tuple(name.replace("_src", "_dst").replace("page_indices", "page_table_1") for name in SRC_FIELDS)
SCALARS = ("forward_mode", "bs", "max_len", "max_seqlen_k", "seqlens_expanded_size")


@dataclass
class DsaCase:
    mode: int = DECODE
    bs: int = 5
    sets: int = 1  # destination sets (K)
    max_len: int = 37  # DECODE page-table columns
    max_seqlen_k: int = 41  # TARGET_VERIFY / DRAFT_EXTEND page-table columns
    draft_tokens: int = 4  # rows per request in TARGET_VERIFY (MTP 3 steps -> 4 tokens)
    src_extra_cols: int = 3  # page_indices_src columns past cols (never copied)
    src_extra_rows: int = 2  # DECODE: page_indices_src rows past bs (never copied)
    dst_pad_rows: int = 3  # destination rows past `rows` (CUDA-graph padding)
    dst_pad_cols: int = 5  # destination columns past cols
    extra_len: int = 2  # 1-D tensors: elements past what is copied
    real_page_table: bool = True
    real_cols: int = 3
    flashmla: bool = True
    sm_parts: int = 66  # FlashMLA tile-scheduler metadata [sm_parts, 8]
    expanded_in_decode: bool = False  # pass the (ignored) seqlens_expanded pair in DECODE
    layout: str | None = "vec"  # None: random per tensor
    src_layout: str | None = None  # page_indices_src's layout, when not `layout`
    expanded_size: int | None = None  # S override (modes 1, 2)


def _rows_and_s(c: DsaCase, rng: random.Random) -> tuple[int, int]:
    if c.mode == DECODE:
        return c.bs, c.bs
    if c.mode == TARGET_VERIFY:
        rows = c.bs * c.draft_tokens
    else:  # DRAFT_EXTEND: accepted tokens per request vary, 1..draft_tokens
        rows = sum(rng.randint(1, c.draft_tokens) for _ in range(c.bs))
    return rows, rows if c.expanded_size is None else c.expanded_size


def _random_values(shape, gen):
    return torch.randint(-(2**31), 2**31 - 1, shape, generator=gen, dtype=torch.int64).to(torch.int32)


def _alloc(shape, layout: str, gen, flat: bool = False) -> torch.Tensor:
    """Random int32 values of `shape` in the given memory layout; `flat`: contiguous
    whatever the rank (the FlashMLA metadata), "offset" still misaligns it."""
    if flat:
        numel = 1
        for s in shape:
            numel *= s
        if layout == "offset":
            return _random_values((numel + 1,), gen)[1:].view(shape)
        return _random_values(shape, gen)
    if len(shape) == 1:
        (n,) = shape
        if layout == "offset":
            return _random_values((n + 1,), gen)[1:]
        return _random_values((n,), gen)
    if len(shape) == 2:
        rows, cols = shape
        if layout == "offset":
            return _random_values((rows * (cols + 1) + 1,), gen)[1:].view(rows, cols + 1)[:, :cols]
        if layout == "contig":
            return _random_values((rows, cols), gen)
        width = cols + (-cols) % 4 if layout == "vec" else cols + 1 + (cols % 2)
        return _random_values((rows, width), gen)[:, :cols]
    raise ValueError(shape)


def make_case(c: DsaCase, gen: torch.Generator, device: str):
    """Returns (sources, dest_sets, scalars): dicts of tensors (None = absent), a
    list of K such dicts (poisoned), and the scalar arguments."""
    rng = random.Random(int(torch.randint(0, 2**31, (1,), generator=gen)))
    lay = (lambda: rng.choice(LAYOUTS)) if c.layout is None else (lambda: c.layout)
    rows, S = _rows_and_s(c, rng)
    decode = c.mode == DECODE
    cols = c.max_len if decode else c.max_seqlen_k
    n = c.bs if decode else S
    e = c.extra_len
    want_expanded = not decode or c.expanded_in_decode

    src_rows = rows + (c.src_extra_rows if decode else 0)
    sources = dict(
        cache_seqlens_src=_alloc((c.bs + e,), lay(), gen),
        cu_seqlens_k_src=_alloc((c.bs + 1 + e,), lay(), gen),
        page_indices_src=_alloc((src_rows, cols + c.src_extra_cols), c.src_layout or lay(), gen),
        dsa_cache_seqlens_src=_alloc((n + e,), lay(), gen),
        seqlens_expanded_src=_alloc((S + e,), lay(), gen) if want_expanded else None,
        dsa_cu_seqlens_k_src=_alloc((n + 1 + e,), lay(), gen),
        real_page_table_src=_alloc((src_rows, c.real_cols), lay(), gen) if c.real_page_table else None,
        flashmla_num_splits_src=_alloc((n + 1 + e,), lay(), gen) if c.flashmla else None,
        flashmla_metadata_src=_alloc((c.sm_parts, 8), lay(), gen, flat=True) if c.flashmla else None,
    )

    def dest_set():
        r, pc = rows + c.dst_pad_rows, c.dst_pad_cols
        d = dict(
            cache_seqlens_dst=_alloc((c.bs + e,), lay(), gen),
            cu_seqlens_k_dst=_alloc((c.bs + 1 + e,), lay(), gen),
            page_table_1_dst=_alloc((r, cols + pc), lay(), gen),
            dsa_cache_seqlens_dst=_alloc((n + e,), lay(), gen),
            seqlens_expanded_dst=_alloc((S + e,), lay(), gen) if want_expanded else None,
            dsa_cu_seqlens_k_dst=_alloc((n + 1 + e,), lay(), gen),
            real_page_table_dst=_alloc((r, c.real_cols + pc), lay(), gen) if c.real_page_table else None,
            flashmla_num_splits_dst=_alloc((n + 1 + e,), lay(), gen) if c.flashmla else None,
            flashmla_metadata_dst=_alloc((c.sm_parts, 8), lay(), gen, flat=True) if c.flashmla else None,
        )
        # Poison in place (keeps each view's layout): a missed or stray write shows.
        for v in d.values():
            if v is not None:
                v.copy_(poison_like(v, gen))
        return d

    dests = [dest_set() for _ in range(c.sets)]
    scalars = dict(
        forward_mode=c.mode,
        bs=c.bs,
        max_len=c.max_len if decode else rng.choice([None, c.max_len, -1]),
        max_seqlen_k=c.max_seqlen_k if not decode else rng.choice([None, c.max_seqlen_k, -1]),
        seqlens_expanded_size=S if not decode else rng.choice([None, S, 12345]),
    )

    def to(t):
        return None if t is None else _to_device(t, device)

    sources = {k: to(v) for k, v in sources.items()}
    dests = [{k: to(v) for k, v in d.items()} for d in dests]
    return sources, dests, scalars


def _to_device(t: torch.Tensor, device: str) -> torch.Tensor:
    """Moves `t` keeping its view layout (storage offset and strides)."""
    if device == "cpu":
        return t
    base = torch.empty(t.untyped_storage().nbytes() // 4, dtype=torch.int32)
    base.untyped_storage().copy_(t.untyped_storage())
    return base.to(device).as_strided(t.shape, t.stride(), t.storage_offset())


def clone_sets(dests):
    """Deep copy of destination sets, keeping every view's layout."""
    out = []
    for d in dests:
        c = {}
        for k, v in d.items():
            if v is None:
                c[k] = None
            else:
                storage = torch.empty(v.untyped_storage().nbytes() // 4, dtype=torch.int32, device=v.device)
                storage.untyped_storage().copy_(v.untyped_storage())
                c[k] = storage.as_strided(v.shape, v.stride(), v.storage_offset())
        out.append(c)
    return out


def multi_lists(dests):
    """Destination sets -> the multi op's keyword lists (None for an absent field)."""
    return {k: (None if dests[0][k] is None else [d[k] for d in dests]) for k in DST_FIELDS}


EDGE_CASES = {
    "decode": DsaCase(),
    "verify": DsaCase(mode=TARGET_VERIFY),
    "draft_extend": DsaCase(mode=DRAFT_EXTEND),
    "decode_bs1": DsaCase(bs=1),
    "verify_bs1": DsaCase(mode=TARGET_VERIFY, bs=1),
    "draft_extend_bs1": DsaCase(mode=DRAFT_EXTEND, bs=1),
    "decode_odd": DsaCase(bs=13, max_len=61, real_cols=7, sm_parts=3, layout="odd"),
    "verify_odd": DsaCase(mode=TARGET_VERIFY, bs=7, max_seqlen_k=53, draft_tokens=3, layout="odd"),
    "draft_extend_odd": DsaCase(mode=DRAFT_EXTEND, bs=9, max_seqlen_k=33, layout="odd", real_cols=5),
    "decode_offset": DsaCase(layout="offset", max_len=64),
    "verify_offset": DsaCase(mode=TARGET_VERIFY, layout="offset", max_seqlen_k=64),
    "decode_mixed_layouts": DsaCase(layout=None, bs=11, max_len=128),
    "verify_mixed_layouts": DsaCase(mode=TARGET_VERIFY, layout=None, bs=6, max_seqlen_k=96),
    "decode_no_optionals": DsaCase(real_page_table=False, flashmla=False),
    "verify_no_optionals": DsaCase(mode=TARGET_VERIFY, real_page_table=False, flashmla=False),
    "draft_extend_no_optionals": DsaCase(mode=DRAFT_EXTEND, real_page_table=False, flashmla=False),
    "decode_real_only": DsaCase(flashmla=False),
    "decode_flashmla_only": DsaCase(real_page_table=False),
    "verify_flashmla_only": DsaCase(mode=TARGET_VERIFY, real_page_table=False),
    "decode_expanded_pair_ignored": DsaCase(expanded_in_decode=True),
    "decode_zero_cols": DsaCase(max_len=0, real_cols=0),
    "verify_zero_cols": DsaCase(mode=TARGET_VERIFY, max_seqlen_k=0),
    "draft_extend_s0": DsaCase(mode=DRAFT_EXTEND, expanded_size=0),
    "verify_s_smaller_than_rows": DsaCase(mode=TARGET_VERIFY, expanded_size=7),
    "no_padding": DsaCase(src_extra_cols=0, src_extra_rows=0, dst_pad_rows=0, dst_pad_cols=0, extra_len=0),
    "no_padding_verify": DsaCase(
        mode=TARGET_VERIFY, src_extra_cols=0, dst_pad_rows=0, dst_pad_cols=0, extra_len=0
    ),
    "empty_flashmla_metadata": DsaCase(sm_parts=0),
    "cols_not_multiple_of_4": DsaCase(max_len=2047, real_cols=31),
    "cols_below_4": DsaCase(max_len=3, real_cols=1, layout="vec"),
    # Realistic DeepSeek-V3.2 shapes: index top-k 2048 token slots, page size 64
    # (real page table 2048 / 64 = 32 pages wide), FlashMLA [66, 8] metadata,
    # MTP with 3 steps = 4 draft tokens per request.
    "realistic_decode": DsaCase(bs=64, max_len=2048, real_cols=32, src_extra_cols=0, dst_pad_cols=0),
    "realistic_decode_long": DsaCase(bs=8, max_len=8192, real_cols=128, dst_pad_cols=4096),
    "realistic_verify": DsaCase(mode=TARGET_VERIFY, bs=32, max_seqlen_k=2048, real_cols=32, src_extra_cols=0),
    "realistic_draft_extend": DsaCase(mode=DRAFT_EXTEND, bs=32, max_seqlen_k=2048, real_cols=32),
    # page_indices_src contiguous [bs, max_len] with max_len = the longest
    # sequence (odd, or 2 mod 4): source rows alternate in alignment while the
    # static destinations stay aligned.
    "realistic_decode_odd_max_len": DsaCase(
        bs=48, max_len=1237, real_cols=20, src_extra_cols=0, src_extra_rows=0, src_layout="contig"
    ),
    "realistic_decode_max_len_2_mod_4": DsaCase(
        bs=17, max_len=1030, real_cols=17, src_extra_cols=0, src_extra_rows=0, src_layout="contig"
    ),
    "realistic_verify_odd_max_seqlen_k": DsaCase(
        mode=TARGET_VERIFY, bs=16, max_seqlen_k=2051, real_cols=33, src_extra_cols=0, src_layout="contig"
    ),
}


def random_case(rng: random.Random, sets: int | None = None) -> DsaCase:
    mode = rng.choice([DECODE, TARGET_VERIFY, DRAFT_EXTEND])
    return DsaCase(
        mode=mode,
        bs=rng.choice([1, 2, 3, 7, 16, 33, 64]),
        sets=sets if sets is not None else rng.choice([1, 2, 3, 5]),
        max_len=rng.choice([0, 1, 4, 9, 64, 127, 256, 2048]),
        max_seqlen_k=rng.choice([0, 1, 5, 64, 130, 2048]),
        draft_tokens=rng.choice([1, 2, 4]),
        src_extra_cols=rng.choice([0, 1, 4]),
        src_extra_rows=rng.choice([0, 2]),
        dst_pad_rows=rng.choice([0, 5]),
        dst_pad_cols=rng.choice([0, 3, 8]),
        extra_len=rng.choice([0, 3]),
        real_page_table=rng.random() < 0.6,
        real_cols=rng.choice([0, 1, 3, 32, 33]),
        flashmla=rng.random() < 0.6,
        sm_parts=rng.choice([1, 66, 78]),
        expanded_in_decode=rng.random() < 0.3,
        layout=rng.choice([None, None, "vec", "odd", "offset", "contig"]),
        src_layout=rng.choice([None, None, "contig", "odd"]),
    )
