"""A clear error when the compiled extension is missing, instead of Python's
"cannot import name '_C' from partially initialized module" message."""

from __future__ import annotations

from pathlib import Path


def require_built_extension() -> None:
    """Import ``sgl_meta._C`` or explain why it is not there."""
    import torch  # noqa: F401  (the extension links against torch's libraries)

    try:
        from . import _C  # noqa: F401
    except ImportError:
        here = Path(__file__).resolve().parent
        if any(here.glob("_C*.so")) or any(here.glob("_C*.pyd")):
            raise  # built, but it does not load: the loader's own message says why
        source_tree = (here.parent / "setup.py").is_file()
        hint = (
            "This is the source tree (a checkout), and its extension is not built in place: "
            "it shadows any installed sgl_meta when Python runs from the checkout root. "
            "Run from another directory to use the installed package, or build in place with "
            "`pip install --no-build-isolation -e .` (or `bash scripts/test.sh`)."
            if source_tree
            else "Reinstall the sgl-meta wheel for this Python and torch."
        )
        raise ImportError(f"sgl_meta: the compiled extension sgl_meta/_C is missing in {here}. {hint}") from None
