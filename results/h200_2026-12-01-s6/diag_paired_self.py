"""Calibration of op_shapes' paired timing: the bare gather against itself (ratio should be 1.00)."""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("op_shapes", "benchmarks/op_shapes.py")
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
for name, (make, params) in m.CASES.items():
    if not name.startswith("kv_read_page_table") or "zero_tail" in name:
        continue
    kwargs, _ = make(*params)
    fn = m._bare_gather("table")
    p = m.device_us_paired([lambda k=k: fn(**k) for k in kwargs], [lambda k=k: fn(**k) for k in kwargs])
    print(f"{name:46s} bare/bare {p['a_us']:7.2f} {p['b_us']:7.2f} ratio {p['ratio']:.3f} [{p['ratio_p25']:.3f}-{p['ratio_p75']:.3f}]")
