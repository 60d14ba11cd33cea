"""``python -m sgl_meta.sglang``: what the SGLang plugin would do in this
environment, one line per hook table row, without starting SGLang.

Same checks as ``register()`` (switches, CUDA kernels, each row's needs, the
installed SGLang's functions and signatures; without a visible GPU it says so
and reports the rows anyway); imports SGLang's target modules but registers
nothing. Exit status 0 whatever it finds.
"""

from __future__ import annotations

from .plugin import ENTRY_POINT, inactive_reason, package_dir, plan


def main() -> None:
    import os

    from .. import __version__

    print(f"sgl-meta {__version__} at {package_dir()}")
    allowed = os.environ.get("SGLANG_PLUGINS", "").strip()
    if allowed and ENTRY_POINT not in {x.strip() for x in allowed.split(",")}:
        print(f"inactive: SGLANG_PLUGINS={allowed} does not name {ENTRY_POINT} (SGLang will not call the plugin)")
        return
    why = inactive_reason(device=False)
    if why:
        print(f"inactive: {why}")
        return
    here = inactive_reason()  # only the GPU check is left: say so, and report the rows anyway
    if here:
        print(f"note: inactive here, {here}; the hooks below take effect where SGLang runs on a GPU")
    usable, skipped = plan()
    for hook, _ in usable:
        print(f"{hook.verb:<8} {hook.target} with {hook.replacement.replace(':', '.')}")
    for hook, reason in skipped:
        print(f"keeps    {hook.target}: {reason}")


if __name__ == "__main__":
    main()
