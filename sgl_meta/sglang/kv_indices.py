"""SGLang 0.5.23's Triton attention backend: kv_indptr, kv_indices and the split counts in one launch.

Per replay preparation (and per eager decode) the backend runs
``TritonAttnBackend._fill_kv_indptr_and_indices``: ``kv_indptr[1:] =
torch.cumsum(seq_lens)`` (a cumsum and a copy), then
``KVIndexTranslator.pack_read_stream`` (one gather:
``create_flashinfer_kv_indices_triton`` or, on the unified pool without a
read table, ``build_kv_read_table_packed``); a decode replay then runs
``get_num_kv_splits_triton``. ``create_flashinfer_kv_indices_triton`` is a raw
``@triton.jit`` kernel launched with ``kernel[grid](...)``, which a function
hook cannot replace; these AROUND hooks take the backend methods that launch
it instead:

* :func:`fill_kv_indptr_and_indices`: one :func:`sgl_meta.build_kv_indices`
  (``write_indptr=True``) over the same source ``pack_read_stream`` would read
  (``KVIndexTranslator.read_source``: ``req_to_token`` verbatim, the plan's
  page table, or ``req_to_token`` through ``v2p``).
* :func:`apply_cuda_graph_metadata`: a plain decode replay (no DCP, split
  counts from ``get_num_kv_splits_triton``) becomes that one launch with the
  split counts in it. With a sliding window, ``update_sliding_window_buffer``
  (``torch.minimum``, a cumsum and its copy, a subtraction, the gather) and
  the window's split counts become a second one (``sliding_window=``; in
  target verify and draft extend, :func:`update_target_verify_buffers` and
  :func:`update_draft_extend_buffers`, the window's starts into
  ``window_kv_offsets`` instead of split counts, ``kv_offsets=``), where
  ``pack_read_stream`` would take its gather branch
  (``create_flashinfer_kv_indices_triton``: ``req_to_token``, or the plan's
  translated table once built; a static SWA pool's full-to-SWA mapping in the
  gather) and SGLang translates nothing afterwards.

* :func:`multi_step_draft_init_forward_metadata_out_graph`: the EAGLE multi-step
  draft backend's replay prep (``generate_draft_decode_kv_indices`` for every
  step, then ``get_num_kv_splits_triton``) becomes one
  :func:`sgl_meta.build_draft_decode_kv_indices` with the split counts.

Anything else (DCP; a window whose read builds a translated table first, maps
translated ids, or is translated after its gather; static or deterministic splits; another backend class; a source
whose rows are not addressed by ``stride(0)``) runs SGLang's method.

:func:`pack_read_stream` wraps ``KVIndexTranslator.pack_read_stream`` itself, which
the FlashInfer backends call on every replay after their own ``kv_indptr``
cumsum: its gather branch (``create_flashinfer_kv_indices_triton``, one compiled
variant per entry page size, token mapping and 1-D/2-D grid) becomes
:func:`sgl_meta.create_flashinfer_kv_indices`, compiled ahead of time; the branch
that builds a translated read table (``build_kv_read_table_packed``) stays
SGLang's (that function has its own hook).

:func:`flashinfer_decode_call_begin_forward` wraps the FlashInfer decode
updater's ``call_begin_forward`` (every decode replay prep and eager decode):
its ``kv_indptr`` cumsum, the copy and ``pack_read_stream``'s gather become one
:func:`sgl_meta.build_kv_indices`, handed to SGLang's method as a prebuilt
``spec_info.kv_indptr`` / ``kv_indices`` pair (the branch SGLang takes for
speculative batches), so the rest of the method, FlashInfer's planner call
included, runs as SGLang wrote it. Covered: no prebuilt pair, no sliding window,
no window start, a CUDA-graph wrapper (its static index buffer), a source
:func:`_source` takes.

:func:`flashinfer_mla_decode_call_begin_forward` does the same for the FlashInfer
MLA backend's decode updater, whose method takes the same prebuilt-pair branch.
Covered: no prebuilt pair, a static pool without DCP (no read translation after
the gather: 0.5.23 skips it on that branch), a source :func:`_source` takes.

:func:`flashinfer_multi_step_draft_init` wraps the FlashInfer multi-step draft
backend's constructor: its step backends' decode updaters always receive the
draft kernel's prebuilt pair, so the hook above could only pass their calls
through; each calls SGLang's ``call_begin_forward`` directly instead (where ours
is the outermost wrapper), which keeps the draft loop's host time after its
``kv_indptr`` copy to the host, which the GPU waits on, as SGLang's.

Only :func:`_full_kind` and :class:`SglangDefault` import ``sglang`` (at call
time, inside SGLang).
"""

from __future__ import annotations

import functools
import types
from typing import Any, Callable, Optional

import torch

from ..kv_indices import build_draft_decode_kv_indices, build_kv_indices, create_flashinfer_kv_indices
from .hooks import dcp_enabled, hook_of

BACKEND = "sglang.srt.layers.attention.triton_backend"
FILL_TARGET = f"{BACKEND}.TritonAttnBackend._fill_kv_indptr_and_indices"
APPLY_TARGET = f"{BACKEND}.TritonAttnBackend._apply_cuda_graph_metadata"
MULTI_STEP_DRAFT_TARGET = f"{BACKEND}.TritonMultiStepDraftBackend.init_forward_metadata_out_graph"
PACK_TARGET = "sglang.srt.mem_cache.kv_index_translator.KVIndexTranslator.pack_read_stream"
FLASHINFER_DECODE_TARGET = (
    "sglang.srt.layers.attention.flashinfer_backend.FlashInferIndicesUpdaterDecode.call_begin_forward")
FLASHINFER_MLA_DECODE_TARGET = (
    "sglang.srt.layers.attention.flashinfer_mla_backend.FlashInferMLAIndicesUpdaterDecode.call_begin_forward")


class SglangDefault:
    """A parameter default that is one of SGLang's own objects (``module:Class.NAME``),
    resolved when first compared or used: it equals that object (the hook table's
    signature check compares defaults) without importing SGLang with this module."""

    def __init__(self, spec: str):
        self.spec = spec

    def resolve(self) -> Any:
        import importlib

        module, _, path = self.spec.partition(":")
        obj: Any = importlib.import_module(module)
        for name in path.split("."):
            obj = getattr(obj, name)
        return obj

    def __eq__(self, other) -> bool:  # (!= is derived from it)
        return other is self or self.resolve() == other

    def __hash__(self) -> int:
        return hash(self.spec)

    def __repr__(self) -> str:
        return self.spec


FULL_KIND = SglangDefault("sglang.srt.mem_cache.kv_loc_plan:IdSpaceKind.FULL")


def _full_kind():
    from sglang.srt.mem_cache.kv_loc_plan import IdSpaceKind

    return IdSpaceKind.FULL


def _source(backend, plan, bs: int, req_pool_indices: torch.Tensor) -> Optional[dict]:
    """The arguments of build_kv_indices that name what ``pack_read_stream``
    would gather for these rows (FULL ids, no window start, no mapping), or
    None where ours does not cover it."""
    return translator_source(getattr(backend, "kv_index_translator", None), plan, bs, req_pool_indices)


def translator_source(translator, plan, bs: int, req_pool_indices: torch.Tensor) -> Optional[dict]:
    """:func:`_source` for a ``KVIndexTranslator`` in hand."""
    if translator is None:
        return None
    src = translator.read_source(plan, req_pool_indices=req_pool_indices, bs=bs, kind=_full_kind())
    ids = src.ids
    if ids.dim() != 2 or ids.dtype != torch.int32 or ids.stride(0) != src.row_stride or ids.stride(1) != 1:
        return None
    args = dict(req_to_token=ids, req_pool_indices=src.row_ids[:bs], entry_page_size=src.entry_page_size)
    if src.v2p is not None:  # pack_read_stream's build_kv_read_table_packed path
        # which asserts first that the plan is the one over this reader's rows: SGLang's path says so
        is_read_by = getattr(plan, "is_read_by", None)
        if src.entry_page_size != 1 or is_read_by is None or not is_read_by(translator):
            return None
        args.update(v2p=src.v2p, page_size=translator.page_size)
    return args


def fill_kv_indptr_and_indices(original: Callable, self, plan, bs, seq_lens, req_pool_indices, kv_indices,
                               kv_indptr=None):
    """AROUND ``TritonAttnBackend._fill_kv_indptr_and_indices``: the cumsum, its
    copy and the gather in one launch; SGLang's method where not covered."""
    target = self.kv_indptr[: bs + 1] if kv_indptr is None else kv_indptr
    source = None
    if seq_lens.dim() == 1 and seq_lens.numel() == bs and target.numel() == bs + 1:
        source = _source(self, plan, bs, req_pool_indices)
    if source is None:
        return original(self, plan, bs, seq_lens, req_pool_indices, kv_indices, kv_indptr)
    build_kv_indices(**source, seq_lens=seq_lens, kv_indptr=target, kv_indices=kv_indices, write_indptr=True)
    return target


def _triton_splits(backend) -> bool:
    """``get_num_kv_splits`` takes its Triton branch (not the static fill, not
    the deterministic tiles) into the backend's graph buffer."""
    if getattr(backend, "enable_deterministic", True) or getattr(backend, "static_kv_splits", True):
        return False
    return (getattr(backend, "device_core_count", 0) > 0
            and getattr(backend, "cuda_graph_num_kv_splits", None) is not None)


def _one_launch_decode(self, forward_mode, spec_info) -> bool:
    """A decode replay whose whole metadata is kv_indptr, kv_indices and the
    Triton split counts (what _apply_cuda_graph_metadata writes then), and the
    same of the window with a sliding window."""
    if spec_info is not None or not forward_mode.is_decode_or_idle():
        return False
    if getattr(self, "dcp_size", 1) != 1:
        return False
    return _triton_splits(self)


@functools.lru_cache(maxsize=None)
def _swa_pool_classes() -> tuple:
    """SGLang's SWA pool classes, as ``update_sliding_window_buffer`` tests the pool."""
    from sglang.srt.mem_cache.base_swa_memory_pool import BaseSWAKVPool
    from sglang.srt.mem_cache.swa_memory_pool import SWAKVPool

    return BaseSWAKVPool, SWAKVPool


def _gather_branch(translator, plan, bs: int, req_pool_indices: torch.Tensor, kind, token_mapping):
    """The source ``KVIndexTranslator.pack_read_stream`` gathers from with
    ``create_flashinfer_kv_indices_triton`` (its branch without a translated
    read table to build first), where ours takes it: untranslated by ``v2p``,
    no mapping over translated ids, an int32 table with rows by ``stride(0)``;
    else None."""
    if translator._reads_translated(kind) and not plan.has_read_table(kind, reader=translator):
        return None  # build_kv_read_table_packed
    src = translator.read_source(plan, req_pool_indices=req_pool_indices, bs=bs, kind=kind)
    ids = src.ids
    if (src.v2p is not None or (token_mapping is not None and src.is_translated) or ids.dim() != 2
            or ids.dtype != torch.int32 or ids.stride(1) != 1 or ids.stride(0) != src.row_stride):
        return None
    return src


def _window_source(backend, plan, bs: int, req_pool_indices: torch.Tensor) -> Optional[dict]:
    """The arguments of build_kv_indices that name what 0.5.23's
    ``update_sliding_window_buffer`` gathers for these rows: ``pack_read_stream``
    of the translator's window kind with a static SWA pool's
    ``full_to_swa_index_mapping`` as its token mapping; None where that takes
    another branch (:func:`_gather_branch`'s, or a translate after the gather)."""
    translator = getattr(backend, "kv_index_translator", None)
    if translator is None:
        return None
    base_swa, swa = _swa_pool_classes()
    pool = getattr(backend, "token_to_kv_pool", None)
    mapping = pool.full_to_swa_index_mapping if isinstance(pool, swa) else None
    src = _gather_branch(translator, plan, bs, req_pool_indices, translator.window_kv_kind, mapping)
    if src is None:
        return None
    if not (src.is_translated or mapping is not None) and isinstance(pool, base_swa):
        return None  # SGLang translates the gathered ids afterwards
    return dict(req_to_token=src.ids, req_pool_indices=src.row_ids[:bs], entry_page_size=src.entry_page_size,
                token_mapping=mapping)


def _replay_sources(backend, plan, bs: int, req_pool_indices: torch.Tensor, source: Optional[dict]):
    """``(source, window_source)`` of a replay ours takes whole (the window's
    None without a sliding window), or None where SGLang's method must run."""
    if source is None:
        return None
    if _window_size(backend) <= 0:
        return source, None
    window_source = _window_source(backend, plan, bs, req_pool_indices)
    return None if window_source is None else (source, window_source)


def _window_size(backend) -> int:
    return getattr(backend, "sliding_window_size", None) or 0


def _fill_window(backend, source: dict, bs: int, seq_lens: torch.Tensor, **extra) -> torch.Tensor:
    """The window stream ``update_sliding_window_buffer`` writes into the graph's
    window buffers (``window_kv_indptr[:bs + 1]``, returned, and
    ``cuda_graph_window_kv_indices``), with ``extra`` (the split counts, the
    offsets, the extend lengths) in the same launch."""
    window_kv_indptr = backend.window_kv_indptr[: bs + 1]
    build_kv_indices(**source, seq_lens=seq_lens, kv_indptr=window_kv_indptr,
                     kv_indices=backend.cuda_graph_window_kv_indices, write_indptr=True,
                     sliding_window=_window_size(backend), **extra)
    return window_kv_indptr


def apply_cuda_graph_metadata(original: Callable, self, plan, bs, req_pool_indices, seq_lens, forward_mode,
                              spec_info) -> Any:
    """AROUND ``TritonAttnBackend._apply_cuda_graph_metadata``: a plain decode
    in one launch (kv_indptr, kv_indices, num_kv_splits, uneven flag); with a
    sliding window, the window's kv_indptr, kv_indices and split counts in a
    second."""
    if not _one_launch_decode(self, forward_mode, spec_info):
        return original(self, plan, bs, req_pool_indices, seq_lens, forward_mode, spec_info)
    req = req_pool_indices[:bs]
    sources = _replay_sources(self, plan, bs, req, _source(self, plan, bs, req))
    if sources is None:
        return original(self, plan, bs, req_pool_indices, seq_lens, forward_mode, spec_info)
    source, window_source = sources
    splits = dict(num_group=1, num_head=self.num_head, num_kv_head=self.num_kv_head,
                  max_kv_splits=self.max_kv_splits, device_core_count=self.device_core_count)
    build_kv_indices(**source, seq_lens=seq_lens[:bs], kv_indptr=self.kv_indptr[: bs + 1],
                     kv_indices=self.cuda_graph_kv_indices, write_indptr=True,
                     num_kv_splits=self.cuda_graph_num_kv_splits[:bs],
                     uneven_batch=getattr(self, "cuda_graph_uneven_batch", None), **splits)
    if window_source is not None:
        _fill_window(self, window_source, bs, seq_lens[:bs], num_kv_splits=self.cuda_graph_window_num_kv_splits[:bs],
                     **splits)
    return None


def _verify_buffers(self, bs: int, seq_lens: torch.Tensor) -> Optional[tuple]:
    """``qo_indptr``, ``kv_indptr``, ``mask_indptr`` and ``kv_indices`` of a target
    verify replay whose other metadata is only the custom mask and, with a
    sliding window, the window's (the prefill buffers allocated), or None."""
    if getattr(self, "skip_prefill", True):
        return None
    if not callable(getattr(self, "_target_verify_num_tokens_per_req", None)):
        return None
    buffers = [getattr(self, k, None) for k in ("qo_indptr", "kv_indptr", "mask_indptr", "cuda_graph_kv_indices")]
    if any(b is None for b in buffers) or seq_lens.dim() != 1 or seq_lens.numel() != bs:
        return None
    qo, kv, mask, kv_indices = buffers
    return qo[: bs + 1], kv[: bs + 1], mask[: bs + 1], kv_indices


def update_target_verify_buffers(original: Callable, self, plan, bs, seq_lens, spec_info, req_pool_indices) -> Any:
    """AROUND ``TritonAttnBackend._update_target_verify_buffers``: ``qo_indptr``
    (0.5.23: ``torch.arange`` and a copy), ``kv_indptr`` + ``kv_indices`` (a
    cumsum, a copy, the gather) and ``mask_indptr`` (an add, a mul, a cumsum and
    a copy) in one launch; with a sliding window, ``update_sliding_window_buffer``
    (the window's ``kv_indptr`` + ``kv_indices`` and ``window_kv_offsets``) in a
    second; the custom-mask copy and the returned tuple as 0.5.23's. A window
    :func:`_window_source` does not take, a source ours does not take, or a
    backend without the prefill buffers runs SGLang's method."""
    buffers = _verify_buffers(self, bs, seq_lens)
    sources = None if buffers is None else _replay_sources(self, plan, bs, req_pool_indices,
                                                         _source(self, plan, bs, req_pool_indices))
    if sources is None:
        return original(self, plan, bs, seq_lens, spec_info, req_pool_indices)
    source, window_source = sources
    qo_indptr, kv_indptr, mask_indptr, kv_indices = buffers
    build_kv_indices(**source, seq_lens=seq_lens, kv_indptr=kv_indptr, kv_indices=kv_indices, write_indptr=True,
                     qo_indptr=qo_indptr, q_stride=self._target_verify_num_tokens_per_req(spec_info),
                     mask_indptr=mask_indptr)
    window = (self.window_kv_indptr, None, None, None)
    if window_source is not None:
        offsets = self.cuda_graph_window_kv_offsets
        window = (_fill_window(self, window_source, bs, seq_lens, kv_offsets=offsets[:bs]),
                  self.cuda_graph_window_kv_indices, self.cuda_graph_window_num_kv_splits, offsets)
    custom_mask = self._verify_mask.buffer if getattr(self, "_verify_mask", None) is not None else None
    if spec_info is not None and spec_info.custom_mask is not None:
        custom_mask[: spec_info.custom_mask.shape[0]] = spec_info.custom_mask
    else:
        custom_mask = None
    return (qo_indptr, kv_indptr, custom_mask, mask_indptr, *window)


def update_draft_extend_buffers(original: Callable, self, plan, bs, seq_lens, forward_mode, spec_info,
                                req_pool_indices) -> Any:
    """AROUND ``TritonAttnBackend._update_draft_extend_buffers``: ``qo_indptr``
    (0.5.23: ``torch.arange`` and a copy), the prefix lengths
    (``clamp(seq_lens - extend_seq_lens, min=0)``: a subtraction, a clamp, a
    cast) and ``kv_indptr`` + ``kv_indices`` (a cumsum, a copy, the gather) in
    one launch; with a sliding window, ``update_sliding_window_buffer`` over
    the prefix lengths (the window's ``kv_indptr`` + ``kv_indices`` and
    ``window_kv_offsets``) in a second; returning 0.5.23's tuple. A window
    :func:`_window_source` does not take, a source ours does not take, or a
    backend without the prefill buffers runs SGLang's method."""
    qo = getattr(self, "qo_indptr", None)
    kv = getattr(self, "kv_indptr", None)
    kv_indices = getattr(self, "cuda_graph_kv_indices", None)
    sources = None
    if qo is not None and kv is not None and kv_indices is not None and seq_lens.dim() == 1 and seq_lens.numel() >= bs:
        sources = _replay_sources(self, plan, bs, req_pool_indices, _source(self, plan, bs, req_pool_indices))
    if sources is None:
        return original(self, plan, bs, seq_lens, forward_mode, spec_info, req_pool_indices)
    source, window_source = sources
    n = self.num_draft_tokens if forward_mode.is_draft_extend_v2() else self.speculative_num_steps + 1
    ext = getattr(spec_info, "extend_seq_lens_tensor", None)  # (None without spec_info: zeros upstream)
    qo_indptr, kv_indptr = qo[: bs + 1], kv[: bs + 1]
    extend = None if ext is None else ext[:bs]
    build_kv_indices(**source, seq_lens=seq_lens[:bs], extend_seq_lens=extend, kv_indptr=kv_indptr,
                     kv_indices=kv_indices, write_indptr=True, qo_indptr=qo_indptr, q_stride=n)
    if window_source is not None:
        _fill_window(self, window_source, bs, seq_lens[:bs], extend_seq_lens=extend,
                     kv_offsets=self.cuda_graph_window_kv_offsets[:bs])
    return qo_indptr, kv_indptr, n


def _draft_source(self, forward_batch, bs: int) -> Optional[tuple]:
    """``req_to_token`` and the request rows the draft kernel would read: a
    token-granular source without ``v2p`` (a static pool), rows by ``stride(0)``."""
    translator = getattr(self, "kv_index_translator", None)
    if translator is None:
        return None
    src = translator.read_source(forward_batch.kv_loc_plan, req_pool_indices=forward_batch.req_pool_indices, bs=bs)
    ids = src.ids
    if (src.v2p is not None or src.entry_page_size != 1 or ids.dim() != 2 or ids.dtype != torch.int32
            or ids.stride(0) != src.row_stride or ids.stride(1) != 1):
        return None
    return ids, src.row_ids[:bs]


def multi_step_draft_init_forward_metadata_out_graph(original: Callable, self, forward_batch,
                                                     in_capture: bool = False) -> None:
    """AROUND ``TritonMultiStepDraftBackend.init_forward_metadata_out_graph``: a
    replay's every-step kv_indices and kv_indptr and the last step backend's
    split counts in one launch (SGLang: the draft kernel, then
    ``get_num_kv_splits_triton``); SGLang's method at capture, with a sliding
    window (its rail and SWA refills), DCP, a translated source, or splits that
    are not the Triton branch's."""
    bs = getattr(forward_batch, "batch_size", None)
    steps = getattr(self, "attn_backends", None) or [None]
    first, last = steps[0], steps[-1]
    if (in_capture or not isinstance(bs, int) or last is None or getattr(self, "window_rail", True)
            or getattr(first, "use_sliding_window_kv_pool", True) or getattr(last, "dcp_size", 1) != 1
            or not _triton_splits(last)):
        return original(self, forward_batch, in_capture=in_capture)
    source = _draft_source(self, forward_batch, bs)
    if source is None:
        return original(self, forward_batch, in_capture=in_capture)
    req_to_token, rows = source
    window = self.draft_window_size
    build_draft_decode_kv_indices(
        req_to_token=req_to_token, req_pool_indices=rows, seq_lens=forward_batch.seq_lens,
        positions=forward_batch.positions, kv_indices=self.cuda_graph_kv_indices, kv_indptr=self.kv_indptr,
        topk=self.topk, num_steps=self.speculative_num_steps, page_size=self.page_size, window_size=max(window, 0),
        sink_size=self.draft_sink_size if window > 0 else 0,
        num_kv_splits=last.cuda_graph_num_kv_splits[: bs * self.topk], num_head=last.num_head,
        num_kv_head=last.num_kv_head, max_kv_splits=last.max_kv_splits, device_core_count=last.device_core_count)
    return None


def pack_read_stream(original: Callable, self, plan, *, req_pool_indices, seq_lens, indptr, out, kv_start_idx=None,
                     kind=FULL_KIND, token_mapping=None, num_token_blocks=1, kv_lens_sum=None) -> bool:
    """AROUND ``KVIndexTranslator.pack_read_stream``: its gather branch as
    :func:`sgl_meta.create_flashinfer_kv_indices` over the same source; SGLang's
    method for the translated-table branch and for sources ours does not take."""
    if isinstance(kind, SglangDefault):
        kind = kind.resolve()

    def theirs() -> bool:
        return original(self, plan, req_pool_indices=req_pool_indices, seq_lens=seq_lens, indptr=indptr, out=out,
                        kv_start_idx=kv_start_idx, kind=kind, token_mapping=token_mapping,
                        num_token_blocks=num_token_blocks, kv_lens_sum=kv_lens_sum)

    bs = int(seq_lens.numel())
    if seq_lens.dim() != 1 or req_pool_indices.numel() < bs:
        return theirs()
    src = _gather_branch(self, plan, bs, req_pool_indices, kind, token_mapping)
    if src is None:
        return theirs()
    create_flashinfer_kv_indices(src.ids, src.row_ids[:bs], seq_lens, indptr, kv_start_idx, out,
                                 entry_page_size=src.entry_page_size, token_mapping=token_mapping)
    return src.is_translated or token_mapping is not None


class _Prebuilt:
    """The ``spec_info`` SGLang's ``call_begin_forward`` reads a prebuilt index pair from."""

    def __init__(self, kv_indptr: torch.Tensor, kv_indices: torch.Tensor):
        self.kv_indptr, self.kv_indices = kv_indptr, kv_indices


def flashinfer_decode_call_begin_forward(original: Callable, self, wrapper, paged_kernel_lens, paged_kernel_lens_sum,
                                         kv_indptr, kv_start_idx, spec_info, seq_lens_cpu,
                                         use_sliding_window_kv_pool=False, fixed_split_size=None,
                                         disable_split_kv=None, *, plan, req_pool_indices) -> Any:
    """AROUND ``FlashInferIndicesUpdaterDecode.call_begin_forward``: ``kv_indptr``
    and ``kv_indices`` in one launch, then SGLang's method over them (planner
    call included); SGLang's method alone where not covered."""
    # Every EAGLE draft step passes its prebuilt pair through here after the draft loop's
    # host sync, where each statement is host time the GPU waits on: one check, one call.
    if (spec_info is None or getattr(spec_info, "kv_indptr", None) is None) and not use_sliding_window_kv_pool:
        prebuilt = _decode_pair(self, wrapper, paged_kernel_lens, kv_indptr, kv_start_idx, plan, req_pool_indices)
        if prebuilt is not None:
            spec_info = prebuilt
    return original(self, wrapper, paged_kernel_lens, paged_kernel_lens_sum, kv_indptr, kv_start_idx, spec_info,
                    seq_lens_cpu, use_sliding_window_kv_pool, fixed_split_size, disable_split_kv, plan=plan,
                    req_pool_indices=req_pool_indices)


def _decode_pair(updater, wrapper, paged_kernel_lens, kv_indptr, kv_start_idx, plan, req_pool_indices):
    """FlashInfer decode's ``kv_indptr`` + ``kv_indices`` written in one launch into the
    captured wrapper's buffers, as the prebuilt pair SGLang's method then reads; None
    where not covered (SGLang's method builds them)."""
    out = getattr(wrapper, "_paged_kv_indices_buf", None)
    if (kv_start_idx is not None or getattr(wrapper, "is_cuda_graph_enabled", None) is not True
            or not isinstance(out, torch.Tensor) or paged_kernel_lens.dim() != 1):
        return None
    bs = int(paged_kernel_lens.numel())
    backend = getattr(updater, "attn_backend", None)
    source = _source(backend, plan, bs, req_pool_indices) if kv_indptr.numel() > bs else None
    if source is None:
        return None
    target = kv_indptr[: bs + 1]
    build_kv_indices(**source, seq_lens=paged_kernel_lens, kv_indptr=target, kv_indices=out, write_indptr=True)
    return _Prebuilt(target, out)


def flashinfer_multi_step_draft_init(original: Callable, self, model_runner, topk, speculative_num_steps) -> None:
    """AROUND ``FlashInferMultiStepDraftBackend.__init__``: SGLang's constructor,
    then each step backend's decode updater bound to the method our
    ``call_begin_forward`` hook wraps, where that hook is the outermost wrapper."""
    original(self, model_runner, topk, speculative_num_steps)
    for backend in getattr(self, "attn_backends", ()):
        updater = getattr(backend, "indices_updater_decode", None)
        hooked = getattr(type(updater), "call_begin_forward", None)
        theirs = getattr(hooked, "__wrapped__", None)
        if hook_of(hooked) is flashinfer_decode_call_begin_forward and theirs is not None:
            updater.call_begin_forward = types.MethodType(theirs, updater)


def flashinfer_mla_decode_call_begin_forward(original: Callable, self, wrapper, paged_kernel_lens,
                                             paged_kernel_lens_sum, q_indptr, kv_indptr, init_metadata_replay=False,
                                             spec_info=None, *, plan, req_pool_indices, **fast_decode_kwargs) -> Any:
    """AROUND ``FlashInferMLAIndicesUpdaterDecode.call_begin_forward``: ``kv_indptr``
    and ``kv_indices`` in one launch, then SGLang's method over them as a prebuilt
    pair (its planner call included); SGLang's method alone where not covered."""
    if spec_info is None:  # the draft steps' prebuilt pairs pass straight through, as in the MHA hook
        spec_info = _mla_decode_pair(self, paged_kernel_lens, paged_kernel_lens_sum, kv_indptr, init_metadata_replay,
                                     original.__module__, plan, req_pool_indices, fast_decode_kwargs.get("kv_indices"))
    return original(self, wrapper, paged_kernel_lens, paged_kernel_lens_sum, q_indptr, kv_indptr,
                    init_metadata_replay, spec_info, plan=plan, req_pool_indices=req_pool_indices, **fast_decode_kwargs)


def _mla_decode_pair(updater, paged_kernel_lens, paged_kernel_lens_sum, kv_indptr, replay, module, plan,
                     req_pool_indices, replay_kv_indices):
    """FlashInfer MLA decode's ``kv_indptr`` + ``kv_indices`` in one launch, as the
    prebuilt pair SGLang's method reads; None where not covered. On replay they go to
    the capture-stable buffer the captured wrapper reads (``replay_kv_indices``)."""
    translator = getattr(getattr(updater, "attn_backend", None), "kv_index_translator", None)
    if paged_kernel_lens.dim() != 1 or dcp_enabled(module) or getattr(translator, "needs_read_translate", True):
        return None
    bs = int(paged_kernel_lens.numel())
    source = translator_source(translator, plan, bs, req_pool_indices) if kv_indptr.numel() > bs else None
    if source is None or (replay and not isinstance(replay_kv_indices, torch.Tensor)):
        return None
    out = replay_kv_indices if replay else torch.empty(paged_kernel_lens_sum, dtype=torch.int32,
                                                      device=paged_kernel_lens.device)
    target = kv_indptr[: bs + 1]
    build_kv_indices(**source, seq_lens=paged_kernel_lens, kv_indptr=target, kv_indices=out, write_indptr=True)
    return _Prebuilt(target, out)
