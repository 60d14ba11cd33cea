"""Random vLLM 0.33 Model Runner V2 steps for the vllm_* op tests.

A step as GPUModelRunner builds it: ``max_num_reqs`` request-state rows, a
batch of ``n`` of them (``idx_mapping``, int64) with decode, speculative
(1 + drafts) and chunked-prefill query lengths, ``query_start_loc`` (int32),
``num_computed_tokens`` (int32), positions (int64), G KV-cache groups with
their own block size, table width, flags and sliding-window reach, and
outputs poisoned. Block ids stay below 2**20 so that vLLM's int32 product
``block * block_size`` does not wrap.
"""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch

from helpers import poison_like


@dataclasses.dataclass
class StepCase:
    n: int = 5
    groups: int = 2
    extra_reqs: int = 3  # request-state rows beyond the batch
    pad_rows: int = 2  # num_rows - n (negative: fewer rows than requests)
    pad_tokens: int = 7  # slot_mappings / positions past the real tokens
    max_query: int = 9  # longest chunked-prefill query
    max_context: int = 300
    cp_size: int = 1
    cp_rank: int = 0
    cp_interleave: int = 1
    no_request_rows: int = 0  # idx_mapping entries set to -1
    idx_dtype: torch.dtype = torch.int64
    qsl_dtype: torch.dtype = torch.int32
    computed_dtype: torch.dtype = torch.int32
    pos_dtype: torch.dtype = torch.int64
    sliding: bool = True  # some groups with a window reach
    mask: bool = True
    disabled: bool = True  # some groups with slot mapping disabled
    wide_dst: int = 0  # extra destination columns


def _randint(gen, lo, hi, shape, dtype=torch.int64):
    return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64).to(dtype)


def make_step(case: StepCase, gen: torch.Generator, device="cpu") -> dict:
    """Every argument of vllm_prepare_step (the other ops take subsets)."""
    n, G = case.n, case.groups
    R = n + case.extra_reqs
    perm = torch.randperm(R, generator=gen)[:n]
    idx = perm.clone()
    if case.no_request_rows and n:
        idx[torch.randperm(n, generator=gen)[: case.no_request_rows]] = -1
    kinds = _randint(gen, 0, 3, (n,)).tolist()
    qlens = [1 if k == 0 else 1 + int(_randint(gen, 0, 4, ())) if k == 1 else int(_randint(gen, 1, case.max_query + 1, ()))
             for k in kinds]
    qsl = [0]
    for q in qlens:
        qsl.append(qsl[-1] + q)
    num_tokens = qsl[-1]
    T = num_tokens + case.pad_tokens
    computed = _randint(gen, 0, case.max_context, (R,))
    block_sizes = [int(torch.tensor([1, 2, 4, 16, 32, 5, 3])[int(_randint(gen, 0, 7, ()))]) for _ in range(G)]
    max_len = case.max_context + case.max_query + 4
    tables, num_blocks_rows = [], []
    for g in range(G):
        bs = block_sizes[g]
        width = -(-max_len // bs) + 1
        tables.append(_randint(gen, 0, 2**20 // max(bs, 1), (R, width), torch.int32))
        # blocks owned: enough for the request's context (what the scheduler allocates)
        owned = torch.clamp(-(-(computed + case.max_query) // bs), max=width)
        num_blocks_rows.append(torch.minimum(owned, _randint(gen, 0, width + 1, (R,)).clamp(min=owned // 2)))
    num_blocks = torch.stack(num_blocks_rows).to(torch.int32) if G else torch.zeros(0, R, dtype=torch.int32)
    enabled = torch.ones(G, dtype=torch.bool) if not case.disabled else torch.rand(G, generator=gen) > 0.25
    sharded = torch.rand(G, generator=gen) > 0.3
    reach = (_randint(gen, 0, 2, (G,)) * _randint(gen, 1, 120, (G,))).to(torch.int32) if case.sliding else \
        torch.zeros(G, dtype=torch.int32)
    num_rows = max(n + case.pad_rows, 0)
    comp_rows = torch.where(idx >= 0, computed[idx.clamp(min=0)], torch.zeros_like(idx))
    positions = _randint(gen, -5, 5, (T,))  # garbage past the real tokens
    for b in range(n):
        positions[qsl[b]:qsl[b + 1]] = comp_rows[b] + torch.arange(qlens[b])
    qsl_buf = torch.tensor(qsl + [num_tokens] * 0, dtype=case.qsl_dtype)
    out = dict(
        idx_mapping=idx.to(case.idx_dtype),
        query_start_loc=qsl_buf,
        num_computed_tokens=computed.to(case.computed_dtype),
        positions=positions.to(case.pos_dtype),
        src_block_tables=tables,
        num_blocks=num_blocks,
        num_rows=num_rows,
        block_sizes=torch.tensor(block_sizes, dtype=torch.int32),
        slot_mapping_enabled=enabled,
        dcp_sharded=sharded,
        sliding_window_reach=reach,
        cp_rank=case.cp_rank, cp_size=case.cp_size, cp_interleave=case.cp_interleave,
        pos=poison_like(torch.zeros(T, dtype=case.pos_dtype), gen),
        seq_lens=poison_like(torch.zeros(R + 1, dtype=torch.int32), gen),
        dst_block_tables=[poison_like(torch.zeros(max(num_rows, n) + 1, t.shape[1] + case.wide_dst,
                                                  dtype=torch.int32), gen) for t in tables],
        slot_mappings=poison_like(torch.zeros(G, T, dtype=torch.int64), gen),
    )
    return {k: _to(v, device) for k, v in out.items()}


def _to(v, device):
    if isinstance(v, torch.Tensor):
        return v.to(device)
    if isinstance(v, list):
        return [t.to(device) for t in v]
    return v


OUTPUTS = ("pos", "seq_lens", "dst_block_tables", "slot_mappings")


def clone_outputs(args: dict, names=OUTPUTS) -> dict:
    """args with fresh copies of its outputs (lists copied element-wise)."""
    out = dict(args)
    for k in names:
        if k in out:
            v = out[k]
            out[k] = [t.clone() for t in v] if isinstance(v, list) else v.clone()
    return out


def slot_args(step: dict) -> dict:
    keys = ("idx_mapping", "query_start_loc", "positions", "block_sizes", "slot_mapping_enabled", "dcp_sharded",
            "slot_mappings", "cp_rank", "cp_size", "cp_interleave")
    out = {k: step[k] for k in keys}
    out["block_tables"] = step["src_block_tables"]
    return out


def gather_args(step: dict, mask: bool = True) -> dict:
    keys = ("idx_mapping", "src_block_tables", "num_blocks", "dst_block_tables", "num_rows")
    out = {k: step[k] for k in keys}
    if mask:
        out.update(num_computed_tokens=step["num_computed_tokens"], sliding_window_reach=step["sliding_window_reach"],
                   block_sizes=step["block_sizes"])
    return out


def pos_args(step: dict) -> dict:
    keys = ("idx_mapping", "query_start_loc", "num_computed_tokens", "pos", "seq_lens")
    return {k: step[k] for k in keys}


def prepare_step_args(step: dict, mask: bool = True) -> dict:
    out = {k: v for k, v in step.items() if k != "positions"}
    out["mask_sliding_window"] = mask
    return out


@dataclasses.dataclass
class CombineCase:
    n: int = 6
    extra_reqs: int = 3
    steps: int = 3  # draft_tokens.size(1)
    num_new_sampled: int = 1
    no_request_rows: int = 0
    last_2d: bool = True
    idx_dtype: torch.dtype = torch.int64


def make_combine(case: CombineCase, gen: torch.Generator, device="cpu") -> dict:
    n, R, S, k = case.n, case.n + case.extra_reqs, case.steps, case.num_new_sampled
    idx = torch.randperm(R, generator=gen)[:n]
    if case.no_request_rows and n:
        idx[torch.randperm(n, generator=gen)[: case.no_request_rows]] = -1
    drafts = _randint(gen, 0, S + 1, (n,))
    if k == 0:
        drafts = drafts.clamp(min=0)
    nl = drafts + k
    qlens = nl + _randint(gen, 0, 3, (n,))
    qsl = torch.cat([torch.zeros(1, dtype=torch.int64), qlens.cumsum(0)])
    computed = _randint(gen, 0, 50, (n,))
    seq = computed + qlens
    # prefill_len around seq: prompt rows, rows crossing the prompt end, generating rows
    prefill = _randint(gen, 1, 60, (R,))
    rows = idx.clamp(min=0)
    choice = _randint(gen, 0, 4, (n,))
    around = torch.where(choice == 0, seq + _randint(gen, 0, 3, (n,)),  # still prefilling
                         torch.where(choice == 1, seq - nl + 1, torch.where(choice == 2, seq - nl, seq - nl - 5)))
    prefill[rows] = torch.where(idx >= 0, around.clamp(min=0), prefill[rows])
    cu = torch.cat([torch.zeros(1, dtype=torch.int64), nl.cumsum(0)])
    T = int(qsl[-1]) + 4
    last = _randint(gen, 0, 2**40, (R, 1) if case.last_2d else (R,))
    out = dict(
        input_ids=poison_like(torch.zeros(T, dtype=torch.int32), gen),
        idx_mapping=idx.to(case.idx_dtype),
        last_sampled_tokens=last,
        query_start_loc=qsl.to(torch.int32),
        seq_lens=seq.to(torch.int32),
        prefill_len=prefill.to(torch.int32),
        draft_tokens=_randint(gen, 0, 2**33, (R, S)),
        cu_num_logits=cu.to(torch.int32),
        logits_indices=poison_like(torch.zeros(int(cu[-1]), dtype=torch.int64), gen),
        num_new_sampled_tokens=k,
    )
    return {kk: _to(v, device) for kk, v in out.items()}


@dataclasses.dataclass
class CopyPagesCase:
    """A FlashInfer step: n requests' gathered block-table rows (``extra_rows``
    more rows than requests), each row's block count in [1, width] but for
    ``empty_rows`` of them (0)."""

    n: int = 6
    width: int = 16
    extra_rows: int = 2
    empty_rows: int = 1  # rows with no blocks
    tail: int = 5  # page_indices entries past cu_num_blocks[n] (must survive)
    cu_dtype: torch.dtype = torch.int32


def make_copy_pages(case: CopyPagesCase, gen: torch.Generator, device="cpu") -> dict:
    n, W = case.n, case.width
    counts = _randint(gen, 1, W + 1, (n,))  # empty rows only where the case asks for them
    if case.empty_rows and n:
        counts[torch.randperm(n, generator=gen)[: case.empty_rows]] = 0
    cu = torch.cat([torch.zeros(1, dtype=torch.int64), counts.cumsum(0)])
    out = dict(
        page_indices=poison_like(torch.zeros(int(cu[-1]) + case.tail, dtype=torch.int32), gen),
        block_table=_randint(gen, 0, 2**31 - 1, (n + case.extra_rows, W), torch.int32),
        cu_num_blocks=cu.to(case.cu_dtype),
    )
    return {k: _to(v, device) for k, v in out.items()}


@dataclasses.dataclass
class DecodeInputsCase:
    """The speculator's first draft decode step: n requests of max_num_reqs,
    K draft steps, lengths near max_model_len (the clamps) or anywhere."""

    n: int = 6
    max_num_reqs: int = 10
    steps: int = 3  # draft_tokens.size(1)
    max_model_len: int = 4096
    advance: bool = True
    near_limit: bool = False  # positions and lengths at max_model_len - 2 .. max_model_len
    draft_dtype: torch.dtype = torch.int64
    lens_dtype: torch.dtype = torch.int32
    tail: int = 3  # entries of the per-token buffers past n (must survive)


def make_decode_inputs(case: DecodeInputsCase, gen: torch.Generator, device="cpu") -> dict:
    n, R, L = case.n, case.max_num_reqs, case.max_model_len
    lo = max(L - 2, 0) if case.near_limit else 0
    target = _randint(gen, lo, L + 1, (n,))
    rejected = torch.minimum(_randint(gen, 0, case.steps + 1, (n,)), target)
    out = dict(
        draft_tokens=_randint(gen, 0, 2**33, (n, case.steps)).to(case.draft_dtype),
        target_seq_lens=target.to(case.lens_dtype),
        num_rejected=rejected.to(case.lens_dtype),
        input_ids=poison_like(torch.zeros(n + case.tail, dtype=torch.int32), gen),
        positions=_randint(gen, lo, L, (n + case.tail,)),
        sample_src_positions=_randint(gen, 0, 2**40, (n + case.tail,)),
        query_start_loc=poison_like(torch.zeros(R + 1 + case.tail, dtype=torch.int32), gen),
        seq_lens=poison_like(torch.zeros(R + case.tail, dtype=torch.int32), gen),
        max_model_len=L,
        max_num_reqs=R,
        advance_draft_positions=case.advance,
    )
    return {k: _to(v, device) for k, v in out.items()}


@dataclasses.dataclass
class DraftInputsCase:
    """One draft decode step's update in the speculator: n requests at draft
    step ``step`` of ``steps`` (num_speculative_steps), hidden rows of ``hidden``
    elements (random bits: NaNs and infinities among them), lengths near
    max_model_len (the clamps) or anywhere."""

    n: int = 6
    steps: int = 3  # num_speculative_steps
    step: int = 1  # current_draft_step
    cols: int = 0  # output_draft_tokens.size(1); 0: steps (vLLM's table)
    hidden: int = 64
    dtype: torch.dtype = torch.bfloat16
    max_model_len: int = 4096
    advance: bool = True
    near_limit: bool = False  # positions and lengths at max_model_len - 2 .. max_model_len
    draft_dtype: torch.dtype = torch.int64
    step_dtype: torch.dtype = torch.int64
    step_shape: tuple = ()  # vLLM's step is 0-d; (1,) also takes
    out_pad: int = 0  # output_draft_tokens columns past cols (its rows strided)
    src_pad: int = 0  # hidden_states elements past hidden per row (its rows strided)
    dst_pad: int = 0  # next_input_hidden_states columns past hidden (must survive)
    src_offset: int = 0  # elements before hidden_states' first row (narrower copy words)
    dst_offset: int = 0
    tail: int = 3  # rows of the per-request buffers past n (must survive)


def make_draft_inputs(case: DraftInputsCase, gen: torch.Generator, device="cpu") -> dict:
    n, L, H, rows = case.n, case.max_model_len, case.hidden, case.n + case.tail
    cols = case.cols or case.steps
    lo = max(L - 2, 0) if case.near_limit else 0

    def rows_of(width: int, pad: int, offset: int, dtype: torch.dtype) -> torch.Tensor:
        flat = poison_like(torch.zeros(offset + rows * (width + pad), dtype=dtype), gen)
        return flat[offset:].view(rows, width + pad)[:, :width]

    out = dict(
        draft_tokens=_randint(gen, 0, 2**33, (n,)).to(case.draft_dtype),
        current_draft_step=torch.full(case.step_shape, case.step, dtype=case.step_dtype),
        hidden_states=rows_of(H, case.src_pad, case.src_offset, case.dtype),
        output_draft_tokens=rows_of(cols, case.out_pad, 0, torch.int64),
        next_input_hidden_states=rows_of(H + case.dst_pad, 0, case.dst_offset, case.dtype),
        input_ids=poison_like(torch.zeros(rows, dtype=torch.int32), gen),
        positions=_randint(gen, lo, L, (rows,)),
        seq_lens=_randint(gen, lo, L + 1, (rows,), torch.int32),
        sample_src_positions=_randint(gen, 0, 2**40, (rows,)),
        max_model_len=L,
        num_speculative_steps=case.steps,
        advance_draft_positions=case.advance,
    )
    return strided_to(out, device)


def storage_of(t: torch.Tensor) -> torch.Tensor:
    """All of ``t``'s storage as a 1-D tensor of its dtype (what lies around a view too)."""
    return torch.empty(0, dtype=t.dtype, device=t.device).set_(t.untyped_storage())


def strided_copy(t: torch.Tensor, device=None) -> torch.Tensor:
    """``t`` in a copy of its whole storage (on ``device``), same strides and
    storage offset: ``clone`` and ``to`` would make a padded view contiguous
    and drop what lies around it."""
    return storage_of(t).to(device or t.device, copy=True).as_strided(t.shape, t.stride(), t.storage_offset())


def strided_to(args: dict, device) -> dict:
    """``args`` with every tensor a :func:`strided_copy` on ``device``."""
    return {k: strided_copy(v, device) if isinstance(v, torch.Tensor) else v for k, v in args.items()}


def call_on_copies(fn, args: dict, names) -> dict:
    """``fn(**args)`` with fresh copies of the outputs ``names``; those copies after the call."""
    kw = clone_outputs(args, names)
    fn(**kw)
    return {k: kw[k] for k in names}


def first_error(fn, **kwargs) -> Optional[str]:
    try:
        fn(**kwargs)
    except RuntimeError as err:
        return str(err)
    return None


def to_device(step: dict, device) -> dict:
    return {k: _to(v, device) for k, v in step.items()}


def refresh_step(step: dict, case: StepCase, gen: torch.Generator) -> None:
    """New values for a captured step, in place (same shapes): another batch of
    requests and query lengths, new contexts, tables, flags and windows;
    positions follow. Outputs are poisoned."""
    n = case.n
    R = step["num_computed_tokens"].numel()
    idx = torch.randperm(R, generator=gen)[:n]
    if n:
        idx[torch.randperm(n, generator=gen)[: int(_randint(gen, 0, case.no_request_rows + 1, ()))]] = -1
    num_tokens = int(step["query_start_loc"][n])
    cuts = sorted(_randint(gen, 0, num_tokens + 1, (max(n - 1, 0),)).tolist())
    qsl = [0, *cuts, num_tokens] if n else [0]
    computed = _randint(gen, 0, case.max_context, (R,))
    qlen_cap = max(b - a for a, b in zip(qsl, qsl[1:])) if n else 0
    computed = computed.clamp(max=max(case.max_context + case.max_query - qlen_cap, 0))
    positions = torch.zeros(step["positions"].numel(), dtype=torch.int64)
    for b in range(n):
        c = int(computed[idx[b]]) if idx[b] >= 0 else 0
        positions[qsl[b]:qsl[b + 1]] = c + torch.arange(qsl[b + 1] - qsl[b])
    dev = step["idx_mapping"].device
    step["idx_mapping"].copy_(idx.to(dev))
    step["query_start_loc"].copy_(torch.tensor(qsl).to(dev))
    step["num_computed_tokens"].copy_(computed.to(dev))
    step["positions"].copy_(positions.to(dev))
    for g, t in enumerate(step["src_block_tables"]):
        t.copy_(_randint(gen, 0, 2**20 // max(int(step["block_sizes"][g]), 1), tuple(t.shape), torch.int32).to(dev))
    width = torch.tensor([t.shape[1] for t in step["src_block_tables"]], dtype=torch.int64)
    if len(width):
        step["num_blocks"].copy_((torch.rand(step["num_blocks"].shape, generator=gen) * (width[:, None] + 1))
                                 .long().clamp(max=width[:, None]).to(dev))
    G = step["slot_mapping_enabled"].numel()
    step["slot_mapping_enabled"].copy_((torch.rand(G, generator=gen) > 0.25).to(dev))
    step["dcp_sharded"].copy_((torch.rand(G, generator=gen) > 0.3).to(dev))
    step["sliding_window_reach"].copy_((_randint(gen, 0, 2, (G,)) * _randint(gen, 1, 120, (G,))).to(dev))
    for k in OUTPUTS:
        for t in (step[k] if isinstance(step[k], list) else [step[k]]):
            t.copy_(poison_like(t, gen))
