#!/usr/bin/env python3
"""Smoke test of an *installed* sgl_meta: import, operator registry, one call per op.

Run it with the interpreter that has the wheel installed, from outside the
source tree and in isolated mode, so a checkout cannot shadow the wheel:

    cd /tmp && python -I /path/to/scripts/wheel_smoke.py [--expect-cuda]

It needs only torch and the installed package (no pytest, no tests/), so it
runs the same way in the local wheel check (scripts/check_wheel.py), in
cibuildwheel's test step, and on a GPU machine next to any torch >= 2.10.

For every operator the binary registers under ``torch.ops.sgl_meta`` it checks
a CPU kernel, a CUDA kernel (``--expect-cuda``), a fake kernel, the public
wrapper ``sgl_meta.<op>`` and the eager reference ``sgl_meta.reference.<op>``,
then calls the op once on small random inputs with poisoned outputs and
compares every output with the reference: on CPU, and on CUDA too when a GPU
is present. The op list comes from the dispatcher (what the binary holds) and
must equal ``sgl_meta._op.OPS`` (the ops the package describes),
so a new op is picked up without editing this file; only its example inputs
must be added to ``EXAMPLES`` below, and a missing one fails the check.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import random
import sys
from pathlib import Path

import torch

import sgl_meta
import sgl_meta._op
import sgl_meta.reference

NAMESPACE = "sgl_meta"


def _poison(shape, dtype, gen):
    """Random garbage (never zeros): an element written wrongly, or not at all, shows."""
    return torch.randint(-(2**30), 2**30, shape, generator=gen, dtype=torch.int64).to(dtype)


def _trtllm_mha_example(gen):
    """Small decode-with-SWA case: every output written, -1 sentinels included."""
    bs, page_size, max_seq_pages, pool = 3, 4, 3, 4
    context = (max_seq_pages - 1) * page_size + 1 + 3
    slots = pool * context

    def ints(low, high, shape, dtype):
        return torch.randint(low, high, shape, generator=gen, dtype=dtype)

    inputs = dict(
        req_pool_indices=ints(0, pool, (bs,), torch.int64),
        seq_lens=ints(1, max_seq_pages * page_size + 1, (bs,), torch.int32),
        req_to_token=ints(-1, slots, (pool, context), torch.int32),
        swa_mapping=ints(-1, 4 * slots, (slots,), torch.int64),
        out_cache_loc=ints(-1, slots, (bs + 2,), torch.int64),
        qlens=ints(1, 5, (bs,), torch.int64),
    )
    rows, cols = bs + 1, max_seq_pages + 2
    outputs = dict(
        cache_seqlens=_poison((rows,), torch.int32, gen),
        cu_seqlens_k=_poison((rows + 1,), torch.int32, gen),
        page_table=_poison((rows, cols), torch.int32, gen),
        swa_page_table=_poison((rows, cols), torch.int32, gen),
        swa_out_cache_loc=_poison((bs + 4,), torch.int64, gen),
        cu_seqlens_q=_poison((rows + 1,), torch.int32, gen),
    )
    scalars = dict(
        bs=bs,
        seqlen_offset=1,
        max_seq_pages=max_seq_pages,
        page_size=page_size,
        q_mode=sgl_meta.Q_MODE_CUMSUM,
    )
    return inputs, outputs, scalars


def _trtllm_mha_multi_example(gen):
    """The decode example fanned out to three draft steps (offsets 1, 2, 3)."""
    inputs, outputs, scalars = _trtllm_mha_example(gen)
    sets = [outputs] + [{k: _poison(v.shape, v.dtype, gen) for k, v in outputs.items()} for _ in range(2)]
    outputs = {k: [s[k] for s in sets] for k in outputs}
    return inputs, outputs, {**scalars, "seqlen_offset": [1, 2, 3], "live_pages_only": True}


def _page_table_example(gen):
    """Rows of mixed lengths (some past the table width), SWA table wider than bs x W."""
    bs, page_size, width, pool = 3, 4, 4, 4
    context = width * page_size + 2
    slots = pool * context

    def ints(low, high, shape, dtype):
        return torch.randint(low, high, shape, generator=gen, dtype=dtype)

    inputs = dict(
        req_to_token=ints(-1, slots, (pool, context), torch.int32),
        req_pool_indices=ints(0, pool, (bs,), torch.int64),
        cache_seqlens=ints(0, (width + 1) * page_size, (bs,), torch.int32),
        full_to_swa=ints(-1, 4 * slots, (slots,), torch.int64),
    )
    outputs = dict(
        page_table=_poison((bs, width), torch.int32, gen),
        swa_page_table=_poison((bs + 1, width + 1), torch.int32, gen),
    )
    return inputs, outputs, dict(page_size=page_size)


def _dsa_copy_sets(gen, k_sets):
    """TARGET_VERIFY copy with every optional pair; k_sets=None: one set of tensors,
    else lists of k_sets tensors per destination field (the multi op)."""
    bs, draft, cols, real_cols = 2, 2, 5, 3
    rows = n = bs * draft

    def ints(*shape):
        return torch.randint(-(2**20), 2**20, shape, generator=gen, dtype=torch.int32)

    shapes = dict(cache_seqlens=(bs,), cu_seqlens_k=(bs + 1,), page_table_1=(rows, cols + 2),
                  dsa_cache_seqlens=(n,), seqlens_expanded=(n,), dsa_cu_seqlens_k=(n + 1,),
                  real_page_table=(rows, real_cols), flashmla_num_splits=(n + 1,), flashmla_metadata=(3, 8))
    inputs = {f"{k}_src": ints(*v) for k, v in shapes.items()}
    inputs["page_indices_src"] = inputs.pop("page_table_1_src")
    inputs["page_indices_src"] = inputs["page_indices_src"][:, :cols]
    if k_sets is None:
        outputs = {f"{k}_dst": _poison(v, torch.int32, gen) for k, v in shapes.items()}
    else:
        outputs = {f"{k}_dst": [_poison(v, torch.int32, gen) for _ in range(k_sets)] for k, v in shapes.items()}
    scalars = dict(bs=bs, forward_mode=sgl_meta.FORWARD_MODE_TARGET_VERIFY, max_len=cols,
                   max_seqlen_k=cols, seqlens_expanded_size=n)
    return inputs, outputs, scalars


def _kv_read_common(gen):
    """A unified pool: virtual ids with -1 slots, a shuffled v2p with a freed (-1) row."""
    bs, page_size, pool, context = 3, 4, 4, 22

    def ints(low, high, shape, dtype):
        return torch.randint(low, high, shape, generator=gen, dtype=dtype)

    v2p = torch.randperm(24, generator=gen)[:12]
    v2p[5] = -1
    inputs = dict(
        req_to_token=ints(-1, 12 * page_size, (pool, context), torch.int32),
        req_pool_indices=ints(0, pool, (bs,), torch.int64),
        seq_lens=ints(0, context + 6, (bs,), torch.int32),
        v2p=v2p,
        kv_start_idx=ints(0, 5, (bs,), torch.int64),
    )
    return inputs, bs, page_size, context


def _kv_read_page_table_example(gen):
    """Rows widened by seq_len_delta (some past max_pages), zero_tail, windows."""
    inputs, bs, page_size, _ = _kv_read_common(gen)
    outputs = dict(out=_poison((bs + 1, 8), torch.int32, gen))
    return inputs, outputs, dict(page_size=page_size, max_pages=6, seq_len_delta=2, zero_tail=True)


def _kv_read_token_stream_example(gen):
    """CSR rows with gaps at an odd offset, int64 ids."""
    inputs, bs, page_size, context = _kv_read_common(gen)
    inputs["indptr"] = torch.arange(bs + 1, dtype=torch.int32) * (context + 1) + 1
    outputs = dict(out=_poison(((context + 1) * bs + 3,), torch.int64, gen))
    return inputs, outputs, dict(page_size=page_size)


def _kv_indices_example(gen):
    """Triton-backend decode in one launch: verbatim slots (-1 included), windows,
    kv_indptr written, split counts for two groups, int64 ids."""
    inputs, bs, _, context = _kv_read_common(gen)
    inputs.pop("v2p")
    inputs["seq_lens"] = torch.randint(1, context - 4, (bs,), generator=gen, dtype=torch.int32)
    outputs = dict(kv_indptr=_poison((bs + 2,), torch.int32, gen), kv_indices=_poison((bs * context + 3,), torch.int64, gen),
                   num_kv_splits=_poison((2 * bs + 1,), torch.int32, gen), uneven_batch=_poison((1,), torch.int32, gen))
    return inputs, outputs, dict(write_indptr=True, num_group=2, num_head=32, num_kv_head=8, max_kv_splits=8,
                                 device_core_count=132)


def _dsa_gen_example(gen):
    """DSA target-verify metadata generated into K = 2 sets, every optional output,
    lengths short, zero and past the width (live prefixes only)."""
    bs, draft, width, page_size, pool = 3, 2, 9, 4, 4
    rows = bs * draft

    def ints(low, high, shape, dtype=torch.int32):
        return torch.randint(low, high, shape, generator=gen, dtype=dtype)

    inputs = dict(
        seq_lens=torch.tensor([0, 5, 30], dtype=torch.int64),
        req_pool_indices=ints(0, pool, (bs,), torch.int64),
        req_to_token=ints(-3, 1 << 20, (pool, width + 2)),
    )
    shapes = dict(cache_seqlens=(bs,), cu_seqlens_k=(bs + 1,), seqlens_expanded=(rows,),
                  dsa_cache_seqlens=(rows,), dsa_cu_seqlens_k=(rows + 1,), page_table_1=(rows + 1, width + 1),
                  real_page_table=(rows, 3), paged_mqa_ctx_lens_2d=(bs, draft))
    outputs = {k: [_poison(v, torch.int32, gen) for _ in range(2)] for k, v in shapes.items()}
    scalars = dict(forward_mode=sgl_meta.FORWARD_MODE_TARGET_VERIFY, bs=bs, max_seqlen_k=width,
                   dsa_index_topk=6, page_size=page_size, next_n=draft)
    return inputs, outputs, scalars


def _vllm_step(gen):
    """A vLLM step: 4 rows (one -1, a prefill chunk, decodes) over 6 request
    states, 2 KV-cache groups (block sizes 4 and 16, the second with a
    sliding-window reach), 2 padded rows, a padded token tail."""
    reqs, groups = 6, 2
    widths = (8, 3)
    tables = [torch.randint(0, 1 << 16, (reqs, w), generator=gen, dtype=torch.int32) for w in widths]
    inputs = dict(
        idx_mapping=torch.tensor([4, -1, 0, 2]),
        query_start_loc=torch.tensor([0, 1, 3, 8, 9], dtype=torch.int32),
        num_computed_tokens=torch.tensor([3, 9, 20, 1, 10, 7], dtype=torch.int32),
        src_block_tables=tables,
        num_blocks=torch.tensor([[2, 3, 7, 1, 4, 2], [1, 1, 2, 1, 1, 1]], dtype=torch.int32),
        block_sizes=torch.tensor([4, 16], dtype=torch.int32),
        slot_mapping_enabled=torch.tensor([True, True]),
        dcp_sharded=torch.tensor([True, False]),
        sliding_window_reach=torch.tensor([0, 4], dtype=torch.int32),
    )
    outputs = dict(pos=_poison((12,), torch.int64, gen), seq_lens=_poison((reqs,), torch.int32, gen),
                   dst_block_tables=[_poison((6, w), torch.int32, gen) for w in widths],
                   slot_mappings=_poison((groups, 12), torch.int64, gen))
    return inputs, outputs


def _vllm_prepare_step_example(gen):
    inputs, outputs = _vllm_step(gen)
    return inputs, outputs, dict(num_rows=6, mask_sliding_window=True)


def _vllm_slot_mappings_example(gen):
    inputs, outputs = _vllm_step(gen)
    inputs = {k: inputs[k] for k in ("idx_mapping", "query_start_loc", "block_sizes", "slot_mapping_enabled",
                                     "dcp_sharded")} | dict(block_tables=inputs["src_block_tables"])
    inputs["positions"] = torch.tensor([10, 0, 1, 20, 21, 22, 23, 24, 7, -5, -5, -5])
    return inputs, dict(slot_mappings=outputs["slot_mappings"]), dict(cp_rank=1, cp_size=2)


def _vllm_gather_example(gen):
    inputs, outputs = _vllm_step(gen)
    keep = ("idx_mapping", "src_block_tables", "num_blocks", "num_computed_tokens", "sliding_window_reach",
            "block_sizes")
    return {k: inputs[k] for k in keep}, dict(dst_block_tables=outputs["dst_block_tables"]), dict(num_rows=6)


def _vllm_pos_example(gen):
    inputs, outputs = _vllm_step(gen)
    keep = ("idx_mapping", "query_start_loc", "num_computed_tokens")
    return {k: inputs[k] for k in keep}, dict(pos=outputs["pos"], seq_lens=outputs["seq_lens"]), {}


def _vllm_combine_example(gen):
    """Rows: prompt (no token written), crossing the prompt's end (drafts only),
    generating (sampled + drafts), -1 (logits indices only)."""
    inputs = dict(
        idx_mapping=torch.tensor([0, 1, 2, -1]),
        last_sampled_tokens=torch.randint(0, 1 << 40, (4, 1), generator=gen),
        query_start_loc=torch.tensor([0, 4, 7, 10, 11], dtype=torch.int32),
        seq_lens=torch.tensor([4, 12, 30, 5], dtype=torch.int32),
        prefill_len=torch.tensor([9, 11, 5, 0], dtype=torch.int32),
        draft_tokens=torch.randint(0, 1 << 33, (4, 2), generator=gen),
        cu_num_logits=torch.tensor([0, 1, 4, 7, 8], dtype=torch.int32),
    )
    outputs = dict(input_ids=_poison((13,), torch.int32, gen), logits_indices=_poison((8,), torch.int64, gen))
    return inputs, outputs, dict(num_new_sampled_tokens=1)
def _vllm_copy_pages_example(gen):
    """Three requests' block-table rows (one empty) into FlashInfer's page stream, a poisoned tail."""
    inputs = dict(block_table=torch.randint(0, 1 << 20, (4, 6), generator=gen, dtype=torch.int32),
                  cu_num_blocks=torch.tensor([0, 5, 5, 8], dtype=torch.int32))
    return inputs, dict(page_indices=_poison((10,), torch.int32, gen)), {}


def _vllm_decode_inputs_example(gen):
    """Three requests of five rows, one at the max_model_len clamps; positions advance."""
    inputs = dict(draft_tokens=torch.randint(0, 1 << 33, (3, 2), generator=gen),
                  target_seq_lens=torch.tensor([7, 100, 40], dtype=torch.int32),
                  num_rejected=torch.tensor([0, 0, 2], dtype=torch.int32))
    outputs = dict(input_ids=_poison((4,), torch.int32, gen), positions=torch.tensor([5, 99, 30, 8]),
                   sample_src_positions=torch.tensor([6, 100, 31, 9]), query_start_loc=_poison((6,), torch.int32, gen),
                   seq_lens=_poison((5,), torch.int32, gen))
    return inputs, outputs, dict(max_model_len=100, max_num_reqs=5, advance_draft_positions=True)


def _vllm_draft_inputs_example(gen):
    """Three requests at draft step 1 of 3 (the next step's inputs written), bfloat16 rows of 12,
    one request at the max_model_len clamps."""
    inputs = dict(draft_tokens=torch.randint(0, 1 << 33, (3,), generator=gen), current_draft_step=torch.tensor(1),
                  hidden_states=torch.randn(4, 12, generator=gen).to(torch.bfloat16))
    outputs = dict(output_draft_tokens=_poison((5, 3), torch.int64, gen),
                   next_input_hidden_states=_poison((5, 16), torch.bfloat16, gen),
                   input_ids=_poison((4,), torch.int32, gen), positions=torch.tensor([5, 99, 30, 8]),
                   seq_lens=torch.tensor([6, 100, 31, 9], dtype=torch.int32),
                   sample_src_positions=torch.tensor([6, 100, 31, 9]))
    return inputs, outputs, dict(max_model_len=100, num_speculative_steps=3, advance_draft_positions=True)


def _flash_attention_example(gen):
    """FlashAttention metadata into K = 2 sets (deltas 1 and 2): unified-pool v2p tables with
    unbound (-1) pages, zero_tail, draft-extend's cu_seqlens_q and SWA write ids."""
    bs, page_size, pool, pages = 3, 4, 4, 5

    def ints(low, high, shape, dtype=torch.int64):
        return torch.randint(low, high, shape, generator=gen, dtype=dtype)

    full_v2p, swa_v2p = ints(-1, 40, (30,)), ints(-1, 40, (30,))
    inputs = dict(
        req_to_token=ints(-1, 30 * page_size, (pool, pages * page_size), torch.int32),
        req_pool_indices=ints(0, pool, (bs,)),
        seq_lens=torch.tensor([0, 7, 30], dtype=torch.int32),
        extend_seq_lens=torch.tensor([1, 2, 2], dtype=torch.int32),
        full_to_swa_index_mapping=ints(0, 500, (30 * page_size,)),
        full_v2p=full_v2p,
        swa_v2p=swa_v2p,
        out_cache_loc=ints(-1, 30 * page_size, (6,)),
    )
    outputs = dict(
        cache_seqlens=[_poison((bs,), torch.int32, gen) for _ in range(2)],
        cu_seqlens_k=[_poison((bs + 1,), torch.int32, gen) for _ in range(2)],
        page_table=[_poison((bs, pages + 1), torch.int32, gen) for _ in range(2)],
        swa_page_table=[_poison((bs, pages + 1), torch.int32, gen) for _ in range(2)],
        cu_seqlens_q=_poison((bs + 1,), torch.int32, gen),
        swa_out_cache_loc=_poison((6,), torch.int64, gen),
    )
    return inputs, outputs, dict(seq_len_delta=[1, 2], bs=bs, max_seq_pages=pages, page_size=page_size,
                                 zero_tail=True)


def _flash_attention_swa_spec_example(gen):
    """The SWA speculative concat, 2 requests x 3 draft branches, a length past its table."""
    def ints(low, high, shape, dtype=torch.int32):
        return torch.randint(low, high, shape, generator=gen, dtype=dtype)

    inputs = dict(page_table_a=ints(0, 99, (2, 6)), page_table_b=ints(100, 199, (6, 3)),
                  seq_len_a=torch.tensor([4, 6], dtype=torch.int32), seq_len_b=ints(0, 5, (6,)))
    return inputs, dict(page_table_dst=_poison((6, 10), torch.int32, gen)), dict(speculative_num_draft_tokens=3)


def _flash_attention_verify_expand_example(gen):
    """FA3 top-k > 1 verify's draft half: 2 requests x 3 draft tokens, a random tree mask."""
    seq = torch.tensor([5, 2], dtype=torch.int64)
    inputs = dict(custom_mask=torch.rand(int((seq + 3).sum()) * 3, generator=gen) < 0.5,
                  req_to_token=torch.randint(0, 999, (3, 12), generator=gen, dtype=torch.int32),
                  req_pool_indices=torch.tensor([2, 0], dtype=torch.int64), seq_lens=seq)
    outputs = dict(page_table=_poison((6, 3), torch.int32, gen), cache_seqlens=_poison((6,), torch.int32, gen),
                   cu_seqlens_k=_poison((7,), torch.int32, gen))
    return inputs, outputs, dict(bs=2, num_draft_tokens=3, mask_rows=6)


def _flash_attention_draft_decode_topk_example(gen):
    """FA3 top-k > 1 draft decode, 2 requests x 2 branches x 3 steps, two step sets, page 4."""
    inputs = dict(req_to_token=torch.randint(0, 999, (3, 16), generator=gen, dtype=torch.int32),
                  req_pool_indices=torch.tensor([2, 0], dtype=torch.int64),
                  seq_lens=torch.tensor([9, 14], dtype=torch.int64),
                  out_cache_loc=torch.tensor([41, 42, 43, 45, 46, 47, 62, 63, 64, 70, 71, 72], dtype=torch.int64))
    outputs = dict(cache_seqlens=[_poison((2,), torch.int32, gen) for _ in range(2)],
                   page_table=[_poison((2, 4), torch.int32, gen) for _ in range(2)],
                   expand_cache_seqlens=[_poison((4,), torch.int32, gen) for _ in range(2)],
                   expand_page_table=[_poison((4, 3), torch.int32, gen) for _ in range(2)])
    return inputs, outputs, dict(bs=2, topk=2, num_steps=3, decode_length=[1, 2], page_size=4, max_seq_pages=4)


def _draft_kv_indices_example(gen):
    """EAGLE draft decode, 3 steps x 2 branches, pages of 4 (chains a page apart), a window of 6 with 2 sinks,
    a request with no tokens, int64 ids, int32 row starts."""
    inputs = dict(req_to_token=torch.randint(-3, 1 << 20, (4, 40), generator=gen, dtype=torch.int32),
                  req_pool_indices=torch.tensor([3, 0, 2]), seq_lens=torch.tensor([17, 0, 9], dtype=torch.int32),
                  positions=torch.tensor([18, 18, 1, 1, 10, 10]))
    outputs = dict(kv_indices=_poison((3, 80), torch.int64, gen), kv_indptr=_poison((3, 8), torch.int32, gen))
    return inputs, outputs, dict(topk=2, num_steps=3, page_size=4, window_size=6, sink_size=2)


# op name -> fn(generator) -> (input tensors, poisoned output tensors -- or lists
# of them for a multi-destination op --, scalars), all on CPU. Add one per new op.
EXAMPLES = {
    "update_trtllm_mha_graph_metadata": _trtllm_mha_example,
    "build_trtllm_mha_page_table": _page_table_example,
    "fused_metadata_copy": lambda gen: _dsa_copy_sets(gen, None),
    "fused_metadata_copy_multi": lambda gen: _dsa_copy_sets(gen, 2),
    "kv_read_page_table": _kv_read_page_table_example,
    "kv_read_token_stream": _kv_read_token_stream_example,
    "fused_dsa_metadata": _dsa_gen_example,
    "update_trtllm_mha_graph_metadata_multi": _trtllm_mha_multi_example,
    "vllm_compute_slot_mappings": _vllm_slot_mappings_example,
    "vllm_gather_block_tables": _vllm_gather_example,
    "vllm_prepare_pos_seq_lens": _vllm_pos_example,
    "vllm_combine_sampled_and_draft_tokens": _vllm_combine_example,
    "vllm_prepare_step": _vllm_prepare_step_example,
    "vllm_copy_page_indices": _vllm_copy_pages_example,
    "vllm_prepare_decode_inputs": _vllm_decode_inputs_example,
    "vllm_update_draft_inputs": _vllm_draft_inputs_example,
    "update_flash_attention_metadata": _flash_attention_example,
    "flash_attention_swa_spec_page_table": _flash_attention_swa_spec_example,
    "flash_attention_verify_expand": _flash_attention_verify_expand_example,
    "flash_attention_draft_decode_topk": _flash_attention_draft_decode_topk_example,
    "build_kv_indices": _kv_indices_example,
    "build_draft_decode_kv_indices": _draft_kv_indices_example,
}


def _to(value, device):
    return [v.to(device) for v in value] if isinstance(value, list) else value.to(device)


def _flat(value):
    """One CPU tensor of every element of a tensor or a list of tensors."""
    return torch.cat([v.cpu().flatten() for v in (value if isinstance(value, list) else [value])])


def registered_ops() -> list[str]:
    """Names the loaded binary registered under the namespace (the dispatcher's view)."""
    prefix = f"{NAMESPACE}::"
    return sorted(n[len(prefix):] for n in torch._C._dispatch_get_all_op_names() if n.startswith(prefix))


def declared_ops() -> list[str]:
    return sorted(sgl_meta._op.OPS)


def check_op(name: str, devices: list[str], expect_cuda: bool, seed: int) -> list[str]:
    """Returns the problems found with one op (empty when it is fine)."""
    problems = []
    qualified = f"{NAMESPACE}::{name}"
    keys = ["CPU", "Meta"] + (["CUDA"] if expect_cuda else [])
    for key in keys:
        if not torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key):
            problems.append(f"no {key} kernel registered")
    wrapper = getattr(sgl_meta, name, None)
    reference = getattr(sgl_meta.reference, name, None)
    if wrapper is None:
        problems.append(f"no public wrapper sgl_meta.{name}")
    if reference is None:
        problems.append(f"no eager reference sgl_meta.reference.{name}")
    example = EXAMPLES.get(name)
    if example is None:
        problems.append(f"no example inputs: add one to EXAMPLES in {Path(__file__).name}")
    if problems:
        return problems
    for device in devices:
        gen = torch.Generator().manual_seed(seed)
        inputs, outputs, scalars = example(gen)
        inputs = {k: _to(v, device) for k, v in inputs.items()}
        ours = {k: _to(v, device) for k, v in outputs.items()}
        want = {k: _to(v, device) for k, v in outputs.items()}
        wrapper(**inputs, **ours, **scalars)
        reference(**inputs, **want, **scalars)
        for out_name in outputs:
            got, expected = _flat(ours[out_name]), _flat(want[out_name])
            if not torch.equal(got, expected):
                bad = int((got != expected).sum())
                problems.append(f"{device}: {out_name} differs from the reference in {bad} elements")
    return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--expect-cuda", action="store_true", help="require CUDA kernels (a CUDA build)")
    parser.add_argument("--expect-under", help="require the package to be installed under this directory")
    args = parser.parse_args()

    package_dir = Path(sgl_meta.__file__).resolve().parent
    cuda_device = torch.cuda.is_available()
    print(
        f"wheel smoke: sgl-meta {importlib.metadata.version('sgl-meta')} from {package_dir}; torch {torch.__version__} "
        f"(CUDA {torch.version.cuda}), Python {sys.version.split()[0]}, GPU: "
        f"{torch.cuda.get_device_name() if cuda_device else 'none'}"
    )
    failures = []
    if (package_dir.parent / "setup.py").exists():
        failures.append(f"sgl_meta was imported from a source tree ({package_dir}), not an installed wheel")
    if args.expect_under and not package_dir.is_relative_to(Path(args.expect_under).resolve()):
        failures.append(f"sgl_meta was imported from {package_dir}, not from under {args.expect_under}")

    registered, declared = registered_ops(), declared_ops()
    if registered != declared:
        failures.append(
            f"ops registered by the binary {registered} != ops described in sgl_meta._op {declared}"
        )
    devices = ["cpu"] + (["cuda"] if cuda_device else [])
    seed = random.randrange(2**31)
    for name in sorted(set(registered) | set(declared)):
        problems = check_op(name, devices, args.expect_cuda, seed)
        status = "ok" if not problems else "FAILED: " + "; ".join(problems)
        print(f"  {name}: {status}")
        failures += [f"{name}: {p}" for p in problems]

    # The SGLang plugin (docs/sglang.md): its entry point is in the installed
    # metadata and loads without SGLang.
    plugin = [ep for ep in importlib.metadata.entry_points(group="sglang.srt.plugins") if ep.name == "sgl_meta"]
    if [ep.value for ep in plugin] != ["sgl_meta.sglang.plugin:register"] or not callable(plugin[0].load()):
        failures.append(f"sglang.srt.plugins entry point sgl_meta missing or wrong: {plugin}")
    else:
        print("  SGLang plugin entry point: ok")

    if failures:
        print(f"wheel smoke FAILED (seed {seed}):", *failures, sep="\n  ", file=sys.stderr)
        return 1
    kernels = "CPU + CUDA" if args.expect_cuda else "CPU"
    print(f"wheel smoke: OK, {len(registered)} op(s), {kernels} kernels registered, called on {' + '.join(devices)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
