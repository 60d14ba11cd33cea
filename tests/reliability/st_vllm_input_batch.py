"""Hypothesis strategies: valid calls of vllm_prepare_pos_seq_lens,
vllm_combine_sampled_and_draft_tokens and vllm_prepare_step
(docs/operators/vllm_input_batch.md), their bad-input rows and hostile values.

Space: the steps of st_vllm_block_table (requests, groups, context
parallelism, -1 rows, masking, padded and short gathers, index dtypes) for
the positions and the fused step; for the combine 0 .. 40 rows, 0 .. 5 draft
steps, 0 or 1 new sampled tokens, prompt rows, rows crossing the prompt's end
and generating rows, -1 rows, 1-D or [max_num_reqs, 1] last sampled tokens.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

import sgl_meta
from row_kit import apply, at, hostile, set_
from sgl_meta import reference
from st_vllm_block_table import _r, base_step, events as step_events, step_cases, to_case
from vllm_cases import CombineCase, make_combine, make_step, pos_args, prepare_step_args

POS, COMBINE, STEP = "vllm_prepare_pos_seq_lens", "vllm_combine_sampled_and_draft_tokens", "vllm_prepare_step"
NAME = "vllm_input_batch"


def _step_extra(c):
    return dict(n=c.n, groups=c.groups, cp=c.cp_size, pad=c.no_request_rows, rows=c.n + c.pad_rows)


@st.composite
def pos_cases(draw):
    c = draw(step_cases())
    step = make_step(c, torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1))))
    return to_case(draw, pos_args(step), ("pos", "seq_lens"), POS, _step_extra(c))


@st.composite
def step_call_cases(draw):
    c = draw(step_cases())
    step = make_step(c, torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1))))
    mask = draw(st.booleans())
    args = prepare_step_args(step, mask=mask)
    args["pad_id"] = draw(st.sampled_from([-1, -1, 0]))
    return to_case(draw, args, ("pos", "seq_lens", "dst_block_tables", "slot_mappings"), STEP,
                   _step_extra(c) | {"mask": mask})


@st.composite
def combine_cases(draw):
    k = draw(st.sampled_from([1, 1, 0]))
    c = CombineCase(n=draw(st.one_of(st.integers(0, 6), st.integers(7, 40))), extra_reqs=draw(st.integers(0, 4)),
                    steps=draw(st.integers(0, 5)), num_new_sampled=k, no_request_rows=draw(st.integers(0, 2)),
                    last_2d=draw(st.booleans()), idx_dtype=draw(st.sampled_from([torch.int32, torch.int64])))
    args = make_combine(c, torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1))))
    return to_case(draw, args, ("input_ids", "logits_indices"), COMBINE,
                   dict(n=c.n, steps=c.steps, k=k, pad=c.no_request_rows))


def combine_events(case):
    e = case.extra
    return ["n=" + ("0" if e["n"] == 0 else "<=6" if e["n"] <= 6 else ">6"), f"steps={e['steps']}", f"k={e['k']}",
            "no_request_rows=" + ("0" if e["pad"] == 0 else ">0")]


ENTRIES = [
    dict(name=POS, op=sgl_meta.vllm_prepare_pos_seq_lens, ref=reference.vllm_prepare_pos_seq_lens,
         cases=pos_cases, events=step_events, weight=0.15),
    dict(name=COMBINE, op=sgl_meta.vllm_combine_sampled_and_draft_tokens,
         ref=reference.vllm_combine_sampled_and_draft_tokens, cases=combine_cases, events=combine_events, weight=0.2),
    dict(name=STEP, op=sgl_meta.vllm_prepare_step, ref=reference.vllm_prepare_step,
         cases=step_call_cases, events=step_events, weight=0.25),
]


# ---- bad-input rows -----------------------------------------------------------------
def _pos_base(gen, device):
    return pos_args(base_step(gen, device))


def _step_base(gen, device):
    return prepare_step_args(base_step(gen, device))


def _combine_base(gen, device):
    return make_combine(CombineCase(n=4, steps=2), gen, device)


BAD_INPUT_BASES = {POS: _pos_base, COMBINE: _combine_base, STEP: _step_base}


BAD_INPUT_ROWS = [
    _r(POS, "seq_lens int64", apply("seq_lens", lambda t: t.long()), "seq_lens must have dtype int32"),
    _r(POS, "seq_lens shorter than n", apply("seq_lens", lambda t: t[:3]),
       "seq_lens.size(0) must be >= idx_mapping.numel() = 4, got 3"),
    _r(POS, "pos step 2", apply("pos", lambda t: torch.cat([t, t])[::2]), "pos must have inner stride 1"),
    _r(POS, "pos is seq_lens", lambda kw: kw.update(pos=kw["seq_lens"]), "overlap in memory"),
    _r(POS, "seq_lens inside num_computed_tokens", lambda kw: kw.update(seq_lens=kw["num_computed_tokens"]),
       "overlap in memory (an output must not alias an input)"),
    _r(POS, "query_start_loc 2-D", apply("query_start_loc", lambda t: t[None]), "query_start_loc must be 1-D"),
    _r(COMBINE, "num_new_sampled_tokens 2", set_(num_new_sampled_tokens=2),
       "num_new_sampled_tokens must be 0 or 1, got 2"),
    _r(COMBINE, "draft_tokens 1-D", apply("draft_tokens", lambda t: t[:, 0]), "draft_tokens must be 2-D"),
    _r(COMBINE, "last_sampled_tokens 3-D", apply("last_sampled_tokens", lambda t: t[None]),
       "last_sampled_tokens must be 1-D or 2-D, got 3-D"),
    _r(COMBINE, "input_ids int64", apply("input_ids", lambda t: t.long()), "input_ids must have dtype int32"),
    _r(COMBINE, "cu_num_logits shorter than n + 1", apply("cu_num_logits", lambda t: t[:4]),
       "cu_num_logits.size(0) must be >= idx_mapping.numel() + 1 = 5, got 4"),
    _r(COMBINE, "logits_indices is input_ids", lambda kw: kw.update(logits_indices=kw["input_ids"]),
       "overlap in memory"),
    _r(COMBINE, "input_ids is query_start_loc", lambda kw: kw.update(input_ids=kw["query_start_loc"]),
       "overlap in memory (an output must not alias an input)"),
    _r(STEP, "mask without reach", set_(sliding_window_reach=None), "mask_sliding_window=True needs sliding_window_reach"),
    _r(STEP, "dst_block_tables one short", apply("dst_block_tables", lambda ts: ts[:2]),
       "dst_block_tables must hold 3 tensors"),
    _r(STEP, "slot_mappings is pos", lambda kw: kw.update(slot_mappings=kw["pos"].view(1, -1).expand(3, -1)),
       "slot_mappings rows overlap"),
    _r(STEP, "dcp_sharded int64", apply("dcp_sharded", lambda t: t.long()), "dcp_sharded must have dtype bool"),
    _r(STEP, "cp_rank negative", set_(cp_rank=-1), "cp_rank must be in [0, cp_size = 1), got -1"),
    _r(STEP, "33 groups", lambda kw: kw.update(src_block_tables=kw["src_block_tables"] * 11),
       "src_block_tables must hold at most 32 tensors"),
]


# ---- hostile rows ------------------------------------------------------------------
HOSTILE_ROWS = [
    hostile(POS, "request index past num_computed_tokens", at("idx_mapping", 0, 7), "idx_mapping[0] = 7 is outside"),
    hostile(POS, "query_start_loc decreasing", at("query_start_loc", 3, 0), "query_start_loc[3] = 0"),
    hostile(POS, "negative computed tokens", apply("num_computed_tokens", lambda t: t.fill_(-1)), "num_computed_tokens["),
    hostile(POS, "seq_lens past int32", apply("num_computed_tokens", lambda t: t.fill_(2**31 - 1)),
       "does not fit int32 seq_lens"),
    hostile(POS, "-1 rows", apply("idx_mapping", lambda t: t.fill_(-1)), raises=()),
    hostile(STEP, "request index past the tables", at("idx_mapping", 2, 7), "idx_mapping[2] = 7 is outside"),
    hostile(STEP, "num_blocks past the width", apply("num_blocks", lambda t: t.fill_(10**6)), "num_blocks[0, "),
    hostile(STEP, "position past the table", apply("num_computed_tokens", lambda t: t.fill_(2**30)), "reads block column"),
    hostile(STEP, "block size 0", apply("block_sizes", lambda t: t.fill_(0)), "block_sizes[0] = 0 is < 1"),
    hostile(STEP, "-1 rows", apply("idx_mapping", lambda t: t.fill_(-1)), raises=()),
    hostile(COMBINE, "request index past the tables", at("idx_mapping", 0, 7), "idx_mapping[0] = 7 is outside [-1, 7)"),
    hostile(COMBINE, "cu_num_logits decreasing", at("cu_num_logits", 2, 0), "must be non-negative, non-decreasing"),
    hostile(COMBINE, "more logits than draft steps",
       lambda kw: (kw["cu_num_logits"].mul_(5), kw.update(logits_indices=kw["logits_indices"].new_zeros(1000))),
       "more than draft_tokens.size(1)"),
    hostile(COMBINE, "a generating row without logits",
            lambda kw: (kw["seq_lens"].fill_(10**6), kw["cu_num_logits"].fill_(0)),
            "writes its last sampled token (seq_lens past prefill_len) but has no logits"),
    hostile(COMBINE, "-1 rows", apply("idx_mapping", lambda t: t.fill_(-1)), raises=()),
]
