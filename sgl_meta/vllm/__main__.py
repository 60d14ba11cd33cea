"""``python -m sgl_meta.vllm``: what the vLLM plugin would do in this
environment, one line per table row, without starting vLLM.

Same checks as ``register()`` (switches, the vLLM version, CUDA kernels, each
row's op, vLLM's objects, signatures and launch grids; without a visible GPU it
says so and reports the rows anyway); imports vLLM's target modules but
installs nothing. Exit status 0 whatever it finds; no options but --help (2 for any
other).
"""

from __future__ import annotations

from typing import Optional, Sequence

from .. import _plugin
from .plugin import SWITCH, inactive_reason, plan, vllm_version


def main(argv: Sequence[str] = ()) -> None:
    import os

    _plugin.parse_cli("sgl_meta.vllm", __doc__, argv)
    _plugin.report("vLLM", SWITCH, allowed_plugins(os.environ.get("VLLM_PLUGINS")), "VLLM_PLUGINS", inactive_reason,
                   plan, _describe, "rows", versions=f"; vllm {vllm_version() or 'not installed'}",
                   group="vllm.general_plugins")


def allowed_plugins(value: Optional[str]) -> Optional[list]:
    """VLLM_PLUGINS as vLLM reads it: split on commas, spaces kept (" sgl_meta"
    names no plugin, an empty value none); None (every plugin loads) when unset."""
    return None if value is None else value.split(",")


def _describe(row, ours) -> str:
    via = "register_kernels" if row.how == "kernel" else "the class attribute"
    return f"replaces {row.target} with {ours.__module__}.{ours.__name__} (via {via})"


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
