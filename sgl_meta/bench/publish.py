"""Published results: the committed files the README and the operator docs cite.

One JSON (the whole run: environment, arguments, every number) and one markdown
table per measurement, named by date, GPU and what they measure:

    benchmarks/results/<date>-<gpu>-bench.{json,md}      python -m sgl_meta.bench (the trace replay)
    benchmarks/results/<date>-<gpu>-upstream.{json,md}   python -m sgl_meta.bench --upstream (vs SGLang 0.5.23)
    benchmarks/results/<date>-<gpu>-op-shapes.{json,md}  benchmarks/op_shapes.py (fixed shapes)
    benchmarks/results/<date>-<gpu>-sglang-step.{json,md} python -m sgl_meta.bench --sglang (SGLang's replay step, plugin off / on)

``scripts/publish_results.sh`` writes all of them on a GPU machine; the tools
write theirs with ``--publish DIR``.
"""

from __future__ import annotations

import re
from pathlib import Path

from .report import write_json

COMMAND = "bash scripts/publish_results.sh"


def stem(env: dict, what: str) -> str:
    """``2026-12-01-h200-upstream``: the run's date, its device, what was measured."""
    device = env.get("gpu") or "cpu"
    device = re.sub(r"[^a-z0-9]+", "-", device.lower().removeprefix("nvidia ")).strip("-")
    return f"{env.get('date', 'undated')[:10]}-{device}-{what}"


def write(directory, what: str, doc: dict, markdown: str) -> list:
    """Write ``<stem>.json`` and ``<stem>.md`` (the table, its notes, how to regenerate) into ``directory``."""
    base = Path(directory) / stem(doc.get("environment", {}), what)
    footer = [f"- {n}" for n in doc.get("provenance", ())]
    footer.append(f"- Every number of the run: `{base.name}.json`. Regenerate on a GPU machine with SGLang 0.5.23: "
                  f"`{COMMAND}`.")
    write_json(f"{base}.json", doc)
    Path(f"{base}.md").write_text(markdown.rstrip("\n") + "\n" + "\n".join(footer) + "\n")
    return [Path(f"{base}.json"), Path(f"{base}.md")]
