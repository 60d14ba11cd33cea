"""The plugin on, in this process, the way SGLang's ``load_plugins()`` does it:
our ``register()`` then ``HookRegistry.apply_hooks()``.

HookRegistry patches module attributes in place and keeps no way back
(``reset()`` forgets the registrations, not the patches), so a run measures
SGLang's own path first and turns the plugin on once, for the rest of the process.
"""

from __future__ import annotations


def turn_on() -> dict:
    """Register and apply sgl-meta's hooks; ``{"hooked": [...], "skipped": {name: why}}``."""
    from sglang.srt.plugins.hook_registry import HookRegistry

    from ...sglang import plugin

    why = plugin.inactive_reason()
    if why:
        raise RuntimeError(f"the plugin is inactive here: {why}")
    plugin.register()
    HookRegistry.apply_hooks()
    usable, skipped = plugin.plan()
    return {"hooked": [h.name for h, _ in usable], "skipped": {h.name: w for h, w in skipped}}
