"""Counters shared by the reliability tests and their conftest (a plain module:
``conftest`` is not importable by name when several conftest.py files exist)."""

from collections import Counter

# (test kind, op name, device) -> hypothesis examples run
EXAMPLES: Counter = Counter()

# (test kind, op name, device) -> Counter of coverage labels (strategy `events`)
COVERAGE: dict = {}


def record(kind: str, op: str, device: str, labels=()) -> None:
    EXAMPLES[kind, op, device] += 1
    cov = COVERAGE.setdefault((kind, op, device), Counter())
    for label in labels:
        cov[label] += 1
