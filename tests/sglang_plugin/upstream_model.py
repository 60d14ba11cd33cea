"""SGLang 0.5.23's semantics for the hooked functions, as plain Python loops.

Written from 0.5.23's documented behaviour (its kernels cannot run on this
machine: Triton and the tvm-ffi JIT need a GPU): each function writes, in
place, exactly the elements 0.5.23's kernel writes, and leaves every other
element alone. Integer division truncates toward zero as Triton's and CUDA's
``//`` / ``/`` do; the tests feed non-negative slots where ours (floor division)
must agree, and test the documented difference separately.
"""

from __future__ import annotations

import torch


def _tdiv(a: int, b: int) -> int:
    """C / Triton integer division (toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _cdiv(a: int, b: int) -> int:
    """``tl.cdiv``: ``(a + b - 1) // b`` with truncating division."""
    return _tdiv(a + b - 1, b)


def _i32(x: int) -> int:
    return (x + 2**31) % 2**32 - 2**31


def update_trtllm_mha_graph_metadata(
    *, req_pool_indices, seq_lens, req_to_token, cache_seqlens, cu_seqlens_k, page_table, bs, seqlen_offset,
    max_seq_pages, page_size, swa_mapping=None, swa_page_table=None, out_cache_loc=None, swa_out_cache_loc=None,
    cu_seqlens_q=None, qlens=None, q_stride=0, q_mode=0, skip_page_table=False,
):
    """``kernels/ops/attention/trtllm_mha_graph_metadata.py``: one program per
    row writes ``cache_seqlens[i]`` and the row's live pages
    (``min(cdiv(seqlen, page_size), max_seq_pages)``; SWA: ``-1`` for a negative
    slot or mapped slot), one program the cumulative sums from index 1 (index 0
    is never written), the rest ``swa_out_cache_loc`` (translated for
    ``k < min(L, len(out_cache_loc))``, ``-1`` for a negative location, 0
    after). ``skip_page_table`` drops both page tables, not ``swa_out_cache_loc``."""
    if bs == 0:
        return
    if skip_page_table:
        page_table = swa_page_table = None
    ps = page_size
    seqlens = [_i32(int(seq_lens[i]) + seqlen_offset) for i in range(bs)]
    for i in range(bs):
        cache_seqlens[i] = seqlens[i]
        if page_table is None:
            continue
        row = int(req_pool_indices[i])
        for p in range(min(_cdiv(seqlens[i], ps), max_seq_pages)):
            token = int(req_to_token[row, p * ps])
            page_table[i, p] = _tdiv(token, ps)
            if swa_page_table is not None:
                swa = int(swa_mapping[token]) if token >= 0 else -1
                swa_page_table[i, p] = -1 if swa < 0 else _tdiv(swa, ps)
    total = q_total = 0
    for i in range(bs):
        total = _i32(total + seqlens[i])
        cu_seqlens_k[i + 1] = total
        if q_mode == 1:
            q_total = _i32(q_total + int(qlens[i]))
            cu_seqlens_q[i + 1] = q_total
        elif q_mode == 2:
            cu_seqlens_q[i + 1] = (i + 1) * q_stride
    if swa_out_cache_loc is not None:
        n = min(len(swa_out_cache_loc), len(out_cache_loc)) if out_cache_loc is not None else 0
        for k in range(len(swa_out_cache_loc)):
            if k < n:
                loc = int(out_cache_loc[k])
                swa_out_cache_loc[k] = -1 if loc < 0 else int(swa_mapping[loc])
            else:
                swa_out_cache_loc[k] = 0


def build_trtllm_mha_page_table(
    req_to_token, req_pool_indices, cache_seqlens, page_table, page_size, swa_page_table=None, full_to_swa=None,
):
    """``kernels/ops/attention/trtllm_mha_page_table.py``: for each of the
    table's rows, pages ``p < cdiv(cache_seqlens[r], page_size)`` get
    ``slot // page_size`` and, with SWA, ``full_to_swa[clamp(slot, 0, M - 1)]
    // page_size``. (0.5.23 bounds the grid by the table width, not each row:
    rows longer than the table are a documented difference, not modelled.)"""
    assert 4096 % page_size == 0, "0.5.23 asserts this"
    ps = page_size
    rows, width = page_table.shape
    for r in range(rows):
        n = _cdiv(int(cache_seqlens[r]), ps)
        assert n <= width, "outside what 0.5.23 defines (it would write past the row)"
        row = int(req_pool_indices[r])
        for p in range(n):
            slot = int(req_to_token[row, p * ps])
            page_table[r, p] = _tdiv(slot, ps)
            if full_to_swa is not None:
                m = full_to_swa.numel()
                swa_page_table[r, p] = _tdiv(int(full_to_swa[min(max(slot, 0), m - 1)]), ps)


def _flat(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(-1)


def _dsa_set(src: dict, dst: dict, *, mode: int, bs: int, max_len: int, max_seqlen_k: int, size: int,
             has_real: bool, has_flashmla: bool, rows: int) -> None:
    """One destination set of ``kernels/jit/csrc/elementwise/fused_metadata_copy.cuh``.
    Sources are read as flat contiguous arrays (0.5.23 calls ``.contiguous()``;
    the page-table source is indexed ``row * columns + col``)."""
    for i in range(bs):
        dst["cache_seqlens"][i] = src["cache_seqlens"][i]
        dst["cu_seqlens_k"][i + 1] = src["cu_seqlens_k"][i + 1]
    cols = max_len if mode == 0 else max_seqlen_k
    n_rows = bs if mode == 0 else rows
    pages = _flat(src["page_indices"])
    for r in range(n_rows):
        for c in range(cols):
            dst["page_table_1"][r, c] = pages[r * cols + c]
    if mode != 0:
        for i in range(size):
            dst["seqlens_expanded"][i] = src["seqlens_expanded"][i]
    n = bs if mode == 0 else size
    for i in range(n):
        dst["dsa_cache_seqlens"][i] = src["dsa_cache_seqlens"][i]
        dst["dsa_cu_seqlens_k"][i + 1] = src["dsa_cu_seqlens_k"][i + 1]
    if has_real:
        real = _flat(src["real_page_table"])
        rcols = src["real_page_table"].shape[1]
        for r in range(bs if mode == 0 else rows):
            for c in range(rcols):
                dst["real_page_table"][r, c] = real[r * rcols + c]
    if has_flashmla:
        for i in range(n + 1):
            dst["flashmla_num_splits"][i] = src["flashmla_num_splits"][i]
        md = _flat(src["flashmla_metadata"])
        out = dst["flashmla_metadata"].view(-1)
        out[: md.numel()] = md


_FIELDS = ("cache_seqlens", "cu_seqlens_k", "page_indices", "dsa_cache_seqlens", "seqlens_expanded",
           "dsa_cu_seqlens_k", "real_page_table", "flashmla_num_splits", "flashmla_metadata")
_DST = ("cache_seqlens", "cu_seqlens_k", "page_table_1", "dsa_cache_seqlens", "seqlens_expanded",
        "dsa_cu_seqlens_k", "real_page_table", "flashmla_num_splits", "flashmla_metadata")


def fused_metadata_copy_cuda(*args) -> None:
    """``kernels/ops/attention/dsa/fused_metadata_copy.py`` (single set): the
    real page table iff its source is given, FlashMLA iff
    ``flashmla_num_splits_src`` is; ``seqlens_expanded`` only outside DECODE."""
    src = dict(zip(_FIELDS, args[:9]))
    dst = dict(zip(_DST, args[9:18]))
    mode, bs, max_len, max_seqlen_k, size = args[18:23]
    _dsa_set(src, dst, mode=mode, bs=bs, max_len=max_len, max_seqlen_k=max_seqlen_k, size=size,
             has_real=src["real_page_table"] is not None, has_flashmla=src["flashmla_num_splits"] is not None,
             rows=src["page_indices"].shape[0])


def fused_metadata_copy_multi_cuda(*args) -> None:
    """The three-set DECODE copy: the real page table iff its source and the
    first destination are given, FlashMLA iff ``flashmla_num_splits_src`` is."""
    names = [f for f in _FIELDS if f != "seqlens_expanded"]
    src = dict(zip(names, args[:8]))
    dst_names = [f for f in _DST if f != "seqlens_expanded"]
    sets = [dict(zip(dst_names, args[8 + 8 * k: 16 + 8 * k])) for k in range(3)]
    bs, max_len, _size = args[32:35]
    has_real = src["real_page_table"] is not None and sets[0]["real_page_table"] is not None
    for dst in sets:
        _dsa_set(src, dst, mode=0, bs=bs, max_len=max_len, max_seqlen_k=0, size=bs, has_real=has_real,
                 has_flashmla=src["flashmla_num_splits"] is not None, rows=bs)
