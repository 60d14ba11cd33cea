"""EAGLE's verify and draft-extend CSR arguments with ``kv_indptr`` and ``kv_indices`` in one launch.

SGLang 0.5.23's FlashInfer backends (MHA and MLA) take a speculative batch's
paged-prefill arguments from ``spec_info.generate_attn_arg_prefill`` on every
verify and draft-extend replay prep (``FlashInferIndicesUpdaterPrefill.call_begin_forward``
and its MLA twin), then hand them to FlashInfer's planner. 0.5.23 builds them
with ``qo_indptr = torch.arange``, ``cum_kv_seq_len = torch.zeros``,
``cum_kv_seq_len[1:] = torch.cumsum(lens)`` (a cumsum and a copy) and
``KVIndexTranslator.pack_read_stream`` (one gather); verify first widens the
lengths by the draft tokens (an add). These AROUND hooks keep verify's add
and write ``qo_indptr``, ``cum_kv_seq_len`` and ``kv_indices`` with one
:func:`sgl_meta.build_kv_indices` (``write_indptr=True``, ``qo_indptr``) over
the source ``pack_read_stream`` would read: 6 launches -> 2 (verify), 5 -> 1
(draft extend).

Covered: a non-empty batch with query tokens (at least one per request), FULL
ids (no sliding-window source), a source
:func:`sgl_meta.sglang.kv_indices.translator_source` takes, one length per
request, a host length sum (draft extend: 0.5.23 sizes ``kv_indices`` from the
device sum otherwise), and in verify a custom mask already large enough (0.5.23
grows it otherwise). Everything else, and any keyword 0.5.23's method does not
take, runs SGLang's method. The returned tensors are new, as 0.5.23's are.

Imports ``sglang`` only through :mod:`sgl_meta.sglang.kv_indices` (at call time).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from ..kv_indices import build_kv_indices
from .kv_indices import FULL_KIND, SglangDefault, _full_kind, translator_source

_SPEC = "sglang.srt.speculative.eagle_info"
VERIFY_TARGET = f"{_SPEC}.EagleVerifyInput.generate_attn_arg_prefill"
DRAFT_EXTEND_TARGET = f"{_SPEC}.EagleDraftExtendInput.generate_attn_arg_prefill"


def _csr(translator, plan, req_pool_indices: torch.Tensor, lens: torch.Tensor, delta: int, total: int,
         tokens_per_req: int):
    """kv_indices, cum_kv_seq_len (over ``lens + delta``) and qo_indptr as 0.5.23
    returns them, or None (nothing launched) where the source is not one ours takes."""
    bs = req_pool_indices.numel()
    source = translator_source(translator, plan, bs, req_pool_indices) if bs > 0 and tokens_per_req > 0 else None
    if source is None:  # (an empty batch too: 0.5.23's cum_kv_seq_len is zeros, ours would be unwritten)
        return None
    if delta:
        lens = lens + delta
    device = req_pool_indices.device
    # Every element of both row-start tensors is written ([0] too: bs > 0).
    qo_indptr = torch.empty(bs + 1, dtype=torch.int32, device=device)
    cum_kv_seq_len = torch.empty(bs + 1, dtype=torch.int32, device=device)
    kv_indices = torch.empty(total, dtype=torch.int32, device=device)
    build_kv_indices(**source, seq_lens=lens, kv_indptr=cum_kv_seq_len, kv_indices=kv_indices, write_indptr=True,
                     qo_indptr=qo_indptr, q_stride=tokens_per_req)
    return kv_indices, cum_kv_seq_len, qo_indptr


def _covered(req_pool_indices, paged_kernel_lens, kind, extra: dict) -> bool:
    return (not extra and kind == _full_kind() and paged_kernel_lens.dim() == 1
            and paged_kernel_lens.numel() == req_pool_indices.numel())


def verify_attn_arg_prefill(original: Callable, self, *, req_pool_indices, paged_kernel_lens, paged_kernel_lens_sum,
                            translator, plan, kind=FULL_KIND, **extra) -> Any:
    """AROUND ``EagleVerifyInput.generate_attn_arg_prefill``: the lengths widened
    by the draft tokens, then ``cum_kv_seq_len`` and ``kv_indices`` in one launch."""
    if isinstance(kind, SglangDefault):
        kind = kind.resolve()

    def theirs() -> Any:
        return original(self, req_pool_indices=req_pool_indices, paged_kernel_lens=paged_kernel_lens,
                        paged_kernel_lens_sum=paged_kernel_lens_sum, translator=translator, plan=plan, kind=kind,
                        **extra)

    n, bs = self.draft_token_num, req_pool_indices.numel()
    mask = self.custom_mask
    if (not _covered(req_pool_indices, paged_kernel_lens, kind, extra) or not isinstance(paged_kernel_lens_sum, int)
            or mask is None or mask.numel() < paged_kernel_lens_sum * n + n * n * bs):
        return theirs()
    out = _csr(translator, plan, req_pool_indices, paged_kernel_lens, n, paged_kernel_lens_sum + n * bs, n)
    return theirs() if out is None else (*out, self.custom_mask)


def draft_extend_attn_arg_prefill(original: Callable, self, *, req_pool_indices, paged_kernel_lens,
                                  paged_kernel_lens_sum, translator, plan, kind=FULL_KIND, **extra) -> Any:
    """AROUND ``EagleDraftExtendInput.generate_attn_arg_prefill``: ``cum_kv_seq_len``
    and ``kv_indices`` in one launch."""
    if isinstance(kind, SglangDefault):
        kind = kind.resolve()

    def theirs() -> Any:
        return original(self, req_pool_indices=req_pool_indices, paged_kernel_lens=paged_kernel_lens,
                        paged_kernel_lens_sum=paged_kernel_lens_sum, translator=translator, plan=plan, kind=kind,
                        **extra)

    if (not _covered(req_pool_indices, paged_kernel_lens, kind, extra) or not isinstance(paged_kernel_lens_sum, int)
            or self.num_correct_drafts.numel() != req_pool_indices.numel()):
        return theirs()
    out = _csr(translator, plan, req_pool_indices, paged_kernel_lens, 0, paged_kernel_lens_sum,
               self.num_tokens_per_req)
    return theirs() if out is None else (*out, None)
