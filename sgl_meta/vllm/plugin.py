"""The ``vllm.general_plugins`` entry point: ``register()``.

vLLM's ``load_general_plugins()`` calls :func:`register` once in every process
(API server, engine core, workers). It checks this is the vLLM the plugin was
written for (0.33.x), that our CUDA kernels are built and a GPU is visible,
then installs each usable row of :data:`~sgl_meta.vllm.targets.TARGETS`:
kernel rows through vLLM's ``register_kernels`` (one call), method rows on
``BlockTables``. Each call logs exactly one line: what it replaced and what it
left alone (with why), or why it does nothing.

Off switches: ``SGLMETA_VLLM_PLUGIN=0`` (ours), or vLLM's allow-list
``VLLM_PLUGINS`` without ``sgl_meta`` (then vLLM never calls us).
``SGLMETA_VLLM_PLUGIN=force`` installs even without CUDA kernels or a visible
GPU (tests on CPU tensors); unset, ``1`` or ``auto`` installs when this build has
CUDA kernels and torch sees a GPU. The version check holds in every mode.
"""

from __future__ import annotations

import logging
import sys
import warnings
from importlib import metadata
from typing import Callable, Optional

from .. import _env, _plugin
from .._plugin import ENTRY_POINT, package_dir  # noqa: F401  (this module's public names)
from .targets import TARGETS

SWITCH = "VLLM_PLUGIN"
ENV = _env.PREFIX + SWITCH
"""Our switch: ``0``/``off`` disables the plugin, ``force`` skips the CUDA checks."""

VLLM_SERIES = "0.33"
"""The vLLM release series the replacements were written for (its signatures,
launch grids and side effects)."""

log = logging.getLogger("vllm.plugins.sgl_meta")

_installed: dict[str, object] = {}
"""target -> vLLM's original, for what this process replaced (``uninstall``)."""
_kernels: set[str] = set()
"""The targets in ``_installed`` that went through ``register_kernels``."""


def vllm_version() -> Optional[str]:
    try:
        return metadata.version("vllm")
    except metadata.PackageNotFoundError:
        return None


def inactive_reason(device: bool = True) -> Optional[str]:
    """Why the plugin must do nothing in this process, or None. ``device=False``
    leaves out the GPU check (``python -m sgl_meta.vllm`` on a machine without one)."""
    return _plugin.switch_reason(SWITCH) or _version_reason() or _plugin.build_reason(SWITCH, "installs", device)


def _version_reason() -> Optional[str]:
    version = vllm_version()
    if version is None:
        return "vllm is not installed"
    if version.split("+")[0].split(".")[:2] != VLLM_SERIES.split("."):
        return f"vllm {version} is installed; this sgl-meta was written for vllm {VLLM_SERIES}.x"
    return None


def plan(targets: Optional[tuple] = None) -> tuple[list[tuple[object, Callable]], list[tuple[object, str]]]:
    """Split ``targets`` (default :data:`TARGETS`) into ``(row, replacement)``
    to install and ``(row, why)`` to leave alone."""
    return _plugin.plan(SWITCH, TARGETS if targets is None else targets)


def install(usable: list[tuple[object, Callable]]) -> None:
    """Put each replacement in place (kernel rows in one ``register_kernels`` call)."""
    from vllm.v1.attention.backends.utils import PAD_SLOT_ID

    from . import replacements

    if PAD_SLOT_ID != replacements.PAD_SLOT_ID:
        raise RuntimeError(f"vLLM's PAD_SLOT_ID is {PAD_SLOT_ID}, the replacements write {replacements.PAD_SLOT_ID}")
    kernels = {row.target: ours for row, ours in usable if row.how == "kernel"}
    if kernels:
        from vllm.triton_utils.dispatcher import register_kernels

        originals = {t: _owner_and_attr(t) for t in kernels}
        with warnings.catch_warnings():
            # register_kernels reads every attribute of every loaded module, torch's
            # deprecated torch.distributed.reduce_op among them: its FutureWarning
            # says nothing about this process.
            warnings.filterwarnings("ignore", message=".*reduce_op.*", category=FutureWarning)
            register_kernels(kernels)
        for target, (owner, attr, original) in originals.items():
            _installed[target] = original
            _kernels.add(target)
    for row, ours in usable:
        if row.how == "method":
            owner, attr, original = _owner_and_attr(row.target)
            _installed[row.target] = original
            setattr(owner, attr, ours)


def original(target: str) -> Optional[Callable]:
    """vLLM's own ``target`` where this process replaced it, else None."""
    return _installed.get(target)


def _owner_and_attr(target: str) -> tuple[object, str, object]:
    from ..sglang.hooks import resolve

    owner_path, attr = target.rsplit(".", 1)
    owner = resolve(owner_path)
    return owner, attr, getattr(owner, attr)


def uninstall() -> None:
    """Put vLLM's originals back (tests; a process normally keeps the plugin):
    the class attributes, and for kernels the copies ``register_kernels``
    rebound to its wrapper and its registry entries."""
    for target, original in list(_installed.items()):
        owner, attr, current = _owner_and_attr(target)
        setattr(owner, attr, original)
        if target in _kernels:
            for module in list(sys.modules.values()):
                namespace = getattr(module, "__dict__", None) or {}
                for name, value in list(namespace.items()):
                    if value is current:
                        setattr(module, name, original)
            dispatcher = sys.modules.get("vllm.triton_utils.dispatcher")
            if dispatcher is not None:
                dispatcher._registry.pop(target, None)
            _kernels.discard(target)
        del _installed[target]


def register() -> None:
    """Entry point of the ``vllm.general_plugins`` group (called by vLLM)."""
    _plugin.register("vLLM", inactive_reason(), _install, announce)


def _install() -> str:
    usable, skipped = plan()
    try:
        install(usable)
    except Exception as err:  # vLLM must start with its own kernels rather than not at all
        uninstall()
        return f"inactive, installing failed ({type(err).__name__}: {err})"
    line = "replaces vLLM's " + ", ".join(r.name for r, _ in usable) if usable else "replaces nothing"
    if skipped:
        line += "; leaves alone " + "; ".join(f"{r.name} ({w})" for r, w in skipped)
    return line


def announce(line: str) -> None:
    """The plugin's one log line, through vLLM's logging (a child of
    ``vllm.plugins``, so it carries vLLM's format and level) once vLLM has
    configured it; to stderr otherwise, where the INFO record would be dropped."""
    if log.hasHandlers() and log.isEnabledFor(logging.INFO):
        log.info(line)
    else:
        print(line, file=sys.stderr, flush=True)
