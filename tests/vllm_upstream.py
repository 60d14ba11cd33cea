"""vLLM 0.33.0's own Triton kernels (Model Runner V2), run on CPU by Triton's
interpreter, as the tests' upstream oracle.

The kernels are loaded from vLLM's unmodified source files
(``vllm/v1/worker/gpu/{block_table,buffer_utils,input_batch}.py``, the
FlashInfer backend's ``_copy_page_indices_kernel`` and the speculator's
``_prepare_decode_inputs_kernel`` and ``_update_draft_inputs_kernel``) found under
``$SGLMETA_VLLM_SRC`` (an unpacked 0.33.0 wheel) or in the installed ``vllm``:
``scripts/test.sh`` runs these files again in the vLLM overlay venv
(``scripts/setup_vllm_env.sh``), where vLLM is installed; in the project venv
the comparisons skip and say so. Importing those modules through vLLM's
package pulls in most of vLLM; instead each file is executed as a module of
its own, with only the names it imports from elsewhere in vLLM provided:
``triton`` / ``tl`` (the installed Triton, interpreter on), ``PAD_SLOT_ID``
(read from vLLM's ``attention/backends/utils.py`` source) and host-side
helpers the kernels never call (placeholders). Nothing is copied from vLLM.
Pins: vllm 0.33.0 sources; triton as installed with torch (3.8.0 here).

``load()`` returns None when the sources or Triton are missing (tests skip).
The wrappers launch vLLM's kernels exactly as ``BlockTables`` and
``input_batch.py`` do, from our ops' arguments.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import sys
import types
from pathlib import Path
from typing import Optional

import torch

from helpers import triton_interpreter

SKIP_REASON = ("vLLM 0.33 sources or Triton not found: set $SGLMETA_VLLM_SRC or install vllm "
               "(scripts/test.sh runs these tests in its vLLM overlay venv)")


def _source_root() -> Optional[Path]:
    root = os.environ.get("SGLMETA_VLLM_SRC")
    if root and (Path(root) / "vllm" / "v1" / "worker" / "gpu" / "block_table.py").is_file():
        return Path(root)
    spec = importlib.util.find_spec("vllm")
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0]).parent
    return None


def _pad_slot_id(root: Path) -> int:
    tree = ast.parse((root / "vllm" / "v1" / "attention" / "backends" / "utils.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "PAD_SLOT_ID" for t in node.targets):
            return ast.literal_eval(node.value)
    raise LookupError("PAD_SLOT_ID not found in vLLM's attention/backends/utils.py")


def _placeholder(name):
    def unused(*args, **kwargs):
        raise NotImplementedError(f"{name} is not provided by the test loader")
    return unused


@functools.lru_cache(maxsize=1)
def load() -> Optional[types.SimpleNamespace]:
    root = _source_root()
    if root is None:
        return None
    try:
        import triton
        import triton.language as tl
    except ImportError:
        return None
    gpu = root / "vllm" / "v1" / "worker" / "gpu"
    provided = {
        "vllm": {},
        "vllm.triton_utils": {"triton": triton, "tl": tl},
        "vllm.logger": {"init_logger": lambda name: __import__("logging").getLogger(name)},
        "vllm.utils": {"random_uuid": lambda: "0"},
        "vllm.utils.math_utils": {"cdiv": lambda a, b: -(-a // b)},
        "vllm.utils.platform_utils": {"is_uva_available": lambda: False},
        "vllm.utils.torch_utils": {"async_tensor_h2d": _placeholder("async_tensor_h2d"),
                                   "get_accelerator_view_from_cpu_tensor": _placeholder("accelerator view")},
        "vllm.v1": {}, "vllm.v1.attention": {}, "vllm.v1.attention.backends": {},
        "vllm.v1.attention.backends.utils": {"PAD_SLOT_ID": _pad_slot_id(root)},
        "vllm.v1.worker": {}, "vllm.v1.worker.gpu": {},
    }
    saved = {name: sys.modules.get(name) for name in [*provided, "vllm.v1.worker.gpu.buffer_utils"]}
    loaded = {}
    try:
        for name, attrs in provided.items():
            mod = types.ModuleType(name)
            mod.__path__ = []  # a package, so that submodules resolve
            mod.__dict__.update(attrs)
            sys.modules[name] = mod
        with triton_interpreter():  # read when each @triton.jit runs
            for stem in ("buffer_utils", "block_table", "input_batch"):
                name = f"vllm.v1.worker.gpu.{stem}"
                spec = importlib.util.spec_from_file_location(name, gpu / f"{stem}.py")
                mod = importlib.util.module_from_spec(spec)
                sys.modules[name] = mod
                spec.loader.exec_module(mod)
                loaded[stem] = mod
    finally:
        for name, old in saved.items():  # the rest of the process sees no vllm
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
        for stem in ("block_table", "input_batch"):
            sys.modules.pop(f"vllm.v1.worker.gpu.{stem}", None)
    return types.SimpleNamespace(root=root, pad_slot_id=provided["vllm.v1.attention.backends.utils"]["PAD_SLOT_ID"],
                                 block_table=loaded["block_table"], input_batch=loaded["input_batch"],
                                 flashinfer=_flashinfer_kernels(root, triton, tl),
                                 speculator=_speculator_kernels(root, triton, tl))


def _kernel_from(path: Path, name: str, triton, tl):
    """Triton kernel ``name`` compiled from vLLM's file ``path`` alone (interpreter
    on): for modules that import flashinfer or most of vLLM, whose kernels use
    triton and tl only."""
    tree = ast.parse(path.read_text())
    defs = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name]
    if len(defs) != 1:
        raise LookupError(f"{name} not found in {path}")
    namespace = {"triton": triton, "tl": tl, "__name__": name}
    with triton_interpreter():
        exec(compile(ast.Module(body=defs, type_ignores=[]), str(path), "exec"), namespace)
    return namespace[name]


def _flashinfer_kernels(root: Path, triton, tl) -> types.SimpleNamespace:
    """The FlashInfer backend's ``_copy_page_indices_kernel``."""
    path = root / "vllm" / "v1" / "attention" / "backends" / "flashinfer.py"
    return types.SimpleNamespace(_copy_page_indices_kernel=_kernel_from(path, "_copy_page_indices_kernel", triton, tl))


def _speculator_kernels(root: Path, triton, tl) -> types.SimpleNamespace:
    """The target-dependent speculator's ``_prepare_decode_inputs_kernel`` and
    ``_update_draft_inputs_kernel``."""
    path = root / "vllm" / "v1" / "worker" / "gpu" / "spec_decode" / "target_dependent_ar" / "speculator.py"
    names = ("_prepare_decode_inputs_kernel", "_update_draft_inputs_kernel")
    return types.SimpleNamespace(**{name: _kernel_from(path, name, triton, tl) for name in names})


def _ptrs(tables) -> torch.Tensor:
    return torch.tensor([t.data_ptr() for t in tables], dtype=torch.uint64)


def compute_slot_mappings(up, *, idx_mapping, query_start_loc, positions, block_tables, block_sizes,
                          slot_mapping_enabled, dcp_sharded, slot_mappings, cp_rank=0, cp_size=1, cp_interleave=1,
                          pad_id=-1) -> None:
    """BlockTables.compute_slot_mappings's launch (its strides: each table's stride(0))."""
    groups = len(block_tables)
    if groups == 0:
        return
    assert pad_id == up.pad_slot_id
    up.block_table._compute_slot_mappings_kernel[(groups, idx_mapping.shape[0] + 1)](
        slot_mappings.shape[1], idx_mapping, query_start_loc, positions, _ptrs(block_tables),
        torch.tensor([t.stride(0) for t in block_tables], dtype=torch.int64), block_sizes, slot_mapping_enabled,
        dcp_sharded, slot_mappings, slot_mappings.stride(0), cp_rank, CP_SIZE=cp_size, CP_INTERLEAVE=cp_interleave,
        PAD_ID=up.pad_slot_id, TRITON_BLOCK_SIZE=1024)


def gather_block_tables(up, *, idx_mapping, src_block_tables, num_blocks, dst_block_tables, num_rows,
                        num_computed_tokens=None, sliding_window_reach=None, block_sizes=None) -> None:
    """BlockTables.gather_block_tables's launch (vLLM addresses src and dst rows
    with the source's stride: the tables must share it)."""
    groups = len(src_block_tables)
    if groups == 0:
        return
    mask = num_computed_tokens is not None
    if sliding_window_reach is None:
        sliding_window_reach = torch.zeros(groups, dtype=torch.int32)
    if block_sizes is None:
        block_sizes = torch.ones(groups, dtype=torch.int32)
    up.block_table._gather_block_tables_kernel[(groups, num_rows)](
        idx_mapping, _ptrs(src_block_tables), _ptrs(dst_block_tables),
        torch.tensor([t.stride(0) for t in src_block_tables], dtype=torch.int64), num_blocks,
        num_blocks.stride(0), idx_mapping.shape[0], num_computed_tokens if mask else sliding_window_reach,
        sliding_window_reach, block_sizes, MASK_SLIDING_WINDOW=mask, BLOCK_SIZE=1024)


def copy_page_indices(up, page_indices, block_table, cu_num_blocks) -> None:
    """FlashInferMetadataBuilder._compute_flashinfer_kv_metadata's launch."""
    num_reqs = cu_num_blocks.numel() - 1
    if num_reqs > 0:
        up.flashinfer._copy_page_indices_kernel[(num_reqs,)](
            page_indices, block_table, block_table.stride(0), cu_num_blocks, BLOCK_SIZE=1024)


def prepare_decode_inputs(up, draft_tokens, target_seq_lens, num_rejected, input_ids, positions,
                          sample_src_positions, query_start_loc, seq_lens, max_model_len, max_num_reqs,
                          advance_draft_positions=True) -> None:
    """prepare_decode_inputs's launch (vLLM passes column 0 of its draft tokens)."""
    draft = draft_tokens[:, 0] if draft_tokens.dim() == 2 else draft_tokens
    up.speculator._prepare_decode_inputs_kernel[(draft.shape[0] + 1,)](
        draft, draft.stride(0), target_seq_lens, num_rejected, input_ids, positions, sample_src_positions,
        query_start_loc, seq_lens, max_model_len, max_num_reqs, BLOCK_SIZE=1024,
        ADVANCE_DRAFT_POSITIONS=advance_draft_positions)


def update_draft_inputs(up, draft_tokens, current_draft_step, hidden_states, output_draft_tokens,
                        next_input_hidden_states, input_ids, positions, seq_lens, sample_src_positions, max_model_len,
                        num_speculative_steps, advance_draft_positions=True) -> None:
    """update_draft_inputs's launch, over num_reqs = draft_tokens.shape[0] programs
    (``_generate_draft`` samples draft_tokens from the first num_reqs rows)."""
    num_reqs = draft_tokens.shape[0]
    if num_reqs == 0:
        return  # an empty grid: vLLM's kernel runs no program
    up.speculator._update_draft_inputs_kernel[(num_reqs,)](
        output_draft_tokens, output_draft_tokens.stride(0), next_input_hidden_states,
        next_input_hidden_states.stride(0), input_ids, positions, sample_src_positions, seq_lens, draft_tokens,
        current_draft_step, hidden_states, hidden_states.stride(0), hidden_states.shape[1], max_model_len,
        num_speculative_steps, BLOCK_SIZE=1024, ADVANCE_DRAFT_POSITIONS=advance_draft_positions)


def prepare_pos_seq_lens(up, *, idx_mapping, query_start_loc, num_computed_tokens, pos, seq_lens) -> None:
    up.input_batch.prepare_pos_seq_lens(idx_mapping, query_start_loc, num_computed_tokens, pos, seq_lens)


def combine_sampled_and_draft_tokens(up, *, input_ids, idx_mapping, last_sampled_tokens, query_start_loc, seq_lens,
                                     prefill_len, draft_tokens, cu_num_logits, logits_indices,
                                     num_new_sampled_tokens=1) -> None:
    """vLLM's function allocates logits_indices (num_logits entries); copied into ours."""
    out = up.input_batch.combine_sampled_and_draft_tokens(
        input_ids, idx_mapping, last_sampled_tokens, query_start_loc, seq_lens, prefill_len, draft_tokens,
        cu_num_logits, logits_indices.numel(), num_new_sampled_tokens)
    logits_indices.copy_(out)
