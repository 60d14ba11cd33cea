"""FlashAttention backend metadata: the drop-ins vs SGLang 0.5.23's own Triton
functions (run on CPU by Triton's interpreter) vs the eager reference, the
multi-set op vs K single calls, CUDA vs CPU and CUDA-graph replays."""

from __future__ import annotations

import dataclasses
import inspect

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from flash_attention_metadata_cases import (OUTPUTS, POISON, FaCase, clone_call, decode_call, draft_extend_call,
                                            skew_lengths, swa_spec_call)
from flash_attention_metadata_upstream import upstream
from helpers import assert_same, capture_cuda_graph, on_cuda, on_device, poison_

UP = upstream()
needs_upstream = pytest.mark.skipif(UP is None, reason="sglang 0.5.23 / triton not installed")
DROPINS = ("normal_decode_set_metadata", "draft_extend_set_metadata", "prepare_swa_spec_page_table_triton")


def outputs(kw: dict) -> dict:
    return {k: kw[k] for k in OUTPUTS if isinstance(kw.get(k), torch.Tensor)}


def run(fn, kw: dict) -> dict:
    kw = clone_call(kw)
    fn(**kw)
    return outputs(kw)


def assert_equal(got: dict, want: dict, context: str) -> None:
    assert got.keys() == want.keys()
    assert_same(got, want, context)


def all_three(name: str, kw: dict, context: str) -> dict:
    """Ours == the reference == upstream (when installed) on every element; returns ours."""
    ours = run(getattr(sgl_meta, name), kw)
    assert_equal(ours, run(getattr(reference, name), kw), f"op vs reference, {context}")
    if UP is not None:
        assert_equal(ours, run(getattr(UP, name), kw), f"op vs SGLang 0.5.23, {context}")
    return ours


DECODE_CASES = [
    FaCase(),
    FaCase(bs=1, page_size=1, max_seq_pages=40, delta=1),
    FaCase(bs=7, page_size=64, max_seq_pages=5, delta=3, index_dtype=torch.int64),
    FaCase(delta=-1, page_size=4),
    FaCase(swa="mapping", delta=2, mapping_dtype=torch.int32),
    FaCase(swa="mapping", page_size=1, max_seq_pages=30, index_dtype=torch.int64),
    FaCase(page_size=1, max_seq_pages=30, negative_slots=True),  # Triton truncation == floor at page size 1
    FaCase(full_v2p=True, negative_slots=True, delta=4),
    FaCase(full_v2p=True, swa="v2p", negative_slots=True, zero_tail=True, delta=4),
    FaCase(swa="v2p", zero_tail=True, page_size=8),
    FaCase(swa="mapping", zero_tail=True, page_size=32, delta=1),
    FaCase(zero_tail=True, bs=3, max_seq_pages=200, page_size=2),  # more than one 128-column chunk
    FaCase(skip_page_table=True, delta=5),
    FaCase(skip_page_table=True, swa="mapping", full_v2p=True),
    FaCase(max_seq_pages=0, delta=1),
    # The scan's shapes: one warp up to 32 rows, the block from 33, passes of 128.
    FaCase(bs=32, page_size=16, max_seq_pages=6, delta=2, pool=40),
    FaCase(bs=33, page_size=16, max_seq_pages=6, delta=2, pool=40),
    FaCase(bs=300, page_size=64, max_seq_pages=3, pool=301),
]


@needs_upstream
@pytest.mark.parametrize("case", DECODE_CASES, ids=str)
def test_decode_matches_upstream(case, gen):
    for _ in range(2):
        all_three("normal_decode_set_metadata", decode_call(case, gen), str(case))


def test_decode_reference_without_upstream(gen):
    """The same cases against the reference alone (runs where sglang is absent)."""
    for case in DECODE_CASES:
        kw = decode_call(case, gen)
        assert_equal(run(sgl_meta.normal_decode_set_metadata, kw),
                     run(reference.normal_decode_set_metadata, kw), str(case))


DRAFT_EXTEND_CASES = [
    FaCase(),
    FaCase(bs=1, page_size=1, max_seq_pages=30),
    FaCase(bs=6, page_size=64, max_seq_pages=4, index_dtype=torch.int64),
    FaCase(swa="mapping", tokens_per_req=3),
    FaCase(swa="mapping", page_size=1, max_seq_pages=20, tokens_per_req=1, mapping_dtype=torch.int32),
    FaCase(swa="mapping", bs=9, page_size=2, max_seq_pages=300, tokens_per_req=5),
    FaCase(bs=32, page_size=16, max_seq_pages=6, pool=40),
    FaCase(bs=33, page_size=16, max_seq_pages=6, pool=40),
    FaCase(bs=300, page_size=64, max_seq_pages=3, pool=301),
]


@needs_upstream
@pytest.mark.parametrize("case", DRAFT_EXTEND_CASES, ids=str)
def test_draft_extend_matches_upstream(case, gen):
    for _ in range(2):
        all_three("draft_extend_set_metadata", draft_extend_call(case, gen), str(case))


SPEC_CASES = [
    dict(),
    dict(bs=1, repeat=1, a_width=3, b_width=1),
    dict(bs=2, repeat=3, a_width=300, b_width=7),  # rows across upstream's 256-column blocks
    dict(a_width=40, b_width=5, dst_width=30),  # narrower than A + B (SGLang: max_seq_len_k + B)
    dict(a_width=0, b_width=4),
]


@needs_upstream
@pytest.mark.parametrize("shape", SPEC_CASES, ids=str)
def test_swa_spec_matches_upstream(shape, gen):
    for _ in range(3):
        kw = swa_spec_call(gen, **shape)
        if "dst_width" in shape:  # SGLang sizes dst for the lengths it passes
            kw["seq_len_a"].clamp_(max=shape["dst_width"] - shape["b_width"])
        all_three("prepare_swa_spec_page_table_triton", kw, str(shape))


def test_swa_spec_lengths_past_the_tables(gen):
    """Lengths past the tables: columns past A + B and past dst are never written."""
    kw = swa_spec_call(gen, consistent=False, dst_width=60)
    ours = all_three("prepare_swa_spec_page_table_triton", kw, "inconsistent") if UP is None else \
        run(sgl_meta.prepare_swa_spec_page_table_triton, kw)
    assert_equal(ours, run(reference.prepare_swa_spec_page_table_triton, kw), "inconsistent")
    assert (ours["page_table_dst"][:, 45:] == POISON).all()


# --- the documented differences from upstream --------------------------------------


def test_negative_slot_floors(gen):
    kw = decode_call(FaCase(bs=2, page_size=64, max_seq_pages=3, swa="mapping"), gen)
    kw["req_to_token"].fill_(-1)
    kw["seq_lens"].fill_(100)
    sgl_meta.normal_decode_set_metadata(**kw)
    assert (kw["page_table"][:, :2] == -1).all()  # -1 // 64 == -1 (Triton: 0)
    assert (kw["swa_page_table"][:, :2] == -1).all()  # the sentinel, never a mapping read
    assert (kw["page_table"][:, 2:] == POISON).all()


def test_unbound_v2p_pages_map_to_the_sink(gen):
    kw = decode_call(FaCase(bs=2, page_size=4, max_seq_pages=3, full_v2p=True, swa="v2p"), gen)
    kw["req_to_token"].copy_(torch.arange(kw["req_to_token"].numel(), dtype=torch.int32).view_as(kw["req_to_token"]))
    kw["full_v2p"].fill_(-1)
    kw["swa_v2p"].fill_(-(2**40))
    kw["seq_lens"].fill_(12)
    sgl_meta.normal_decode_set_metadata(**kw)
    assert (kw["page_table"][:, :3] == 0).all() and (kw["swa_page_table"][:, :3] == 0).all()


def test_page_size_must_be_a_power_of_two(gen):
    kw = decode_call(FaCase(page_size=16), gen)
    kw["page_size"] = 24
    with pytest.raises(RuntimeError, match=r"sgl_meta.normal_decode_set_metadata: page_size must be a power of two"):
        sgl_meta.normal_decode_set_metadata(**kw)
    kw = draft_extend_call(FaCase(page_size=16), gen)
    kw["page_size"] = 3
    with pytest.raises(RuntimeError, match=r"draft_extend_set_metadata: page_size must be a power of two, got 3"):
        sgl_meta.draft_extend_set_metadata(**kw)


@pytest.mark.parametrize("change, message", [
    (dict(full_to_swa_index_mapping=None), "exactly one of full_to_swa_index_mapping"),
    (dict(swa_v2p="copy"), "exactly one of full_to_swa_index_mapping"),
])
def test_decode_keeps_upstream_asserts(change, message, gen):
    kw = decode_call(FaCase(swa="mapping"), gen)
    for k, v in change.items():
        kw[k] = torch.zeros(8, dtype=torch.int64) if v == "copy" else v
    with pytest.raises(ValueError, match=message):
        sgl_meta.normal_decode_set_metadata(**kw)


@pytest.mark.parametrize("change, message", [
    (dict(swa_page_table=None), "swa_page_table is required"),
    (dict(out_cache_loc=None), "out_cache_loc is required"),
    (dict(swa_page_table="narrow"), "swa_page_table shape"),
    (dict(swa_out_cache_loc="short"), "swa_out_cache_loc.size"),
    (dict(out_cache_loc="odd"), "positive multiple"),
])
def test_draft_extend_keeps_upstream_asserts(change, message, gen):
    kw = draft_extend_call(FaCase(swa="mapping"), gen)
    for k, v in change.items():
        kw[k] = {"narrow": lambda t: t[:, :-1], "short": lambda t: t[:-1], "odd": lambda t: t[:-1]}[v](kw[k]) \
            if isinstance(v, str) else v
    if change.get("out_cache_loc") == "odd":
        kw["swa_out_cache_loc"] = kw["swa_out_cache_loc"][:-1]
    with pytest.raises(ValueError, match=message):
        sgl_meta.draft_extend_set_metadata(**kw)


def test_errors_name_the_dropin(gen):
    kw = decode_call(FaCase(), gen)
    kw["cache_seqlens_int32"] = kw["cache_seqlens_int32"].long()
    with pytest.raises(RuntimeError, match=r"^sgl_meta.normal_decode_set_metadata: cache_seqlens_int32 must have "
                                           r"dtype int32"):
        sgl_meta.normal_decode_set_metadata(**kw)
    kw = decode_call(FaCase(), gen)
    kw["seq_lens"] = kw["seq_lens"][:2]
    with pytest.raises(RuntimeError, match=r"seq_lens.size\(0\) must be >= cache_seqlens_int32.size\(0\) = 5"):
        sgl_meta.normal_decode_set_metadata(**kw)
    kw = decode_call(FaCase(delta=-2), gen)
    kw["seq_lens"][3] = 1
    with pytest.raises(RuntimeError, match=r"seq_lens\[3\] \+ seq_len_delta = -1 is negative"):
        sgl_meta.normal_decode_set_metadata(**kw)
    kw = decode_call(FaCase(swa="mapping"), gen)
    kw["req_to_token"][kw["req_pool_indices"][0], 0] = kw["full_to_swa_index_mapping"].numel()
    kw["seq_lens"][0] = 1
    with pytest.raises(RuntimeError, match=r"is outside \[0, \d+\) \(full_to_swa_index_mapping.numel\(\)\)"):
        sgl_meta.normal_decode_set_metadata(**kw)


@pytest.mark.parametrize("name", DROPINS)
def test_dropin_signatures_match_upstream(name):
    if UP is None:
        pytest.skip("sglang not installed")
    want = inspect.signature(getattr(UP, name))
    got = inspect.signature(getattr(sgl_meta, name))
    assert [(p.name, p.default, p.kind) for p in got.parameters.values()] == \
        [(p.name, p.default, p.kind) for p in want.parameters.values()]
    ref = inspect.signature(getattr(reference, name))
    assert list(ref.parameters) == list(want.parameters)


# --- the multi-set form ---------------------------------------------------------------


def _multi_kwargs(kw: dict, deltas) -> tuple[dict, list[dict]]:
    """The K-set op call over K copies of the drop-in's outputs, and the K drop-in calls."""
    singles = []
    for d in deltas:
        one = clone_call(kw)
        one["seq_len_delta"] = d
        singles.append(one)
    swa = kw.get("swa_page_table") is not None
    multi = dict(
        cache_seqlens=[s["cache_seqlens_int32"].clone() for s in singles],
        cu_seqlens_k=[s["cu_seqlens_k"].clone() for s in singles],
        page_table=[s["page_table"].clone() for s in singles],
        swa_page_table=[s["swa_page_table"].clone() for s in singles] if swa else None,
        req_to_token=kw["req_to_token"], req_pool_indices=kw["req_pool_indices"], seq_lens=kw["seq_lens"],
        seq_len_delta=list(deltas), bs=kw["cache_seqlens_int32"].numel(), max_seq_pages=kw["max_seq_pages"],
        page_size=kw["page_size"], full_to_swa_index_mapping=kw.get("full_to_swa_index_mapping"),
        full_v2p=kw.get("full_v2p"), swa_v2p=kw.get("swa_v2p"), zero_tail=kw["zero_tail"],
    )
    return multi, singles


@pytest.mark.parametrize("deltas", [[1, 2, 3], [0], [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]], ids=len)
@pytest.mark.parametrize("case", [FaCase(), FaCase(swa="mapping", page_size=1, max_seq_pages=50),
                                  FaCase(full_v2p=True, swa="v2p", zero_tail=True, negative_slots=True)], ids=str)
def test_multi_equals_single_calls(case, deltas, gen, device):
    kw = decode_call(dataclasses.replace(case, delta=0), gen, device)
    multi, singles = _multi_kwargs(kw, deltas)
    sgl_meta.update_flash_attention_metadata(**multi)
    for s in singles:
        sgl_meta.normal_decode_set_metadata(**s)
    for k, s in enumerate(singles):
        assert torch.equal(multi["cache_seqlens"][k], s["cache_seqlens_int32"])
        assert torch.equal(multi["cu_seqlens_k"][k], s["cu_seqlens_k"])
        assert torch.equal(multi["page_table"][k], s["page_table"])
        if multi["swa_page_table"]:
            assert torch.equal(multi["swa_page_table"][k], s["swa_page_table"])


@pytest.mark.parametrize("tables", [0, 1, 2, 3])
@pytest.mark.parametrize("case", [FaCase(), FaCase(swa="v2p", full_v2p=True, zero_tail=True, page_size=1,
                                                   max_seq_pages=40)], ids=str)
def test_sets_without_sums_or_tables(case, tables, gen, device):
    """cu_seqlens_k=[] writes no sums; sets past len(page_table) get lengths only (and
    do not widen the gather). Each set equals the drop-in's call with its delta."""
    kw = decode_call(dataclasses.replace(case, delta=0), gen, device)
    deltas = [3, 1, 9] if tables else [2, 5]
    multi, singles = _multi_kwargs(kw, deltas)
    multi["cu_seqlens_k"] = []
    multi["page_table"] = multi["page_table"][:tables]
    if multi["swa_page_table"]:
        multi["swa_page_table"] = multi["swa_page_table"][:tables]
    multi["skip_page_table"] = tables == 0
    for s in singles:
        sgl_meta.normal_decode_set_metadata(**s)
    sgl_meta.update_flash_attention_metadata(**multi)
    for k, s in enumerate(singles):
        assert torch.equal(multi["cache_seqlens"][k], s["cache_seqlens_int32"]), k
    for k in range(tables):
        assert torch.equal(multi["page_table"][k], singles[k]["page_table"]), k
        if multi["swa_page_table"]:
            assert torch.equal(multi["swa_page_table"][k], singles[k]["swa_page_table"]), k
    ref = clone_call(multi)
    reference.update_flash_attention_metadata(**ref)
    for k in ("cache_seqlens", "page_table", "swa_page_table"):
        for a, b in zip(multi[k] or [], ref[k] or []):
            assert torch.equal(a, b), k


def test_sums_are_checked_only_where_written(gen):
    kw = decode_call(FaCase(bs=3, max_seq_pages=0), gen)
    kw["seq_lens"] = torch.full((3,), 2**30, dtype=torch.int64)  # each fits, the sum does not
    multi, _ = _multi_kwargs(kw, [0])
    with pytest.raises(RuntimeError, match=r"summed \(cu_seqlens_k\[2\]\) = 2147483648 does not fit int32"):
        sgl_meta.update_flash_attention_metadata(**multi)
    multi["cu_seqlens_k"] = []
    sgl_meta.update_flash_attention_metadata(**multi)
    assert (multi["cache_seqlens"][0] == 2**30).all()


@pytest.mark.parametrize("change, message", [
    ("cu_short", r"cu_seqlens_k must hold 2 tensors \(one per destination set, as cache_seqlens\) or none, got 1"),
    ("tables_long", r"page_table must hold at most 2 tensors .* got 3"),
    ("swa_short", r"swa_page_table must hold 2 tensors \(one per page_table\) or none, got 1"),
])
def test_list_lengths_are_checked(change, message, gen):
    kw = decode_call(FaCase(swa="mapping"), gen)
    multi, _ = _multi_kwargs(kw, [1, 2])
    if change == "cu_short":
        multi["cu_seqlens_k"] = multi["cu_seqlens_k"][:1]
    elif change == "tables_long":
        multi["page_table"] = multi["page_table"] + [multi["page_table"][0].clone()]
    else:
        multi["swa_page_table"] = multi["swa_page_table"][:1]
    with pytest.raises(RuntimeError, match=message):
        sgl_meta.update_flash_attention_metadata(**multi)


def test_multi_reference(gen):
    kw = decode_call(FaCase(swa="mapping", zero_tail=True), gen)
    multi, _ = _multi_kwargs(kw, [1, 2, 3])
    ref = clone_call(multi)
    sgl_meta.update_flash_attention_metadata(**multi)
    reference.update_flash_attention_metadata(**ref)
    for k in ("cache_seqlens", "cu_seqlens_k", "page_table", "swa_page_table"):
        for a, b in zip(multi[k], ref[k]):
            assert torch.equal(a, b), k


def test_multi_errors_name_the_set(gen):
    kw = decode_call(FaCase(), gen)
    multi, _ = _multi_kwargs(kw, [1, 2])
    multi["page_table"][1] = multi["page_table"][1][:, :3]
    with pytest.raises(RuntimeError, match=r"page_table\[1\].size\(1\) must be >= max_seq_pages"):
        sgl_meta.update_flash_attention_metadata(**multi)
    multi, _ = _multi_kwargs(kw, [1, 2])
    multi["seq_len_delta"] = [1]
    with pytest.raises(RuntimeError, match="seq_len_delta must hold 2 values"):
        sgl_meta.update_flash_attention_metadata(**multi)


def test_bs_zero_is_a_noop(gen):
    kw = decode_call(FaCase(bs=0), gen)
    sgl_meta.normal_decode_set_metadata(**kw)
    assert (kw["cu_seqlens_k"] == POISON).all()


def test_opcheck_and_compile(gen):
    kw = decode_call(FaCase(swa="mapping", zero_tail=True), gen)
    multi, _ = _multi_kwargs(kw, [1, 2])
    args = [multi.get(a.name, a.default) for a in sgl_meta.update_flash_attention_metadata.op.args]
    args = [[] if v is None and a.kind == "Tensor[]" else v
            for a, v in zip(sgl_meta.update_flash_attention_metadata.op.args, args)]
    torch.library.opcheck(torch.ops.sgl_meta.update_flash_attention_metadata.default, args)
    spec = swa_spec_call(gen)
    torch.library.opcheck(torch.ops.sgl_meta.flash_attention_swa_spec_page_table.default, list(spec.values()))

    kw = decode_call(FaCase(swa="mapping"), gen)
    want = run(reference.normal_decode_set_metadata, kw)

    @torch.compile(fullgraph=True, backend="eager")
    def step(k):
        sgl_meta.normal_decode_set_metadata(**k)

    got = clone_call(kw)
    step(got)
    assert_equal(outputs(got), want, "compiled")


# --- GPU: CUDA vs CPU, CUDA-graph replays with new values ---------------------------
def assert_cuda_equals_cpu(fn, kw: dict, context: str) -> None:
    assert_equal(run(fn, on_cuda(kw)), run(fn, kw), context)


@pytest.mark.gpu
@pytest.mark.parametrize("case", DECODE_CASES, ids=str)
def test_decode_cuda_equals_cpu(case, gen):
    kw = decode_call(case, gen)
    assert_cuda_equals_cpu(sgl_meta.normal_decode_set_metadata, kw, str(case))


@pytest.mark.gpu
@pytest.mark.parametrize("case", DRAFT_EXTEND_CASES, ids=str)
def test_draft_extend_cuda_equals_cpu(case, gen):
    kw = draft_extend_call(case, gen)
    assert_cuda_equals_cpu(sgl_meta.draft_extend_set_metadata, kw, str(case))


@pytest.mark.gpu
@pytest.mark.parametrize("shape", SPEC_CASES + [dict(consistent=False, dst_width=60)], ids=str)
def test_swa_spec_cuda_equals_cpu(shape, gen):
    kw = swa_spec_call(gen, **shape)
    assert_cuda_equals_cpu(sgl_meta.prepare_swa_spec_page_table_triton, kw, str(shape))


def assert_multi_replays(make, deltas, replays: int) -> None:
    """The K-set call captured once on the GPU, then replayed after every input is
    refilled from a fresh ``make()`` and the outputs are poisoned: each replay equals
    the CPU call on the fresh values."""
    static, _ = _multi_kwargs(on_cuda(make()), deltas)
    graph = capture_cuda_graph(lambda: sgl_meta.update_flash_attention_metadata(**static))
    for _ in range(replays):
        fresh = make()
        for k in ("req_to_token", "req_pool_indices", "seq_lens", "full_to_swa_index_mapping", "full_v2p",
                  "swa_v2p"):
            if static.get(k) is not None:
                static[k].copy_(fresh[k])
        for k in ("cache_seqlens", "cu_seqlens_k", "page_table", "swa_page_table"):
            for t in static[k] or []:
                t.fill_(POISON)
        want, _ = _multi_kwargs(fresh, deltas)
        sgl_meta.update_flash_attention_metadata(**want)
        graph.replay()
        torch.cuda.synchronize()
        for k in ("cache_seqlens", "cu_seqlens_k", "page_table", "swa_page_table"):
            for a, b in zip(static[k] or [], want[k] or []):
                assert torch.equal(a.cpu(), b), k


# Past 4,096 page blocks (bs x 128-column chunks) the kernel gives each row G =
# min(4096 // bs, ceil(chunks / 4)) blocks (at least 1) that loop over its chunks, four
# at a time (page size 1 at a 128k static width): cases on both sides of that bound, a
# partial last chunk, G = 1, blocks with more than four chunks (every one of the four,
# then the loop's next turn), and every translation.
WIDE_CASES = [
    FaCase(bs=32, page_size=1, max_seq_pages=16384, pool=33),  # 4,096 blocks: one per chunk
    FaCase(bs=33, page_size=1, max_seq_pages=16384, pool=34, delta=1),  # 4,224: G = 32, 4 chunks each
    FaCase(bs=129, page_size=1, max_seq_pages=16300, pool=130, index_dtype=torch.int64),
    FaCase(bs=20000, page_size=16, max_seq_pages=200, pool=64),  # G = 1: each row one block
    FaCase(bs=2000, page_size=1, max_seq_pages=1500, pool=64),  # G = 2, 12 chunks: 6 per block
    FaCase(bs=640, page_size=1, max_seq_pages=16300, pool=64, delta=2),  # G = 6, 128 chunks: 21-22 per block
    FaCase(bs=200, page_size=1, max_seq_pages=12000, pool=201, swa="mapping", zero_tail=True,
           negative_slots=True),
    FaCase(bs=150, page_size=2, max_seq_pages=15000, pool=151, full_v2p=True, swa="v2p", zero_tail=True,
           negative_slots=True),
]


@pytest.mark.gpu
@pytest.mark.parametrize("skewed", [False, True], ids=["uniform", "skewed"])
@pytest.mark.parametrize("case", WIDE_CASES, ids=str)
def test_decode_cuda_equals_cpu_wide_grids(case, skewed, gen):
    kw = decode_call(case, gen)
    if skewed:
        kw = skew_lengths(kw, gen)
    assert_cuda_equals_cpu(sgl_meta.normal_decode_set_metadata, kw, f"{case}, skewed={skewed}")


@pytest.mark.gpu
@pytest.mark.parametrize("case", [WIDE_CASES[i] for i in (1, 5, 6, 7)], ids=str)
def test_multi_wide_grids(case, gen):
    """Several sets through the looping blocks, each set's own live columns; in a
    CUDA graph whose replays see new lengths."""
    assert_multi_replays(lambda: skew_lengths(decode_call(dataclasses.replace(case, delta=0), gen), gen), [0, 1, 3],
                         replays=2)


@pytest.mark.gpu
@pytest.mark.parametrize("tables", [0, 3, 10])
def test_multi_wide_grids_lengths_only_sets(tables, gen):
    """Ten sets (two launches) at a wide grid, the sets past `tables` lengths only, no
    sums: CUDA equals the CPU kernel (no tables at all: no page blocks, the scans only)."""
    case = WIDE_CASES[5]
    kw = skew_lengths(decode_call(dataclasses.replace(case, delta=0), gen), gen)
    multi, _ = _multi_kwargs(kw, list(range(10)))
    multi.update(cu_seqlens_k=[], page_table=multi["page_table"][:tables], skip_page_table=tables == 0)
    cpu = clone_call(multi)
    sgl_meta.update_flash_attention_metadata(**cpu)
    gpu = on_cuda(multi)
    sgl_meta.update_flash_attention_metadata(**gpu)
    for k in ("cache_seqlens", "page_table"):
        assert len(cpu[k]) == len(gpu[k])
        for a, b in zip(gpu[k], cpu[k]):
            assert torch.equal(a.cpu(), b), k


def _refill(dst: dict, src: dict) -> None:
    for k, v in src.items():
        if isinstance(v, torch.Tensor):
            dst[k].copy_(v)


@pytest.mark.gpu
@pytest.mark.parametrize("name, make, case", [
    ("normal_decode_set_metadata", decode_call, FaCase(swa="mapping", delta=3)),
    ("normal_decode_set_metadata", decode_call, FaCase(full_v2p=True, swa="v2p", zero_tail=True, delta=1)),
    ("draft_extend_set_metadata", draft_extend_call, FaCase(swa="mapping", tokens_per_req=3)),
], ids=["decode-mapping", "decode-v2p", "draft-extend"])
def test_graph_replay_sees_new_values(name, make, case, gen):
    """Capture once, then replay after rewriting every input and poisoning the outputs:
    each replay equals a fresh CPU call on the same values."""
    fn = getattr(sgl_meta, name)
    static = on_cuda(make(case, gen))
    graph = capture_cuda_graph(lambda: fn(**static))
    for _ in range(3):
        fresh = make(case, gen)
        _refill(static, fresh)
        graph.replay()
        torch.cuda.synchronize()
        assert_equal(outputs(static), run(fn, fresh), f"replay, {case}")


@pytest.mark.gpu
def test_graph_replay_multi_step_draft(gen):
    """The K draft steps in one recorded launch: replays see new lengths and tables."""
    case = FaCase(swa="mapping", page_size=16)
    assert_multi_replays(lambda: decode_call(case, gen), [1, 2, 3], replays=3)


# --- the unified pool's decode table: lengths from the drop-in, the table through v2p ---


def _unified_batch(page_size: int, device: str):
    """Five requests (lengths P, P + 1, 3P, 7P - 3, 1), each on its own run of eight
    shuffled virtual pages, and a virtual -> physical permutation (page 0 the sink)."""
    g = torch.Generator().manual_seed(97 + page_size)
    bs, ctx, vpages = 5, 8 * page_size, 512
    lens = torch.tensor([page_size, page_size + 1, 3 * page_size, 7 * page_size - 3, 1])
    pages = torch.randperm(vpages - 1, generator=g)[: bs * 8].view(bs, 8) + 1
    tokens = (pages[:, :, None] * page_size + torch.arange(page_size)).reshape(bs, ctx)
    r2t = torch.where(torch.arange(ctx)[None, :] < lens[:, None], tokens, torch.zeros_like(tokens))
    v2p = torch.randperm(vpages, generator=g)
    v2p[v2p == 0] = v2p[0].item()
    v2p[0] = 0
    return on_device(dict(req_to_token=r2t.to(torch.int32), req_pool_indices=torch.arange(bs), seq_lens=lens,
                          v2p=v2p), device)


@pytest.mark.parametrize("page_size", [1, 64])
def test_decode_lengths_then_read_table_through_v2p(page_size, gen, device):
    """normal_decode_set_metadata(skip_page_table=True) writes the lengths and their sum
    only; build_kv_read_table, bounded by the lengths just written, fills the decode table
    with v2p[slot // P] over each row's live pages (the rest keeps its values); the same
    call with full_v2p writes that table itself; without v2p the table is slot // P."""
    b = _unified_batch(page_size, device)
    bs, max_pages = 5, 8
    r2t, rpi, lens, v2p = b["req_to_token"], b["req_pool_indices"], b["seq_lens"], b["v2p"]
    live = [-(-int(n) // page_size) for n in lens.tolist()]
    first = r2t.cpu()[:, ::page_size].long()
    physical = v2p.cpu()[torch.div(first, page_size, rounding_mode="floor")]
    virtual = torch.div(first, page_size, rounding_mode="floor")
    assert not all(torch.equal(physical[r, :n], virtual[r, :n]) for r, n in enumerate(live))

    def outputs():
        i32 = dict(dtype=torch.int32, device=r2t.device)
        return (torch.full((bs,), POISON, **i32), torch.full((bs + 1,), POISON, **i32),
                poison_(torch.empty((bs, max_pages + 2), **i32), gen))

    def check_table(table, before, want, what):
        table, before = table.cpu(), before.cpu()
        for r, n in enumerate(live):
            assert table[r, :n].tolist() == want[r, :n].tolist(), f"{what}: row {r}"
            assert torch.equal(table[r, n:], before[r, n:]), f"{what}: row {r} written past its live pages"

    cache, cu, table = outputs()
    before = table.clone()
    sgl_meta.normal_decode_set_metadata(cache, cu, table, r2t, rpi, max_pages, lens, 0, page_size,
                                        skip_page_table=True)
    assert cache.cpu().tolist() == lens.tolist()
    assert cu.cpu().tolist() == [0] + lens.cumsum(0).tolist()
    assert torch.equal(table.cpu(), before.cpu()), "skip_page_table wrote the table"
    sgl_meta.build_kv_read_table(req_to_token=r2t, req_pool_indices=rpi, seq_lens=cache, v2p=v2p,
                                 page_size=page_size, max_pages=max_pages, out=table)
    check_table(table, before, physical, "read table")

    for v2p_arg, want, what in ((v2p, physical, "full_v2p"), (None, virtual, "static")):
        cache, cu, table = outputs()
        before = table.clone()
        sgl_meta.normal_decode_set_metadata(cache, cu, table, r2t, rpi, max_pages, lens, 0, page_size,
                                            full_v2p=v2p_arg)
        assert cache.cpu().tolist() == lens.tolist()
        check_table(table, before, want, what)
