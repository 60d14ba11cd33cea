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
from pathlib import Path
from typing import Optional

import torch

from .. import _build, _env
from .hooks import HOOKS, Hook, Skip

SWITCH = "SGLANG_PLUGIN"
ENV = _env.PREFIX + SWITCH
"""Our switch: ``0``/``off`` disables the plugin, ``force`` skips the CUDA checks."""

ENTRY_POINT = "sgl_meta"
"""The plugin's name in SGLang's ``SGLANG_PLUGINS`` allow-list."""

_OFF = {"0", "false", "off", "no", "disable", "disabled"}
_ON = {"1", "true", "on", "yes", "auto", "enable", "enabled"}
_FORCE = "force"

log = logging.getLogger(__name__)


def _switch() -> tuple[str, str]:
    """``(variable, value)`` of our switch as set (``(ENV, "auto")`` when unset)."""
    return _env.lookup(SWITCH) or (ENV, "auto")


def _mode() -> str:
    return _switch()[1].strip().lower() or "auto"


def package_dir() -> Path:
    """The sgl_meta package this plugin belongs to (which copy SGLang hooks)."""
    return Path(__file__).resolve().parents[1]


def inactive_reason(device: bool = True) -> Optional[str]:
    """Why the plugin must do nothing in this process, or None. ``device=False``
    leaves out the GPU check (``python -m sgl_meta.sglang`` on a machine without
    one still reports what the plugin would do where SGLang runs)."""
    name, value = _switch()
    mode = _mode()
    if mode in _OFF:
        return f"{name}={value}"
    if mode not in _ON and mode != _FORCE:
        # A typo must not leave kernels swapped that the user meant to keep.
        return f"{name}={value!r} is not one of 0/off/false/no (off), 1/on/true/auto (on) or force"
    if mode == _FORCE:
        return None
    if not _build.cuda_kernels():
        return f"sgl-meta was built without CUDA kernels; {ENV}=force hooks anyway"
    if device and not torch.cuda.is_available():
        return f"no CUDA device is visible (torch.cuda.is_available() is False); {ENV}=force hooks anyway"
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
    done = "; ".join(f"{verb} SGLang's {', '.join(names)}" for verb, names in _grouped((h.verb, h) for h, _ in usable))
    line = f"{head}: {done or 'hooks nothing'}"
    if skipped:
        line += "; not hooked: " + "; ".join(f"{', '.join(n)} ({w})" for w, n in _grouped((w, h) for h, w in skipped))
    announce(line + where)


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
