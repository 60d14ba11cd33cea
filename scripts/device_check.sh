#!/usr/bin/env bash
# One call on a GPU machine: check the carried build, run the GPU tests, time.
#
# Build here first (scripts/setup_env.sh), then run this there with the built
# extension carried along (sgl_meta/_C.abi3.so): it runs under that machine's
# own torch and Python, which is also the portability check of the stable-ABI
# + abi3 build. Logs and JSON go to $OUT (or ./device-out). The short tables
# are printed last.
#
#   bash scripts/device_check.sh [tests] [wheel] [micro] [small] [bench] [upstream] [step] [sanitize]   (default: tests micro bench)
#
# `wheel` installs the carried dist/*.whl (built by scripts/check_wheel.py) into
# this machine's Python and runs the smoke test and the whole test suite against
# the installed wheel, from a copy of tests/ outside the source tree.
#
# `upstream` runs the benchmark beside SGLang 0.5.23's own kernels
# (scripts/upstream_bench.sh: installs the wheels carried in .whl/ into /tmp/site,
# then python -m sgl_meta.bench --preset none --upstream /tmp/site); writes
# $OUT/upstream.json and $OUT/upstream.md.
#
# `step` runs SGLang's own decode step with the plugin off and on (python -m
# sgl_meta.bench --sglang; SGLang 0.5.23 importable, e.g. from a site dir on
# PYTHONPATH; STEP_ARGS adds options, e.g. "--backend fa3 fa3_page1"); writes
# $OUT/sglang_step.json and $OUT/sglang_step.md.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
OUT=${OUT:-device-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
PY=${PYTHON:-python3}
# Every step measures or tests the GPU: without one, fail now instead of
# reporting CPU numbers or skipped GPU tests as a pass. Test runs below fail
# a GPU test that cannot run (tests/conftest.py).
export SGLMETA_REQUIRE_GPU=1
if ! $PY -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "device_check: FAIL: $PY sees no CUDA device (torch.cuda.is_available() is not True)"
  exit 2
fi
steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(tests micro bench)
status=0
summary=()

run() {  # run NAME CMD... : log to $OUT/NAME.log, remember the exit status
  local name=$1; shift
  echo "=== $name: $*"
  "$@" 2>&1 | tee "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  summary+=("$(printf '%-10s rc=%s' "$name" "$rc")")
  [[ $rc -ne 0 ]] && status=1
  return 0
}

nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv | tee "$OUT/gpu.txt"
$PY -c "import sys, torch, sgl_meta; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'sgl_meta', sgl_meta.__version__, sgl_meta.__file__); from sgl_meta import _fast; print('eager fast path (DLPack C exchange API):', _fast.available)" | tee -a "$OUT/gpu.txt"

for step in "${steps[@]}"; do
  case $step in
    tests) run tests bash scripts/gpu_tests.sh ;;  # one process per file (see there)
    wheel) run wheel bash -c '
        set -e
        '"$PY"' -m pip install -q --no-index --no-deps --force-reinstall dist/sgl_meta-*.whl
        rm -rf /tmp/wheel-tests && cp -r tests /tmp/wheel-tests
        cd /tmp && env -u PYTHONPATH '"$PY"' -I '"$PWD"'/scripts/wheel_smoke.py --expect-cuda
        cd /tmp && env -u PYTHONPATH '"$PY"' -m pytest /tmp/wheel-tests -q -p no:cacheprovider -x' ;;
    micro) run micro "$PY" benchmarks/op_shapes.py --json "$OUT/op_shapes.json" ;;
    small)  # SMALL_ARGS="--upstream" adds SGLang 0.5.23's kernels (installed sglang)
      read -r -a small_args <<< "${SMALL_ARGS:-}"
      run small "$PY" benchmarks/small_sizes.py --json "$OUT/small_sizes.json" "${small_args[@]}" ;;
    bench) run bench "$PY" -m sgl_meta.bench --json "$OUT/bench.json" --plot "$OUT/bench.png" ;;
    upstream) run upstream bash scripts/upstream_bench.sh "$OUT" ;;
    step)
      read -r -a step_args <<< "${STEP_ARGS:-}"
      run step "$PY" -m sgl_meta.bench --sglang --json "$OUT/sglang_step.json" --markdown "$OUT/sglang_step.md" \
        "${step_args[@]}" ;;
    sanitize) run sanitize bash scripts/sanitize.sh ;;
    *) echo "unknown step $step"; status=1 ;;
  esac
done

echo; echo "=== summary"; printf '%s\n' "${summary[@]}"
for step in "${steps[@]}"; do
  [[ -f "$OUT/$step.log" ]] && { echo "--- $step (tail)"; tail -n 25 "$OUT/$step.log"; }
done
exit $status
