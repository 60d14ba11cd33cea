"""The ``sglang.srt.plugins`` entry point: ``register()``.

SGLang's ``load_plugins()`` calls :func:`register` early in every process
(server, scheduler workers, engine); it registers one hook (REPLACE, or AROUND
where ours keeps SGLang's function for what it does not cover) per usable row
of :data:`~sgl_meta.sglang.hooks.HOOKS`, and SGLang's ``HookRegistry``
applies them right after (including ``from X import Y`` copies in modules
already imported). Each call logs exactly one line: what it replaces, what it
wraps (AROUND) and what it left alone, or why it does nothing.

Off switches: ``SGLMETA_SGLANG_PLUGIN=0`` (ours), or SGLang's own allow-list
``SGLANG_PLUGINS`` without ``sgl_meta`` (then SGLang never calls us).
``SGLMETA_SGLANG_PLUGIN=force`` hooks even without CUDA kernels or a visible
GPU (for tests on CPU tensors); unset, ``1`` or ``auto`` hooks when this build
has CUDA kernels and torch sees a GPU. (Not ``SGL_META_``: SGLang renames every
``SGL_*`` variable; see :mod:`sgl_meta._env`.)
"""

from __future__ import annotations

import logging
import sys
from typing import Optional

from .. import _env, _plugin
from .._plugin import ENTRY_POINT, package_dir  # noqa: F401  (this module's public names)
from .hooks import HOOKS, Hook, deferring

SWITCH = "SGLANG_PLUGIN"
ENV = _env.PREFIX + SWITCH
"""Our switch: ``0``/``off`` disables the plugin, ``force`` skips the CUDA checks."""

log = logging.getLogger(__name__)


def inactive_reason(device: bool = True) -> Optional[str]:
    """Why the plugin must do nothing in this process, or None. ``device=False``
    leaves out the GPU check (``python -m sgl_meta.sglang`` on a machine without
    one still reports what the plugin would do where SGLang runs)."""
    return _plugin.switch_reason(SWITCH) or _plugin.build_reason(SWITCH, "hooks", device) or _installed_reason()


def _installed_reason() -> Optional[str]:
    # (SGLang calls register() from its own package: this speaks to python -m sgl_meta.sglang.)
    if "sglang" in sys.modules:
        return None
    import importlib.util

    return None if importlib.util.find_spec("sglang") else "sglang is not installed"


def plan(hooks: Optional[tuple[Hook, ...]] = None) -> tuple[list[tuple[Hook, object]], list[tuple[Hook, str]]]:
    """Split ``hooks`` (default :data:`HOOKS`) into ``(hook, replacement)`` to
    register and ``(hook, why)`` to skip."""
    return _plugin.plan(SWITCH, HOOKS if hooks is None else hooks)


def register() -> None:
    """Entry point of the ``sglang.srt.plugins`` group (called by SGLang)."""
    _plugin.register("SGLang", inactive_reason(), _hook, announce)


def _hook() -> str:
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    usable, skipped = plan()
    for hook, replacement in usable:
        registered = deferring(replacement, hook.name) if hook.kind == "AROUND" else replacement
        HookRegistry.register(hook.target, registered, getattr(HookType, hook.kind))
    done = "; ".join(f"{verb} SGLang's {', '.join(names)}" for verb, names in _grouped((h.verb, h) for h, _ in usable))
    line = done or "hooks nothing"
    if skipped:
        line += "; not hooked: " + "; ".join(f"{', '.join(n)} ({w})" for w, n in _grouped((w, h) for h, w in skipped))
    return line


def _grouped(pairs) -> list[tuple[str, list[str]]]:
    """``(key, hook)`` pairs as ``(key, [hook names])``, keys in order of first appearance."""
    groups: dict[str, list[str]] = {}
    for key, hook in pairs:
        groups.setdefault(key, []).append(hook.name)
    return list(groups.items())


def announce(line: str) -> None:
    """The plugin's one log line. SGLang loads plugins before it configures
    logging, when an INFO record would be dropped: then it goes to stderr."""
    if log.hasHandlers():
        log.info(line)
    else:
        print(line, file=sys.stderr, flush=True)
