"""The op descriptions (sgl_meta._op) against what the binary registers and
what the tree holds: every op is described, once, and everything derived from
the description is in place."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import sgl_meta
from sgl_meta import _op, reference

ROOT = Path(__file__).resolve().parent.parent


def registered_ops() -> set[str]:
    prefix = "sgl_meta::"
    return {n[len(prefix):] for n in torch._C._dispatch_get_all_op_names() if n.startswith(prefix)}


def test_every_registered_op_is_described_and_nothing_else():
    assert set(_op.OPS) == registered_ops()


@pytest.mark.parametrize("name", sorted(_op.OPS))
def test_an_op_is_exported_with_its_schema_signature(name):
    op = _op.OPS[name]
    fn = getattr(sgl_meta, name)
    assert name in sgl_meta.__all__
    assert fn.op is op
    assert list(inspect.signature(fn).parameters) == [a.name for a in op.args]
    schema = getattr(torch.ops.sgl_meta, name).default._schema
    assert [a.name for a in schema.arguments] == [a.name for a in op.args]
    assert fn.__doc__ and fn.__doc__.strip().startswith(op.summary)


@pytest.mark.parametrize("name", sorted(_op.OPS))
def test_an_op_has_its_family_in_every_layer(name):
    family = _op.OPS[name].family
    for part in ("params.h", "kernel.cu", "cpu.cpp", "binding.cpp"):
        assert (ROOT / "csrc" / family / part).is_file(), f"csrc/{family}/{part}"
    assert f"SGL_META_BIND({name})" in (ROOT / "csrc" / family / "binding.cpp").read_text()
    assert getattr(sgl_meta, name).__module__ == f"sgl_meta.{family}"
    assert (ROOT / "docs" / "operators" / f"{family}.md").is_file()
    assert callable(getattr(reference, name, None)), f"sgl_meta.reference.{name}"


@pytest.mark.parametrize("name", sorted(_op.DROPINS))
def test_a_dropin_is_exported(name):
    assert name in sgl_meta.__all__
    assert getattr(sgl_meta, name).__name__ == name


def test_the_docs_op_table_is_current():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "op_table.py"), "--check"],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", sorted(_op.OPS))
def test_every_tensor_dtype_set_is_a_known_one(name):
    for a in _op.OPS[name].args:
        assert a.dtypes in ((_op.INT32, _op.INT64, _op.INDEX, _op.BOOL, _op.FLOATING) if a.is_tensor else ((),)), \
            (name, a.name)
