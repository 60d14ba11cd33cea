"""DSA (DeepSeek sparse attention) backend: fused metadata copies into CUDA graphs.

The ops ``fused_metadata_copy`` (one destination set) and
``fused_metadata_copy_multi`` (K sets) as keyword functions, plus drop-ins
with SGLang 0.5.23's exact positional signatures (``fused_metadata_copy_cuda``,
``fused_metadata_copy_multi_cuda``). The arguments are the ops' schemas
(``csrc/torch_bindings.cpp``), described once in :mod:`sgl_meta._op`.
"""

from __future__ import annotations

from . import _op

FORWARD_MODE_DECODE = 0
"""DSA copy mode: ``n = bs`` rows of metadata, ``page_table_1[:bs, :max_len]``."""
FORWARD_MODE_TARGET_VERIFY = 1
"""DSA copy mode: ``n = seqlens_expanded_size``, ``page_table_1[:rows, :max_seqlen_k]``."""
FORWARD_MODE_DRAFT_EXTEND = 2
"""DSA copy mode: copies exactly like ``FORWARD_MODE_TARGET_VERIFY``."""

_UPSTREAM = "sglang.kernels.ops.attention.dsa.fused_metadata_copy"
_OPTIONAL_DESTS = ("seqlens_expanded_dst", "real_page_table_dst", "flashmla_num_splits_dst", "flashmla_metadata_dst")

fused_metadata_copy = _op.define(
    "fused_metadata_copy",
    family="dsa_metadata_copy",
    upstream=f"{_UPSTREAM}.fused_metadata_copy_cuda",
    defaults={"forward_mode": FORWARD_MODE_DECODE},
    doc="""Copy one step's DSA attention metadata into one CUDA graph's static buffers, in one launch.

    Mirrors SGLang 0.5.23's ``fused_metadata_copy_cuda``
    (``sglang/kernels/ops/attention/dsa/fused_metadata_copy.py``, JIT CUDA; DSA backend,
    ``init_forward_metadata_replay_cuda_graph_from_precomputed``), which replaced the
    6-9 ``.copy_()`` calls of :func:`sgl_meta.reference.fused_metadata_copy`.

    Writes (``n = bs`` in DECODE, ``seqlens_expanded_size`` otherwise;
    ``rows = bs`` in DECODE, ``page_indices_src.size(0)`` otherwise; ``cols =
    max_len`` in DECODE, ``max_seqlen_k`` otherwise):

    * ``cache_seqlens_dst[:bs] = cache_seqlens_src[:bs]``
    * ``cu_seqlens_k_dst[1:bs+1] = cu_seqlens_k_src[1:bs+1]`` (element 0 untouched)
    * ``page_table_1_dst[:rows, :cols] = page_indices_src[:rows, :cols]``
    * ``seqlens_expanded_dst[:S] = seqlens_expanded_src[:S]``, ``S =
      seqlens_expanded_size`` (TARGET_VERIFY / DRAFT_EXTEND only; ignored in DECODE)
    * ``dsa_cache_seqlens_dst[:n] = dsa_cache_seqlens_src[:n]``
    * ``dsa_cu_seqlens_k_dst[1:n+1] = dsa_cu_seqlens_k_src[1:n+1]`` (element 0 untouched)
    * ``real_page_table_dst[:rows, :C] = real_page_table_src[:rows, :C]``, ``C =
      real_page_table_src.size(1)`` (optional pair)
    * ``flashmla_num_splits_dst[:n+1] = flashmla_num_splits_src[:n+1]`` and all of
      ``flashmla_metadata_dst = flashmla_metadata_src`` element for element (optional;
      the four FlashMLA tensors come together)

    Nothing else is written: padding rows/columns and element 0 of the cumulative
    sums keep their values. ``bs == 0`` is a no-op. All tensors are int32 on one
    device; 2-D tensors are addressed by their own ``stride(0)`` (inner stride 1,
    nothing is made contiguous); the FlashMLA metadata must be contiguous, any
    shape, same numel on both sides. Destinations must not overlap each other.

    Args:
        cache_seqlens_src, cache_seqlens_dst: ``[>= bs]`` int32 KV lengths.
        cu_seqlens_k_src, cu_seqlens_k_dst: ``[>= bs + 1]`` int32 cumulative KV lengths.
        page_indices_src: ``[>= rows, >= cols]`` int32 token-level page table (DSA
            ``page_table_1``, e.g. top-k 2048 wide); ``page_table_1_dst`` the same
            bounds.
        dsa_cache_seqlens_src, dsa_cache_seqlens_dst: ``[>= n]`` int32.
        dsa_cu_seqlens_k_src, dsa_cu_seqlens_k_dst: ``[>= n + 1]`` int32.
        bs: batch size (requests), ``>= 0``.
        forward_mode: ``FORWARD_MODE_DECODE`` (0), ``FORWARD_MODE_TARGET_VERIFY`` (1)
            or ``FORWARD_MODE_DRAFT_EXTEND`` (2).
        max_len: page-table columns in DECODE (required there, ``>= 0``).
        max_seqlen_k: page-table columns in modes 1 and 2 (required there).
        seqlens_expanded_size: ``S``, rows of per-token metadata in modes 1 and 2
            (required there). Scalars a mode does not use are ignored.
        seqlens_expanded_src, seqlens_expanded_dst: ``[>= S]`` int32; required in
            modes 1 and 2, accepted (as a pair) and ignored in DECODE.
        real_page_table_src: ``[>= rows, C]`` int32 page-level table (page size > 1);
            ``real_page_table_dst`` ``[>= rows, >= C]``. Optional pair.
        flashmla_num_splits_src, flashmla_num_splits_dst: ``[>= n + 1]`` int32.
        flashmla_metadata_src, flashmla_metadata_dst: int32 FlashMLA tile-scheduler
            metadata (e.g. ``[num_sm_parts, 8]``), contiguous, same numel.

    Raises:
        RuntimeError: wrong dtype, device, rank, size, inner stride, a negative used
            scalar, a bad ``forward_mode``, a missing ``seqlens_expanded`` pair in
            modes 1/2, an optional tensor without its partner, or 2-D destination
            rows that overlap (``stride(0)`` smaller than the columns copied) (the
            message names the op and the argument). All checks run before anything
            is written.
        TypeError: an argument of the wrong type (``None`` for a required tensor,
            a float or bool for an int, an int for a tensor), naming it.

    Distinct destinations must not share memory with each other or with a source
    (RuntimeError "... overlap in memory"). 1-D tensors must be contiguous (stride 1). Never allocates,
    never synchronises: safe inside CUDA-graph capture. Writes do not bump
    autograd version counters.
    """,
)

fused_metadata_copy_multi = _op.define(
    "fused_metadata_copy_multi",
    family="dsa_metadata_copy",
    upstream=f"{_UPSTREAM}.fused_metadata_copy_multi_cuda (K = 3, DECODE)",
    defaults={"forward_mode": FORWARD_MODE_DECODE, **dict.fromkeys(_OPTIONAL_DESTS)},
    doc="""Copy one source metadata set into K >= 1 CUDA graphs' buffers, in one launch.

    Generalises SGLang 0.5.23's ``fused_metadata_copy_multi_cuda`` (same file; K = 3, DECODE only:
    the multi-step speculative draft backends) to any K and any forward mode.
    Destination set ``i`` is element ``i`` of every ``*_dst`` list, and each set is
    written exactly as :func:`fused_metadata_copy` writes its one set. The required
    lists hold K tensors; an optional field's list holds K tensors when its source is
    given, else it is None (or empty). Up to 16 sets go in one launch; larger K
    takes ceil(K / 16) launches on the same stream (still no allocation or sync).

    Args: as :func:`fused_metadata_copy`, each destination a list of K tensors
    (a tuple works too); ``forward_mode`` defaults to DECODE.

    Raises:
        RuntimeError: as :func:`fused_metadata_copy`, plus lists of unequal length
            or an optional list whose presence does not match its source (the
            message names the list element, e.g. ``page_table_1_dst[2]``).
    """,
)

fused_metadata_copy_cuda = _op.positional(
    fused_metadata_copy,
    "fused_metadata_copy_cuda",
    upstream="fused_metadata_copy_cuda",
    module=_UPSTREAM,
    doc="""Drop-in for ``sglang.kernels.ops.attention.dsa.fused_metadata_copy.fused_metadata_copy_cuda`` (SGLang 0.5.23).

    Same arguments in the same order; behaves as :func:`fused_metadata_copy`. Unlike
    SGLang 0.5.23 it does not make the sources contiguous (rows go by ``stride(0)``) and
    it checks every size against ``bs`` / ``max_len`` / ``max_seqlen_k`` /
    ``seqlens_expanded_size`` (RuntimeError naming the argument).
    """,
)


_FIELDS = ("cache_seqlens", "cu_seqlens_k", "page_table_1", "dsa_cache_seqlens", "dsa_cu_seqlens_k",
           "real_page_table", "flashmla_num_splits", "flashmla_metadata")
_SOURCES = ", ".join(f"{f}_src" for f in _FIELDS).replace("page_table_1_src", "page_indices_src")
MULTI_PARAMS = (f"{_SOURCES}, " + ", ".join(f"{f}_dst{k}" for k in range(3) for f in _FIELDS)
                + ", bs, max_len, seqlens_expanded_size")
"""The signature of SGLang 0.5.23's ``fused_metadata_copy_multi_cuda`` (sources, three
numbered destination sets, DECODE scalars)."""

fused_metadata_copy_multi_cuda = _op.adapt(
    fused_metadata_copy_multi,
    "fused_metadata_copy_multi_cuda",
    params=MULTI_PARAMS,
    upstream="fused_metadata_copy_multi_cuda",
    module=_UPSTREAM,
    sets={f"{f}_dst": tuple(f"{f}_dst{k}" for k in range(3)) for f in _FIELDS},
    fixed={"forward_mode": FORWARD_MODE_DECODE},
    doc="""Drop-in for ``sglang.kernels.ops.attention.dsa.fused_metadata_copy.fused_metadata_copy_multi_cuda`` (SGLang 0.5.23).

    Same arguments in the same order: one source set, three destination sets, DECODE
    (``seqlens_expanded_size`` is accepted and unused, as DECODE copies ``n = bs``).
    Calls :func:`fused_metadata_copy_multi` with K = 3.

    Raises:
        ValueError: an optional destination given for some of the three sets only.
        RuntimeError: as :func:`fused_metadata_copy_multi`.
    """,
)


__all__ = _op.exports(__name__, "FORWARD_MODE_DECODE", "FORWARD_MODE_TARGET_VERIFY", "FORWARD_MODE_DRAFT_EXTEND")
