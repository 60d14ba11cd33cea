"""The ops under reliability test: one strategy module per op family.

Adding an op = one ``st_<op>.py`` module exposing ``ENTRIES`` (or the single-op
names ``NAME``/``available``/``op``/``ref``/``cases``/``events``) + rows in
``bad_input_table.py`` (+ ``hostile_table.py``). Entries whose op is not in
this build (other branches not merged yet) are skipped, not failed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import st_dsa_metadata
import st_dsa_metadata_copy
import st_kv_read_table
import st_trtllm_mha_page_table
import st_trtllm_mha_metadata


@dataclass(frozen=True)
class OpEntry:
    name: str  # the public sgl_meta entry point under test
    available: Callable[[], bool]
    op: Callable[..., None]  # the fused op (keyword call)
    ref: Callable[..., None]  # the oracle (keyword call, same arguments)
    cases: Callable  # () -> hypothesis strategy of tensor_case.Case
    events: Callable  # Case -> list of labels
    weight: float = 1.0  # share of the profile's example budget


def _single(module, weight: float = 1.0) -> OpEntry:
    return OpEntry(module.NAME, module.available, module.op, module.ref, module.cases, module.events, weight)


ENTRIES: list[OpEntry] = [
    *[OpEntry(**e) for e in st_trtllm_mha_metadata.ENTRIES],
    _single(st_trtllm_mha_page_table, weight=0.5),
    *[OpEntry(**e) for e in st_dsa_metadata_copy.ENTRIES],
    *[OpEntry(**e) for e in st_dsa_metadata.ENTRIES],
    *[OpEntry(**e) for e in st_kv_read_table.ENTRIES],
]


@dataclass(frozen=True)
class HostileEntry:
    name: str
    available: Callable[[], bool]
    cases: Callable  # () -> strategy of hostile injections
    check: Callable  # injection -> label of what was injected (asserts)
    weight: float = 1.0


HOSTILE: list[HostileEntry] = [
    HostileEntry(m.NAME, m.available, m.hostile_cases, m.check_hostile, w)
    for m, w in ((st_trtllm_mha_metadata, 0.5), (st_trtllm_mha_page_table, 0.25), (st_dsa_metadata_copy, 0.0),
                 (st_dsa_metadata, 0.15), (st_kv_read_table, 0.15))
    if hasattr(m, "hostile_cases")
]
