"""Fake (meta) implementations, so the ops trace under torch.compile / export.

Every sgl_meta op mutates caller-owned buffers and returns nothing, so its fake
implementation has no output to describe: shapes never change. The mutation
itself is declared in the schema (``Tensor(a!)``), from which torch.compile
auto-functionalizes the call.
"""

from __future__ import annotations

import torch

from ._op import OPS

def _same_device_fake(qualname: str):
    """The fake kernel of one op: no output, but the one check a fake can make.

    It is also the Meta kernel, which the dispatcher picks for a call that mixes
    meta with CPU tensors: without this check such a call silently did nothing
    (the CPU outputs kept their old values). Under FakeTensorMode it turns a
    mixed-device call into a trace-time error, as the real kernel would raise.
    """
    op_name = qualname.split("::")[1]
    names = [a.name for a in getattr(torch.ops.sgl_meta, op_name).default._schema.arguments]

    def fake(*args, **kwargs) -> None:
        first = None
        for name, value in [*zip(names, args), *kwargs.items()]:
            listed = isinstance(value, (list, tuple))
            for k, t in enumerate(value if listed else (value,)):
                if not isinstance(t, torch.Tensor):
                    continue
                where = f"{name}[{k}]" if listed else name
                if first is None:
                    first = (where, t.device)
                elif t.device != first[1]:
                    raise RuntimeError(
                        f"sgl_meta.{op_name}: {where} is on {t.device} but {first[0]} is on {first[1]}"
                        " (every tensor argument must be on one device)"
                    )
        return None

    return fake


for _name in OPS:
    torch.library.register_fake(f"sgl_meta::{_name}")(_same_device_fake(f"sgl_meta::{_name}"))
