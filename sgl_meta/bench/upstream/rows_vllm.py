"""vLLM 0.33 rows: Model Runner V2's per-step metadata functions beside ours.

Upstream is the importable ``vllm`` 0.33.0 itself: ``BlockTables`` (its methods
``compute_slot_mappings`` and ``gather_block_tables``) and ``input_batch``'s
``prepare_pos_seq_lens`` and ``combine_sampled_and_draft_tokens``, each
launching vLLM's own Triton kernel, called with the arguments
``GPUModelRunner.prepare_inputs`` / ``prepare_attn`` pass (the runner's
persistent buffers, ``num_reqs_padded``, ``num_tokens_padded``); and the FlashInfer
backend's ``_copy_page_indices_kernel``, launched as
``FlashInferMetadataBuilder._compute_flashinfer_kv_metadata`` launches it. When vLLM
is not importable (the project venv, CI) or sgl-meta's vLLM plugin already
replaced those methods in this process, every row is skipped and says why; the
FlashInfer rows also where vLLM's FlashInfer backend does not import (it needs
flashinfer).

Ours: for the two ``BlockTables`` methods, the plugin's replacement methods
(``sgl_meta.vllm.replacements``, what vLLM runs with sgl-meta installed) on a
second ``BlockTables`` of the same configuration and contents; for the input
batch, the ops themselves (with the plugin, vLLM's function reaches them
through its kernel dispatcher). The fused row: vLLM's ``prepare_pos_seq_lens``
+ ``gather_block_tables`` + ``compute_slot_mappings`` back to back (what one
step runs) vs one ``vllm_prepare_step`` launch. FlashInfer's page indices: the
step's gathered table (group 0's rows of the batch) and ``paged_kv_indptr`` (the
running sum of the requests' block counts) into ``paged_kv_indices``.

The engine: block size 16, ``max_model_len`` 8192 (512-block tables),
``max_num_reqs`` 512, ``max_num_batched_tokens`` 8192, 1 KV-cache group (full
attention) or 2 (full + a 128-token sliding window, as gpt-oss: reach 127).
Steps: decode at batch 64 and 256 (CUDA-graph sizes, so padded = real), a
speculative decode (3 drafts), and a mixed step (decodes + a new and a
continuing prefill chunk). Contexts uniform up to 8k.

What upstream defines (``regions``): each gathered row's first ``num_blocks``
entries and the padded rows, the whole slot-mapping buffer (the kernel pads
its tail), the batch's positions, the whole ``seq_lens`` buffer, the
``input_ids`` entries vLLM's combine writes, all ``logits_indices``, the
``paged_kv_indices`` view vLLM's FlashInfer backend passes (the step's pages);
for the speculator's draft-step update, column ``step`` of the batch's rows of the
draft-token table and the batch's rows of the next step's inputs.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import types
from importlib import metadata
from typing import Optional

import torch

import sgl_meta
from sgl_meta import reference

from .fixtures import Row, RowSpec, generator

FAMILY = "vllm"  # the Probe.missing key of these rows
FLASHINFER = "vllm flashinfer"  # and of the FlashInfer backend's rows besides (its module needs flashinfer)
GROUP = "vllm 0.33"
VLLM_VERSION = "0.33.0"
BLOCK = 16
MAX_MODEL_LEN = 8192
WIDTH = MAX_MODEL_LEN // BLOCK
MAX_REQS = 512
MAX_TOKENS = 8192
WINDOW_REACH = 127  # SlidingWindowSpec.num_retained_tokens of a 128-token window
SPEC_STEPS = 3
DRAFT_STEP = 1  # the draft step the update rows record (not the last: every input is written)
HIDDEN = 4096  # the draft model's hidden size (Llama 3.1 8B's EAGLE head), bfloat16
# vLLM's default cudagraph capture sizes up to 512: 1, 2, 4, then every 8.
CAPTURE_SIZES = (1, 2, 4) + tuple(range(8, 513, 8))
COPY_PAGES_BLOCK = 1024  # the BLOCK_SIZE _compute_flashinfer_kv_metadata launches _copy_page_indices_kernel with
IMPLS = ("upstream", "ours", "ref")


# -- vLLM ---------------------------------------------------------------------------------


def why_unavailable() -> Optional[str]:
    """Why these rows cannot run in this process, or None."""
    if importlib.util.find_spec("vllm") is None:
        return (f"no vllm: vllm=={VLLM_VERSION} is not importable (GPU machine: the carry of scripts/pack_vllm.sh, "
                "docs/vllm.md)")
    try:
        version = metadata.version("vllm")
    except metadata.PackageNotFoundError:
        version = None
    if version != VLLM_VERSION:
        return f"vllm {version} installed; these rows are written for {VLLM_VERSION}"
    try:
        v = vllm()
    except Exception as e:  # a missing dependency of vLLM's modules
        return f"vllm's Model Runner V2 modules do not import: {type(e).__name__}: {e}"
    for meth in ("compute_slot_mappings", "gather_block_tables"):
        if getattr(v.BlockTables, meth).__module__.startswith("sgl_meta"):
            return f"sgl-meta's vLLM plugin replaced BlockTables.{meth} in this process (SGLMETA_VLLM_PLUGIN=0)"
    return None


def why_no_flashinfer() -> Optional[str]:
    """Why the FlashInfer backend's rows cannot run in this process (where the
    others can), or None."""
    try:
        kernel = flashinfer_backend()._copy_page_indices_kernel
    except ImportError as e:
        missing = getattr(e, "name", None) or ""
        if missing and not missing.startswith("vllm"):
            return f"no {missing}: vLLM's FlashInfer backend (vllm.v1.attention.backends.flashinfer) imports it"
        return f"vLLM's FlashInfer backend does not import: {type(e).__name__}: {e}"
    if getattr(getattr(kernel, "func", None), "__module__", "").startswith("sgl_meta"):
        return "sgl-meta's vLLM plugin replaced _copy_page_indices_kernel in this process (SGLMETA_VLLM_PLUGIN=0)"
    return None


def why_not_on(device) -> Optional[str]:
    """Why these rows cannot run on ``device`` in this process, or None: vLLM's
    ``BlockTables`` pins host memory, which needs a CUDA driver."""
    reason = why_unavailable()
    if reason is None and torch.device(device).type != "cuda":
        reason = "vLLM's BlockTables pins host memory: the vLLM rows need a CUDA device"
    return reason


@functools.lru_cache(maxsize=1)
def vllm():
    from vllm.v1.attention.backends.utils import PAD_SLOT_ID
    from vllm.v1.worker.gpu import block_table, input_batch

    return _Vllm(block_table.BlockTables, block_table, input_batch, PAD_SLOT_ID)


@dataclasses.dataclass(frozen=True)
class _Vllm:
    BlockTables: type
    block_table: object
    input_batch: object
    pad_slot_id: int

    def kernels(self) -> list:
        return [self.block_table._gather_block_tables_kernel, self.block_table._compute_slot_mappings_kernel,
                self.input_batch._prepare_pos_seq_lens_kernel, self.input_batch._combine_sampled_and_draft_tokens_kernel]


@functools.lru_cache(maxsize=1)
def speculator():
    """vLLM's target-dependent speculator module (EAGLE, MTP), where ``prepare_decode_inputs`` lives."""
    from vllm.v1.worker.gpu.spec_decode.target_dependent_ar import speculator as module

    return module


@functools.lru_cache(maxsize=1)
def flashinfer_backend():
    """vLLM's ``vllm.v1.attention.backends.flashinfer`` (apart from :func:`vllm`: it imports flashinfer)."""
    from vllm.v1.attention.backends import flashinfer

    return flashinfer


# -- one engine and step ------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Step:
    name: str
    decode: int  # decode requests, 1 + drafts tokens each
    drafts: int = 0
    prefill: tuple = ()  # (chunk length, computed before the chunk) of prefilling requests


DECODE_64 = Step("decode bs64", 64)
DECODE_256 = Step("decode bs256", 256)
SPEC_64 = Step(f"spec decode bs64 x (1 + {SPEC_STEPS} drafts)", 64, drafts=SPEC_STEPS)
MIXED = Step("mixed: 96 decodes + prefill chunks 2048 (new) and 1536 (at 4096)", 96, prefill=((2048, 0), (1536, 4096)))
CAPTURE = Step("decode bs512", 512)  # the cold start's largest capture size, sliced per bucket


class Engine:
    """One ``BlockTables`` per implementation (same configuration and contents),
    the runner's request state and a step's inputs; per-implementation outputs."""

    def __init__(self, ctx, groups: int, step: Step):
        v, dev = vllm(), ctx.device
        gen = torch.Generator().manual_seed(ctx.seed * 7919 + 331 + groups)
        R, G = MAX_REQS, groups
        self.step, self.groups = step, G
        self.reach = [0, WINDOW_REACH][:G] if G > 1 else [0]
        self.bt = {impl: v.BlockTables(block_sizes=[BLOCK] * G, max_num_reqs=R, max_num_batched_tokens=MAX_TOKENS,
                                       max_num_blocks_per_group=[WIDTH] * G, device=dev,
                                       sliding_window_reach=list(self.reach)) for impl in IMPLS}
        q = [1 + step.drafts] * step.decode + [c for c, _ in step.prefill]
        n = self.n = len(q)
        rows = torch.randperm(R, generator=gen)[:n]
        computed = torch.randint(1, MAX_MODEL_LEN - 8, (R,), generator=gen)
        decode_ctx = torch.randint(1, MAX_MODEL_LEN - step.drafts - 1, (step.decode,), generator=gen)
        computed[rows[: step.decode]] = decode_ctx
        for i, (_, before) in enumerate(step.prefill):
            computed[rows[step.decode + i]] = before
        qlen = torch.zeros(R, dtype=torch.int64)
        qlen[rows] = torch.tensor(q)
        nb = ((computed + qlen.clamp(min=1) + BLOCK - 1) // BLOCK).clamp(max=WIDTH).to(torch.int32)
        for bt in self.bt.values():
            for g in range(G):
                src = torch.randint(1, R * WIDTH, (R, WIDTH), generator=torch.Generator().manual_seed(ctx.seed + g),
                                    dtype=torch.int32)
                bt.block_tables[g].gpu.copy_(src.to(dev))
                bt.num_blocks.np[g, :] = nb.numpy()
            bt.num_blocks.copy_to_uva()
        qsl = torch.zeros(R + 1, dtype=torch.int32)
        qsl[1: n + 1] = torch.tensor(q).cumsum(0)
        qsl[n + 1:] = qsl[n]
        self.num_tokens = int(qsl[n])
        self.num_tokens_padded = self.num_tokens  # decode sizes are capture sizes; mixed runs unpadded
        self.num_reqs_padded = n
        seq = computed[rows] + torch.tensor(q)
        positions = torch.zeros(MAX_TOKENS, dtype=torch.int64)
        for b in range(n):
            positions[qsl[b]: qsl[b + 1]] = computed[rows[b]] + torch.arange(q[b])
        # combine's inputs: decode requests past their prompt, prefilling ones within it
        nl = torch.ones(n, dtype=torch.int64) + torch.tensor([step.drafts] * step.decode + [0] * len(step.prefill))
        prefill_len = torch.randint(1, 64, (R,), generator=gen)
        prefill_len[rows[: step.decode]] = (seq[: step.decode] - nl[: step.decode] - 1).clamp(min=1)
        for i, (c, before) in enumerate(step.prefill):
            prefill_len[rows[step.decode + i]] = before + c + 100
        cu = torch.zeros(n + 1, dtype=torch.int32)
        cu[1:] = nl.cumsum(0)
        self.num_logits = int(cu[n])
        S = step.drafts
        t = lambda x, dtype: x.to(dtype).to(dev)  # noqa: E731
        self.idx_mapping = t(rows, torch.int64)
        self.query_start_loc_buf = t(qsl, torch.int32)
        self.query_start_loc = self.query_start_loc_buf[: n + 1]
        self.num_computed_tokens = t(computed, torch.int32)
        self.positions = t(positions, torch.int64)
        self.seq_lens_step = t(seq, torch.int32)
        self.prefill_len = t(prefill_len, torch.int32)
        self.last_sampled = t(torch.randint(0, 2**17, (R, 1), generator=gen), torch.int64)
        self.draft_tokens = t(torch.randint(0, 2**17, (R, S), generator=gen), torch.int64)
        self.cu_num_logits = t(cu, torch.int32)
        self.input_ids_written = self._combine_writes(rows, qsl, seq, prefill_len, nl).to(dev)
        # FlashInfer's inputs (_compute_flashinfer_kv_metadata): the step's gathered table of group 0
        # (block_table_tensor) and paged_kv_indptr, the running sum of the requests' block counts.
        self.page_table = self.bt["upstream"].block_tables[0].gpu[self.idx_mapping]
        indptr = torch.zeros(n + 1, dtype=torch.int32)
        indptr[1:] = nb[rows].cumsum(0)
        self.paged_kv_indptr = t(indptr, torch.int32)
        self.num_pages = int(indptr[n])
        # The speculator's first draft decode step (prepare_decode_inputs): column 0 of its draft
        # tokens, the step's seq_lens as the target's, up to the draft steps rejected per request.
        self.num_rejected = t(torch.randint(0, S + 1, (n,), generator=gen), torch.int32)
        self.spec_draft = t(torch.randint(0, 2**17, (R, max(S, 1)), generator=gen), torch.int64)
        # A draft decode step's update (update_draft_inputs): the tokens sampled for the batch and the
        # draft model's output hidden states of its rows, at draft step DRAFT_STEP of SPEC_STEPS.
        self.sampled = t(torch.randint(0, 2**17, (n,), generator=gen), torch.int64)
        self.draft_step = t(torch.tensor(DRAFT_STEP), torch.int64)
        self.draft_hidden = torch.randn(n, HIDDEN, generator=gen).to(torch.bfloat16).to(dev)
        pgen = generator(dev, ctx.seed * 7919 + 337)
        rand = lambda shape, dtype: torch.randint(-(2**31), 2**31 - 1, shape, dtype=dtype, device=dev,  # noqa: E731
                                                  generator=pgen)
        self.poison = {"pos": rand((MAX_TOKENS,), torch.int64), "seq_lens": rand((R,), torch.int32),
                       "input_ids": rand((MAX_TOKENS,), torch.int32),
                       "logits_indices": rand((self.num_logits,), torch.int64),
                       "slot_mappings": rand((G, MAX_TOKENS), torch.int64),
                       "page_indices": rand((R * WIDTH,), torch.int32),  # FlashInfer's paged_kv_indices buffer
                       # the speculator's buffers: InputBuffers' positions, query_start_loc, seq_lens (read and
                       # advanced in place: every implementation starts from the same values), its sampling keys
                       # (below max_model_len - 1: every advanced position changes, so an unwritten one shows)
                       "draft_positions": torch.randint(0, MAX_MODEL_LEN - 1, (MAX_TOKENS,), device=dev,
                                                        generator=pgen),
                       "sample_src_positions": torch.randint(0, 2**40, (R,), device=dev, generator=pgen),
                       "query_start_loc": rand((R + 1,), torch.int32),
                       # the speculator's draft-token table and input hidden states (its first max_num_reqs
                       # rows: a draft decode step has one token per request), poisoned apart from any
                       # hidden value the model gives (|x| < 100), so an unwritten element shows
                       "draft_table": rand((R, SPEC_STEPS), torch.int64),
                       "next_hidden": (torch.rand(R, HIDDEN, device=dev, generator=pgen) * 100 + 100)
                       .to(torch.bfloat16)}
        self.poison |= {f"block_table{g}": rand((R, WIDTH), torch.int32) for g in range(G)}
        self.own = {impl: {k: torch.empty_like(self.poison[k]) for k in ("pos", "seq_lens", "input_ids",
                                                                          "logits_indices", "page_indices",
                                                                          "draft_positions", "sample_src_positions",
                                                                          "query_start_loc", "draft_table",
                                                                          "next_hidden")}
                    for impl in IMPLS}

    def _combine_writes(self, rows, qsl, seq, prefill_len, nl) -> torch.Tensor:
        """bool [MAX_TOKENS]: the input_ids vLLM's combine writes (k = 1)."""
        out = torch.zeros(MAX_TOKENS, dtype=torch.bool)
        for b in range(self.n):
            end, pl = int(qsl[b + 1]), int(prefill_len[rows[b]])
            if int(seq[b]) <= pl:
                continue
            first = end - int(nl[b])
            if int(seq[b]) - int(nl[b]) >= pl:
                out[first] = True
            out[first + 1: end] = True
        return out

    def outputs(self, impl: str) -> dict:
        bt = self.bt[impl]
        out = dict(self.own[impl], slot_mappings=bt.slot_mappings)
        return out | {f"block_table{g}": bt.input_block_tables[g] for g in range(self.groups)}

    def table_regions(self) -> dict:
        nb = self.bt["upstream"].num_blocks.gpu.to(torch.int64)
        cols = torch.arange(WIDTH, device=nb.device)
        out = {}
        for g in range(self.groups):
            mask = torch.zeros(MAX_REQS, WIDTH, dtype=torch.bool, device=nb.device)
            mask[: self.n] = cols < nb[g, self.idx_mapping][:, None]
            mask[self.n: self.num_reqs_padded] = True
            out[f"block_table{g}"] = mask
        return out

    # -- the calls, as the runner makes them ----------------------------------------------

    def prepare_pos(self, impl: str):
        o = self.own[impl]
        if impl == "upstream":
            return functools.partial(vllm().input_batch.prepare_pos_seq_lens, self.idx_mapping, self.query_start_loc,
                                     self.num_computed_tokens, o["pos"], o["seq_lens"])
        fn = sgl_meta.vllm_prepare_pos_seq_lens if impl == "ours" else reference.vllm_prepare_pos_seq_lens
        return functools.partial(fn, idx_mapping=self.idx_mapping, query_start_loc=self.query_start_loc,
                                 num_computed_tokens=self.num_computed_tokens, pos=o["pos"], seq_lens=o["seq_lens"])

    def gather(self, impl: str):
        bt = self.bt[impl]
        if impl == "upstream":
            return functools.partial(bt.gather_block_tables, self.idx_mapping, num_reqs_padded=self.num_reqs_padded,
                                     num_computed_tokens=self.num_computed_tokens)
        if impl == "ours":
            from sgl_meta.vllm import replacements

            return functools.partial(replacements.gather_block_tables, bt, self.idx_mapping,
                                     num_reqs_padded=self.num_reqs_padded, num_computed_tokens=self.num_computed_tokens)
        mask = bt.has_sliding_window_groups
        return functools.partial(
            reference.vllm_gather_block_tables, idx_mapping=self.idx_mapping,
            src_block_tables=[b.gpu for b in bt.block_tables], num_blocks=bt.num_blocks.gpu,
            dst_block_tables=bt.input_block_tables, num_rows=self.num_reqs_padded,
            num_computed_tokens=self.num_computed_tokens if mask else None,
            sliding_window_reach=bt.sliding_window_reach if mask else None, block_sizes=bt.block_sizes_tensor)

    def slots(self, impl: str, positions: torch.Tensor):
        bt = self.bt[impl]
        args = (self.idx_mapping, self.query_start_loc, positions[: self.num_tokens_padded])
        if impl == "upstream":
            return functools.partial(bt.compute_slot_mappings, *args, num_tokens_padded=self.num_tokens_padded)
        if impl == "ours":
            from sgl_meta.vllm import replacements

            return functools.partial(replacements.compute_slot_mappings, bt, *args,
                                     num_tokens_padded=self.num_tokens_padded)
        return functools.partial(
            reference.vllm_compute_slot_mappings, idx_mapping=self.idx_mapping, query_start_loc=self.query_start_loc,
            positions=args[2], block_tables=[b.gpu for b in bt.block_tables], block_sizes=bt.block_sizes_tensor,
            slot_mapping_enabled=bt.slot_mapping_enabled, dcp_sharded=bt.dcp_sharded, slot_mappings=bt.slot_mappings,
            pad_id=vllm().pad_slot_id)

    def combine(self, impl: str, holder: dict):
        o = self.own[impl]
        args = dict(input_ids=o["input_ids"], idx_mapping=self.idx_mapping, last_sampled_tokens=self.last_sampled,
                    query_start_loc=self.query_start_loc, seq_lens=self.seq_lens_step, prefill_len=self.prefill_len,
                    draft_tokens=self.draft_tokens, cu_num_logits=self.cu_num_logits)
        if impl != "upstream":
            fn = (sgl_meta.vllm_combine_sampled_and_draft_tokens if impl == "ours"
                  else reference.vllm_combine_sampled_and_draft_tokens)
            return functools.partial(fn, **args, logits_indices=o["logits_indices"], num_new_sampled_tokens=1)
        fn = vllm().input_batch.combine_sampled_and_draft_tokens

        def call():
            # vLLM allocates and returns logits_indices; the row compares that tensor.
            holder["logits_indices"] = fn(*args.values(), self.num_logits, 1)

        return call

    def copy_page_indices(self, impl: str):
        """FlashInfer's page indices: vLLM's kernel launched as ``_compute_flashinfer_kv_metadata``
        launches it, into the ``[:num_actual_pages]`` view of its buffer; ours and the reference
        on the same view."""
        pages, table, indptr = self.own[impl]["page_indices"][: self.num_pages], self.page_table, self.paged_kv_indptr
        if impl == "upstream":
            kernel, n = flashinfer_backend()._copy_page_indices_kernel, self.n

            def call():
                kernel[(n,)](pages, table, table.stride(0), indptr, BLOCK_SIZE=COPY_PAGES_BLOCK)

            return call
        fn = sgl_meta.vllm_copy_page_indices if impl == "ours" else reference.vllm_copy_page_indices
        return functools.partial(fn, page_indices=pages, block_table=table, cu_num_blocks=indptr)

    def prepare_decode_inputs(self, impl: str):
        """The speculator's ``prepare_decode_inputs`` (vLLM's function: its kernel launched over
        ``num_reqs + 1`` with column 0 of the draft tokens and its ``InputBuffers``) vs the op on the
        same column (what the plugin's stand-in hands it)."""
        o, n = self.own[impl], self.n
        column = self.spec_draft[:n, 0]
        args = (self.seq_lens_step, self.num_rejected)
        if impl == "upstream":
            buffers = types.SimpleNamespace(input_ids=o["input_ids"], positions=o["draft_positions"],
                                            query_start_loc=o["query_start_loc"], seq_lens=o["seq_lens"])
            return functools.partial(speculator().prepare_decode_inputs, column, *args, buffers,
                                     o["sample_src_positions"], MAX_MODEL_LEN, MAX_REQS)
        fn = sgl_meta.vllm_prepare_decode_inputs if impl == "ours" else reference.vllm_prepare_decode_inputs
        return functools.partial(fn, column, *args, o["input_ids"],
                                 o["draft_positions"], o["sample_src_positions"], o["query_start_loc"], o["seq_lens"],
                                 MAX_MODEL_LEN, MAX_REQS, True)

    def update_draft_inputs(self, impl: str):
        """The speculator's ``update_draft_inputs`` (vLLM's function: its kernel launched over
        ``num_reqs`` programs with its draft-token table, input hidden states and ``InputBuffers``)
        vs the op on the same tensors (what the plugin's stand-in hands it)."""
        o, n = self.own[impl], self.n
        if impl == "upstream":
            buffers = types.SimpleNamespace(input_ids=o["input_ids"], positions=o["draft_positions"],
                                            seq_lens=o["seq_lens"])
            return functools.partial(speculator().update_draft_inputs, self.sampled, self.draft_step,
                                     self.draft_hidden, o["draft_table"], o["next_hidden"], buffers,
                                     o["sample_src_positions"], n, MAX_MODEL_LEN, SPEC_STEPS)
        fn = sgl_meta.vllm_update_draft_inputs if impl == "ours" else reference.vllm_update_draft_inputs
        return functools.partial(fn, self.sampled, self.draft_step, self.draft_hidden, o["draft_table"],
                                 o["next_hidden"], o["input_ids"], o["draft_positions"], o["seq_lens"],
                                 o["sample_src_positions"], MAX_MODEL_LEN, SPEC_STEPS, True)

    def prepare_step(self, impl: str):
        """Ours / the reference: positions, seq_lens, tables and slot mappings in one call."""
        bt, o = self.bt[impl], self.own[impl]
        fn = sgl_meta.vllm_prepare_step if impl == "ours" else reference.vllm_prepare_step
        return functools.partial(
            fn, idx_mapping=self.idx_mapping, query_start_loc=self.query_start_loc,
            num_computed_tokens=self.num_computed_tokens, pos=o["pos"], seq_lens=o["seq_lens"],
            src_block_tables=[b.gpu for b in bt.block_tables], num_blocks=bt.num_blocks.gpu,
            dst_block_tables=bt.input_block_tables, num_rows=self.num_reqs_padded, block_sizes=bt.block_sizes_tensor,
            slot_mapping_enabled=bt.slot_mapping_enabled, dcp_sharded=bt.dcp_sharded, slot_mappings=bt.slot_mappings,
            pad_id=vllm().pad_slot_id, sliding_window_reach=bt.sliding_window_reach,
            mask_sliding_window=bt.has_sliding_window_groups)


def engine(ctx, groups: int, step: Step) -> Engine:
    return ctx.fixture(f"vllm {groups} {step.name}", lambda c: Engine(c, groups, step))


def _row(e: Engine, names: list, calls: dict, regions: dict, *, name: str, params: dict, note: str = "") -> Row:
    outputs = {impl: {n: e.outputs(impl)[n] for n in names} for impl in calls}
    poison = {n: e.poison[n] for n in names}

    def repoison():
        for out in outputs.values():
            for n in names:
                out[n].copy_(poison[n])

    if "upstream" in calls and "logits_indices" in names:  # the tensor vLLM's combine returns lands here
        calls["upstream"] = [c if not isinstance(c, _Holder) else c.bind(outputs["upstream"]) for c in calls["upstream"]]
    params = dict(groups=e.groups, block_size=BLOCK, max_model_len=MAX_MODEL_LEN, step=e.step.name, num_reqs=e.n,
                  num_tokens=e.num_tokens, sliding_window_reach=e.reach, **params)
    return Row(name=name, group=GROUP, params=params, calls=calls, outputs=outputs, regions=regions, poison=poison,
               repoison=repoison, note=note)


class _Holder:
    """vLLM's combine call, bound to the dict its returned tensor goes into."""

    def __init__(self, e: Engine):
        self.e = e

    def bind(self, holder: dict):
        return self.e.combine("upstream", holder)


_OURS_METHOD = "ours: the plugin's BlockTables method (sgl_meta.vllm.replacements), as vLLM runs it with sgl-meta"
_OURS_OP = "ours: the op (with the plugin, vLLM's function reaches it through its kernel dispatcher)"


def build_slots(ctx, _up, *, groups: int, step: Step, name: str) -> Row:
    e = engine(ctx, groups, step)
    calls = {impl: [e.slots(impl, e.positions)] for impl in IMPLS}
    return _row(e, ["slot_mappings"], calls, {"slot_mappings": (slice(None),)}, name=name, params={}, note=_OURS_METHOD)


def build_gather(ctx, _up, *, groups: int, step: Step, name: str) -> Row:
    e = engine(ctx, groups, step)
    calls = {impl: [e.gather(impl)] for impl in IMPLS}
    regions = e.table_regions()
    return _row(e, list(regions), calls, regions, name=name, params={}, note=_OURS_METHOD)


def build_pos(ctx, _up, *, groups: int, step: Step, name: str) -> Row:
    e = engine(ctx, groups, step)
    calls = {impl: [e.prepare_pos(impl)] for impl in IMPLS}
    regions = {"pos": (slice(0, e.num_tokens),), "seq_lens": (slice(None),)}
    return _row(e, ["pos", "seq_lens"], calls, regions, name=name, params={}, note=_OURS_OP)


def build_combine(ctx, _up, *, groups: int, step: Step, name: str) -> Row:
    e = engine(ctx, groups, step)
    calls = {impl: [e.combine(impl, {})] for impl in ("ours", "ref")}
    calls["upstream"] = [_Holder(e)]
    regions = {"input_ids": e.input_ids_written, "logits_indices": (slice(None),)}
    return _row(e, ["input_ids", "logits_indices"], calls, regions, name=name,
                params=dict(num_logits=e.num_logits, drafts=step.drafts),
                note=_OURS_OP + "; upstream allocates and returns logits_indices (included in its time)")


def build_fused(ctx, _up, *, groups: int, step: Step, name: str) -> Row:
    e = engine(ctx, groups, step)
    up = e.own["upstream"]["pos"]
    calls = {"upstream": [e.prepare_pos("upstream"), e.gather("upstream"), e.slots("upstream", up)]}
    calls |= {impl: [e.prepare_step(impl)] for impl in ("ours", "ref")}
    regions = e.table_regions() | {"pos": (slice(0, e.num_tokens),), "seq_lens": (slice(None),),
                                   "slot_mappings": (slice(None),)}
    return _row(e, list(regions), calls, regions, name=name, params={},
                note="upstream: prepare_pos_seq_lens + gather_block_tables + compute_slot_mappings (3 launches, as "
                     "prepare_inputs and prepare_attn run them); ours: one vllm_prepare_step launch")


def build_copy_page_indices(ctx, _up, *, groups: int, step: Step, name: str) -> Row:
    e = engine(ctx, groups, step)
    calls = {impl: [e.copy_page_indices(impl)] for impl in IMPLS}
    return _row(e, ["page_indices"], calls, {"page_indices": (slice(0, e.num_pages),)}, name=name,
                params=dict(num_pages=e.num_pages), note=_OURS_OP)


def build_decode_inputs(ctx, _up, *, groups: int, step: Step, name: str) -> Row:
    e = engine(ctx, groups, step)
    calls = {impl: [e.prepare_decode_inputs(impl)] for impl in IMPLS}
    regions = {"input_ids": (slice(0, e.n),), "draft_positions": (slice(0, e.n),),
               "sample_src_positions": (slice(0, e.n),), "query_start_loc": (slice(None),), "seq_lens": (slice(None),)}
    return _row(e, list(regions), calls, regions, name=name, params=dict(max_num_reqs=MAX_REQS),
                note=_OURS_OP + "; positions and sampling keys advance in place, from the same values on every side")


def build_draft_inputs(ctx, _up, *, groups: int, step: Step, name: str) -> Row:
    e = engine(ctx, groups, step)
    calls = {impl: [e.update_draft_inputs(impl)] for impl in IMPLS}
    rows = slice(0, e.n)
    regions = {"draft_table": (rows, DRAFT_STEP), "next_hidden": (rows,), "input_ids": (rows,),
               "draft_positions": (rows,), "seq_lens": (rows,), "sample_src_positions": (rows,)}
    return _row(e, list(regions), calls, regions, name=name,
                params=dict(hidden=HIDDEN, dtype="bfloat16", draft_step=DRAFT_STEP, num_speculative_steps=SPEC_STEPS),
                note=_OURS_OP + "; positions, lengths and sampling keys advance in place, from the same values on "
                                "every side; the step stays on the device")


ROW_ARGS: dict = {}  # row name -> (builder, groups, step): the CPU test rebuilds the rows at small steps


def _spec(name, ours, build, *, groups, step, families=(FAMILY,)) -> RowSpec:
    ROW_ARGS[name] = (build, groups, step)
    return RowSpec(name=name, group=GROUP, families=families, ours=(ours,),
                   build=lambda ctx, up: build(ctx, up, groups=groups, step=step, name=name))


def _g(groups: int) -> str:
    return "1 group" if groups == 1 else f"{groups} groups (full + SWA)"


ROWS = tuple(
    [_spec(f"vLLM compute_slot_mappings {s.name}, {_g(g)}", "vllm_compute_slot_mappings", build_slots, groups=g, step=s)
     for s, g in ((DECODE_64, 1), (DECODE_256, 2), (MIXED, 2))]
    + [_spec(f"vLLM gather_block_tables {s.name}, {_g(g)}", "vllm_gather_block_tables", build_gather, groups=g, step=s)
       for s, g in ((DECODE_64, 1), (DECODE_256, 2), (MIXED, 2))]
    + [_spec(f"vLLM prepare_pos_seq_lens {s.name}", "vllm_prepare_pos_seq_lens", build_pos, groups=1, step=s)
       for s in (DECODE_64, DECODE_256, MIXED)]
    + [_spec(f"vLLM combine_sampled_and_draft_tokens {s.name}", "vllm_combine_sampled_and_draft_tokens",
             build_combine, groups=1, step=s) for s in (DECODE_256, SPEC_64, MIXED)]
    + [_spec(f"vLLM step (pos + tables + slots) {s.name}, {_g(g)}: upstream 3 launches", "vllm_prepare_step",
             build_fused, groups=g, step=s) for s, g in ((DECODE_64, 1), (DECODE_256, 2), (MIXED, 2))]
    + [_spec(f"vLLM FlashInfer copy_page_indices {s.name}", "vllm_copy_page_indices", build_copy_page_indices,
             groups=1, step=s, families=(FAMILY, FLASHINFER)) for s in (DECODE_64, DECODE_256)]
    + [_spec(f"vLLM speculator prepare_decode_inputs {s.name}", "vllm_prepare_decode_inputs", build_decode_inputs,
             groups=1, step=s) for s in (DECODE_64, DECODE_256)]
    + [_spec(f"vLLM speculator update_draft_inputs {s.name}, hidden {HIDDEN} bf16", "vllm_update_draft_inputs",
             build_draft_inputs, groups=1, step=s) for s in (DECODE_64, DECODE_256)]
)


# -- cold start ---------------------------------------------------------------------------


def _bucket_calls(e: Engine, impl: str, b: int) -> list:
    """One decode step's four calls at batch ``b`` (the first ``b`` requests)."""
    bt, o = e.bt[impl], e.own[impl]
    idx, qsl = e.idx_mapping[:b], e.query_start_loc_buf[: b + 1]
    if impl == "upstream":
        v = vllm()
        return [
            functools.partial(v.input_batch.prepare_pos_seq_lens, idx, qsl, e.num_computed_tokens, o["pos"],
                              o["seq_lens"]),
            functools.partial(v.input_batch.combine_sampled_and_draft_tokens, o["input_ids"], idx, e.last_sampled, qsl,
                              o["seq_lens"][:b], e.prefill_len, e.draft_tokens, e.cu_num_logits[: b + 1], b, 1),
            functools.partial(bt.gather_block_tables, idx, num_reqs_padded=b, num_computed_tokens=e.num_computed_tokens),
            functools.partial(bt.compute_slot_mappings, idx, qsl, o["pos"][:b], num_tokens_padded=b),
        ]
    from sgl_meta.vllm import replacements

    return [
        functools.partial(sgl_meta.vllm_prepare_pos_seq_lens, idx_mapping=idx, query_start_loc=qsl,
                          num_computed_tokens=e.num_computed_tokens, pos=o["pos"], seq_lens=o["seq_lens"]),
        functools.partial(sgl_meta.vllm_combine_sampled_and_draft_tokens, input_ids=o["input_ids"], idx_mapping=idx,
                          last_sampled_tokens=e.last_sampled, query_start_loc=qsl, seq_lens=o["seq_lens"][:b],
                          prefill_len=e.prefill_len, draft_tokens=e.draft_tokens, cu_num_logits=e.cu_num_logits[: b + 1],
                          logits_indices=o["logits_indices"][:b]),
        functools.partial(replacements.gather_block_tables, bt, idx, num_reqs_padded=b,
                          num_computed_tokens=e.num_computed_tokens),
        functools.partial(replacements.compute_slot_mappings, bt, idx, qsl, o["pos"][:b], num_tokens_padded=b),
    ]


def cold_start(ctx, root, log, first_call_seconds, fresh_caches) -> dict:
    """First calls of a decode step (positions, combine, tables, slot mappings; 2
    groups) over vLLM's capture sizes 1..512, empty Triton caches (on disk and
    vLLM's kernels' in-memory ones), then warm; ours the same."""
    name = f"vLLM step: prepare_pos_seq_lens, combine, gather_block_tables, compute_slot_mappings (2 groups), " \
           f"capture sizes {CAPTURE_SIZES[0]}..{CAPTURE_SIZES[-1]}"
    res = {"name": name, "buckets": len(CAPTURE_SIZES), "max_bucket": max(CAPTURE_SIZES), "calls_per_bucket": 4}
    reason = why_unavailable()
    if reason:
        return res | {"skipped": reason}
    v = vllm()
    kernels = v.kernels()
    if ctx.device.type == "cuda" and not all(hasattr(k, "device_caches") for k in kernels):
        return res | {"skipped": "this Triton's JITFunction has no device_caches to empty"}
    log(f"  cold start: {name}")
    e = Engine(ctx, 2, CAPTURE)
    try:
        with fresh_caches(root):
            for k in kernels:
                if hasattr(k, "device_caches"):  # Triton's interpreter (CPU tests) compiles nothing
                    k.device_caches.clear()
            per_bucket = [_bucket_calls(e, "upstream", b) for b in CAPTURE_SIZES]
            res["upstream"] = {"cold_s": first_call_seconds(per_bucket, ctx.device),
                               "warm_s": first_call_seconds(per_bucket, ctx.device)}
    except Exception as err:  # a kernel that fails to build: say so, keep going
        return res | {"skipped": f"upstream failed: {type(err).__name__}: {err}"}
    per_bucket = [_bucket_calls(e, "ours", b) for b in CAPTURE_SIZES]
    res["ours"] = {"cold_s": first_call_seconds(per_bucket, ctx.device),
                   "warm_s": first_call_seconds(per_bucket, ctx.device)}
    return res

