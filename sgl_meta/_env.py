"""sgl-meta's environment variables: ``SGLMETA_<NAME>``.

SGLang renames every ``SGL_*`` variable in its processes to ``SGLANG_*``, with a
warning telling the user to do the same (``sglang/srt/environ.py``), so neither
prefix is ours to use there. ``SGLMETA_`` is left alone by both. The earlier
spellings ``SGL_META_<NAME>`` (and ``SGLANG_META_<NAME>``, where SGLang's warning
sent users) are still read, with a warning naming the new one.
"""

from __future__ import annotations

import os
import warnings
from typing import Optional

PREFIX = "SGLMETA_"
OLD_PREFIXES = ("SGL_META_", "SGLANG_META_")
_WARNED: dict = {}


def lookup(name: str) -> Optional[tuple[str, str]]:
    """``(variable, value)`` of the variable that sets ``SGLMETA_<name>``, or None
    when none is set. The new name wins; an old one warns."""
    new = PREFIX + name
    if new in os.environ:
        return new, os.environ[new]
    for old in (p + name for p in OLD_PREFIXES):
        if old in os.environ:
            # Attributed to the variable, not to the line of ours that read it; once per process.
            warnings.warn_explicit(f"{old} is deprecated, set {new} instead", FutureWarning,
                                   filename=f"environment variable {old}", lineno=0, registry=_WARNED)
            return old, os.environ[old]
    return None
