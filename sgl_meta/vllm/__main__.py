"""``python -m sgl_meta.vllm``: what the vLLM plugin would do in this
environment, one line per table row, without starting vLLM.

Same checks as ``register()`` (switches, the vLLM version, CUDA kernels, each
row's op, vLLM's objects, signatures and launch grids; without a visible GPU it
says so and reports the rows anyway); imports vLLM's target modules but
installs nothing. Exit status 0 whatever it finds.
"""

from __future__ import annotations

from .plugin import ENTRY_POINT, inactive_reason, package_dir, plan, vllm_version


def main() -> None:
    import os

    from .. import __version__

    print(f"sgl-meta {__version__} at {package_dir()}; vllm {vllm_version() or 'not installed'}")
    allowed = os.environ.get("VLLM_PLUGINS")
    if allowed is not None and ENTRY_POINT not in {x.strip() for x in allowed.split(",")}:
        print(f"inactive: VLLM_PLUGINS={allowed} does not name {ENTRY_POINT} (vLLM will not call the plugin)")
        return
    why = inactive_reason(device=False)
    if why:
        print(f"inactive: {why}")
        return
    here = inactive_reason()  # only the GPU check is left: say so, and report the rows anyway
    if here:
        print(f"note: inactive here, {here}; the rows below take effect where vLLM runs on a GPU")
    usable, skipped = plan()
    for row, ours in usable:
        via = "register_kernels" if row.how == "kernel" else "the class attribute"
        print(f"replaces {row.target} with {ours.__module__}.{ours.__name__} (via {via})")
    for row, reason in skipped:
        print(f"keeps    {row.target}: {reason}")


if __name__ == "__main__":
    main()
