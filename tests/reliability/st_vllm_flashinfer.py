"""Hypothesis strategies: valid calls of vllm_copy_page_indices
(docs/operators/vllm_flashinfer.md), its bad-input rows and hostile values.

Space: 0 .. 40 requests, block tables 1 .. 700 wide with extra rows, empty
rows, int32/int64 cu_num_blocks, a poisoned page_indices tail.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

import sgl_meta
from row_kit import apply, at, hostile
from sgl_meta import reference
from st_vllm_block_table import _r, to_case
from vllm_cases import CopyPagesCase, make_copy_pages

COPY = "vllm_copy_page_indices"
NAME = "vllm_flashinfer"


@st.composite
def copy_cases(draw):
    c = CopyPagesCase(n=draw(st.one_of(st.integers(0, 6), st.integers(7, 40))),
                      width=draw(st.sampled_from([1, 7, 64, 700])), extra_rows=draw(st.integers(0, 3)),
                      empty_rows=draw(st.integers(0, 3)), tail=draw(st.integers(0, 9)),
                      cu_dtype=draw(st.sampled_from([torch.int32, torch.int64])))
    args = make_copy_pages(c, torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1))))
    return to_case(draw, args, ("page_indices",), COPY, dict(n=c.n, width=c.width))


def copy_events(case):
    e = case.extra
    return ["n=" + ("0" if e["n"] == 0 else "<=6" if e["n"] <= 6 else ">6"), f"width={e['width']}"]


ENTRIES = [
    dict(name=COPY, op=sgl_meta.vllm_copy_page_indices, ref=reference.vllm_copy_page_indices, cases=copy_cases,
         events=copy_events, weight=0.1),
]


# ---- bad-input rows -----------------------------------------------------------------
def _copy_base(gen, device):
    return make_copy_pages(CopyPagesCase(n=4, width=8, empty_rows=0), gen, device)


BAD_INPUT_BASES = {COPY: _copy_base}

BAD_INPUT_ROWS = [
    _r(COPY, "page_indices int64", apply("page_indices", lambda t: t.long()), "page_indices must have dtype int32"),
    _r(COPY, "block_table 1-D", apply("block_table", lambda t: t[0]), "block_table must be 2-D"),
    _r(COPY, "block_table fewer rows than requests", apply("block_table", lambda t: t[:3]),
       "block_table.size(0) must be >= cu_num_blocks.numel() - 1 = 4, got 3"),
    _r(COPY, "block_table column step 2", apply("block_table", lambda t: torch.cat([t, t], 1)[:, ::2]),
       "block_table must have inner stride 1"),
    _r(COPY, "cu_num_blocks empty", apply("cu_num_blocks", lambda t: t[:0]),
       "cu_num_blocks.size(0) must be >= 1"),
    _r(COPY, "cu_num_blocks float", apply("cu_num_blocks", lambda t: t.float()),
       "cu_num_blocks must have dtype int32 or int64"),
    _r(COPY, "page_indices inside block_table", lambda kw: kw.update(page_indices=kw["block_table"].view(-1)),
       "overlap in memory (an output must not alias an input)"),
]


# ---- hostile rows ------------------------------------------------------------------
HOSTILE_ROWS = [
    hostile(COPY, "cu_num_blocks decreasing", at("cu_num_blocks", 2, 0), "must be non-negative, non-decreasing"),
    hostile(COPY, "cu_num_blocks negative", at("cu_num_blocks", 0, -3), "cu_num_blocks[0] = -3"),
    hostile(COPY, "row past page_indices", at("cu_num_blocks", 4, 10**6), "within page_indices"),
    hostile(COPY, "row wider than block_table", apply("cu_num_blocks", lambda t: t.mul_(9)),
            "span at most block_table.size(1) = 8"),
    hostile(COPY, "all rows empty", apply("cu_num_blocks", lambda t: t.fill_(3)), raises=()),
]
