"""What the SGLang and vLLM plugins share: their ``SGLMETA_<host>_PLUGIN``
switch (``0``/``off`` disables, ``force`` skips the CUDA checks), the split of
a table into usable and skipped rows, the frame of the one log line and the
report of ``python -m sgl_meta.<host>``."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Collection, Optional, Sequence

from . import _env

ENTRY_POINT = "sgl_meta"
"""The plugin's name in the host's allow-list (``SGLANG_PLUGINS``, ``VLLM_PLUGINS``)."""

OFF = {"0", "false", "off", "no", "disable", "disabled"}
ON = {"1", "true", "on", "yes", "auto", "enable", "enabled"}
FORCE = "force"


def switch(name: str) -> tuple[str, str]:
    """``(variable, value)`` of ``SGLMETA_<name>`` as set (``(variable, "auto")`` when unset)."""
    return _env.lookup(name) or (_env.PREFIX + name, "auto")


def mode(name: str) -> str:
    return switch(name)[1].strip().lower() or "auto"


def package_dir() -> Path:
    """The sgl_meta package the plugins belong to (which copy the host patches)."""
    return Path(__file__).resolve().parent


def switch_reason(name: str) -> Optional[str]:
    """Why the switch keeps the plugin off, or None."""
    variable, value = switch(name)
    current = mode(name)
    if current in OFF:
        return f"{variable}={value}"
    if current not in ON and current != FORCE:
        # A typo must not leave kernels swapped that the user meant to keep.
        return f"{variable}={value!r} is not one of 0/off/false/no (off), 1/on/true/auto (on) or force"
    return None


def build_reason(name: str, verb: str, device: bool) -> Optional[str]:
    """Why this build (or, with ``device``, this machine) keeps the plugin off
    unless the switch says ``force``, or None."""
    import torch

    from . import _build

    if mode(name) == FORCE:
        return None
    variable = _env.PREFIX + name
    if not _build.cuda_kernels():
        return f"sgl-meta was built without CUDA kernels; {variable}=force {verb} anyway"
    if device and not torch.cuda.is_available():
        return f"no CUDA device is visible (torch.cuda.is_available() is False); {variable}=force {verb} anyway"
    return None


def plan(name: str, rows) -> tuple[list[tuple[object, object]], list[tuple[object, str]]]:
    """Split ``rows`` into ``(row, replacement)`` and ``(row, why)`` by each
    row's ``check`` (CUDA needs checked unless the switch says ``force``)."""
    from .sglang.hooks import Skip

    cuda = mode(name) != FORCE
    usable, skipped = [], []
    for row in rows:
        try:
            usable.append((row, row.check(cuda)))
        except Skip as why:
            skipped.append((row, str(why)))
        except Exception as err:  # one broken row must not cost the others
            skipped.append((row, f"{type(err).__name__}: {err}"))
    return usable, skipped


def register(host: str, why: Optional[str], act: Callable[[], str], announce: Callable[[str], None]) -> None:
    """Announce ``sgl-meta <version> <host> plugin: ...`` once: inactive for
    ``why``, else what ``act()`` (run only then) says it did."""
    from . import __version__

    head = f"sgl-meta {__version__} {host} plugin"
    where = f" [sgl_meta from {package_dir()}]"
    if why:
        announce(f"{head}: inactive, {host} keeps its own kernels ({why}){where}")
        return
    announce(f"{head}: {act()}{where}")


def entry_point_visible(group: str) -> bool:
    """Whether the installed metadata declares our entry point in ``group``
    (what the host's plugin loader reads)."""
    from importlib.metadata import entry_points

    return any(ep.name == ENTRY_POINT and ep.value.startswith("sgl_meta.") for ep in entry_points(group=group))


def parse_cli(module: str, doc: str, argv: Sequence[str]) -> None:
    """``python -m sgl_meta.<host>`` takes no options: ``--help`` prints the
    module's description and anything else is refused, rather than ignored."""
    import argparse

    parser = argparse.ArgumentParser(prog=f"python -m {module}", description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.parse_args(list(argv))


def report(host: str, switch: str, allowed: Optional[Collection[str]], allowed_variable: str,
           inactive_reason: Callable[..., Optional[str]], plan: Callable[[], tuple[list, list]],
           describe: Callable[[object, object], str], noun: str, versions: str = "",
           group: Optional[str] = None) -> None:
    """``python -m sgl_meta.<host>``: the header, then why the plugin is
    inactive or one line per row (``describe(row, replacement)`` for the usable
    ones). ``switch`` is the plugin's ``SGLMETA_<switch>`` name; ``allowed`` the
    plugin names of the host's allow-list, ``allowed_variable``, parsed as the
    host parses it, None where it allows every plugin; ``group`` the
    entry-point group the host loads plugins from."""
    from . import __version__

    print(f"sgl-meta {__version__} at {package_dir()}{versions}")
    if allowed is not None and ENTRY_POINT not in allowed:
        print(f"inactive: {allowed_variable} does not name {ENTRY_POINT} (as {host} reads it, it names "
              f"{sorted(allowed)}; {host} will not call the plugin)")
        return
    if group is not None and not entry_point_visible(group):
        print(f"inactive: {host} finds plugins through the entry-point group {group}, and this environment's "
              f"sgl-meta metadata declares none there (an install older than the plugin): reinstall sgl-meta")
        return
    why = inactive_reason(device=False)
    if why:
        print(f"inactive: {why}")
        return
    here = inactive_reason()  # only the GPU check is left: say so, and report the rows anyway
    if mode(switch) == FORCE:
        print(f"note: {_env.PREFIX}{switch}=force: the {noun} below apply without the check for CUDA kernels "
              f"and a visible GPU")
    if here:
        print(f"note: inactive here, {here}; the {noun} below take effect where {host} runs on a GPU")
    usable, skipped = plan()
    for row, ours in usable:
        print(describe(row, ours))
    for row, reason in skipped:
        print(f"keeps    {row.target}: {reason}")
