"""The ``sglang.srt.plugins`` entry point: ``register()``.

SGLang's ``load_plugins()`` calls :func:`register` early in every process
(server, scheduler workers, engine); it registers one hook (REPLACE, or AROUND
where ours keeps SGLang's function for what it does not cover) per usable row
of :data:`~sgl_meta.sglang.hooks.HOOKS`, and SGLang's ``HookRegistry``
applies them right after (including ``from X import Y`` copies in modules
already imported). Each call logs exactly one line: what it replaces and what
it left alone, or why it does nothing.

Off switches: ``SGL_META_SGLANG_PLUGIN=0`` (ours), or SGLang's own allow-list
``SGLANG_PLUGINS`` without ``sgl_meta`` (then SGLang never calls us).
``SGL_META_SGLANG_PLUGIN=force`` hooks even a build without CUDA kernels (for
tests on CPU tensors); unset, ``1`` or ``auto`` hooks when CUDA kernels exist.
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import Optional

from .hooks import HOOKS, CudaKernel, Hook, Skip

ENV = "SGL_META_SGLANG_PLUGIN"
"""Our switch: ``0``/``off`` disables the plugin, ``force`` skips the CUDA check."""

ENTRY_POINT = "sgl_meta"
"""The plugin's name in SGLang's ``SGLANG_PLUGINS`` allow-list."""

_OFF = {"0", "false", "off", "no", "disable", "disabled"}
_ON = {"1", "true", "on", "yes", "auto", "enable", "enabled"}
_FORCE = "force"

log = logging.getLogger(__name__)


def _mode() -> str:
    return os.environ.get(ENV, "auto").strip().lower() or "auto"


def package_dir() -> Path:
    """The sgl_meta package this plugin belongs to (which copy SGLang hooks)."""
    return Path(__file__).resolve().parents[1]


def inactive_reason() -> Optional[str]:
    """Why the plugin must do nothing in this process, or None."""
    mode = _mode()
    if mode in _OFF:
        return f"{ENV}={os.environ[ENV]}"
    if mode not in _ON and mode != _FORCE:
        # A typo must not leave kernels swapped that the user meant to keep.
        return (f"{ENV}={os.environ[ENV]!r} is not one of 0/off/false/no (off), 1/on/true/auto "
                f"(on) or force")
    if mode != _FORCE:
        # Cheap: one dispatcher lookup. A CPU-only build registers CPU kernels only.
        why = CudaKernel("update_trtllm_mha_graph_metadata").missing()
        if why:
            return f"this sgl-meta build has no CUDA kernels ({why}); {ENV}=force hooks anyway"
    return None


def plan(hooks: Optional[tuple[Hook, ...]] = None) -> tuple[list[tuple[Hook, object]], list[tuple[Hook, str]]]:
    """Split ``hooks`` (default :data:`HOOKS`) into ``(hook, replacement)`` to
    register and ``(hook, why)`` to skip."""
    cuda = _mode() != _FORCE
    usable, skipped = [], []
    for hook in HOOKS if hooks is None else hooks:
        try:
            usable.append((hook, hook.check(cuda)))
        except Skip as why:
            skipped.append((hook, str(why)))
        except Exception as err:  # one broken row must not cost the others
            skipped.append((hook, f"{type(err).__name__}: {err}"))
    return usable, skipped


def register() -> None:
    """Entry point of the ``sglang.srt.plugins`` group (called by SGLang)."""
    from .. import __version__

    head = f"sgl-meta {__version__} SGLang plugin"
    where = f" [sgl_meta from {package_dir()}]"
    why = inactive_reason()
    if why:
        announce(f"{head}: inactive, SGLang keeps its own kernels ({why}){where}")
        return
    from sglang.srt.plugins.hook_registry import HookRegistry, HookType

    usable, skipped = plan()
    for hook, replacement in usable:
        HookRegistry.register(hook.target, replacement, getattr(HookType, hook.kind))
    replaced = ", ".join(h.name for h, _ in usable) or "nothing"
    line = f"{head}: replaces SGLang's {replaced}"
    if skipped:
        by_reason: dict[str, list[str]] = {}
        for hook, why in skipped:
            by_reason.setdefault(why, []).append(hook.name)
        line += "; not hooked: " + "; ".join(f"{', '.join(n)} ({w})" for w, n in by_reason.items())
    announce(line + where)


def announce(line: str) -> None:
    """The plugin's one log line. SGLang loads plugins before it configures
    logging, when an INFO record would be dropped: then it goes to stderr."""
    if log.hasHandlers():
        log.info(line)
    else:
        print(line, file=sys.stderr, flush=True)
