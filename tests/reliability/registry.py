"""The ops under reliability test: one strategy module per op family.

Adding an op = an ``ENTRIES`` row in its family's ``st_<family>.py`` (the
public ``sgl_meta`` callable, its ``sgl_meta.reference`` twin, cases, events)
+ rows in ``bad_input_table.py`` (+ ``hostile_table.py``). test_registry.py
holds every row to that: a renamed export fails, it never turns into a skip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import st_dsa_metadata
import st_dsa_metadata_copy
import st_kv_read_table
import st_kv_indices
import st_trtllm_mha_page_table
import st_trtllm_mha_metadata
import st_vllm_block_table
import st_vllm_flashinfer
import st_vllm_input_batch
import st_vllm_spec_decode
import st_flash_attention_metadata

FAMILIES = (st_trtllm_mha_metadata, st_trtllm_mha_page_table, st_dsa_metadata_copy, st_dsa_metadata, st_kv_read_table,
            st_vllm_block_table, st_vllm_input_batch, st_vllm_flashinfer, st_vllm_spec_decode,
            st_flash_attention_metadata, st_kv_indices)


@dataclass(frozen=True)
class OpEntry:
    name: str  # the public sgl_meta entry point under test
    op: Callable[..., None]  # sgl_meta.<name> (keyword call)
    ref: Callable[..., None]  # sgl_meta.reference.<name> (same arguments), or a spec of the tests' own
    cases: Callable  # () -> hypothesis strategy of tensor_case.Case
    events: Callable  # Case -> list of labels
    weight: float = 1.0  # share of the profile's example budget


ENTRIES: list[OpEntry] = [OpEntry(**e) for m in FAMILIES for e in m.ENTRIES]


@dataclass(frozen=True)
class HostileEntry:
    name: str
    cases: Callable  # () -> strategy of hostile injections
    check: Callable  # injection -> label of what was injected (asserts)
    weight: float = 1.0


HOSTILE: list[HostileEntry] = [
    HostileEntry(m.NAME, m.hostile_cases, m.check_hostile, w)
    for m, w in ((st_trtllm_mha_metadata, 0.5), (st_trtllm_mha_page_table, 0.25), (st_dsa_metadata_copy, 0.0),
                 (st_dsa_metadata, 0.15), (st_kv_read_table, 0.15), (st_kv_indices, 0.1))
    if hasattr(m, "hostile_cases")
]
