"""The plugin's table: one row per vLLM 0.33 object that sgl-meta replaces.

Two kinds of row:

* ``Kernel``: a Triton kernel installed through vLLM's own
  ``vllm.triton_utils.dispatcher.register_kernels`` (which rebinds every
  ``from X import kernel`` copy and drops the launch grid). Used only where our
  stand-in can recover the grid from the launch arguments, so the row also
  checks the launcher's source still launches over that grid and still derives
  ``num_reqs`` (there, or in the caller that hands it over) the way the stand-in
  reads it back from its arguments, and the kernel's parameter names are the
  ones the stand-in takes.
* ``Method``: a ``BlockTables`` method set on the class, where the grid is not
  in the arguments (``gather_block_tables`` clears rows past the batch) or the
  kernel reads the block tables through a pointer array our ops do not take.
  The row checks vLLM's signature is the one the replacement was written for.

Every check is a metadata read (an import, a signature, a source line);
nothing runs a kernel.
"""

from __future__ import annotations

import inspect
import re
from dataclasses import dataclass
from typing import Callable

from ..sglang.hooks import CudaKernel, Skip, load, resolve, signature_mismatch

_BT = "vllm.v1.worker.gpu.block_table"
_IB = "vllm.v1.worker.gpu.input_batch"
_FI = "vllm.v1.attention.backends.flashinfer"
_SD = "vllm.v1.worker.gpu.spec_decode.target_dependent_ar.speculator"
_OURS = "sgl_meta.vllm.replacements"
_IB_NUM_REQS = "num_reqs=idx_mapping.shape[0]"


def vllm_object(target: str) -> object:
    """vLLM's object at ``target``; :class:`Skip` (with why) when it cannot be had."""
    try:
        return resolve(target)
    except AttributeError as err:
        raise Skip(f"not in this vLLM ({err})") from None
    except ImportError as err:
        missing = getattr(err, "name", None) or ""
        if missing and not missing.startswith("vllm"):
            raise Skip(f"vLLM's module needs {missing}, which is not installed (docs/vllm.md)") from None
        raise Skip(f"not in this vLLM ({type(err).__name__}: {err})") from None


def _ours(replacement: str, op: str, cuda: bool) -> Callable:
    """Our replacement, once its op's kernels are there (CUDA ones with ``cuda``)."""
    ours = load(replacement)
    why = CudaKernel(op).missing(cuda)
    if why:
        raise Skip(why)
    return ours


@dataclass(frozen=True)
class Method:
    """``owner.method`` of vLLM replaced by ``replacement`` (``"module:attr"``)."""

    target: str
    replacement: str
    op: str

    how = "method"

    @property
    def name(self) -> str:
        return ".".join(self.target.split(".")[-2:])

    def check(self, cuda: bool = True) -> Callable:
        ours = _ours(self.replacement, self.op, cuda)
        theirs = vllm_object(self.target)
        if getattr(theirs, "__module__", "") == ours.__module__:
            raise Skip("already replaced in this process")
        why = signature_mismatch(theirs, ours)
        if why:
            raise Skip(f"vLLM's signature differs from the one ours was written for: {why}")
        return ours


@dataclass(frozen=True)
class Kernel:
    """A Triton kernel of vLLM, launched by ``launcher`` over ``grid``, replaced
    by a stand-in (``"module:attr"``) that takes the kernel's parameters.
    ``num_reqs``: the launcher's statement (whitespace removed; or several, a
    tuple) that ties the grid's ``num_reqs`` to an argument, as the stand-in
    recovers it; ``num_reqs_in``: the function that holds those statements where
    it is not the launcher (a launcher handed ``num_reqs`` by its caller)."""

    target: str
    replacement: str
    op: str
    launcher: str
    grid: str
    num_reqs: "str | tuple[str, ...]"
    num_reqs_in: str = ""

    how = "kernel"

    @property
    def name(self) -> str:
        return self.target.rsplit(".", 1)[-1]

    def check(self, cuda: bool = True) -> Callable:
        ours = _ours(self.replacement, self.op, cuda)
        kernel = vllm_object(self.target)
        if getattr(kernel, "func", None) is ours:
            raise Skip("already replaced in this process")
        names = getattr(kernel, "arg_names", None)
        if names is None:
            # vLLM without a usable Triton hands out plain functions; our
            # stand-ins are written against the JIT kernels' parameters.
            names = tuple(inspect.signature(getattr(kernel, "fn", kernel)).parameters)
        if tuple(names) != tuple(inspect.signature(ours).parameters):
            raise Skip(f"vLLM's kernel parameters differ from ours: {tuple(names)}")
        statements = (self.num_reqs,) if isinstance(self.num_reqs, str) else self.num_reqs
        holder = self.num_reqs_in or self.launcher
        wanted = [(self.launcher, f"{self.name}[{self.grid}]")] + [(holder, s) for s in statements]
        sources = {}
        for where, fragment in wanted:
            if where not in sources:
                sources[where] = re.sub(r"\s+", "", inspect.getsource(vllm_object(where)))
            if fragment not in sources[where]:
                raise Skip(f"{where.rsplit('.', 1)[-1]} no longer has `{fragment}`: the stand-in recovers the "
                           f"launch grid {self.grid} from its arguments through `{'; '.join(statements)}`")
        return ours


TARGETS: tuple = (
    # prepare_attn, every step (and the speculators): one launch over all KV-cache groups.
    Method(f"{_BT}.BlockTables.compute_slot_mappings", f"{_OURS}:compute_slot_mappings", "vllm_compute_slot_mappings"),
    Method(f"{_BT}.BlockTables.gather_block_tables", f"{_OURS}:gather_block_tables", "vllm_gather_block_tables"),
    # prepare_inputs, every step: the kernels under prepare_pos_seq_lens and
    # combine_sampled_and_draft_tokens (vLLM's functions stay: their host work
    # is a few lines, and combine allocates and returns logits_indices).
    Kernel(f"{_IB}._prepare_pos_seq_lens_kernel", f"{_OURS}:prepare_pos_seq_lens_kernel",
           "vllm_prepare_pos_seq_lens", f"{_IB}.prepare_pos_seq_lens", "(num_reqs+1,)",
           _IB_NUM_REQS),
    Kernel(f"{_IB}._combine_sampled_and_draft_tokens_kernel", f"{_OURS}:combine_sampled_and_draft_tokens_kernel",
           "vllm_combine_sampled_and_draft_tokens", f"{_IB}.combine_sampled_and_draft_tokens", "(num_reqs,)",
           _IB_NUM_REQS),
    # The FlashInfer backend's attention-metadata build, every step on its
    # native paged paths: the block-table rows into paged_kv_indices, over
    # (num_reqs,) with paged_kv_indptr (num_reqs + 1 entries) as cu_num_blocks.
    # Its module imports flashinfer: without it the row is left alone, saying so.
    Kernel(f"{_FI}._copy_page_indices_kernel", f"{_OURS}:copy_page_indices_kernel", "vllm_copy_page_indices",
           f"{_FI}.FlashInferMetadataBuilder._compute_flashinfer_kv_metadata", "(num_reqs,)",
           "paged_kv_indptr=self.paged_kv_indptr.copy_to_gpu(num_reqs+1)"),
    # The EAGLE / MTP speculator, every step that drafts more than one token:
    # the first draft decode step's inputs, launched eagerly over
    # (num_reqs + 1,) with num_reqs = draft_tokens.shape[0].
    Kernel(f"{_SD}._prepare_decode_inputs_kernel", f"{_OURS}:prepare_decode_inputs_kernel",
           "vllm_prepare_decode_inputs", f"{_SD}.prepare_decode_inputs", "(num_reqs+1,)",
           "num_reqs=draft_tokens.shape[0]"),
    # Every draft decode step (inside the speculator's CUDA graph when it has
    # one): the sampled tokens into the draft table and the next step's inputs,
    # over (num_reqs,). update_draft_inputs takes num_reqs from _generate_draft,
    # which samples draft_tokens from the first num_reqs hidden states: the
    # stand-in's num_reqs is draft_tokens.shape[0].
    Kernel(f"{_SD}._update_draft_inputs_kernel", f"{_OURS}:update_draft_inputs_kernel",
           "vllm_update_draft_inputs", f"{_SD}.update_draft_inputs", "(num_reqs,)",
           ("sample_hidden_states=last_hidden_states[:num_reqs]",
            "draft_tokens=self.sample_draft(sample_hidden_states,",
            "update_draft_inputs(draft_tokens,self.current_draft_step,hidden_states,self.draft_tokens,"
            "self.hidden_states,self.input_buffers,self.sample_src_positions,num_reqs,"),
           num_reqs_in=f"{_SD}.TargetDependentARSpeculator._generate_draft"),
)
