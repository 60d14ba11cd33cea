"""Hypothesis strategies: valid calls of vllm_prepare_decode_inputs and
vllm_update_draft_inputs (docs/operators/vllm_spec_decode.md), their bad-input
rows and vllm_update_draft_inputs' hostile values.

vllm_prepare_decode_inputs: 0 .. 40 requests of up to 50 request rows, 1 .. 5
draft steps, lengths anywhere or at the max_model_len clamps, advancing
positions or not, 1-D or 2-D draft tokens, int32/int64 inputs. No device value
indexes anything, so it has no hostile-value rows.

vllm_update_draft_inputs: 0 .. 40 requests, 1 .. 5 speculative steps in
draft-token tables up to 3 columns wider, every step of the table (the last
speculative step and those past it write the token only), hidden rows of 0 ..
300 elements of bfloat16 / float16 / float32 (random bits), lengths anywhere
or at the clamps, advancing or not, int32/int64 tokens and step, a 0-d or
1-element step; the harness lays every tensor at a random offset with padded
rows (the CUDA copy's narrower words). Its hostile value: the step outside the
table.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

import sgl_meta
from row_kit import apply, hostile, set_
from sgl_meta import reference
from st_vllm_block_table import _r, to_case
from vllm_cases import DecodeInputsCase, DraftInputsCase, make_decode_inputs, make_draft_inputs

DECODE = "vllm_prepare_decode_inputs"
UPDATE = "vllm_update_draft_inputs"
NAME = "vllm_spec_decode"
OUT = ("input_ids", "positions", "sample_src_positions", "query_start_loc", "seq_lens")
UPDATE_OUT = ("output_draft_tokens", "next_input_hidden_states", "input_ids", "positions", "seq_lens",
              "sample_src_positions")


@st.composite
def decode_cases(draw):
    n = draw(st.one_of(st.integers(0, 6), st.integers(7, 40)))
    index = st.sampled_from([torch.int32, torch.int64])
    c = DecodeInputsCase(n=n, max_num_reqs=n + draw(st.integers(0, 10)), steps=draw(st.integers(1, 5)),
                         max_model_len=draw(st.sampled_from([1, 2, 100, 131072])), advance=draw(st.booleans()),
                         near_limit=draw(st.booleans()), draft_dtype=draw(index), lens_dtype=draw(index),
                         tail=draw(st.integers(0, 3)))
    args = make_decode_inputs(c, torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1))))
    if draw(st.booleans()):
        args["draft_tokens"] = args["draft_tokens"][:, 0].contiguous()
    return to_case(draw, args, OUT, DECODE, dict(n=n, advance=c.advance, near=c.near_limit))


def decode_events(case):
    e = case.extra
    return ["n=" + ("0" if e["n"] == 0 else "<=6" if e["n"] <= 6 else ">6"), f"advance={e['advance']}",
            f"near_limit={e['near']}"]


@st.composite
def update_cases(draw):
    n = draw(st.one_of(st.integers(0, 6), st.integers(7, 40)))
    steps = draw(st.integers(1, 5))
    cols = steps + draw(st.sampled_from([0, 0, 0, 1, 3]))
    index = st.sampled_from([torch.int32, torch.int64])
    c = DraftInputsCase(n=n, steps=steps, step=draw(st.integers(0, cols - 1)), cols=cols,
                        hidden=draw(st.sampled_from([0, 1, 7, 8, 64, 300])),
                        dtype=draw(st.sampled_from([torch.bfloat16, torch.float16, torch.float32])),
                        max_model_len=draw(st.sampled_from([1, 2, 100, 131072, 2**31 - 1])),
                        advance=draw(st.booleans()), near_limit=draw(st.booleans()), draft_dtype=draw(index),
                        step_dtype=draw(index), step_shape=draw(st.sampled_from([(), (1,)])),
                        tail=draw(st.integers(0, 3)))
    args = make_draft_inputs(c, torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1))))
    last = "last" if c.step == steps - 1 else "past" if c.step >= steps else "next"
    return to_case(draw, args, UPDATE_OUT, UPDATE, dict(n=n, step=last, advance=c.advance, dtype=c.dtype))


def update_events(case):
    e = case.extra
    return ["n=" + ("0" if e["n"] == 0 else "<=6" if e["n"] <= 6 else ">6"), f"step={e['step']}",
            f"advance={e['advance']}", f"dtype={str(e['dtype'])[6:]}"]


ENTRIES = [
    dict(name=DECODE, op=sgl_meta.vllm_prepare_decode_inputs, ref=reference.vllm_prepare_decode_inputs,
         cases=decode_cases, events=decode_events, weight=0.1),
    dict(name=UPDATE, op=sgl_meta.vllm_update_draft_inputs, ref=reference.vllm_update_draft_inputs,
         cases=update_cases, events=update_events, weight=0.1),
]


# ---- bad-input rows -----------------------------------------------------------------
def _decode_base(gen, device):
    return make_decode_inputs(DecodeInputsCase(n=4, max_num_reqs=6), gen, device)


def _update_base(gen, device):
    return make_draft_inputs(DraftInputsCase(n=4, steps=3, step=1, hidden=16), gen, device)


BAD_INPUT_BASES = {DECODE: _decode_base, UPDATE: _update_base}

BAD_INPUT_ROWS = [
    _r(DECODE, "draft_tokens 3-D", apply("draft_tokens", lambda t: t[None]), "draft_tokens must be 1-D or 2-D, got 3-D"),
    _r(DECODE, "positions int32", apply("positions", lambda t: t.int()), "positions must have dtype int64"),
    _r(DECODE, "input_ids shorter than n", apply("input_ids", lambda t: t[:3]),
       "input_ids.size(0) must be >= draft_tokens.size(0) = 4, got 3"),
    _r(DECODE, "query_start_loc shorter than max_num_reqs + 1", apply("query_start_loc", lambda t: t[:6]),
       "query_start_loc.size(0) must be >= max_num_reqs + 1 = 7, got 6"),
    _r(DECODE, "max_num_reqs below n", set_(max_num_reqs=3), "max_num_reqs must be >= draft_tokens.size(0) = 4"),
    _r(DECODE, "max_model_len 0", set_(max_model_len=0), "max_model_len = 0 is outside [1, 2147483647]"),
    _r(DECODE, "seq_lens is query_start_loc", lambda kw: kw.update(seq_lens=kw["query_start_loc"]),
       "overlap in memory"),
    _r(DECODE, "positions inside draft_tokens", lambda kw: kw.update(positions=kw["draft_tokens"].view(-1)),
       "overlap in memory (an output must not alias an input)"),
    _r(UPDATE, "hidden states of two dtypes", apply("next_input_hidden_states", lambda t: t.half()),
       "next_input_hidden_states must have the dtype of hidden_states (torch.bfloat16), got torch.float16"),
    _r(UPDATE, "next_input_hidden_states narrower than hidden_states",
       apply("next_input_hidden_states", lambda t: t[:, :15]),
       "next_input_hidden_states.size(1) must be >= hidden_states.size(1) = 16, got 15"),
    _r(UPDATE, "hidden_states fewer rows than requests", apply("hidden_states", lambda t: t[:3]),
       "hidden_states.size(0) must be >= draft_tokens.size(0) = 4, got 3"),
    _r(UPDATE, "hidden_states column step 2", apply("hidden_states", lambda t: t.repeat(1, 2)[:, ::2]),
       "hidden_states must have inner stride 1"),
    _r(UPDATE, "current_draft_step of two elements", apply("current_draft_step", lambda t: t.reshape(1).repeat(2)),
       "current_draft_step must hold one element, got 2"),
    _r(UPDATE, "draft_tokens 2-D", apply("draft_tokens", lambda t: t[:, None]), "draft_tokens must be 1-D, got 2-D"),
    _r(UPDATE, "output_draft_tokens rows overlap", apply("output_draft_tokens", lambda t: t[:1].expand(4, 3)),
       "output_draft_tokens rows overlap: stride(0) = 0 < 3 columns written per row"),
    _r(UPDATE, "num_speculative_steps 0", set_(num_speculative_steps=0), "num_speculative_steps must be >= 1, got 0"),
    _r(UPDATE, "max_model_len 0", set_(max_model_len=0), "max_model_len = 0 is outside [1, 2147483647]"),
    _r(UPDATE, "next_input_hidden_states is hidden_states",
       lambda kw: kw.update(next_input_hidden_states=kw["hidden_states"]),
       "next_input_hidden_states (written) and hidden_states (read) overlap in memory"),
    _r(UPDATE, "seq_lens is input_ids", lambda kw: kw.update(seq_lens=kw["input_ids"]), "overlap in memory"),
    _r(UPDATE, "positions over the step", lambda kw: kw.update(current_draft_step=kw["positions"][2:3]),
       "positions (written) and current_draft_step (read) overlap in memory"),
]


# ---- hostile rows ------------------------------------------------------------------
# The base's output_draft_tokens has 3 columns; the step is read on the device.
HOSTILE_ROWS = [
    hostile(UPDATE, "step == output_draft_tokens.size(1)", apply("current_draft_step", lambda t: t.fill_(3)),
            "current_draft_step = 3 is outside [0, 3) (output_draft_tokens.size(1))"),
    hostile(UPDATE, "step -1", apply("current_draft_step", lambda t: t.fill_(-1)),
            "current_draft_step = -1 is outside"),
    hostile(UPDATE, "step 2**40", apply("current_draft_step", lambda t: t.fill_(2**40)),
            "current_draft_step = 1099511627776 is outside"),
    hostile(UPDATE, "step int32 min", apply("current_draft_step", lambda t: t.int().fill_(-(2**31))),
            "current_draft_step = -2147483648 is outside"),
    hostile(UPDATE, "no requests: the step is not read",
            lambda kw: kw.update(draft_tokens=kw["draft_tokens"][:0],
                                 current_draft_step=kw["current_draft_step"].fill_(-9)),
            raises=()),
    hostile(UPDATE, "the last column: the token only", apply("current_draft_step", lambda t: t.fill_(2)), raises=()),
]
