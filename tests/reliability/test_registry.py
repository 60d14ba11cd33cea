"""The registry is what the suite tests: every entry is the public op it names,
checked against that op's reference, and every op the extension registers has
an entry. (A renamed export would otherwise leave a property test running
against nothing, or an op with no property test at all.)"""

from __future__ import annotations

import pytest
import torch

import bad_input_table
import hostile_table
import sgl_meta
import st_dsa_metadata_copy
from registry import ENTRIES
from sgl_meta import reference

# Drop-ins in upstream's signatures that sgl_meta.reference does not mirror:
# their oracle is docs/operators/dsa_metadata_copy.md's table, written out in
# the strategy module.
SPEC_ORACLES = {
    "fused_metadata_copy_cuda": st_dsa_metadata_copy.spec_copy,
    "fused_metadata_copy_multi_cuda": st_dsa_metadata_copy.spec_copy_multi_seed,
}


@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_entry_is_the_public_op_and_its_reference(entry):
    assert entry.name in sgl_meta.__all__, f"{entry.name} is not exported by sgl_meta"
    assert entry.op is getattr(sgl_meta, entry.name), f"{entry.name}: op is not sgl_meta.{entry.name}"
    if entry.name in SPEC_ORACLES:
        assert not hasattr(reference, entry.name), f"sgl_meta.reference.{entry.name} exists: make it the oracle"
        assert entry.ref is SPEC_ORACLES[entry.name]
    else:
        assert entry.ref is getattr(reference, entry.name, None), (
            f"{entry.name}: ref is not sgl_meta.reference.{entry.name}")


def test_entries_are_unique():
    names = [e.name for e in ENTRIES]
    assert len(names) == len(set(names)), names


def test_every_registered_op_has_an_entry():
    registered = {name.split("::", 1)[1].split(".", 1)[0] for name in torch._C._dispatch_get_all_op_names()
                  if name.startswith("sgl_meta::")}
    assert len(registered) >= 8, registered  # the extension's ops are there to be covered
    assert all(isinstance(getattr(torch.ops.sgl_meta, n), torch._ops.OpOverloadPacket) for n in registered)
    missing = registered - {e.name for e in ENTRIES}
    assert not missing, f"torch.ops.sgl_meta ops without a registry entry: {sorted(missing)}"


@pytest.mark.parametrize("table", [bad_input_table, hostile_table], ids=["bad_inputs", "hostile"])
def test_every_matrix_row_calls_a_public_op(table):
    bad = sorted({r.op for r in table.ROWS if r.op not in sgl_meta.__all__})
    assert not bad, f"rows of ops sgl_meta does not export: {bad}"
    no_base = sorted({r.id for r in table.ROWS if (r.base or r.op) not in table.BASES})
    assert not no_base, f"rows without a base call: {no_base}"
