"""Hostile lengths: one contract for every op that computes lengths or offsets.

A length lies in [0, 2**31 - 1]: a negative one, or one whose result does not
fit the int32 outputs (a length plus its offsets, a running sum of lengths over
rows), is an error. On CPU the op raises RuntimeError naming the op and the
argument, with nothing written (outputs are poisoned first and compared), and
the eager reference raises the same message (it stays an oracle); on CUDA the
op trips a device-side assert naming the op (one child process per row, through
the reliability suite's matrix runner). A length of exactly 2**31 - 1, and the
lengths SGLang passes for padded rows (0 and 1), stay valid.

The fused_metadata_copy family copies values and computes none: nothing here.

This module is also the row table of the child processes (ROWS, BASES), as
tests/reliability/hostile_table.py is for the hostile device values.
"""

from __future__ import annotations

import sys
from functools import partial
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent / "reliability"))

import sgl_meta  # noqa: E402
from sgl_meta import reference  # noqa: E402
from matrix_runner import run_each_alone, run_rows, run_seed  # noqa: E402
from row_kit import Row, both, set_  # noqa: E402

I32_MAX = 2**31 - 1
DTYPES = {"int32": torch.int32, "int64": torch.int64}
POISON = -7

UPDATE = "update_trtllm_mha_graph_metadata"
MULTI = "update_trtllm_mha_graph_metadata_multi"
PAGE_TABLE = "build_trtllm_mha_page_table"
KV_TABLE = "kv_read_page_table"
KV_STREAM = "kv_read_token_stream"
DSA = "fused_dsa_metadata"


# ---- base calls: small, valid, lengths as SGLang passes them (0 for a padded row) ----
def _slots(gen, device, pool=6, ctx=64):
    return torch.randint(0, 640, (pool, ctx), generator=gen, dtype=torch.int32).to(device)


def _out(device, *shape, dtype=torch.int32):
    return torch.full(shape, POISON, dtype=dtype, device=device)


def _rows(gen, device, dtype, lengths="seq_lens"):
    """What every gathering op reads: 4 rows of req_to_token [6, 64] by
    req_pool_indices, their lengths (0 for a padded row), pages of 16."""
    idx = dict(dtype=dtype, device=device)
    return {"req_to_token": _slots(gen, device), "req_pool_indices": torch.tensor([0, 5, 2, 2], **idx),
            lengths: torch.tensor([5, 17, 0, 1], **idx), "page_size": 16}


def _update(gen, device, dtype, sets=None):
    idx = dict(dtype=dtype, device=device)
    one = sets is None
    k = 1 if one else sets
    outs = dict(
        cache_seqlens=[_out(device, 5) for _ in range(k)],
        cu_seqlens_k=[_out(device, 6) for _ in range(k)],
        cu_seqlens_q=[_out(device, 6) for _ in range(k)],
        page_table=[_out(device, 5, 4) for _ in range(k)],
    )
    kw = dict(
        **_rows(gen, device, dtype),
        bs=4, seqlen_offset=0 if one else [0] * k, max_seq_pages=4,
        qlens=torch.tensor([1, 2, 1, 1], **idx), q_mode=sgl_meta.Q_MODE_CUMSUM,
        live_pages_only=True,  # a length past the table writes its 4 columns, no more
        **{name: (v[0] if one else v) for name, v in outs.items()},
    )
    return kw


def _page_table(gen, device, dtype):
    return dict(
        **_rows(gen, device, dtype, "cache_seqlens"),
        page_table=_out(device, 4, 4),
        swa_page_table=_out(device, 4, 4),
        full_to_swa=torch.randint(0, 10_000, (640,), generator=gen).to(device),
    )


def _kv_table(gen, device, dtype):
    return dict(
        **_rows(gen, device, dtype),
        out=_out(device, 4, 5),
        max_pages=5,
        v2p=torch.randperm(40, generator=gen).to(device),
    )


def _kv_stream(gen, device, dtype):
    kw = _kv_table(gen, device, dtype)
    del kw["max_pages"]
    kw["indptr"] = torch.arange(0, 5 * 64, 64, dtype=dtype, device=device)  # room for whole rows
    kw["out"] = _out(device, 4 * 64, dtype=torch.int64)
    return kw


def _dsa(gen, device, dtype, mode=1):
    idx = dict(dtype=dtype, device=device)
    bs, next_n = 3, 2
    n = bs * next_n if mode == 1 else bs
    return dict(
        seq_lens=torch.tensor([3, 9, 0], **idx),
        req_pool_indices=torch.tensor([1, 3, 0], **idx),
        req_to_token=torch.randint(0, 500, (4, 12), generator=gen, dtype=torch.int32).to(device),
        cache_seqlens=[_out(device, bs)], cu_seqlens_k=[_out(device, bs + 1)],
        seqlens_expanded=[_out(device, n)] if mode == 1 else None,
        dsa_cache_seqlens=[_out(device, n)], dsa_cu_seqlens_k=[_out(device, n + 1)],
        page_table_1=[_out(device, n, 10)],
        forward_mode=mode, bs=bs, max_seqlen_k=10, dsa_index_topk=I32_MAX, page_size=4,
        next_n=next_n if mode == 1 else None,
    )


BUILDERS = {
    UPDATE: _update,
    MULTI: partial(_update, sets=2),
    PAGE_TABLE: _page_table,
    KV_TABLE: _kv_table,
    KV_STREAM: _kv_stream,
    DSA: _dsa,
    f"{DSA}/decode": partial(_dsa, mode=0),
}
BASES = {f"{name}/{dt}": partial(fn, dtype=dtype) for name, fn in BUILDERS.items() for dt, dtype in DTYPES.items()}


# ---- edits -------------------------------------------------------------------
def lens(name, *values):
    """kw[name][:len(values)] = values (the tensor keeps its dtype)."""
    def edit(kw):
        kw[name][: len(values)] = torch.tensor(values, dtype=torch.int64)
    return edit


# (base op, case, edit, message parts or None when the call must succeed, int64 only)
CASES = [
    # update: seq_lens + seqlen_offset into cache_seqlens, running sums into cu_seqlens_k / cu_seqlens_q
    (UPDATE, "length 2**31 - 1 fits", lens("seq_lens", 0, I32_MAX, 0, 0), None, False),
    (UPDATE, "length + offset 2**31 - 1 fits", both(set_(bs=1, seqlen_offset=5), lens("seq_lens", I32_MAX - 5)), None,
     False),
    (UPDATE, "sums exactly 2**31 - 1 fit", both(lens("seq_lens", 2**30, 2**30 - 1, 0, 0),
                                                lens("qlens", 2**30, 2**30 - 1, 0, 0)), None, False),
    (UPDATE, "length + offset past int32", both(lens("seq_lens", 0, I32_MAX - 4), set_(seqlen_offset=5)),
     ["seq_lens[1] + seqlen_offset = 2147483648 does not fit int32 cache_seqlens"], False),
    (UPDATE, "length + offset 2**31-1 + 5", both(lens("seq_lens", 0, 0, 0, I32_MAX), set_(seqlen_offset=5)),
     ["seq_lens[3] + seqlen_offset = 2147483652 does not fit int32 cache_seqlens"], False),
    (UPDATE, "int64 length 2**31", lens("seq_lens", 0, 2**31), ["seq_lens[1] = 2147483648 does not fit int32"], True),
    (UPDATE, "int64 length 2**40", lens("seq_lens", 0, 0, 0, 2**40), ["seq_lens[3] = 1099511627776 does not fit"],
     True),
    (UPDATE, "running sum past int32", lens("seq_lens", 2**30, 2**30),
     ["cache_seqlens[0..1] summed (cu_seqlens_k[2]) = 2147483648 does not fit int32"], False),
    (UPDATE, "running sum of many rows past int32", lens("seq_lens", 2**29 + 1, 2**29, 2**29, 2**29),
     ["cache_seqlens[0..3] summed (cu_seqlens_k[4]) = 2147483649"], False),
    (UPDATE, "qlens running sum past int32", lens("qlens", 1, I32_MAX),
     ["qlens[0..1] summed (cu_seqlens_q[2]) = 2147483648 does not fit int32"], False),
    (UPDATE, "negative length", lens("seq_lens", 5, 17, -1), ["seq_lens[2] = -1 is negative"], False),
    (UPDATE, "negative qlens", lens("qlens", 1, -3), ["qlens[1] = -3 is negative"], False),
    (UPDATE, "offset makes a length negative", set_(seqlen_offset=-1),
     ["seq_lens[2] + seqlen_offset = -1 is negative"], False),
    (UPDATE, "per-row offset past int32", both(lens("seq_lens", 0, I32_MAX), set_(seqlen_offsets=None),
                                               lambda kw: kw.update(seqlen_offsets=kw["qlens"].clone())),
     ["seq_lens[1] + seqlen_offsets[1] + seqlen_offset = 2147483649 does not fit int32 cache_seqlens"], False),
    (UPDATE, "int64 per-row offset past int64", both(
        lens("seq_lens", 0, 5), lambda kw: kw.update(seqlen_offsets=torch.tensor([0, 2**63 - 1, 0, 0],
                                                                                 device=kw["seq_lens"].device)),
        set_(seqlen_offset=1)),
     ["seq_lens[1] + seqlen_offsets[1] + seqlen_offset = 5 + 9223372036854775807 + 1 does not fit int32"], True),
    (UPDATE, "skip_page_table checks lengths too", both(set_(skip_page_table=True, page_table=None),
                                                       lens("seq_lens", 0, -1)),
     ["seq_lens[1] = -1 is negative"], False),
    # multi: every set's offset
    (MULTI, "a later set's offset past int32", both(lens("seq_lens", 0, I32_MAX - 4), set_(seqlen_offset=[0, 5])),
     ["seq_lens[1] + seqlen_offset[1] = 2147483648 does not fit int32 cache_seqlens[1]"], False),
    (MULTI, "a set's running sum past int32", both(lens("seq_lens", 2**30 - 1, 2**30 - 1), set_(seqlen_offset=[0, 1])),
     ["cache_seqlens[1][0..1] summed (cu_seqlens_k[1][2]) = 2147483648"], False),
    (MULTI, "a set's sum is exactly 2**31 - 1", both(lens("seq_lens", I32_MAX - 12, 0, 0, 0), set_(seqlen_offset=[1, 3])),
     None, False),
    (MULTI, "negative length", lens("seq_lens", -2), ["seq_lens[0] = -2 is negative"], False),
    # page-table builder: a length only sizes the row (capped by the table); negative is an error, 0 no pages
    (PAGE_TABLE, "length 2**31 - 1 fits", lens("cache_seqlens", I32_MAX, I32_MAX), None, False),
    (PAGE_TABLE, "negative length", lens("cache_seqlens", 5, -1), ["cache_seqlens[1] = -1 is negative"], False),
    (PAGE_TABLE, "int64 length 2**31", lens("cache_seqlens", 2**31), ["cache_seqlens[0] = 2147483648 does not fit int32"],
     True),
    (PAGE_TABLE, "slot past full_to_swa", lambda kw: kw["req_to_token"].fill_(640),
     ["req_to_token[req_pool_indices[0], 0 * page_size] = 640 is outside full_to_swa [0, 640)"], False),
    (PAGE_TABLE, "negative slots read full_to_swa[0]", lambda kw: kw["req_to_token"].fill_(-1), None, False),
    # KV read tables: seq_lens[b] and seq_lens[b] + seq_len_delta
    (KV_TABLE, "length 2**31 - 1 fits", lens("seq_lens", I32_MAX, I32_MAX), None, False),
    (KV_TABLE, "length + delta 2**31 - 1 fits", both(lens("seq_lens", I32_MAX - 2), set_(seq_len_delta=2)), None,
     False),
    (KV_TABLE, "length + delta past int32", both(lens("seq_lens", 0, I32_MAX - 1), set_(seq_len_delta=2)),
     ["seq_lens[1] + seq_len_delta = 2147483648 does not fit int32"], False),
    (KV_TABLE, "int64 length 2**31", lens("seq_lens", 0, 0, 2**31), ["seq_lens[2] = 2147483648 does not fit int32"],
     True),
    (KV_TABLE, "negative length", lens("seq_lens", -1), ["seq_lens[0] = -1 is negative"], False),
    (KV_TABLE, "delta makes a window negative", set_(seq_len_delta=-1), ["seq_lens[2] + seq_len_delta = -1 is negative"],
     False),
    (KV_STREAM, "length 2**31 - 1 fits", lens("seq_lens", I32_MAX, 0, I32_MAX), None, False),
    (KV_STREAM, "length + delta past int32", both(lens("seq_lens", I32_MAX), set_(seq_len_delta=1)),
     ["seq_lens[0] + seq_len_delta = 2147483648 does not fit int32"], False),
    (KV_STREAM, "int64 length 2**32", lens("seq_lens", 0, 2**32), ["seq_lens[1] = 4294967296 does not fit int32"], True),
    (KV_STREAM, "negative length", lens("seq_lens", 0, 0, 0, -5), ["seq_lens[3] = -5 is negative"], False),
    # DSA generator: cache_seqlens (+ next_n in verify), cu_seqlens_k, dsa_cu_seqlens_k
    (DSA, "verify length + next_n 2**31 - 1 fits", both(set_(bs=1, dsa_index_topk=2048), lens("seq_lens", I32_MAX - 2)),
     None, False),
    (DSA, "verify length + next_n past int32", lens("seq_lens", 0, I32_MAX - 1),
     ["seq_lens[1] + next_n = 2147483648 does not fit int32 cache_seqlens"], False),
    (DSA, "int64 length 2**31", lens("seq_lens", 2**31), ["seq_lens[0] = 2147483648 does not fit int32"], True),
    (DSA, "negative length", lens("seq_lens", 3, 9, -1), ["seq_lens[2] = -1 is negative"], False),
    (DSA, "running sum past int32", lens("seq_lens", 2**30, 2**30),
     ["cache_seqlens[0..1] summed (cu_seqlens_k[2]) = 2147483652 does not fit int32"], False),
    (DSA, "expanded rows' running sum past int32", lens("seq_lens", 2**30, 0, 0),
     ["dsa_cache_seqlens[0..1] summed (dsa_cu_seqlens_k[2]) = 2147483651 does not fit int32"], False),
    (f"{DSA}/decode", "length 2**31 - 1 fits", lens("seq_lens", I32_MAX, 0, 0), None, False),
    (f"{DSA}/decode", "running sum past int32", lens("seq_lens", I32_MAX, 1, 0),
     ["cache_seqlens[0..1] summed (cu_seqlens_k[2]) = 2147483648 does not fit int32"], False),
]


def _row(base, case, edit, parts, dt):
    op = base.split("/")[0]
    return Row(id=f"{base}/{dt}/{case}", op=op, edit=edit, names=tuple(parts or ()),
               raises=(RuntimeError,) if parts else (), base=f"{base}/{dt}")


ROWS = [_row(base, case, edit, parts, dt)
        for base, case, edit, parts, only64 in CASES for dt in DTYPES if not (only64 and dt == "int32")]
MUST_RAISE = [r for r in ROWS if r.raises]
MUST_PASS = [r for r in ROWS if not r.raises]


def _call(row, device, fn, seed=0):
    kw = BASES[row.base](torch.Generator().manual_seed(seed), device)
    row.edit(kw)
    return kw, fn(**kw) if fn else None


def _tensors(kw):
    """Every tensor of a call (lists flattened), cloned: what 'nothing written' compares."""
    out = {}
    for k, v in kw.items():
        for i, t in enumerate(v if isinstance(v, (list, tuple)) else [v]):
            if isinstance(t, torch.Tensor):
                out[f"{k}[{i}]"] = t.clone()
    return out


# ---- CPU -----------------------------------------------------------------------
@pytest.mark.parametrize("row", MUST_RAISE, ids=[r.id for r in MUST_RAISE])
def test_cpu_rejects_hostile_length(row):
    kw = BASES[row.base](torch.Generator().manual_seed(0), "cpu")
    row.edit(kw)
    before = _tensors(kw)
    with pytest.raises(RuntimeError) as err:
        getattr(sgl_meta, row.op)(**kw)
    msg = str(err.value)
    assert msg.startswith(f"sgl_meta.{row.op}: "), msg
    for part in row.names:
        assert part in msg, f"{part!r} not in {msg!r}"
    after = _tensors(kw)
    for name, t in before.items():
        assert torch.equal(after[name], t), f"{name} was written before the error"
    # the eager reference is an oracle for these inputs too: the same error
    with pytest.raises(RuntimeError) as ref_err:
        getattr(reference, row.op)(**kw)
    assert str(ref_err.value) == msg


@pytest.mark.parametrize("row", MUST_PASS, ids=[r.id for r in MUST_PASS])
def test_cpu_accepts_lengths_that_fit(row):
    kw = BASES[row.base](torch.Generator().manual_seed(0), "cpu")
    row.edit(kw)
    want = {k: (v.clone() if isinstance(v, torch.Tensor) else [t.clone() for t in v] if isinstance(v, list)
                and v and isinstance(v[0], torch.Tensor) else v) for k, v in kw.items()}
    getattr(sgl_meta, row.op)(**kw)
    getattr(reference, row.op)(**want)
    got, ref = _tensors(kw), _tensors(want)
    for name in got:
        assert torch.equal(got[name], ref[name]), f"{name}: op {got[name]} vs reference {ref[name]}"


def test_page_table_negative_slot_reads_entry_zero():
    """A negative slot reads full_to_swa[0], as SGLang 0.5.23's builder clamps it."""
    kw = _page_table(torch.Generator().manual_seed(1), "cpu", torch.int32)
    kw["req_to_token"].fill_(-1)
    sgl_meta.build_trtllm_mha_page_table(**kw)
    first = int(kw["full_to_swa"][0]) // 16
    assert kw["swa_page_table"][1, :2].tolist() == [first, first]  # 17 tokens: 2 pages
    assert kw["page_table"][1, :2].tolist() == [-1, -1]  # -1 // 16 floors


def test_update_reports_the_length_of_the_brief():
    """The exact message for seq_lens[3] + seqlen_offset past int32."""
    kw = _update(torch.Generator().manual_seed(0), "cpu", torch.int64)
    kw["seq_lens"][3] = I32_MAX
    kw["seqlen_offset"] = 5
    with pytest.raises(RuntimeError, match=r"^sgl_meta\.update_trtllm_mha_graph_metadata: seq_lens\[3\] \+ "
                                           r"seqlen_offset = 2147483652 does not fit int32 cache_seqlens$"):
        sgl_meta.update_trtllm_mha_graph_metadata(**kw)


# ---- CUDA: a device-side assert naming the op, each row in its own process ------
@pytest.fixture(scope="module")
def cuda_results(request):
    return run_each_alone(Path(__file__).stem, "cuda", [r.id for r in MUST_RAISE], run_seed(request.config),
                          sync=True)


@pytest.mark.gpu
@pytest.mark.parametrize("row", MUST_RAISE, ids=[r.id for r in MUST_RAISE])
def test_cuda_hostile_length_trips_device_assert(cuda_results, row):
    rec = cuda_results[row.id]
    text = rec.get("output", "") + rec.get("message", "")
    assert rec["event"] in ("raised", "crashed"), f"expected a device-side assert, got {rec['event']}:\n{text[-3000:]}"
    assert "device-side assert" in text, f"no 'device-side assert' in:\n{text[-3000:]}"
    assert f"sgl_meta: {row.op}:" in text, f"the device message must name the op:\n{text[-3000:]}"


@pytest.mark.gpu
def test_cuda_accepts_lengths_that_fit(request):
    got = run_rows(Path(__file__).stem, "cuda", [r.id for r in MUST_PASS], run_seed(request.config), sync=True)
    bad = {k: f"{v['event']}: {v.get('message', '')}{v.get('output', '')[-2000:]}"
           for k, v in got.items() if v["event"] != "returned"}
    assert not bad, bad


@pytest.mark.gpu
@pytest.mark.parametrize("row", MUST_PASS, ids=[r.id for r in MUST_PASS])
def test_cuda_matches_cpu_where_lengths_fit(row):
    kw_cuda, _ = _call(row, "cuda", getattr(sgl_meta, row.op))
    kw_cpu, _ = _call(row, "cpu", getattr(sgl_meta, row.op))
    got, want = _tensors(kw_cuda), _tensors(kw_cpu)
    for name in want:
        assert torch.equal(got[name].cpu(), want[name]), name
