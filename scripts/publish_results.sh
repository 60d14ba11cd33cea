#!/usr/bin/env bash
# The published results, from one run on a GPU machine: the trace replay and the
# comparison with SGLang 0.5.23's own kernels (python -m sgl_meta.bench
# --upstream), the fixed shapes (benchmarks/op_shapes.py), and SGLang's own
# replay step with the plugin off and on (python -m sgl_meta.bench --sglang).
# Writes benchmarks/results/<date>-<gpu>-{bench,upstream,op-shapes,sglang-step}.{json,md};
# the README's tables and docs/*.md cite these files, so delete the previous
# date's files and update those citations in the same commit.
#
#   bash scripts/publish_results.sh [SGLANG]
#
# SGLANG: auto (the installed sglang, default), a site dir holding sglang/, or
# the sglang wheel (scripts/upstream_bench.sh lays out a site dir from wheels on
# a machine with no package index); the step bench imports SGLang itself, so it
# needs the installed package or a site dir. PUBLISH_DIR overrides the output
# folder; PARTS (default "bench upstream op-shapes sglang-step") picks parts.
# The step grid takes about 20 minutes on an H200: where one command may run
# less, measure it in pieces (--backend / --mode, each with --json) and join
# them with `python -m sgl_meta.bench --sglang --merge A.json B.json ... --publish DIR`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${PUBLISH_DIR:-benchmarks/results}
PY=${PYTHON:-python3}
"$PY" -c "import sys, torch; sys.exit(0 if torch.cuda.is_available() else 'publish_results.sh needs a CUDA device')"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
sglang=${1:-auto}
read -r -a parts <<< "${PARTS:-bench upstream op-shapes sglang-step}"
for part in "${parts[@]}"; do
  case $part in
    bench) "$PY" -m sgl_meta.bench --publish "$out" --no-progress ;;
    upstream) "$PY" -m sgl_meta.bench --preset none --upstream "$sglang" --publish "$out" --no-progress ;;
    op-shapes) "$PY" benchmarks/op_shapes.py --publish "$out" ;;
    sglang-step)
      site=$PYTHONPATH
      [[ -d $sglang ]] && site="$sglang:$site"
      PYTHONPATH=$site "$PY" -m sgl_meta.bench --sglang --publish "$out" ;;
    *) echo "publish_results.sh: unknown part $part (bench, upstream, op-shapes, sglang-step)" >&2; exit 2 ;;
  esac
done
