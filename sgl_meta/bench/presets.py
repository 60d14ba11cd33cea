"""Model presets: the serving shapes each benchmark run replays.

Numbers come from the models' published configs (Hugging Face ``config.json``)
and SGLang's launch recipes; each preset names its sources. Only the fields the
metadata ops see are kept: page size, context length, sliding window, the KV
pool capacity that bounds admission, and the speculative-decoding shape.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional

BACKEND_TRTLLM_MHA = "trtllm_mha"
BACKEND_DSA = "dsa"
BACKEND_FA3 = "fa3"
BACKEND_VLLM = "vllm"


@dataclass(frozen=True)
class Preset:
    """One model served by one attention backend.

    Attributes:
        name: CLI name (``--preset``).
        model: Hugging Face model id.
        backend: ``"trtllm_mha"``, ``"dsa"``, ``"fa3"`` or ``"vllm"`` (vLLM 0.33's Model
            Runner V2 with its FlashInfer backend); selects the workloads.
        page_size: tokens per KV page.
        context_len: max tokens per request (``max_position_embeddings``); the
            page-table width is ``ceil(context_len / page_size)``.
        kv_pool_tokens: full-attention KV pool capacity in tokens; admission
            waits when a request's whole length would not fit.
        swa_window: sliding-window size in tokens, or None (no SWA pool).
        spec: speculative decoding on by default.
        spec_steps: draft steps per decode step (EAGLE / MTP ``num_steps``).
        spec_draft_tokens: tokens verified per request (``num_draft_tokens``).
        dsa_topk: DSA indexer top-k (DeepSeek sparse attention), else None.
        unified_pool: SGLang's unified memory pool: ``req_to_token`` holds
            virtual ids, read tables translate them through ``v2p``, and pages
            move between steps (compaction); the KV read-table workloads run.
        flashmla_sched_shape: FlashMLA tile-scheduler metadata shape (int32).
        mtp_sets: DSA with MTP: the numbers K of draft graphs whose metadata one
            replay refreshes, each compared as generator + K copies vs one
            generating launch (``sgl_meta.bench.workloads.dsa_metadata``).
        sources: where the numbers come from.
    """

    name: str
    model: str
    backend: str
    page_size: int
    context_len: int
    kv_pool_tokens: int
    swa_window: Optional[int] = None
    spec: bool = False
    spec_steps: int = 3
    spec_draft_tokens: int = 4
    dsa_topk: Optional[int] = None
    flashmla_sched_shape: tuple = (66, 8)
    unified_pool: bool = False
    mtp_sets: tuple = ()
    sources: str = ""

    @property
    def max_pages(self) -> int:
        """Page-table width: pages of the longest possible request."""
        return -(-self.context_len // self.page_size)

    def with_overrides(self, **kw) -> "Preset":
        return dataclasses.replace(self, **{k: v for k, v in kw.items() if v is not None})


def _llama_8b(page_size: int) -> Preset:
    """Llama 3.1 8B on trtllm_mha: the two presets differ in the page size only."""
    return Preset(
        name=f"llama-3.1-8b-p{page_size}",
        model="meta-llama/Llama-3.1-8B-Instruct",
        backend=BACKEND_TRTLLM_MHA,
        page_size=page_size,
        context_len=131072,
        kv_pool_tokens=800_000,  # ~105 GB of bf16 KV (128 KiB per token) on one H200
        sources="config.json: max_position_embeddings=131072, no sliding window; "
        f"trtllm_mha with --page-size {page_size}",
    )


_GPT_OSS_120B = Preset(
    name="gpt-oss-120b",
    model="openai/gpt-oss-120b",
    backend=BACKEND_TRTLLM_MHA,
    page_size=64,
    context_len=131072,
    # ~60 GB of KV after the ~63 GB MXFP4 weights on one H200; the 18
    # full-attention layers hold 36 KiB per token.
    kv_pool_tokens=1_500_000,
    swa_window=128,
    spec=True,  # EAGLE3: four graph refreshes per decode step
    spec_steps=3,
    spec_draft_tokens=4,
    sources="config.json: sliding_window=128, max_position_embeddings=131072; "
    "SGLang gpt-oss recipe: --attention-backend trtllm_mha, page 64, "
    "EAGLE3 --speculative-num-steps 3 --speculative-eagle-topk 1 "
    "--speculative-num-draft-tokens 4",
)

PRESETS = {
    p.name: p
    for p in (
        _GPT_OSS_120B,
        dataclasses.replace(
            _GPT_OSS_120B,
            name="gpt-oss-120b-unified",
            unified_pool=True,
            sources="gpt-oss-120b above, on SGLang 0.5.23's unified memory pool (hybrid SWA: "
            "UnifiedSWAAllocator, full and sliding-window v2p page tables, eager compaction; "
            "KVIndexTranslator builds the read tables with build_kv_read_table[_packed])",
        ),
        _llama_8b(16),
        _llama_8b(64),
        Preset(
            name="deepseek-v3.2",
            model="deepseek-ai/DeepSeek-V3.2",
            backend=BACKEND_DSA,
            page_size=64,
            context_len=163840,
            kv_pool_tokens=4_000_000,  # MLA + FP8: well under 1 KiB per token per rank (TP8)
            spec=True,
            spec_steps=3,
            spec_draft_tokens=4,
            dsa_topk=2048,
            flashmla_sched_shape=(66, 8),  # 132 SMs / 2 partitions on H100/H200
            mtp_sets=(1, 2, 3, 5),  # draft backends refreshed per replay (3 = the copy-multi kernel's)
            sources="config.json: index_topk=2048, max_position_embeddings=163840; "
            "SGLang DSA backend: page 64, MTP --speculative-num-steps 3 "
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4; "
            "FlashMLA get_mla_metadata: tile_scheduler_metadata int32 [num_sm_parts, 8]",
        ),
        Preset(
            name="llama-3.1-8b-fa3",
            model="meta-llama/Llama-3.1-8B-Instruct",
            backend=BACKEND_FA3,
            page_size=1,
            context_len=131072,
            kv_pool_tokens=800_000,  # ~105 GB of bf16 KV (128 KiB per token) on one H200
            spec=True,
            spec_steps=3,
            spec_draft_tokens=4,
            sources="config.json: max_position_embeddings=131072, no sliding window; SGLang 0.5.23 "
            "get_default_attn_backend: fa3 on Hopper for MHA models without speculative decoding or "
            "with EAGLE top-k 1, page size 1 (the default); EAGLE --speculative-num-steps 3 "
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
        ),
        Preset(
            name="llama-3.1-8b-vllm",
            model="meta-llama/Llama-3.1-8B-Instruct",
            backend=BACKEND_VLLM,
            page_size=16,
            context_len=131072,
            kv_pool_tokens=800_000,  # ~105 GB of bf16 KV (128 KiB per token) on one H200
            sources="config.json: max_position_embeddings=131072, no sliding window; vLLM 0.33: "
            "block_size 16 (the CUDA default), Model Runner V2 (the default runner), the FlashInfer "
            "backend's paged decode metadata (vLLM's default attention backend on Blackwell)",
        ),
        Preset(
            name="deepseek-v3-fa3",
            model="deepseek-ai/DeepSeek-V3",
            backend=BACKEND_FA3,
            page_size=1,
            context_len=163840,
            # MLA keeps one 576-wide latent per token and layer (61 layers, bf16: ~69 KiB per
            # token, on every TP rank): ~27 GB beside ~86 GB of FP8 weights per H200 at TP 8.
            kv_pool_tokens=400_000,
            spec=True,
            spec_steps=3,
            spec_draft_tokens=4,
            sources="config.json: max_position_embeddings=163840, kv_lora_rank=512, "
            "qk_rope_head_dim=64, num_hidden_layers=61; SGLang 0.5.23 get_default_attn_backend: fa3 "
            "for MLA models on Hopper, page size 1 (the default); MTP --speculative-num-steps 3 "
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
        ),
    )
}

ALIASES = {
    "all": tuple(PRESETS),
    "llama-3.1-8b": ("llama-3.1-8b-p16", "llama-3.1-8b-p64"),
}


def resolve(names) -> list:
    """Expand CLI preset names (and aliases) to Preset objects, in order, once each."""
    out = []
    for name in names:
        for n in ALIASES.get(name, (name,)):
            if n not in PRESETS:
                choices = ", ".join(list(PRESETS) + list(ALIASES))
                raise ValueError(f"unknown preset {n!r}; choose from {choices}")
            if PRESETS[n] not in out:
                out.append(PRESETS[n])
    return out
