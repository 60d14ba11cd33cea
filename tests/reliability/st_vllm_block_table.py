"""Hypothesis strategies: valid calls of vllm_compute_slot_mappings and
vllm_gather_block_tables (docs/operators/vllm_block_table.md), their bad-input
rows and hostile values.

Space: 0 .. 40 requests, 0 .. 5 KV-cache groups with block sizes 1 .. 32 (powers
of two and not), decode / speculative / chunked-prefill query lengths, -1
rows, context parallelism (cp_size 1 .. 4, any rank, interleave 1 .. 5, groups
sharded or not), disabled groups, sliding-window reach with and without
masking, padded (num_rows > n) and short (num_rows < n) gathers, destinations
wider than the sources, every index input int32 or int64; tables and outputs as
views at an offset, tables with padded rows, poisoned bases.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

import sgl_meta
from row_kit import Row, apply, at, hostile, set_
from sgl_meta import reference
from tensor_case import Case, strided
from vllm_cases import StepCase, gather_args, make_step, slot_args

SLOTS, GATHER = "vllm_compute_slot_mappings", "vllm_gather_block_tables"
NAME = "vllm_block_table"


@st.composite
def step_cases(draw, groups_min: int = 0) -> StepCase:
    index = st.sampled_from([torch.int32, torch.int64])
    cp_size = draw(st.sampled_from([1, 1, 1, 2, 3, 4]))
    return StepCase(
        n=draw(st.one_of(st.integers(0, 6), st.integers(7, 40))),
        groups=draw(st.integers(groups_min, 5)),
        extra_reqs=draw(st.integers(0, 5)),
        pad_rows=draw(st.integers(-3, 6)),
        pad_tokens=draw(st.integers(0, 9)),
        max_query=draw(st.sampled_from([1, 4, 9, 40])),
        max_context=draw(st.sampled_from([1, 50, 300, 2000])),
        cp_size=cp_size,
        cp_rank=draw(st.integers(0, cp_size - 1)),
        cp_interleave=draw(st.integers(1, 5)),
        no_request_rows=draw(st.integers(0, 3)),
        idx_dtype=draw(index), qsl_dtype=draw(index), computed_dtype=draw(index), pos_dtype=draw(index),
        sliding=draw(st.booleans()), disabled=draw(st.booleans()),
        wide_dst=draw(st.sampled_from([0, 0, 3])),
    )


def _strided(draw, gen, v):
    if isinstance(v, list):
        return [_strided(draw, gen, t) for t in v]
    if not isinstance(v, torch.Tensor):
        return v
    lead, tail = draw(st.integers(0, 3)), draw(st.integers(0, 3))
    filler = torch.tensor([True]) if v.dtype == torch.bool else None
    row_pad = draw(st.integers(0, 3)) if v.dim() == 2 else 0
    return strided(v, gen, lead=lead, tail=tail, row_pad=row_pad, filler=filler)


def to_case(draw, args: dict, outputs: tuple, note: str, extra: dict) -> Case:
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1)))
    return Case({k: _strided(draw, gen, v) for k, v in args.items()}, outputs, note=note, extra=extra)


def _extra(c: StepCase) -> dict:
    return dict(n=c.n, groups=c.groups, cp=c.cp_size, pad=c.no_request_rows, rows=c.n + c.pad_rows)


@st.composite
def slot_cases(draw) -> Case:
    c = draw(step_cases())
    step = make_step(c, torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1))))
    args = slot_args(step)
    args["pad_id"] = draw(st.sampled_from([-1, -1, 0, 2**40]))
    return to_case(draw, args, ("slot_mappings",), SLOTS, _extra(c))


@st.composite
def gather_cases(draw) -> Case:
    c = draw(step_cases())
    step = make_step(c, torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1))))
    mask = draw(st.booleans())
    extra = _extra(c) | {"mask": mask}
    return to_case(draw, gather_args(step, mask=mask), ("dst_block_tables",), GATHER, extra)


def events(case: Case) -> list[str]:
    e = case.extra
    labels = ["n=" + ("0" if e["n"] == 0 else "<=6" if e["n"] <= 6 else ">6"), f"groups={e['groups']}",
              f"cp_size={e['cp']}", "no_request_rows=" + ("0" if e["pad"] == 0 else ">0"),
              "rows=" + ("<n" if e["rows"] < e["n"] else "n" if e["rows"] == e["n"] else ">n")]
    if "mask" in e:
        labels.append(f"mask={e['mask']}")
    return labels


ENTRIES = [
    dict(name=SLOTS, op=sgl_meta.vllm_compute_slot_mappings, ref=reference.vllm_compute_slot_mappings,
         cases=slot_cases, events=events, weight=0.2),
    dict(name=GATHER, op=sgl_meta.vllm_gather_block_tables, ref=reference.vllm_gather_block_tables,
         cases=gather_cases, events=events, weight=0.2),
]


# ---- bad-input rows (bad_input_table.py) ------------------------------------------
BASE_STEP = StepCase(n=4, groups=3, pad_rows=2, disabled=False)


def base_step(gen, device):
    return make_step(BASE_STEP, gen, device)


def _slot_base(gen, device):
    return slot_args(base_step(gen, device))


def _gather_base(gen, device):
    return gather_args(base_step(gen, device))


BAD_INPUT_BASES = {SLOTS: _slot_base, GATHER: _gather_base}


def _r(op, id, edit, *names, **kw):
    return Row(id=f"{op}/{id}", op=op, edit=edit, names=names, **kw)


def _element(name, i, fn):
    def edit(kw):
        kw[name] = [fn(t) if j == i else t for j, t in enumerate(kw[name])]
    return edit


BAD_INPUT_ROWS = [
    _r(SLOTS, "block_tables[1] int64", _element("block_tables", 1, lambda t: t.long()),
       "block_tables[1] must have dtype int32"),
    _r(SLOTS, "block_tables[0] 1-D", _element("block_tables", 0, lambda t: t[0]), "block_tables[0] must be 2-D"),
    _r(SLOTS, "block_tables[2] column step 2", _element("block_tables", 2, lambda t: torch.cat([t, t], 1)[:, ::2]),
       "block_tables[2] must have inner stride 1"),
    _r(SLOTS, "33 groups", apply("block_tables", lambda ts: ts * 11), "block_tables must hold at most 32 tensors"),
    _r(SLOTS, "block_sizes shorter than the groups", apply("block_sizes", lambda t: t[:2]),
       "block_sizes.size(0) must be >= the number of KV-cache groups = 3, got 2"),
    _r(SLOTS, "slot_mapping_enabled int32", apply("slot_mapping_enabled", lambda t: t.int()),
       "slot_mapping_enabled must have dtype bool (torch.bool), got torch.int32"),
    _r(SLOTS, "dcp_sharded shorter", apply("dcp_sharded", lambda t: t[:1]), "dcp_sharded.size(0) must be >="),
    _r(SLOTS, "slot_mappings fewer rows than groups", apply("slot_mappings", lambda t: t[:2]),
       "slot_mappings.size(0) must be >= the number of KV-cache groups = 3, got 2"),
    _r(SLOTS, "slot_mappings int32", apply("slot_mappings", lambda t: t.int()), "slot_mappings must have dtype int64"),
    _r(SLOTS, "slot_mappings rows overlap", apply("slot_mappings", lambda t: t[:1].expand(3, -1)),
       "slot_mappings rows overlap"),
    _r(SLOTS, "query_start_loc shorter than n + 1", apply("query_start_loc", lambda t: t[:4]),
       "query_start_loc.size(0) must be >= idx_mapping.numel() + 1 = 5, got 4"),
    _r(SLOTS, "positions 2-D", apply("positions", lambda t: t[None]), "positions must be 1-D"),
    _r(SLOTS, "cp_size 0", set_(cp_size=0), "cp_size must be in [1, 2**31 - 1], got 0"),
    _r(SLOTS, "cp_rank past cp_size", set_(cp_size=2, cp_rank=2), "cp_rank must be in [0, cp_size = 2), got 2"),
    _r(SLOTS, "cp_interleave 0", set_(cp_interleave=0), "cp_interleave must be in [1, 2**31 - 1], got 0"),
    _r(SLOTS, "slot_mappings is positions", lambda kw: kw.update(slot_mappings=kw["positions"].view(1, -1)
                                                                .expand(3, -1)),
       "slot_mappings rows overlap"),
    _r(SLOTS, "slot_mappings on meta", lambda kw: kw.update(slot_mappings=kw["slot_mappings"].to("meta")),
       "slot_mappings", "meta"),
    _r(GATHER, "dst_block_tables one short", apply("dst_block_tables", lambda ts: ts[:2]),
       "dst_block_tables must hold 3 tensors (one per source table), got 2"),
    _r(GATHER, "dst_block_tables[1] too few rows", _element("dst_block_tables", 1, lambda t: t[:3]),
       "dst_block_tables[1].size(0) must be >= num_rows = 6, got 3"),
    _r(GATHER, "dst_block_tables[0] rows overlap", _element("dst_block_tables", 0, lambda t: t[:1].expand(7, -1)),
       "dst_block_tables[0] rows overlap"),
    _r(GATHER, "dst aliases src", lambda kw: kw.update(dst_block_tables=[kw["src_block_tables"][0],
                                                                          *kw["dst_block_tables"][1:]]),
       "overlap in memory"),
    _r(GATHER, "two destinations alias", lambda kw: kw.update(dst_block_tables=[kw["dst_block_tables"][0]] * 3),
       "overlap in memory"),
    _r(GATHER, "num_blocks int64", apply("num_blocks", lambda t: t.long()), "num_blocks must have dtype int32"),
    _r(GATHER, "num_blocks fewer rows than groups", apply("num_blocks", lambda t: t[:2]),
       "num_blocks.size(0) must be >= the number of KV-cache groups = 3, got 2"),
    _r(GATHER, "negative num_rows", set_(num_rows=-1), "num_rows must be >= 0, got -1"),
    _r(GATHER, "masking without reach", set_(sliding_window_reach=None),
       "num_computed_tokens (sliding-window masking) needs sliding_window_reach and block_sizes"),
    _r(GATHER, "masking without block_sizes", set_(block_sizes=None), "needs sliding_window_reach and block_sizes"),
    _r(GATHER, "sliding_window_reach int64", apply("sliding_window_reach", lambda t: t.long()),
       "sliding_window_reach must have dtype int32"),
]


# ---- hostile rows (hostile_table.py) --------------------------------------------
HOSTILE_ROWS = [
    hostile(SLOTS, "request index past the tables", at("idx_mapping", 1, 7), "idx_mapping[1] = 7 is outside [-1, 7)"),
    hostile(SLOTS, "request index -2", at("idx_mapping", 0, -2), "idx_mapping[0] = -2 is outside"),
    hostile(SLOTS, "query_start_loc decreasing", at("query_start_loc", 2, 0), "query_start_loc[2] = 0"),
    hostile(SLOTS, "query_start_loc past the buffers", at("query_start_loc", 4, 10**6), "query_start_loc[4] = 1000000"),
    hostile(SLOTS, "negative position", at("positions", 0, -1), "positions[0] = -1 is negative"),
    hostile(SLOTS, "position past the table", at("positions", 0, 2**40), "reads block column"),
    hostile(SLOTS, "block size 0", apply("block_sizes", lambda t: t.fill_(0)), "block_sizes[0] = 0 is < 1"),
    hostile(SLOTS, "-1 rows read nothing", apply("idx_mapping", lambda t: t.fill_(-1)), raises=()),
    hostile(SLOTS, "positions past the tokens not read", lambda kw: kw["positions"][-1:].fill_(-(2**40)), raises=()),
    hostile(GATHER, "request index past the tables", at("idx_mapping", 3, 7), "idx_mapping[3] = 7 is outside"),
    hostile(GATHER, "num_blocks past the width", apply("num_blocks", lambda t: t.fill_(10**6)), "num_blocks[0, "),
    hostile(GATHER, "num_blocks negative", apply("num_blocks", lambda t: t.fill_(-1)), "num_blocks[0, "),
    hostile(GATHER, "negative computed tokens", apply("num_computed_tokens", lambda t: t.fill_(-3)),
       "num_computed_tokens["),
    hostile(GATHER, "-1 rows read nothing", apply("idx_mapping", lambda t: t.fill_(-1)), raises=()),
]
