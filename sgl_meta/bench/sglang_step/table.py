"""The markdown table of a ``--sglang`` run: one row per point, plugin off / on side by side."""

from __future__ import annotations

from ..report import _num, diff_cell, environment_line

HEADER = ("backend", "mode", "bs", "context", "out-of-graph host us (off / on)",
          "out-of-graph device us (off / on)", "launches out / in graph (off / on)",
          "in-graph replay device us (off / on)", "on - off out-of-graph device us [95%]",
          "on - off in-graph device us [95%]", "on - off host us [95%]", "buffers equal")
DIFFS = (("out_device_us", "out-of-graph device"), ("in_graph_device_us", "in-graph device"),
         ("out_host_us", "host"))


def _med(metrics, key):
    s = (metrics or {}).get(key)
    return None if s is None else s["median"]


def _pair(a, b) -> str:
    return f"{_num(a)} / {_num(b)}"


def _launch(m) -> str:
    if not m or m.get("out_launches") is None:
        return "-"
    return f"{m['out_launches']:g}+{m['in_graph_launches']:g}"


def row(r: dict) -> list:
    off, on = r["off"], r["on"]
    if r["error"]:
        first_line = r["error"].strip().splitlines()[0] if r["error"].strip() else r["error"]
        return [r["backend"], r["mode"], str(r["bs"]), str(r["context"]), f"failed: {first_line[:120]}"] + [""] * 7
    return [r["backend"], r["mode"], str(r["bs"]), str(r["context"]),
            _pair(_med(off, "out_host_us"), _med(on, "out_host_us")),
            _pair(_med(off, "out_device_us"), _med(on, "out_device_us")),
            f"{_launch(off)} / {_launch(on)}",
            _pair(_med(off, "in_graph_device_us"), _med(on, "in_graph_device_us")),
            *(diff_cell(r.get("on_minus_off", {}).get(key)) for key, _ in DIFFS),
            "yes" if r["equal"] else "NO: " + "; ".join(r["diffs"][:3])]


def slower(rows) -> list:
    """``"backend mode bs: what +x us [lo, hi]"`` for every difference whose whole
    95% interval lies above 0 (the plugin slower beyond the spread of the steps)."""
    out = []
    for r in rows:
        for key, what in DIFFS:
            d = (r.get("on_minus_off") or {}).get(key)
            if d and d["ci95"][0] > 0:
                out.append(f"{r['backend']} {r['mode']} bs{r['bs']}: {what} {diff_cell(d)}")
    return out


# The spin before each timed eager call, by the plan's rule (runs before the rule was
# recorded spun ~1 ms, which a host time past it leaks into the device column).
_SPINS = {"1 ms": "~1 ms, longer than the host takes to issue most calls",
          "3x host": "~1 ms, or three times the side's median host time where that is longer",
          "3x host, both sides": "~1 ms, or three times the larger of the two sides' median host times where "
                                 "that is longer, the same for both"}


CONTROL = ("Control run: both sides run SGLang's own code (the plugin's attributes switched step by step as in a "
           "measured run, to SGLang's values on both), so every on - off below is the bench's own error.")


def markdown(doc: dict) -> str:
    env = doc["environment"]
    control = doc["plan"].get("control", False)
    lines = [
        f"SGLang decode-step metadata, plugin off / on; medians of {doc['plan']['steps']} replay steps over "
        f"{doc['plan'].get('builds', 1)} builds of each point.",
        "",
        environment_line(env),
        "",
    ]
    lines += [CONTROL, ""] * control
    max_len = doc["plan"].get("max_len")
    lines += [f"Requests' lengths drawn as for a context of {max_len} tokens (the upper half of it, less the "
              f"tokens a run grows them by; the point's context where that is shorter); each backend sized for "
              f"its point's context.", ""] * bool(max_len)
    lines += [
        "| " + " | ".join(HEADER) + " |",
        "|" + "---|" * len(HEADER),
    ]
    lines += ["| " + " | ".join(row(r)) + " |" for r in doc["rows"]]
    lines += [""] * bool(doc.get("notes")) + [f"Note: {n}" for n in doc.get("notes", [])]
    worse = slower(doc["rows"])
    lines += ["", "Plugin on slower than off (the whole 95% interval of on - off above 0): "
              + ("; ".join(worse) if worse else "none") + "."]
    lines += ["", f"Import stubs (not installed; no kernel of theirs runs, only device-size queries answered): "
              f"{', '.join(doc['stubbed']) or 'none'}.",
              "Left out of both sides: " + "; ".join(doc["left_out"]) + ".",
              "Plugin off and on measured step by step in turn, each side on its own backend built alike; each "
              "point built several times behind a spacer of random size (its buffers at other addresses), the "
              "steps split between the builds. "
              "Out-of-graph device us: CUDA events around the eager call, queued behind a spin kernel ("
              + _SPINS[doc["plan"].get("spin", "1 ms")] + "), so the GPU time without host gaps. On - off: per step, "
              "the plugin-on sample minus the plugin-off one of the same step; median [95% bootstrap interval, "
              "builds resampled, then steps]. "
              "Launches: "
              "GPU kernels/copies of the eager call + those recorded in the graph; '-' replay: nothing recorded."]
    return "\n".join(lines)
