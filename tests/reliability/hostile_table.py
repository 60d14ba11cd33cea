"""Hostile device values: indices that would read or write out of bounds.

Rows whose ``raises`` is non-empty hold a value the op reads and must reject:
on CPU a RuntimeError naming the op, the argument and the value; on CUDA a
device-side assert whose printed message names the op (test_hostile_values.py
runs each such row in its own process on the GPU: the assert kills the CUDA
context). Rows with ``raises=()`` hold hostile values the op must *not* read
(past bs, past the written length, dead columns, -1 sentinels): the call must
simply succeed, on every device.

The base call is bad_input_table's (MetaCase(q_mode=1): bs 5, pool 11,
page_size 16, max_seq_pages 9, req_to_token [11, 136], swa_mapping of
11 * 136 + 5 = 1501 slots, out_cache_loc 6, swa_out_cache_loc 9).
"""

from __future__ import annotations

import torch

from bad_input_table import BASES  # noqa: F401  (the worker looks up BASES here)
from row_kit import Row, apply, at, both, derive, set_

M = "update_trtllm_mha_graph_metadata"
POOL, SWA_M = 11, 11 * 136 + 5
I32_MAX, I32_MIN = 2**31 - 1, -(2**31)


def r(id, edit, *names, raises=(RuntimeError,)):
    return Row(id=f"{M}/{id}", op=M, edit=edit, names=names, raises=raises)


def ok(id, edit, oracle_edit=None):
    return Row(id=f"{M}/{id}", op=M, edit=edit, names=(), raises=(), oracle_edit=oracle_edit)


# The reference's copy of a call whose dead columns hold slots past the mapping:
# any in-range slot there gives the same outputs, as long as the op reads none.
SLOTS_IN_RANGE = apply("req_to_token", lambda t: t.fill_(0))


ROWS = [
    # must be rejected: the op reads these
    r("request index == pool size", at("req_pool_indices", 0, POOL), f"req_pool_indices[0] = {POOL} is outside [0, {POOL})"),
    r("request index -1", at("req_pool_indices", 4, -1), "req_pool_indices[4] = -1 is outside"),
    r("request index 1000", apply("req_pool_indices", lambda t: t.fill_(1000)), "req_pool_indices[0] = 1000 is outside [0, 11)"),
    r("request index 2**40 (int64)", at("req_pool_indices", 2, 2**40), "req_pool_indices[2] = 1099511627776 is outside"),
    r("request index int32 min", both(apply("req_pool_indices", lambda t: t.int()), at("req_pool_indices", 1, I32_MIN)),
      f"req_pool_indices[1] = {I32_MIN} is outside"),
    r("slot == swa_mapping size", apply("req_to_token", lambda t: t.fill_(SWA_M)),
      f"= {SWA_M} is outside [0, {SWA_M}) (swa_mapping.numel())", "req_to_token[req_pool_indices[0], 0 * page_size]"),
    r("slot int32 max", apply("req_to_token", lambda t: t.fill_(I32_MAX)), f"= {I32_MAX} is outside", "swa_mapping"),
    r("swa_mapping shorter than the slots", apply("swa_mapping", lambda t: t[:7]), "is outside [0, 7) (swa_mapping.numel())"),
    r("out_cache_loc == swa_mapping size", at("out_cache_loc", 5, SWA_M), f"out_cache_loc[5] = {SWA_M} is outside [0, {SWA_M})"),
    r("out_cache_loc 2**40", apply("out_cache_loc", lambda t: t.fill_(2**40)), "out_cache_loc[0] = 1099511627776 is outside"),
    # v2p / swa_v2p shorter than the virtual pages read (docs/operators/kv_read_table.md)
    r("v2p shorter than the pages read", derive("v2p", "swa_mapping", lambda t: t[:7].clone()),
      "is outside [0, 7) (v2p.numel())", "virtual page req_to_token[req_pool_indices["),
    r("swa_v2p shorter than the pages read", derive("swa_v2p", "swa_mapping", lambda t: t[:7].clone()),
      "is outside [0, 7) (swa_v2p.numel())"),
    r("v2p of one entry, slots past it", both(derive("v2p", "swa_mapping", lambda t: t[:1].clone()),
                                             apply("req_to_token", lambda t: t.fill_(I32_MAX))),
      f"= {I32_MAX // 16} is outside [0, 1) (v2p.numel())"),
    # must succeed: hostile values the op never reads, and documented sentinels
    ok("request indices past bs", apply("req_pool_indices", lambda t: t.__setitem__(slice(5, None), 10**6) or t)),
    ok("bs 0 with hostile indices", both(set_(bs=0), apply("req_pool_indices", lambda t: t.fill_(-(10**6))))),
    ok("out_cache_loc past swa_out_cache_loc", both(apply("swa_out_cache_loc", lambda t: t[:3]),
                                                     apply("out_cache_loc", lambda t: t.__setitem__(slice(3, None), 2**40) or t))),
    ok("slots past the mapping without SWA tables",
       both(set_(swa_mapping=None, swa_page_table=None, swa_out_cache_loc=None, out_cache_loc=None),
            apply("req_to_token", lambda t: t.fill_(I32_MAX)))),
    ok("slots past the mapping in dead columns", both(set_(live_pages_only=True, seqlen_offset=0),
                                                      apply("seq_lens", lambda t: t.fill_(0)),
                                                      apply("req_to_token", lambda t: t.fill_(SWA_M))),
       SLOTS_IN_RANGE),
    ok("lengths past the table (live_pages_only caps them)",
       both(set_(live_pages_only=True, seqlen_offset=0), apply("seq_lens", lambda t: t.fill_(0)),
            at("seq_lens", 0, I32_MAX))),
    ok("negative slots are sentinels", apply("req_to_token", lambda t: t.fill_(-5))),
    ok("int32 min slots are sentinels", apply("req_to_token", lambda t: t.fill_(I32_MIN))),
    ok("mapping -1 everywhere", apply("swa_mapping", lambda t: t.fill_(-1))),
    ok("out_cache_loc -1 everywhere", apply("out_cache_loc", lambda t: t.fill_(-1))),
    # docs/operators/trtllm_mha_metadata.md: a lone swa_mapping is accepted and never read; skip_page_table
    # reads no request index, slot or mapping
    ok("lone swa_mapping (accepted, unused)",
       both(set_(swa_page_table=None, swa_out_cache_loc=None), apply("req_to_token", lambda t: t.fill_(I32_MAX)))),
    ok("lone int32 swa_mapping", both(set_(swa_page_table=None, swa_out_cache_loc=None),
                                       apply("swa_mapping", lambda t: t.int()))),
    ok("skip_page_table reads no index", both(set_(skip_page_table=True, page_table=None, swa_page_table=None,
                                                   swa_out_cache_loc=None),
                                              apply("req_pool_indices", lambda t: t.fill_(10**6)),
                                              apply("req_to_token", lambda t: t.fill_(I32_MAX)))),
    # a negative slot reads virtual page 0; freed (-1) entries read as 0
    ok("v2p: negative slots read page 0", both(derive("v2p", "swa_mapping", lambda t: t[:1].clone()),
                                               derive("swa_v2p", "swa_mapping", lambda t: t[:1].clone()),
                                               apply("req_to_token", lambda t: t.fill_(-5)))),
    ok("v2p all freed", both(derive("v2p", "swa_mapping", lambda t: torch.full_like(t, -1)),
                             derive("swa_v2p", "swa_mapping", lambda t: torch.full_like(t, -(2**40))))),
    ok("v2p short but only dead columns read past it",
       both(set_(live_pages_only=True, seqlen_offset=0), apply("seq_lens", lambda t: t.fill_(0)),
            derive("v2p", "swa_mapping", lambda t: t[:1].clone())),
       derive("v2p", "swa_mapping", torch.zeros_like)),
    ok("v2p short with skip_page_table", both(set_(skip_page_table=True),
                                              derive("v2p", "swa_mapping", lambda t: t[:1].clone()))),
    # per-row offsets are added, never indexed; the sum is a length (int32, >= 0)
    r("seqlen_offsets int64 extremes",
      derive("seqlen_offsets", "seq_lens", lambda t: torch.full_like(t, 2**31 - 1).long() * 2**20),
      "seq_lens[0] + seqlen_offsets[0] + seqlen_offset = ", "does not fit int32 cache_seqlens"),
    ok("skip_page_table with tables given", both(set_(skip_page_table=True),
                                                 apply("out_cache_loc", lambda t: t.fill_(2**40)))),
]


MM = "update_trtllm_mha_graph_metadata_multi"
ROWS += [
    Row(f"{MM}/request index == pool size", MM, at("req_pool_indices", 2, POOL),
        (f"req_pool_indices[2] = {POOL} is outside [0, {POOL})",)),
    Row(f"{MM}/slot == swa_mapping size", MM, apply("req_to_token", lambda t: t.fill_(SWA_M)),
        (f"= {SWA_M} is outside [0, {SWA_M}) (swa_mapping.numel())",)),
    Row(f"{MM}/out_cache_loc past swa_mapping", MM, at("out_cache_loc", 1, 2**40),
        ("out_cache_loc[1] = 1099511627776 is outside",)),
    Row(f"{MM}/v2p shorter than the pages read", MM, derive("v2p", "swa_mapping", lambda t: t[:3].clone()),
        ("is outside [0, 3) (v2p.numel())",)),
    # the widest set's live prefix is read, no further
    Row(f"{MM}/slots past the mapping in every set's dead columns", MM,
        both(set_(live_pages_only=True, seqlen_offset=[0, 0, 0]), apply("seq_lens", lambda t: t.fill_(0)),
             apply("req_to_token", lambda t: t.fill_(SWA_M))), (), raises=(), oracle_edit=SLOTS_IN_RANGE),
    Row(f"{MM}/request indices past bs", MM,
        apply("req_pool_indices", lambda t: t.__setitem__(slice(5, None), 10**6) or t), (), raises=()),
]


def _register_optional_rows():
    # Every family's strategy module, from the one list of them (registry.FAMILIES).
    from registry import FAMILIES

    for module in FAMILIES:
        ROWS.extend(getattr(module, "HOSTILE_ROWS", []))


_register_optional_rows()
