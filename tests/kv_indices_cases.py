"""Random inputs for build_kv_indices and its function forms, shared by the
op tests and the upstream comparison (tests/kv_indices_upstream_child.py)."""

from __future__ import annotations

import dataclasses
from typing import Optional

import torch


@dataclasses.dataclass(frozen=True)
class Case:
    bs: int = 5
    pool: int = 9
    width: int = 300  # req_to_token row width (entries)
    entry_page_size: int = 1
    kv_start: bool = False
    token_mapping: bool = False
    v2p_page: int = 0  # > 0: v2p mode with this page size
    write_indptr: bool = False
    splits: bool = False
    index64: bool = False  # req_pool_indices / seq_lens / indptr dtype
    out64: bool = False
    negatives: bool = True  # sprinkle -1 into req_to_token (verbatim modes)
    gaps: bool = False  # read mode: indptr rows with room to spare
    zero_lens: bool = True
    verify: bool = False  # qo_indptr (and with write_indptr mask_indptr), q_stride
    extend: bool = False  # extend_seq_lens (the other index dtype), some past their row's length
    window: bool = False  # sliding_window in [1, longest length + 2]: most rows cut, some not
    offsets: bool = False  # kv_offsets (the other index dtype): each row's start


def _randint(gen, lo, hi, shape, device, dtype=torch.int64):
    return torch.randint(lo, hi, shape, generator=gen, dtype=torch.int64).to(dtype).to(device)


def make(case: Case, gen: torch.Generator, device) -> dict:
    """Keyword arguments of build_kv_indices (outputs poisoned), and the
    Triton backend's head counts when ``splits``."""
    idx_t = torch.int64 if case.index64 else torch.int32
    out_t = torch.int64 if case.out64 else torch.int32
    bs, width, E = case.bs, case.width, case.entry_page_size
    positions = width if case.v2p_page else width * E
    vpages = 4 * positions // max(case.v2p_page, 1) + 8
    if case.v2p_page:
        r2t = _randint(gen, 0, vpages * case.v2p_page, (case.pool, width), device, torch.int32)
        if case.negatives:
            r2t[_randint(gen, 0, 10, (case.pool, width), device) == 0] = -1
    elif E == 1:
        hi = 4000 if case.token_mapping else 2**31 - 1
        r2t = _randint(gen, 0, hi, (case.pool, width), device, torch.int32)
        if case.negatives:
            r2t[_randint(gen, 0, 10, (case.pool, width), device) == 0] = -1
    else:
        r2t = _randint(gen, 0, (4000 if case.token_mapping else 2**31 // E) // E, (case.pool, width), device,
                       torch.int32)
        if case.negatives:
            r2t[_randint(gen, 0, 10, (case.pool, width), device) == 0] = -1
    req = torch.randperm(case.pool, generator=gen)[:bs].to(idx_t).to(device)
    start = _randint(gen, 0, max(positions // 3, 1), (bs,), device, idx_t) if case.kv_start else None
    room = positions - (start.long().cpu() if start is not None else torch.zeros(bs, dtype=torch.int64))
    lo = 0 if case.zero_lens else 1
    lens = torch.tensor([int(_randint(gen, min(lo, int(r)), int(r) + 1, (1,), "cpu")) for r in room],
                        dtype=torch.int64).to(idx_t).to(device)
    kw = dict(req_to_token=r2t, req_pool_indices=req, seq_lens=lens, kv_start_idx=start,
              write_indptr=case.write_indptr, entry_page_size=E)
    if case.extend:
        ext_t = torch.int32 if case.index64 else torch.int64
        kw["extend_seq_lens"] = torch.tensor([int(_randint(gen, 0, int(n) + 5, (1,), "cpu")) for n in lens.cpu()],
                                             dtype=ext_t).to(device)
    if case.window:
        kw["sliding_window"] = int(_randint(gen, 1, int(lens.max()) + 3 if bs else 3, (1,), "cpu"))
    if case.offsets:
        kw["kv_offsets"] = _randint(gen, -99, 99, (bs + 2,), device, torch.int32 if case.index64 else torch.int64)
    spare = _randint(gen, 0, 7, (bs,), "cpu") if case.gaps else torch.zeros(bs, dtype=torch.int64)
    ptr = torch.zeros(bs + 1, dtype=torch.int64)
    ptr[1:] = (lens.long().cpu() + spare).cumsum(0)
    cap = int(ptr[-1]) + 11
    indptr = torch.full((bs + 3,), -5, dtype=idx_t)
    if not case.write_indptr:
        indptr[: bs + 1] = ptr.to(idx_t)
    kw["kv_indptr"] = indptr.to(device)
    kw["kv_indices"] = _randint(gen, -(2**31), 2**31 - 1, (cap,), device, out_t)
    if case.token_mapping:
        m = _randint(gen, -1, 2**31 - 1 if case.out64 else 2**20, (4000 * max(E, 1) + 64,), device, torch.int64)
        kw["token_mapping"] = m
    if case.v2p_page:
        v2p = torch.randperm(vpages, generator=gen).to(device)
        v2p[_randint(gen, 0, 20, (vpages,), device) == 0] = -1
        kw["v2p"], kw["page_size"] = v2p, case.v2p_page
    if case.verify:
        mask_t = torch.int32 if case.index64 else torch.int64  # (a dtype of its own: SGLang's is int64)
        kw.update(qo_indptr=_randint(gen, -99, 99, (bs + 2,), device, idx_t),
                  q_stride=int(_randint(gen, 1, 9, (1,), "cpu")))
        if case.write_indptr:
            kw["mask_indptr"] = _randint(gen, -99, 99, (bs + 4,), device, mask_t)
    if case.splits:
        heads = [(32, 8), (32, 32), (16, 1), (64, 4), (8, 8), (28, 4)]
        nh, nkv = heads[int(_randint(gen, 0, len(heads), (1,), "cpu"))]
        group = int(_randint(gen, 1, 4, (1,), "cpu"))
        kw.update(num_kv_splits=_randint(gen, -99, 99, (bs * group + 3,), device, torch.int32),
                  uneven_batch=_randint(gen, 5, 99, (2,), device, torch.int32),
                  num_group=group, num_head=nh, num_kv_head=nkv,
                  max_kv_splits=int(_randint(gen, 1, 17, (1,), "cpu")),
                  device_core_count=int(_randint(gen, 1, 200, (1,), "cpu")))
    return kw


OUTPUTS = ("kv_indptr", "kv_indices", "num_kv_splits", "uneven_batch", "qo_indptr", "mask_indptr", "kv_offsets")


def clone_outputs(kw: dict) -> dict:
    return {**kw, **{k: kw[k].clone() for k in OUTPUTS if kw.get(k) is not None}}


def formula(kw: dict) -> dict:
    """The contract element by element in plain Python (small cases): kv_indptr,
    kv_indices and the verify row starts (the split counts are held to SGLang's
    own kernel instead)."""
    out = {k: kw[k].clone().cpu() for k in ("kv_indptr", "kv_indices", "qo_indptr", "mask_indptr", "kv_offsets")
           if kw.get(k) is not None}
    q = kw.get("q_stride", 0)
    r2t = kw["req_to_token"].cpu().tolist()
    req = kw["req_pool_indices"].cpu().tolist()
    lens = kw["seq_lens"].cpu().tolist()
    bs = len(req)
    if kw.get("extend_seq_lens") is not None:  # the prefix: max(seq_lens - extend_seq_lens, 0)
        lens = [max(n - e, 0) for n, e in zip(lens, kw["extend_seq_lens"].cpu().tolist())]
    start = [0] * bs if kw.get("kv_start_idx") is None else kw["kv_start_idx"].cpu().tolist()
    window = kw.get("sliding_window", 0)
    if window > 0:  # the last min(L, W) tokens: the start moves past the others
        start = [s + n - min(n, window) for s, n in zip(start, lens)]
        lens = [min(n, window) for n in lens]
    E = kw.get("entry_page_size", 1)
    v2p: Optional[list] = None if kw.get("v2p") is None else kw["v2p"].cpu().tolist()
    ps = kw.get("page_size", 1)
    mapping = None if kw.get("token_mapping") is None else kw["token_mapping"].cpu().tolist()
    width = len(r2t[0])
    positions = width if v2p is not None else width * E
    total = mask_total = 0
    ptr_in = kw["kv_indptr"].cpu().tolist()
    for b in range(bs):
        if "kv_offsets" in out:
            out["kv_offsets"][b] = start[b]
        lo = total if kw["write_indptr"] else ptr_in[b]
        n = min(lens[b], max(positions - start[b], 0))
        for i in range(n):
            pos = start[b] + i
            if v2p is None:
                ident = r2t[req[b]][pos // E] * E + pos % E
            else:
                slot = r2t[req[b]][(pos // ps) * ps]
                vpage = 0 if slot < 0 else slot // ps
                ident = max(v2p[vpage], 0) * ps + pos % ps
            if mapping is not None:
                ident = -1 if ident < 0 else mapping[ident]
            out["kv_indices"][lo + i] = ident
        total += lens[b]
        if kw["write_indptr"]:
            out["kv_indptr"][b + 1] = total
        mask_total += q * (lens[b] + q)  # cumsum of q * (seq_lens + q)
        if "mask_indptr" in out:
            out["mask_indptr"][b + 1] = mask_total
    if bs:
        if kw["write_indptr"]:
            out["kv_indptr"][0] = 0
        if "mask_indptr" in out:
            out["mask_indptr"][0] = 0
        if "qo_indptr" in out:
            out["qo_indptr"][: bs + 1] = torch.arange(bs + 1) * q
    return out
