"""Shared pieces of the keyword wrappers (error translation)."""

from __future__ import annotations

import torch

from . import _C  # noqa: F401  (loads the library: registers torch.ops.sgl_meta.*)


def explain_missing_tensor(op_name: str, err: RuntimeError, args: dict) -> None:
    """Error path only: None for a required Tensor fails in the stable-ABI
    boxing with a message naming neither the op nor the argument
    ("Not yet supported ScalarType 47"); name them instead."""
    for a in getattr(torch.ops.sgl_meta, op_name).default._schema.arguments:
        if a.type.kind() == "TensorType" and a.name in args and args[a.name] is None:
            raise TypeError(f"sgl_meta.{op_name}: {a.name} must be a Tensor, got None") from err


