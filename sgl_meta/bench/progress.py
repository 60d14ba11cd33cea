"""Progress bar: tqdm when installed (the ``dev`` extra), else rich, else none."""

from __future__ import annotations

import sys


class _NoBar:
    def update(self, n: int = 1) -> None:
        pass

    def set_postfix_str(self, s: str) -> None:
        pass

    def close(self) -> None:
        pass


class _RichBar:
    def __init__(self, total: int, desc: str):
        from rich.progress import Progress

        self._progress = Progress(transient=True)
        self._progress.start()
        self._task = self._progress.add_task(desc, total=total)
        self._desc = desc

    def update(self, n: int = 1) -> None:
        self._progress.advance(self._task, n)

    def set_postfix_str(self, s: str) -> None:
        self._progress.update(self._task, description=f"{self._desc} {s}")

    def close(self) -> None:
        self._progress.stop()


def make_bar(total: int, desc: str, enabled: bool):
    """A bar with ``update``, ``set_postfix_str`` and ``close``."""
    if not enabled:
        return _NoBar()
    try:
        from tqdm import tqdm

        return tqdm(total=total, desc=desc, unit="step", leave=False, file=sys.stderr, dynamic_ncols=True)
    except ImportError:
        pass
    try:
        return _RichBar(total, desc)
    except ImportError:
        return _NoBar()
