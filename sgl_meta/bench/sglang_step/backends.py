"""The backends the plugin serves, built through SGLang's attention test kit.

A :class:`Setup` is one (backend, forward mode, batch size, context) point: the
kit's mock model runner sized for it, the real SGLang backend over it (the
multi-step draft backend for draft decode), the replay batch, and the metadata
buffers the attention kernels read. Speculative modes use EAGLE with 3 steps,
top-k 1 and 4 draft tokens, the runner's configuration in all four modes; the
``fa3_topk4`` label builds FA3 with top-k 4 (its target verify's and draft
decode's two halves), the ``dsa_fp8`` label DSA with the ``flashmla_kv`` decode
(SGLang's Hopper default with an FP8 KV cache, whose replay plans FlashMLA's decode).

Left out of both sides (say so in any table): FA3's scheduler-metadata
planner (``get_scheduler_metadata``, sgl_kernel's, called outside the graph on
every decode replay when present); DeepGEMM's paged-MQA schedule
planner (``get_paged_mqa_logits_metadata``, called by DSA outside the graph on
every replay) and FlashMLA's ``get_mla_metadata`` (DSA's decode implementation
is ``flashmla_sparse``, whose replay has no FlashMLA planner; with ``dsa_fp8`` a
stand-in as FlashMLA's); the top-k v2 plan
(``SGLANG_OPT_USE_TOPK_V2=0``), which belongs to sgl_kernel's top-k.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Callable, Optional

import torch

from . import batches, flashinfer_planner
from .points import HEADROOM

SPEC_STEPS = 3
SPEC_DRAFT_TOKENS = 4
PAGE_SIZE = 64
DENSE = ("trtllm_mha", "fa3", "triton", "flashinfer")
"""Backends built through the kit's dense-attention runner."""
MLA = ("trtllm_mla", "flashmla", "flashinfer_mla")
"""Backends built through the kit's MLA runner."""
TOPK = {"fa3_topk4": ("fa3", 4)}
"""Grid labels of a backend built with EAGLE top-k > 1 (Llama's auto top-k is 4): (backend, top-k)."""
PAGE1 = {"fa3_page1": "fa3"}
"""Grid labels of a backend built at page size 1, FA3's default on Hopper: a column per token, and
the backend's replay passes its static width (``ceil(max_context_len / page_size)``) whatever
the lengths."""
DSA_DECODE = {"dsa": "flashmla_sparse", "dsa_fp8": "flashmla_kv"}
"""Grid labels of the DSA backend: its decode implementation (``--dsa-decode-backend``)."""
LEFT_OUT = [
    "FA3: its scheduler-metadata planner (sgl_kernel's get_scheduler_metadata), both sides",
    "DSA: DeepGEMM's paged-MQA schedule planner (get_paged_mqa_logits_metadata), both sides",
    "DSA: FlashMLA's get_mla_metadata (decode implementation flashmla_sparse, whose replay calls no planner; "
    "dsa_fp8's flashmla_kv calls it: a stand-in as FlashMLA's below, both sides, what it receives is compared)",
    "DSA: the top-k v2 plan (SGLANG_OPT_USE_TOPK_V2=0; it serves sgl_kernel's top-k)",
    "TRT-LLM MLA: the zero-KV fixup kernel's JIT prebuild when the backend is built (SGLang's JIT toolchain is "
    "not installed; the replay path never calls it)",
    "FlashInfer: its planner (the wrappers' begin_forward / plan, SGLang's fast_decode_plan / fast_prefill_plan: "
    "host work and copies of the index arrays into the wrappers' buffers), both sides; what it receives is compared",
    "FlashInfer MLA: its planner (the MLA wrapper's plan, SGLang's fast_mla_decode_plan / fast_mla_prefill_plan), "
    "both sides; what it receives is compared",
    "FlashMLA: its planner (flash_mla's get_mla_metadata), both sides; a stand-in returns its two tensors (a zero "
    "schedule, split counts that echo the key lengths it received), which SGLang's code then copies into the "
    "graph's buffers on both sides; what it receives is compared",
]
"""What the measured path leaves out of both sides (the module docstring says why)."""


@dataclass
class Setup:
    backend_name: str
    mode: str
    bs: int
    context: int
    backend: object  # the SGLang attention backend (multi-step for draft decode)
    batch: object  # the ForwardBatch replayed each step
    read_buffers: Callable[[], dict] = field(repr=False)  # name -> (tensor, per-row live length or None)


def _forward_mode(mode: str):
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    return {"decode": ForwardMode.DECODE, "target_verify": ForwardMode.TARGET_VERIFY,
            "draft_extend": ForwardMode.DRAFT_EXTEND_V2, "draft_decode": ForwardMode.DECODE}[mode]


def _tokens_per_req(mode: str, topk: int = 1) -> int:
    if mode == "draft_decode":
        return topk  # one query per draft branch
    return SPEC_DRAFT_TOKENS if mode in ("target_verify", "draft_extend") else 1


def _kit_case(module, backend_name: str, mode: str, bs: int, page_size: int):
    """A kit case whose runner gets the speculative configuration (any spec mode) or none."""
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    spec = mode != "decode"
    case_cls = getattr(module, "DSAAttentionCase", None) or module.DenseAttentionCase
    dense = backend_name in DENSE
    return case_cls(
        name=f"{backend_name}_{mode}_bs{bs}", backend=backend_name,
        forward_mode=ForwardMode.TARGET_VERIFY if spec else ForwardMode.DECODE,
        num_heads=8 if dense else 16, num_kv_heads=1 if dense else 16,
        page_size=page_size, prefix_lens=(1,) * bs, extend_lens=(SPEC_DRAFT_TOKENS,) * bs if spec else (),
    )


def _runner(backend_name: str, mode: str, bs: int, context: int, device: str, dsa_decode: Optional[str] = None,
            page_size: int = PAGE_SIZE):
    if backend_name in MLA:
        from sglang.test.kits.attention_unittest.attention_methods import mla_attention as kit

        spec = mode != "decode"
        case = kit.MLAAttentionCase(
            name=f"{backend_name}_{mode}_bs{bs}", backend=backend_name,
            forward_mode=_forward_mode("target_verify" if spec else "decode"), num_heads=16, page_size=page_size,
            prefix_lens=(1,) * bs, extend_lens=(SPEC_DRAFT_TOKENS,) * bs if spec else ())
        config = kit.TinyMLAModelConfig(num_heads=16, kv_lora_rank=512, qk_rope_head_dim=64, hidden_size=512,
                                        context_len=context)
        return kit.MockMLAModelRunner(case=case, model_config=config, dtype=torch.bfloat16, device=device,
                                      max_context_len=context, kv_lora_rank=512, qk_rope_head_dim=64,
                                      disable_cuda_graph=False, runner_batch_size=bs)
    if backend_name in DENSE:
        from sglang.test.kits.attention_unittest.attention_methods import dense_attention as kit

        case = _kit_case(kit, backend_name, mode, bs, page_size)
        config = kit.TinyModelConfig(num_heads=8, num_kv_heads=1, head_dim=64, hidden_size=512, context_len=context)
        return kit.MockModelRunner(case=case, model_config=config, dtype=torch.bfloat16, device=device,
                                   max_context_len=context, head_dim=64, disable_cuda_graph=False, runner_batch_size=bs)
    from sglang.test.kits.attention_unittest.attention_methods import dsa_attention as kit

    case = _kit_case(kit, backend_name, mode, bs, page_size)
    config = kit.TinyDSAModelConfig(num_heads=16, head_dim=576, hidden_size=512, context_len=context,
                                    qk_nope_head_dim=512, qk_rope_head_dim=64, kv_lora_rank=512,
                                    index_topk=2048)
    return kit.DSAMockModelRunner(case=case, model_config=config, dtype=torch.bfloat16, device=device,
                                  max_context_len=context, head_dim=576, disable_cuda_graph=False,
                                  runner_batch_size=bs, dsa_prefill_backend="flashmla_sparse",
                                  dsa_decode_backend=dsa_decode)


def leave_out_planners() -> None:
    """DeepGEMM's schedule planner out of DSA's metadata path, in every module that bound it."""
    os.environ["SGLANG_OPT_USE_TOPK_V2"] = "0"
    import sglang.srt.layers.attention.dsa.utils as dsa_utils

    def no_planner():
        return lambda *_args, **_kwargs: None

    original = dsa_utils.resolve_paged_mqa_logits_metadata_fn
    for module in list(sys.modules.values()):
        if getattr(module, "resolve_paged_mqa_logits_metadata_fn", None) is original:
            module.resolve_paged_mqa_logits_metadata_fn = no_planner


def leave_out_mla_prebuild() -> None:
    """TRT-LLM MLA's construction-time JIT prebuild of its zero-KV fixup kernel (not on the replay path)."""
    from sglang.srt.layers.attention import trtllm_mla_backend

    trtllm_mla_backend._jit_fixup_module = lambda *_args, **_kwargs: None


FLASHMLA_SM_PARTS = 16
"""Rows of the planner stand-in's schedule (FlashMLA's get_mla_metadata sizes it from the SM count)."""


def leave_out_flashmla_planner() -> None:
    """FlashMLA's planner out of both sides: a stand-in with its outputs' shapes and dtype. Its split
    counts are the key lengths it received, after a 0: copied into the graph's ``num_splits``, they
    show that both sides planned for the same lengths."""
    from sglang.srt.layers.attention import flashmla_backend

    def get_mla_metadata(cache_seqlens, *_args, **_kwargs):
        schedule = torch.zeros((FLASHMLA_SM_PARTS, 8), dtype=torch.int32, device=cache_seqlens.device)
        return schedule, torch.nn.functional.pad(cache_seqlens.to(torch.int32), (1, 0))

    flashmla_backend.get_mla_metadata = get_mla_metadata


def _host_only_flashmla(backend, bs: int) -> None:
    """Without a GPU: FlashMLA's graph state, which it allocates on "cuda", on the host."""
    backend.cuda_graph_kv_indices = torch.full((bs, (backend.max_context_len + PAGE_SIZE) // PAGE_SIZE), 1,
                                               dtype=torch.int32)
    backend.cuda_graph_mla_metadata = torch.empty((FLASHMLA_SM_PARTS, 8), dtype=torch.int32)
    backend.cuda_graph_num_splits = torch.empty(bs + 1, dtype=torch.int32)
    backend.cuda_graph_mla_metadata_view = backend.cuda_graph_num_splits_view = None
    backend.cuda_graph_draft_extend_seq_lens_k = torch.ones(bs, dtype=torch.int32)


class _HostTorch:
    """``torch`` as SGLang's FlashInfer MLA module sees it without a GPU: its pinned
    host buffers unpinned and its ``device="cuda"`` allocations (the capture's
    kv_indices) on the host; pinning and CUDA allocations need a driver."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def zeros(*args, pin_memory: bool = False, device=None, **kwargs):
        return torch.zeros(*args, **kwargs)

    @staticmethod
    def empty(*args, device=None, **kwargs):
        return torch.empty(*args, **kwargs)


def leave_out_dsa_flashmla_planner() -> None:
    """FlashMLA's planner out of DSA's ``flashmla_kv`` path on both sides: a stand-in whose split
    counts echo the DSA lengths it received and whose schedule holds their sum, both copied into
    every draft step's graph, so the compared tensors show both sides planned for the same lengths
    and copied both."""
    from sglang.kernels.ops.attention import flash_mla_interface

    def get_mla_metadata(cache_seqlens, *_args, **_kwargs):
        lengths = cache_seqlens.to(torch.int32)
        schedule = torch.zeros((FLASHMLA_SM_PARTS, 8), dtype=torch.int32, device=cache_seqlens.device)
        schedule[0, 0] = lengths.sum()
        return schedule, torch.nn.functional.pad(lengths, (1, 0))

    flash_mla_interface.get_mla_metadata = get_mla_metadata


def _host_only_mla() -> None:
    """Without a GPU (the plugin's tests build the backend on CPU tensors): the
    names SGLang imports only on CUDA machines come from the stubs, and the
    construction-time device queries answer as a Hopper GPU without the fused
    KV-store kernel would. The replay path does not touch any of them."""
    import flashinfer
    from sglang.srt.layers.attention import flashinfer_mla_backend, trtllm_mla_backend

    for name in ("BatchMLAPagedAttentionWrapper", "BatchPrefillWithRaggedKVCacheWrapper"):
        setattr(flashinfer_mla_backend, name, getattr(flashinfer, name))
    trtllm_mla_backend.flashinfer = flashinfer
    trtllm_mla_backend.can_use_set_mla_kv_concat_q = lambda *_args, **_kwargs: False


def _host_only_dsa() -> None:
    """Without a GPU: DSA's backend reads the device's compute capability when built (answered as
    Hopper's), and its staging copy is a kernel SGLang compiles on first use for the device, which
    fails here (raised at once, so SGLang takes its own eager fallback instead of calling nvcc)."""
    from sglang.kernels.ops.attention.dsa import fused_metadata_copy

    def no_device_compiler(*_args, **_kwargs):
        raise RuntimeError("no CUDA device to compile for")

    torch.cuda.get_device_capability = lambda *_args, **_kwargs: (9, 0)
    fused_metadata_copy.fused_metadata_copy_cuda = no_device_compiler
    fused_metadata_copy.fused_metadata_copy_multi_cuda = no_device_compiler


def _backend(backend_name: str, mode: str, runner, topk: int = 1):
    from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS

    if backend_name == "flashmla":
        from sglang.srt.layers.attention import flashmla_backend as fm

        if mode == "draft_decode":
            return fm.FlashMLAMultiStepDraftBackend(runner, topk=1, speculative_num_steps=SPEC_STEPS)
        return fm.FlashMLABackend(runner, skip_prefill=str(runner.device) == "cpu")
    if backend_name == "flashinfer_mla":
        from sglang.srt.layers.attention import flashinfer_mla_backend as fim

        if str(runner.device) == "cpu":
            fim.torch = _HostTorch()
        if mode == "draft_decode":
            return fim.FlashInferMLAMultiStepDraftBackend(runner, topk=1, speculative_num_steps=SPEC_STEPS)
        return fim.FlashInferMLAAttnBackend(runner)
    if backend_name in MLA:
        from sglang.srt.layers.attention import trtllm_mla_backend as mla

        if mode == "draft_decode":
            return mla.TRTLLMMLAMultiStepDraftBackend(runner, topk=1, speculative_num_steps=SPEC_STEPS)
        # Pinned host buffers (allocated unless skip_prefill) need a driver; the replay never reads them.
        return mla.TRTLLMMLABackend(runner, skip_prefill=str(runner.device) == "cpu")
    if mode != "draft_decode":
        return ATTENTION_BACKENDS[backend_name](runner)
    if backend_name == "trtllm_mha":
        from sglang.srt.layers.attention.trtllm_mha_backend import TRTLLMHAAttnMultiStepDraftBackend as Multi
    elif backend_name == "fa3":
        from sglang.srt.layers.attention.flashattention_backend import FlashAttentionMultiStepBackend as Multi
    elif backend_name == "triton":
        from sglang.srt.layers.attention.triton_backend import TritonMultiStepDraftBackend as Multi
    elif backend_name == "flashinfer":
        from sglang.srt.layers.attention.flashinfer_backend import FlashInferMultiStepDraftBackend as Multi
    else:
        from sglang.srt.layers.attention.dsa_backend import DeepseekSparseAttnMultiStepBackend as Multi
    return Multi(runner, topk=topk, speculative_num_steps=SPEC_STEPS)


def publish_page_size(page_size: int = PAGE_SIZE) -> None:
    """The scheduler's page size, as a server publishes it (the kit's runner leaves it
    None): the multi-step draft backends read it when built, for their draft-decode
    kv indices (Triton's, and FlashInfer MLA's under TRT-LLM MLA)."""
    from sglang.srt.runtime_context import get_context

    get_context().override("sgl-meta step bench", page_size=page_size)


def leave_out_scheduler(backends) -> None:
    """FA3's scheduler-metadata planner out of both sides (before the graph state
    is allocated: without it no buffer is made and the replay skips the call)."""
    for b in backends:
        if hasattr(b, "_get_scheduler_metadata"):
            b._get_scheduler_metadata = None


def _spec_info(mode: str, batch, device, topk: int = 1):
    from sglang.srt.model_executor.forward_batch_info import CaptureHiddenMode

    bs = batch.batch_size
    if mode == "target_verify":
        from sglang.srt.speculative.eagle_info import EagleVerifyInput

        return EagleVerifyInput(
            draft_token=batch.input_ids, custom_mask=None, positions=batch.positions,
            retrieve_index=None, retrieve_next_token=None, retrieve_next_sibling=None,
            retrieve_cum_len=None, spec_steps=SPEC_STEPS, topk=1, draft_token_num=SPEC_DRAFT_TOKENS,
            capture_hidden_mode=CaptureHiddenMode.FULL, seq_lens_sum=batch.seq_lens_sum,
            seq_lens_cpu=batch.seq_lens_cpu)
    if mode == "draft_extend":
        from sglang.srt.speculative.eagle_info import EagleDraftExtendInput

        accept = torch.full((bs,), SPEC_DRAFT_TOKENS, dtype=torch.int32, device=device)
        info = EagleDraftExtendInput(
            hidden_states=None, num_correct_drafts=accept - 1, num_accept_tokens=accept,
            num_accept_tokens_cpu=[SPEC_DRAFT_TOKENS] * bs, input_ids=batch.input_ids, seq_lens=batch.seq_lens,
            seq_lens_cpu=batch.seq_lens_cpu, req_pool_indices=batch.req_pool_indices, positions=batch.positions,
            capture_hidden_mode=CaptureHiddenMode.LAST, num_tokens_per_req=SPEC_DRAFT_TOKENS,
            num_tokens_for_logprob_per_req=1)
        info.extend_seq_lens_tensor = accept
        info.extend_seq_lens_cpu = [SPEC_DRAFT_TOKENS] * bs
        return info
    if mode == "draft_decode":
        from sglang.srt.speculative.eagle_info import EagleDraftInput

        return EagleDraftInput(
            topk_p=torch.ones(bs, topk, device=device),
            topk_index=torch.zeros(bs, topk, dtype=torch.int64, device=device),
            hidden_states=None, capture_hidden_mode=CaptureHiddenMode.LAST, num_tokens_per_req=1,
            num_tokens_for_logprob_per_req=1)
    return None


def _draft_slots(lens: torch.Tensor, topk: int, first_page: int, page_size: int) -> torch.Tensor:
    """EAGLE top-k > 1 draft-decode write slots, ``[bs, topk, steps]``: each branch's
    steps in a page of its own past the requests' pages, from its request's offset in
    its last page on (SGLang gives each branch a copy of that partly filled page), so a
    branch's steps may run into the next page."""
    bs = lens.numel()
    pages = first_page + 2 * torch.arange(bs * topk, dtype=torch.int64).view(bs, topk, 1)
    offset = (lens % page_size).view(bs, 1, 1)
    return pages * page_size + offset + torch.arange(SPEC_STEPS, dtype=torch.int64)


def _batch(runner, mode: str, bs: int, context: int, device, seed: int, topk: int = 1, page_size: int = PAGE_SIZE,
           max_len: Optional[int] = None):
    gen = torch.Generator().manual_seed(seed)
    req_to_token = runner.req_to_token_pool.req_to_token
    batches.fill_req_to_token(req_to_token, bs, page_size, gen)
    lens = batches.seq_lens(bs, min(context, max_len or context), headroom=HEADROOM, gen=gen)
    batch = batches.forward_batch(_forward_mode(mode), lens, _tokens_per_req(mode, topk), device)
    if mode == "draft_decode" and topk > 1:
        first_page = bs * (req_to_token.shape[1] // page_size) + 1
        batch.out_cache_loc = _draft_slots(lens, topk, first_page, page_size).view(-1).to(device)
    if mode == "draft_extend":
        per_req = torch.full((bs,), SPEC_DRAFT_TOKENS, dtype=torch.int32)
        batch.extend_seq_lens = per_req.to(device)
        batch.extend_seq_lens_cpu = per_req.tolist()
        batch.extend_prefix_lens = (lens - SPEC_DRAFT_TOKENS).to(device)
        batch.extend_prefix_lens_cpu = (lens - SPEC_DRAFT_TOKENS).tolist()
        batch.extend_num_tokens = bs * SPEC_DRAFT_TOKENS
    runner.kv_index_translator.bind_own_plan(batch)
    batch.spec_info = _spec_info(mode, batch, device, topk)
    return batch


def _host_only_flashinfer(backend, bs: int, tokens: int) -> None:
    """Without a GPU: the graph state SGLang's FlashInfer backend allocates on
    "cuda", on the host (the replay path reads the same buffers)."""
    keep, backend.skip_prefill = backend.skip_prefill, True
    width = tokens * backend.max_context_len
    backend.init_cuda_graph_state(max_bs=bs, max_num_tokens=tokens, kv_indices_buf=torch.zeros(width, dtype=torch.int32))
    backend.skip_prefill = keep
    if not keep:
        backend.cuda_graph_custom_mask = torch.zeros(width, dtype=torch.uint8)
        backend.cuda_graph_qk_indptr = [x.clone() for x in backend.kv_indptr]
        backend.cuda_graph_qo_indptr = [x.clone() for x in backend.kv_indptr]


def _verify_mask_size(batch) -> int:
    """Entries of EAGLE's verify mask (a bit per (draft token, key) of every request), sized
    for the lengths a run grows to."""
    n, bs = SPEC_DRAFT_TOKENS, batch.batch_size
    return (int(batch.seq_lens.sum()) + bs * HEADROOM) * n + n * n * bs


def _verify_mask(batch, device) -> torch.Tensor:
    """EAGLE's verify mask as FlashInfer's verify reads it, every key visible (0.5.23 grows a
    short one on the fly)."""
    return torch.ones(_verify_mask_size(batch), dtype=torch.bool, device=device)


def _live(lens: torch.Tensor, per_col: int) -> torch.Tensor:
    return (lens.to(torch.int64) + per_col - 1) // per_col


def _mha_buffers(backend, bs: int) -> dict:
    """TRT-LLM MHA and FA3 (same field names): what ``forward_decode`` /
    ``forward_extend`` read, live pages of the tables."""
    m = backend.forward_metadata
    lens = m.cache_seqlens_int32[:bs]
    out = {"cache_seqlens": (lens, None), "cu_seqlens_k": (m.cu_seqlens_k[: bs + 1], None),
           "page_table": (m.page_table[:bs], _live(lens, backend.page_size))}
    if m.cu_seqlens_q is not None:
        out["cu_seqlens_q"] = (m.cu_seqlens_q[: bs + 1], None)
    return out


def _fa3_topk_buffers(backend, bs: int, rows_per_req: int) -> dict:
    """FA3 with top-k > 1: the prefix half as ``_mha_buffers``, and the draft half
    (``forward_metadata_spec_decode_expand``: every draft row's table of draft slots or
    pages, its lengths and their sums; ``rows_per_req`` rows per request: the draft tokens
    in target verify, the branches in draft decode)."""
    out = _mha_buffers(backend, bs)
    m = backend.forward_metadata_spec_decode_expand
    if m is not None:
        rows = bs * rows_per_req
        out.update({"expand.cache_seqlens": (m.cache_seqlens_int32[:rows], None),
                    "expand.cu_seqlens_k": (m.cu_seqlens_k[: rows + 1], None),
                    "expand.page_table": (m.page_table[:rows], None)})
    return out


def _triton_buffers(backend, bs: int) -> dict:
    """Triton backend: what its decode kernels read (the kv index list up to kv_indptr[bs])."""
    m = backend.forward_metadata
    indptr = m.kv_indptr[: bs + 1]
    out = {"kv_indptr": (indptr, None), "kv_indices": (m.kv_indices[: int(indptr[-1])], None)}
    if m.num_kv_splits is not None:
        out["num_kv_splits"] = (m.num_kv_splits[:bs], None)
    if m.qo_indptr is not None:
        out["qo_indptr"] = (m.qo_indptr[: bs + 1], None)
    mask_indptr = getattr(m, "mask_indptr", None)
    if mask_indptr is not None:  # target verify: the custom mask's rows and the mask itself
        out["mask_indptr"] = (mask_indptr[: bs + 1], None)
        if getattr(m, "custom_mask", None) is not None:
            out["custom_mask"] = (m.custom_mask[: int(mask_indptr[bs])], None)
    return out


def _mla_buffers(backend, bs: int) -> dict:
    """TRT-LLM MLA: the graph's lengths and the live pages of its block table."""
    m = backend.decode_cuda_graph_metadata[bs]
    lens = m.seq_lens_k[:bs]
    out = {"seq_lens_k": (lens, None), "block_kv_indices": (m.block_kv_indices[:bs], _live(lens, backend.page_size))}
    if m.global_seq_lens_k is not None:
        out["global_seq_lens_k"] = (m.global_seq_lens_k[:bs], None)
    return out


def _flashmla_buffers(backend, bs: int) -> dict:
    """FlashMLA: the block table its decode kernel reads (whole rows: both sides start from the
    same fill and write the same live pages), the draft-extend lengths, and the split counts,
    which echo the key lengths the planner stand-in received."""
    m = backend.forward_metadata
    out = {"block_kv_indices": (m.block_kv_indices[:bs], None), "num_splits": (m.num_splits[: bs + 1], None)}
    if m.seq_lens_k is not None:
        out["seq_lens_k"] = (m.seq_lens_k[:bs], None)
    return out


def _dsa_buffers(backend, bs: int) -> dict:
    """DSA: the graph's metadata for ``bs``, rows up to each row's own length."""
    m = backend.decode_cuda_graph_metadata[bs]
    lens = m.cache_seqlens_int32[:bs]
    rows = m.page_table_1.shape[0] if m.page_table_1 is not None else bs
    row_lens = m.dsa_seqlens_expanded[:rows] if rows != bs else lens
    out = {"cache_seqlens": (lens, None), "cu_seqlens_k": (m.cu_seqlens_k[: bs + 1], None),
           "dsa_cache_seqlens": (m.dsa_cache_seqlens_int32[:rows], None),
           "dsa_cu_seqlens_k": (m.dsa_cu_seqlens_k[: rows + 1], None),
           "real_page_table": (m.real_page_table[:rows], _live(row_lens, backend.physical_page_size))}
    if m.flashmla_metadata is not None:  # the flashmla_kv decode: the planner's tensors
        out["flashmla_num_splits"] = (m.flashmla_metadata.num_splits[: rows + 1], None)
        out["flashmla_metadata"] = (m.flashmla_metadata.flashmla_metadata, None)
    if m.page_table_1 is not None:
        out["page_table_1"] = (m.page_table_1[:rows], row_lens.to(torch.int64))
    if rows != bs:
        out["seqlens_expanded"] = (m.dsa_seqlens_expanded[:rows], None)
    return out


def _flashinfer_buffers(backend, bs: int) -> dict:
    """FlashInfer: what its planner received (the planner itself is left out), the
    index list up to its kv_indptr[bs]: decode's static buffers, verify's and draft
    extend's arrays from the spec input."""
    m = backend.forward_metadata
    wrapper = (getattr(m, "decode_wrappers", None) or m.prefill_wrappers)[0]
    planned = wrapper.planned
    if getattr(m, "decode_wrappers", None) is not None:
        indptr, indices = planned[0][: bs + 1], planned[1]
        out = {}
    else:
        indptr, indices = planned[1][: bs + 1], planned[2]
        out = {"qo_indptr": (planned[0][: bs + 1], None)}
    out.update({"kv_indptr": (indptr, None), "kv_indices": (indices[: int(indptr[-1])], None)})
    return out


def _flashinfer_mla_buffers(backend, bs: int) -> dict:
    """FlashInfer MLA: what its planner received (the planner itself is left out: the
    host index arrays, the index list up to their kv_indptr[bs]), and the device
    kv_indptr decode writes beside them."""
    m = backend.forward_metadata
    decode = getattr(m, "decode_wrapper", None)
    qo_indptr, kv_indptr, kv_indices, kv_lens = (decode or m.prefill_wrapper).planned[:4]
    out = {"qo_indptr": (qo_indptr[: bs + 1], None), "kv_indptr": (kv_indptr[: bs + 1], None),
           "kv_indices": (kv_indices[: int(kv_indptr[bs])], None), "kv_len_arr": (kv_lens[:bs], None)}
    if decode is not None:
        out["device_kv_indptr"] = (backend.cuda_graph_kv_indptr[: bs + 1], None)
    return out


def _tree_mask(batch, device, seed: int) -> torch.Tensor:
    """A random EAGLE verify mask in SGLang's layout (request b's draft rows of seq_lens[b] + n
    entries, one request after another), sized for the lengths a run grows to."""
    gen = torch.Generator().manual_seed(seed)
    return (torch.rand(_verify_mask_size(batch), generator=gen) < 0.5).to(device)


def build(backend_name: str, mode: str, bs: int, context: int, device: str, seed: int = 0,
          max_len: Optional[int] = None) -> Setup:
    """Runner, backend and replay batch for one point; the backend's CUDA-graph state allocated
    (``max_len``: the lengths drawn as for that context, the backend sized for ``context``).
    A :data:`TOPK` label builds its backend with that EAGLE top-k, published as a server
    publishes it (FA3 reads it when built); a :data:`PAGE1` label at page size 1."""
    label = backend_name
    backend_name, topk = TOPK.get(label, (backend_name, 1))
    page_size = 1 if label in PAGE1 else PAGE_SIZE
    backend_name = PAGE1.get(label, backend_name)
    dsa_decode = DSA_DECODE.get(label)
    if dsa_decode is not None:
        backend_name = "dsa"
    if backend_name == "dsa":
        leave_out_planners()
        if dsa_decode == "flashmla_kv":
            leave_out_dsa_flashmla_planner()
        if device == "cpu":
            _host_only_dsa()
    if backend_name == "flashmla":
        leave_out_flashmla_planner()
    if backend_name in MLA:
        leave_out_mla_prebuild()
        if device == "cpu":
            _host_only_mla()
    if backend_name == "flashinfer":
        flashinfer_planner.install()
    if backend_name == "flashinfer_mla":
        flashinfer_planner.install_mla()
    runner = _runner(backend_name, mode, bs, context, device, dsa_decode, page_size)
    publish_page_size(page_size)
    if topk != 1:
        from sglang.srt.runtime_context import get_context

        get_context().override("sgl-meta step bench", speculative_eagle_topk=topk)
    backend = _backend(backend_name, mode, runner, topk)
    batch = _batch(runner, mode, bs, context, device, seed, topk, page_size, max_len)
    inner = getattr(backend, "attn_backends", None) or [backend]
    leave_out_scheduler(inner)
    tokens = batch.input_ids.numel()
    if backend_name in ("flashinfer", "flashinfer_mla") and mode == "target_verify":
        batch.spec_info.custom_mask = _verify_mask(batch, device)
    if topk > 1 and mode == "target_verify":
        batch.spec_info.custom_mask = _tree_mask(batch, device, seed)
    if backend_name == "flashinfer" and device == "cpu" and backend is not inner[0]:
        # The multi-step draft backend's kv indices (one row per step) allocate on "cuda" too.
        backend.cuda_graph_kv_indices = torch.zeros((len(inner) + 1, bs * topk * context), dtype=torch.int32)
        for i, b in enumerate(inner):
            b.init_cuda_graph_state(max_bs=bs * topk, max_num_tokens=tokens,
                                    kv_indices_buf=backend.cuda_graph_kv_indices[i])
    elif backend_name == "flashinfer" and device == "cpu":
        _host_only_flashinfer(backend, bs, tokens)
    elif backend_name == "flashmla" and device == "cpu":
        for b in inner:
            _host_only_flashmla(b, bs)
    elif backend_name in MLA and device == "cpu":
        # FlashInfer MLA's graph state allocates its kv index buffers on "cuda" unless given them.
        kv = torch.zeros((len(inner) + 1, bs * context), dtype=torch.int32)
        if backend is not inner[0]:
            backend.cuda_graph_kv_indices = kv
        for i, b in enumerate(inner):
            b.init_cuda_graph_state(bs, tokens, kv_indices_buf=kv[i])
    else:
        backend.init_cuda_graph_state(max_bs=bs, max_num_tokens=tokens)
    read = {"trtllm_mha": _mha_buffers, "fa3": _mha_buffers, "triton": _triton_buffers,
            "trtllm_mla": _mla_buffers, "flashinfer": _flashinfer_buffers,
            "flashmla": _flashmla_buffers, "flashinfer_mla": _flashinfer_mla_buffers}.get(backend_name,
                                                                                          _dsa_buffers)
    if topk > 1 and backend_name == "fa3":
        rows_per_req = topk if mode == "draft_decode" else SPEC_DRAFT_TOKENS
        read = lambda b, n: _fa3_topk_buffers(b, n, rows_per_req)  # noqa: E731

    def read_buffers() -> dict:
        out = {}
        for i, b in enumerate(inner):
            for name, value in read(b, bs).items():
                out[f"step{i}.{name}" if len(inner) > 1 else name] = value
        return out

    return Setup(label, mode, bs, context, backend, batch, read_buffers)

