"""The plugin's hook table: one row per SGLang function that sgl-meta serves.

A row names SGLang's function (the dotted path ``HookRegistry`` takes), our
replacement (``"module:attribute"``, imported only when the row is considered)
and what the replacement needs from this sgl-meta build. A new hook is one row.
A row whose replacement does not exist yet (an op still being written) is
skipped with a reason, so rows can be added before their drop-ins land.

Every check here is a metadata read (an import, a signature, a dispatcher
lookup); nothing runs a kernel.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import logging
import sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

from .kernels import KernelStandIn

_log = logging.getLogger(__name__)


class Skip(Exception):
    """A row that cannot be hooked in this environment; the message says why."""


@dataclass(frozen=True)
class CudaKernel:
    """``torch.ops.sgl_meta.<op>`` exists and this build compiled its CUDA
    kernels (only exists, with ``cuda=False``: the forced plugin on a CPU build).
    Every op of a build has a CUDA kernel or none does."""

    op: str

    def missing(self, cuda: bool = True) -> Optional[str]:
        import torch

        from .._build import cuda_kernels

        if not hasattr(torch.ops.sgl_meta, self.op):
            return f"torch.ops.sgl_meta.{self.op} is not in this sgl-meta"
        if cuda and not cuda_kernels():
            return "sgl-meta was built without CUDA kernels"
        return None


@dataclass(frozen=True)
class Keywords:
    """The sgl-meta function ``func`` (``"module:attribute"``) takes these keywords."""

    func: str
    names: tuple[str, ...]

    def missing(self, cuda: bool = True) -> Optional[str]:
        params = inspect.signature(load(self.func)).parameters
        absent = [n for n in self.names if n not in params]
        if absent:
            return f"{self.func.replace(':', '.')} does not take {', '.join(absent)} (older sgl-meta)"
        return None


def load(spec: str) -> Callable:
    """Import ``"module:attribute"``; :class:`Skip` when this sgl-meta lacks it."""
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as err:
        if err.name and module_name.startswith(err.name):  # ours is missing, not a dependency
            raise Skip(f"{module_name} is not in this sgl-meta") from None
        raise
    try:
        return getattr(module, attr)
    except AttributeError:
        raise Skip(f"{module_name}.{attr} is not in this sgl-meta") from None


def hook_of(wrapper: Callable) -> object:
    """The ``hook`` a HookRegistry wrapper closes over (its ``_wrap_fn``), or None; for
    one of ours registered through :func:`deferring`, our function itself."""
    code = getattr(wrapper, "__code__", None)
    cells = getattr(wrapper, "__closure__", None) or ()
    if code is None or len(code.co_freevars) != len(cells):
        return None
    hook = dict(zip(code.co_freevars, (c.cell_contents for c in cells))).get("hook")
    return hook.__wrapped__ if getattr(hook, "defers_to_inner_hooks", False) else hook


def deferring(hook: Callable, name: str = "") -> Callable:
    """An AROUND ``hook`` as the plugin registers it. Where another plugin's HookRegistry
    wrapper sits inside ours (SGLang's function reaches us wrapped: ``__wrapped__``; so it
    is with any REPLACE hook of another plugin, which HookRegistry applies first, and with
    its other hooks registered before ours), every call goes down that chain, whose hooks
    then run as they would without sgl-meta: ours would otherwise stand in for the whole
    method and skip them. The first such call logs one warning naming ``name``. No 0.5.23
    target carries ``__wrapped__`` of its own (tests/sglang_plugin)."""
    warned = []

    @functools.wraps(hook)
    def around(original: Callable, *args: Any, **kwargs: Any) -> Any:
        if getattr(original, "__wrapped__", None) is not None:
            if not warned:
                warned.append(True)
                _log.warning("sgl-meta: another plugin's hook on SGLang's %s sits inside ours: its chain runs, "
                             "ours does not", name or getattr(hook, "__name__", "?"))
            return original(*args, **kwargs)
        return hook(original, *args, **kwargs)

    around.defers_to_inner_hooks = True
    return around


def wrapped_only_by(fn: Callable, ours: tuple) -> bool:
    """``fn`` is a class's own method, or HookRegistry wrappers (``__wrapped__``,
    set by functools.wraps) around it whose hooks are all in ``ours``: a method
    whose code still does what a hook re-implementing it assumes."""
    while getattr(fn, "__wrapped__", None) is not None:
        hook = hook_of(fn)
        if not any(hook is h for h in ours):
            return False
        fn = fn.__wrapped__
    return True


def plain_methods(obj: object, class_name: str, names: tuple, ours: tuple = ()) -> bool:
    """``obj`` is an instance of SGLang's ``class_name`` itself (not a subclass)
    and each method in ``names`` is that class's own code, wrapped at most by
    the hooks in ``ours``: what a hook that stands in for those methods assumes."""
    cls = type(obj)
    if cls.__name__ != class_name:
        return False
    for name in names:
        fn = getattr(cls, name, None)
        if fn is None or not wrapped_only_by(fn, ours):
            return False
        if getattr(fn, "__qualname__", "") != f"{class_name}.{name}":
            return False
    return True


def dcp_enabled(module: str) -> bool:
    """Whether decode context parallelism is on, read through SGLang module
    ``module``'s own ``get_parallel`` (True where that is unknown: leave it to SGLang)."""
    get_parallel = getattr(sys.modules.get(module), "get_parallel", None)
    return True if get_parallel is None else bool(getattr(get_parallel(), "dcp_enabled", True))


@dataclass(frozen=True)
class Hook:
    """One SGLang function and the sgl-meta callable that replaces it.

    ``kind`` is the ``HookRegistry`` hook type: ``REPLACE`` (ours takes SGLang's
    arguments) or ``AROUND`` (ours takes SGLang's function first, then its
    arguments, and may call it for cases it does not cover).
    """

    target: str
    replacement: str
    needs: tuple = ()
    kind: str = "REPLACE"

    @property
    def name(self) -> str:
        """The target's function name, ``Class.method`` for a method (log lines)."""
        parts = self.target.split(".")
        return ".".join(parts[-2:]) if parts[-2][:1].isupper() else parts[-1]

    @property
    def verb(self) -> str:
        """What the hook does to SGLang's function (log lines): ``replaces``, or
        ``wraps`` for AROUND (ours calls SGLang's for what it does not cover)."""
        return "wraps" if self.kind == "AROUND" else "replaces"

    def original(self) -> Callable:
        """SGLang's function (imports its module); :class:`Skip` when absent,
        or when its module cannot import for want of a package SGLang needs."""
        try:
            return resolve(self.target)
        except (ImportError, AttributeError) as err:
            raise Skip(import_failure(err, self.target.split(".")[0])) from None

    def check(self, cuda: bool = True) -> Callable:
        """The replacement, if everything it needs is here; else :class:`Skip`.
        ``cuda=False`` accepts ops without CUDA kernels (the forced plugin).

        Order: ours first (cheap, and a row whose replacement is missing never
        imports SGLang's module), then the needs, then SGLang's function and its
        signature, which must be the one the replacement was written for.
        """
        replacement = load(self.replacement)
        for need in self.needs:
            why = need.missing(cuda)
            if why:
                raise Skip(why)
        original = self.original()
        kernel = isinstance(replacement, type) and issubclass(replacement, KernelStandIn)
        # A Triton kernel's parameters are its Python function's (``.fn``).
        why = signature_mismatch(getattr(original, "fn", original) if kernel else original, replacement,
                                 around=self.kind == "AROUND")
        if why:
            raise Skip(f"SGLang's signature differs from ours: {why}")
        return replacement.bind(original) if kernel else replacement


def resolve(target: str) -> object:
    """The object a dotted path names (``pkg.module.Class.method``), importing
    the longest module prefix. Unlike ``pkgutil.resolve_name``, which takes any
    ImportError for the end of the module path, an error raised while an
    existing module imports (a dependency it lacks) propagates."""
    parts = target.split(".")
    obj, n = importlib.import_module(parts[0]), 1
    while n < len(parts):
        name = ".".join(parts[: n + 1])
        try:
            obj = importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name != name:
                raise
            break
        n += 1
    for attr in parts[n:]:
        obj = getattr(obj, attr)
    return obj


GPU_LIBRARIES = ("sgl_kernel", "flashinfer", "deep_gemm", "flash_mla")
"""SGLang's compiled attention libraries: installed with SGLang on a GPU machine, never by the CPU-only set."""


def import_failure(err: Exception, package: str = "sglang") -> str:
    """Why SGLang's function (in ``package``) could not be had: it is not in
    this SGLang (a module or attribute of the package's own is missing), a
    module outside the package is not installed (SGLang installed with
    ``--no-deps``, or a dependency removed), or its module fails to import."""
    detail = f"({type(err).__name__}: {err})"
    missing = (getattr(err, "name", None) or "").split(".")[0] if isinstance(err, ModuleNotFoundError) else ""
    if isinstance(err, AttributeError) or missing == package:
        return f"not in this SGLang {detail}"
    importer = next((m for m in reversed(_module_names(err.__traceback__)) if m.split(".")[0] == package), package)
    if missing in GPU_LIBRARIES:
        return (f"SGLang's module {importer} needs {missing}, which is not installed (a GPU library of SGLang's, "
                "not in docs/sglang.md's CPU-only set: this row takes effect where SGLang runs with it)")
    if missing:
        return f"SGLang's module {importer} needs {missing}, which is not installed ({install_hint()})"
    return f"SGLang's module {importer} does not import here {detail}"


def install_hint() -> str:
    """How to install the dependencies of the SGLang that is installed."""
    from importlib import metadata

    try:
        pin = f"=={metadata.version('sglang')}"
    except metadata.PackageNotFoundError:
        pin = ""
    return f'pip install "sglang{pin}" installs SGLang with its dependencies; docs/sglang.md has a CPU-only set'


def _module_names(tb) -> list[str]:
    """The ``__name__`` of each frame's module along a traceback, outermost first."""
    names = []
    while tb is not None:
        names.append(tb.tb_frame.f_globals.get("__name__", ""))
        tb = tb.tb_next
    return names


def signature_mismatch(original: Callable, replacement: Callable, around: bool = False) -> Optional[str]:
    """Why ``replacement`` cannot take every call ``original`` can, or None.

    Same parameter names, kinds and order, and the same defaults (a changed
    default is a changed contract); extra trailing parameters of ours must have
    defaults. ``around``: ours first takes SGLang's function (an AROUND hook).
    Guards against hooking a later SGLang whose function changed.
    """
    theirs = list(inspect.signature(original).parameters.values())
    ours = list(inspect.signature(replacement).parameters.values())[1 if around else 0:]
    for i, p in enumerate(theirs):
        if i >= len(ours):
            return f"ours lacks parameter {p.name!r}"
        q = ours[i]
        if (q.name, q.kind) != (p.name, p.kind):
            return f"parameter {i} is {p.kind.description} {p.name!r}, ours {q.kind.description} {q.name!r}"
        if (p.default is inspect.Parameter.empty) != (q.default is inspect.Parameter.empty) or (
            p.default is not inspect.Parameter.empty and p.default != q.default
        ):
            return f"default of {p.name!r} is {p.default!r}, ours {q.default!r}"
    for q in ours[len(theirs):]:
        if q.default is inspect.Parameter.empty and q.kind not in (q.VAR_POSITIONAL, q.VAR_KEYWORD):
            return f"ours requires parameter {q.name!r} that SGLang does not pass"
    return None


_ATTN = "sglang.kernels.ops.attention"
_KV = "sglang.kernels.ops.kvcache"
_MHA_BACKEND = "sglang.srt.layers.attention.trtllm_mha_backend"
_UPDATE = "sgl_meta.trtllm_mha_metadata:update_trtllm_mha_graph_metadata"
_BUILD_KV_INDICES = "sgl_meta.kv_indices:build_kv_indices"
_QO_INDPTR = Keywords(_BUILD_KV_INDICES, ("qo_indptr", "q_stride"))

HOOKS: tuple[Hook, ...] = (
    # TRT-LLM MHA backend (and hpc_ops): the recorded CUDA-graph metadata update.
    Hook(
        f"{_ATTN}.trtllm_mha_graph_metadata.update_trtllm_mha_graph_metadata",
        "sgl_meta.sglang.adapters:update_trtllm_mha_graph_metadata",
        (CudaKernel("update_trtllm_mha_graph_metadata"), Keywords(_UPDATE, ("skip_page_table", "live_pages_only"))),
    ),
    # TRT-LLM MHA, FlashAttention and hpc_ops backends: the sync-free page-table builder.
    Hook(
        f"{_ATTN}.trtllm_mha_page_table.build_trtllm_mha_page_table",
        "sgl_meta.trtllm_mha_page_table:build_trtllm_mha_page_table",
        (CudaKernel("build_trtllm_mha_page_table"),),
    ),
    # DSA backend: staging buffers -> one CUDA graph's buffers, and -> three.
    Hook(
        f"{_ATTN}.dsa.fused_metadata_copy.fused_metadata_copy_cuda",
        "sgl_meta.sglang.adapters:fused_metadata_copy_cuda",
        (CudaKernel("fused_metadata_copy"),),
    ),
    Hook(
        f"{_ATTN}.dsa.fused_metadata_copy.fused_metadata_copy_multi_cuda",
        "sgl_meta.sglang.adapters:fused_metadata_copy_multi_cuda",
        (CudaKernel("fused_metadata_copy_multi"),),
    ),
    # DSA metadata generators (docs/operators/dsa_metadata.md): drop-ins with SGLang's signatures.
    Hook(
        f"{_ATTN}.dsa.metadata.fused_dsa_decode_metadata",
        "sgl_meta.dsa_metadata:fused_dsa_decode_metadata",
        (CudaKernel("fused_dsa_metadata"),),
    ),
    Hook(
        f"{_ATTN}.dsa.metadata.fused_dsa_target_verify_metadata",
        "sgl_meta.dsa_metadata:fused_dsa_target_verify_metadata",
        (CudaKernel("fused_dsa_metadata"),),
    ),
    Hook(
        f"{_ATTN}.dsa.metadata.fused_dsa_draft_extend_metadata",
        "sgl_meta.dsa_metadata:fused_dsa_draft_extend_metadata",
        (CudaKernel("fused_dsa_metadata"),),
    ),
    # DSA multi-step draft decode (docs/sglang.md, "DSA multi-step draft decode"): every draft step's decode
    # metadata in one launch instead of the generator into staging tensors and a copy per step.
    Hook(
        "sglang.srt.layers.attention.dsa_backend.DeepseekSparseAttnMultiStepBackend.init_forward_metadata_out_graph",
        "sgl_meta.sglang.dsa_spec:multi_step_init_forward_metadata_out_graph",
        (CudaKernel("fused_dsa_metadata"),),
        kind="AROUND",
    ),
    # Unified memory pool read tables (docs/operators/kv_read_table.md): drop-ins with SGLang's signatures.
    Hook(
        f"{_KV}.kv_read_table.build_kv_read_table",
        "sgl_meta.kv_read_table:build_kv_read_table",
        (CudaKernel("kv_read_page_table"),),
    ),
    Hook(
        f"{_KV}.kv_read_table.build_kv_read_table_packed",
        "sgl_meta.kv_read_table:build_kv_read_table_packed",
        (CudaKernel("kv_read_token_stream"),),
    ),
    # Speculative decoding in one launch (docs/operators/trtllm_mha_metadata.md): methods of the TRT-LLM MHA
    # backends, AROUND hooks that keep SGLang's method for what they do not cover.
    Hook(
        f"{_MHA_BACKEND}.TRTLLMHAAttnBackend._write_ragged_verify_graph_metadata",
        "sgl_meta.sglang.trtllm_mha_spec:ragged_verify_write_graph_metadata",
        (CudaKernel("update_trtllm_mha_graph_metadata"), Keywords(_UPDATE, ("seqlen_offsets",))),
        kind="AROUND",
    ),
    Hook(
        f"{_MHA_BACKEND}.TRTLLMHAAttnMultiStepDraftBackend.init_forward_metadata_in_graph",
        "sgl_meta.sglang.trtllm_mha_spec:multi_step_draft_init_forward_metadata_in_graph",
        (CudaKernel("update_trtllm_mha_graph_metadata_multi"),),
        kind="AROUND",
    ),
    # Unified memory pool (docs/sglang.md, "The unified memory pool"): the page tables through
    # v2p in the recorded update, and the out-of-graph rebuild of those tables skipped.
    Hook(
        f"{_MHA_BACKEND}.TRTLLMHAAttnBackend._apply_cuda_graph_metadata",
        "sgl_meta.sglang.trtllm_mha_unified:apply_cuda_graph_metadata",
        (CudaKernel("update_trtllm_mha_graph_metadata"), Keywords(_UPDATE, ("live_pages_only", "v2p", "swa_v2p"))),
        kind="AROUND",
    ),
    Hook(
        f"{_MHA_BACKEND}.TRTLLMHAAttnBackend.init_forward_metadata_out_graph",
        "sgl_meta.sglang.trtllm_mha_unified:init_forward_metadata_out_graph",
        (CudaKernel("update_trtllm_mha_graph_metadata"), Keywords(_UPDATE, ("live_pages_only", "v2p", "swa_v2p"))),
        kind="AROUND",
    ),
    # FlashAttention (FA3/FA4) backend (docs/operators/flash_attention_metadata.md): drop-ins with
    # SGLang's signatures; flashattention_backend.py imports them by name.
    Hook(
        f"{_ATTN}.metadata.normal_decode_set_metadata",
        "sgl_meta.flash_attention_metadata:normal_decode_set_metadata",
        (CudaKernel("update_flash_attention_metadata"),),
    ),
    Hook(
        f"{_ATTN}.metadata.draft_extend_set_metadata",
        "sgl_meta.flash_attention_metadata:draft_extend_set_metadata",
        (CudaKernel("update_flash_attention_metadata"),),
    ),
    Hook(
        f"{_ATTN}.metadata.prepare_swa_spec_page_table_triton",
        "sgl_meta.flash_attention_metadata:prepare_swa_spec_page_table_triton",
        (CudaKernel("flash_attention_swa_spec_page_table"),),
    ),
    # FlashAttention multi-step EAGLE draft decode (docs/sglang.md, "FlashAttention multi-step draft decode"):
    # SGLang's loop over the step backends runs with the decode drop-in's calls collected, then one launch
    # writes every step's set. Without the normal_decode_set_metadata row nothing is collected.
    Hook(
        "sglang.srt.layers.attention.flashattention_backend.FlashAttentionMultiStepBackend.init_forward_metadata_out_graph",
        "sgl_meta.sglang.flash_attention_spec:multi_step_init_forward_metadata_out_graph",
        (CudaKernel("update_flash_attention_metadata"), CudaKernel("flash_attention_draft_decode_topk")),
        kind="AROUND",
    ),
    # FlashAttention draft extend and top-k > 1 target verify (docs/sglang.md, "FlashAttention draft extend",
    # "FlashAttention target verify with top-k > 1"): the out-of-graph refresh of draft_extend_metadata[bs] in one
    # launch, both top-k > 1 verify halves in two; every other mode runs SGLang's method.
    Hook(
        "sglang.srt.layers.attention.flashattention_backend.FlashAttentionBackend._apply_cuda_graph_metadata",
        "sgl_meta.sglang.flash_attention_spec:apply_cuda_graph_metadata",
        (CudaKernel("update_flash_attention_metadata"), CudaKernel("flash_attention_verify_expand")),
        kind="AROUND",
    ),
    # KV index streams (docs/operators/kv_indices.md): the Triton backend's kv_indptr cumsum + kv_indices gather
    # (+ the decode split counts) in one launch. create_flashinfer_kv_indices_triton and get_num_kv_splits_triton
    # are raw Triton kernels launched as kernel[grid](...): the backend methods that launch them are hooked.
    Hook(
        "sglang.srt.layers.attention.triton_backend.TritonAttnBackend._fill_kv_indptr_and_indices",
        "sgl_meta.sglang.kv_indices:fill_kv_indptr_and_indices",
        (CudaKernel("build_kv_indices"),),
        kind="AROUND",
    ),
    Hook(
        "sglang.srt.layers.attention.triton_backend.TritonAttnBackend._apply_cuda_graph_metadata",
        "sgl_meta.sglang.kv_indices:apply_cuda_graph_metadata",
        (CudaKernel("build_kv_indices"),),
        kind="AROUND",
    ),
    # Its target verify replay prep: qo_indptr, kv_indptr + kv_indices and mask_indptr in one launch.
    Hook(
        "sglang.srt.layers.attention.triton_backend.TritonAttnBackend._update_target_verify_buffers",
        "sgl_meta.sglang.kv_indices:update_target_verify_buffers",
        (CudaKernel("build_kv_indices"), Keywords(_BUILD_KV_INDICES, ("qo_indptr", "q_stride", "mask_indptr"))),
        kind="AROUND",
    ),
    # Its draft extend: qo_indptr, the prefix lengths and kv_indptr + kv_indices in one launch.
    Hook(
        "sglang.srt.layers.attention.triton_backend.TritonAttnBackend._update_draft_extend_buffers",
        "sgl_meta.sglang.kv_indices:update_draft_extend_buffers",
        (CudaKernel("build_kv_indices"), Keywords(_BUILD_KV_INDICES, ("qo_indptr", "q_stride", "extend_seq_lens"))),
        kind="AROUND",
    ),
    # The gather every other caller of the translator makes (the FlashInfer backends after their kv_indptr
    # cumsum): pack_read_stream's create_flashinfer_kv_indices_triton branch.
    Hook(
        "sglang.srt.mem_cache.kv_index_translator.KVIndexTranslator.pack_read_stream",
        "sgl_meta.sglang.kv_indices:pack_read_stream",
        (CudaKernel("build_kv_indices"),),
        kind="AROUND",
    ),
    # TRT-LLM MLA backend (docs/sglang.md, "TRT-LLM MLA"): the replay refresh's lengths and block table in one
    # launch, and every multi-step draft backend's in one; the rest runs SGLang's methods.
    Hook(
        "sglang.srt.layers.attention.trtllm_mla_backend.TRTLLMMLABackend._apply_cuda_graph_metadata",
        "sgl_meta.sglang.trtllm_mla:apply_cuda_graph_metadata",
        (CudaKernel("update_flash_attention_metadata"),),
        kind="AROUND",
    ),
    Hook(
        "sglang.srt.layers.attention.trtllm_mla_backend.TRTLLMMLAMultiStepDraftBackend.init_forward_metadata_out_graph",
        "sgl_meta.sglang.trtllm_mla:multi_step_init_forward_metadata_out_graph",
        (CudaKernel("update_flash_attention_metadata"),),
        kind="AROUND",
    ),
    # FlashInfer decode, MHA and MLA (docs/sglang.md, "FlashInfer decode"): kv_indptr + kv_indices in one launch,
    # handed to SGLang's call_begin_forward as a prebuilt pair; its planner call runs as SGLang wrote it.
    Hook(
        "sglang.srt.layers.attention.flashinfer_backend.FlashInferIndicesUpdaterDecode.call_begin_forward",
        "sgl_meta.sglang.kv_indices:flashinfer_decode_call_begin_forward",
        (CudaKernel("build_kv_indices"),),
        kind="AROUND",
    ),
    # Its multi-step draft backend's step updaters, which always receive the draft kernel's pair: SGLang's method
    # directly, without the pass-through above (after the draft loop's host sync the GPU waits on host time).
    Hook(
        "sglang.srt.layers.attention.flashinfer_backend.FlashInferMultiStepDraftBackend.__init__",
        "sgl_meta.sglang.kv_indices:flashinfer_multi_step_draft_init",
        (CudaKernel("build_kv_indices"),),
        kind="AROUND",
    ),
    Hook(
        "sglang.srt.layers.attention.flashinfer_mla_backend.FlashInferMLAIndicesUpdaterDecode.call_begin_forward",
        "sgl_meta.sglang.kv_indices:flashinfer_mla_decode_call_begin_forward",
        (CudaKernel("build_kv_indices"),),
        kind="AROUND",
    ),
    # FlashInfer backends' EAGLE verify and draft extend (docs/sglang.md, "EAGLE CSR arguments"): qo_indptr,
    # cum_kv_seq_len + kv_indices in one launch inside the spec input's generate_attn_arg_prefill; the planner
    # stays SGLang's.
    Hook(
        "sglang.srt.speculative.eagle_info.EagleVerifyInput.generate_attn_arg_prefill",
        "sgl_meta.sglang.eagle_csr:verify_attn_arg_prefill",
        (CudaKernel("build_kv_indices"), _QO_INDPTR),
        kind="AROUND",
    ),
    Hook(
        "sglang.srt.speculative.eagle_info.EagleDraftExtendInput.generate_attn_arg_prefill",
        "sgl_meta.sglang.eagle_csr:draft_extend_attn_arg_prefill",
        (CudaKernel("build_kv_indices"), _QO_INDPTR),
        kind="AROUND",
    ),
    # FlashMLA backend (docs/sglang.md, "FlashMLA"): the replay refresh's block table and int32 key lengths in
    # one launch, before SGLang's planner call and copies, in every mode; every draft step's in one launch.
    Hook(
        "sglang.srt.layers.attention.flashmla_backend.FlashMLABackend._apply_decode_target_verify_metadata",
        "sgl_meta.sglang.flashmla:apply_decode_target_verify_metadata",
        (CudaKernel("update_flash_attention_metadata"),),
        kind="AROUND",
    ),
    Hook(
        "sglang.srt.layers.attention.flashmla_backend.FlashMLAMultiStepDraftBackend.init_forward_metadata_out_graph",
        "sgl_meta.sglang.flashmla:multi_step_init_forward_metadata_out_graph",
        (CudaKernel("update_flash_attention_metadata"),),
        kind="AROUND",
    ),
    # FlashMLA and TRT-LLM MLA backends: the block table, a raw Triton kernel launched as kernel[grid](...)
    # (a compiled variant per page size and table width): a class stands in for it (sgl_meta/sglang/kernels.py).
    Hook(
        f"{_ATTN}.kv_indices.create_flashmla_kv_indices_triton",
        "sgl_meta.sglang.kernels:FlashmlaKvIndicesKernel",
        (CudaKernel("kv_read_page_table"),),
    ),
    # Triton and FlashInfer multi-step draft backends: every EAGLE draft-decode step's kv_indices + kv_indptr,
    # the raw kernel the backends index by grid (one program per step, request and branch walks a whole prefix).
    Hook(
        "sglang.kernels.ops.speculative.cache_locs.generate_draft_decode_kv_indices",
        "sgl_meta.sglang.kernels:DraftDecodeKvIndicesKernel",
        (CudaKernel("build_draft_decode_kv_indices"),),
    ),
    # The Triton multi-step draft backend's replay prep: the draft kernel above, then get_num_kv_splits_triton
    # for the last step backend; one launch writes both.
    Hook(
        "sglang.srt.layers.attention.triton_backend.TritonMultiStepDraftBackend.init_forward_metadata_out_graph",
        "sgl_meta.sglang.kv_indices:multi_step_draft_init_forward_metadata_out_graph",
        (CudaKernel("build_draft_decode_kv_indices"),),
        kind="AROUND",
    ),
)
"""Every hook the plugin knows, in the order they are considered."""
