"""Import stub for vLLM's FA2 extension (300 MB, not carried: scripts/pack_vllm.sh).

``vllm.vllm_flash_attn`` refuses to import without one of its extension modules, and
vLLM's attention utilities import it at module level; nothing the carry runs calls an
attention kernel (a call would fail: ``torch.ops._vllm_fa2_C`` has no ops).
"""
