"""The bad-input matrix: calls that must raise a clear error, never crash.

Each row edits the keyword arguments of a *valid* base call of one op (the
row's ``control`` twin, run unedited, must succeed) and states what the error
must be: the exception type(s), and substrings of its message -- the op name
always, plus the argument and what was expected. Rows run in a subprocess
worker (matrix_worker.py, run by matrix_runner.py), so a row that crashes the process fails that row
instead of killing the test runner.

Host-side checks from C++ must start their message with ``sgl_meta.<op>: ``
(``prefixed=True``); Python-level errors (the dispatcher's argument parsing,
the keyword wrapper) only need to name the op somewhere.

Adding an op: a ``BASES`` entry (a valid call) and the rows its description
cannot give (description_rows.py derives the type and dtype rows).
"""

from __future__ import annotations

from typing import Callable

import torch

import sgl_meta
from description_rows import described_rows
from row_kit import Row, alias, all_but, apply, both, derive, drop, overlapping_rows, set_, to_device


# ---- valid base calls --------------------------------------------------------
def _trtllm_base(gen, device):
    from trtllm_mha_metadata_cases import MetaCase, make_case  # tests/ (the shared case maker)

    inputs, outputs, scalars = make_case(MetaCase(q_mode=1), gen, device)
    return {**inputs, **outputs, **scalars}


def _trtllm_multi_base(gen, device):
    from trtllm_mha_metadata_cases import MetaCase, make_multi_case

    inputs, outputs, scalars = make_multi_case(MetaCase(q_mode=1), [1, 2, 3], gen, device)
    return {**inputs, **outputs, **scalars}


BASES: dict[str, Callable] = {
    "update_trtllm_mha_graph_metadata": _trtllm_base,
    "update_trtllm_mha_graph_metadata_multi": _trtllm_multi_base,
}


def _register_family_bases():
    # Every family's strategy module, from the one list of them (registry.FAMILIES).
    from registry import FAMILIES

    for module in FAMILIES:
        BASES.update(getattr(module, "BAD_INPUT_BASES", {}))


_register_family_bases()

# ---- update_trtllm_mha_graph_metadata (docs/operators/trtllm_mha_metadata.md) -------------------------------
M = "update_trtllm_mha_graph_metadata"
I32, I64 = "must have dtype int32 (torch.int32), got", "must have dtype int64 (torch.int64), got"
IDX = "must have dtype int32 or int64 (torch.int32 or torch.int64), got"


def r(id, edit, *names, **kw):
    return Row(id=f"{M}/{id}", op=M, edit=edit, names=names, **kw)


TRTLLM_ROWS = [
    # dtypes (never a silent cast)
    r("req_pool_indices float32", apply("req_pool_indices", lambda t: t.float()), "req_pool_indices " + IDX, "torch.float32"),
    r("req_pool_indices int16", apply("req_pool_indices", lambda t: t.short()), "req_pool_indices " + IDX, "torch.int16"),
    r("seq_lens float", apply("seq_lens", lambda t: t.float()), "seq_lens " + IDX),
    r("seq_lens bool", apply("seq_lens", lambda t: t.bool()), "seq_lens " + IDX, "torch.bool"),
    r("qlens float64", apply("qlens", lambda t: t.double()), "qlens " + IDX, "torch.float64"),
    r("qlens complex64", apply("qlens", lambda t: t.to(torch.complex64)), "qlens " + IDX, "torch.complex64"),
    r("seq_lens float8_e4m3fn", apply("seq_lens", lambda t: t.to(torch.float8_e4m3fn)), "seq_lens " + IDX,
      "torch.float8_e4m3fn"),
    r("req_to_token int64", apply("req_to_token", lambda t: t.long()), "req_to_token " + I32, "torch.int64"),
    r("cache_seqlens int64", apply("cache_seqlens", lambda t: t.long()), "cache_seqlens " + I32),
    r("cu_seqlens_k int64", apply("cu_seqlens_k", lambda t: t.long()), "cu_seqlens_k " + I32),
    r("cu_seqlens_q int64", apply("cu_seqlens_q", lambda t: t.long()), "cu_seqlens_q " + I32),
    r("page_table int64", apply("page_table", lambda t: t.long()), "page_table " + I32),
    r("swa_page_table uint8", apply("swa_page_table", lambda t: t.to(torch.uint8)), "swa_page_table " + I32, "torch.uint8"),
    r("swa_mapping float32", apply("swa_mapping", lambda t: t.float()), "swa_mapping " + IDX, "torch.float32"),
    r("swa_mapping int16", apply("swa_mapping", lambda t: t.short()), "swa_mapping " + IDX, "torch.int16"),
    r("out_cache_loc int32", apply("out_cache_loc", lambda t: t.int()), "out_cache_loc " + I64),
    r("swa_out_cache_loc int32", apply("swa_out_cache_loc", lambda t: t.int()), "swa_out_cache_loc " + I64),
    # ranks
    r("page_table 1-D", apply("page_table", lambda t: t.flatten()), "page_table must be 2-D, got 1-D"),
    r("swa_page_table 3-D", apply("swa_page_table", lambda t: t[None]), "swa_page_table must be 2-D, got 3-D"),
    r("req_to_token 1-D", apply("req_to_token", lambda t: t[0]), "req_to_token must be 2-D, got 1-D"),
    r("req_to_token 3-D", apply("req_to_token", lambda t: t[None]), "req_to_token must be 2-D, got 3-D"),
    r("seq_lens 2-D", apply("seq_lens", lambda t: t[None]), "seq_lens must be 1-D, got 2-D"),
    r("cache_seqlens 0-D", apply("cache_seqlens", lambda t: t[0]), "cache_seqlens must be 1-D, got 0-D"),
    r("swa_mapping 2-D", apply("swa_mapping", lambda t: t[None]), "swa_mapping must be 1-D, got 2-D"),
    # sizes too small for bs / max_seq_pages / the gathered slots
    r("req_pool_indices short", apply("req_pool_indices", lambda t: t[:4]), "req_pool_indices.size(0) must be >= bs = 5, got 4"),
    r("seq_lens short", apply("seq_lens", lambda t: t[:0]), "seq_lens.size(0) must be >= bs = 5, got 0"),
    r("qlens short", apply("qlens", lambda t: t[:3]), "qlens.size(0) must be >= bs = 5, got 3"),
    r("cache_seqlens short", apply("cache_seqlens", lambda t: t[:2]), "cache_seqlens.size(0) must be >= bs"),
    r("cu_seqlens_k short", apply("cu_seqlens_k", lambda t: t[:5]), "cu_seqlens_k.size(0) must be >= bs + 1"),
    r("cu_seqlens_q short", apply("cu_seqlens_q", lambda t: t[:5]), "cu_seqlens_q.size(0) must be >= bs + 1 = 6, got 5"),
    r("page_table few rows", apply("page_table", lambda t: t[:4]), "page_table.size(0) must be >= bs = 5, got 4"),
    r("page_table narrow", apply("page_table", lambda t: t[:, :3]), "page_table.size(1) must be >= max_seq_pages"),
    r("swa_page_table narrow", apply("swa_page_table", lambda t: t[:, :8]), "swa_page_table.size(1) must be >= max_seq_pages = 9, got 8"),
    r("req_to_token too short", apply("req_to_token", lambda t: t[:, :5]), "req_to_token.size(1) > (max_seq_pages - 1) * page_size"),
    r("req_to_token one short", apply("req_to_token", lambda t: t[:, :128]), "req_to_token.size(1) > (max_seq_pages - 1) * page_size", "= 128"),
    r("req_to_token zero width", apply("req_to_token", lambda t: t[:, :0]), "req_to_token.size(1) > (max_seq_pages - 1) * page_size", "= 0"),
    r("bs larger than every buffer", set_(bs=10**6), "must be >= bs = 1000000"),
    # inner stride != 1 (rows are addressed by stride(0); 1-D tensors are read densely)
    r("page_table transposed", apply("page_table", lambda t: t.t().contiguous().t()), "page_table must have inner stride 1"),
    r("swa_page_table column step 2", apply("swa_page_table", lambda t: torch.cat([t, t], 1)[:, ::2]), "swa_page_table must have inner stride 1, got stride(1) = 2"),
    r("req_to_token column step 2", apply("req_to_token", lambda t: torch.cat([t, t], 1)[:, ::2]), "req_to_token must have inner stride 1, got stride(1) = 2"),
    r("seq_lens step 2", apply("seq_lens", lambda t: torch.cat([t, t])[::2]), "seq_lens must have inner stride 1, got stride(0) = 2"),
    r("req_pool_indices step 3", apply("req_pool_indices", lambda t: torch.cat([t, t, t])[::3]), "req_pool_indices must have inner stride 1"),
    r("cache_seqlens step 2", apply("cache_seqlens", lambda t: torch.cat([t, t])[::2]), "cache_seqlens must have inner stride 1"),
    r("swa_out_cache_loc step 2", apply("swa_out_cache_loc", lambda t: torch.cat([t, t])[::2]), "swa_out_cache_loc must have inner stride 1"),
    # output rows that alias each other (the CUDA row blocks would race)
    r("page_table rows overlap", apply("page_table", overlapping_rows), "page_table rows overlap: stride(0) = "),
    r("page_table rows aliased (expand)", apply("page_table", lambda t: t[:1].expand(t.shape[0], -1)), "page_table rows overlap: stride(0) = 0 < 9 columns written per row"),
    r("swa_page_table rows overlap", apply("swa_page_table", overlapping_rows), "swa_page_table rows overlap"),
    # scalars
    r("negative bs", set_(bs=-1), "bs must be >= 0, got -1"),
    r("negative max_seq_pages", set_(max_seq_pages=-2), "max_seq_pages must be >= 0"),
    r("page_size 0", set_(page_size=0), "page_size must be >= 1, got 0"),
    r("page_size negative", set_(page_size=-16), "page_size must be >= 1, got -16"),
    r("negative q_stride", set_(q_stride=-4, q_mode=2), "q_stride must be >= 0, got -4"),
    r("seqlen_offset past int32", set_(seqlen_offset=2**40), "seqlen_offset = 1099511627776 is outside [-2147483648, 2147483647]"),
    r("seqlen_offset below int32", set_(seqlen_offset=-(2**31) - 1), "seqlen_offset = -2147483649 is outside"),
    r("q_stride past int32", set_(q_stride=2**31 // 5 + 1, q_mode=2), "q_stride = 429496730 is too large"),
    # distinct outputs that share memory (the kernel writes them concurrently)
    r("cache_seqlens is cu_seqlens_k", alias("cache_seqlens", "cu_seqlens_k"), "cache_seqlens", "cu_seqlens_k", "overlap in memory"),
    r("swa_page_table is page_table", alias("swa_page_table", "page_table"), "page_table and swa_page_table overlap in memory"),
    r("cu_seqlens_q inside cu_seqlens_k", alias("cu_seqlens_q", "cu_seqlens_k", offset=2), "cu_seqlens_k and cu_seqlens_q overlap"),
    # an output sharing memory with an input the kernel reads (a fresh user's
    # segfault: page_table passed as req_to_token, seq_lens inside cu_seqlens_k)
    r("page_table is req_to_token", alias("page_table", "req_to_token"), "page_table (written) and req_to_token (read) overlap in memory"),
    r("seq_lens inside cu_seqlens_k", alias("seq_lens", "cu_seqlens_k"), "cu_seqlens_k (written) and seq_lens (read) overlap in memory"),
    # (max_seq_pages - 1) * page_size overflowing int64 used to pass the width
    # check and gather at a wild address (segfault): found by this matrix.
    r("page_size overflows the width check", set_(page_size=2**61 + 2**40, max_seq_pages=5),
      "req_to_token.size(1) > (max_seq_pages - 1) * page_size"),
    r("max_seq_pages huge", set_(max_seq_pages=2**62 + 1, page_size=4), "max_seq_pages = 4611686018427387905"),
    r("bad q_mode 3", set_(q_mode=3), "q_mode must be 0"),
    r("bad q_mode -1", set_(q_mode=-1), "q_mode must be 0 (Q_MODE_NONE), 1 (Q_MODE_CUMSUM) or 2 (Q_MODE_STRIDED), got -1"),
    # optional tensors that must come together
    r("cumsum without qlens", set_(qlens=None), "qlens is required when q_mode = 1"),
    r("q_mode 1 without cu_seqlens_q", set_(cu_seqlens_q=None), "cu_seqlens_q is required"),
    r("q_mode 2 without cu_seqlens_q", set_(cu_seqlens_q=None, q_mode=2), "cu_seqlens_q is required when q_mode = 2"),
    r("swa table without mapping", set_(swa_mapping=None), "swa_page_table needs swa_mapping or swa_v2p"),
    r("swa out without mapping", set_(swa_mapping=None, swa_page_table=None),
      "swa_mapping is required when swa_out_cache_loc is given"),
    r("swa out without mapping (swa_v2p table)",
      both(derive("swa_v2p", "swa_mapping", lambda t: t.clone()), set_(swa_mapping=None)),
      "swa_mapping is required when swa_out_cache_loc is given"),
    # (a swa_mapping without SWA outputs is accepted and unused since SGLang 0.5.23
    # passes it on every call: hostile_table.py "lone swa_mapping" must succeed)
    # seqlen_offsets (per-row offsets, ragged verify; built from seq_lens' device)
    r("seqlen_offsets float", derive("seqlen_offsets", "seq_lens", lambda t: t.float()),
      "seqlen_offsets " + IDX, "torch.float32"),
    r("seqlen_offsets int16", derive("seqlen_offsets", "seq_lens", lambda t: t.short()), "seqlen_offsets " + IDX),
    r("seqlen_offsets short", derive("seqlen_offsets", "seq_lens", lambda t: t[:4]),
      "seqlen_offsets.size(0) must be >= bs = 5, got 4"),
    r("seqlen_offsets 2-D", derive("seqlen_offsets", "seq_lens", lambda t: t[None]),
      "seqlen_offsets must be 1-D, got 2-D"),
    r("seqlen_offsets step 2", derive("seqlen_offsets", "seq_lens", lambda t: torch.cat([t, t])[::2]),
      "seqlen_offsets must have inner stride 1"),
    r("seqlen_offsets on meta", derive("seqlen_offsets", "seq_lens", lambda t: t.to("meta")),
      "seqlen_offsets", "meta"),
    # v2p / swa_v2p (docs/operators/kv_read_table.md: the unified pool's page translations, int64)
    r("v2p int32", derive("v2p", "swa_mapping", lambda t: t.int()), "v2p " + I64, "torch.int32"),
    r("swa_v2p float", derive("swa_v2p", "swa_mapping", lambda t: t.float()), "swa_v2p " + I64),
    r("v2p empty", derive("v2p", "swa_mapping", lambda t: t[:0]), "v2p.size(0) must be >= 1, got 0"),
    r("swa_v2p empty", derive("swa_v2p", "swa_mapping", lambda t: t[:0]), "swa_v2p.size(0) must be >= 1, got 0"),
    r("v2p 2-D", derive("v2p", "swa_mapping", lambda t: t[None]), "v2p must be 1-D, got 2-D"),
    r("v2p step 2", derive("v2p", "swa_mapping", lambda t: t[::2]), "v2p must have inner stride 1"),
    r("v2p on meta", derive("v2p", "swa_mapping", lambda t: t.to("meta")), "v2p", "meta"),
    # devices: cpu + meta (meta dispatches to the fake kernel, which must not
    # silently do nothing), cpu + cuda when there is a GPU
    r("page_table on meta", apply("page_table", lambda t: torch.empty_like(t, device="meta")), "page_table", "meta"),
    r("req_to_token on meta", to_device("meta", "req_to_token"), "req_to_token", "meta"),
    r("qlens on meta", to_device("meta", "qlens"), "qlens", "meta"),
    r("page_table on cpu, rest on cuda", all_but("cuda", "page_table"), "page_table is on cpu", needs="cuda"),
    r("swa_mapping on cuda, rest on cpu", to_device("cuda", "swa_mapping"), "swa_mapping is on cuda", needs="cuda"),
    r("page_table None without skip_page_table", set_(page_table=None),
      "page_table is required (got None) unless skip_page_table=True"),
    r("skip_page_table with cache_seqlens int64", both(set_(skip_page_table=True, page_table=None),
                                                       apply("cache_seqlens", lambda t: t.long())),
      "cache_seqlens " + I32),
    r("skip_page_table with cu_seqlens_k short", both(set_(skip_page_table=True),
                                                      apply("cu_seqlens_k", lambda t: t[:5])),
      "cu_seqlens_k.size(0) must be >= bs + 1"),
    r("skip_page_table with cu_seqlens_q is cu_seqlens_k", both(set_(skip_page_table=True),
                                                                alias("cu_seqlens_q", "cu_seqlens_k")),
      "cu_seqlens_k and cu_seqlens_q overlap"),
    r("unknown keyword", set_(page_tabel=None), "page_tabel", raises=(TypeError,), prefixed=False),
    r("missing bs", drop("bs"), "'bs'", raises=(TypeError,), prefixed=False),
]

# ---- update_trtllm_mha_graph_metadata_multi (K = 3 sets) ----------------------
MM = "update_trtllm_mha_graph_metadata_multi"


def rm(id, edit, *names, **kw):
    return Row(id=f"{MM}/{id}", op=MM, edit=edit, names=names, **kw)


def at(name, k, fn):
    """Replaces element k of list argument `name` with fn(element)."""
    def edit(kw):
        items = list(kw[name])
        items[k] = fn(items[k])
        kw[name] = items
    return edit


def lists_to(device):
    """Every tensor argument, list elements included, to `device`."""
    def edit(kw):
        for k, v in list(kw.items()):
            if isinstance(v, torch.Tensor):
                kw[k] = v.to(device)
            elif isinstance(v, list) and v and isinstance(v[0], torch.Tensor):
                kw[k] = [t.to(device) for t in v]
    return edit


def alias_sets(name, k, onto, j):
    """Element k of list `name` becomes element j of list `onto` (two sets' outputs alias)."""
    def edit(kw):
        items = list(kw[name])
        items[k] = kw[onto][j] if kw[onto][j].shape == items[k].shape else kw[onto][j][: items[k].shape[0]]
        kw[name] = items
    return edit


TRTLLM_MULTI_ROWS = [
    rm("cache_seqlens[1] int64", at("cache_seqlens", 1, lambda t: t.long()), "cache_seqlens[1] " + I32),
    rm("page_table[2] narrow", at("page_table", 2, lambda t: t[:, :3]), "page_table[2].size(1) must be >= max_seq_pages"),
    rm("swa_page_table[0] rows overlap", at("swa_page_table", 0, overlapping_rows), "swa_page_table[0] rows overlap"),
    rm("cu_seqlens_q[1] short", at("cu_seqlens_q", 1, lambda t: t[:3]), "cu_seqlens_q[1].size(0) must be >= bs + 1"),
    rm("cu_seqlens_k list short", apply("cu_seqlens_k", lambda v: v[:2]), "cu_seqlens_k must hold 3 tensors"),
    rm("swa_out_cache_loc list short", apply("swa_out_cache_loc", lambda v: v[:1]),
       "swa_out_cache_loc must hold 3 tensors", "or none, got 1"),
    rm("seqlen_offset list long", apply("seqlen_offset", lambda v: v + [4]), "seqlen_offset must hold 3 offsets"),
    rm("seqlen_offset[2] past int32", apply("seqlen_offset", lambda v: v[:2] + [2**31]),
       "seqlen_offset[2] = 2147483648 is outside"),
    rm("empty lists", set_(cache_seqlens=[], cu_seqlens_k=[], page_table=[], swa_page_table=[], swa_out_cache_loc=[],
                           cu_seqlens_q=[], seqlen_offset=[]), "cache_seqlens must hold at least one tensor"),
    rm("page_table None without skip_page_table", set_(page_table=None), "page_table is required",
       "unless skip_page_table=True"),
    rm("cache_seqlens[2] is cache_seqlens[0]", alias_sets("cache_seqlens", 2, "cache_seqlens", 0),
       "cache_seqlens[0]", "cache_seqlens[2]", "overlap in memory"),
    rm("page_table[1] is swa_page_table[0]", alias_sets("page_table", 1, "swa_page_table", 0),
       "page_table[1]", "swa_page_table[0]", "overlap in memory"),
    rm("swa_mapping int16", apply("swa_mapping", lambda t: t.short()), "swa_mapping " + IDX),
    rm("v2p int32", derive("v2p", "swa_mapping", lambda t: t.int()), "v2p " + I64),
    rm("None inside cache_seqlens", at("cache_seqlens", 1, lambda t: None), "cache_seqlens[1] must be a Tensor, got None",
       raises=(TypeError,)),
    rm("None inside page_table", at("page_table", 2, lambda t: None), "page_table[2] must be a Tensor, got None",
       raises=(TypeError,)),
    rm("req_to_token None", set_(req_to_token=None), "req_to_token must be a Tensor, got None", raises=(TypeError,)),
    rm("page_table[0] on meta", at("page_table", 0, lambda t: torch.empty_like(t, device="meta")), "page_table", "meta"),
    rm("cache_seqlens[1] on cpu, rest on cuda", both(lists_to("cuda"), at("cache_seqlens", 1, lambda t: t.cpu())),
       "cache_seqlens[1] is on cpu", needs="cuda"),
]

ROWS: list[Row] = list(TRTLLM_ROWS) + TRTLLM_MULTI_ROWS


def _register_family_rows():
    # Every family's strategy module, from the one list of them (registry.FAMILIES).
    from registry import FAMILIES

    for module in FAMILIES:
        ROWS.extend(getattr(module, "BAD_INPUT_ROWS", []))


_register_family_rows()
ROWS.extend(described_rows(BASES, torch.Generator().manual_seed(0)))


def available(row: Row) -> bool:
    return hasattr(sgl_meta, row.op) and (row.base or row.op) in BASES
