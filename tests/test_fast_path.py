"""The eager fast path (sgl_meta/_fast.py): when it runs, when it hands the call
to torch.ops, and that both give the same writes (the op tests run every case
through both paths via the ``call_path`` fixture; this file tests the routing,
on the DSA copy, the op with the most arguments)."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest
import torch
from torch.fx.experimental.proxy_tensor import make_fx
from torch.utils._python_dispatch import TorchDispatchMode

import sgl_meta
from sgl_meta import _fast, _op
from dsa_metadata_copy_cases import DsaCase, make_case
from helpers import bits

pytestmark = pytest.mark.skipif(not _fast.available, reason="this torch has no DLPack C exchange API")

ENTRY = "sgl_meta_fast_fused_metadata_copy"
NAMES = list(inspect.signature(sgl_meta.fused_metadata_copy_cuda).parameters)


def positional(gen, device="cpu", **case):
    src, dsts, sc = make_case(DsaCase(**case), gen, device)
    kw = {**src, **dsts[0], **sc}
    optional_ints = ("max_len", "max_seqlen_k", "seqlens_expanded_size")
    return [-1 if kw.get(n) is None and n in optional_ints else kw.get(n) for n in NAMES]


class Recorder:
    """Stands in for the torch.ops overload: records whether the call reached it."""

    def __init__(self, real):
        self.real, self.calls = real, 0

    def __call__(self, args):
        self.calls += 1
        self.real(*args)


@pytest.fixture
def routed():
    rec = Recorder(torch.ops.sgl_meta.fused_metadata_copy.default)
    return _fast.route(ENTRY, rec), rec


def test_plain_tensors_take_the_fast_path_and_write_what_torch_ops_writes(routed, gen):
    call, rec = routed
    args = positional(gen)
    want = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
    torch.ops.sgl_meta.fused_metadata_copy.default(*want)
    call(tuple(args))
    assert rec.calls == 0
    for got, ref, name in zip(args, want, NAMES):
        if isinstance(got, torch.Tensor):
            assert torch.equal(got, ref), name


@pytest.mark.parametrize(
    "change",
    ["subclass", "none_required", "float64_dtype", "bool_scalar", "numpy_scalar", "meta_device", "five_dims"],
)
def test_declined_calls_go_to_torch_ops(change, routed, gen):
    call, rec = routed
    args = positional(gen)
    i = NAMES.index("cache_seqlens_dst")
    if change == "subclass":
        args[i] = torch.nn.Parameter(args[i], requires_grad=False)
    elif change == "none_required":
        args[i] = None
    elif change == "float64_dtype":  # in no op's dtype sets
        args[i] = args[i].double()
    elif change == "bool_scalar":
        args[NAMES.index("forward_mode")] = False
    elif change == "numpy_scalar":
        import numpy as np

        args[NAMES.index("bs")] = np.int64(args[NAMES.index("bs")])
    elif change == "meta_device":
        args[i] = args[i].to("meta")
    elif change == "five_dims":
        args[NAMES.index("flashmla_metadata_src")] = args[NAMES.index("flashmla_metadata_src")].view(1, 1, 1, -1, 8)
        args[NAMES.index("flashmla_metadata_dst")] = args[NAMES.index("flashmla_metadata_dst")].view(1, 1, 1, -1, 8)
    try:
        call(tuple(args))
    except (RuntimeError, TypeError):
        pass  # what torch.ops says about it is the op tests' business
    assert rec.calls == 1


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
def test_floating_tensors_are_read_and_checked_by_the_op(dtype, routed, gen):
    """The floating dtypes an op description can name (hidden states) take the
    fast path: in an int32 slot the op's own dtype check answers."""
    call, rec = routed
    args = positional(gen)
    i = NAMES.index("cache_seqlens_dst")
    args[i] = args[i].to(dtype)
    with pytest.raises(RuntimeError, match=rf"cache_seqlens_dst must have dtype int32 \(torch.int32\), got {dtype}$"):
        call(tuple(args))
    assert rec.calls == 0


def test_check_failures_raise_the_ops_message(routed, gen):
    call, rec = routed
    args = positional(gen)
    args[NAMES.index("bs")] = -3
    with pytest.raises(RuntimeError, match=r"^sgl_meta\.fused_metadata_copy: bs must be >= 0, got -3$"):
        call(tuple(args))
    assert rec.calls == 0


class CountOps(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def test_dispatch_modes_see_the_op(gen):
    args = positional(gen)
    with CountOps() as mode:
        sgl_meta.fused_metadata_copy_cuda(*args)
    assert "sgl_meta.fused_metadata_copy.default" in mode.ops


def test_make_fx_traces_the_op(gen):
    args = positional(gen)
    graph = make_fx(lambda *a: sgl_meta.fused_metadata_copy_cuda(*a))(*args)
    assert "sgl_meta.fused_metadata_copy.default" in str(graph.graph)


def test_multi_takes_the_fast_path(gen):
    rec = Recorder(torch.ops.sgl_meta.fused_metadata_copy_multi.default)
    call = _fast.route("sgl_meta_fast_fused_metadata_copy_multi", rec)
    src, dsts, sc = make_case(DsaCase(sets=3), gen, "cpu")
    from dsa_metadata_copy_cases import multi_lists

    lists = multi_lists(dsts)
    args = [src.get(n) for n in (
        "cache_seqlens_src", "cu_seqlens_k_src", "page_indices_src", "dsa_cache_seqlens_src",
        "seqlens_expanded_src", "dsa_cu_seqlens_k_src", "real_page_table_src",
        "flashmla_num_splits_src", "flashmla_metadata_src")]
    args += [lists.get(n) or () for n in (
        "cache_seqlens_dst", "cu_seqlens_k_dst", "page_table_1_dst", "dsa_cache_seqlens_dst",
        "seqlens_expanded_dst", "dsa_cu_seqlens_k_dst", "real_page_table_dst",
        "flashmla_num_splits_dst", "flashmla_metadata_dst")]
    args += [sc["forward_mode"], sc["bs"]] + [
        -1 if sc.get(n) is None else sc[n] for n in ("max_len", "max_seqlen_k", "seqlens_expanded_size")]
    want = [[t.clone() for t in a] if isinstance(a, (list, tuple)) else a for a in args]
    torch.ops.sgl_meta.fused_metadata_copy_multi.default(*want)
    call(tuple(args))
    assert rec.calls == 0
    for got, ref in zip(args[9:18], want[9:18]):
        for g, r in zip(got, ref):
            assert torch.equal(g, r)


@pytest.mark.parametrize("name", sorted(_op.OPS))
def test_every_op_has_a_fast_entry(name):
    assert hasattr(_fast._lib, f"sgl_meta_fast_{name}")
    assert getattr(sgl_meta, name).__code__.co_names == ("_call",)  # the generated body: one routed call


def test_switched_off_by_environment():
    code = "import sgl_meta, sgl_meta._fast as f; print(f.available)"
    out = subprocess.run([sys.executable, "-c", code], env={"SGLMETA_FAST_PATH": "0", **_env()},
                         capture_output=True, text=True, check=True).stdout.strip()
    assert out == "False"


def _env():
    import os

    env = dict(os.environ)
    for name in ("SGLMETA_FAST_PATH", "SGL_META_FAST_PATH"):
        env.pop(name, None)
    return env


# ---- tensors DLPack describes without data ------------------------------------------


@pytest.mark.parametrize("where", ["cache_seqlens_src", "cache_seqlens_dst"])
def test_zero_tensor_goes_to_torch_ops(where, routed, gen):
    call, rec = routed
    args = positional(gen)
    i = NAMES.index(where)
    args[i] = torch._efficientzerotensor(args[i].shape, dtype=torch.int32)
    with pytest.raises(RuntimeError):
        call(tuple(args))  # torch.ops' own error, not a null-pointer read
    assert rec.calls == 1


def test_functionalize_goes_to_torch_ops(gen):
    args = positional(gen)
    i = NAMES.index("page_indices_src")

    def step(src):
        a = list(args)
        a[i] = src
        sgl_meta.fused_metadata_copy_cuda(*a)
        return src

    with pytest.raises(RuntimeError, match="alias annotations|mutat|custom"):
        torch.func.functionalize(step)(args[i])


def test_profiler_sees_the_op(gen):
    args = positional(gen)
    with torch.profiler.profile() as prof:
        sgl_meta.fused_metadata_copy_cuda(*args)
    assert any("fused_metadata_copy" in e.key for e in prof.key_averages())


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "dispatcher"])
def test_freed_storage_is_a_named_error(fast, gen, monkeypatch):
    monkeypatch.setattr(_fast, "enabled", fast)
    args = positional(gen)
    i = NAMES.index("page_indices_src")
    t = args[i].clone()
    t.untyped_storage().resize_(0)
    args[i] = t
    with pytest.raises(RuntimeError, match="page_indices_src has no data"):
        sgl_meta.fused_metadata_copy_cuda(*args)


@pytest.mark.parametrize("fast", [True, False], ids=["fast", "dispatcher"])
def test_overlap_error_names_the_pair_in_argument_order(fast, gen, monkeypatch):
    monkeypatch.setattr(_fast, "enabled", fast)
    from dsa_metadata_copy_cases import multi_lists

    src, dsts, sc = make_case(DsaCase(sets=2), gen, "cpu")
    lists = multi_lists(dsts)
    lists["page_table_1_dst"][1] = lists["page_table_1_dst"][0]
    for _ in range(20):  # the sort of equal start addresses used to pick either order
        with pytest.raises(RuntimeError, match=r"page_table_1_dst\[0\] and page_table_1_dst\[1\] overlap"):
            sgl_meta.fused_metadata_copy_multi(**src, **lists, **sc)


# ---- every op: both paths write the same ---------------------------------------------

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent / "reliability"))
from bad_input_table import BASES  # noqa: E402  (a valid call of every op)


@pytest.mark.parametrize("name", sorted(_op.OPS))
def test_every_op_writes_the_same_on_both_paths(name, device, gen, monkeypatch):
    kw = BASES[name](gen, device)
    written = [a.name for a in _op.OPS[name].args if a.written and kw.get(a.name) is not None]

    def poisoned():
        out = dict(kw)
        for n in written:
            value = kw[n]
            out[n] = [t.clone().fill_(-7) for t in value] if isinstance(value, (list, tuple)) else value.clone().fill_(-7)
        return out

    slow_calls = []
    real_checked = sgl_meta._errors.checked
    monkeypatch.setattr(sgl_meta._errors, "checked", lambda op, args: slow_calls.append(op) or real_checked(op, args))
    fast = poisoned()
    getattr(sgl_meta, name)(**fast)
    assert slow_calls == [], "a plain call must take the fast path"
    monkeypatch.setattr(_fast, "enabled", False)
    slow = poisoned()
    getattr(sgl_meta, name)(**slow)
    assert len(slow_calls) == 1
    for n in written:
        a, b = fast[n], slow[n]
        for x, y in zip(a, b) if isinstance(a, (list, tuple)) else [(a, b)]:
            assert torch.equal(bits(x), bits(y)), n  # (copied hidden states: a NaN is equal to itself)
    flat = [t for n in written for t in (fast[n] if isinstance(fast[n], (list, tuple)) else [fast[n]])]
    assert any(bool((t != -7).any()) for t in flat), "the call wrote nothing"
