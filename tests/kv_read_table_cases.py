"""Random and edge-case inputs for kv_read_page_table / kv_read_token_stream.

A unified pool: ``req_to_token`` holds virtual token ids (virtual page * page
size + offset) with some negative slots, ``v2p`` maps virtual pages to shuffled
physical pages with some ``-1`` (freed) rows. Outputs are views into larger
poisoned buffers (page table: an offset, extra rows and columns; token stream:
poisoned elements before, between and after the CSR rows), so a write outside
what the op may write shows as a changed buffer element.

``formula_*`` recompute the expected outputs element by element from the
contract in plain Python (independently of the op and of the eager
reference), for small cases.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from helpers import poison_like


@dataclass
class KvCase:
    form: str = "table"  # "table" (kv_read_page_table) or "stream" (kv_read_token_stream)
    bs: int = 5
    page_size: int = 16
    ctx: int = 200  # req_to_token.size(1)
    row_pad: int = 3  # req_to_token row stride - ctx
    pool: int = 9
    vpages: int = 60  # virtual pages slots point into (v2p covers them)
    v2p: bool = True
    v2p_extra: int = 3  # v2p entries past the pages slots use
    freed_frac: float = 0.1  # v2p rows set to -1
    neg_frac: float = 0.1  # negative slots in req_to_token
    min_len: int = 0  # raised to -delta: a negative window is an error (tests/test_hostile_lengths.py)
    max_len: int | None = None  # None: past the row
    delta: int = 0  # seq_len_delta
    kv_start: str = "none"  # "none", "zero", "aligned", "any", "past_row"
    index_dtype: torch.dtype = torch.int64
    len_dtype: torch.dtype = torch.int32
    # page table
    max_pages: int = 9
    zero_tail: bool = False
    offset: int = 1  # out view starts at buffer[offset, offset]
    pad_rows: int = 2
    pad_cols: int = 3
    # token stream
    out_dtype: torch.dtype = torch.int32
    lead: int = 3  # poisoned elements before the first row (indptr[0])
    gap: int = 2  # max poisoned elements between rows
    tail: int = 5  # poisoned elements after the last row


@dataclass
class KvData:
    case: KvCase
    inputs: dict  # req_to_token, req_pool_indices, seq_lens, v2p, kv_start_idx (+ indptr)
    buffer: torch.Tensor  # the poisoned buffer `out` views

    def out_view(self, buf: torch.Tensor) -> torch.Tensor:
        c = self.case
        if c.form == "table":
            return buf[c.offset : c.offset + c.bs, c.offset : c.offset + c.max_pages]
        return buf

    def kwargs(self, buf: torch.Tensor) -> dict:
        c = self.case
        kw = dict(self.inputs, out=self.out_view(buf), page_size=c.page_size, seq_len_delta=c.delta)
        if c.form == "table":
            kw.update(max_pages=c.max_pages, zero_tail=c.zero_tail)
        return kw

    def run(self, fn) -> torch.Tensor:
        """fn(**kwargs) on a fresh copy of the buffer; returns that copy."""
        buf = self.buffer.clone()
        fn(**self.kwargs(buf))
        return buf

    def live(self) -> list[int]:
        """n_b per row, from the contract (independent of the op)."""
        c = self.case
        lens = self.inputs["seq_lens"][: c.bs].tolist()
        starts = [0] * c.bs if self.inputs["kv_start_idx"] is None else self.inputs["kv_start_idx"][: c.bs].tolist()
        out = []
        for n, s in zip(lens, starts):
            n = max(n + c.delta, 0)
            left = max(c.ctx - s, 0)
            if c.form == "table":
                out.append(min(-(-n // c.page_size), -(-left // c.page_size), c.max_pages))
            else:
                out.append(min(n, left))
        return out


def _ints(gen, lo, hi, shape, dtype=torch.int64):
    return torch.randint(lo, max(hi, lo + 1), shape, generator=gen, dtype=torch.int64).to(dtype)


def make_case(c: KvCase, gen: torch.Generator, device: str) -> KvData:
    ps = c.page_size
    # Virtual ids: page * ps + offset, pages in [0, vpages).
    slot_hi = min(c.vpages * ps, 2**31 - 1)
    base = _ints(gen, 0, slot_hi, (c.pool, c.ctx + c.row_pad), torch.int32)
    if c.neg_frac > 0 and base.numel():
        neg = torch.rand(base.shape, generator=gen) < c.neg_frac
        base[neg] = -_ints(gen, 1, 3 * min(ps, 2**20) + 2, (int(neg.sum()),), torch.int32)
        base[torch.rand(base.shape, generator=gen) < c.neg_frac / 2] = -1
    req_to_token = base[:, : c.ctx]
    v2p = None
    if c.v2p:
        size = -(-slot_hi // ps) + c.v2p_extra
        v2p = torch.randperm(size + 7, generator=gen)[:size].to(torch.int64)  # shuffled physical pages
        v2p[torch.rand(size, generator=gen) < c.freed_frac] = -1
    hi = (c.max_pages + 2) * ps + c.ctx if c.max_len is None else c.max_len
    lo, hi = max(c.min_len, -c.delta, 0), min(hi, 2**31 - 1 - max(c.delta, 0))
    seq_lens = _ints(gen, lo, max(hi, lo) + 1, (c.bs + 2,), c.len_dtype)
    kv_start_idx = None
    if c.kv_start != "none":
        if c.kv_start == "zero":
            starts = torch.zeros(c.bs + 2, dtype=torch.int64)
        elif c.kv_start == "aligned":
            starts = _ints(gen, 0, max(c.ctx // ps, 0) + 1, (c.bs + 2,)) * ps
        elif c.kv_start == "any":
            starts = _ints(gen, 0, c.ctx + 1, (c.bs + 2,))
        else:  # "past_row": some windows start at or past the row's end
            starts = _ints(gen, max(c.ctx - 2, 0), c.ctx + 9, (c.bs + 2,))
        kv_start_idx = starts.to(c.index_dtype)
    inputs = dict(
        req_to_token=req_to_token,
        req_pool_indices=_ints(gen, 0, c.pool, (c.bs,), c.index_dtype),
        seq_lens=seq_lens,
        v2p=v2p,
        kv_start_idx=kv_start_idx,
    )
    data = KvData(c, inputs, torch.empty(0))
    if c.form == "table":
        shape = (c.offset + c.bs + c.pad_rows, c.offset + c.max_pages + c.pad_cols)
        data.buffer = poison_like(torch.empty(shape, dtype=torch.int32), gen)
    else:
        # CSR rows with poisoned gaps: indptr[b + 1] = indptr[b] + n_b + gap_b.
        live = data.live()
        gaps = _ints(gen, 0, c.gap + 1, (c.bs,)).tolist()
        indptr = [c.lead]
        for n, g in zip(live, gaps):
            indptr.append(indptr[-1] + n + g)
        data.inputs["indptr"] = torch.tensor(indptr + [10**9], dtype=c.index_dtype)  # past bs: never read
        data.buffer = poison_like(torch.empty(indptr[-1] + c.tail, dtype=c.out_dtype), gen)
    to = lambda v: v.to(device) if isinstance(v, torch.Tensor) else v  # noqa: E731
    data.inputs = {k: to(v) for k, v in data.inputs.items()}
    data.buffer = data.buffer.to(device)
    return data


# ---- the contract, element by element (small cases only) ---------------------


def _entry(r2t, v2p, req, col, ps):
    slot = int(r2t[req, col])
    vpage = 0 if slot < 0 else slot // ps
    return vpage if v2p is None else max(int(v2p[vpage]), 0)


def formula(data: KvData) -> torch.Tensor:
    """The buffer after a call, computed from the contract in plain Python."""
    c = data.case
    inp = {k: (v.cpu() if isinstance(v, torch.Tensor) else v) for k, v in data.inputs.items()}
    buf = data.buffer.cpu().clone()
    out = data.out_view(buf)
    r2t, v2p, ps = inp["req_to_token"], inp["v2p"], c.page_size
    starts = inp["kv_start_idx"]
    for b, n in enumerate(data.live()):
        req = int(inp["req_pool_indices"][b])
        start = 0 if starts is None else int(starts[b])
        if c.form == "table":
            for col in range(n):
                out[b, col] = _entry(r2t, v2p, req, start + col * ps, ps)
            if c.zero_tail:
                out[b, n : c.max_pages] = 0
        else:
            lo = int(inp["indptr"][b])
            for i in range(n):
                pos = start + i
                out[lo + i] = _entry(r2t, v2p, req, (pos // ps) * ps, ps) * ps + pos % ps
    return buf


EDGE_CASES = {
    "bs0": KvCase(bs=0),
    "bs1": KvCase(bs=1),
    "page1": KvCase(page_size=1, max_pages=60, ctx=70),
    "no_v2p_block_table": KvCase(v2p=False),
    "v2p_all_freed": KvCase(freed_frac=1.0),
    "all_slots_negative": KvCase(neg_frac=2.0),
    "v2p_one_entry": KvCase(vpages=1, v2p_extra=0, neg_frac=0.3),
    "delta_widens_past_max_pages": KvCase(max_pages=4, min_len=3 * 16, max_len=4 * 16, delta=40),
    "delta_negative": KvCase(delta=-20),
    "zero_tail": KvCase(zero_tail=True),
    "zero_tail_short_rows": KvCase(zero_tail=True, min_len=-3, max_len=20, max_pages=12),
    "zero_tail_row_cap": KvCase(zero_tail=True, ctx=50, max_pages=10, min_len=100, max_len=200),
    "kv_start_zero": KvCase(kv_start="zero"),
    "kv_start_aligned": KvCase(kv_start="aligned", max_len=120),
    "kv_start_any": KvCase(kv_start="any", max_len=120),
    "kv_start_past_row": KvCase(kv_start="past_row"),
    "idx32_len32": KvCase(index_dtype=torch.int32, len_dtype=torch.int32),
    "idx32_len64": KvCase(index_dtype=torch.int32, len_dtype=torch.int64, kv_start="any"),
    "idx64_len64": KvCase(index_dtype=torch.int64, len_dtype=torch.int64),
    "row_shorter_than_table": KvCase(ctx=30, max_pages=12, min_len=0, max_len=300),
    "empty_rows": KvCase(ctx=0, row_pad=2),
    "max_pages0": KvCase(max_pages=0),
    "pool1": KvCase(pool=1, bs=7),
    "non_pow2_page": KvCase(page_size=48, ctx=500, max_pages=12, vpages=40),
    "page3": KvCase(page_size=3, ctx=100, max_pages=40, kv_start="any"),
    "page_larger_than_row": KvCase(page_size=4096, ctx=100, max_pages=3, max_len=9000, vpages=5),
    "no_pad": KvCase(offset=0, pad_rows=0, pad_cols=0, row_pad=0, lead=0, gap=0, tail=0),
    "many_rows": KvCase(bs=300, pool=301, max_pages=3, ctx=40, page_size=16),
    # CUDA page table: more than one block step (256 columns) per row, on several blocks.
    "wide_page1": KvCase(bs=9, page_size=1, ctx=3000, max_pages=2900, min_len=1500, max_len=3200, vpages=4000),
    "wide_zero_tail": KvCase(bs=3, page_size=2, ctx=2000, max_pages=1500, min_len=0, max_len=1000,
                             zero_tail=True, vpages=900),
    # CUDA page table: blocks looping over their row. The grid stops at one wave
    # (#SMs x 8 blocks), so 300 rows of 2100 columns get 3 blocks a row on a
    # 132-SM H200, each of 256 columns a step: a row's blocks advance 768
    # columns a trip and take three trips.
    "loop_trips": KvCase(bs=300, pool=301, page_size=1, ctx=2200, max_pages=2100, min_len=1000, max_len=2200,
                         vpages=2500),
    "loop_trips_zero_tail_start": KvCase(bs=300, pool=301, page_size=1, ctx=2200, max_pages=2100, min_len=0,
                                         max_len=2200, zero_tail=True, kv_start="any", vpages=2500),
}

STREAM_EDGE_CASES = {
    "out_int64": KvCase(form="stream", out_dtype=torch.int64),
    "out_int64_page1": KvCase(form="stream", out_dtype=torch.int64, page_size=1, ctx=90, lead=1),
    # Every lead 0..4 puts the rows at a different 16-byte alignment.
    **{f"lead{k}": KvCase(form="stream", lead=k, gap=0, page_size=4, ctx=150) for k in range(5)},
    **{f"lead{k}_int64": KvCase(form="stream", lead=k, gap=3, out_dtype=torch.int64) for k in range(3)},
    # CUDA: rows longer than one 32-page chunk, and many chunks per row.
    "long_rows": KvCase(form="stream", bs=4, page_size=16, ctx=3000, min_len=1000, max_len=3000, vpages=400),
    "long_rows_page1": KvCase(form="stream", bs=3, page_size=1, ctx=2000, min_len=500, max_len=2100, vpages=3000),
    "long_rows_start": KvCase(form="stream", bs=4, page_size=64, ctx=6000, min_len=100, max_len=6000,
                              kv_start="any", vpages=200),
    # CUDA: the 64-bit kernel (page_size > 2^26).
    "huge_page": KvCase(form="stream", page_size=2**27, ctx=70, vpages=1, kv_start="any"),
    "huge_page_int64": KvCase(form="stream", page_size=2**40, ctx=70, vpages=1, out_dtype=torch.int64),
}

PAGE_SIZES = (1, 2, 16, 64, 128)
