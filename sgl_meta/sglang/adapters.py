"""SGLang 0.5.23's metadata entry points, served by sgl-meta's ops.

Each function has the exact signature (names, kinds, order, defaults) of the
SGLang function it replaces, and 0.5.23's semantics: SGLang calls it in place
of its own kernel (``sgl_meta.sglang.hooks.HOOKS`` names the targets), so it
accepts everything SGLang's function accepts. The DSA call sites catch any
exception and fall back to eager copies with a printed warning, so an error of
ours would silently cost performance: where 0.5.23 tolerates an input that our
stricter op rejects (a non-contiguous source, a larger FlashMLA buffer, an
unused argument), the adapter reshapes the call instead of failing.

Differences that remain, by design (docs/sglang.md): ``slot // page_size`` is
floor division here (0.5.23's Triton ``//`` truncates toward zero, which only
differs for negative slots), every row is capped at its table's width (0.5.23
can write past a row), and element 0 of ``cu_seqlens_k`` / ``cu_seqlens_q`` is
written as 0 (0.5.23 leaves it; SGLang's buffers hold 0 there).
"""

from __future__ import annotations

from typing import Optional

import torch

from .._op import with_signature
from ..dsa_metadata_copy import FORWARD_MODE_DECODE, MULTI_PARAMS
from ..dsa_metadata_copy import fused_metadata_copy_cuda as _copy
from ..dsa_metadata_copy import fused_metadata_copy_multi_cuda as _copy_multi
from ..trtllm_mha_metadata import Q_MODE_NONE
from ..trtllm_mha_metadata import update_trtllm_mha_graph_metadata as _update


def update_trtllm_mha_graph_metadata(
    *,
    req_pool_indices,
    seq_lens,
    req_to_token,
    cache_seqlens,
    cu_seqlens_k,
    page_table,
    bs: int,
    seqlen_offset: int,
    max_seq_pages: int,
    page_size: int,
    swa_mapping=None,
    swa_page_table=None,
    out_cache_loc=None,
    swa_out_cache_loc=None,
    cu_seqlens_q=None,
    qlens=None,
    q_stride: int = 0,
    q_mode: int = Q_MODE_NONE,
    skip_page_table: bool = False,
):
    """``sglang.kernels.ops.attention.trtllm_mha_graph_metadata.update_trtllm_mha_graph_metadata``.

    As :func:`sgl_meta.update_trtllm_mha_graph_metadata` with
    ``live_pages_only=True``: 0.5.23 rewrites each page-table row's live prefix
    only (``min(ceil(cache_seqlens[i] / page_size), max_seq_pages)`` pages).
    With ``skip_page_table`` 0.5.23 ignores ``page_table`` and
    ``swa_page_table`` (the unified pool refreshes them out of the graph) but
    still translates ``swa_out_cache_loc`` when it is given.
    """
    if skip_page_table:
        page_table = swa_page_table = None
        if swa_out_cache_loc is not None:
            # Seqlens plus the SWA write locations, no page column: a zero-width
            # table and max_seq_pages = 0 (0.5.23's own call sites never do this).
            skip_page_table, page_table, max_seq_pages = False, cache_seqlens.new_empty((bs, 0)), 0
    _update(
        req_pool_indices=req_pool_indices,
        seq_lens=seq_lens,
        req_to_token=req_to_token,
        cache_seqlens=cache_seqlens,
        cu_seqlens_k=cu_seqlens_k,
        page_table=page_table,
        bs=bs,
        seqlen_offset=seqlen_offset,
        max_seq_pages=max_seq_pages,
        page_size=page_size,
        swa_mapping=swa_mapping,
        swa_page_table=swa_page_table,
        out_cache_loc=out_cache_loc,
        swa_out_cache_loc=swa_out_cache_loc,
        cu_seqlens_q=cu_seqlens_q,
        qlens=qlens,
        q_stride=q_stride,
        q_mode=q_mode,
        skip_page_table=skip_page_table,
        live_pages_only=True,
    )


def _rows(t: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """A source as 0.5.23's kernel reads it (it makes sources contiguous): our
    op takes any row stride but needs unit element stride."""
    if t is None or t.is_contiguous() or (t.dim() == 2 and t.stride(1) == 1):
        return t
    return t.contiguous()


def _fit(dst: Optional[torch.Tensor], src: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """0.5.23 copies ``src.numel()`` FlashMLA metadata elements into a
    destination that may be larger; ours wants equal sizes: the leading part."""
    if dst is None or src is None or dst.numel() == src.numel() or not dst.is_contiguous():
        return dst
    return dst.view(-1)[: src.numel()]


def _copy_body(args: dict) -> None:
    """``sglang.kernels.ops.attention.dsa.fused_metadata_copy.fused_metadata_copy_cuda``.

    As :func:`sgl_meta.fused_metadata_copy_cuda`, with 0.5.23's tolerance:
    DECODE ignores the ``seqlens_expanded`` pair (SGLang passes the
    ``cache_seqlens`` buffers there), the real page table is copied iff its
    source is given and the FlashMLA pair iff ``flashmla_num_splits_src`` is,
    non-contiguous sources are read as their contiguous copies, and a FlashMLA
    metadata destination larger than its source receives the source's size.
    """
    args = dict(args)
    if args["forward_mode"] == FORWARD_MODE_DECODE:
        args.update(seqlens_expanded_src=None, seqlens_expanded_dst=None)
    if args["real_page_table_src"] is None:
        args.update(real_page_table_dst=None)
    if args["flashmla_num_splits_src"] is None:
        args.update(flashmla_num_splits_dst=None, flashmla_metadata_src=None, flashmla_metadata_dst=None)
    _call(_copy, args)


def _copy_multi_body(args: dict) -> None:
    """``sglang.kernels.ops.attention.dsa.fused_metadata_copy.fused_metadata_copy_multi_cuda``.

    As :func:`sgl_meta.fused_metadata_copy_multi_cuda` (DECODE, three
    destination sets), with 0.5.23's tolerance: the real page table is copied
    iff its source and ``real_page_table_dst0`` are given, the FlashMLA pair iff
    ``flashmla_num_splits_src`` is, non-contiguous sources are read as their
    contiguous copies, and larger FlashMLA metadata destinations receive the
    source's size.
    """
    args = dict(args)
    if args["real_page_table_src"] is None or args["real_page_table_dst0"] is None:
        args.update(dict.fromkeys(["real_page_table_src", *_each_set("real_page_table_dst")]))
    if args["flashmla_num_splits_src"] is None:
        args.update(dict.fromkeys([
            "flashmla_num_splits_src", "flashmla_metadata_src",
            *_each_set("flashmla_num_splits_dst", "flashmla_metadata_dst"),
        ]))  # fmt: skip
    _call(_copy_multi, args)


# The exact signatures of SGLang's two copy functions (the op's own order; the
# numbered three-set form), each called with its arguments by name.
fused_metadata_copy_cuda = with_signature(
    "fused_metadata_copy_cuda", ", ".join(a.name for a in _copy.op.args), _copy_body)
fused_metadata_copy_cuda.__doc__ = _copy_body.__doc__
fused_metadata_copy_multi_cuda = with_signature("fused_metadata_copy_multi_cuda", MULTI_PARAMS, _copy_multi_body)
fused_metadata_copy_multi_cuda.__doc__ = _copy_multi_body.__doc__


def _each_set(*stems: str) -> list[str]:
    """The multi copy's parameter for each of its three destination sets."""
    return [f"{stem}{k}" for stem in stems for k in range(3)]


def _call(op, args: dict) -> None:
    """``op`` (a DSA copy, positional) on ``args``; where our op rejects what
    0.5.23 tolerates, once more with the sources as 0.5.23's kernel reads them
    (contiguous) and each FlashMLA metadata destination cut to the source's size.
    Checks run before any write, so a rejected call changed nothing, and the
    success path pays nothing. Raises the op's own error if that does not help.
    """
    try:
        op(*args.values())
        return
    except RuntimeError:
        retry = {k: _rows(v) if k.endswith("_src") else v for k, v in args.items()}
        for k in args:
            if k.startswith("flashmla_metadata_dst"):
                retry[k] = _fit(args[k], retry["flashmla_metadata_src"])
        if all(retry[k] is args[k] for k in args):
            raise
    op(*retry.values())
