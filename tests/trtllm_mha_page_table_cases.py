"""Random and edge-case inputs for build_trtllm_mha_page_table.

Outputs are ``[bs, W]`` views into larger poisoned buffers (an offset, extra
rows and extra columns around the view), so a write outside the view shows as
a changed buffer element.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers import poison_like


@dataclass
class PageTableCase:
    bs: int = 5
    width: int = 9  # W = page_table.size(1)
    page_size: int = 16
    ctx: int | None = None  # req_to_token.size(1); None: (W - 1) * page_size + 1 + extra_cols
    extra_cols: int = 7
    row_pad: int = 3  # req_to_token row stride - ctx (a strided view)
    pool: int = 11
    offset: int = 1  # outputs start at buffer[offset, offset]
    pad_rows: int = 2  # buffer rows past the view, must survive
    pad_cols: int = 4  # buffer columns past the view, must survive
    index_dtype: torch.dtype = torch.int64
    seqlen_dtype: torch.dtype = torch.int32
    swa: bool = True
    swa_size: int | None = None  # M; None: half the slot range (slots are then reduced into it)
    negative_slots: bool = True
    min_len: int | None = None  # lengths drawn in [min_len, max_len]; None: 0 (a negative one is an error)
    max_len: int | None = None  # None: past both the table width and the row
    prefill: int | None = None  # fill the buffers with this instead of poison (e.g. -1)
    mapping_dtype: torch.dtype = torch.int64  # full_to_swa (SGLang's tests pass int32 too)

    def row_len(self) -> int:
        if self.ctx is not None:
            return self.ctx
        return max(self.width - 1, 0) * self.page_size + 1 + self.extra_cols


@dataclass
class CaseData:
    inputs: dict  # req_to_token, req_pool_indices, cache_seqlens, full_to_swa
    buffers: dict  # page_table, swa_page_table (None without SWA): the padded buffers
    case: PageTableCase

    def views(self, buffers: dict) -> dict:
        """The ``[bs, W]`` output views into (copies of) the buffers."""
        c, o = self.case, self.case.offset
        return {k: (None if b is None else b[o : o + c.bs, o : o + c.width]) for k, b in buffers.items()}

    def run(self, fn) -> dict:
        """fn(...) on fresh copies of the buffers; returns those copies."""
        bufs = {k: (None if b is None else b.clone()) for k, b in self.buffers.items()}
        fn(**self.inputs, **self.views(bufs), page_size=self.case.page_size)
        return bufs

    def live_pages(self) -> list[int]:
        """n_r per row, computed independently of the op and the reference."""
        c = self.case
        cap = min(c.width, -(-c.row_len() // c.page_size))
        lens = self.inputs["cache_seqlens"][: c.bs].tolist()
        return [min(-(-max(n, 0) // c.page_size), cap) for n in lens]


def make_case(c: PageTableCase, gen: torch.Generator, device: str) -> CaseData:
    ctx = c.row_len()
    slot_hi = c.pool * max(ctx, 1) + 5
    # Slots: mostly valid, some -1 sentinels and other negatives (floor division
    # of negatives must floor), held in a strided view (row stride > ctx).
    base = torch.randint(0, slot_hi, (c.pool, ctx + c.row_pad), generator=gen, dtype=torch.int32)
    if c.negative_slots and base.numel():
        neg = torch.rand(base.shape, generator=gen) < 0.1
        base[neg] = -torch.randint(1, 3 * c.page_size + 2, (int(neg.sum()),), generator=gen, dtype=torch.int32)
        base[torch.rand(base.shape, generator=gen) < 0.05] = -1
    lo = 0 if c.min_len is None else c.min_len
    hi = (c.width + 2) * c.page_size + ctx if c.max_len is None else c.max_len
    inputs = dict(
        req_to_token=base[:, :ctx],
        req_pool_indices=torch.randint(0, c.pool, (c.bs + 2,), generator=gen).to(c.index_dtype),
        cache_seqlens=torch.randint(lo, hi + 1, (c.bs + 2,), generator=gen).to(c.seqlen_dtype),
        full_to_swa=None,
    )
    if c.swa:
        m = max(1, slot_hi // 2) if c.swa_size is None else c.swa_size
        # every slot lies inside the mapping (a live one past it is an error:
        # tests/test_hostile_lengths.py); negatives read entry 0
        base.copy_(torch.where(base >= 0, base % m, base))
        mapping = torch.randint(-1, 2 * m + 7, (m,), generator=gen, dtype=torch.int64)
        mapping[torch.rand(m, generator=gen) < 0.1] = -1
        inputs["full_to_swa"] = mapping.to(c.mapping_dtype)

    shape = (c.offset + c.bs + c.pad_rows, c.offset + c.width + c.pad_cols)
    buffers = {}
    for name in ("page_table", "swa_page_table"):
        if name == "swa_page_table" and not c.swa:
            buffers[name] = None
            continue
        buf = torch.empty(shape, dtype=torch.int32)
        buffers[name] = buf.fill_(c.prefill) if c.prefill is not None else poison_like(buf, gen)
    to = lambda d: {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in d.items()}  # noqa: E731
    return CaseData(to(inputs), to(buffers), c)


EDGE_CASES = {
    "bs0": PageTableCase(bs=0),
    "bs1": PageTableCase(bs=1),
    "bs1_page1": PageTableCase(bs=1, page_size=1, width=37),
    "odd_sizes": PageTableCase(bs=13, page_size=3, width=29, pool=17, extra_cols=1),
    "no_swa": PageTableCase(swa=False),
    "swa_size_1": PageTableCase(swa_size=1),
    "swa_size_3": PageTableCase(bs=9, swa_size=3, page_size=2, width=30),
    "swa_covers_all_slots": PageTableCase(swa_size=10**5, negative_slots=False),
    "idx32_len32": PageTableCase(index_dtype=torch.int32, seqlen_dtype=torch.int32),
    "idx32_len64": PageTableCase(index_dtype=torch.int32, seqlen_dtype=torch.int64),
    "idx64_len32": PageTableCase(index_dtype=torch.int64, seqlen_dtype=torch.int32),
    "idx64_len64": PageTableCase(index_dtype=torch.int64, seqlen_dtype=torch.int64),
    "lengths_zero": PageTableCase(bs=9, min_len=0, max_len=0),
    "lengths_past_width": PageTableCase(bs=9, width=4, min_len=5 * 16, max_len=50 * 16),
    "row_shorter_than_table": PageTableCase(bs=9, width=20, ctx=100, max_len=40 * 16),
    "row_shorter_page1": PageTableCase(bs=9, width=50, page_size=1, ctx=17, max_len=80),
    "page_larger_than_row": PageTableCase(bs=6, width=5, page_size=4096, ctx=100, max_len=9000),
    "empty_rows": PageTableCase(bs=4, ctx=0, row_pad=2),
    "width0": PageTableCase(width=0),
    "pool1": PageTableCase(pool=1, bs=7),
    "int64_lengths_at_int32_max": PageTableCase(seqlen_dtype=torch.int64, min_len=2**31 - 8, max_len=2**31 - 1),
    "int32_max_lengths": PageTableCase(seqlen_dtype=torch.int32, min_len=2**31 - 8, max_len=2**31 - 1),
    "no_pad": PageTableCase(offset=0, pad_rows=0, pad_cols=0, row_pad=0, extra_cols=0),
    "non_pow2_page": PageTableCase(bs=11, page_size=48, width=40, pool=13),
    "page5": PageTableCase(bs=11, page_size=5, width=60),
    "page100": PageTableCase(bs=7, page_size=100, width=12),
    "prefilled_minus1": PageTableCase(bs=10, width=40, prefill=-1),
    "wide_page256": PageTableCase(bs=3, page_size=256, width=1100, pool=4, extra_cols=0),
    "many_rows": PageTableCase(bs=300, page_size=64, width=5, pool=301),
    # CUDA: more than 4096 / bs chunks per row, so blocks loop over chunks.
    "chunk_loop_wide": PageTableCase(bs=64, page_size=1, width=40000, ctx=40000, pool=66,
                                     min_len=30000, max_len=45000, swa_size=5000),
    # CUDA: one block per row (bs > 4096), each covering three chunks.
    "chunk_loop_many_rows": PageTableCase(bs=5000, page_size=1, width=1100, ctx=1100, pool=40,
                                          pad_rows=1, pad_cols=1),
    "no_negative_slots": PageTableCase(negative_slots=False),
    "full_to_swa_int32": PageTableCase(mapping_dtype=torch.int32),
    "full_to_swa_int32_size_1": PageTableCase(mapping_dtype=torch.int32, swa_size=1),
    "full_to_swa_int32_wide": PageTableCase(bs=64, page_size=1, width=5000, ctx=5000, pool=66, min_len=3000,
                                            max_len=6000, swa_size=700, mapping_dtype=torch.int32),
}

PAGE_SIZES = (1, 16, 32, 64, 128, 256)
