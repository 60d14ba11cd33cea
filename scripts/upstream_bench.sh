#!/usr/bin/env bash
# The benchmark beside SGLang 0.5.23's own kernels, on a machine with no package
# index (the GPU machine): install the wheels carried in .whl/ into a --target
# dir, then run `python -m sgl_meta.bench --upstream` on it.
#
#   bash scripts/upstream_bench.sh [OUTDIR]     (default $OUT, else device-out)
#
# .whl/ holds sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl,
# apache_tvm_ffi-0.1.11-cp312-abi3-*.whl and msgspec-*-cp312-*.whl, fetched with
# `pip download --no-deps -d .whl sglang==0.5.23` and `pip download --no-deps
# --only-binary=:all: --python-version 3.12 -d .whl apache-tvm-ffi==0.1.11 msgspec`.
# The sglang wheel is tagged cp311 but what
# the bench reads from it is Python and CUDA source, so pip is told to take it as
# if for CPython 3.11 on manylinux_2_34 (`--python-version/--abi/--platform` need
# `--only-binary=:all:` and `--target`). tvm-ffi and msgspec are this Python's.
# Writes OUTDIR/upstream.json and OUTDIR/upstream.md (also printed); UPSTREAM_ARGS
# adds bench options (e.g. --no-cold-start).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${1:-${OUT:-device-out}}
site=${SGLMETA_UPSTREAM_SITE:-/tmp/site}
PY=${PYTHON:-python3}
mkdir -p "$out"
pipt=("$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site")
rm -rf "$site"
"${pipt[@]}" --python-version 3.11 --implementation cp --abi cp311 --platform manylinux_2_34_x86_64 \
  --only-binary=:all: .whl/sglang-0.5.23-*.whl
shopt -s nullglob
extra=(.whl/apache_tvm_ffi-0.1.11-*.whl .whl/msgspec-*.whl)
[[ ${#extra[@]} -gt 0 ]] && "${pipt[@]}" "${extra[@]}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}:$site" PYTHONUNBUFFERED=1
read -r -a bench_args <<< "${UPSTREAM_ARGS:-}"
status=0
"$PY" -m sgl_meta.bench --preset none --upstream "$site" \
  --json "$out/upstream.json" --markdown "$out/upstream.md" --no-progress "${bench_args[@]}" || status=$?
cat "$out/upstream.md" 2>/dev/null || true
exit $status
