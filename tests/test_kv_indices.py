"""build_kv_indices and the function forms create_flashinfer_kv_indices /
create_flashmla_kv_indices: the op (CPU and CUDA) vs the eager reference vs the
contract in plain Python, and (in a TRITON_INTERPRET=1 child) vs SGLang
0.5.23's own Triton kernels launched as its callers launch them."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

import sgl_meta
from sgl_meta import reference
from helpers import TEST_CUDA, assert_same, capture_cuda_graph, interpreter_child, on_cuda
from kv_indices_cases import OUTPUTS, Case, clone_outputs, formula, make

HERE = Path(__file__).resolve().parent

CASES = {
    "verbatim": Case(),
    "verbatim_int64": Case(index64=True, out64=True),
    "start_and_gaps": Case(kv_start=True, gaps=True),
    "pages_of_16": Case(entry_page_size=16, width=20, kv_start=True),
    "pages_of_3": Case(entry_page_size=3, width=50, kv_start=True, out64=True),
    "token_mapping": Case(token_mapping=True, kv_start=True),
    "token_mapping_pages": Case(token_mapping=True, entry_page_size=4, width=40),
    "v2p": Case(v2p_page=16, kv_start=True),
    "v2p_page_1": Case(v2p_page=1, out64=True),
    "v2p_page_5": Case(v2p_page=5, kv_start=True),
    "write_indptr": Case(write_indptr=True),
    "write_indptr_int64": Case(write_indptr=True, index64=True, kv_start=True),
    "write_indptr_pages": Case(write_indptr=True, entry_page_size=64, width=8),
    "write_indptr_v2p": Case(write_indptr=True, v2p_page=64, width=700),
    "splits": Case(write_indptr=True, splits=True, zero_lens=False),
    "splits_many_rows": Case(bs=300, pool=400, width=64, write_indptr=True, splits=True, zero_lens=False),
    "splits_read_indptr": Case(splits=True, zero_lens=False, gaps=True),
    "one_row": Case(bs=1, write_indptr=True, splits=True, zero_lens=False),
    "many_rows": Case(bs=700, pool=800, width=33, write_indptr=True),
    "verify": Case(write_indptr=True, verify=True),
    "verify_int64_splits": Case(write_indptr=True, verify=True, index64=True, splits=True, zero_lens=False),
    "verify_many_rows": Case(bs=700, pool=800, width=33, write_indptr=True, verify=True),
    "verify_qo_read_indptr": Case(verify=True, gaps=True),
    "draft_extend": Case(write_indptr=True, verify=True, extend=True),
    "draft_extend_int64_splits": Case(write_indptr=True, splits=True, extend=True, index64=True, zero_lens=False),
    "extend_read_indptr": Case(extend=True, gaps=True, kv_start=True),
    "sliding_window": Case(write_indptr=True, splits=True, window=True, zero_lens=False),
    "sliding_window_mapping": Case(write_indptr=True, token_mapping=True, window=True, out64=True),
    "sliding_window_start_read_indptr": Case(window=True, kv_start=True, gaps=True),
    "sliding_window_extend": Case(write_indptr=True, extend=True, window=True, verify=True),
    "sliding_window_v2p": Case(write_indptr=True, v2p_page=16, window=True, index64=True),
    "sliding_window_many_rows": Case(bs=700, pool=800, width=33, write_indptr=True, splits=True, window=True),
    "sliding_window_offsets": Case(write_indptr=True, window=True, offsets=True, kv_start=True),
    "sliding_window_offsets_verify": Case(write_indptr=True, window=True, offsets=True, verify=True, index64=True),
    "offsets_without_window": Case(offsets=True, kv_start=True, gaps=True),
}


def run(fn, kw: dict) -> dict:
    kw = clone_outputs(kw)
    fn(**kw)
    return kw


def assert_outputs_equal(got: dict, want: dict, context: str) -> None:
    assert_same(got, {k: want[k] for k in OUTPUTS if want.get(k) is not None}, context)


@pytest.mark.parametrize("name", sorted(CASES))
def test_op_vs_reference_vs_contract(name, gen, device):
    kw = make(CASES[name], gen, device)
    before = {k: v.clone() for k, v in kw.items() if isinstance(v, torch.Tensor) and k not in OUTPUTS}
    got = run(sgl_meta.build_kv_indices, kw)
    assert_outputs_equal(got, run(reference.build_kv_indices, kw), f"op vs reference, {name}")
    if CASES[name].bs * CASES[name].width * CASES[name].entry_page_size <= 200_000:
        assert_outputs_equal(got, formula(kw), f"op vs the contract, {name}")
    for k, v in before.items():
        assert torch.equal(kw[k], v), f"input {k} changed"


@pytest.mark.parametrize("seed", range(6))
def test_random_cases(seed, gen, device):
    rnd = torch.Generator().manual_seed(seed)

    def pick(*options):
        return options[int(torch.randint(0, len(options), (1,), generator=rnd))]

    for _ in range(8):
        v2p = pick(0, 0, 1, 16, 7)
        E = 1 if v2p else pick(1, 2, 16, 64)
        write = pick(False, True)
        case = Case(bs=pick(1, 2, 9, 40), pool=50, width=pick(10, 70, 300), entry_page_size=E,
                    kv_start=pick(False, True), token_mapping=not v2p and pick(False, True), v2p_page=v2p,
                    write_indptr=write, splits=pick(False, True), index64=pick(False, True),
                    out64=pick(False, True), gaps=not write and pick(False, True), zero_lens=pick(False, True),
                    verify=pick(False, True), extend=pick(False, True), window=pick(False, True),
                    offsets=pick(False, True))
        kw = make(case, gen, device)
        got = run(sgl_meta.build_kv_indices, kw)
        assert_outputs_equal(got, run(reference.build_kv_indices, kw), f"op vs reference, {case}")
        assert_outputs_equal(got, formula(kw), f"op vs the contract, {case}")


def test_bs_zero_writes_nothing(gen, device):
    kw = make(Case(write_indptr=True, splits=True, verify=True, window=True, offsets=True), gen, device)
    kw["req_pool_indices"] = kw["req_pool_indices"][:0]
    got = run(sgl_meta.build_kv_indices, kw)
    for k in OUTPUTS:
        assert torch.equal(got[k], kw[k]), k


def test_zero_lengths_count_as_one_in_the_splits(device):
    r2t = torch.arange(3 * 8, dtype=torch.int32, device=device).view(3, 8)
    kw = dict(req_to_token=r2t, req_pool_indices=torch.tensor([0, 1, 2], device=device),
              seq_lens=torch.tensor([0, 0, 0], device=device), kv_indptr=torch.zeros(4, dtype=torch.int32, device=device),
              kv_indices=torch.zeros(1, dtype=torch.int32, device=device), write_indptr=True,
              num_kv_splits=torch.full((3,), 7, dtype=torch.int32, device=device),
              uneven_batch=torch.full((1,), 7, dtype=torch.int32, device=device), max_kv_splits=8,
              device_core_count=132)
    got = run(sgl_meta.build_kv_indices, kw)
    assert got["num_kv_splits"].tolist() == [0, 0, 0] and got["uneven_batch"].tolist() == [0]
    assert got["kv_indptr"].tolist() == [0, 0, 0, 0]
    assert_outputs_equal(got, run(reference.build_kv_indices, kw), "zero lengths")


def test_split_counts_round_the_core_estimate_in_float32(device):
    """get_num_kv_splits_triton scales the core count by log2(max / 64) in float32; here float64
    would round the other way (26 splits instead of 27)."""
    n = 741455
    kw = dict(req_to_token=torch.arange(n, dtype=torch.int32, device=device).view(1, n),
              req_pool_indices=torch.tensor([0], device=device), seq_lens=torch.tensor([n], device=device),
              kv_indptr=torch.zeros(2, dtype=torch.int32, device=device),
              kv_indices=torch.zeros(n, dtype=torch.int32, device=device), write_indptr=True,
              num_kv_splits=torch.zeros(1, dtype=torch.int32, device=device),
              uneven_batch=torch.zeros(1, dtype=torch.int32, device=device), num_head=1, num_kv_head=1,
              max_kv_splits=64, device_core_count=2)
    for fn in (sgl_meta.build_kv_indices, reference.build_kv_indices):
        assert run(fn, kw)["num_kv_splits"].tolist() == [27], fn


def test_create_flashinfer_kv_indices_is_the_op_reading_indptr(gen, device):
    for case in (Case(kv_start=True, gaps=True), Case(entry_page_size=8, width=30, token_mapping=True)):
        kw = make(case, gen, device)
        args = (kw["req_to_token"], kw["req_pool_indices"], kw["seq_lens"], kw["kv_indptr"], kw["kv_start_idx"])
        got = kw["kv_indices"].clone()
        sgl_meta.create_flashinfer_kv_indices(*args, got, case.entry_page_size, kw.get("token_mapping"))
        want = kw["kv_indices"].clone()
        reference.create_flashinfer_kv_indices(*args, want, case.entry_page_size, kw.get("token_mapping"))
        assert torch.equal(got, want)
        assert torch.equal(got.cpu(), formula(kw)["kv_indices"])


def test_create_flashinfer_kv_indices_errors_name_it(device):
    r2t = torch.zeros(2, 8, dtype=torch.int32, device=device)
    idx = torch.tensor([0, 1], device=device)
    with pytest.raises(RuntimeError, match=r"sgl_meta\.create_flashinfer_kv_indices: page_kernel_lens\.size\(0\)"):
        sgl_meta.create_flashinfer_kv_indices(r2t, idx, torch.tensor([1], device=device),
                                              torch.zeros(3, dtype=torch.int32, device=device), None,
                                              torch.zeros(8, dtype=torch.int32, device=device))
    if device != "cpu":
        return  # values read on the device: a named device assert there (the hostile rows' child process)
    with pytest.raises(RuntimeError, match=r"create_flashinfer_kv_indices: row 1 holds 5 tokens"):
        sgl_meta.create_flashinfer_kv_indices(r2t, idx, torch.tensor([1, 5], device=device),
                                              torch.tensor([0, 1, 3], dtype=torch.int32, device=device), None,
                                              torch.zeros(8, dtype=torch.int32, device=device))


@pytest.mark.parametrize("page_size", [1, 16, 64, 3])
@pytest.mark.parametrize("start", [False, True])
def test_create_flashmla_kv_indices(page_size, start, gen, device):
    pool, pages = 7, 9
    row = pages * page_size + 5
    r2t = torch.randint(-1, 2**31 - 1, (pool, row), generator=gen, dtype=torch.int64).to(torch.int32).to(device)
    bs = 5
    req = torch.randperm(pool, generator=gen)[:bs].to(device)
    kv_start = torch.randint(0, 5, (bs,), generator=gen).to(device) if start else None
    lens = torch.randint(0, pages * page_size + 1, (bs,), generator=gen).to(device)
    table = torch.randint(-99, 99, (bs + 2, pages + 3), generator=gen, dtype=torch.int64).to(torch.int32).to(device)
    got, want = table.clone(), table.clone()
    sgl_meta.create_flashmla_kv_indices(r2t, req, lens, kv_start, got, page_size)
    reference.create_flashmla_kv_indices(r2t, req, lens, kv_start, want, page_size)
    assert torch.equal(got, want)
    # the contract, element by element (upstream's kernel on its defined inputs)
    expect = table.clone().cpu()
    for i in range(bs):
        s = 0 if kv_start is None else int(kv_start[i])
        for p in range(-(-int(lens[i]) // page_size)):
            slot = int(r2t[int(req[i]), s + p * page_size])
            expect[i, p] = 0 if slot < 0 else slot // page_size
    assert torch.equal(got.cpu(), expect)


def test_create_flashmla_kv_indices_errors_name_it(device):
    r2t = torch.zeros(2, 128, dtype=torch.int32, device=device)
    idx = torch.tensor([0, 1], device=device)
    out = torch.zeros(2, 2, dtype=torch.int32, device=device)
    if device == "cpu":  # a length is read on the device: a named device assert on CUDA (hostile rows)
        with pytest.raises(RuntimeError, match=r"sgl_meta\.create_flashmla_kv_indices: page_kernel_lens\[1\] = -3"):
            sgl_meta.create_flashmla_kv_indices(r2t, idx, torch.tensor([1, -3], device=device), None, out)
    with pytest.raises(RuntimeError, match=r"sgl_meta\.create_flashmla_kv_indices: kv_indices must have dtype int32"):
        sgl_meta.create_flashmla_kv_indices(r2t, idx, torch.tensor([1, 3], device=device), None, out.long())
    with pytest.raises(TypeError, match=r"sgl_meta\.create_flashmla_kv_indices: page_size must be an int"):
        sgl_meta.create_flashmla_kv_indices(r2t, idx, torch.tensor([1, 3], device=device), None, out, 64.0)


@pytest.mark.parametrize("what,match", [
    ("req", r"req_pool_indices\[1\] = 9 is outside"),
    ("len", r"seq_lens\[0\] = -1 is negative"),
    ("extend", r"extend_seq_lens\[1\] = -3 is negative"),
    ("sum", r"the running sum of seq_lens\[0\.\.1\] = 4294967294 does not fit kv_indptr \(int32\)"),
    ("indptr", r"row 1 holds 5 tokens but kv_indptr gives it \[2, 4\)"),
    ("v2p", r"reads virtual page 9, outside v2p"),
    ("mapping", r"id 16 is outside token_mapping"),
    ("fits", r"its id does not fit kv_indices \(int32\)"),
    ("mask", r"the running sum of q_stride \* \(seq_lens \+ q_stride\) over rows 0\.\.1 \(seq_lens summed: "
             r"1073741826, q_stride = 2\) does not fit mask_indptr \(int32\)"),
])
def test_hostile_values_raise_on_cpu_and_write_nothing(what, match):
    r2t = torch.arange(2 * 16, dtype=torch.int32).view(2, 16)
    kw = dict(req_to_token=r2t, req_pool_indices=torch.tensor([0, 9 if what == "req" else 1]),
              seq_lens=torch.tensor([-1 if what == "len" else 2, 5]),
              kv_indptr=torch.tensor([0, 2, 4 if what == "indptr" else 7], dtype=torch.int32),
              kv_indices=torch.full((12,), -7, dtype=torch.int32), write_indptr=what == "sum")
    if what == "sum":
        kw["seq_lens"] = torch.tensor([2**31 - 1, 2**31 - 1])
        kw["req_to_token"] = torch.zeros(2, 1, dtype=torch.int32)
    if what == "extend":
        kw.update(extend_seq_lens=torch.tensor([1, -3], dtype=torch.int32))
    if what == "v2p":
        kw.update(v2p=torch.arange(9), page_size=2)
    if what == "mapping":
        kw.update(token_mapping=torch.arange(7))
    if what == "fits":
        kw.update(token_mapping=torch.full((100,), 2**40))
    if what == "mask":  # q * (sum + 2q) = 2 * (2**30 + 2 + 4) passes int32; kv_indptr's sum fits
        kw.update(seq_lens=torch.tensor([2, 2**30]), req_to_token=torch.zeros(2, 1, dtype=torch.int32),
                  write_indptr=True, q_stride=2, mask_indptr=torch.full((3,), -7, dtype=torch.int32),
                  qo_indptr=torch.full((3,), -7, dtype=torch.int32))
    snapshot = {k: kw[k].clone() for k in ("kv_indptr", "kv_indices", "mask_indptr", "qo_indptr") if k in kw}
    with pytest.raises(RuntimeError, match=r"sgl_meta\.build_kv_indices: (row \d+, token \d+:? )?" + match):
        sgl_meta.build_kv_indices(**kw)
    for k, v in snapshot.items():
        assert torch.equal(kw[k], v), f"{k} written before the error"


@pytest.mark.parametrize("kw,match", [
    (dict(entry_page_size=0), r"entry_page_size = 0 is outside \[1, 2147483647\]"),
    (dict(entry_page_size=2, v2p=torch.arange(4)), "entry_page_size must be 1 with v2p"),
    (dict(v2p=torch.arange(4), token_mapping=torch.arange(4)), "token_mapping and v2p cannot be given together"),
    (dict(uneven_batch=torch.zeros(1, dtype=torch.int32)), "uneven_batch needs num_kv_splits"),
    (dict(num_head=4, num_kv_head=8), "num_kv_head = 8 is outside"),
    (dict(max_kv_splits=0), "max_kv_splits = 0 is outside"),
    (dict(num_kv_splits=torch.zeros(3, dtype=torch.int32), num_group=2), r"num_kv_splits\.size\(0\) must be >= "),
    (dict(kv_indptr=torch.zeros(2, dtype=torch.int32)), r"kv_indptr\.size\(0\) must be >= "),
    (dict(extend_seq_lens=torch.zeros(1, dtype=torch.int32)), r"extend_seq_lens\.size\(0\) must be >= "),
    (dict(extend_seq_lens=torch.zeros(2, dtype=torch.float32)), r"extend_seq_lens must have dtype int32 or int64"),
    (dict(mask_indptr=torch.zeros(3, dtype=torch.int64), write_indptr=False), "mask_indptr needs write_indptr"),
    (dict(qo_indptr=torch.zeros(2, dtype=torch.int64), q_stride=1), r"qo_indptr\.size\(0\) must be >= "),
    (dict(mask_indptr=torch.zeros(3, dtype=torch.float32)), r"mask_indptr must have dtype int32 or int64"),
    (dict(q_stride=-1), "q_stride = -1 is outside"),
    (dict(qo_indptr=torch.zeros(3, dtype=torch.int64)), "q_stride must be >= 1 with qo_indptr or mask_indptr, got 0"),
    (dict(q_stride=2**30 + 1, qo_indptr=torch.zeros(3, dtype=torch.int64)),
     r"req_pool_indices\.numel\(\) \* q_stride = 2 \* 1073741825 does not fit int32"),
])
def test_host_checks(kw, match):
    base = dict(req_to_token=torch.zeros(4, 8, dtype=torch.int32), req_pool_indices=torch.tensor([0, 1]),
                seq_lens=torch.tensor([1, 1]), kv_indptr=torch.zeros(3, dtype=torch.int32),
                kv_indices=torch.zeros(4, dtype=torch.int32), write_indptr=True)
    with pytest.raises(RuntimeError, match=match):
        sgl_meta.build_kv_indices(**{**base, **kw})


def test_outputs_may_not_alias_inputs():
    r2t = torch.zeros(4, 8, dtype=torch.int32)
    with pytest.raises(RuntimeError, match="kv_indptr .written. and seq_lens .read. overlap"):
        buf = torch.zeros(5, dtype=torch.int32)
        sgl_meta.build_kv_indices(req_to_token=r2t, req_pool_indices=torch.tensor([0, 1]), seq_lens=buf[:2],
                                  kv_indptr=buf[1:4], kv_indices=torch.zeros(4, dtype=torch.int32), write_indptr=True)


def test_opcheck_and_compile():
    kw = make(Case(write_indptr=True, splits=True, zero_lens=False, verify=True), torch.Generator().manual_seed(3), "cpu")
    op = torch.ops.sgl_meta.build_kv_indices.default
    torch.library.opcheck(op, (), {k: v for k, v in clone_outputs(kw).items()})
    want = run(reference.build_kv_indices, kw)
    got = clone_outputs(kw)

    @torch.compile(fullgraph=True, backend="eager")
    def step(**t):
        sgl_meta.build_kv_indices(**t)

    step(**got)
    assert_outputs_equal(got, want, "torch.compile")


def _upstream_site():
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        return None
    site = Path(spec.submodule_search_locations[0]).parent
    if not (site / "sglang/kernels/ops/attention/kv_indices.py").is_file():
        return None
    return site


def test_equals_sglang_triton_kernels_in_the_interpreter():
    """SGLang 0.5.23's own kernels (TRITON_INTERPRET=1, CPU), launched as its
    callers launch them, on the same poisoned buffers as ours."""
    site = _upstream_site()
    if site is None or importlib.util.find_spec("triton") is None:
        pytest.skip("needs the installed sglang 0.5.23 and triton")
    seed = int(os.environ.get("SGLMETA_TEST_SEED", "0")) or 12345
    assert "ok 25" in interpreter_child("kv_indices_upstream_child.py", str(seed), "25", str(site))


# ---- GPU ----------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(CASES))
def test_cuda_vs_cpu(name, gen):
    kw = make(CASES[name], gen, "cpu")
    cpu = run(sgl_meta.build_kv_indices, kw)
    assert_outputs_equal(run(sgl_meta.build_kv_indices, on_cuda(kw)), cpu, f"CUDA vs CPU, {name}")


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["write_indptr", "splits", "v2p", "pages_of_16", "token_mapping",
                                  "draft_extend_int64_splits"])
def test_cuda_graph_replays_with_new_lengths(name, gen):
    case = CASES[name]
    kw = make(case, gen, TEST_CUDA)
    # kv_indices sized for any lengths a fresh case may draw (each case sizes its own to its lengths).
    positions = case.width if case.v2p_page else case.width * case.entry_page_size
    big = torch.full((case.bs * (positions + 7) + 11,), -7, dtype=kw["kv_indices"].dtype, device=TEST_CUDA)
    big[: kw["kv_indices"].numel()].copy_(kw["kv_indices"])
    kw["kv_indices"] = big
    live = clone_outputs(kw)
    graph = capture_cuda_graph(lambda: sgl_meta.build_kv_indices(**live))
    for _ in range(3):
        fresh = make(case, gen, "cpu")
        for k in ("seq_lens", "req_pool_indices", "req_to_token", "kv_start_idx", "kv_indptr", "extend_seq_lens"):
            if live.get(k) is not None and (k != "kv_indptr" or not case.write_indptr):
                live[k].copy_(fresh[k])
        for k in OUTPUTS:  # poisoned again (the captured scalars, e.g. num_group, stay)
            if live.get(k) is not None and (k != "kv_indptr" or case.write_indptr):
                live[k].fill_(-7)
        want = run(reference.build_kv_indices, {k: (v.cpu() if isinstance(v, torch.Tensor) else v)
                                                for k, v in live.items()})
        graph.replay()
        torch.cuda.synchronize()
        assert_outputs_equal(live, want, f"graph replay, {name}")


@pytest.mark.gpu
def test_cuda_flashmla_function_form(gen):
    r2t = torch.randint(0, 2**31 - 1, (9, 64 * 40), generator=gen).to(torch.int32)
    req = torch.randperm(9, generator=gen)[:6]
    lens = torch.randint(0, 64 * 40, (6,), generator=gen)
    table = torch.full((8, 40), -3, dtype=torch.int32)
    want = table.clone()
    sgl_meta.create_flashmla_kv_indices(r2t, req, lens, None, want)
    got = table.to(TEST_CUDA)
    sgl_meta.create_flashmla_kv_indices(r2t.to(TEST_CUDA), req.to(TEST_CUDA), lens.to(TEST_CUDA), None, got)
    assert torch.equal(got.cpu(), want)


@pytest.mark.gpu
@pytest.mark.parametrize("what", ["req_pool_indices", "seq_lens", "kv_indptr", "token_mapping", "extend_seq_lens"])
def test_hostile_values_trip_device_assert(what):
    """In a child process: a device assert poisons the CUDA context."""
    script = textwrap.dedent(
        f"""
        import torch, sgl_meta
        what = "{what}"
        r2t = torch.arange(4 * 64, dtype=torch.int32, device="cuda").view(4, 64)
        idx = torch.tensor([1, 4 if what == "req_pool_indices" else 2], device="cuda")
        lens = torch.tensor([3, -2 if what == "seq_lens" else 33], dtype=torch.int32, device="cuda")
        indptr = torch.tensor([0, 3, 20 if what == "kv_indptr" else 36], dtype=torch.int32, device="cuda")
        mapping = torch.arange(10 if what == "token_mapping" else 1000, device="cuda")
        out = torch.zeros(100, dtype=torch.int32, device="cuda")
        ext = torch.tensor([0, -5], device="cuda") if what == "extend_seq_lens" else None
        sgl_meta.build_kv_indices(req_to_token=r2t, req_pool_indices=idx, seq_lens=lens, kv_indptr=indptr,
                                  kv_indices=out, write_indptr=False, token_mapping=mapping, extend_seq_lens=ext)
        torch.cuda.synchronize()
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0, out
    assert "sgl_meta: build_kv_indices" in out, out
    if what == "extend_seq_lens":
        assert "extend_seq_lens[1] = -5 is negative" in out, out


@pytest.mark.parametrize("batch", [1, 37, 1786])
def test_create_flashinfer_kv_indices_wide_pool(batch, gen, device):
    """A 4096 x 4096 pool of consecutive slots, `batch` distinct requests of distinct
    lengths below 4096 (row lengths summing to millions at 1786 rows): the indices are
    the rows' prefixes back to back, and nothing past the last one is written."""
    pool = ctx = 4096
    r2t = torch.arange(pool * ctx, dtype=torch.int32).view(pool, ctx)
    rows = torch.randperm(pool, generator=gen)[:batch]
    lens = torch.randperm(ctx, generator=gen)[:batch]
    indptr = torch.zeros(batch + 1, dtype=torch.int64)
    indptr[1:] = lens.cumsum(0)
    total = int(indptr[-1])
    want = torch.cat([r2t[r, :n] for r, n in zip(rows.tolist(), lens.tolist())])
    got = torch.full((total + 5,), -3, dtype=torch.int32, device=device)
    sgl_meta.create_flashinfer_kv_indices(r2t.to(device), rows.to(torch.int32).to(device),
                                          lens.to(torch.int32).to(device), indptr.to(torch.int32).to(device), None,
                                          got, 1, None)
    got = got.cpu()
    assert torch.equal(got[:total], want)
    assert (got[total:] == -3).all()
