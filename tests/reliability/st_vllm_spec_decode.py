"""Hypothesis strategies: valid calls of vllm_prepare_decode_inputs
(docs/operators/vllm_spec_decode.md) and its bad-input rows.

Space: 0 .. 40 requests of up to 50 request rows, 1 .. 5 draft steps, lengths
anywhere or at the max_model_len clamps, advancing positions or not, 1-D or
2-D draft tokens, int32/int64 inputs. No device value indexes anything, so
there are no hostile-value rows.
"""

from __future__ import annotations

import torch
from hypothesis import strategies as st

import sgl_meta
from row_kit import apply, set_
from sgl_meta import reference
from st_vllm_block_table import _r, to_case
from vllm_cases import DecodeInputsCase, make_decode_inputs

DECODE = "vllm_prepare_decode_inputs"
NAME = "vllm_spec_decode"
OUT = ("input_ids", "positions", "sample_src_positions", "query_start_loc", "seq_lens")


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


ENTRIES = [
    dict(name=DECODE, op=sgl_meta.vllm_prepare_decode_inputs, ref=reference.vllm_prepare_decode_inputs,
         cases=decode_cases, events=decode_events, weight=0.1),
]


# ---- bad-input rows -----------------------------------------------------------------
def _decode_base(gen, device):
    return make_decode_inputs(DecodeInputsCase(n=4, max_num_reqs=6), gen, device)


BAD_INPUT_BASES = {DECODE: _decode_base}

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
]
