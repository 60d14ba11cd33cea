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

from bad_input_table import BASES  # noqa: F401  (the worker looks up BASES here)
from row_kit import Row, apply, both, set_

M = "update_trtllm_mha_graph_metadata"
POOL, SWA_M = 11, 11 * 136 + 5
I32_MAX, I32_MIN = 2**31 - 1, -(2**31)


def at(name, index, value):
    """kw[name][index] = value (value first cast to the tensor's dtype)."""
    def edit(kw):
        kw[name][index] = value
    return edit


def r(id, edit, *names, raises=(RuntimeError,)):
    return Row(id=f"{M}/{id}", op=M, edit=edit, names=names, raises=raises)


def ok(id, edit):
    return Row(id=f"{M}/{id}", op=M, edit=edit, names=(), raises=())


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
                                                      apply("req_to_token", lambda t: t.fill_(SWA_M)))),
    ok("lengths past the table (live_pages_only caps them)",
       both(set_(live_pages_only=True, seqlen_offset=0), apply("seq_lens", lambda t: t.fill_(I32_MAX)))),
    ok("negative slots are sentinels", apply("req_to_token", lambda t: t.fill_(-5))),
    ok("int32 min slots are sentinels", apply("req_to_token", lambda t: t.fill_(I32_MIN))),
    ok("mapping -1 everywhere", apply("swa_mapping", lambda t: t.fill_(-1))),
    ok("out_cache_loc -1 everywhere", apply("out_cache_loc", lambda t: t.fill_(-1))),
    # SPEC 4: a lone swa_mapping is accepted and never read; skip_page_table
    # reads no request index, slot or mapping
    ok("lone swa_mapping (accepted, unused)",
       both(set_(swa_page_table=None, swa_out_cache_loc=None), apply("req_to_token", lambda t: t.fill_(I32_MAX)))),
    ok("lone int32 swa_mapping", both(set_(swa_page_table=None, swa_out_cache_loc=None),
                                       apply("swa_mapping", lambda t: t.int()))),
    ok("skip_page_table reads no index", both(set_(skip_page_table=True, page_table=None, swa_page_table=None,
                                                   swa_out_cache_loc=None),
                                              apply("req_pool_indices", lambda t: t.fill_(10**6)),
                                              apply("req_to_token", lambda t: t.fill_(I32_MAX)))),
    ok("skip_page_table with tables given", both(set_(skip_page_table=True),
                                                 apply("out_cache_loc", lambda t: t.fill_(2**40)))),
]


def _register_optional_rows():
    import st_dsa_metadata
    import st_dsa_metadata_copy
    import st_kv_read_table
    import st_page_table

    for module in (st_page_table, st_dsa_metadata_copy, st_dsa_metadata, st_kv_read_table):
        ROWS.extend(getattr(module, "HOSTILE_ROWS", []))


_register_optional_rows()
