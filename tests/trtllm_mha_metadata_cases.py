"""Random and edge-case inputs for update_trtllm_mha_graph_metadata."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sgl_meta import Q_MODE_CUMSUM, Q_MODE_NONE, Q_MODE_STRIDED

from helpers import poison_like


@dataclass
class MetaCase:
    bs: int = 5
    page_size: int = 16
    max_seq_pages: int = 9
    extra_cols: int = 7  # req_to_token columns past the last gathered slot
    row_pad: int = 3  # req_to_token row stride padding (strided view)
    pool: int = 11
    pad_rows: int = 2  # output rows past bs (padded CUDA-graph rows), must survive
    pad_cols: int = 4  # page-table columns past max_seq_pages, must survive
    index_dtype: torch.dtype = torch.int64
    seqlen_dtype: torch.dtype = torch.int32
    swa: bool = True
    n_out: int | None = 6  # out_cache_loc numel (None: not given)
    swa_out_len: int | None = 9  # swa_out_cache_loc numel (None: not given)
    q_mode: int = Q_MODE_NONE
    q_stride: int = 4
    seqlen_offset: int = 1
    live_pages_only: bool = False
    negative_slots: bool = True
    mapping_dtype: torch.dtype = torch.int64  # swa_mapping (SGLang passes int32 and int64)
    skip_page_table: bool = False
    tables_given: bool = True  # with skip_page_table: page_table / SWA outputs None
    lone_mapping: bool = False  # swa_mapping given without any SWA output (no swa=...)
    row_offsets: torch.dtype | None = None  # seqlen_offsets (ragged verify) of this dtype
    ragged_verify: bool = False  # qlens = seqlen_offsets (SGLang's ragged verify layout)
    v2p: bool = False  # unified pool: page table through a virtual->physical page table
    swa_v2p: bool = False  # SWA table through its own page table (needs swa=True)
    unified: bool = False  # no swa_mapping, no swa_out_cache_loc (SGLang's unified pool)


def make_case(c: MetaCase, gen: torch.Generator, device: str):
    """Returns (inputs, outputs, scalars) dicts; outputs are poisoned."""
    assert not (c.unified and c.swa and not c.swa_v2p), "a unified-pool SWA table needs swa_v2p"
    ctx = max(c.max_seq_pages - 1, 0) * c.page_size + 1 + c.extra_cols
    swa_m = c.pool * ctx + 5  # mapping covers every slot value drawn below
    # Slots: mostly valid, some -1 sentinels and other negatives (floor-division
    # of negatives must floor), held in a strided view (row stride > ctx).
    base = torch.randint(0, swa_m, (c.pool, ctx + c.row_pad), generator=gen, dtype=torch.int32)
    if c.negative_slots:
        neg = torch.rand(base.shape, generator=gen) < 0.1
        base[neg] = -torch.randint(1, 3 * c.page_size, (int(neg.sum()),), generator=gen, dtype=torch.int32)
        base[torch.rand(base.shape, generator=gen) < 0.05] = -1
    req_to_token = base[:, :ctx]
    max_len = c.max_seq_pages * c.page_size + c.page_size
    # Lengths stay >= 0 after the offsets the tests add (down to -7 per row and
    # -3 per set besides seqlen_offset): a negative one is an error
    # (tests/test_hostile_lengths.py).
    floor = max(0, -c.seqlen_offset) + 16
    inputs = dict(
        req_pool_indices=torch.randint(0, c.pool, (c.bs + 2,), generator=gen).to(c.index_dtype),
        seq_lens=torch.randint(floor, floor + max_len, (c.bs + 2,), generator=gen).to(c.seqlen_dtype),
        req_to_token=req_to_token,
        swa_mapping=None,
        out_cache_loc=None,
        qlens=None,
    )
    if c.swa:
        mapping = torch.randint(-1, swa_m * 2, (swa_m,), generator=gen, dtype=torch.int64)
        mapping[torch.rand(swa_m, generator=gen) < 0.1] = -1
        inputs["swa_mapping"] = mapping.to(c.mapping_dtype)
    if c.n_out is not None:
        loc = torch.randint(0, swa_m, (c.n_out,), generator=gen, dtype=torch.int64)
        loc[torch.rand(c.n_out, generator=gen) < 0.2] = -1
        inputs["out_cache_loc"] = loc
    if c.q_mode == Q_MODE_CUMSUM:
        inputs["qlens"] = torch.randint(1, 9, (c.bs + 1,), generator=gen).to(c.index_dtype)
    if c.row_offsets is not None:
        # verify lengths 1..8 (ragged verify), some padding rows far longer,
        # and, where they are not also qlens, some negative (an offset may be,
        # the length it gives may not)
        offs = torch.randint(1, 9, (c.bs + 3,), generator=gen)
        offs[torch.rand(offs.shape, generator=gen) < 0.1] = 3 * c.page_size + 5
        if not c.ragged_verify:
            offs[torch.rand(offs.shape, generator=gen) < 0.05] = -7
        inputs["seqlen_offsets"] = offs.to(c.row_offsets)
        if c.ragged_verify:
            inputs["qlens"] = inputs["seqlen_offsets"]

    # Virtual page tables cover every page a slot drawn above can name; -1
    # entries are freed pages (read as the sink, 0).
    n_vpages = swa_m // c.page_size + 2
    for name, wanted in (("v2p", c.v2p), ("swa_v2p", c.swa_v2p)):
        inputs[name] = None
        if wanted:
            table = torch.randint(-1, 4 * n_vpages, (n_vpages,), generator=gen, dtype=torch.int64)
            table[torch.rand(n_vpages, generator=gen) < 0.1] = -1
            inputs[name] = table
    if c.unified:
        inputs["swa_mapping"] = None
        inputs["out_cache_loc"] = None

    rows, cols = c.bs + c.pad_rows, c.max_seq_pages + c.pad_cols
    i32 = dict(dtype=torch.int32)
    outputs = dict(
        cache_seqlens=torch.empty(rows, **i32),
        cu_seqlens_k=torch.empty(rows + 1, **i32),
        page_table=torch.empty(rows, cols, **i32),
        swa_page_table=torch.empty(rows, cols, **i32) if c.swa else None,
        swa_out_cache_loc=(
            torch.empty(c.swa_out_len, dtype=torch.int64)
            if c.swa and c.swa_out_len is not None and not c.unified else None
        ),
        cu_seqlens_q=torch.empty(rows + 1, **i32) if c.q_mode != Q_MODE_NONE else None,
    )
    outputs = {k: None if v is None else poison_like(v, gen) for k, v in outputs.items()}
    if not c.swa:
        inputs["out_cache_loc"] = None
        if c.lone_mapping:  # accepted and unused (SGLang 0.5.23 always passes it)
            mapping = torch.randint(-1, 2 * swa_m, (swa_m,), generator=gen, dtype=torch.int64)
            inputs["swa_mapping"] = mapping.to(c.mapping_dtype)
    if c.skip_page_table and not c.tables_given:
        for name in ("page_table", "swa_page_table", "swa_out_cache_loc"):
            outputs[name] = None
    scalars = dict(
        bs=c.bs,
        seqlen_offset=c.seqlen_offset,
        max_seq_pages=c.max_seq_pages,
        page_size=c.page_size,
        q_stride=c.q_stride,
        q_mode=c.q_mode,
        live_pages_only=c.live_pages_only,
    )
    if c.skip_page_table:
        scalars["skip_page_table"] = True
    to = lambda d: {k: (v.to(device) if isinstance(v, torch.Tensor) else v) for k, v in d.items()}  # noqa: E731
    return to(inputs), to(outputs), scalars


EDGE_CASES = {
    "bs0": MetaCase(bs=0),
    "bs1": MetaCase(bs=1),
    "bs1_page1": MetaCase(bs=1, page_size=1, max_seq_pages=37),
    "odd_sizes": MetaCase(bs=13, page_size=3, max_seq_pages=29, pool=17, extra_cols=1),
    "no_swa": MetaCase(swa=False, n_out=None, swa_out_len=None),
    "swa_table_only": MetaCase(n_out=None, swa_out_len=None),
    "swa_out_no_loc": MetaCase(n_out=None),
    "swa_out_shorter_than_loc": MetaCase(n_out=12, swa_out_len=5),
    "swa_out_empty": MetaCase(swa_out_len=0),
    "int32_indices": MetaCase(index_dtype=torch.int32, seqlen_dtype=torch.int32),
    "int64_indices": MetaCase(index_dtype=torch.int64, seqlen_dtype=torch.int64),
    "q_cumsum": MetaCase(q_mode=Q_MODE_CUMSUM),
    "q_cumsum_int32": MetaCase(q_mode=Q_MODE_CUMSUM, index_dtype=torch.int32),
    "q_strided": MetaCase(q_mode=Q_MODE_STRIDED, q_stride=3),
    "live_pages_only": MetaCase(live_pages_only=True, bs=9, max_seq_pages=40),
    "live_pages_negative_offset": MetaCase(live_pages_only=True, seqlen_offset=-40),
    "zero_pages": MetaCase(max_seq_pages=0),
    "no_pad": MetaCase(pad_rows=0, pad_cols=0, row_pad=0, extra_cols=0),
    "page_256_wide": MetaCase(bs=3, page_size=256, max_seq_pages=1100, pool=4, extra_cols=0),
    "many_rows": MetaCase(bs=300, page_size=64, max_seq_pages=5, pool=301),
    "no_negative_slots": MetaCase(negative_slots=False),
    # CUDA page blocks are 128 columns: rows across several chunks, live or not
    "chunk_edges": MetaCase(bs=4, page_size=2, max_seq_pages=513, pool=5, extra_cols=0),
    "chunk_edges_live": MetaCase(bs=5, page_size=1, max_seq_pages=257, pool=6, live_pages_only=True,
                                 seqlen_offset=200),
    # docs/operators/trtllm_mha_metadata.md: what SGLang 0.5.23 passes
    "mapping_int32": MetaCase(mapping_dtype=torch.int32),
    "mapping_int32_live": MetaCase(mapping_dtype=torch.int32, live_pages_only=True, bs=9, max_seq_pages=30),
    "lone_mapping": MetaCase(swa=False, lone_mapping=True),
    "lone_mapping_int32": MetaCase(swa=False, lone_mapping=True, mapping_dtype=torch.int32),
    "skip_tables_none": MetaCase(skip_page_table=True, tables_given=False),
    "skip_tables_given_untouched": MetaCase(skip_page_table=True),
    "skip_q_cumsum": MetaCase(skip_page_table=True, tables_given=False, q_mode=Q_MODE_CUMSUM, bs=40),
    "skip_q_strided": MetaCase(skip_page_table=True, q_mode=Q_MODE_STRIDED, bs=300, pool=301),
    "skip_bs1": MetaCase(skip_page_table=True, tables_given=False, bs=1),
    "skip_many_rows": MetaCase(skip_page_table=True, tables_given=False, bs=1000, pool=7,
                               max_seq_pages=2, q_mode=Q_MODE_CUMSUM),
    # docs/operators/trtllm_mha_metadata.md: ragged verify, per-row offsets with q_mode=CUMSUM over the same lengths
    "ragged_verify": MetaCase(row_offsets=torch.int32, ragged_verify=True, q_mode=Q_MODE_CUMSUM,
                              live_pages_only=True, seqlen_offset=0, bs=9, max_seq_pages=30),
    "ragged_verify_int64": MetaCase(row_offsets=torch.int64, ragged_verify=True, q_mode=Q_MODE_CUMSUM,
                                    live_pages_only=True, seqlen_offset=0, bs=40, max_seq_pages=12),
    "ragged_verify_bs1": MetaCase(bs=1, row_offsets=torch.int32, ragged_verify=True, q_mode=Q_MODE_CUMSUM,
                                  live_pages_only=True, seqlen_offset=0),
    "ragged_verify_many_rows": MetaCase(bs=700, pool=701, max_seq_pages=6, row_offsets=torch.int32,
                                        ragged_verify=True, q_mode=Q_MODE_CUMSUM, live_pages_only=True),
    "row_offsets_plus_scalar": MetaCase(row_offsets=torch.int64, seqlen_offset=3),
    "row_offsets_full_width": MetaCase(row_offsets=torch.int32, q_mode=Q_MODE_STRIDED),
    "row_offsets_skip": MetaCase(row_offsets=torch.int32, skip_page_table=True, q_mode=Q_MODE_CUMSUM,
                                 ragged_verify=True, bs=33),
    # docs/operators/kv_read_table.md: the unified pool's page tables in the same launch
    "unified_v2p_swa_v2p": MetaCase(v2p=True, swa_v2p=True, unified=True, live_pages_only=True),
    "unified_v2p_only": MetaCase(v2p=True, swa=False, n_out=None, swa_out_len=None, live_pages_only=True),
    "unified_full_width": MetaCase(v2p=True, swa_v2p=True, unified=True),
    "unified_page1": MetaCase(v2p=True, swa_v2p=True, unified=True, page_size=1, max_seq_pages=37),
    "unified_odd_page": MetaCase(v2p=True, swa_v2p=True, unified=True, page_size=3, bs=13, max_seq_pages=29,
                                 pool=17, live_pages_only=True),
    "v2p_with_swa_mapping": MetaCase(v2p=True, live_pages_only=True),
    "swa_v2p_with_mapping_out": MetaCase(swa_v2p=True, v2p=True),
    "unified_ragged_verify": MetaCase(v2p=True, swa_v2p=True, unified=True, row_offsets=torch.int32,
                                      ragged_verify=True, q_mode=Q_MODE_CUMSUM, live_pages_only=True,
                                      seqlen_offset=0),
    "unified_many_rows": MetaCase(v2p=True, swa_v2p=True, unified=True, bs=300, page_size=64, max_seq_pages=5,
                                  pool=301),
    "v2p_skip_ignored": MetaCase(v2p=True, swa_v2p=True, unified=True, skip_page_table=True),
}


OUTPUT_NAMES = ("cache_seqlens", "cu_seqlens_k", "page_table", "swa_page_table", "swa_out_cache_loc", "cu_seqlens_q")


def make_multi_case(c: MetaCase, offsets: list, gen: torch.Generator, device: str):
    """update_trtllm_mha_graph_metadata_multi: the inputs of make_case and
    len(offsets) destination sets, each freshly poisoned (lists per output,
    None where the case has no such output). Returns (inputs, outputs, scalars)."""
    inputs, first, scalars = make_case(c, gen, device)
    sets = [first] + [
        {k: (None if v is None else poison_like(v, gen).to(device)) for k, v in first.items()}
        for _ in offsets[1:]
    ]
    outputs = {name: (None if first[name] is None else [s[name] for s in sets]) for name in OUTPUT_NAMES}
    scalars = {**scalars, "seqlen_offset": list(offsets)}
    return inputs, outputs, scalars
