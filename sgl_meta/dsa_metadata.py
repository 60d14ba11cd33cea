"""DSA (DeepSeek sparse attention) backend: replay metadata generated into K CUDA graphs.

The op ``fused_dsa_metadata`` as a keyword function (any K >= 1
destination sets, every forward mode) and drop-ins with the exact signatures of
SGLang 0.5.23's three Triton generators in
``sglang/kernels/ops/attention/dsa/metadata.py`` (``fused_dsa_decode_metadata``,
``fused_dsa_target_verify_metadata``, ``fused_dsa_draft_extend_metadata``; K = 1).

Where SGLang runs a generator into staging buffers and then copies them, at
the full static width, into each of K captured graphs (``fused_metadata_copy``
/ ``fused_metadata_copy_multi``), one call here writes every graph's buffers
directly, live prefixes only.
"""

from __future__ import annotations

from . import _errors, _op

_OPTIONAL_LISTS = ("seqlens_expanded", "page_table_1", "real_page_table", "paged_mqa_ctx_lens_2d")

fused_dsa_metadata = _op.define(
    "fused_dsa_metadata",
    family="dsa_metadata",
    upstream="the DSA backend's generator + fused_metadata_copy(_multi) per replay",
    index=("seq_lens", "req_pool_indices", "extend_seq_lens"),
    defaults={**dict.fromkeys(_OPTIONAL_LISTS), "static_extend_len": False},
    doc="""Generate one DSA CUDA-graph replay's metadata into K >= 1 destination sets, in one launch.

    Replaces SGLang 0.5.23's Triton generators
    (``sglang/kernels/ops/attention/dsa/metadata.py``: ``fused_dsa_decode_metadata``,
    ``fused_dsa_target_verify_metadata``, ``fused_dsa_draft_extend_metadata``) and the
    full-width ``fused_metadata_copy(_multi)`` copies of their staging buffers into the
    graphs' buffers that follow them (``dsa_backend.py``, the multi-step MTP draft
    backend). Set ``k`` is element ``k`` of every destination list; every set receives
    identical values.

    Let ``seq[r] = int32(seq_lens[r])`` (two's-complement truncation of int64 values, as
    upstream's ``.to(tl.int32)``), ``W = max_seqlen_k``, ``ps = page_size``, and ``n`` the
    number of expanded rows (one per query token): ``bs`` in DECODE, ``bs * next_n`` in
    TARGET_VERIFY, ``total_len`` in DRAFT_EXTEND (0 when ``bs == 0``). Written, int32
    (every length and running sum in ``[0, 2**31 - 1]``, see Lengths):

    * ``cache_seqlens[k][r]``, ``r < bs``: ``c[r] = seq[r] + next_n`` in TARGET_VERIFY,
      else ``seq[r]``.
    * ``cu_seqlens_k[k][0] = 0``, ``[r + 1]`` = running sum of ``c[0..r]``.
    * Expanded row lengths ``x[e]``, ``e < n``: DECODE ``seq[e]``; TARGET_VERIFY
      ``seq[r] + j + 1`` for ``e = r * next_n + j`` (not capped); DRAFT_EXTEND: request
      ``r`` owns rows ``start_r + j``, ``j < extend_seq_lens[r]``, ``start_r`` the prefix
      sum of the extend lengths, with ``x = max(seq[r] - extend_seq_lens[r] + j + 1, 0)``
      (padded rows clamp at 0); rows past every request's (``total_len`` beyond the sum)
      get ``max(seq[0], 0)``, as upstream's scan.
      ``seqlens_expanded[k][e] = x[e]`` (TARGET_VERIFY / DRAFT_EXTEND only).
    * ``dsa_cache_seqlens[k][e] = min(x[e], dsa_index_topk)``; ``dsa_cu_seqlens_k[k][0] = 0``,
      ``[e + 1]`` = running sum.
    * Page rows: each expanded row of request ``r`` (DECODE: row ``r``; TARGET_VERIFY: rows
      ``r * next_n .. + next_n - 1``, every one up to ``seq + next_n``; DRAFT_EXTEND: its
      rows above that are ``< total_len``) gets the **live prefix** of length
      ``L = min(max(c[r], 0), W)`` (DRAFT_EXTEND: ``c[r] = seq[r]``, so ``seq == 0`` writes
      no page row): ``page_table_1[k][row, :L] = req_to_token[req_pool_indices[r], :L]``
      and, for ``ps > 1``, ``real_page_table[k][row, q] = floor(req_to_token[req, q * ps] /
      ps)`` for ``q < ceil(L / ps)``.
    * ``paged_mqa_ctx_lens_2d[k][r, j] = seq[r] + next_n`` for ``j < next_n``
      (TARGET_VERIFY only).

    Nothing else is written: columns past a row's live prefix, rows past ``n`` and
    elements past the written lengths keep their values (upstream writes whole
    128-column blocks; this op writes exactly the live prefix and never past ``W``).
    ``bs == 0`` writes only ``cu_seqlens_k[k][0]`` and ``dsa_cu_seqlens_k[k][0]``;
    DRAFT_EXTEND with ``total_len == 0`` writes ``cache_seqlens``, ``cu_seqlens_k`` and
    ``dsa_cu_seqlens_k[k][0]``. At ``page_size == 1`` the token table is the real table:
    pass it as ``page_table_1``; ``real_page_table`` is then ignored (SGLang passes one
    tensor as both), and given without ``page_table_1`` it raises.

    Args:
        seq_lens: ``[>= bs]`` int32 or int64 committed KV lengths.
        req_pool_indices: ``[>= bs]`` int32 or int64 rows of ``req_to_token``.
        req_to_token: ``[pool, >= max_seqlen_k]`` int32 token slots (row stride
            ``stride(0)``, inner stride 1).
        cache_seqlens, cu_seqlens_k: lists of K int32 ``[>= bs]`` / ``[>= bs + 1]``.
        dsa_cache_seqlens, dsa_cu_seqlens_k: lists of K int32 ``[>= n]`` / ``[>= n + 1]``.
        forward_mode: 0 (DECODE), 1 (TARGET_VERIFY), 2 (DRAFT_EXTEND);
            ``sgl_meta.FORWARD_MODE_*``.
        bs: requests, ``>= 0``.
        max_seqlen_k: the column bound ``W`` (upstream's ``max_len`` in decode), ``<=
            req_to_token.size(1)``.
        dsa_index_topk: DSA indexer top-k (``>= 0``).
        page_size: physical page size (``>= 1``).
        seqlens_expanded: K int32 ``[>= n]``; required in modes 1 and 2, absent in DECODE.
        page_table_1: K int32 ``[>= n, >= W]`` token tables, or None (not written).
        real_page_table: K int32 ``[>= n, >= ceil(W / page_size)]`` page tables, or None.
        paged_mqa_ctx_lens_2d: K int32 ``[>= bs, >= next_n]`` (TARGET_VERIFY only), or None.
        extend_seq_lens: ``[>= bs]`` int32/int64 tokens each request extends by; required
            in DRAFT_EXTEND (``[>= 1]`` with ``static_extend_len``).
        next_n: draft tokens per request (TARGET_VERIFY, ``>= 1``).
        total_len: expanded rows in DRAFT_EXTEND (``>= 0``).
        static_extend_len: DRAFT_EXTEND: every request extends by ``extend_seq_lens[0]``.

    Lengths: ``seq_lens[r]`` and ``cache_seqlens[r]`` (``seq_lens[r] + next_n`` in
    TARGET_VERIFY) must lie in ``[0, 2**31 - 1]``, and so must the running sums written to
    ``cu_seqlens_k`` and ``dsa_cu_seqlens_k``; otherwise RuntimeError on CPU (nothing
    written), a named device assert on CUDA. Draft-extend's clamp at 0 for a padded
    request shorter than its extend length is upstream's behaviour, not an error.

    Raises:
        RuntimeError: wrong dtype / device / rank / size / inner stride, lists of unequal
            length, a list the mode does not allow, overlapping outputs (also two sets
            sharing a tensor), a bad ``forward_mode``, negative scalars, scalars outside
            int32, ``page_size < 1``, ``max_seqlen_k > req_to_token.size(1)`` (the message
            names the op and the argument; checks run before anything is written). On
            CPU, a ``req_pool_indices[r]`` (``r < bs``, when a page table is written)
            outside ``req_to_token`` or a negative extend length raises before writing; on
            CUDA it trips a device-side assert naming the op.
        TypeError: None for a required tensor, or inside a list (named, e.g.
            ``page_table_1[2]``).

    Never allocates, never synchronises, reads no device value on the host: capturable
    in a CUDA graph and replayable with new inputs. Up to 16 sets per launch; larger K
    takes ceil(K / 16) launches.
    """,
)

# --- Drop-ins: SGLang 0.5.23's exact signatures (K = 1) ------------------------------

_UPSTREAM = "sglang.kernels.ops.attention.dsa.metadata"
_ONE_SET = {n: (n,) for n in ("cache_seqlens", "cu_seqlens_k", "seqlens_expanded", "dsa_cache_seqlens",
                              "dsa_cu_seqlens_k", "page_table_1", "real_page_table", "paged_mqa_ctx_lens_2d")}

_COMMON = "cache_seqlens, cu_seqlens_k, page_table_1"
_SETS = "dsa_cache_seqlens, dsa_cu_seqlens_k, real_page_table, bs"


def _draft_extend_asserts(bs, total_len, max_total_len, max_extend_len):
    """Upstream's host-side contract of the draft-extend generator (it asserts), on ints."""
    fn = "fused_dsa_draft_extend_metadata"
    if not type(bs) is type(total_len) is type(max_total_len) is type(max_extend_len) is int:  # per replay: ints pass at once
        bs, total_len, max_total_len, max_extend_len = (
            _errors.integer(fn, n, v) for n, v in (("bs", bs), ("total_len", total_len),
                                                   ("max_total_len", max_total_len), ("max_extend_len", max_extend_len)))
    if bs > 0 and total_len > 0:
        name = f"sgl_meta.{fn}"
        if total_len > max_total_len:
            raise ValueError(f"{name}: total_len = {total_len} must be <= max_total_len = {max_total_len}")
        if max_extend_len < 1:
            raise ValueError(f"{name}: max_extend_len must be >= 1, got {max_extend_len}")
        if total_len > bs * max_extend_len:
            raise ValueError(f"{name}: total_len = {total_len} must be <= bs * max_extend_len = {bs * max_extend_len}")


def _generator(name: str, mode: int, params: str, doc: str, **mapping):
    """The drop-in for upstream's generator ``name``: one destination set, ``mode``."""
    renamed = {"page_size": "physical_page_size", **mapping.pop("renamed", {})}
    return _op.adapt(fused_dsa_metadata, name, params=params, upstream=name, module=_UPSTREAM, sets=_ONE_SET,
                     renamed=renamed, fixed={"forward_mode": mode}, doc=doc, **mapping)


fused_dsa_decode_metadata = _generator(
    "fused_dsa_decode_metadata",
    0,
    f"seq_lens, req_pool_indices, req_to_token, {_COMMON}, {_SETS}, max_len, dsa_index_topk, physical_page_size",
    renamed={"max_seqlen_k": "max_len"},
    doc="""Drop-in for ``sglang.kernels.ops.attention.dsa.metadata.fused_dsa_decode_metadata``.

    Same arguments in the same order; :func:`fused_dsa_metadata` with DECODE, K = 1,
    ``max_seqlen_k = max_len``. Rows are written over their live prefix only (upstream
    writes whole 128-column blocks), CPU tensors work too, and ``real_page_table`` may
    be None at ``physical_page_size > 1`` (upstream asserts); at page size 1 it is
    ignored when ``page_table_1`` is given (SGLang passes one tensor as both), and given
    without ``page_table_1`` it raises.
    """,
)

fused_dsa_target_verify_metadata = _generator(
    "fused_dsa_target_verify_metadata",
    1,
    f"seq_lens, req_pool_indices, req_to_token, {_COMMON}, seqlens_expanded, {_SETS}, max_seqlen_k, "
    "dsa_index_topk, physical_page_size, next_n, paged_mqa_ctx_lens_2d=None",
    doc="""Drop-in for ``sglang.kernels.ops.attention.dsa.metadata.fused_dsa_target_verify_metadata``.

    Same arguments in the same order; :func:`fused_dsa_metadata` with TARGET_VERIFY,
    K = 1: every one of a request's ``next_n`` rows gets the page row up to ``seq +
    next_n``. ``paged_mqa_ctx_lens_2d`` needs ``[>= bs, >= next_n]`` (upstream: exactly
    ``[bs, next_n]``). Live prefixes only, as :func:`fused_dsa_decode_metadata`.
    """,
)

fused_dsa_draft_extend_metadata = _generator(
    "fused_dsa_draft_extend_metadata",
    2,
    f"seq_lens, extend_seq_lens, req_pool_indices, req_to_token, {_COMMON}, seqlens_expanded, {_SETS}, "
    "total_len, max_seqlen_k, dsa_index_topk, physical_page_size, max_extend_len, max_total_len, "
    "static_extend_len=False",
    check=_draft_extend_asserts,
    doc="""Drop-in for ``sglang.kernels.ops.attention.dsa.metadata.fused_dsa_draft_extend_metadata``.

    Same arguments in the same order; :func:`fused_dsa_metadata` with DRAFT_EXTEND,
    K = 1. ``max_extend_len`` / ``max_total_len`` only size upstream's Triton blocks;
    their host-side contract is kept (ValueError where upstream asserts: ``total_len >
    max_total_len``, ``max_extend_len < 1``, ``total_len > bs * max_extend_len``, when
    ``bs > 0`` and ``total_len > 0``). Unlike upstream, a request whose device extend
    length exceeds ``max_extend_len`` still gets all its page rows.
    """,
)

__all__ = _op.exports(__name__)
