"""flashinfer.decode of the import stub (see __init__.py)."""

from . import __getattr__  # noqa: F401
