"""Differential, property-based: every op vs its eager reference on valid inputs
drawn across the whole input space (strategies: st_*.py, registry.py).

The reference runs on CPU, the op on the parametrized device, both from the
same poisoned buffers; every buffer (outputs and their padding, and the
inputs) must come out identical element for element.
"""

from __future__ import annotations

import pytest
from hypothesis import event, given, settings

from stats import record
from registry import ENTRIES
from tensor_case import check_differential

DEVICES = [pytest.param("cpu", id="cpu"), pytest.param("cuda", id="cuda", marks=pytest.mark.gpu)]


def budget(weight: float) -> int:
    return max(1, int(settings.default.max_examples * weight))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
def test_matches_reference(entry, device):
    @settings(max_examples=budget(entry.weight))
    @given(case=entry.cases())
    def prop(case):
        labels = entry.events(case)
        record("differential", entry.name, device, labels)
        for label in labels:
            event(label)
        check_differential(case, entry.op, entry.ref, device)

    prop()
