"""What SGLang 0.5.23's three DSA metadata generators write, modelled element by
element in plain Python (an oracle independent of sgl_meta.reference).

Read from ``sglang/kernels/ops/attention/dsa/metadata.py``: a scan program
(cumulative sums, expanded rows) plus one program per (page row or request,
128-column block) that skips blocks starting at or past the request's KV length
and otherwise writes the *whole* block (capped at the column bound) of
``page_table_1`` and, for page size > 1, the real-table entries of the block's
page starts, with Triton integer division (truncation toward zero).

Valid inputs only (what the upstream asserts and its callers guarantee):
``static_extend_len`` with ``extend_seq_lens[0] > 0`` and ``total_len <= bs *
extend_seq_lens[0]``; non-negative extend lengths; request indices in range.
Returns ``{field: {index: value}}`` of every element written (index = int or
(row, col)), so a test can compare sgl_meta's writes against it, plus
``kv_len: {row: length}`` of every page row (the length its blocks were cut by).
"""

from __future__ import annotations

BLOCK_N = 128


def _i32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v >= 1 << 31 else v


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _next_pow2(x: int) -> int:
    p = 1
    while p < x:
        p *= 2
    return p


def _page_rows(out, r2t, req, kv_len, rows, max_len, ps, has_pt1):
    """One request's page programs: every 128-block starting below kv_len."""
    for row in rows:
        out["kv_len"][row] = kv_len
    block = 0
    while block * BLOCK_N < max_len:
        if block * BLOCK_N < kv_len:
            for c in range(block * BLOCK_N, min((block + 1) * BLOCK_N, max_len)):
                v = r2t[req][c]
                for row in rows:
                    if has_pt1:
                        out["page_table_1"][(row, c)] = v
                    if ps > 1 and c % ps == 0:
                        out["real_page_table"][(row, c // ps)] = _trunc_div(v, ps)
        block += 1


def upstream_writes(mode, seq_lens, req_pool_indices, r2t, bs, max_len, topk, ps, next_n=1, extend=None,
                    total_len=0, max_extend_len=1, static=False, has_pt1=True, has_paged=False) -> dict:
    """seq_lens, req_pool_indices, extend: Python int lists; r2t: list of rows."""
    out = {k: {} for k in ("cache_seqlens", "cu_seqlens_k", "seqlens_expanded", "dsa_cache_seqlens",
                           "dsa_cu_seqlens_k", "page_table_1", "real_page_table", "paged_mqa_ctx_lens_2d",
                           "kv_len")}
    out["cu_seqlens_k"][0] = 0
    out["dsa_cu_seqlens_k"][0] = 0
    if bs == 0:
        return out
    seq = [_i32(s) for s in seq_lens[:bs]]
    if mode == 2 and total_len == 0:  # the eager early return
        cu = 0
        for r in range(bs):
            out["cache_seqlens"][r] = seq[r]
            cu = _i32(cu + seq[r])
            out["cu_seqlens_k"][r + 1] = cu
        return out

    cache = [_i32(s + next_n) if mode == 1 else s for s in seq]
    cu = 0
    for r in range(bs):
        out["cache_seqlens"][r] = cache[r]
        cu = _i32(cu + cache[r])
        out["cu_seqlens_k"][r + 1] = cu

    def emit(e, x, acc):
        d = min(x, topk)
        if mode != 0:
            out["seqlens_expanded"][e] = x
        out["dsa_cache_seqlens"][e] = d
        acc = _i32(acc + d)
        out["dsa_cu_seqlens_k"][e + 1] = acc
        return acc

    acc = 0
    if mode == 0:
        for r in range(bs):
            acc = emit(r, seq[r], acc)
            _page_rows(out, r2t, req_pool_indices[r], seq[r], [r], max_len, ps, has_pt1)
    elif mode == 1:
        for e in range(bs * next_n):
            r, j = divmod(e, next_n)
            acc = emit(e, _i32(seq[r] + j + 1), acc)
            if has_paged:
                out["paged_mqa_ctx_lens_2d"][(r, j)] = _i32(seq[r] + next_n)
        for r in range(bs):
            rows = range(r * next_n, (r + 1) * next_n)
            _page_rows(out, r2t, req_pool_indices[r], cache[r], rows, max_len, ps, has_pt1)
    else:
        qo = [extend[0]] * bs if static else list(extend[:bs])
        for e in range(total_len):
            if static:
                r, local = divmod(e, qo[0])
                q = qo[0]
            else:  # default for rows no request covers: request 0, offset 0, length 1
                r, local, q, prefix = 0, 0, 1, 0
                for i in range(bs):
                    if prefix <= e < prefix + qo[i]:
                        r, local, q = i, e - prefix, qo[i]
                    prefix += qo[i]
            acc = emit(e, max(seq[r] - q + local + 1, 0), acc)
        # The page programs read each request's own extend length, also in the
        # static mode (whose scan reads element 0 only).
        block_rows = _next_pow2(max_extend_len)
        own = list(extend[:bs])
        for r in range(bs):
            prefix = r * own[r] if static else sum(own[:r])
            rows = [prefix + j for j in range(min(block_rows, own[r])) if prefix + j < total_len]
            if own[r] > 0:
                _page_rows(out, r2t, req_pool_indices[r], seq[r], rows, max_len, ps, has_pt1)
    return out
