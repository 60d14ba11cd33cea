"""``python -m sgl_meta.sglang``: what the SGLang plugin would do in this
environment, one line per hook table row, without starting SGLang.

Same checks as ``register()`` (switches, CUDA kernels, each row's needs, the
installed SGLang's functions and signatures; without a visible GPU it says so
and reports the rows anyway); imports SGLang's target modules but registers
nothing. Exit status 0 whatever it finds; no options but --help (2 for any other).
"""

from __future__ import annotations

from typing import Optional, Sequence

from .. import _plugin
from .plugin import SWITCH, inactive_reason, plan


def main(argv: Sequence[str] = ()) -> None:
    import os

    _plugin.parse_cli("sgl_meta.sglang", __doc__, argv)
    _plugin.report("SGLang", SWITCH, allowed_plugins(os.environ.get("SGLANG_PLUGINS", "")), "SGLANG_PLUGINS",
                   inactive_reason, plan, _describe, "hooks", group="sglang.srt.plugins")


def allowed_plugins(value: str) -> Optional[set]:
    """SGLANG_PLUGINS as SGLang reads it: names stripped of spaces, empty ones
    dropped; None (every plugin loads) when it is unset or empty."""
    return {x.strip() for x in value.split(",") if x.strip()} if value else None


def _describe(hook, _) -> str:
    return f"{hook.verb:<8} {hook.target} with {hook.replacement.replace(':', '.')}"


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
