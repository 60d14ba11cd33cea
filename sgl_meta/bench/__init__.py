"""Serving-trace replay benchmark: ``python -m sgl_meta.bench`` (``--help``).

Files, one job each: ``presets`` (model shapes), ``buckets`` (SGLang's CUDA-graph
batch sizes), ``trace`` (continuous-batching simulator over a paged KV pool),
``workloads/`` (per op: static buffers, fill, fused and reference calls, bytes),
``graphs`` (capture), ``timing`` (host, device, bandwidth), ``check`` (fused vs
reference), ``runner`` (the loop), ``report``/``plot`` (table, JSON, PNG),
``progress``, ``__main__`` (CLI). ``upstream/``: the ``--upstream`` mode, SGLang
0.5.23's own kernels beside ours on the same inputs.
"""


def main(argv=None) -> int:
    """Run the benchmark with command-line ``argv``; returns the exit status."""
    from .__main__ import main as _main

    return _main(argv)
