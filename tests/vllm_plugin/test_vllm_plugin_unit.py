"""The vLLM plugin's logic on CPU, without vLLM: switches, the version check,
each row's checks against a stand-in of vLLM 0.33's layout (fake_vllm/, whose
functions fail if the plugin lets vLLM's own code run), installing and putting
back, and what the replacement methods pass to our ops and leave in vLLM's
object. The same replacements against vLLM's real package and Triton kernels:
test_load_general_plugins.py (children in the overlay venv)."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from sgl_meta.reference import vllm_block_table as ref
from sgl_meta.vllm import plugin, replacements, targets

FAKE = Path(__file__).with_name("fake_vllm")


@pytest.fixture
def fake_vllm(monkeypatch):
    """vLLM 0.33's layout from fake_vllm/ in place of any installed vLLM."""
    saved = {k: v for k, v in sys.modules.items() if k == "vllm" or k.startswith("vllm.")}
    for name in saved:
        del sys.modules[name]
    monkeypatch.syspath_prepend(str(FAKE))
    # vLLM's FlashInfer backend imports flashinfer at the top; the fake one too (an empty module here).
    monkeypatch.setitem(sys.modules, "flashinfer", types.ModuleType("flashinfer"))
    monkeypatch.setattr(plugin, "vllm_version", lambda: "0.33.0")
    monkeypatch.delenv("SGLMETA_VLLM_PLUGIN", raising=False)
    yield
    plugin.uninstall()
    for name in [k for k in sys.modules if k == "vllm" or k.startswith("vllm.")]:
        del sys.modules[name]
    sys.modules.update(saved)


def test_import_sgl_meta_does_not_import_the_plugin():
    import subprocess

    code = "import sys, sgl_meta; print(any(m.split('.')[:2] == ['sgl_meta', 'vllm'] or m.split('.')[0] == 'vllm' for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(sgl_meta.__file__).parents[1])
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("value", ["0", "off", "False", "no"])
def test_switch_off(fake_vllm, monkeypatch, value):
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", value)
    assert plugin.inactive_reason() == f"SGLMETA_VLLM_PLUGIN={value}"


def test_switch_typo_is_off(fake_vllm, monkeypatch):
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "forced")
    assert "is not one of" in plugin.inactive_reason()


def test_default_needs_cuda_kernels_and_a_gpu(fake_vllm, monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert "no CUDA device is visible" in plugin.inactive_reason()
    assert plugin.inactive_reason(device=False) is None or "without CUDA kernels" in plugin.inactive_reason(False)
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    assert plugin.inactive_reason() is None


@pytest.mark.parametrize("version", ["0.32.1", "0.34.0", "1.0.0", None])
def test_other_vllm_versions_are_left_alone_even_forced(fake_vllm, monkeypatch, version):
    monkeypatch.setattr(plugin, "vllm_version", lambda: version)
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    why = plugin.inactive_reason()
    assert why == "vllm is not installed" if version is None else f"vllm {version} is installed" in why


def test_patch_releases_and_local_versions_are_accepted(fake_vllm, monkeypatch):
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    for version in ("0.33.1", "0.33.0+cu130"):
        monkeypatch.setattr(plugin, "vllm_version", lambda v=version: v)
        assert plugin.inactive_reason() is None


def test_every_row_checks_out_against_0_33s_layout(fake_vllm, monkeypatch):
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    usable, skipped = plugin.plan()
    assert skipped == []
    assert [r.name for r, _ in usable] == [
        "BlockTables.compute_slot_mappings", "BlockTables.gather_block_tables",
        "_prepare_pos_seq_lens_kernel", "_combine_sampled_and_draft_tokens_kernel", "_copy_page_indices_kernel",
        "_prepare_decode_inputs_kernel", "_update_draft_inputs_kernel",
    ]


def _skipped(name):
    usable, skipped = plugin.plan()
    return dict((r.name, why) for r, why in skipped).get(name)


def test_a_changed_method_signature_is_left_alone(fake_vllm, monkeypatch):
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    from vllm.v1.worker.gpu.block_table import BlockTables

    def compute_slot_mappings(self, idx_mapping, query_start_loc, positions, num_tokens_padded, out=None, extra=0):
        pass

    monkeypatch.setattr(BlockTables, "compute_slot_mappings", compute_slot_mappings)
    assert "signature differs" in _skipped("BlockTables.compute_slot_mappings")
    assert _skipped("BlockTables.gather_block_tables") is None


def test_a_changed_kernel_parameter_list_is_left_alone(fake_vllm, monkeypatch):
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    from vllm.v1.worker.gpu import input_batch

    kernel = input_batch._prepare_pos_seq_lens_kernel
    monkeypatch.setattr(kernel, "arg_names", kernel.arg_names[:-1] + ("STRIDE", "BLOCK_SIZE"))
    assert "kernel parameters differ" in _skipped("_prepare_pos_seq_lens_kernel")


def test_a_changed_launch_grid_is_left_alone(fake_vllm, monkeypatch, tmp_path):
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    from vllm.v1.worker.gpu import input_batch

    source = (FAKE / "vllm/v1/worker/gpu/input_batch.py").read_text().replace("[(num_reqs,)]", "[(num_reqs, 2)]")
    changed = tmp_path / "changed.py"
    changed.write_text(source)
    namespace: dict = {}
    exec(compile(source, str(changed), "exec"), namespace)
    monkeypatch.setattr(input_batch, "combine_sampled_and_draft_tokens", namespace["combine_sampled_and_draft_tokens"])
    assert "no longer has" in _skipped("_combine_sampled_and_draft_tokens_kernel")
    assert _skipped("_prepare_pos_seq_lens_kernel") is None


def _changed_builder(monkeypatch, tmp_path, old: str, new: str) -> None:
    """FlashInferMetadataBuilder._compute_flashinfer_kv_metadata with ``old`` in its source replaced by ``new``."""
    from vllm.v1.attention.backends import flashinfer

    source = (FAKE / "vllm/v1/attention/backends/flashinfer.py").read_text()
    assert old in source
    changed = tmp_path / "changed_flashinfer.py"
    changed.write_text(source.replace(old, new))
    namespace: dict = {}
    exec(compile(changed.read_text(), str(changed), "exec"), namespace)
    monkeypatch.setattr(flashinfer.FlashInferMetadataBuilder, "_compute_flashinfer_kv_metadata",
                        namespace["FlashInferMetadataBuilder"]._compute_flashinfer_kv_metadata)


@pytest.mark.parametrize("old,new,why", [
    ("[(num_reqs,)]", "[(num_reqs, 2)]", "no longer has `_copy_page_indices_kernel[(num_reqs,)]`"),
    ("copy_to_gpu(num_reqs + 1)", "copy_to_gpu()", "no longer has `paged_kv_indptr=self.paged_kv_indptr.copy_to_gpu"),
])
def test_copy_page_indices_launch_changes_are_left_alone(fake_vllm, monkeypatch, tmp_path, old, new, why):
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    _changed_builder(monkeypatch, tmp_path, old, new)
    reason = _skipped("_copy_page_indices_kernel")
    assert reason.startswith("_compute_flashinfer_kv_metadata " + why), reason
    assert "recovers the launch grid (num_reqs,)" in reason
    assert _skipped("_combine_sampled_and_draft_tokens_kernel") is None


def test_copy_page_indices_parameter_changes_are_left_alone(fake_vllm, monkeypatch):
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    from vllm.v1.attention.backends import flashinfer

    kernel = flashinfer._copy_page_indices_kernel
    monkeypatch.setattr(kernel, "arg_names", ("page_indices", "block_table", "cu_num_blocks", "BLOCK_SIZE"))
    assert "kernel parameters differ" in _skipped("_copy_page_indices_kernel")
    monkeypatch.delattr(flashinfer, "_copy_page_indices_kernel")
    assert "not in this vLLM" in _skipped("_copy_page_indices_kernel")


def test_without_flashinfer_its_row_is_left_alone_and_said_so(fake_vllm, monkeypatch, capsys):
    """vLLM's FlashInfer backend imports flashinfer at the top: without it that row
    is skipped, named in the one log line and by the CLI, and the others install."""
    from sgl_meta.vllm.__main__ import main

    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    monkeypatch.setitem(sys.modules, "flashinfer", None)  # what a missing package raises: ModuleNotFoundError
    why = "vLLM's module needs flashinfer, which is not installed (docs/vllm.md)"
    usable, skipped = plugin.plan()
    assert [(r.name, w) for r, w in skipped] == [("_copy_page_indices_kernel", why)]
    assert len(usable) == 6
    plugin.register()
    line = capsys.readouterr().err.strip().splitlines()
    assert len(line) == 1, line
    assert "_update_draft_inputs_kernel; leaves alone _copy_page_indices_kernel (" + why + ")" in line[0]
    plugin.uninstall()
    main()
    out = capsys.readouterr().out
    assert out.count("replaces vllm.") == 6
    assert f"keeps    vllm.v1.attention.backends.flashinfer._copy_page_indices_kernel: {why}" in out


def test_a_missing_target_or_op_is_left_alone(fake_vllm, monkeypatch):
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    from vllm.v1.worker.gpu.block_table import BlockTables

    monkeypatch.delattr(BlockTables, "gather_block_tables")
    assert "not in this vLLM" in _skipped("BlockTables.gather_block_tables")
    row = targets.Method("vllm.v1.worker.gpu.block_table.BlockTables.compute_slot_mappings",
                         "sgl_meta.vllm.replacements:compute_slot_mappings", "vllm_no_such_op")
    usable, skipped = plugin.plan((row,))
    assert "torch.ops.sgl_meta.vllm_no_such_op is not in this sgl-meta" in skipped[0][1]


def test_register_installs_logs_one_line_and_is_idempotent(fake_vllm, monkeypatch, capsys):
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    from vllm.triton_utils import dispatcher
    from vllm.v1.attention.backends import flashinfer
    from vllm.v1.worker.gpu import input_batch
    from vllm.v1.worker.gpu.block_table import BlockTables
    from vllm.v1.worker.gpu.spec_decode.target_dependent_ar import speculator

    dispatcher.calls.clear()
    plugin.register()
    line = capsys.readouterr().err.strip().splitlines()
    assert len(line) == 1 and "replaces vLLM's BlockTables.compute_slot_mappings" in line[0], line
    assert BlockTables.compute_slot_mappings is replacements.compute_slot_mappings
    assert BlockTables.gather_block_tables is replacements.gather_block_tables
    assert len(dispatcher.calls) == 1 and len(dispatcher.calls[0]) == 5
    assert input_batch._prepare_pos_seq_lens_kernel.func is replacements.prepare_pos_seq_lens_kernel
    assert input_batch._combine_sampled_and_draft_tokens_kernel.func is replacements.combine_sampled_and_draft_tokens_kernel
    assert flashinfer._copy_page_indices_kernel.func is replacements.copy_page_indices_kernel
    assert speculator._prepare_decode_inputs_kernel.func is replacements.prepare_decode_inputs_kernel
    assert speculator._update_draft_inputs_kernel.func is replacements.update_draft_inputs_kernel

    plugin.register()  # a second load in the same process changes nothing
    again = capsys.readouterr().err
    assert "replaces nothing" in again and again.count("already replaced in this process") == 7
    assert len(dispatcher.calls) == 1

    plugin.uninstall()
    assert BlockTables.compute_slot_mappings.__module__ == "vllm.v1.worker.gpu.block_table"
    assert not hasattr(input_batch._prepare_pos_seq_lens_kernel, "func")
    assert not hasattr(flashinfer._copy_page_indices_kernel, "func")
    assert not hasattr(speculator._prepare_decode_inputs_kernel, "func")
    assert not hasattr(speculator._update_draft_inputs_kernel, "func")


def test_more_groups_than_one_launch_takes_run_vllms_own_methods(fake_vllm, monkeypatch):
    from sgl_meta.vllm_block_table import MAX_GROUPS
    from vllm.v1.worker.gpu.block_table import BlockTables

    calls = []

    def compute_slot_mappings(self, idx_mapping, query_start_loc, positions, num_tokens_padded, out=None):
        calls.append(("slots", (idx_mapping, query_start_loc, positions, num_tokens_padded, out)))
        return "vllm's slots"

    def gather_block_tables(self, idx_mapping, num_reqs_padded, out=None, out_ptrs=None, num_computed_tokens=None):
        calls.append(("gather", (idx_mapping, num_reqs_padded, out, out_ptrs, num_computed_tokens)))
        return ("vllm's",)

    monkeypatch.setattr(BlockTables, "compute_slot_mappings", compute_slot_mappings)  # vLLM's, recording
    monkeypatch.setattr(BlockTables, "gather_block_tables", gather_block_tables)
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    plugin.register()
    try:
        assert BlockTables.compute_slot_mappings is replacements.compute_slot_mappings
        bt = _block_tables(G=2)
        bt.num_kv_cache_groups = MAX_GROUPS + 1
        args = (torch.tensor([0]), torch.tensor([0, 1], dtype=torch.int32), torch.tensor([0]), 3)
        assert BlockTables.compute_slot_mappings(bt, *args) == "vllm's slots"
        assert BlockTables.gather_block_tables(bt, torch.tensor([0]), 1) == ("vllm's",)
        assert [c[0] for c in calls] == ["slots", "gather"] and calls[0][1] == (*args, None)
        assert calls[1][1] == (torch.tensor([0]), 1, None, None, None)
        with pytest.raises(RuntimeError, match="must hold at most 32 tensors"):  # the op's own limit, as documented
            sgl_meta.vllm_gather_block_tables(
                idx_mapping=torch.tensor([0]), src_block_tables=[bt.block_tables[0].gpu] * (MAX_GROUPS + 1),
                num_blocks=torch.zeros(MAX_GROUPS + 1, 6, dtype=torch.int32),
                dst_block_tables=[torch.zeros(6, 5, dtype=torch.int32) for _ in range(MAX_GROUPS + 1)], num_rows=1)
    finally:
        plugin.uninstall()


def test_register_kernels_reduce_op_warning_is_not_shown(fake_vllm, monkeypatch):
    """vLLM's register_kernels reads torch.distributed.reduce_op, whose FutureWarning
    would add lines to the plugin's one; other warnings still pass."""
    import warnings

    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    from vllm.triton_utils import dispatcher

    real = dispatcher.register_kernels

    def warning_register_kernels(overrides):
        warnings.warn("`torch.distributed.reduce_op` is deprecated, please use `torch.distributed.ReduceOp` instead",
                      FutureWarning)
        warnings.warn("something else", UserWarning)
        real(overrides)

    monkeypatch.setattr(dispatcher, "register_kernels", warning_register_kernels)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        plugin.register()
    assert [str(w.message) for w in seen] == ["something else"]


def test_register_off_installs_nothing(fake_vllm, monkeypatch, capsys):
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "0")
    plugin.register()
    err = capsys.readouterr().err
    assert "inactive, vLLM keeps its own kernels (SGLMETA_VLLM_PLUGIN=0)" in err
    from vllm.v1.worker.gpu.block_table import BlockTables

    assert BlockTables.compute_slot_mappings.__module__ == "vllm.v1.worker.gpu.block_table"


def test_cli_prints_each_row(fake_vllm, monkeypatch, capsys):
    from sgl_meta.vllm.__main__ import main

    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    main()
    out = capsys.readouterr().out
    assert out.count("replaces vllm.") == 7 and out.count("via register_kernels") == 5
    monkeypatch.setenv("VLLM_PLUGINS", "someone_else")
    main()
    assert "does not name sgl_meta" in capsys.readouterr().out


@pytest.mark.parametrize("value, named", [("other,sgl_meta", True), ("other, sgl_meta", False), ("", False)])
def test_cli_reads_the_allow_list_as_vllm_does(fake_vllm, monkeypatch, capsys, value, named):
    """vLLM splits VLLM_PLUGINS on commas and keeps the spaces: " sgl_meta" names
    no plugin, and an empty value allows none."""
    from sgl_meta.vllm.__main__ import main

    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    monkeypatch.setenv("VLLM_PLUGINS", value)
    main()
    out = capsys.readouterr().out
    assert ("inactive: VLLM_PLUGINS does not name sgl_meta" not in out) == named, out
    assert (out.count("replaces vllm.") == 7) == named, out


def test_cli_says_when_vllm_cannot_see_the_entry_point(fake_vllm, monkeypatch, capsys):
    """An sgl-meta install whose metadata predates the vLLM plugin: vLLM's loader
    never finds it, so the report must not claim replacements."""
    from importlib import metadata

    from sgl_meta.vllm.__main__ import main

    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    monkeypatch.setattr(metadata, "entry_points", lambda group=None: [])
    main()
    out = capsys.readouterr().out
    assert "inactive: vLLM finds plugins through the entry-point group vllm.general_plugins" in out
    assert "replaces" not in out


# What the replacement methods do with vLLM's object: a BlockTables-shaped
# namespace on CPU tensors (our ops' CPU kernels), checked against the reference.


def _block_tables(G=2, max_reqs=6, width=5, tokens=24, reach=(0, 9), seed=0):
    g = torch.Generator().manual_seed(seed)
    tables = [torch.randint(1, 100, (max_reqs, width), dtype=torch.int32, generator=g) for _ in range(G)]
    return types.SimpleNamespace(
        num_kv_cache_groups=G,
        block_tables=[types.SimpleNamespace(gpu=t) for t in tables],
        block_table_ptrs=object(),
        block_sizes_tensor=torch.tensor([4, 8][:G], dtype=torch.int32),
        slot_mapping_enabled=torch.ones(G, dtype=torch.bool),
        dcp_sharded=torch.ones(G, dtype=torch.bool),
        sliding_window_reach=torch.tensor(reach[:G], dtype=torch.int32),
        has_sliding_window_groups=any(r > 0 for r in reach[:G]),
        num_blocks=types.SimpleNamespace(gpu=torch.randint(0, width + 1, (G, max_reqs), dtype=torch.int32, generator=g)),
        input_block_tables=[torch.full((max_reqs, width), 7, dtype=torch.int32) for _ in range(G)],
        _num_dirty_rows=0,
        slot_mappings=torch.full((G, tokens), 5, dtype=torch.int64),
        cp_rank=0, cp_size=1, cp_interleave=1,
    )


def test_gather_keeps_vllms_dirty_row_bookkeeping():
    bt = _block_tables()
    idx = torch.tensor([4, 0, 2])
    views = replacements.gather_block_tables(bt, idx, num_reqs_padded=4)
    assert bt._num_dirty_rows == 3
    assert all(v.shape == (4, 5) and v.data_ptr() == t.data_ptr() for v, t in zip(views, bt.input_block_tables))
    expected = [t.clone() for t in bt.input_block_tables]
    bt._num_dirty_rows = 6  # a larger batch ran before: its rows must be cleared too
    replacements.gather_block_tables(bt, idx[:1], num_reqs_padded=2)
    assert bt._num_dirty_rows == 1
    for got in bt.input_block_tables:
        assert torch.count_nonzero(got[1:]).item() == 0
    want = [t.clone() for t in expected]
    ref.vllm_gather_block_tables(idx_mapping=idx[:1], src_block_tables=[b.gpu for b in bt.block_tables],
                                 num_blocks=bt.num_blocks.gpu, dst_block_tables=want, num_rows=6)
    for got, w in zip(bt.input_block_tables, want):
        assert torch.equal(got, w)


def test_gather_masks_only_with_num_computed_tokens_and_a_window():
    bt = _block_tables(reach=(0, 9))
    idx = torch.tensor([1, 3])
    computed = torch.tensor([0, 40, 0, 17, 0, 0], dtype=torch.int32)
    replacements.gather_block_tables(bt, idx, 2, num_computed_tokens=computed)
    want = [torch.full((6, 5), 7, dtype=torch.int32) for _ in range(2)]
    ref.vllm_gather_block_tables(idx_mapping=idx, src_block_tables=[b.gpu for b in bt.block_tables],
                                 num_blocks=bt.num_blocks.gpu, dst_block_tables=want, num_rows=2,
                                 num_computed_tokens=computed, sliding_window_reach=bt.sliding_window_reach,
                                 block_sizes=bt.block_sizes_tensor)
    assert all(torch.equal(a, b) for a, b in zip(bt.input_block_tables, want))
    no_window = _block_tables(reach=(0, 0))
    replacements.gather_block_tables(no_window, idx, 2, num_computed_tokens=computed)
    want = [torch.full((6, 5), 7, dtype=torch.int32) for _ in range(2)]
    ref.vllm_gather_block_tables(idx_mapping=idx, src_block_tables=[b.gpu for b in no_window.block_tables],
                                 num_blocks=no_window.num_blocks.gpu, dst_block_tables=want, num_rows=2)
    assert all(torch.equal(a, b) for a, b in zip(no_window.input_block_tables, want))


def test_gather_into_an_external_output_leaves_the_shared_rows():
    bt = _block_tables()
    bt._num_dirty_rows = 5
    out = tuple(torch.full((3, 5), -1, dtype=torch.int32) for _ in range(2))
    views = replacements.gather_block_tables(bt, torch.tensor([2, 5]), 3, out=out, out_ptrs=torch.zeros(2))
    assert bt._num_dirty_rows == 5
    assert all(torch.equal(t, torch.full((6, 5), 7, dtype=torch.int32)) for t in bt.input_block_tables)
    assert [v.data_ptr() for v in views] == [o.data_ptr() for o in out]
    assert all(torch.count_nonzero(o[2]).item() == 0 for o in out)
    with pytest.raises(AssertionError):
        replacements.gather_block_tables(bt, torch.tensor([2]), 1, out=out)  # vLLM asserts out_ptrs too


def test_no_kv_cache_groups():
    bt = _block_tables()
    bt.num_kv_cache_groups = 0
    assert replacements.gather_block_tables(bt, torch.tensor([0]), 1) == ()
    before = bt.slot_mappings.clone()
    view = replacements.compute_slot_mappings(bt, torch.tensor([0]), torch.tensor([0, 1], dtype=torch.int32),
                                              torch.tensor([0]), 3)
    assert view.shape == (2, 3) and torch.equal(bt.slot_mappings, before)


@pytest.mark.parametrize("use_out", [False, True])
def test_slot_mappings_equal_the_reference_and_return_vllms_view(use_out):
    bt = _block_tables()
    idx = torch.tensor([3, -1, 0])
    qsl = torch.tensor([0, 4, 6, 9], dtype=torch.int32)
    pos = torch.randint(0, 20, (9,))
    out = torch.full((2, 24), 3, dtype=torch.int64) if use_out else None
    view = replacements.compute_slot_mappings(bt, idx, qsl, pos, 12, out=out)
    target = out if use_out else bt.slot_mappings
    assert view.shape == (2, 12) and view.data_ptr() == target.data_ptr()
    want = torch.full((2, 24), 3 if use_out else 5, dtype=torch.int64)
    ref.vllm_compute_slot_mappings(idx_mapping=idx, query_start_loc=qsl, positions=pos,
                                   block_tables=[b.gpu for b in bt.block_tables], block_sizes=bt.block_sizes_tensor,
                                   slot_mapping_enabled=bt.slot_mapping_enabled, dcp_sharded=bt.dcp_sharded,
                                   slot_mappings=want)
    assert torch.equal(target, want)


def test_the_table_list_follows_vllms_layout_rebuild():
    bt = _block_tables()
    first = replacements._tables(bt)
    assert replacements._tables(bt) is first
    bt.block_tables = bt.block_tables[::-1]
    bt.block_table_ptrs = object()  # what init_block_table_layout_tensors does
    assert replacements._tables(bt) == [b.gpu for b in bt.block_tables]


def test_kernel_stand_ins_refuse_a_launch_they_were_not_written_for():
    seq_lens = torch.zeros(4, dtype=torch.int32)
    with pytest.raises(RuntimeError, match="max_num_reqs=3 is not seq_lens.shape"):
        replacements.prepare_pos_seq_lens_kernel(torch.zeros(4, dtype=torch.int64), seq_lens, torch.tensor([0]),
                                                 torch.tensor([0, 1], dtype=torch.int32),
                                                 torch.zeros(4, dtype=torch.int32), 3, BLOCK_SIZE=1024)
    draft = torch.zeros(4, 2, dtype=torch.int32)
    with pytest.raises(RuntimeError, match="draft_tokens_stride=3"):
        replacements.combine_sampled_and_draft_tokens_kernel(*([None] * 6), draft, 3, None, None)
    table = torch.zeros(4, 8, dtype=torch.int32)
    with pytest.raises(RuntimeError, match="block_table_stride=16 is not block_table.stride"):
        replacements.copy_page_indices_kernel(torch.zeros(8, dtype=torch.int32), table, 16,
                                              torch.tensor([0, 8], dtype=torch.int32), BLOCK_SIZE=1024)


def test_installed_copy_page_indices_writes_each_requests_blocks(fake_vllm, monkeypatch):
    """vLLM's launcher (the fake's copy of its launch) reaches our op through the
    dispatcher: each request's first num_blocks entries of its row, packed at
    paged_kv_indptr, the rest of paged_kv_indices left as it was."""
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    plugin.register()
    from vllm.v1.attention.backends.flashinfer import FlashInferMetadataBuilder

    counts = [3, 0, 5, 1]
    table = torch.randint(1, 1000, (6, 7), dtype=torch.int32)[:, :6]  # padded rows, rows wider than needed
    indptr = torch.zeros(7, dtype=torch.int32)
    indptr[1:5] = torch.tensor(counts).cumsum(0)
    builder = FlashInferMetadataBuilder()
    builder.paged_kv_indptr = types.SimpleNamespace(np=indptr.numpy(), copy_to_gpu=lambda n: indptr[:n].clone())
    builder.paged_kv_indices = torch.full((40,), -5, dtype=torch.int32)
    got = builder._compute_flashinfer_kv_metadata(None, None, table, len(counts), 16)
    want = torch.full((40,), -5, dtype=torch.int32)
    want[:9] = torch.cat([table[r, :c] for r, c in enumerate(counts)])
    assert torch.equal(builder.paged_kv_indices, want)
    assert got.shape == (9,) and got.data_ptr() == builder.paged_kv_indices.data_ptr()


def test_prepare_decode_inputs_stand_in_refuses_a_stride_it_was_not_written_for():
    draft = torch.zeros(4, 3, dtype=torch.int64)[:, 0]
    args = [torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int32),
            torch.zeros(4, dtype=torch.int64), torch.zeros(4, dtype=torch.int64), torch.zeros(5, dtype=torch.int32),
            torch.zeros(4, dtype=torch.int32), 100, 4]
    with pytest.raises(RuntimeError, match="draft_tokens_stride=5 is not the stride"):
        replacements.prepare_decode_inputs_kernel(draft, 5, *args, BLOCK_SIZE=1024, ADVANCE_DRAFT_POSITIONS=True)


@pytest.mark.parametrize("advance", [True, False])
def test_installed_prepare_decode_inputs_equals_the_reference(fake_vllm, monkeypatch, advance):
    """vLLM's launcher (the fake's copy of its launch, column 0 of the draft
    tokens) reaches our op through the dispatcher, with vLLM's buffers."""
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    plugin.register()
    from types import SimpleNamespace

    from vllm.v1.worker.gpu.spec_decode.target_dependent_ar import speculator

    gen = torch.Generator().manual_seed(7)
    n, R, L = 5, 8, 100
    draft = torch.randint(0, 2**33, (R, 3), generator=gen)
    target = torch.randint(90, L + 1, (n,), dtype=torch.int32, generator=gen)
    rejected = torch.randint(0, 3, (n,), dtype=torch.int32, generator=gen)

    def buffers():
        g = torch.Generator().manual_seed(8)
        return SimpleNamespace(input_ids=torch.randint(-9, 0, (16,), dtype=torch.int32, generator=g),
                               positions=torch.randint(90, L, (16,), generator=g),
                               query_start_loc=torch.randint(-9, 0, (R + 1,), dtype=torch.int32, generator=g),
                               seq_lens=torch.randint(-9, 0, (R,), dtype=torch.int32, generator=g))

    ours, want = buffers(), buffers()
    sample_ours, sample_want = torch.arange(R) * 7, torch.arange(R) * 7
    speculator.prepare_decode_inputs(draft[:n, 0], target, rejected, ours, sample_ours, L, R,
                                     advance_draft_positions=advance)
    reference.vllm_prepare_decode_inputs(draft[:n], target, rejected, want.input_ids, want.positions, sample_want,
                                         want.query_start_loc, want.seq_lens, L, R, advance)
    for name in ("input_ids", "positions", "query_start_loc", "seq_lens"):
        assert torch.equal(getattr(ours, name), getattr(want, name)), name
    assert torch.equal(sample_ours, sample_want)
    plugin.uninstall()


def _changed_speculator(monkeypatch, tmp_path, old: str, new: str) -> None:
    """The fake speculator module's update_draft_inputs and _generate_draft with ``old``
    in their source replaced by ``new``."""
    from vllm.v1.worker.gpu.spec_decode.target_dependent_ar import speculator

    source = (FAKE / "vllm/v1/worker/gpu/spec_decode/target_dependent_ar/speculator.py").read_text()
    assert old in source
    changed = tmp_path / "changed_speculator.py"
    changed.write_text(source.replace(old, new))
    namespace: dict = {"__name__": "changed_speculator"}
    exec(compile(changed.read_text(), str(changed), "exec"), namespace)
    monkeypatch.setattr(speculator, "update_draft_inputs", namespace["update_draft_inputs"])
    monkeypatch.setattr(speculator.TargetDependentARSpeculator, "_generate_draft",
                        namespace["TargetDependentARSpeculator"]._generate_draft)


@pytest.mark.parametrize("old,new,where", [
    ("[(num_reqs,)]", "[(num_reqs + 1,)]",
     "update_draft_inputs no longer has `_update_draft_inputs_kernel[(num_reqs,)]`"),
    ("last_hidden_states[:num_reqs]", "last_hidden_states", "_generate_draft no longer has `sample_hidden_states="),
    ("self.sample_src_positions,\n            num_reqs,", "self.sample_src_positions,\n            num_reqs + 1,",
     "_generate_draft no longer has `update_draft_inputs(draft_tokens,"),
])
def test_update_draft_inputs_launch_changes_are_left_alone(fake_vllm, monkeypatch, tmp_path, old, new, where):
    """The grid is (num_reqs,) in update_draft_inputs, and num_reqs is what
    _generate_draft sampled draft_tokens for and hands over: a change to either
    leaves the row alone, saying which statement moved."""
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    _changed_speculator(monkeypatch, tmp_path, old, new)
    reason = _skipped("_update_draft_inputs_kernel")
    assert reason is not None and reason.startswith(where), reason
    assert "recovers the launch grid (num_reqs,) from its arguments through `sample_hidden_states=" in reason
    assert _skipped("_prepare_decode_inputs_kernel") is None


def test_update_draft_inputs_parameter_changes_are_left_alone(fake_vllm, monkeypatch):
    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    from vllm.v1.worker.gpu.spec_decode.target_dependent_ar import speculator

    kernel = speculator._update_draft_inputs_kernel
    monkeypatch.setattr(kernel, "arg_names", kernel.arg_names[:-2] + ("BLOCK_SIZE",))
    assert "kernel parameters differ" in _skipped("_update_draft_inputs_kernel")


def test_update_draft_inputs_stand_in_refuses_a_launch_it_was_not_written_for():
    out = torch.zeros(4, 3, dtype=torch.int64)
    hidden, nxt = torch.zeros(6, 8, dtype=torch.bfloat16), torch.zeros(6, 8, dtype=torch.bfloat16)
    bufs = [torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int64), torch.zeros(4, dtype=torch.int64),
            torch.zeros(4, dtype=torch.int32), torch.zeros(4, dtype=torch.int64), torch.tensor(1)]
    for strides, hidden_size in (((4, 8, 8), 8), ((3, 8, 16), 8), ((3, 8, 8), 7)):
        with pytest.raises(RuntimeError, match="_update_draft_inputs_kernel stand-in: the strides and hidden_size="):
            replacements.update_draft_inputs_kernel(out, strides[0], nxt, strides[1], *bufs, hidden, strides[2],
                                                    hidden_size, 100, 3, BLOCK_SIZE=1024,
                                                    ADVANCE_DRAFT_POSITIONS=True)


@pytest.mark.parametrize("advance", [True, False])
@pytest.mark.parametrize("step", [1, 2])
def test_installed_update_draft_inputs_equals_the_reference(fake_vllm, monkeypatch, advance, step):
    """vLLM's _generate_draft (the fake's copy of its statements: the first num_reqs
    hidden states sampled, update_draft_inputs launched over num_reqs) reaches our op
    through the dispatcher, with vLLM's buffers; the last step writes the tokens only."""
    from types import SimpleNamespace

    monkeypatch.setenv("SGLMETA_VLLM_PLUGIN", "force")
    plugin.register()
    from vllm.v1.worker.gpu.spec_decode.target_dependent_ar import speculator

    gen = torch.Generator().manual_seed(11)
    n, R, T, H, L, S = 5, 8, 12, 24, 100, 3
    model_hidden = torch.randn(T, H, generator=gen).to(torch.bfloat16)
    sampled = torch.randint(0, 2**33, (n,), generator=gen)

    def state():
        g = torch.Generator().manual_seed(12)
        return SimpleNamespace(
            draft_tokens=torch.randint(-9, 0, (R, S), generator=g),
            hidden_states=torch.randn(T + 4, H, generator=g).to(torch.bfloat16),
            current_draft_step=torch.tensor(step),
            sample_src_positions=torch.arange(R) * 7,
            input_buffers=SimpleNamespace(input_ids=torch.randint(-9, 0, (16,), dtype=torch.int32, generator=g),
                                          positions=torch.randint(90, L, (16,), generator=g),
                                          seq_lens=torch.randint(90, L + 1, (R,), dtype=torch.int32, generator=g)),
            max_model_len=L, advance_draft_positions=advance,
            _run_model=lambda num_tokens: (model_hidden[:num_tokens], model_hidden[:num_tokens]),
            sample_draft=lambda hidden, positions: sampled[: hidden.shape[0]].clone())

    ours, want = state(), state()
    speculator.TargetDependentARSpeculator._generate_draft(ours, n, T, None, None, None, None, S)
    b = want.input_buffers
    reference.vllm_update_draft_inputs(sampled, want.current_draft_step, model_hidden, want.draft_tokens,
                                       want.hidden_states, b.input_ids, b.positions, b.seq_lens,
                                       want.sample_src_positions, L, S, advance)
    for name in ("draft_tokens", "sample_src_positions"):
        assert torch.equal(getattr(ours, name), getattr(want, name)), name
    assert torch.equal(ours.hidden_states.view(torch.int16), want.hidden_states.view(torch.int16))
    for name in ("input_ids", "positions", "seq_lens"):
        assert torch.equal(getattr(ours.input_buffers, name), getattr(b, name)), name
    assert torch.equal(ours.draft_tokens[:n, step], sampled)
    plugin.uninstall()


@pytest.mark.parametrize("argv, code", [(["--help"], 0), (["--bogus"], 2)])
def test_report_takes_no_options(argv, code, capsys):
    """``python -m sgl_meta.vllm --help`` prints what the report is; anything else is refused."""
    from sgl_meta.vllm.__main__ import main

    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == code
    out = capsys.readouterr()
    assert ("what the vLLM plugin would do" in out.out) if code == 0 else ("unrecognized arguments" in out.err)
