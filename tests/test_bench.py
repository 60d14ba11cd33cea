"""The benchmark (python -m sgl_meta.bench): CPU smoke runs, its checker, its trace."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import sgl_meta
from sgl_meta import reference
from sgl_meta.bench import main
from sgl_meta.bench.buckets import capture_batch_sizes, pad_to_bucket
from sgl_meta.bench.check import BenchMismatch, compare
from sgl_meta.bench.presets import PRESETS
from sgl_meta.bench.trace import ServingTrace, min_context_len

TINY = ["--device", "cpu", "--steps", "6", "--warmup", "1", "--max-bs", "4", "--context-len", "2048", "--no-progress"]


def run_json(tmp_path, *args):
    path = tmp_path / "bench.json"
    code = main([*TINY, "--json", str(path), *args])
    return code, json.loads(path.read_text())


def test_cpu_run_writes_json(tmp_path):
    code, doc = run_json(tmp_path, "--preset", "gpt-oss-120b", "llama-3.1-8b-p16", "--seed", "3")
    assert code == 0 and doc["ok"] is True
    env = doc["environment"]
    for key in ("date", "torch", "cuda", "python", "cpu", "sgl_meta", "device", "gpu"):
        assert key in env
    assert env["device"] == "cpu" and env["gpu"] is None and doc["graph_mode"] is None
    assert doc["args"]["seed"] == 3 and doc["args"]["steps"] == 6
    assert doc["copy_bandwidth"]["bytes_per_s"] > 0
    assert [p["preset"] for p in doc["presets"]] == ["gpt-oss-120b", "llama-3.1-8b-p16"]
    oss, llama = doc["presets"]
    assert oss["spec"] and not llama["spec"] and oss["swa_window"] == 128
    w = oss["workloads"][0]
    assert w["op"] == "update_trtllm_mha_graph_metadata"
    assert w["refreshes"] == ["draft_decode_0", "draft_decode_1", "target_verify", "draft_extend"]
    assert w["steps_measured"] == 6 and w["steps_checked"] == 7
    for impl in ("fused", "ref"):
        assert w["host_us_per_call"][impl]["median"] > 0
        assert w["host_us_per_call"][impl]["n"] == 6 * 4
    assert w["device_us_per_call"] is None
    assert w["floor_us_per_call"]["eager"]["median"] > 0
    assert w["per_bucket"] and all(b["bucket"] in oss["buckets"] for b in w["per_bucket"])
    assert llama["workloads"][0]["calls_per_step"] == 1


def test_corrupted_fused_output_fails(tmp_path, capsys):
    code, doc = run_json(tmp_path, "--preset", "llama-3.1-8b-p64", "--corrupt-fused", "3")
    assert code == 1 and doc["ok"] is False
    assert "step 3" in doc["error"] and "differs" in doc["error"]
    assert "FAILED" in capsys.readouterr().err


def test_vllm_preset_catches_a_corrupted_output(tmp_path):
    code, doc = run_json(tmp_path, "--preset", "llama-3.1-8b-vllm", "--corrupt-fused", "2")
    assert code == 1 and "step 2" in doc["error"] and "differs" in doc["error"]


def test_check_every_skips_steps(tmp_path):
    # With checks every 4th step, a corruption at an unchecked step goes unseen
    # (it is overwritten by the next refresh): proves the sampling is honoured.
    code, doc = run_json(tmp_path, "--preset", "llama-3.1-8b-p64", "--check-every", "4", "--corrupt-fused", "1")
    assert code == 0
    assert doc["presets"][0]["workloads"][0]["steps_checked"] == 2  # steps 0 and 4 of 7


def test_compare_names_the_tensor():
    want = {"a": torch.arange(6), "b": torch.zeros(2, 3, dtype=torch.int32)}
    got = {k: v.clone() for k, v in want.items()}
    compare(got, want, "here")
    got["b"][1, 2] = 7
    with pytest.raises(BenchMismatch, match=r"here.*\n  b: 1 of 6 elements differ; first at \(1, 2\): fused 7, reference 0"):
        compare(got, want, "here")


# -- stand-ins for ops built on other branches, to exercise their workloads --


def test_emulated_graphs_all_workloads(tmp_path):
    code, doc = run_json(tmp_path, "--preset", "all", "--emulate-graphs", "--steps", "5", "--max-bs", "3")
    assert code == 0 and doc["graph_mode"] == "emulated"
    ops = {p["preset"]: [w["op"] for w in p["workloads"]] for p in doc["presets"]}
    mha = ["update_trtllm_mha_graph_metadata", "build_trtllm_mha_page_table"]
    mha_eagle = ["update_trtllm_mha_graph_metadata", "update_trtllm_mha_graph_metadata_multi", "build_trtllm_mha_page_table"]
    assert ops == {
        "gpt-oss-120b": mha_eagle,
        "gpt-oss-120b-unified": mha_eagle + ["kv_read_page_table", "kv_read_token_stream"],
        "llama-3.1-8b-p16": mha,
        "llama-3.1-8b-p64": mha,
        "deepseek-v3.2": ["fused_metadata_copy", "fused_metadata_copy_multi"] + ["fused_dsa_metadata"] * 9,
        "llama-3.1-8b-fa3": ["update_flash_attention_metadata"] * 2,
        "llama-3.1-8b-vllm": ["vllm_prepare_step"],
        "deepseek-v3-fa3": ["update_flash_attention_metadata"] * 2,
    }
    vllm = doc["presets"][6]["workloads"][0]
    assert vllm["refreshes"] == ["prepare_step", "copy_page_indices"]
    eagle = doc["presets"][0]["workloads"][1]  # the draft steps in one launch
    assert eagle["refreshes"] == ["draft_decode_0..1", "target_verify", "draft_extend"]
    fa3 = doc["presets"][5]["workloads"]
    assert [w["refreshes"] for w in fa3] == [["draft_decode_0", "draft_decode_1", "target_verify", "draft_extend"],
                                            ["draft_decode_0..1", "target_verify", "draft_extend"]]
    dsa = doc["presets"][4]["workloads"]
    assert dsa[0]["refreshes"] == ["target_verify", "draft_extend"]
    for p in doc["presets"]:
        for w in p["workloads"]:
            assert w["device_us_per_call"]["fused"]["median"] > 0
            assert w["floor_us_per_call"]["graph"]["median"] > 0
            assert w["steps_checked"] == 6


def test_dsa_without_spec_and_corruption(tmp_path):
    code, doc = run_json(tmp_path, "--preset", "deepseek-v3.2", "--no-spec", "--emulate-graphs")
    assert code == 0
    assert [w["refreshes"] for w in doc["presets"][0]["workloads"]] == [["decode"]]  # no multi
    code, doc = run_json(tmp_path, "--preset", "deepseek-v3.2", "--emulate-graphs", "--corrupt-fused", "0")
    assert code == 1 and "fused_metadata_copy" in doc["error"]


def test_fa3_without_spec_and_corruption(tmp_path):
    code, doc = run_json(tmp_path, "--preset", "llama-3.1-8b-fa3", "--no-spec", "--emulate-graphs")
    assert code == 0
    assert [w["refreshes"] for w in doc["presets"][0]["workloads"]] == [["decode"]]  # no one-launch variant
    code, doc = run_json(tmp_path, "--preset", "llama-3.1-8b-fa3", "--emulate-graphs", "--corrupt-fused", "0")
    assert code == 1 and "update_flash_attention_metadata" in doc["error"]


@pytest.mark.gpu
def test_cuda_graph_path(tmp_path):
    """The real thing on a GPU: graphs per bucket, events, checks, then a sabotaged run."""
    args = ["--device", "cuda", "--steps", "8", "--warmup", "2", "--max-bs", "8", "--context-len", "4096", "--no-progress"]
    path = tmp_path / "gpu.json"
    assert main([*args, "--json", str(path)]) == 0
    doc = json.loads(path.read_text())
    assert doc["graph_mode"] == "cuda" and doc["environment"]["gpu"]
    for p in doc["presets"]:
        assert p["graphs_captured"] == len(p["buckets"]) * sum(len(w["impls"]) for w in p["workloads"])
        for w in p["workloads"]:
            for impl in w["impls"]:
                assert w["device_us_per_call"][impl]["median"] > 0
                assert w["graph_replay_host_us"][impl]["median"] > 0
            assert w["steps_checked"] == 10
    unified = {w["op"]: w for w in doc["presets"][1]["workloads"]}
    for op in ("kv_read_page_table", "kv_read_token_stream"):  # the NVRTC bare gather ran and matched
        assert unified[op]["impls"] == ["fused", "ref", "gather"], unified[op]["notes"]
    assert main([*args, "--preset", "gpt-oss-120b", "--corrupt-fused", "4"]) == 1


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    png = tmp_path / "bench.png"
    assert main([*TINY, "--preset", "llama-3.1-8b-p64", "--plot", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("bad", [["--preset", "no-such-model"], ["--context-len", "0"], ["--context-len", "-1"],
                                 ["--steps", "0"], ["--warmup", "-1"], ["--check-every", "0"],
                                 ["--buckets", "1,2,4", "--max-bs", "8"]])
def test_bad_arguments(bad):
    """Refused before anything runs (exit 2; exit 1 means a fused output differed)."""
    with pytest.raises(SystemExit) as e:
        main(["--device", "cpu", *bad])
    assert e.value.code == 2


@pytest.mark.parametrize("spec", [True, False])
@pytest.mark.parametrize("preset", list(PRESETS))
def test_context_len_floor(preset, spec, capsys):
    """The shortest context each preset's trace holds runs, checked every step; one token
    less is refused by name before anything runs (it used to fail inside the trace)."""
    flag = "--spec" if spec else "--no-spec"
    need = min_context_len(PRESETS[preset], spec)
    with pytest.raises(SystemExit) as e:
        main(["--device", "cpu", "--preset", preset, flag, "--context-len", str(need - 1), "--no-progress"])
    assert e.value.code == 2
    assert f"--context-len {need - 1}: {preset} needs at least {need} tokens" in capsys.readouterr().err
    args = ["--device", "cpu", "--steps", "40", "--warmup", "1", "--max-bs", "8", "--no-progress"]
    assert main([*args, "--preset", preset, flag, "--context-len", str(need)]) == 0


# -- buckets and trace ---------------------------------------------------------


def test_buckets_match_sglang():
    assert capture_batch_sizes(256, spec=False) == [1, 2, 4, 8, 12] + list(range(16, 257, 8))
    spec = capture_batch_sizes(256, spec=True)
    assert spec[:10] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12] and spec[-1] == 256 and len(spec) == 51
    assert capture_batch_sizes(20, spec=False) == [1, 2, 4, 8, 12, 16, 20]
    assert pad_to_bucket(9, [1, 2, 4, 8, 12]) == 12 and pad_to_bucket(8, [1, 2, 4, 8, 12]) == 8
    with pytest.raises(ValueError):
        pad_to_bucket(13, [1, 2, 4, 8, 12])


def _trace(seed, spec, preset="gpt-oss-120b"):
    p = PRESETS[preset].with_overrides(context_len=4096, kv_pool_tokens=200_000)
    return ServingTrace(p, spec=spec, max_bs=24, total_steps=150, seed=seed, device=torch.device("cpu"))


@pytest.mark.parametrize("spec", [False, True])
def test_trace_is_reproducible_and_consistent(spec):
    a, b = _trace(11, spec), _trace(11, spec)
    ps, window = a.ps, a.window
    for _ in range(150):
        sa, sb = a.next_step(), b.next_step()
        for field in ("req_pool_indices", "seq_lens", "out_cache_loc", "accept_lens"):
            assert np.array_equal(getattr(sa, field), getattr(sb, field))
        assert 1 <= sa.bs <= 24 and len(set(sa.req_pool_indices.tolist())) == sa.bs
        assert 0 not in sa.req_pool_indices  # row 0 is padding
        r2t = a.req_to_token
        rows = torch.from_numpy(sa.req_pool_indices.astype(np.int64))
        # Every committed token and this step's new tokens have a real slot.
        for i in range(sa.bs):
            n = int(sa.committed[i]) + sa.tokens_per_req
            slots = r2t[rows[i], :n]
            assert int(slots.min()) >= ps  # never the padding page
            assert torch.equal(slots[-sa.tokens_per_req:], torch.from_numpy(sa.out_cache_loc[i]).int())
            # SWA: pages in the window are mapped, pages before it are evicted (0).
            first_live = max(0, (int(sa.committed[i]) - window) // ps)
            mapped = a.full_to_swa[slots[::ps].long()]
            assert (mapped[first_live:] > 0).all() and (mapped[:first_live] == 0).all()
        assert sa.seq_lens.tolist() == (sa.committed + (0 if spec else 1)).tolist()
    assert a.stats.finished > 0 and a.stats.admitted > a.stats.finished
    assert a.page_contiguity() < 0.2  # pages are scattered, not handed out in runs


def test_unified_pool_workloads_and_baseline(tmp_path):
    """Unified preset: the read-table workloads with the bare-gather baseline
    (checked against the reference in graph mode, rows in the table), a
    corrupted fused output still fails."""
    code, doc = run_json(tmp_path, "--preset", "gpt-oss-120b-unified", "--emulate-graphs", "--steps", "4")
    assert code == 0
    ws = {w["op"]: w for w in doc["presets"][0]["workloads"]}
    table, stream = ws["kv_read_page_table"], ws["kv_read_token_stream"]
    names = ["draft_decode_0", "draft_decode_1", "target_verify", "draft_extend"]
    assert table["refreshes"] == [f"{n}.{k}" for n in names for k in ("full", "swa")]
    for w in (table, stream):
        assert w["impls"] == ["fused", "ref", "gather"] and w["steps_checked"] == 5
        assert w["device_us_per_call"]["gather"]["median"] > 0
    from sgl_meta.bench.report import table_rows

    _, groups = table_rows(doc)
    assert any(r[2] == "gather" and r[-2].startswith("fused/gather ") for g in groups for r in g)
    code, doc = run_json(tmp_path, "--preset", "gpt-oss-120b-unified", "--emulate-graphs", "--corrupt-fused", "2")
    assert code == 1


def test_unified_pool_upstream_slot(tmp_path, monkeypatch):
    """--upstream puts SGLang's builders beside ours in the read-table workloads
    (upstream's exact signatures), checked against the reference; stood in here
    by the drop-in references, which take the same keywords."""
    import types

    from sgl_meta.bench.workloads import kv_read_table

    calls = []

    def fake(**kw):
        calls.append(sorted(kw))
        return (reference.build_kv_read_table_packed if "indptr" in kw else reference.build_kv_read_table)(**kw)

    up = types.SimpleNamespace(build_kv_read_table=fake, build_kv_read_table_packed=fake)
    monkeypatch.setattr(kv_read_table, "upstream_kernels", lambda spec, device: (up, ""))
    code, doc = run_json(tmp_path, "--preset", "gpt-oss-120b-unified", "--emulate-graphs", "--steps", "3",
                         "--upstream", "auto", "--no-cold-start")
    ws = {w["op"]: w for w in doc["presets"][0]["workloads"]}
    for op in ("kv_read_page_table", "kv_read_token_stream"):
        assert ws[op]["impls"] == ["fused", "ref", "gather", "upstream"]
        assert ws[op]["device_us_per_call"]["upstream"]["median"] > 0
    table = ["max_pages", "out", "page_size", "req_pool_indices", "req_to_token", "seq_len_delta", "seq_lens", "v2p",
             "zero_tail"]
    packed = ["indptr", "kv_start_idx", "max_tokens", "out", "page_size", "req_pool_indices", "req_to_token",
              "seq_lens", "v2p"]
    assert table in calls and packed in calls
    assert code == 0 and doc["ok"] is True  # (the upstream section's own rows skip: no sglang here)


def test_unified_pool_compaction_moves_pages_not_req_to_token():
    """v2p binds every live virtual page to its own physical page below the
    watermark, unbinds freed ones (-1), and compaction changes v2p between steps
    while req_to_token rows of running requests stay as they were."""
    p = PRESETS["gpt-oss-120b-unified"].with_overrides(context_len=4096, kv_pool_tokens=200_000)
    trace = ServingTrace(p, spec=True, max_bs=24, total_steps=150, seed=5, device=torch.device("cpu"))
    pool = trace.unified
    moved_steps = 0
    prev_v2p, prev_rows = None, {}
    for _ in range(150):
        step = trace.next_step()
        v2p = trace.v2p.clone()
        rows = step.req_pool_indices.astype(np.int64)
        live = np.concatenate([trace._pages[r, : trace._n_pages[r]] for r in rows])
        phys = v2p[torch.from_numpy(live)]
        assert bool((phys > 0).all()) and phys.unique().numel() == live.size  # bound, one to one
        assert int(phys.max()) < pool.watermark
        bound = (v2p >= 0).sum().item() - 1  # minus the padding page
        assert bound == live.size and int(v2p[0]) == 0
        # SWA: pages in the window are bound, evicted ones read -1.
        swa = trace.swa_v2p[torch.from_numpy(live)]
        assert bool(((swa > 0) | (swa == -1)).all())
        if prev_v2p is not None:
            kept = [r for r in rows if r in prev_rows]
            for r in kept:  # req_to_token of a running request is never rewritten
                n = prev_rows[r].numel()
                assert torch.equal(trace.req_to_token[r, :n], prev_rows[r])
            still = torch.from_numpy(live)
            if bool((prev_v2p[still] != v2p[still]).any()):
                moved_steps += 1
        prev_v2p = v2p
        prev_rows = {int(r): trace.req_to_token[r, : int(c)].clone() for r, c in zip(rows, step.committed)}
    assert pool.moved > 0 and moved_steps > 0, "compaction never moved a live page"


def test_trace_depends_on_seed():
    a, b = _trace(1, False, "llama-3.1-8b-p16"), _trace(2, False, "llama-3.1-8b-p16")
    steps_a = [a.next_step().seq_lens.tolist() for _ in range(30)]
    steps_b = [b.next_step().seq_lens.tolist() for _ in range(30)]
    assert steps_a != steps_b


def test_dsa_generation_lines(tmp_path):
    """deepseek-v3.2 with MTP: generator + K copies, the generating op and eager,
    K = 1, 2, 3, 5, in one run; every line checked against its reference."""
    code, doc = run_json(tmp_path, "--preset", "deepseek-v3.2", "--emulate-graphs", "--steps", "4")
    assert code == 0
    lines = {w["label"]: w for w in doc["presets"][0]["workloads"]}
    for k in (1, 2, 3, 5):
        for label in (f"dsa gen K={k}", f"dsa gen+copy K={k}"):
            assert lines[label]["steps_checked"] == 5 and lines[label]["refreshes"] == [f"draft_decode_x{k}"]
            assert lines[label]["floor_us_per_call"]["graph"]["median"] > 0
    assert lines["dsa gen verify/extend"]["refreshes"] == ["target_verify", "draft_extend"]
    # The same floor (the bytes the refresh must move) for both ways of doing it.
    assert lines["dsa gen K=3"]["bytes_per_step"] == lines["dsa gen+copy K=3"]["bytes_per_step"]


def test_dsa_generator_is_pluggable_and_checked(tmp_path):
    """An upstream generator slots into the gen+copy lines; one that writes a
    wrong value is caught by the per-step check."""
    from sgl_meta.bench.workloads import dsa_metadata

    saved = dict(dsa_metadata.GENERATOR)
    calls = []

    def counting(*args):
        calls.append(args[9])  # bs
        saved["fused"](*args)

    def wrong(*args):
        saved["fused"](*args)
        args[3][:1].add_(1)  # cache_seqlens[0]

    try:
        dsa_metadata.use_generator(fused=counting, label="counted gen")
        code, doc = run_json(tmp_path, "--preset", "deepseek-v3.2", "--emulate-graphs", "--steps", "3")
        assert code == 0 and calls
        labels = [w["label"] for w in doc["presets"][0]["workloads"]]
        assert "dsa counted gen+copy K=3" in labels
        dsa_metadata.use_generator(fused=wrong)
        code, doc = run_json(tmp_path, "--preset", "deepseek-v3.2", "--emulate-graphs", "--steps", "3")
        assert code == 1 and "fused_dsa_metadata" in doc["error"] and "cache_seqlens" in doc["error"]
    finally:
        dsa_metadata.GENERATOR.clear()
        dsa_metadata.GENERATOR.update(saved)


def test_cpu_run_is_scaled_and_says_so(tmp_path, capsys):
    """Without a GPU the defaults shrink the run (what was left at its default) and
    the output, the JSON and the published table say what was scaled."""
    from sgl_meta.bench.__main__ import CPU_DEFAULTS

    path, pub = tmp_path / "b.json", tmp_path / "pub"
    code = main(["--device", "cpu", "--preset", "llama-3.1-8b-p64", "--steps", "2", "--warmup", "0",
                 "--no-progress", "--json", str(path), "--publish", str(pub)])
    doc = json.loads(path.read_text())
    assert code == 0 and doc["args"]["context_len"] == CPU_DEFAULTS["context_len"]
    assert "contexts capped" in doc["cpu_scaled"] and "buckets up to 32" in doc["cpu_scaled"]
    assert "steps (+" not in doc["cpu_scaled"]  # given on the command line
    assert "CPU-scaled run:" in capsys.readouterr().err
    md = (pub / f"{doc['environment']['date'][:10]}-cpu-bench.md").read_text()
    assert "CPU-scaled run:" in md and "ref/fused" in md and "publish_results.sh" in md
    assert json.loads((pub / f"{doc['environment']['date'][:10]}-cpu-bench.json").read_text())["ok"] is True


def test_cpu_kv_workloads_leave_out_the_bare_gather(tmp_path):
    """On CPU without emulated graphs the bare gather would be the reference again:
    it is left out and a note says it runs on CUDA only."""
    code, doc = run_json(tmp_path, "--preset", "gpt-oss-120b-unified", "--steps", "2")
    ws = {w["op"]: w for w in doc["presets"][0]["workloads"]}
    for op in ("kv_read_page_table", "kv_read_token_stream"):
        assert ws[op]["impls"] == ["fused", "ref"]
        assert any("CUDA only" in n for n in ws[op]["notes"])
    from sgl_meta.bench.report import markdown

    assert "fused/gather" not in markdown(doc) and "only in the JSON" in markdown(doc)


def test_published_names():
    from sgl_meta.bench.publish import stem

    assert stem({"date": "2026-12-01T15:13:31+00:00", "gpu": "NVIDIA H200"}, "upstream") == "2026-12-01-h200-upstream"
    assert stem({"date": "2027-01-02T00:00:00", "gpu": "NVIDIA GeForce RTX 4090"}, "bench") == \
        "2027-01-02-geforce-rtx-4090-bench"
    assert stem({"date": "2027-01-02T00:00:00", "gpu": None}, "bench") == "2027-01-02-cpu-bench"


def test_sglang_step_bench_says_it_needs_a_gpu(monkeypatch, capsys):
    """``--sglang`` times SGLang's own CUDA-graph replays and its backends build
    only on a GPU: without one it says so and exits 2, before importing SGLang."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["--sglang", "--steps", "1"]) == 2
    err = capsys.readouterr().err
    assert "--sglang: needs a CUDA device" in err and "docs/sglang_step.md" in err


def test_sglang_step_bench_says_sglang_is_missing(monkeypatch, capsys):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sglang" else real(name, *a))
    assert main(["--sglang"]) == 2
    assert "needs SGLang 0.5.23 importable: pip install --no-deps sglang==0.5.23" in capsys.readouterr().err


@pytest.mark.parametrize("argv, code", [(["--sglang", "--help"], 0), (["--sglang", "--backend", "foo"], 2)])
def test_sglang_step_bench_options_without_sglang(monkeypatch, capsys, argv, code):
    """Its help and its argument errors need neither SGLang nor a GPU: they
    come before the run's imports and its preflight."""
    monkeypatch.setitem(sys.modules, "sglang", None)  # `import sglang...` raises
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == code
    out = capsys.readouterr()
    assert ("--mode" in out.out) if code == 0 else ("invalid choice: 'foo'" in out.err)


def test_sglang_step_spin_outlasts_the_host_time_of_slow_eager_calls():
    """The spin before a timed eager call: ~1 ms at least, three times the side's median untimed host time
    beyond that (a first call's compile among the untimed steps does not lengthen it)."""
    from sgl_meta.bench.sglang_step.measure import OUT_SLEEP_CYCLES, spin_cycles
    from sgl_meta.bench.timing import SLEEP_CYCLES

    assert spin_cycles([]) == spin_cycles([50.0, 120.0]) == OUT_SLEEP_CYCLES
    assert spin_cycles([2e6, 1100.0, 1150.0, 1120.0]) == int(3 * 1135.0 * SLEEP_CYCLES / 200)
    # One spin for both sides of a point, from the slower one.
    assert spin_cycles([1100.0], [1000.0, 1200.0], []) == spin_cycles([1100.0]) > spin_cycles([1000.0])


def test_sglang_step_table_names_the_spin_its_run_used():
    """A run's plan records the spin rule; runs from before it was recorded spun ~1 ms."""
    import json

    from sgl_meta.bench.sglang_step import table
    from sgl_meta.bench.sglang_step.measure import Plan

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "2026-12-04-h200-sglang-step.json"
    doc = json.loads(path.read_text())
    old = {**doc, "plan": {k: v for k, v in doc["plan"].items() if k != "spin"}}
    new = {**doc, "plan": {**doc["plan"], "spin": Plan().spin}}
    assert "spin kernel (~1 ms, longer than the host takes to issue most calls)" in table.markdown(old)
    assert "three times the larger of the two sides' median host times" in table.markdown(new)
    side = {**doc, "plan": {**doc["plan"], "spin": "3x host"}}
    assert "three times the side's median host time" in table.markdown(side)
    assert table.CONTROL not in table.markdown(new)
    control = {**doc, "plan": {**doc["plan"], "control": True}}
    assert table.CONTROL in table.markdown(control)


def test_sglang_step_control_and_measured_runs_do_not_merge():
    """A control run (both sides SGLang's) is not a part of a measured grid."""
    import json

    from sgl_meta.bench.sglang_step.cli import merge_runs

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "2026-12-04-h200-sglang-step.json"
    doc = json.loads(path.read_text())
    measured = {**doc, "rows": [r for r in doc["rows"] if r["backend"] != "flashinfer"]}
    control = {**doc, "plan": {**doc["plan"], "control": True},
               "rows": [r for r in doc["rows"] if r["backend"] == "flashinfer"]}
    with pytest.raises(ValueError, match="plan"):
        merge_runs([measured, control])
    assert len(merge_runs([measured, {**control, "plan": doc["plan"]}])["rows"]) == len(doc["rows"])
    # A plan without the field is a measured run's: it merges with one that says control=False.
    bare = {**measured, "plan": {k: v for k, v in doc["plan"].items() if k != "control"}}
    explicit = {**control, "plan": {**doc["plan"], "control": False}}
    assert len(merge_runs([bare, explicit])["rows"]) == len(doc["rows"])


def test_sglang_step_max_len_is_part_of_the_plan(tmp_path):
    """Runs whose lengths were drawn for another context (--max-len) do not merge with
    the others, the table says what the lengths were drawn for, and they publish under
    a name of their own; bad sizes and lengths are argument errors."""
    import json

    from sgl_meta.bench.sglang_step import points, table
    from sgl_meta.bench.sglang_step.cli import build_parser, main, merge_runs

    assert build_parser().parse_args(["--max-len", "8192"]).max_len == 8192
    assert build_parser().parse_args([]).sizes == points.SIZES
    assert build_parser().parse_args(["--sizes", "16:131072,256:131072"]).sizes == ((16, 131072), (256, 131072))
    for bad in (["--max-len", "256"], ["--max-len", "x"], ["--sizes", "foo"], ["--sizes", "1:2:3"],
                ["--sizes", "1:131072,"], ["--sizes", "0:8192"], ["--sizes", "1:256"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(bad)
    assert points.grid(["fa3", "fa3"], ["decode"], ((1, 1024),)) == [("fa3", "decode", 1, 1024)]
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "2026-12-04-h200-sglang-step.json"
    doc = json.loads(path.read_text())
    short = {**doc, "plan": {**doc["plan"], "max_len": 8192},
             "rows": [r for r in doc["rows"] if r["backend"] == "flashinfer"]}
    rest = {**doc, "rows": [r for r in doc["rows"] if r["backend"] != "flashinfer"]}
    with pytest.raises(ValueError, match="plan"):
        merge_runs([rest, short])
    assert len(merge_runs([rest, {**short, "plan": {**doc["plan"], "max_len": None}}])["rows"]) == len(doc["rows"])
    assert "drawn as for a context of 8192 tokens" in table.markdown(short)
    assert "drawn as for" not in table.markdown(doc)
    (tmp_path / "short.json").write_text(json.dumps(short))
    main(["--merge", str(tmp_path / "short.json"), "--publish", str(tmp_path / "out")])
    assert [p.name for p in sorted((tmp_path / "out").glob("*.md"))] == ["2026-12-04-h200-sglang-step-max-len-8192.md"]


def test_sglang_step_merge_publishes_the_grid(tmp_path):
    """Parts of the grid joined with --merge --publish: the published pair, every row, the footer."""
    import json

    from sgl_meta.bench.sglang_step.cli import main

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "2026-12-04-h200-sglang-step.json"
    doc = json.loads(path.read_text())
    parts = []
    for i, keep in enumerate((lambda r: r["backend"] == "flashinfer", lambda r: r["backend"] != "flashinfer")):
        parts.append(tmp_path / f"part{i}.json")
        parts[-1].write_text(json.dumps({**doc, "rows": [r for r in doc["rows"] if keep(r)]}))
    assert main(["--merge", *map(str, parts), "--publish", str(tmp_path / "out")]) == 0
    (md,) = (tmp_path / "out").glob("*-sglang-step.md")
    assert md.name == "2026-12-04-h200-sglang-step.md"
    published = json.loads(md.with_suffix(".json").read_text())
    assert [r["backend"] for r in published["rows"]] == [r["backend"] for r in doc["rows"]]
    assert "bash scripts/publish_results.sh" in md.read_text()


def test_sglang_step_on_minus_off_and_slower_rows():
    """The step bench's verdict: per step, plugin on minus off; a row is slower
    only where the whole 95% interval lies above 0. A constant +0.5 us on every
    step is slower; steps that differ by noise centred on 0 are not; a faster
    row is not."""
    pytest.importorskip("sglang")
    from sgl_meta.bench.sglang_step import table
    from sgl_meta.bench.sglang_step.measure import on_minus_off

    rng = np.random.default_rng(0)
    off_dev = list(5 + rng.normal(0, 0.3, 200))
    noise = list(rng.normal(0, 0.3, 200))
    off = {"out_host_us": off_dev, "out_device_us": off_dev, "in_graph_device_us": []}
    slower = on_minus_off([(off, {"out_host_us": [x + y for x, y in zip(off_dev, noise)],
                                  "out_device_us": [x + 0.5 for x in off_dev], "in_graph_device_us": []})])
    assert set(slower) == {"out_device_us", "out_host_us"}  # no replays recorded: no in-graph difference
    assert slower["out_device_us"]["median"] == pytest.approx(0.5) and slower["out_device_us"]["ci95"][0] > 0
    lo, hi = slower["out_host_us"]["ci95"]
    assert lo < 0 < hi
    faster = on_minus_off([(off, dict(off, out_device_us=[x - 1 for x in off_dev]))])
    rows = [{"backend": "fa3", "mode": "decode", "bs": 1, "on_minus_off": slower},
            {"backend": "dsa", "mode": "decode", "bs": 64, "on_minus_off": faster},
            {"backend": "dsa", "mode": "decode", "bs": 256}]
    assert table.slower(rows) == ["fa3 decode bs1: out-of-graph device +0.50 [+0.50, +0.50]"]


def test_sglang_step_builds_pooled():
    """A point's builds (its buffers at other addresses) pool into one row: the
    medians over every build's steps, every build's snapshots, the launches of
    the first; on - off resamples builds, so builds that disagree (one +0.4,
    one -0.4: a layout, not the plugin) give an interval that holds 0, where
    either build alone would not."""
    pytest.importorskip("sglang")
    from sgl_meta.bench.sglang_step.measure import Plan, merge, on_minus_off

    assert Plan(steps=100, builds=4).per_build().steps == 25 and Plan(steps=101, builds=4).per_build().steps == 26
    rng = np.random.default_rng(1)

    def build(shift):
        off = list(5 + rng.normal(0, 0.02, 50))
        on = [x + shift + rng.normal(0, 0.02) for x in off]
        side = lambda v, tag: {"snapshots": [tag], "metrics": {"out_launches": 1},  # noqa: E731
                               "samples": {"out_host_us": v, "out_device_us": v, "in_graph_device_us": []}}
        return {"off": side(off, f"off{shift}"), "on": side(on, f"on{shift}")}

    builds = [build(+0.4), build(-0.4)]
    for b in builds:
        alone = on_minus_off([(b["off"]["samples"], b["on"]["samples"])])["out_device_us"]
        assert not alone["ci95"][0] <= 0 <= alone["ci95"][1]
    pooled = merge(builds)
    lo, hi = pooled["on_minus_off"]["out_device_us"]["ci95"]
    assert lo < 0 < hi and len(pooled["on_minus_off"]["out_device_us"]["builds"]) == 2
    assert pooled["off"]["snapshots"] == ["off0.4", "off-0.4"] and pooled["on"]["metrics"]["out_launches"] == 1
    assert pooled["off"]["metrics"]["out_device_us"]["n"] == 100
    assert "in_graph_device_us" not in pooled["off"]["metrics"]


def test_sglang_step_runs_of_parts_merge_into_the_one_table(tmp_path, capsys):
    """A grid measured in parts (runs of disjoint backends) merges into the table one
    run would give: the published run split in two and merged back is that run;
    parts of another build, another plan or overlapping rows are refused."""
    import json

    from sgl_meta.bench.sglang_step import table

    path = Path(__file__).resolve().parent.parent / "benchmarks" / "results" / "2026-12-04-h200-sglang-step.json"
    doc = json.loads(path.read_text())
    first = {**doc, "rows": [r for r in doc["rows"] if r["backend"] in ("dsa", "fa3")]}
    second = {**doc, "rows": [r for r in doc["rows"] if r["backend"] not in ("dsa", "fa3")]}
    parts = []
    for i, part in enumerate((first, second)):
        parts.append(tmp_path / f"part{i}.json")
        parts[-1].write_text(json.dumps(part))
    out_json, out_md = tmp_path / "all.json", tmp_path / "all.md"
    assert main(["--sglang", "--merge", str(parts[1]), str(parts[0]), "--json", str(out_json),
                 "--markdown", str(out_md)]) == 0
    merged = json.loads(out_json.read_text())
    assert merged["rows"] == doc["rows"] and out_md.read_text() == table.markdown(doc) + "\n"
    capsys.readouterr()
    other = tmp_path / "other.json"
    for change, why in (({"environment": {**doc["environment"], "sgl_meta_commit": "abc1234"}},
                         "the runs differ in sgl_meta_commit"),
                        ({"plan": {**doc["plan"], "steps": 7}}, "the runs differ in their plan"),
                        ({"rows": second["rows"] + first["rows"][:1]}, "is in more than one run")):
        other.write_text(json.dumps({**second, **change}))
        assert main(["--sglang", "--merge", str(parts[0]), str(other)]) == 2
        assert why in capsys.readouterr().err
