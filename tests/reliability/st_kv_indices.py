"""Hypothesis strategies: valid calls of build_kv_indices (docs/operators/kv_indices.md),
its bad-input rows and hostile values.

Space: bs 0 / 1 / small / past one block (300); entry_page_size 1 (verbatim,
negative slots included), powers of two and odd sizes; v2p mode at page sizes
1 / 5 / 16 / 64 with freed (-1) pages; token_mapping with -1 entries; window
starts; lengths 0, inside the row, past the row (capped); kv_indptr read
(with poisoned gaps between rows) or written; a verify batch's qo_indptr and
mask_indptr at random query strides; the split counts over random
head layouts, groups, core counts; int32 / int64 everywhere an index may be
either; every tensor a view into a larger poisoned buffer.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import torch
from hypothesis import strategies as st

import sgl_meta
from sgl_meta import reference
from row_kit import Row, apply, at, both, derive, hostile, set_
from tensor_case import Case, strided

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import draft_kv_indices_cases  # noqa: E402
import kv_indices_cases  # noqa: E402

OP = "build_kv_indices"
DRAFT = "build_draft_decode_kv_indices"
NAME = "kv_indices"


def _views(draw, kw: dict, gen) -> dict:
    """Every tensor of a call as a view into a larger poisoned buffer (rows padded for 2-D)."""
    args = {}
    for k, v in kw.items():
        if not isinstance(v, torch.Tensor):
            args[k] = v
        elif v.dim() == 2:
            args[k] = strided(v, gen, lead=draw(st.integers(0, 3)), row_pad=draw(st.integers(0, 2)),
                              tail=draw(st.integers(0, 3)))
        else:
            args[k] = strided(v, gen, lead=draw(st.integers(0, 3)), tail=draw(st.integers(0, 3)))
    return args


@st.composite
def cases(draw) -> Case:
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1)))
    v2p = draw(st.sampled_from([0, 0, 0, 1, 5, 16, 64]))
    E = 1 if v2p else draw(st.sampled_from([1, 1, 2, 3, 16, 64]))
    write = draw(st.booleans())
    bs = draw(st.one_of(st.integers(0, 9), st.sampled_from([17, 300])))
    width = draw(st.integers(1, 40)) if E > 1 else draw(st.integers(1, 300))
    c = kv_indices_cases.Case(
        bs=bs, pool=bs + draw(st.integers(1, 5)), width=width, entry_page_size=E, kv_start=draw(st.booleans()),
        token_mapping=not v2p and draw(st.booleans()), v2p_page=v2p, write_indptr=write,
        splits=draw(st.booleans()), index64=draw(st.booleans()), out64=draw(st.booleans()),
        negatives=draw(st.booleans()), gaps=not write and draw(st.booleans()), zero_lens=draw(st.booleans()),
        verify=draw(st.booleans()), extend=draw(st.booleans()), window=draw(st.booleans()),
        offsets=draw(st.booleans()))
    kw = kv_indices_cases.make(c, gen, "cpu")
    if bs and draw(st.integers(0, 4)) == 0:  # the last row past its req_to_token row: capped, never read past
        extra_len = draw(st.integers(1, 50))
        kw["seq_lens"][bs - 1] += extra_len
        kw["kv_indices"] = torch.cat([kw["kv_indices"], kw["kv_indices"].new_full((extra_len,), -3)])
        if not write:
            kw["kv_indptr"][bs] += extra_len
    args = _views(draw, kw, gen)
    outputs = tuple(k for k in kv_indices_cases.OUTPUTS if kw.get(k) is not None)
    extra = dict(dataclasses.asdict(c))
    return Case(args, outputs, note=OP, extra=extra)


def events(case: Case) -> list[str]:
    e = case.extra
    return [
        "bs=" + ("0" if e["bs"] == 0 else "1" if e["bs"] == 1 else "<=17" if e["bs"] <= 17 else "300"),
        "source=" + ("v2p" if e["v2p_page"] else "verbatim" if e["entry_page_size"] == 1 else "pages"),
        f"write_indptr={e['write_indptr']}", f"splits={e['splits']}", f"token_mapping={e['token_mapping']}",
        f"kv_start={e['kv_start']}", "out=" + ("int64" if e["out64"] else "int32"), f"verify={e['verify']}",
        f"extend={e['extend']}", f"window={e['window']}", f"offsets={e['offsets']}",
    ]


@st.composite
def draft_cases(draw) -> Case:
    """build_draft_decode_kv_indices: bs 0 / 1 / small / past a 256-request pass, top-k 1..8, 1..7 steps,
    page sizes 1 / 4 / 64 (chains a page apart when topk > 1), with or without a window and sinks,
    lengths 0 to a few hundred, int32 / int64 everywhere; every tensor a view into a poisoned buffer."""
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**63 - 1)))
    window = draw(st.sampled_from([0, 0, 0, 1, 8, 100]))
    bs = draw(st.one_of(st.integers(0, 9), st.sampled_from([17, 260])))
    c = draft_kv_indices_cases.Case(
        bs=bs, pool=bs + draw(st.integers(1, 5)), topk=draw(st.sampled_from([1, 1, 2, 3, 4, 8])),
        num_steps=draw(st.integers(1, 7)), page_size=draw(st.sampled_from([1, 1, 4, 64])), window_size=window,
        sink_size=draw(st.integers(0, 5)) if window else 0,
        max_len=draw(st.integers(0, 40)) if bs > 17 else draw(st.integers(0, 400)),
        index64=draw(st.booleans()), out64=draw(st.booleans()), indptr64=draw(st.booleans()),
        zero_lens=draw(st.booleans()))
    kw = draft_kv_indices_cases.make(c, gen, "cpu")
    args = _views(draw, kw, gen)
    return Case(args, draft_kv_indices_cases.OUTPUTS, note=DRAFT, extra=dict(dataclasses.asdict(c)))


def draft_events(case: Case) -> list[str]:
    e = case.extra
    return [
        "bs=" + ("0" if e["bs"] == 0 else "1" if e["bs"] == 1 else "<=17" if e["bs"] <= 17 else "260"),
        f"topk={e['topk']}", f"page_size={e['page_size']}", f"window={bool(e['window_size'])}",
    ]


ENTRIES = [
    dict(name=OP, op=sgl_meta.build_kv_indices, ref=reference.build_kv_indices, cases=cases, events=events,
         weight=0.25),
    dict(name=DRAFT, op=sgl_meta.build_draft_decode_kv_indices, ref=reference.build_draft_decode_kv_indices,
         cases=draft_cases, events=draft_events, weight=0.25),
]


# ---- bad-input rows (bad_input_table.py) -----------------------------------------
def _base(gen, device):
    i32 = dict(dtype=torch.int32, device=device)
    return dict(
        req_to_token=torch.randint(-3, 300, (6, 40), generator=gen, dtype=torch.int32).to(device),
        req_pool_indices=torch.tensor([0, 5, 2, 2], dtype=torch.int64, device=device),
        seq_lens=torch.tensor([0, 17, 40, 3], **i32),
        kv_indptr=torch.zeros(6, **i32),
        kv_indices=torch.full((70,), -7, dtype=torch.int64, device=device),
        write_indptr=True,
        kv_start_idx=torch.tensor([0, 3, 0, 30], **i32),
        entry_page_size=1,
        token_mapping=torch.arange(400, device=device),
        num_kv_splits=torch.zeros(8, **i32),
        uneven_batch=torch.zeros(1, **i32),
        num_group=2, num_head=32, num_kv_head=8, max_kv_splits=8, device_core_count=132,
        qo_indptr=torch.full((5,), -7, dtype=torch.int64, device=device), q_stride=4,
        mask_indptr=torch.full((5,), -7, dtype=torch.int64, device=device),
    )


def _v2p_base(gen, device):
    kw = _base(gen, device)
    kw.pop("token_mapping")
    kw.update(v2p=torch.randperm(40, generator=gen).to(device), page_size=8)
    return kw


FLASHINFER, FLASHMLA = "create_flashinfer_kv_indices", "create_flashmla_kv_indices"


def _flashinfer_base(gen, device):
    kw = _base(gen, device)
    kw["kv_indptr"] = torch.tensor([0, 0, 17, 57, 60], dtype=torch.int32, device=device)
    return dict(req_to_token=kw["req_to_token"], req_pool_indices=kw["req_pool_indices"],
                page_kernel_lens=kw["seq_lens"], kv_indptr=kw["kv_indptr"], kv_start_idx=None,
                kv_indices=kw["kv_indices"], entry_page_size=1, token_mapping=kw["token_mapping"])


def _flashmla_base(gen, device):
    kw = _base(gen, device)
    return dict(req_to_token=kw["req_to_token"], req_pool_indices=kw["req_pool_indices"],
                page_kernel_lens=kw["seq_lens"], kv_start_idx=None,
                kv_indices=torch.full((4, 5), -7, dtype=torch.int32, device=device), page_size=8)


def _draft_splits(n, dtype=torch.int32, **scalars):
    """The base with split counts asked for: num_kv_splits of n elements, and the given scalars."""
    return lambda kw: kw.update(num_kv_splits=torch.zeros(n, dtype=dtype, device=kw["req_to_token"].device),
                                **scalars)


def _draft_base(gen, device):
    """Two requests of 2 branches, 3 steps, pages of 4 (rows of 40, each branch's chain a page apart)."""
    return dict(
        req_to_token=torch.randint(-3, 300, (6, 40), generator=gen, dtype=torch.int32).to(device),
        req_pool_indices=torch.tensor([5, 2], dtype=torch.int64, device=device),
        seq_lens=torch.tensor([17, 9], dtype=torch.int32, device=device),
        positions=torch.tensor([18, 18, 10, 10], dtype=torch.int32, device=device),
        kv_indices=torch.full((3, 80), -7, dtype=torch.int64, device=device),
        kv_indptr=torch.full((3, 5), -7, dtype=torch.int32, device=device),
        topk=2, num_steps=3, page_size=4, window_size=0, sink_size=0,
    )


V2P = OP + "@v2p"
BAD_INPUT_BASES = {OP: _base, FLASHINFER: _flashinfer_base, FLASHMLA: _flashmla_base, DRAFT: _draft_base}


def _r(op, id, edit, *names, **kw):
    return Row(id=f"{op}/{id}", op=op, edit=edit, names=names, **kw)


BAD_INPUT_ROWS = [
    _r(OP, "req_to_token 1-D", apply("req_to_token", lambda t: t[0]), "req_to_token must be 2-D"),
    _r(OP, "req_to_token column step 2", apply("req_to_token", lambda t: torch.cat([t, t], 1)[:, ::2]),
       "req_to_token must have inner stride 1"),
    _r(OP, "seq_lens shorter than bs", apply("seq_lens", lambda t: t[:3]),
       "seq_lens.size(0) must be >= req_pool_indices.numel() = 4, got 3"),
    _r(OP, "kv_indptr too short", apply("kv_indptr", lambda t: t[:4]),
       "kv_indptr.size(0) must be >= req_pool_indices.numel() + 1 = 5, got 4"),
    _r(OP, "kv_indptr 2-D", apply("kv_indptr", lambda t: t[None]), "kv_indptr must be 1-D"),
    _r(OP, "kv_indices 2-D", apply("kv_indices", lambda t: t.view(7, 10)), "kv_indices must be 1-D"),
    _r(OP, "kv_indices step 2", apply("kv_indices", lambda t: torch.cat([t, t])[::2]),
       "kv_indices must have inner stride 1"),
    _r(OP, "num_kv_splits short for the groups", apply("num_kv_splits", lambda t: t[:7]),
       "num_kv_splits.size(0) must be >= req_pool_indices.numel() * num_group = 8, got 7"),
    _r(OP, "uneven_batch empty", apply("uneven_batch", lambda t: t[:0]), "uneven_batch.size(0) must be >= 1"),
    _r(OP, "uneven_batch without num_kv_splits", set_(num_kv_splits=None), "uneven_batch needs num_kv_splits"),
    _r(OP, "entry_page_size 0", set_(entry_page_size=0), "entry_page_size = 0 is outside [1, 2147483647]"),
    _r(OP, "entry_page_size past int32: ids would overflow int64", set_(entry_page_size=2**62),
       "entry_page_size = 4611686018427387904 is outside [1, 2147483647]"),
    _r(OP, "token_mapping with v2p", set_(v2p=torch.arange(40)), "token_mapping and v2p cannot be given together"),
    _r(OP, "num_kv_head past num_head", set_(num_kv_head=64), "num_kv_head = 64 is outside [1, 32]"),
    _r(OP, "num_group 0", set_(num_group=0), "num_group = 0 is outside"),
    _r(OP, "max_kv_splits 0", set_(max_kv_splits=0), "max_kv_splits = 0 is outside"),
    _r(OP, "device_core_count 0", set_(device_core_count=0), "device_core_count = 0 is outside"),
    _r(OP, "kv_indptr aliases seq_lens", lambda kw: kw.update(seq_lens=kw["kv_indptr"][:4]),
       "kv_indptr (written) and seq_lens (read) overlap"),
    _r(OP, "qo_indptr too short", apply("qo_indptr", lambda t: t[:4]),
       "qo_indptr.size(0) must be >= req_pool_indices.numel() + 1 = 5, got 4"),
    _r(OP, "mask_indptr float", apply("mask_indptr", lambda t: t.float()),
       "mask_indptr must have dtype int32 or int64"),
    _r(OP, "mask_indptr without write_indptr", set_(write_indptr=False), "mask_indptr needs write_indptr"),
    _r(OP, "q_stride negative", set_(q_stride=-1), "q_stride = -1 is outside"),
    _r(OP, "sliding_window negative", set_(sliding_window=-1), "sliding_window must be >= 0, got -1"),
    _r(OP, "kv_offsets too short", lambda kw: kw.update(kv_offsets=kw["seq_lens"].new_zeros(3)),
       "kv_offsets.size(0) must be >= req_pool_indices.numel() = 4, got 3"),
    _r(OP, "kv_offsets float", lambda kw: kw.update(kv_offsets=kw["seq_lens"].new_zeros(4).float()),
       "kv_offsets must have dtype int32 or int64"),
    _r(OP, "kv_offsets aliases seq_lens", lambda kw: kw.update(kv_offsets=kw["seq_lens"]),
       "kv_offsets (written) and seq_lens (read) overlap"),
    _r(OP, "kv_offsets aliases kv_indptr", lambda kw: kw.update(kv_offsets=kw["kv_indptr"][:4]),
       "kv_indptr", "kv_offsets", "overlap"),
    _r(OP, "q_stride 0 with the verify outputs", set_(q_stride=0), "q_stride must be >= 1 with qo_indptr"),
    _r(OP, "q_stride times bs past int32", set_(q_stride=2**30), "req_pool_indices.numel() * q_stride"),
    _r(OP, "mask_indptr aliases kv_indptr", lambda kw: kw.update(mask_indptr=kw["kv_indptr"]),
       "kv_indptr and mask_indptr overlap in memory"),
    _r(OP, "extend_seq_lens too short", lambda kw: kw.update(extend_seq_lens=kw["seq_lens"][:3]),
       "extend_seq_lens.size(0) must be >= req_pool_indices.numel() = 4, got 3"),
    _r(OP, "extend_seq_lens float", lambda kw: kw.update(extend_seq_lens=kw["seq_lens"].float()),
       "extend_seq_lens must have dtype int32 or int64"),
    _r(OP, "extend_seq_lens aliases kv_indptr", lambda kw: kw.update(extend_seq_lens=kw["kv_indptr"][:4]),
       "kv_indptr (written) and extend_seq_lens (read) overlap"),
    _r(OP, "kv_indices on meta", apply("kv_indices", lambda t: torch.empty_like(t, device="meta")), "kv_indices",
       "meta"),
    _r(OP, "token_mapping on cuda, rest on cpu", apply("token_mapping", lambda t: t.to("cuda")),
       "token_mapping is on cuda", needs="cuda"),
    _r(OP, "unknown keyword", set_(kv_indptrs=None), "kv_indptrs", raises=(TypeError,), prefixed=False),
    _r(FLASHINFER, "page_kernel_lens shorter than bs", apply("page_kernel_lens", lambda t: t[:3]),
       "page_kernel_lens.size(0) must be >= req_pool_indices.numel() = 4, got 3"),
    _r(FLASHINFER, "kv_indptr too short", apply("kv_indptr", lambda t: t[:4]), "kv_indptr.size(0) must be >="),
    _r(FLASHINFER, "entry_page_size float", set_(entry_page_size=1.0), "entry_page_size must be an int, got float",
       raises=(TypeError,)),
    _r(FLASHINFER, "page_kernel_lens None", set_(page_kernel_lens=None), "page_kernel_lens must be a Tensor",
       raises=(TypeError,)),
    _r(FLASHMLA, "kv_indices int64", apply("kv_indices", lambda t: t.long()),
       "kv_indices must have dtype int32 (torch.int32)"),
    _r(FLASHMLA, "kv_indices 1-D", apply("kv_indices", lambda t: t.flatten()), "kv_indices must be 2-D"),
    _r(FLASHMLA, "kv_indices few rows", apply("kv_indices", lambda t: t[:3]),
       "kv_indices.size(0) must be >= req_pool_indices.numel() = 4, got 3"),
    _r(FLASHMLA, "page_kernel_lens shorter than bs", apply("page_kernel_lens", lambda t: t[:3]),
       "page_kernel_lens.size(0) must be >= req_pool_indices.numel() = 4, got 3"),
    _r(FLASHMLA, "page_size 0", set_(page_size=0), "page_size must be >= 1"),
    _r(FLASHMLA, "page_size float", set_(page_size=8.0), "page_size must be an int, got float", raises=(TypeError,)),
    _r(FLASHMLA, "kv_indices None", set_(kv_indices=None), "kv_indices must be a Tensor", raises=(TypeError,)),
    _r(DRAFT, "req_to_token int64", apply("req_to_token", lambda t: t.long()),
       "req_to_token must have dtype int32 (torch.int32)"),
    _r(DRAFT, "seq_lens shorter than bs", apply("seq_lens", lambda t: t[:1]),
       "seq_lens.size(0) must be >= req_pool_indices.numel() = 2, got 1"),
    _r(DRAFT, "positions one per request", apply("positions", lambda t: t[:2]),
       "positions.size(0) must be >= req_pool_indices.numel() * topk = 4, got 2"),
    _r(DRAFT, "kv_indices 1-D", apply("kv_indices", lambda t: t[0]), "kv_indices must be 2-D"),
    _r(DRAFT, "kv_indices fewer rows than steps", apply("kv_indices", lambda t: t[:2]),
       "kv_indices.size(0) must be >= num_steps = 3, got 2"),
    _r(DRAFT, "kv_indices column step 2", apply("kv_indices", lambda t: t[:, ::2]),
       "kv_indices must have inner stride 1"),
    _r(DRAFT, "kv_indptr narrower than the branches", apply("kv_indptr", lambda t: t[:, :4]),
       "kv_indptr.size(1) must be >= req_pool_indices.numel() * topk + 1 = 5, got 4"),
    _r(DRAFT, "kv_indptr float", apply("kv_indptr", lambda t: t.float()), "kv_indptr must have dtype"),
    _r(DRAFT, "topk 0", set_(topk=0), "topk = 0 is outside [1, 1024]"),
    _r(DRAFT, "num_steps 65", set_(num_steps=65), "num_steps = 65 is outside [1, 64]"),
    _r(DRAFT, "page_size 0", set_(page_size=0), "page_size = 0 is outside"),
    _r(DRAFT, "window_size negative", set_(window_size=-1), "window_size = -1 is outside"),
    _r(DRAFT, "sink_size negative", set_(sink_size=-2), "sink_size = -2 is outside"),
    _r(DRAFT, "kv_indptr inside kv_indices", lambda kw: kw.update(kv_indptr=kw["kv_indices"][:, :5]),
       "kv_indices", "kv_indptr", "overlap"),
    _r(DRAFT, "kv_indices aliases req_to_token",
       lambda kw: kw.update(kv_indices=kw["req_to_token"][:3]), "kv_indices (written) and req_to_token (read) overlap"),
    _r(DRAFT, "kv_indices steps share one row", apply("kv_indices", lambda t: t[:1].expand(3, -1)),
       "kv_indices rows overlap: stride(0) = 0 < 80"),
    _r(DRAFT, "kv_indptr rows narrower than written", apply("kv_indptr", lambda t: t.flatten()[:9].as_strided((3, 5), (2, 1))),
       "kv_indptr rows overlap: stride(0) = 2 < 5"),
    _r(DRAFT, "topk float", set_(topk=2.0), "topk must be an int, got float", raises=(TypeError,)),
    _r(DRAFT, "positions None", set_(positions=None), "positions must be a Tensor", raises=(TypeError,)),
    _r(DRAFT, "positions on cuda, rest on cpu", apply("positions", lambda t: t.to("cuda")),
       "positions is on cuda", needs="cuda"),
    _r(DRAFT, "num_kv_splits one per request", _draft_splits(2),
       "num_kv_splits.size(0) must be >= req_pool_indices.numel() * topk = 4, got 2"),
    _r(DRAFT, "num_kv_splits int64", _draft_splits(4, torch.int64), "num_kv_splits must have dtype int32"),
    _r(DRAFT, "num_kv_head past num_head", _draft_splits(4, num_head=8, num_kv_head=16),
       "num_kv_head = 16 is outside [1, 8]"),
    _r(DRAFT, "max_kv_splits 0", _draft_splits(4, max_kv_splits=0), "max_kv_splits = 0 is outside"),
    _r(DRAFT, "num_kv_splits inside kv_indptr",
       lambda kw: kw.update(num_kv_splits=kw["kv_indptr"].view(-1)[:4]),
       "num_kv_splits", "kv_indptr", "overlap"),
]


# ---- hostile rows (hostile_table.py); bases as above ------------------------------
HOSTILE_ROWS = [
    hostile(OP, "request index == pool size", at("req_pool_indices", 1, 6), "req_pool_indices[1] = 6 is outside [0, "),
    hostile(OP, "kv_start_idx negative", at("kv_start_idx", 2, -1), "kv_start_idx[2] = -1 is negative"),
    hostile(OP, "seq_lens negative", at("seq_lens", 3, -1), "seq_lens[3] = -1 is negative"),
    hostile(OP, "running sum past int32", at("seq_lens", 3, 2**31 - 1), "running sum of seq_lens[0..3]"),
    hostile(OP, "prefix lengths' running sum past int32",
            both(at("seq_lens", 3, 2**31 - 1), lambda kw: kw.update(extend_seq_lens=kw["seq_lens"].new_tensor([0, 1, 0, 1]))),
            "running sum of (seq_lens - extend_seq_lens)[0..3]"),
    hostile(OP, "windowed lengths' running sum past int32", both(at("seq_lens", 3, 2**31 - 1), set_(sliding_window=2**40)),
            "running sum of min(seq_lens, sliding_window)[0..3]"),
    hostile(OP, "seq_lens negative under a window", both(at("seq_lens", 3, -1), set_(sliding_window=4)),
            "seq_lens[3] = -1 is negative"),
    # the window moves row 2's start past its first tokens; the value given is still checked
    hostile(OP, "kv_start_idx negative under a window", both(at("kv_start_idx", 2, -1), set_(sliding_window=4)),
            "kv_start_idx[2] = -1 is negative"),
    hostile(OP, "id past token_mapping", apply("token_mapping", lambda t: t[:10]), "is outside token_mapping"),
    hostile(OP, "mapped id past int32", lambda kw: kw.update(kv_indices=kw["kv_indices"].int(),
                                                    token_mapping=torch.full_like(kw["token_mapping"], 2**40)),
       "does not fit kv_indices (int32)"),
    hostile(OP, "kv_indptr row too short", both(set_(write_indptr=False, mask_indptr=None), apply("kv_indptr", lambda t: t.copy_(
        t.new_tensor([0, 0, 10, 50, 53, 0])))), "row 1 holds 17 tokens but kv_indptr gives it [0, 10)"),
    hostile(OP, "kv_indices too small", apply("kv_indices", lambda t: t[:50]), "row 2 holds 40 tokens at 17"),
    hostile(OP, "extend_seq_lens negative", lambda kw: kw.update(extend_seq_lens=kw["seq_lens"].new_tensor([0, 1, -2, 0])),
            "extend_seq_lens[2] = -2 is negative"),
    hostile(OP, "extend past the length: an empty prefix",
            lambda kw: kw.update(extend_seq_lens=kw["seq_lens"].new_tensor([5, 30, 1, 2**31 - 1])), raises=()),
    hostile(OP, "mask_indptr past int32", both(apply("mask_indptr", lambda t: t.int()), at("seq_lens", 3, 2**29)),
            "q_stride * (seq_lens + q_stride) over rows 0..3"),
    # must succeed: sentinels, capped windows, values never read
    hostile(OP, "negative slots verbatim", apply("req_to_token", lambda t: t.fill_(-5)), raises=()),
    hostile(OP, "window past the row", at("kv_start_idx", 1, 2**30), raises=()),
    hostile(OP, "a window's start past int32 kv_offsets",
            both(at("kv_start_idx", 3, 2**31 - 1), set_(sliding_window=1),
                 derive("kv_offsets", "seq_lens", lambda t: t.new_zeros(4, dtype=torch.int32))),
            "row 3's start, kv_start_idx[3] = 2147483647 + 2 tokens before its window, does not fit kv_offsets (int32)"),
    hostile(OP, "a window's start past int64 kv_offsets",
            both(apply("kv_start_idx", lambda t: t.long()), at("kv_start_idx", 3, 2**63 - 2), set_(sliding_window=1),
                 derive("kv_offsets", "seq_lens", lambda t: t.new_zeros(4, dtype=torch.int64))),
            "row 3's start, kv_start_idx[3] = 9223372036854775806 + 2 tokens before its window, does not fit "
            "kv_offsets (int64)"),
    hostile(OP, "a start of int64's largest value fits int64 kv_offsets",
            both(apply("kv_start_idx", lambda t: t.long()), at("kv_start_idx", 3, 2**63 - 1),
                 derive("kv_offsets", "seq_lens", lambda t: t.new_zeros(4, dtype=torch.int64))), raises=()),
    hostile(OP, "a length past int32's running sum, cut by the window", both(
        at("seq_lens", 3, 2**31 - 1), set_(sliding_window=4, mask_indptr=None)), raises=()),
    hostile(OP, "sliding window's start past int64",
            both(apply("kv_start_idx", lambda t: t.long()), at("kv_start_idx", 1, 2**63 - 2), set_(sliding_window=1)),
            raises=()),
    hostile(OP, "seq_lens past bs hostile", apply("seq_lens", lambda t: torch.cat([t, t.new_tensor([-(2**31)])])), raises=()),
    hostile(DRAFT, "request index == pool size", at("req_pool_indices", 1, 6),
            "req_pool_indices[1] = 6 is outside [0, req_to_token.size(0) = 6)"),
    hostile(DRAFT, "seq_lens negative", at("seq_lens", 1, -1), "seq_lens[1] = -1 is negative or does not fit int32"),
    hostile(DRAFT, "prefix past the row", at("seq_lens", 0, 41), "request 0 (seq_lens = 41) reads past"),
    hostile(DRAFT, "last chain past the row", at("seq_lens", 0, 35), "request 0 (seq_lens = 35) reads past"),
    hostile(DRAFT, "kv_indices row too short", apply("kv_indices", lambda t: t[:, :50]),
            "request 1's ids of the last step end past kv_indices.size(1) = 50"),
    hostile(DRAFT, "positions negative", at("positions", 3, -4), "positions[3] = -4 is negative"),
    hostile(DRAFT, "kv_indptr past int32", at("positions", 0, 2**31 - 1), "kv_indptr's last value"),
    # must succeed: negative slots copied as they are, a window shorter than the prefix, unread values
    hostile(DRAFT, "negative slots verbatim", apply("req_to_token", lambda t: t.fill_(-5)), raises=()),
    hostile(DRAFT, "window of 2 with a sink", set_(window_size=2, sink_size=1), raises=()),
    hostile(DRAFT, "seq_lens past bs hostile", apply("seq_lens", lambda t: torch.cat([t, t.new_tensor([-(2**31)])])),
            raises=()),
]
