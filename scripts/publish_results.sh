#!/usr/bin/env bash
# The published results, from one run on a GPU machine: the trace replay and the
# comparison with SGLang 0.5.23's own kernels (python -m sgl_meta.bench
# --upstream), then the fixed shapes (benchmarks/op_shapes.py). Writes
# benchmarks/results/<date>-<gpu>-{bench,upstream,op-shapes}.{json,md}; the
# README's performance table and docs/operators/*.md cite these files, so
# delete the previous date's files and update those citations in the same commit.
#
#   bash scripts/publish_results.sh [SGLANG]
#
# SGLANG: auto (the installed sglang, default), a site dir holding sglang/, or
# the sglang wheel (scripts/upstream_bench.sh lays out a site dir from wheels on
# a machine with no package index). PUBLISH_DIR overrides the output folder.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${PUBLISH_DIR:-benchmarks/results}
PY=${PYTHON:-python3}
"$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 'publish_results.sh needs a CUDA device')"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
"$PY" -m sgl_meta.bench --upstream "${1:-auto}" --publish "$out" --no-progress
"$PY" benchmarks/op_shapes.py --publish "$out"
