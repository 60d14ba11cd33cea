"""Fake (meta) implementations, so the ops trace under torch.compile / export.

Every sgl_meta op mutates caller-owned buffers and returns nothing, so its fake
implementation has no output to describe: shapes never change. The mutation
itself is declared in the schema (``Tensor(a!)``), from which torch.compile
auto-functionalizes the call.
"""

from __future__ import annotations

import torch

from . import _C  # noqa: F401  (the schemas must exist before fakes attach)

OPS_RETURNING_NOTHING = (
    "sgl_meta::update_trtllm_mha_graph_metadata",
    "sgl_meta::build_trtllm_mha_page_table",
    "sgl_meta::fused_metadata_copy",
    "sgl_meta::fused_metadata_copy_multi",
)


def _no_output(*args, **kwargs) -> None:
    return None


for _name in OPS_RETURNING_NOTHING:
    torch.library.register_fake(_name)(_no_output)
