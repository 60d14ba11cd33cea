"""FlashInfer's wrappers with the planner left out, for building SGLang's FlashInfer backends.

SGLang's FlashInfer backend builds FlashInfer wrappers and, after it has written
a replay's ``kv_indptr`` / ``kv_indices``, calls their planner (``begin_forward``
/ ``plan``, or SGLang's ``fast_decode_plan`` / ``fast_prefill_plan`` installed at
capture). The planner is FlashInfer's (host work and copies of the index arrays
into the wrapper's own buffers) and is left out of both sides: :class:`PlannerLeftOut`
keeps the buffers SGLang hands a CUDA-graph wrapper and records what the last
planner call received, which is what the attention kernels would read.
The FlashInfer MLA backend's paged wrapper (:class:`MlaPlannerLeftOut`) and its
fast plans (``fast_mla_decode_plan`` / ``fast_mla_prefill_plan``) likewise.
"""

from __future__ import annotations

from typing import Any

NAMES = ("BatchDecodeWithPagedKVCacheWrapper", "BatchPrefillWithPagedKVCacheWrapper",
         "BatchPrefillWithRaggedKVCacheWrapper")


class PlannerLeftOut:
    """A FlashInfer wrapper as SGLang's replay path uses it: its buffers, and the
    planner's last positional arguments (``planned``) in place of a plan."""

    def __init__(self, workspace=None, layout: str = "NHD", *, use_cuda_graph: bool = False,
                 paged_kv_indptr_buffer=None, paged_kv_indices_buffer=None, paged_kv_last_page_len_buffer=None,
                 qo_indptr_buf=None, paged_kv_indptr_buf=None, paged_kv_indices_buf=None,
                 paged_kv_last_page_len_buf=None, custom_mask_buf=None, mask_indptr_buf=None, **_options):
        self.is_cuda_graph_enabled = use_cuda_graph
        pick = lambda a, b: a if b is None else b  # noqa: E731 (decode and prefill name them differently)
        self._paged_kv_indptr_buf = pick(paged_kv_indptr_buffer, paged_kv_indptr_buf)
        self._paged_kv_indices_buf = pick(paged_kv_indices_buffer, paged_kv_indices_buf)
        self._paged_kv_last_page_len_buf = pick(paged_kv_last_page_len_buffer, paged_kv_last_page_len_buf)
        self._qo_indptr_buf, self._custom_mask_buf, self._mask_indptr_buf = qo_indptr_buf, custom_mask_buf, mask_indptr_buf
        self.planned: tuple = ()

    def begin_forward(self, *args, **_kwargs) -> None:
        self.planned = args

    plan = begin_forward

    def end_forward(self) -> None:
        pass


def _fast_plan(wrapper: PlannerLeftOut, *args, **_kwargs) -> None:
    wrapper.planned = args


def install() -> Any:
    """Bind the stand-ins into SGLang's FlashInfer backend module (and return it)."""
    from sglang.srt.layers.attention import flashinfer_backend

    for name in NAMES:
        setattr(flashinfer_backend, name, PlannerLeftOut)
    flashinfer_backend.fast_decode_plan = _fast_plan
    flashinfer_backend.fast_prefill_plan = _fast_plan
    return flashinfer_backend


class MlaPlannerLeftOut:
    """FlashInfer's ``BatchMLAPagedAttentionWrapper`` as SGLang's FlashInfer MLA backend
    uses it: the buffers it is given, and the planner's last positional arguments
    (``planned``: qo_indptr, kv_indptr, kv_indices, kv_len_arr, ...) in place of a plan."""

    def __init__(self, workspace=None, use_cuda_graph: bool = False, qo_indptr=None, kv_indptr=None,
                 kv_indices=None, kv_len_arr=None, **_options):
        self.is_cuda_graph_enabled = use_cuda_graph
        self._qo_indptr_buf, self._kv_indptr_buf = qo_indptr, kv_indptr
        self._kv_indices_buf, self._kv_len_arr_buf = kv_indices, kv_len_arr
        self.planned: tuple = ()

    def plan(self, *args, **_kwargs) -> None:
        self.planned = args


def install_mla() -> Any:
    """Bind the stand-ins into SGLang's FlashInfer MLA backend module (and return it)."""
    from sglang.srt.layers.attention import flashinfer_mla_backend

    flashinfer_mla_backend.BatchMLAPagedAttentionWrapper = MlaPlannerLeftOut
    flashinfer_mla_backend.BatchPrefillWithRaggedKVCacheWrapper = PlannerLeftOut
    flashinfer_mla_backend.fast_mla_decode_plan = _fast_plan
    flashinfer_mla_backend.fast_mla_prefill_plan = _fast_plan
    return flashinfer_mla_backend
