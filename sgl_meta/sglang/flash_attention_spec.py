"""SGLang 0.5.23 FlashAttention (FA3/FA4) multi-step EAGLE draft decode in one launch.

On every draft-decode replay prep, 0.5.23's
``FlashAttentionMultiStepBackend.init_forward_metadata_out_graph`` (in
``sglang/srt/layers/attention/flashattention_backend.py``) builds a DECODE view
of the batch and calls each of its ``speculative_num_steps - 1`` step backends'
``init_forward_metadata_out_graph``. With top-k 1, step ``i``'s path
(``_init_full_cg_decode_metadata`` -> ``_apply_cuda_graph_metadata`` ->
``_set_decode_page_metadata``) refills that backend's SWA write ids (SWA pool
only: torch ops), then makes one ``normal_decode_set_metadata`` launch with
``seq_len_delta = i + 1`` into its ``decode_cuda_graph_metadata[bs]``
(``cache_seqlens_int32``, ``cu_seqlens_k``, the draft-decode ``page_table``,
the ``swa_page_table`` through the pool's token mapping when bound), and sets
its ``forward_metadata`` / ``forward_metadata_spec_decode_expand``.

:func:`multi_step_init_forward_metadata_out_graph` (an AROUND hook) runs that
same method, SGLang's loop and every step's own code, with the decode drop-in
collecting its calls instead of launching (``deferred_decode`` in
:mod:`sgl_meta.flash_attention_metadata`), then writes all K - 1 sets with one
:func:`sgl_meta.update_flash_attention_metadata`: each page read once. Nothing in
those paths reads what the deferred calls write before the loop ends (checked
for the cases it covers: plain 0.5.23 step backends, top-k 1, no translating
pool, no encoder lengths, not at capture). Everything else calls ``original``
untouched. Where the decode drop-in is not what SGLang calls (its row not
hooked), nothing is collected and the hook costs one Python frame.

Draft extend (``draft_extend_v2``): before every replay 0.5.23's
``FlashAttentionBackend._apply_cuda_graph_metadata`` refreshes
``draft_extend_metadata[bs]`` with about ten eager ops (a length copy, two
cumsums and their copies, a cast, a full-width ``req_to_token`` gather, a floor
division and a page-table copy). :func:`apply_cuda_graph_metadata` (an AROUND
hook) writes the same buffers (lengths, both prefix sums, the page table's live
pages, and on a sliding-window pool the SWA table's through the pool's slot
mapping) with one :func:`sgl_meta.update_flash_attention_metadata` and sets the
same host fields (``max_seq_len_k``, ``max_seq_len_q``) the same way. It covers
a pool that does not translate reads, whose sliding-window translation (if any)
is 0.5.23's ``SWAKVPool`` mapping, without encoder lengths; every other call,
and every other mode, runs ``original``.

Target verify with top-k > 1: 0.5.23's ``_apply_cuda_graph_metadata``
refreshes ``target_verify_metadata_topk_normal[bs]`` (a length copy, a cumsum
and its copy, ``build_trtllm_mha_page_table``) and
``target_verify_metadata_topk_expand[bs]`` from the verify tree mask with
about twenty eager ops, among them a sort and a gather of whole
``req_to_token`` rows. The same hook writes the first with one
:func:`sgl_meta.update_flash_attention_metadata` and the second with one
:func:`sgl_meta.flash_attention_verify_expand`, and sets the same host field
(``max_seq_len_k``) and ``forward_metadata`` pair. It covers a pool that does
not translate reads, without a sliding window or encoder lengths, with a bool
verify mask and up to 64 draft tokens.

Draft decode with top-k > 1: each step backend's ``_apply_cuda_graph_metadata``
refreshes ``draft_decode_metadata_topk_normal[bs]`` (the prefix lengths floored
to a page, a ``req_to_token`` gather, a floor division, a page-table copy) and
``draft_decode_metadata_topk_expand[bs]`` (the step's draft slots as pages,
through the torch.compile'd ``draft_decode_set_expand_metadata``), 11-12
launches per step on the H200. :func:`multi_step_init_forward_metadata_out_graph` writes
every step's two objects with one :func:`sgl_meta.flash_attention_draft_decode_topk`
and sets the same host field (``max_seq_len_k``) and ``forward_metadata`` pairs.
It covers plain 0.5.23 step backends over a pool that does not translate reads,
without a sliding-window pool or encoder lengths, at replay.

No module here imports ``sglang``: the backends are used through the attributes
0.5.23 gives them.
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from .. import flash_attention_metadata as _fam
from .hooks import plain_methods

BACKEND = "sglang.srt.layers.attention.flashattention_backend"
MULTI_STEP_TARGET = f"{BACKEND}.FlashAttentionMultiStepBackend.init_forward_metadata_out_graph"
APPLY_TARGET = f"{BACKEND}.FlashAttentionBackend._apply_cuda_graph_metadata"

_STEP_CLASS = "FlashAttentionBackend"
# The step methods between the loop and the decode drop-in's call, and the rest of
# those paths: run as 0.5.23 wrote them, they read nothing the deferred calls write.
# Another plugin's wrapper (functools.wraps sets __wrapped__) or a subclass might.
_STEP_PATH = ("init_forward_metadata_out_graph", "_init_full_cg_decode_metadata", "_apply_cuda_graph_metadata",
              "_set_decode_page_metadata")
_LISTS = ("cache_seqlens", "cu_seqlens_k", "page_table", "swa_page_table", "seq_len_delta")


def _plain_step(backend: Any) -> bool:
    # Our draft-extend hook on _apply_cuda_graph_metadata runs SGLang's method in decode.
    if not plain_methods(backend, _STEP_CLASS, _STEP_PATH, (apply_cuda_graph_metadata,)):
        return False
    translator = getattr(backend, "kv_index_translator", None)
    # A translating pool (unified, DCP) copies the plan's tables after the lengths-only call.
    return (translator is not None and getattr(translator, "is_translating", True) is False
            and getattr(backend, "topk", 2) <= 1)


def covered(self: Any, forward_batch: Any, in_capture: bool) -> bool:
    """The replay preps whose deferred decode calls no step path reads before the loop ends."""
    if in_capture:
        return False  # once per captured size: not worth a second path
    spec_info = getattr(forward_batch, "spec_info", None)
    if spec_info is None or not spec_info.is_draft_input():
        return False  # the original asserts
    if getattr(forward_batch, "encoder_lens", None) is not None:
        return False  # 0.5.23 rewrites the page table after the decode call
    steps = getattr(self, "speculative_num_steps", None)
    backends = getattr(self, "attn_backends", None)
    if not isinstance(steps, int) or steps < 3 or backends is None or len(backends) < steps - 1:
        return False  # one step (K = 1): nothing to merge
    return all(_plain_step(b) for b in backends[: steps - 1])


def _same(a: Any, b: Any) -> bool:
    """The same input: one object, an equal int / bool, or the same view of one
    tensor (each step slices ``req_pool_indices[:bs]`` / ``seq_lens[:bs]`` anew)."""
    if a is b:
        return True
    if type(a) in (int, bool):
        return type(a) is type(b) and a == b
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    return (a.data_ptr() == b.data_ptr() and a.device == b.device and a.dtype == b.dtype
            and a.shape == b.shape and a.stride() == b.stride())


def _storages(kw: dict) -> list:
    return [t.untyped_storage().data_ptr() for name in _LISTS[:4] for t in (kw[name] or ())]


def _merged(calls: list) -> dict | None:
    """One call writing every collected set, or None when they do not share every
    input, or two outputs may share memory (then each call runs as it was made)."""
    first = calls[0]
    for kw in calls[1:]:
        if kw.keys() != first.keys():
            return None
        for name, value in kw.items():
            if name in _LISTS:
                if (value is None) != (first[name] is None) or (value is not None and len(value) != len(first[name])):
                    return None
            elif not _same(value, first[name]):
                return None
    storages = [p for kw in calls for p in _storages(kw)]
    if len(set(storages)) != len(storages):
        return None
    merged = dict(first)
    for name in _LISTS:
        if first[name] is not None:
            merged[name] = [t for kw in calls for t in kw[name]]
    return merged


def _launch(calls: list) -> None:
    merged = _merged(calls) if len(calls) > 1 else None
    for kw in [merged] if merged is not None else calls:
        _fam.update_flash_attention_metadata(**kw)


def _draft_topk_covered(self: Any, forward_batch: Any, in_capture: bool) -> bool:
    """A top-k > 1 draft-decode replay prep whose whole device work one launch does."""
    if in_capture or getattr(forward_batch, "encoder_lens", None) is not None:
        return False
    spec_info = getattr(forward_batch, "spec_info", None)
    if spec_info is None or not spec_info.is_draft_input():
        return False
    steps, topk = getattr(self, "speculative_num_steps", None), getattr(self, "topk", None)
    backends = getattr(self, "attn_backends", None)
    if not (isinstance(steps, int) and isinstance(topk, int) and 2 <= steps <= 17 and 1 < topk <= 1024
            and backends is not None and len(backends) >= steps - 1):
        return False
    first = backends[0]
    page_size = getattr(first, "page_size", None)
    if not _power_of_two(page_size):
        return False
    for i, backend in enumerate(backends[: steps - 1]):
        if not plain_methods(backend, _STEP_CLASS, _STEP_PATH, (apply_cuda_graph_metadata,)):
            return False
        if (backend.topk != topk or backend.speculative_step_id != i or backend.speculative_num_steps != steps
                or backend.page_size != page_size or backend.req_to_token is not first.req_to_token
                or backend.use_sliding_window_kv_pool is not False or not _reads_untranslated(backend)):
            return False
    loc = getattr(forward_batch, "out_cache_loc", None)
    return isinstance(loc, torch.Tensor) and loc.numel() == forward_batch.batch_size * topk * steps


def _draft_topk(self: Any, forward_batch: Any) -> None:
    """Every step's ``draft_decode_metadata_topk_normal[bs]`` and ``_expand[bs]`` in one launch."""
    bs, steps = forward_batch.batch_size, self.speculative_num_steps
    backends = self.attn_backends[: steps - 1]
    normal = [b.draft_decode_metadata_topk_normal[bs] for b in backends]
    expand = [b.draft_decode_metadata_topk_expand[bs] for b in backends]
    first = backends[0]
    page_size = first.page_size
    # 0.5.23 gathers columns strided_indices[:pages], within the req_to_token row.
    pages = min(min(m.page_table.shape[1] for m in normal), -(-first.req_to_token.shape[1] // page_size))
    seq_lens = forward_batch.seq_lens[:bs]
    _fam.flash_attention_draft_decode_topk(
        cache_seqlens=[m.cache_seqlens_int32 for m in normal], page_table=[m.page_table for m in normal],
        expand_cache_seqlens=[e.cache_seqlens_int32 for e in expand] if page_size > 1 else [],
        expand_page_table=[e.page_table for e in expand], req_to_token=first.req_to_token,
        req_pool_indices=forward_batch.req_pool_indices[:bs], seq_lens=seq_lens,
        out_cache_loc=forward_batch.out_cache_loc, bs=bs, topk=self.topk, num_steps=steps,
        decode_length=[i + 1 for i in range(steps - 1)], page_size=page_size, max_seq_pages=pages)
    # 0.5.23 hands a step the host lengths only where it asks for them: their max, once.
    seq_lens_cpu = getattr(forward_batch, "seq_lens_cpu", None)
    asked = seq_lens_cpu is not None and any(b.needs_cpu_seq_lens for b in backends)
    host_max = seq_lens_cpu[:bs].max().item() if asked else None
    for backend, metadata, metadata_expand in zip(backends, normal, expand):
        use_host = backend.needs_cpu_seq_lens and host_max is not None
        metadata.max_seq_len_k = host_max if use_host else backend.max_context_len
        backend.forward_metadata = metadata
        backend.forward_metadata_spec_decode_expand = metadata_expand


def multi_step_init_forward_metadata_out_graph(
    original: Callable, self: Any, forward_batch: Any, in_capture: bool = False
) -> None:
    """AROUND hook for ``FlashAttentionMultiStepBackend.init_forward_metadata_out_graph``.

    Runs ``original`` (0.5.23's loop over the step backends, every step's own
    code) with the decode drop-in's calls collected, then one
    :func:`sgl_meta.update_flash_attention_metadata` writing every step's
    ``decode_cuda_graph_metadata[bs]`` (K - 1 sets, ``seq_len_delta = i + 1``,
    the SWA tables when bound): what the K - 1 calls would have written. Calls
    that do not share their inputs run one by one, in order; so do those already
    collected when a step raises (0.5.23 had launched them), and the error
    propagates. With top-k > 1 (see the module docstring) one
    :func:`sgl_meta.flash_attention_draft_decode_topk` writes every step's metadata in
    place of ``original``. Capture, translating pools (unified, DCP), encoder
    lengths, a single step and step backends that are not plain 0.5.23
    ``FlashAttentionBackend`` objects call ``original`` alone.
    """
    if _draft_topk_covered(self, forward_batch, in_capture):
        return _draft_topk(self, forward_batch)
    deferred = _fam.deferred_decode
    if deferred.calls is not None or not covered(self, forward_batch, in_capture):
        return original(self, forward_batch, in_capture=in_capture)
    calls: list = []
    deferred.calls = calls
    try:
        result = original(self, forward_batch, in_capture=in_capture)
    except BaseException:
        deferred.calls = None
        for kw in calls:
            _fam.update_flash_attention_metadata(**kw)
        raise
    deferred.calls = None
    if calls:
        _launch(calls)
    return result


def _reads_untranslated(self: Any) -> bool:
    """The backend gathers from req_to_token itself (a translating pool's plan tables
    are copied instead)."""
    translator = getattr(self, "kv_index_translator", None)
    return translator is not None and getattr(translator, "reads_are_translated", True) is False


def _draft_extend_covered(self: Any, encoder_lens: Any, forward_mode: Any) -> bool:
    """A draft-extend refresh whose whole device work one update call does."""
    if encoder_lens is not None or not forward_mode.is_draft_extend_v2() or not _reads_untranslated(self):
        return False
    return isinstance(getattr(self, "use_sliding_window_kv_pool", None), bool)


_SWA_TRANSLATE = "SWAKVPool.translate_loc_from_full_to_swa"


def _token_mapping(pool: Any) -> Any:
    """The sliding-window pool's slot mapping where its translation is 0.5.23's
    ``SWAKVPool`` method (``full_to_swa_index_mapping[loc]``, -1 kept by the
    sentinel appended to the mapping), which the update applies per slot (any
    negative slot gives -1; SGLang's indexing wraps those below -1, which no
    kernel reads); else None."""
    method = getattr(pool, "translate_loc_from_full_to_swa", None)
    if getattr(getattr(method, "__func__", None), "__qualname__", "") != _SWA_TRANSLATE:
        return None
    mapping = getattr(pool, "full_to_swa_index_mapping", None)
    if not isinstance(mapping, torch.Tensor) or mapping.dim() != 1:
        return None
    return mapping


def _extend_lens(spec_info: Any, bs: int, device: torch.device) -> tuple:
    """(extend lengths on the device, their host max) as 0.5.23 picks them:
    the spec's tensor, else its host list, else num_tokens_per_req for all."""
    tensor = getattr(spec_info, "extend_seq_lens_tensor", None)
    host = getattr(spec_info, "extend_seq_lens_cpu", None)
    if tensor is None:
        if host is not None:
            tensor = torch.as_tensor(host, dtype=torch.int32, device=device)
        else:
            host = [spec_info.num_tokens_per_req] * bs
            tensor = torch.full((bs,), spec_info.num_tokens_per_req, dtype=torch.int32, device=device)
    max_q = int(max(host)) if host else spec_info.num_tokens_per_req
    return tensor, max_q


def _power_of_two(value: Any) -> bool:
    return isinstance(value, int) and value > 0 and value & (value - 1) == 0


def _verify_topk_covered(self: Any, encoder_lens: Any, forward_mode: Any, spec_info: Any) -> bool:
    """A top-k > 1 target-verify refresh whose whole device work the two launches do."""
    if encoder_lens is not None or not forward_mode.is_target_verify() or getattr(self, "topk", 0) <= 1:
        return False
    if getattr(self, "has_swa", True) is not False:
        return False  # the sliding-window merge reads both halves
    if not _reads_untranslated(self):
        return False
    n, page_size = getattr(self, "speculative_num_draft_tokens", None), getattr(self, "page_size", None)
    if not (isinstance(n, int) and 1 <= n <= 64 and _power_of_two(page_size)):
        return False
    mask, positions = getattr(spec_info, "custom_mask", None), getattr(spec_info, "positions", None)
    return (isinstance(mask, torch.Tensor) and mask.dtype == torch.bool and mask.dim() == 1
            and mask.is_contiguous() and isinstance(positions, torch.Tensor))


def _verify_topk(self: Any, bs: int, req_pool_indices: torch.Tensor, seq_lens: torch.Tensor, spec_info: Any) -> None:
    """Both halves of the top-k > 1 verify metadata: the prefix half
    (``target_verify_metadata_topk_normal[bs]``: lengths, their sums, the page
    table) and the draft half (``target_verify_metadata_topk_expand[bs]``), one
    launch each."""
    seq_lens, req_pool_indices = seq_lens[:bs], req_pool_indices[:bs]
    metadata = self.target_verify_metadata_topk_normal[bs]
    # 0.5.23's page-table builder writes the live pages of each row, which lie
    # within the req_to_token row.
    pages = min(metadata.page_table.shape[1], -(-self.req_to_token.shape[1] // self.page_size))
    _fam.update_flash_attention_metadata(
        cache_seqlens=[metadata.cache_seqlens_int32], cu_seqlens_k=[metadata.cu_seqlens_k],
        page_table=[metadata.page_table], req_to_token=self.req_to_token, req_pool_indices=req_pool_indices,
        seq_lens=seq_lens, seq_len_delta=[0], bs=bs, max_seq_pages=pages, page_size=self.page_size)
    metadata.max_seq_len_k = self.max_context_len
    expand = self.target_verify_metadata_topk_expand[bs]
    _fam.flash_attention_verify_expand(
        page_table=expand.page_table, cache_seqlens=expand.cache_seqlens_int32, cu_seqlens_k=expand.cu_seqlens_k,
        custom_mask=spec_info.custom_mask, req_to_token=self.req_to_token, req_pool_indices=req_pool_indices,
        seq_lens=seq_lens, bs=bs, num_draft_tokens=self.speculative_num_draft_tokens,
        mask_rows=spec_info.positions.numel())
    self.forward_metadata = metadata
    self.forward_metadata_spec_decode_expand = expand


def apply_cuda_graph_metadata(original: Callable, self: Any, plan: Any, bs: int, req_pool_indices: torch.Tensor,
                              seq_lens: torch.Tensor, encoder_lens: Any, forward_mode: Any, spec_info: Any,
                              seq_lens_cpu: Any, out_cache_loc: Any = None) -> None:
    """AROUND hook for ``FlashAttentionBackend._apply_cuda_graph_metadata``:
    the draft-extend refresh of ``draft_extend_metadata[bs]`` in one launch and
    the top-k > 1 target-verify refresh in two (see the module docstring for
    what they cover); ``original`` otherwise."""
    def theirs() -> None:
        return original(self, plan, bs, req_pool_indices, seq_lens, encoder_lens, forward_mode, spec_info,
                        seq_lens_cpu, out_cache_loc)

    if _verify_topk_covered(self, encoder_lens, forward_mode, spec_info):
        return _verify_topk(self, bs, req_pool_indices, seq_lens, spec_info)
    if not _draft_extend_covered(self, encoder_lens, forward_mode):
        return theirs()
    metadata = self.draft_extend_metadata[bs]
    mapping = None
    if self.use_sliding_window_kv_pool and metadata.swa_page_table is not None:
        mapping = _token_mapping(getattr(self, "token_to_kv_pool", None))
        if mapping is None:
            return theirs()
    seq_lens = seq_lens[:bs]
    metadata.max_seq_len_k = seq_lens_cpu[:bs].max().item() if seq_lens_cpu is not None else self.max_context_len
    extend_seq_lens, metadata.max_seq_len_q = _extend_lens(spec_info, bs, seq_lens.device)
    # 0.5.23 gathers columns strided_indices[:pages] into page_table[:, :pages].
    pages = (metadata.max_seq_len_k + self.page_size - 1) // self.page_size
    pages = min(pages, self.draft_extend_metadata["strided_indices"].numel(), metadata.page_table.shape[1])
    _fam.update_flash_attention_metadata(
        cache_seqlens=[metadata.cache_seqlens_int32], cu_seqlens_k=[metadata.cu_seqlens_k],
        page_table=[metadata.page_table], swa_page_table=None if mapping is None else [metadata.swa_page_table],
        full_to_swa_index_mapping=mapping, cu_seqlens_q=metadata.cu_seqlens_q, req_to_token=self.req_to_token,
        req_pool_indices=req_pool_indices[:bs], seq_lens=seq_lens, seq_len_delta=[0], bs=bs, max_seq_pages=pages,
        page_size=self.page_size, extend_seq_lens=extend_seq_lens[:bs])
    self.forward_metadata = metadata
    self.forward_metadata_spec_decode_expand = None
