"""Run in a fresh interpreter (the overlay venv) by test_load_general_plugins.py:
vLLM 0.33's own ``load_general_plugins()`` with sgl-meta's entry point visible,
then a JSON report on stdout's last line.

argv[1] = "before": import vLLM's model runner (and so BlockTables and the
input-batch functions) before the plugins load; "after": after.
argv[2] = "diff" (optional): then run the same random steps through vLLM's
BlockTables and input-batch functions, and the same random batches through its
FlashInfer backend's ``_compute_flashinfer_kv_metadata`` and direct launches of
``_copy_page_indices_kernel``, and the speculator's ``prepare_decode_inputs`` and
draft steps (``_generate_draft``, which launches ``update_draft_inputs``),
twice on CPU tensors, first with vLLM's own
Triton kernels (interpreted: the parent sets TRITON_INTERPRET=1 and an empty
CUDA_VISIBLE_DEVICES, under which vLLM keeps Triton on a machine without a
GPU), then with the plugin's replacements, and report every difference in what
they return and in every buffer and attribute they leave. The FlashInfer
backend imports flashinfer: the parent puts an import stub on the path.
"""

from __future__ import annotations

import importlib
import json
import math
import random
import sys
import types

MODEL_RUNNER = "vllm.v1.worker.gpu.model_runner"
FLASHINFER = "vllm.v1.attention.backends.flashinfer"
SPECULATOR = "vllm.v1.worker.gpu.spec_decode.target_dependent_ar.speculator"


def where(obj) -> str:
    func = getattr(obj, "func", obj)  # register_kernels' wrapper holds ours as func
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__name__', '?')}"


def resolved() -> dict:
    from vllm.v1.worker.gpu import block_table, input_batch

    out = {
        "BlockTables.compute_slot_mappings": where(block_table.BlockTables.compute_slot_mappings),
        "BlockTables.gather_block_tables": where(block_table.BlockTables.gather_block_tables),
        "_prepare_pos_seq_lens_kernel": where(input_batch._prepare_pos_seq_lens_kernel),
        "_combine_sampled_and_draft_tokens_kernel": where(input_batch._combine_sampled_and_draft_tokens_kernel),
    }
    speculator = importlib.import_module(SPECULATOR)
    out["_prepare_decode_inputs_kernel"] = where(speculator._prepare_decode_inputs_kernel)
    out["_update_draft_inputs_kernel"] = where(speculator._update_draft_inputs_kernel)
    runner = sys.modules.get(MODEL_RUNNER)
    if runner is not None:
        out["model_runner.BlockTables.compute_slot_mappings"] = where(runner.BlockTables.compute_slot_mappings)
    try:
        flashinfer = importlib.import_module(FLASHINFER)
    except ImportError:  # no flashinfer (nor its import stub) in this child
        pass
    else:
        out["_copy_page_indices_kernel"] = where(flashinfer._copy_page_indices_kernel)
    return out


# ---- the differential run -------------------------------------------------


def cpu_buffers() -> None:
    """vLLM's staging buffers on a machine without pinned memory or a GPU:
    its own fallbacks (NonUvaBuffer on the platform's device, pageable copies)."""
    import vllm.utils.torch_utils as torch_utils
    import vllm.v1.utils as v1_utils
    from vllm.platforms import current_platform
    from vllm.v1.worker.gpu import buffer_utils

    current_platform.device_type = "cpu"
    buffer_utils.is_uva_available = lambda: False
    torch_utils.PIN_MEMORY = v1_utils.PIN_MEMORY = False  # the latter: CpuGpuBuffer.copy_to_gpu's


def scenario(seed: int) -> list:
    """One random engine's worth of steps; returns every output and buffer."""
    import torch
    from vllm.v1.worker.gpu import input_batch
    from vllm.v1.worker.gpu.block_table import BlockTables

    rng = random.Random(seed)
    G = rng.choice([1, 2, 3])
    max_reqs, max_tokens, max_len, S = 6, 48, 40, rng.choice([1, 2, 3])
    cp_size = rng.choice([1, 1, 2, 4])
    sizes = [rng.choice([1, 2, 4, 16]) for _ in range(G)]
    widths = [max_len // b + 2 for b in sizes]
    bt = BlockTables(
        block_sizes=sizes, max_num_reqs=max_reqs, max_num_batched_tokens=max_tokens,
        max_num_blocks_per_group=widths, device=torch.device("cpu"),
        cp_size=cp_size, cp_rank=rng.randrange(cp_size), cp_interleave=rng.choice([1, sizes[0]]),
        slot_mapping_enabled=[rng.random() < 0.8 for _ in range(G)],
        dcp_sharded=[rng.random() < 0.6 for _ in range(G)],
        sliding_window_reach=[rng.choice([0, 0, 5, 17]) for _ in range(G)],
    )
    computed = torch.zeros(max_reqs, dtype=torch.int32)
    prefill_len = torch.tensor([rng.randrange(1, max_len) for _ in range(max_reqs)], dtype=torch.int32)
    last_sampled = torch.tensor([[rng.randrange(1000)] for _ in range(max_reqs)], dtype=torch.int64)
    draft = torch.tensor([[rng.randrange(1000) for _ in range(S)] for _ in range(max_reqs)], dtype=torch.int64)
    input_ids = torch.full((max_tokens,), -3, dtype=torch.int32)
    positions = torch.full((max_tokens,), -3, dtype=torch.int64)
    seq_lens = torch.full((max_reqs,), -3, dtype=torch.int32)
    record = []
    for step in range(5):
        for req in range(max_reqs):
            if rng.random() < 0.5:
                blocks = tuple([rng.randrange(1, 500) for _ in range(rng.randrange(0, 4))] for _ in range(G))
                if all(int(bt.num_blocks.np[g, req]) + len(blocks[g]) <= widths[g] for g in range(G)):
                    bt.append_block_ids(req, blocks, overwrite=rng.random() < 0.3)
        bt.apply_staged_writes()
        n = rng.randrange(1, max_reqs + 1)
        idx = torch.tensor(rng.sample(range(max_reqs), n), dtype=rng.choice([torch.int32, torch.int64]))
        qlens = [rng.randrange(1, 6) for _ in range(n)]
        for i, r in enumerate(idx.tolist()):  # keep every position inside the tables
            computed[r] = min(int(computed[r]), max_len - qlens[i])
        qsl = torch.zeros(max_reqs + 1, dtype=torch.int32)
        qsl[1: n + 1] = torch.tensor(qlens).cumsum(0)
        qsl[n + 1:] = qsl[n]
        qsl_view = qsl[: n + 1]
        k = rng.choice([0, 1])  # new sampled tokens per request besides the drafts
        num_logits = [rng.randrange(1, min(S + k, q) + 1) for q in qlens]
        cu = torch.zeros(n + 1, dtype=torch.int32)
        cu[1:] = torch.tensor(num_logits).cumsum(0)

        input_batch.prepare_pos_seq_lens(idx, qsl_view, computed, positions, seq_lens)
        logits = input_batch.combine_sampled_and_draft_tokens(
            input_ids, idx, last_sampled, qsl_view, seq_lens[:n], prefill_len, draft, cu, int(cu[-1]),
            k,
        )
        padded = min(n + rng.randrange(0, 2), max_reqs)
        tables = bt.gather_block_tables(idx, padded, num_computed_tokens=computed if rng.random() < 0.7 else None)
        padded_tokens = int(qsl[n]) + rng.randrange(0, 4)
        slots = bt.compute_slot_mappings(idx, qsl_view, positions, padded_tokens)
        dummy = bt.compute_slot_mappings(torch.tensor([-1] * n), qsl_view, positions, padded_tokens,
                                         out=torch.full_like(bt.slot_mappings, 9))
        record.append({
            "logits_indices": logits, "input_ids": input_ids.clone(), "positions": positions.clone(),
            "seq_lens": seq_lens.clone(), "tables": [t.clone() for t in tables],
            "input_block_tables": [t.clone() for t in bt.input_block_tables], "dirty": bt._num_dirty_rows,
            "slots": slots.clone(), "slot_mappings": bt.slot_mappings.clone(), "dummy": dummy.clone(),
            "shapes": [tuple(t.shape) for t in tables] + [tuple(slots.shape)],
        })
        for i, r in enumerate(idx.tolist()):
            computed[r] += qlens[i]
    return record


def page_index_cases(seed: int) -> list:
    """vLLM's FlashInfer page-index stream over random batches of 0, 1 and up to
    8 requests: the builder's ``_compute_flashinfer_kv_metadata`` (vLLM's method on
    a builder holding only the buffers it reads and writes, paged_kv_indices
    poisoned past what a batch writes), then a direct launch of its kernel as
    the method makes it, into an index buffer larger than needed from a
    ``cu_num_blocks`` that starts past 0 (BLOCK_SIZE 16 loops over a row).
    Block counts are ragged (0 included), tables wider than the longest row,
    sometimes a column slice (row stride past its width), with padded rows."""
    import numpy as np
    import torch
    from vllm.v1.utils import CpuGpuBuffer

    flashinfer = importlib.import_module(FLASHINFER)
    kernel = flashinfer._copy_page_indices_kernel
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    max_reqs, page = 10, rng.choice([1, 16])
    record = []
    for num_reqs in (0, 1, rng.randrange(2, max_reqs - 1)):
        width = rng.randrange(1, 40)
        counts = [rng.choice([0, width, rng.randrange(width + 1)]) for _ in range(num_reqs)]
        rows = num_reqs + rng.randrange(0, 2)
        wide = torch.randint(1, 2**31 - 1, (rows, width + rng.randrange(0, 5)), dtype=torch.int32, generator=gen)
        table = wide[:, :width] if rng.random() < 0.5 else wide
        seq_lens = np.array([0 if c == 0 else (c - 1) * page + rng.randrange(1, page + 1) for c in counts],
                            dtype=np.int32)
        builder = object.__new__(flashinfer.FlashInferMetadataBuilder)
        builder.paged_kv_indptr = CpuGpuBuffer(max_reqs + 1, dtype=torch.int32, device="cpu", pin_memory=False)
        builder.paged_kv_last_page_len = CpuGpuBuffer(max_reqs, dtype=torch.int32, device="cpu", pin_memory=False)
        builder.paged_kv_indices = torch.randint(-(2**31), 0, (max_reqs * 40,), dtype=torch.int32, generator=gen)
        returned = builder._compute_flashinfer_kv_metadata((seq_lens + page - 1) // page, seq_lens, table, num_reqs,
                                                           page)
        start = rng.randrange(0, 5)
        cu = torch.tensor(np.concatenate([[start], start + np.cumsum(counts, dtype=np.int64)]), dtype=torch.int32)
        direct = torch.randint(-(2**31), 0, (int(cu[-1]) + rng.randrange(1, 9),), dtype=torch.int32, generator=gen)
        kernel[(num_reqs,)](direct, table, table.stride(0), cu, BLOCK_SIZE=rng.choice([16, 1024]))
        record.append({"returned": returned.clone(), "shape": [tuple(returned.shape)],
                       "paged_kv_indices": builder.paged_kv_indices.clone(),
                       "paged_kv_indptr": builder.paged_kv_indptr.gpu.clone(),
                       "paged_kv_last_page_len": builder.paged_kv_last_page_len.gpu.clone(), "direct": direct})
    return record


def decode_input_cases(seed: int) -> list:
    """The speculator's ``prepare_decode_inputs`` (vLLM's function, its kernel
    launched as it launches it) over 0, 1 and up to 8 requests of 10 request
    rows: column 0 of int64 draft tokens, lengths anywhere or at the
    max_model_len clamps, positions advancing or not, vLLM's InputBuffers and
    sampling keys (read and advanced in place)."""
    import torch
    from vllm.v1.worker.gpu.input_batch import InputBuffers

    speculator = importlib.import_module(SPECULATOR)
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    max_reqs, max_model_len = 10, rng.choice([64, 4096])
    record = []
    for num_reqs in (0, 1, rng.randrange(2, max_reqs - 1)):
        advance = rng.random() < 0.7
        low = max_model_len - 3 if rng.random() < 0.5 else 0
        buffers = InputBuffers(max_reqs, 32, torch.device("cpu"))
        for t in (buffers.input_ids, buffers.query_start_loc, buffers.seq_lens):
            t.copy_(torch.randint(-(2**31), 2**31 - 1, tuple(t.shape), dtype=t.dtype, generator=gen))
        buffers.positions.copy_(torch.randint(low, max_model_len, tuple(buffers.positions.shape), generator=gen))
        draft = torch.randint(0, 2**33, (max_reqs, 3), dtype=torch.int64, generator=gen)
        target = torch.randint(low, max_model_len + 1, (num_reqs,), dtype=torch.int32, generator=gen)
        rejected = torch.randint(0, 4, (num_reqs,), dtype=torch.int32, generator=gen)
        sample = torch.randint(0, 2**40, (max_reqs,), dtype=torch.int64, generator=gen)
        speculator.prepare_decode_inputs(draft[:num_reqs, 0], target, rejected, buffers, sample, max_model_len,
                                         max_reqs, advance_draft_positions=advance)
        record.append({"input_ids": buffers.input_ids.clone(), "positions": buffers.positions.clone(),
                       "query_start_loc": buffers.query_start_loc.clone(), "seq_lens": buffers.seq_lens.clone(),
                       "sample_src_positions": sample})
    return record


def draft_step_cases(seed: int) -> list:
    """The speculator's draft decode steps: vLLM's own ``_generate_draft`` (on a
    speculator holding only the state it reads; the draft model's forward pass
    and the sampler are stand-ins returning random hidden states, bits NaNs
    included, over num_tokens_padded rows and random int64 tokens for the first
    num_reqs of them) over 1 and up to 8 requests of 10 request rows, every draft
    step of 2 to 4 in turn (the last writes its tokens only), as the decode loop
    fills ``current_draft_step``; bfloat16, float16 or float32 hidden sizes, a
    multiple of 8 or not, positions advancing or not (Gemma 4 MTP)."""
    import torch
    from vllm.v1.worker.gpu.input_batch import InputBuffers

    speculator = importlib.import_module(SPECULATOR)
    rng = random.Random(seed)
    gen = torch.Generator().manual_seed(seed)
    max_reqs, max_tokens, max_model_len = 10, 40, rng.choice([64, 4096])
    record = []
    for num_reqs in (1, rng.randrange(2, max_reqs - 1)):
        steps, advance = rng.choice([2, 3, 4]), rng.random() < 0.7
        dtype, hidden = rng.choice([torch.bfloat16, torch.float16, torch.float32]), rng.choice([8, 37, 64])
        bits = torch.int32 if dtype == torch.float32 else torch.int16
        # The flag as EAGLE / MTP (True) or Gemma 4 MTP (False) set it; no draft model to load.
        spec = object.__new__(type("Speculator", (speculator.TargetDependentARSpeculator,),
                                   {"advance_draft_positions": advance, "load_draft_model": None}))
        low = max_model_len - 3 if rng.random() < 0.5 else 0
        spec.input_buffers = InputBuffers(max_reqs, max_tokens, torch.device("cpu"))
        for t in (spec.input_buffers.input_ids, spec.input_buffers.seq_lens):
            t.copy_(torch.randint(low, max_model_len + 1, tuple(t.shape), dtype=t.dtype, generator=gen))
        spec.input_buffers.positions.copy_(torch.randint(low, max_model_len, (max_tokens,), generator=gen))
        spec.eplb_state = None
        spec.idx_mapping = torch.randperm(max_reqs, generator=gen)
        spec.temperature, spec.seeds, spec.draft_logits = None, None, None
        spec.sample_src_positions = torch.randint(0, 2**40, (max_reqs,), generator=gen)
        spec.draft_tokens = torch.randint(-(2**40), 0, (max_reqs, steps), generator=gen)
        spec.hidden_states = torch.randint(-(2**15), 2**15, (max_tokens, hidden), generator=gen).to(bits).view(dtype)
        spec.current_draft_step = torch.tensor(0)
        spec.vllm_config = types.SimpleNamespace(model_config=types.SimpleNamespace(max_model_len=max_model_len))
        num_tokens = num_reqs + rng.randrange(0, 4)
        for step in range(1, steps):
            out = torch.randint(-(2**15), 2**15, (max_tokens, hidden), generator=gen).to(bits).view(dtype)
            tokens = torch.randint(0, 2**33, (max_reqs,), generator=gen)
            spec._run_model = lambda n, *args, out=out: (out[:n], out[:n])
            spec.sample_draft = lambda hidden_states, *args, tokens=tokens: tokens[: hidden_states.shape[0]].clone()
            spec.current_draft_step.fill_(step)
            spec._generate_draft(num_reqs, num_tokens, None, None, None, None, steps)
            record.append({"draft_tokens": spec.draft_tokens.clone(), "hidden_states": spec.hidden_states.view(bits).clone(),
                           "input_ids": spec.input_buffers.input_ids.clone(),
                           "positions": spec.input_buffers.positions.clone(),
                           "seq_lens": spec.input_buffers.seq_lens.clone(),
                           "sample_src_positions": spec.sample_src_positions.clone()})
    return record


def differences(a, b, path="") -> list[str]:
    import torch

    if isinstance(a, dict):
        return [d for k in a for d in differences(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and a and not isinstance(a[0], int):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, torch.Tensor):
        same = a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
        return [] if same else [f"{path}: vLLM {a.tolist()} ours {b.tolist()}"]
    return [] if a == b else [f"{path}: vLLM {a} ours {b}"]


def differential(seeds: list[int]) -> dict:
    from sgl_meta.vllm import plugin

    cpu_buffers()
    plugin.uninstall()
    theirs_resolved = resolved()
    theirs = {s: scenario(s) for s in seeds}
    theirs_pages = {s: page_index_cases(s) for s in seeds}
    theirs_decode = {s: decode_input_cases(s) for s in seeds}
    theirs_drafts = {s: draft_step_cases(s) for s in seeds}
    usable, skipped = plugin.plan()
    plugin.install(usable)
    ours_resolved = resolved()
    ours = {s: scenario(s) for s in seeds}
    ours_pages = {s: page_index_cases(s) for s in seeds}
    ours_decode = {s: decode_input_cases(s) for s in seeds}
    ours_drafts = {s: draft_step_cases(s) for s in seeds}
    diffs = [f"seed {s} step {i}{d}" for s in seeds for i, (x, y) in enumerate(zip(theirs[s], ours[s]))
             for d in differences(x, y)]
    diffs += [f"seed {s} page-index batch {i}{d}" for s in seeds
              for i, (x, y) in enumerate(zip(theirs_pages[s], ours_pages[s])) for d in differences(x, y)]
    diffs += [f"seed {s} decode-input batch {i}{d}" for s in seeds
              for i, (x, y) in enumerate(zip(theirs_decode[s], ours_decode[s])) for d in differences(x, y)]
    diffs += [f"seed {s} draft step {i}{d}" for s in seeds
              for i, (x, y) in enumerate(zip(theirs_drafts[s], ours_drafts[s])) for d in differences(x, y)]
    return {"installed": [r.name for r, _ in usable], "skipped": [f"{r.name}: {w}" for r, w in skipped],
            "steps": sum(len(v) for v in theirs.values()),
            "page_index_batches": [len(x["returned"]) for v in theirs_pages.values() for x in v],
            "decode_input_batches": sum(len(v) for v in theirs_decode.values()),
            "draft_steps": [len(v) for v in theirs_drafts.values()],
            "differences": diffs[:20], "theirs_resolved": theirs_resolved, "ours_resolved": ours_resolved}


def main(when: str, diff: bool, seed: int) -> None:
    if when == "before":
        importlib.import_module(MODEL_RUNNER)
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    report = {"resolved": resolved()}
    if diff:
        rng = random.Random(seed)
        report["diff"] = differential([rng.randrange(2**31) for _ in range(12)])
    print(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], len(sys.argv) > 2 and sys.argv[2] == "diff", int(sys.argv[3]) if len(sys.argv) > 3 else 0)
