"""Inputs of build_draft_decode_kv_indices (EAGLE multi-step draft decode's
kv_indices / kv_indptr), the contract in plain Python, shared by its tests and
the SGLang interpreter child."""

from __future__ import annotations

import dataclasses

import torch

SENTINEL = -7
OUTPUTS = ("kv_indices", "kv_indptr")


@dataclasses.dataclass(frozen=True)
class Case:
    bs: int = 5
    topk: int = 1
    num_steps: int = 3
    page_size: int = 1
    window_size: int = 0
    sink_size: int = 0
    max_len: int = 300  # the longest committed length drawn
    pool: int = 12
    index64: bool = False
    out64: bool = False
    indptr64: bool = False
    zero_lens: bool = True  # some requests with no committed tokens


def chain_room(topk: int, num_steps: int, page_size: int) -> int:
    """Positions past a request's length that its branches' chains may reach: with pages,
    branch t starts t * ceil((L % P + K) / P) pages past the prefix's last whole page."""
    pages = -(-(page_size - 1 + num_steps) // page_size)
    return topk * (pages * page_size + num_steps)


def row_len(case: Case) -> int:
    """A row that holds the longest prefix and every branch's chain."""
    return case.max_len + chain_room(case.topk, case.num_steps, case.page_size)


def make(case: Case, gen: torch.Generator, device) -> dict:
    idx = torch.int64 if case.index64 else torch.int32
    width = row_len(case)
    r2t = torch.randint(-(2**31), 2**31 - 1, (case.pool, width), generator=gen, dtype=torch.int64).to(torch.int32)
    req = torch.randperm(case.pool, generator=gen)[: case.bs]
    lens = torch.randint(0 if case.zero_lens or case.max_len == 0 else 1, case.max_len + 1, (case.bs,), generator=gen)
    if case.bs:
        lens[0] = case.max_len
    positions = torch.randint(0, case.max_len + 8, (case.bs * case.topk,), generator=gen)
    cap = case.window_size + case.sink_size if case.window_size else None
    prefix = lens if cap is None else lens.clamp(max=cap)
    used = int(prefix.sum()) * case.topk + case.bs * case.topk * case.num_steps
    kv_indices = torch.full((case.num_steps + 1, used + 13), SENTINEL,
                            dtype=torch.int64 if case.out64 else torch.int32)
    kv_indptr = torch.full((case.num_steps + 1, case.bs * case.topk + 4), SENTINEL,
                           dtype=torch.int64 if case.indptr64 else torch.int32)
    kw = dict(req_to_token=r2t, req_pool_indices=req.to(idx), seq_lens=lens.to(idx), positions=positions.to(idx),
              kv_indices=kv_indices, kv_indptr=kv_indptr, topk=case.topk, num_steps=case.num_steps,
              page_size=case.page_size, window_size=case.window_size, sink_size=case.sink_size)
    return {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in kw.items()}


def clone_outputs(kw: dict) -> dict:
    return {k: (v.clone() if k in OUTPUTS else v) for k, v in kw.items()}


def formula(kw: dict) -> dict:
    """The docstring's contract, element by element, on host copies of the outputs."""
    out = {k: kw[k].cpu().clone() for k in OUTPUTS}
    r2t = kw["req_to_token"].cpu()
    req, lens = kw["req_pool_indices"].tolist(), kw["seq_lens"].tolist()
    positions = kw["positions"].tolist()
    topk, K, P = kw["topk"], kw["num_steps"], kw["page_size"]
    window, sink = kw["window_size"], kw["sink_size"]
    cap = window + sink if window > 0 else None
    bs = len(req)
    for s in range(K):
        it = s + 1
        cum = 0
        for b in range(bs):
            L = lens[b]
            Lw = L if cap is None else min(L, cap)
            e = 0 if cap is None else min(sink, L)
            src = [i if i < e else L - Lw + i for i in range(Lw)]
            row = r2t[req[b]].tolist()
            for t in range(topk):
                off = cum * topk + b * it * topk + t * (Lw + it)
                if P == 1 or topk == 1:
                    chain = L + t * K
                else:
                    last = L % P
                    chain = L - last + t * (-(-(last + K) // P)) * P + last
                ids = [row[i] for i in src] + [row[chain + j] for j in range(it)]
                out["kv_indices"][s, off: off + len(ids)] = torch.tensor(ids, dtype=out["kv_indices"].dtype)
            cum += Lw
        total = 0
        for z in range(1, bs * topk + 1):
            p = positions[z - 1]
            total += p if cap is None else min(p, cap)
            out["kv_indptr"][s, z] = total + z * it
    return out
