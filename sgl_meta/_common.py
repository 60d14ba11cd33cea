"""Shared pieces of the keyword wrappers (error translation)."""

from __future__ import annotations

import torch

from . import _C  # noqa: F401  (loads the library: registers torch.ops.sgl_meta.*)


def explain_missing_tensor(op_name: str, err: RuntimeError, args: dict) -> None:
    """Error path only: None for a required Tensor fails in the stable-ABI
    boxing with a message naming neither the op nor the argument
    ("Not yet supported ScalarType 47"), and None inside a Tensor[] list with
    torch's generic list-type message; name them instead (e.g.
    ``page_table_1_dst[2]``)."""
    for a in getattr(torch.ops.sgl_meta, op_name).default._schema.arguments:
        value = args.get(a.name)
        kind = a.type.kind()
        if kind == "TensorType" and a.name in args and value is None:
            raise TypeError(f"sgl_meta.{op_name}: {a.name} must be a Tensor, got None") from err
        if kind == "ListType" and isinstance(value, torch.Tensor):
            raise TypeError(
                f"sgl_meta.{op_name}: {a.name} must be a list of tensors (one per destination set), "
                f"got a Tensor of shape {tuple(value.shape)}"
            ) from err
        if kind == "ListType" and isinstance(value, (list, tuple)):
            for i, element in enumerate(value):
                if element is None:
                    raise TypeError(f"sgl_meta.{op_name}: {a.name}[{i}] must be a Tensor, got None") from err
